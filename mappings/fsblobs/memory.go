package fsblobs

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/VictoriaMetrics/fastcache"
)

// MemoryObjectMax is the largest object whose bytes WithMemory keeps: below
// the size from which the REST layer sends files with sendfile.
const MemoryObjectMax = 16 << 10

// seenKeys is how many keys read once, and not kept, memory remembers: a key
// read again while among them is kept.
const seenKeys = 8192

// Option configures a Store.
type Option func(*Store)

// WithMemory keeps the bytes of objects of at most MemoryObjectMax bytes in
// memory, up to budget bytes in all (rounded up to 32 MiB, fastcache's
// least; the oldest kept go first; 0 keeps none). A get of a small object is
// mostly opening, reading and closing its file; from memory it makes no
// system call. An object is kept at its second read among the last seenKeys
// objects read, so that reads spread over more objects than fit (a
// harvester's) do not pay for keeping what is not read again. An entry is
// never stale: Put and Delete forget their key, and bytes read while either
// ran are not kept.
//
// Neither the bytes (fastcache, outside the Go heap) nor the keys read once
// (hashes) hold a pointer: the garbage collector, which marks every live
// object on every cycle, does not see the tens of thousands of entries of a
// full memory (half of its marking work after random reads, in a simple
// LRU of strings and slices).
func WithMemory(budget int64) Option {
	return func(s *Store) {
		if budget > 0 {
			s.mem = newMemory(budget)
		}
	}
}

// memory is the small objects' bytes by key, bounded by the bytes it holds.
type memory struct {
	kept *fastcache.Cache
	seed maphash.Seed

	mu sync.Mutex
	// seen holds the hashes of the last seenKeys keys read and not kept, in
	// the order of ring (next is the oldest); a key's hash maps to its slot.
	// A collision keeps an object at its first read: harmless.
	seen map[uint64]int32
	ring [seenKeys]uint64
	next int32
	// forgets counts forget calls: bytes read while one ran (a Put replacing
	// the key, a Delete) may be the old ones, and are not kept.
	forgets      uint64
	hits, misses uint64
}

// MemoryStats tells the bytes WithMemory holds, and how many Gets it has
// answered and not.
func (s *Store) MemoryStats() (kept int64, hits, misses uint64) {
	if s.mem == nil {
		return 0, 0, 0
	}
	var st fastcache.Stats
	s.mem.kept.UpdateStats(&st)
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	return int64(st.BytesSize), s.mem.hits, s.mem.misses
}

func newMemory(budget int64) *memory {
	return &memory{kept: fastcache.New(int(min(budget, 1<<40))), seed: maphash.MakeSeed(),
		seen: make(map[uint64]int32, seenKeys)}
}

// lookup tells whether key's bytes are kept; otherwise whether to keep them
// once read (the key was read recently), and the mark to keep them with.
// A hit's bytes are in buf, which it may grow.
func (m *memory) lookup(key string, buf *[]byte) (hit, keep bool, mark uint64) {
	*buf, hit = m.kept.HasGet((*buf)[:0], []byte(key))
	m.mu.Lock()
	defer m.mu.Unlock()
	if hit {
		m.hits++
		return true, false, 0
	}
	m.misses++
	h := maphash.String(m.seed, key)
	if _, ok := m.seen[h]; ok {
		delete(m.seen, h) // its slot in ring stays, to be reused in turn
		return false, true, m.forgets
	}
	if old := m.ring[m.next]; m.seen[old] == m.next {
		delete(m.seen, old)
	}
	m.ring[m.next], m.seen[h] = h, m.next
	m.next = (m.next + 1) % seenKeys
	return false, false, 0
}

// put keeps b under key unless something was forgotten since mark.
func (m *memory) put(key string, b []byte, mark uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forgets == mark {
		m.kept.Set([]byte(key), b)
	}
}

func (m *memory) forget(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgets++
	m.kept.Del([]byte(key))
}

// close gives back the memory, which the garbage collector does not see.
func (m *memory) close() {
	if m != nil {
		m.kept.Reset()
	}
}

// smallBufs recycles the buffers that small objects are read into, given
// back by Close: a get of a small object allocates nothing for its bytes.
var smallBufs = sync.Pool{New: func() any { b := make([]byte, 0, MemoryObjectMax); return &b }}

// inMemory reads a small object's bytes; it seeks, so ranges work.
type inMemory struct {
	bytes.Reader
	buf *[]byte // from smallBufs, back there at Close
}

func newInMemory(buf *[]byte) *inMemory {
	m := &inMemory{buf: buf}
	m.Reset(*buf)
	return m
}

func (m *inMemory) Close() error {
	if m.buf != nil {
		m.Reset(nil)
		smallBufs.Put(m.buf)
		m.buf = nil
	}
	return nil
}
