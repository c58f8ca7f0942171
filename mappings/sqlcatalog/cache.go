package sqlcatalog

import (
	"container/list"
	"sync"
)

// ringSize is how many recent writes the cache remembers for validating what
// readers computed while they ran.
const ringSize = 1024

// ringRows is the most object rows of a write the ring keeps: a larger write
// (a batch of an import or a harvest) is kept as having changed everything,
// so that the ring holds a few hundred thousand rows at most, not every row
// of the last ringSize batches.
const ringRows = 256

// cache holds, per filter, the total and the cursors of its list (see the
// package comment). Writes are logged into ring before they commit (begin) and
// applied to the cached filters after (end); seq numbers writes.
type cache struct {
	mu      sync.Mutex
	next    uint64 // seq of the next write
	applied uint64 // writes before this seq are applied (or were rolled back)
	ring    [ringSize]*change

	maxFilters, maxCursors int
	states                 map[filter]*pageState
	lru                    *list.List // of *pageState, most recently used first
	tick                   uint64
}

// pageState is what the cache knows of one filter's list.
type pageState struct {
	f        filter
	elem     *list.Element
	total    int
	hasTotal bool
	// cursors maps a position p to the sort key of the row at p-1: the rows from
	// position p on are those whose key is greater.
	cursors map[int]*cursor
}

type cursor struct {
	key  sortKey
	used uint64
}

// posKey is a cursor a reader found.
type posKey struct {
	pos int
	key sortKey
}

func newCache(maxFilters, maxCursors int) *cache {
	if maxFilters <= 0 || maxCursors <= 0 {
		maxFilters, maxCursors = 0, 0
	}
	return &cache{maxFilters: maxFilters, maxCursors: maxCursors, states: map[filter]*pageState{}, lru: list.New()}
}

// begin logs a write about to commit and returns its seq.
func (c *cache) begin(ch *change) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := c.next
	// Only what effect reads: the events and records a write appended and
	// created are not kept for ringSize writes more.
	kept := &change{rows: ch.rows, events: ch.events}
	if len(ch.rows) > ringRows {
		kept = &change{wide: true}
	}
	c.ring[seq%ringSize] = kept
	c.next++
	return seq
}

// end applies a logged write once its commit has returned. When the outcome of
// the commit is unknown, everything cached is dropped.
func (c *cache) end(seq uint64, ch *change, committed, uncertain bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applied = seq + 1
	switch {
	case uncertain:
		c.states = map[filter]*pageState{}
		c.lru.Init()
	case committed:
		for _, st := range c.states {
			st.apply(st.f.effect(ch))
		}
	}
}

func (st *pageState) apply(e effect) {
	if e.unknown {
		st.hasTotal = false
	} else {
		st.total += e.delta
	}
	if e.moved {
		for p, cur := range st.cursors {
			if !cur.key.less(e.low) {
				delete(st.cursors, p)
			}
		}
	}
}

// lookup returns the seq from which a reader must validate what it stores, the
// nearest cursor at or below start (pos 0 and no key when none), and the total
// if known.
func (c *cache) lookup(f filter, start int) (from uint64, pos int, key *sortKey, total int, hasTotal bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from = c.applied
	st := c.states[f]
	if st == nil {
		return from, 0, nil, 0, false
	}
	c.lru.MoveToFront(st.elem)
	c.tick++
	var best *cursor
	for p, cur := range st.cursors {
		if p <= start && p > pos {
			pos, best = p, cur
		}
	}
	if best != nil {
		best.used = c.tick
		k := best.key
		key = &k
	}
	return from, pos, key, st.total, st.hasTotal
}

// store keeps the cursors and the total (when not nil) a reader computed from a
// snapshot no older than write from, dropping those a write since then may have
// changed.
func (c *cache) store(f filter, from uint64, curs []posKey, total *int) {
	if c.maxFilters == 0 || (len(curs) == 0 && total == nil) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next-from > ringSize {
		return // too many writes since: the ring no longer tells what they did
	}
	for seq := from; seq < c.next; seq++ {
		e := effect{moved: true, low: lowest, unknown: true}
		if ch := c.ring[seq%ringSize]; !ch.wide {
			e = f.effect(ch)
		}
		if e.unknown || e.delta != 0 {
			total = nil
		}
		if e.moved {
			curs = dropFrom(curs, e.low)
		}
	}
	if len(curs) == 0 && total == nil {
		return
	}
	st := c.states[f]
	if st == nil {
		st = &pageState{f: f, cursors: map[int]*cursor{}}
		st.elem = c.lru.PushFront(st)
		c.states[f] = st
		if c.lru.Len() > c.maxFilters {
			old := c.lru.Remove(c.lru.Back()).(*pageState)
			delete(c.states, old.f)
		}
	}
	if total != nil {
		st.total, st.hasTotal = *total, true
	}
	for _, pk := range curs {
		if pk.pos == 0 {
			continue
		}
		c.tick++
		st.cursors[pk.pos] = &cursor{key: pk.key, used: c.tick}
	}
	for len(st.cursors) > c.maxCursors {
		// Forget the least recently used cursor. Scanning is fine: this runs once
		// per page stored beyond the limit.
		lp, lu := -1, ^uint64(0)
		for p, cur := range st.cursors {
			if cur.used < lu {
				lp, lu = p, cur.used
			}
		}
		delete(st.cursors, lp)
	}
}

// dropFrom removes the cursors whose key is at or after low.
func dropFrom(curs []posKey, low sortKey) []posKey {
	out := curs[:0]
	for _, pk := range curs {
		if pk.key.less(low) {
			out = append(out, pk)
		}
	}
	return out
}

// reset forgets everything cached.
func (c *cache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.states = map[filter]*pageState{}
	c.lru.Init()
}
