package sqlcatalog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// TestCacheUnderConcurrentWrites pages through lists while objects and events
// are inserted, moved and deleted, then checks every page the cache can serve
// against a catalog without a cache on the same database.
func TestCacheUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.db")
	c, err := OpenSQLite(path, WithNodeID(sqlcatalogtest.NodeID), WithCache(64, 64))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ref, err := OpenSQLite(path, WithNodeID(sqlcatalogtest.NodeID), WithCache(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ctx := t.Context()
	at := func(s int) adapter.Time { return adapter.NewTime(time.Date(2024, 1, 1, 0, 0, s, 0, time.UTC)) }
	public := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	for i := range 100 {
		sm := sqlcatalogtest.SM(fmt.Sprintf("s%03d", i), at(i%40))
		if i%2 == 0 {
			sm.AccessPolicy = public
		}
		if err := c.Insert(ctx, &node.Record{Meta: sm}); err != nil {
			t.Fatal(err)
		}
		if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: sm.Identifier, Event: adapter.EventCreate, DateLogged: at(i % 30)}); err != nil {
			t.Fatal(err)
		}
	}
	lists := []adapter.ListQuery{{}, {ReadableBy: []string{"public"}}, {FromDate: at(10)}, {FormatID: "text/plain"}}
	logs := []adapter.LogQuery{{}, {Event: adapter.EventRead}, {IDFilter: "s0"}, {ReadableBy: []string{"public"}}}

	for round := range 5 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(r)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.List(ctx, adapter.ListQuery{Start: rng.IntN(120), Count: 1 + rng.IntN(9), ReadableBy: lists[rng.IntN(len(lists))].ReadableBy, FromDate: lists[rng.IntN(len(lists))].FromDate}); err != nil {
						t.Error(err)
					}
					q := logs[rng.IntN(len(logs))]
					q.Start, q.Count = rng.IntN(200), 1+rng.IntN(9)
					if _, err := c.Events(ctx, q); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		rng := rand.New(rand.NewPCG(uint64(round), 99))
		for i := range 60 {
			pid := fmt.Sprintf("s%03d", rng.IntN(100))
			switch i % 4 {
			case 0:
				sm := sqlcatalogtest.SM(fmt.Sprintf("r%d-%d", round, i), at(rng.IntN(50)))
				if rng.IntN(2) == 0 {
					sm.AccessPolicy = public
				}
				err = c.Insert(ctx, &node.Record{Meta: sm})
			case 1:
				_, err = c.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error {
					sm.DateSysMetadataModified = at(rng.IntN(50))
					if rng.IntN(2) == 0 {
						sm.AccessPolicy = nil
					} else {
						sm.AccessPolicy = public
					}
					return nil
				})
			case 2:
				_, err = c.Delete(ctx, pid)
			case 3:
				err = c.AddEvent(ctx, adapter.LogEntry{Identifier: pid, Event: adapter.EventRead, DateLogged: at(rng.IntN(40))})
			}
			if err != nil && !adapter.IsKind(err, adapter.NotFound) {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		compareAll(t, ctx, c, ref, lists, logs)
	}
}

// compareAll checks every page of every query, backward then forward.
func compareAll(t *testing.T, ctx context.Context, c, ref *Catalog, lists []adapter.ListQuery, logs []adapter.LogQuery) {
	t.Helper()
	for _, q := range lists {
		for _, s := range starts(130) {
			q.Start, q.Count = s, 5
			got, err := c.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("List(%+v):\n got %+v\nwant %+v", q, got, want)
			}
		}
	}
	for _, q := range logs {
		for _, s := range starts(200) {
			q.Start, q.Count = s, 5
			got, err := c.Events(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Events(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Events(%+v):\n got %+v\nwant %+v", q, got, want)
			}
		}
	}
}

func starts(n int) []int {
	var out []int
	for s := n; s >= 0; s-- {
		out = append(out, s)
	}
	for s := 0; s <= n; s += 5 {
		out = append(out, s)
	}
	return out
}
