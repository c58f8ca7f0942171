package sqlcatalog

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// bulkLoad inserts objects without the chain checks, in one transaction, for
// building large fixtures.
func (c *Catalog) bulkLoad(ctx context.Context, sms []*adapter.SystemMetadata) error {
	err := c.write(ctx, func(tx *sql.Tx) (*change, error) {
		for _, sm := range sms {
			if err := c.insertRow(ctx, tx, &stored{meta: sm, blobKey: sm.Identifier}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	c.cache.reset()
	return err
}

// bulkEvents appends n events, one every 10 ms over 9 PIDs in 10, in one
// transaction.
func (c *Catalog) bulkEvents(ctx context.Context, n int) error {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	err := c.write(ctx, func(tx *sql.Tx) (*change, error) {
		st, err := tx.PrepareContext(ctx, c.d.q(`INSERT INTO events
			(pid, ip, user_agent, subject, event, date_logged, node_id) VALUES (?, ?, ?, ?, ?, ?, ?)`))
		if err != nil {
			return nil, err
		}
		defer st.Close()
		events := []string{adapter.EventRead, adapter.EventRead, adapter.EventRead, adapter.EventCreate}
		for i := range n {
			if _, err := st.ExecContext(ctx, fmt.Sprintf("obj-%07d", i%200000), "10.0.0.1", "bench/1", "public",
				events[i%len(events)], t0+int64(i/3)*10, sqlcatalogtest.NodeID); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	c.cache.reset()
	return err
}

// benchObjects builds a catalog of n objects: one new date every 3 objects
// (every object the same date when tied), three formats, every third object
// public.
func benchObjects(b *testing.B, n int, tied bool) *Catalog {
	b.Helper()
	c, err := OpenSQLite(filepath.Join(b.TempDir(), "bench.db"), WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	start := time.Now()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	formats := []string{"text/plain", "text/csv", "application/json"}
	public := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	const batch = 20000
	for i := 0; i < n; i += batch {
		var sms []*adapter.SystemMetadata
		for j := i; j < min(i+batch, n); j++ {
			date := t0.Add(time.Duration(j/3) * time.Second)
			if tied {
				date = t0
			}
			sm := sqlcatalogtest.SM(fmt.Sprintf("obj-%07d", j), adapter.NewTime(date))
			sm.FormatID = formats[j%3]
			if j%3 == 0 {
				sm.AccessPolicy = public
			}
			sms = append(sms, sm)
		}
		if err := c.bulkLoad(b.Context(), sms); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d objects in %v", n, time.Since(start).Round(time.Millisecond))
	return c
}

// benchPages runs the paging benchmarks of one list.
func benchPages(b *testing.B, c *Catalog, n, mid int, list func(start, count int) (int, error)) {
	const count = 1000
	page := func(b *testing.B, start int) {
		got, err := list(start, count)
		if err != nil {
			b.Fatal(err)
		}
		if got != min(count, n-start) {
			b.Fatalf("page at %d has %d entries", start, got)
		}
	}
	for _, start := range []int{0, mid} {
		b.Run(fmt.Sprintf("start=%d", start), func(b *testing.B) {
			page(b, start) // the first request at a start pays once for the skip
			b.ResetTimer()
			for b.Loop() {
				page(b, start)
			}
		})
		b.Run(fmt.Sprintf("start=%d/cold", start), func(b *testing.B) {
			for b.Loop() {
				c.cache.reset() // count, skip and page on every request
				page(b, start)
			}
		})
	}
	b.Run("harvest", func(b *testing.B) {
		pages := 0
		for b.Loop() {
			c.cache.reset()
			for s := 0; s < n; s += count {
				page(b, s)
				pages++
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
	})
}

// BenchmarkList: listObjects over 200,000 objects, pages of 1,000.
func BenchmarkList(b *testing.B) {
	const n = 200000
	c := benchObjects(b, n, false)
	ctx := b.Context()
	b.Run("all", func(b *testing.B) {
		benchPages(b, c, n, n/2, func(start, count int) (int, error) {
			l, err := c.List(ctx, adapter.ListQuery{Start: start, Count: count})
			if err != nil {
				return 0, err
			}
			if l.Total != n {
				return 0, fmt.Errorf("total %d", l.Total)
			}
			return l.Count, nil
		})
	})
	b.Run("public", func(b *testing.B) {
		benchPages(b, c, n/3+1, n/6, func(start, count int) (int, error) {
			l, err := c.List(ctx, adapter.ListQuery{Start: start, Count: count, ReadableBy: []string{"public", "CN=someone"}})
			if err != nil {
				return 0, err
			}
			return l.Count, nil
		})
	})
}

// BenchmarkListTied: listObjects over 100,000 objects of one date, where
// only the second half of the sort key tells rows apart.
func BenchmarkListTied(b *testing.B) {
	const n = 100000
	c := benchObjects(b, n, true)
	benchPages(b, c, n, n*9/10, func(start, count int) (int, error) {
		l, err := c.List(b.Context(), adapter.ListQuery{Start: start, Count: count})
		if err != nil {
			return 0, err
		}
		return l.Count, nil
	})
}

// BenchmarkEvents: getLogRecords over 1,000,000 events, pages of 1,000.
func BenchmarkEvents(b *testing.B) {
	const n = 1000000
	c, err := OpenSQLite(filepath.Join(b.TempDir(), "bench.db"), WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := c.bulkEvents(b.Context(), n); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d events in %v", n, time.Since(start).Round(time.Millisecond))
	ctx := b.Context()
	b.Run("all", func(b *testing.B) {
		benchPages(b, c, n, n/2, func(start, count int) (int, error) {
			l, err := c.Events(ctx, adapter.LogQuery{Start: start, Count: count})
			if err != nil {
				return 0, err
			}
			if l.Total != n {
				return 0, fmt.Errorf("total %d", l.Total)
			}
			return l.Count, nil
		})
	})
	b.Run("event=create", func(b *testing.B) {
		benchPages(b, c, n/4, n/8, func(start, count int) (int, error) {
			l, err := c.Events(ctx, adapter.LogQuery{Start: start, Count: count, Event: adapter.EventCreate})
			if err != nil {
				return 0, err
			}
			return l.Count, nil
		})
	})
}

// BenchmarkInsert: durable creates, from 8 goroutines.
func BenchmarkInsert(b *testing.B) {
	c, err := OpenSQLite(filepath.Join(b.TempDir(), "bench.db"), WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var next int64
	var mu = make(chan struct{}, 1)
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu <- struct{}{}
			next++
			i := next
			<-mu
			sm := sqlcatalogtest.SM(fmt.Sprintf("ins-%d", i), adapter.Now())
			if err := c.Insert(b.Context(), &node.Record{Meta: sm}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
