package fsblobs

import (
	"bytes"
	"math"
	"strings"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// MemoryObjectMax is the largest object whose bytes WithMemory keeps: below
// the size from which the REST layer sends files with sendfile.
const MemoryObjectMax = 16 << 10

// entryOverhead is what an entry costs besides its key and bytes (the LRU's
// list element and map slot, the slice header), counted against the budget.
const entryOverhead = 128

// seenKeys is how many keys read once, and not kept, memory remembers: a key
// read again while among them is kept.
const seenKeys = 8192

// Option configures a Store.
type Option func(*Store)

// WithMemory keeps the bytes of objects of at most MemoryObjectMax bytes in
// memory, up to budget bytes in all (least recently read out first; 0 keeps
// none). A get of a small object is mostly opening, reading and closing its
// file; from memory it makes no system call. An object is kept at its second
// read among the last seenKeys objects read, so that reads spread over more
// objects than fit (a harvester's) do not pay for keeping what is not read
// again. An entry is never stale: Put and Delete forget their key, and bytes
// read while either ran are not kept.
func WithMemory(budget int64) Option {
	return func(s *Store) {
		if budget > 0 {
			s.mem = newMemory(budget)
		}
	}
}

// memory is the small objects' bytes by key, bounded by the bytes it holds.
type memory struct {
	mu     sync.Mutex
	kept   *simplelru.LRU[string, []byte]
	seen   *simplelru.LRU[string, struct{}]
	used   int64
	budget int64
	// forgets counts forget calls: bytes read while one ran (a Put replacing
	// the key, a Delete) may be the old ones, and are not kept.
	forgets      uint64
	hits, misses uint64
}

// MemoryStats tells the bytes WithMemory holds (with their keys and
// overhead), and how many Gets it has answered and not.
func (s *Store) MemoryStats() (kept int64, hits, misses uint64) {
	if s.mem == nil {
		return 0, 0, 0
	}
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	return s.mem.used, s.mem.hits, s.mem.misses
}

func newMemory(budget int64) *memory {
	m := &memory{budget: budget}
	// Bounded by bytes (put evicts), not by count.
	m.kept, _ = simplelru.NewLRU(math.MaxInt32, func(key string, b []byte) { m.used -= cost(key, b) })
	m.seen, _ = simplelru.NewLRU[string, struct{}](seenKeys, nil)
	return m
}

func cost(key string, b []byte) int64 { return int64(len(key)+len(b)) + entryOverhead }

// lookup returns key's bytes if kept; otherwise whether to keep them once
// read (the key was read recently), and the mark to keep them with.
func (m *memory) lookup(key string) (b []byte, hit, keep bool, mark uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.kept.Get(key); ok {
		m.hits++
		return b, true, false, 0
	}
	m.misses++
	if m.seen.Remove(key) {
		return nil, false, true, m.forgets
	}
	// Keys are copied: one may be a slice of a larger string (the catalog's
	// record), which would stay in memory as long as the key.
	m.seen.Add(strings.Clone(key), struct{}{})
	return nil, false, false, 0
}

// put keeps b under key unless something was forgotten since mark.
func (m *memory) put(key string, b []byte, mark uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forgets != mark || m.kept.Contains(key) {
		return
	}
	m.kept.Add(strings.Clone(key), b)
	m.used += cost(key, b)
	for m.used > m.budget {
		m.kept.RemoveOldest()
	}
}

func (m *memory) forget(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgets++
	m.kept.Remove(key)
}

// inMemory reads kept bytes; it seeks, so ranges work.
type inMemory struct{ *bytes.Reader }

func (inMemory) Close() error { return nil }
