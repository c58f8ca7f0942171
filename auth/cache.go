package auth

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// ttlCache is a bounded LRU whose entries expire: the one place golang-lru is used.
type ttlCache[K comparable, V any] struct {
	lru *expirable.LRU[K, V]
}

// minTTL is the shortest TTL cached at all: expirable sweeps every ttl/100 on a
// ticker, which panics below 100ns and spins below this.
const minTTL = time.Millisecond

// newTTLCache holds up to size entries for ttl each; size 0, or a ttl shorter
// than minTTL (nothing would be believed long enough to matter), disables it.
func newTTLCache[K comparable, V any](size int, ttl time.Duration) *ttlCache[K, V] {
	if size <= 0 || (ttl > 0 && ttl < minTTL) {
		return nil
	}
	return &ttlCache[K, V]{lru: expirable.NewLRU[K, V](size, nil, ttl)}
}

func (c *ttlCache[K, V]) Get(k K) (V, bool) {
	if c == nil {
		var zero V
		return zero, false
	}
	return c.lru.Get(k)
}

func (c *ttlCache[K, V]) Add(k K, v V) {
	if c != nil {
		c.lru.Add(k, v)
	}
}

func (c *ttlCache[K, V]) Remove(k K) {
	if c != nil {
		c.lru.Remove(k)
	}
}

func (c *ttlCache[K, V]) Len() int {
	if c == nil {
		return 0
	}
	return c.lru.Len()
}
