package adapter

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"runtime"
	"strings"
	"sync"
)

// ChecksumAlgorithms are the algorithms this node computes, by their Library of
// Congress labels (API.md §10 rule 10).
var ChecksumAlgorithms = []string{"MD5", "SHA-1", "SHA-256", "SHA-384", "SHA-512"}

// SpeculativeAlgorithms are computed when an object arrives before the system
// metadata that names its algorithm: the two every node must support and SHA-256.
// Any other algorithm is verified by reading the staged bytes again.
var SpeculativeAlgorithms = []string{"MD5", "SHA-1", "SHA-256"}

// CanonicalAlgorithm maps the names peers use (SHA1, sha-256, md5) to the label.
func CanonicalAlgorithm(name string) (string, bool) {
	n := strings.ToUpper(strings.ReplaceAll(name, "-", ""))
	for _, a := range ChecksumAlgorithms {
		if strings.ReplaceAll(a, "-", "") == n {
			return a, true
		}
	}
	return "", false
}

// NewHash is a new hash of the canonical algorithm alg (ChecksumAlgorithms);
// nil for another.
func NewHash(alg string) hash.Hash {
	switch alg {
	case "MD5":
		return md5.New()
	case "SHA-1":
		return sha1.New()
	case "SHA-256":
		return sha256.New()
	case "SHA-384":
		return sha512.New384()
	case "SHA-512":
		return sha512.New()
	}
	return nil
}

// Hasher computes several checksums of one stream in one pass.
//
// The digests are computed off the caller's goroutine, one goroutine per
// algorithm, even for one algorithm: Write copies the bytes into a ring of
// hashRing chunks of hashChunk bytes and hands each full chunk to every
// goroutine, which hash it in order; a chunk is reused once all of them are
// done with it. The caller goes on reading and storing while the digests are
// computed (a copy costs a tenth of the fastest hash), so an upload is hashed
// on another core in parallel with its network reads and file writes, and its
// memory is the ring (1 MiB) whatever its size. The goroutines start at the
// first full chunk (a smaller stream is hashed in the caller's goroutine by
// Sums) and end in Sums or Close: defer Close wherever the stream may be
// abandoned (a failed or cancelled upload).
//
// A Hasher is not safe for concurrent use. Sums may be called at any point, and
// writing may go on after it, as with hash.Hash.
type Hasher struct {
	algs []string
	hs   []hash.Hash
	ring [hashRing]*hashSlot // ring[next] is the chunk being filled
	next int
	crew *hashCrew
}

const (
	// hashChunk is the unit handed to the hashing goroutines: large enough that
	// a hand-off costs little next to hashing it (about 200 µs for MD5).
	hashChunk = 256 << 10
	// hashRing is the number of chunks per Hasher: the caller can be that many
	// chunks ahead of the slowest algorithm.
	hashRing = 4
)

// hashBufs recycles chunk buffers between Hashers.
var hashBufs = sync.Pool{New: func() any { return new([hashChunk]byte) }}

// hashSlot is one chunk of the ring. Its bytes and n are the writer's until
// the chunk is sent, then read-only until pending is done.
type hashSlot struct {
	buf     *[hashChunk]byte
	n       int
	sent    bool           // handed to the crew; wait for pending before reuse
	pending sync.WaitGroup // one per algorithm still hashing the chunk
}

// hashCrew is the goroutines of one Hasher, one per algorithm; it holds no
// reference to the Hasher, so that a Hasher dropped without Close can stop it.
type hashCrew struct {
	in     []chan *hashSlot
	done   sync.WaitGroup
	closed sync.Once
}

func startCrew(hs []hash.Hash) *hashCrew {
	c := &hashCrew{in: make([]chan *hashSlot, len(hs))}
	c.done.Add(len(hs))
	for i, h := range hs {
		in := make(chan *hashSlot, hashRing) // never full: the ring has hashRing chunks
		c.in[i] = in
		go func() {
			defer c.done.Done()
			for s := range in {
				h.Write(s.buf[:s.n])
				s.pending.Done()
			}
		}()
	}
	return c
}

