package rest

import (
	"slices"
	"sync"

	"github.com/d1bridge/d1bridge/adapter"
)

// speculation chooses the checksums an object is hashed with while it
// arrives before its system metadata (the DataONE Python client's order):
// the algorithms the system metadata of the node's last speculationWindow
// creates and updates named, so that clients that all use one algorithm cost
// one hash rather than the three of adapter.SpeculativeAlgorithms (MD5 alone
// holds a 1 GiB create on two cores to half a WebDAV PUT's speed). Until it
// has seen that many it hashes all three. A guess that misses costs a second
// pass over the staged bytes (the node's verify), never a refusal.
type speculation struct {
	mu     sync.Mutex
	recent [speculationWindow]string
	seen   int
}

const speculationWindow = 16

// algorithms are those to hash an object with before its system metadata is read.
func (s *speculation) algorithms() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen < speculationWindow {
		return adapter.SpeculativeAlgorithms
	}
	var algs []string
	for _, a := range s.recent {
		if !slices.Contains(algs, a) {
			algs = append(algs, a)
		}
	}
	return algs
}

// observe notes the algorithm a create's or update's system metadata named.
func (s *speculation) observe(algorithm string) {
	alg, ok := adapter.CanonicalAlgorithm(algorithm)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent[s.seen%speculationWindow] = alg
	s.seen++
}
