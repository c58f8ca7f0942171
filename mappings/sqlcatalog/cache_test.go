package sqlcatalog

import (
	"fmt"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestRingKeepsEventGroups: of a batch of events, the listing cache's ring of
// recent writes keeps a group per type and date, not the events (a read-heavy
// node once held the last 1,024 batches' events there, over 100 MB after a
// few hundred thousand reads, which the garbage collector marked on every
// cycle), and the cached totals of event filters stay exact.
func TestRingKeepsEventGroups(t *testing.T) {
	c := sqliteOpener()(t).(*Catalog)
	ctx := t.Context()
	dated := adapter.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	filters := []adapter.LogQuery{
		{Count: 1},
		{Event: adapter.EventRead, Count: 1},
		{Event: adapter.EventCreate, Count: 1},
		{ToDate: adapter.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)), Count: 1},
		{FromDate: adapter.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)), Event: adapter.EventRead, Count: 1},
	}
	total := func(q adapter.LogQuery) int {
		l, err := c.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return l.Total
	}
	for _, q := range filters {
		total(q) // cached before the writes, so that they are applied to it
	}
	var es []adapter.LogEntry
	for i := range 1000 {
		e := adapter.LogEntry{Identifier: fmt.Sprintf("p%d", i), Event: adapter.EventRead, IPAddress: "127.0.0.1", Subject: "public"}
		switch {
		case i%10 == 0:
			e.Event = adapter.EventCreate
		case i%100 == 1:
			e.DateLogged = dated
		}
		es = append(es, e)
	}
	if err := c.AddEvents(ctx, es); err != nil {
		t.Fatal(err)
	}
	c.cache.mu.Lock()
	kept := c.cache.ring[(c.cache.next-1)%ringSize]
	c.cache.mu.Unlock()
	if kept.logged != nil || kept.created != nil {
		t.Errorf("the ring keeps the events appended (%d) and records created (%d)", len(kept.logged), len(kept.created))
	}
	// Undated events share the date of the batch: one group of reads, one of
	// creates, and the reads dated in January.
	n := 0
	for _, g := range kept.events {
		n += g.n
	}
	if len(kept.events) > 3 || n != 1000 {
		t.Errorf("the ring keeps %d groups of %d events, want at most 3 of 1000: %+v", len(kept.events), n, kept.events)
	}
	for _, q := range filters {
		got := total(q)
		var want int
		for _, e := range es {
			dated := !e.DateLogged.IsZero()
			switch {
			case q.Event != "" && e.Event != q.Event:
			case !q.ToDate.IsZero() && !dated:
			case !q.FromDate.IsZero() && dated:
			default:
				want++
			}
		}
		if got != want {
			t.Errorf("total of %+v after the batch: %d, want %d", q, got, want)
		}
	}
}

// TestRingKeepsWideWritesAsEverything: a write of more than ringRows rows
// (an import's batch) is kept as having changed every list, so that what a
// reader computed while it ran is not stored, where a narrow write that
// changed no row of the list lets it be.
func TestRingKeepsWideWritesAsEverything(t *testing.T) {
	for _, rows := range []int{ringRows, ringRows + 1} {
		c := newCache(4, 4)
		f := listFilter{format: "text/csv"}
		from, _, _, _, _ := c.lookup(f, 0)
		// Rows of another format: the list's total does not change.
		ch := &change{}
		for i := range rows {
			ch.rows = append(ch.rows, rowChange{after: &rowInfo{key: sortKey{t: int64(i), id: int64(i)}, pid: fmt.Sprint(i), format: "text/plain"}})
		}
		seq := c.begin(ch)
		c.end(seq, ch, true, false)
		if kept := c.ring[seq%ringSize]; kept.wide != (rows > ringRows) || (kept.wide && kept.rows != nil) {
			t.Errorf("%d rows: the ring keeps wide=%v with %d rows", rows, kept.wide, len(kept.rows))
		}
		total := 7
		c.store(f, from, nil, &total)
		_, _, _, got, has := c.lookup(f, 0)
		if wantHas := rows <= ringRows; has != wantHas || (has && got != 7) {
			t.Errorf("%d rows: after the write the cache has total %d (%v), want it kept: %v", rows, got, has, wantHas)
		}
	}
}
