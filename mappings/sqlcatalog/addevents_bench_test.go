package sqlcatalog

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// BenchmarkAddEvents: the node's group commit of read events (batches of
// 256 over 1,000 objects, and over 200,000 as random gets over a large
// catalog make them, on a log of 200,000 events), as AddEvents writes them
// and, in the same loop, into a catalog whose log is indexed by PID event by
// event, as through schema 10 (the baseline, "before"): ns/event, and
// x-before the ratio of their rates.
//
//	go test -run '^$' -bench BenchmarkAddEvents -benchtime 50000x ./mappings/sqlcatalog/
func BenchmarkAddEvents(b *testing.B) {
	for _, objects := range []int{1000, 200_000} {
		b.Run(fmt.Sprintf("objects=%d", objects), func(b *testing.B) { benchAddEvents(b, objects) })
	}
}

func benchAddEvents(b *testing.B, objects int) {
	open := func(name string) *Catalog {
		c, err := OpenSQLite(filepath.Join(b.TempDir(), name), WithNodeID(sqlcatalogtest.NodeID))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	c, before := open("after.db"), open("before.db")
	// The index of schema 10, and a mark never reached.
	before.pidIndexEvery = math.MaxInt
	if _, err := before.db.Exec(`CREATE INDEX events_pid ON events (pid, date_logged, entry_id)`); err != nil {
		b.Fatal(err)
	}
	const batch = 256
	es := make([]adapter.LogEntry, batch)
	next := 0
	fill := func() []adapter.LogEntry {
		for j := range es {
			es[j] = adapter.LogEntry{Identifier: fmt.Sprintf("bench-event-%06d", next*7919%objects),
				IPAddress: "127.0.0.1", UserAgent: "Go-http-client/1.1", Subject: "public", Event: adapter.EventRead}
			next++
		}
		return es
	}
	for range 200_000 / batch {
		for _, c := range []*Catalog{c, before} {
			if err := c.AddEvents(b.Context(), fill()); err != nil {
				b.Fatal(err)
			}
		}
	}
	var afterT, beforeT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += 2 * batch {
		t0 := time.Now()
		if err := c.AddEvents(b.Context(), fill()); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := before.AddEvents(b.Context(), fill()); err != nil {
			b.Fatal(err)
		}
		afterT, beforeT = afterT+t1.Sub(t0), beforeT+time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(afterT.Nanoseconds())/float64(b.N/2), "ns/event")
	b.ReportMetric(float64(beforeT.Nanoseconds())/float64(b.N/2), "before-ns/event")
	b.ReportMetric(beforeT.Seconds()/afterT.Seconds(), "x-before")
}
