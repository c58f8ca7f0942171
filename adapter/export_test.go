package adapter

// HashChunk is the Hasher's chunk size, for tests at its edges.
const HashChunk = hashChunk
