package sqlcatalog

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// BenchmarkAddEvents: the node's group commit of read events (batches of
// 256 over 1,000 objects, on a log of 200,000 events), as AddEvents writes
// them (commits that do not wait for the disk) and, in the same loop, as a
// durable write would (the baseline): ns/event, and x-durable the ratio of
// their rates.
//
//	go test -run '^$' -bench BenchmarkAddEvents -benchtime 50000x ./mappings/sqlcatalog/
func BenchmarkAddEvents(b *testing.B) {
	c, err := OpenSQLite(filepath.Join(b.TempDir(), "bench.db"), WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const batch, objects = 256, 1000
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
		if err := c.AddEvents(b.Context(), fill()); err != nil {
			b.Fatal(err)
		}
	}
	durable := func() error {
		es := fill()
		return c.write(b.Context(), func(context.Context, *sql.Tx) (*change, error) { return &change{logged: es}, nil })
	}
	var lazyT, durableT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += 2 * batch {
		t0 := time.Now()
		if err := c.AddEvents(b.Context(), fill()); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := durable(); err != nil {
			b.Fatal(err)
		}
		lazyT, durableT = lazyT+t1.Sub(t0), durableT+time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(lazyT.Nanoseconds())/float64(b.N/2), "ns/event")
	b.ReportMetric(float64(durableT.Nanoseconds())/float64(b.N/2), "durable-ns/event")
	b.ReportMetric(durableT.Seconds()/lazyT.Seconds(), "x-durable")
}