// close tells the goroutines to end once they have hashed what they were sent.
func (c *hashCrew) close() {
	c.closed.Do(func() {
		for _, in := range c.in {
			close(in)
		}
	})
}

// stop closes c and waits for its goroutines to end.
func (c *hashCrew) stop() {
	c.close()
	c.done.Wait()
}

// NewHasher hashes with the named algorithms; unknown and repeated names are skipped.
func NewHasher(algorithms []string) *Hasher {
	h := &Hasher{}
	for _, name := range algorithms {
		alg, ok := CanonicalAlgorithm(name)
		if !ok || h.has(alg) {
			continue
		}
		h.algs, h.hs = append(h.algs, alg), append(h.hs, NewHash(alg))
	}
	if len(h.hs) > 0 {
		for i := range h.ring {
			h.ring[i] = &hashSlot{}
		}
	}
	return h
}

func (h *Hasher) has(alg string) bool {
	for _, a := range h.algs {
		if a == alg {
			return true
		}
	}
	return false
}

// Write never fails.
func (h *Hasher) Write(p []byte) (int, error) {
	n := len(p)
	if len(h.hs) == 0 {
		return n, nil
	}
	for len(p) > 0 {
		s := h.ring[h.next]
		if s.sent {
			s.pending.Wait()
			s.sent, s.n = false, 0
		}
		if s.buf == nil {
			s.buf = hashBufs.Get().(*[hashChunk]byte)
		}
		k := copy(s.buf[s.n:], p)
		s.n += k
		p = p[k:]
		if s.n == hashChunk {
			h.send(s)
		}
	}
	return n, nil
}

// send hands the chunk s, ring[next], to every algorithm's goroutine.
func (h *Hasher) send(s *hashSlot) {
	if h.crew == nil {
		h.crew = startCrew(h.hs)
		// A Hasher dropped without Sums or Close stops its goroutines when
		// it is collected; Close is what stops them at once.
		runtime.AddCleanup(h, (*hashCrew).close, h.crew)
	}
	s.sent = true
	s.pending.Add(len(h.hs))
	for _, in := range h.crew.in {
		in <- s
	}
	h.next = (h.next + 1) % hashRing
}

// drain brings every digest up to date with what was written, stops the
// goroutines and gives the chunk buffers back.
func (h *Hasher) drain() {
	if len(h.hs) == 0 {
		return
	}
	if s := h.ring[h.next]; !s.sent && s.n > 0 {
		if h.crew == nil { // less than a chunk in all: no goroutines for that
			for _, hh := range h.hs {
				hh.Write(s.buf[:s.n])
			}
			s.n = 0
		} else {
			h.send(s)
		}
	}
	for _, s := range h.ring {
		if s.sent {
			s.pending.Wait()
			s.sent, s.n = false, 0
		}
		if s.buf != nil {
			hashBufs.Put(s.buf)
			s.buf = nil
		}
	}
	h.next = 0
	if h.crew != nil {
		h.crew.stop()
		h.crew = nil
	}
}

// Close stops the hashing goroutines and releases the buffers; call it (or
// Sums) when a stream is abandoned. It may be called any number of times, and
// the Hasher stays usable. Close never fails.
func (h *Hasher) Close() error {
	h.drain()
	return nil
}

// Sums returns the lower-case hex digests by algorithm label of what was
// written so far. It stops the hashing goroutines, as Close does.
func (h *Hasher) Sums() map[string]string {
	h.drain()
	m := make(map[string]string, len(h.algs))
	for i, a := range h.algs {
		m[a] = hex.EncodeToString(h.hs[i].Sum(nil))
	}
	return m
}

// ChecksumOf looks an algorithm up in sums, whatever name the peer used for it.
func ChecksumOf(sums map[string]string, algorithm string) (string, bool) {
	alg, ok := CanonicalAlgorithm(algorithm)
	if !ok {
		return "", false
	}
	v, ok := sums[alg]
	return v, ok
}
