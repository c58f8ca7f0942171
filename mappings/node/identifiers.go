package node

// Identifiers is a third-party identifier service (DataCite) that mints DOIs
// and holds their metadata.
type Identifiers interface{}
