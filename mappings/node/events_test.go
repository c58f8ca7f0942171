package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// countingCatalog counts the transactions events were written in.
type countingCatalog struct {
	*sqlcatalog.Catalog
	batches atomic.Int64
}

func (c *countingCatalog) AddEvents(ctx context.Context, es []adapter.LogEntry) error {
	c.batches.Add(1)
	return c.Catalog.AddEvents(ctx, es)
}

func openNode(t *testing.T, dir string) (*node.Node, *countingCatalog) {
	t.Helper()
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingCatalog{Catalog: cat}
	return node.New("urn:node:t", blobs, cc, nil), cc
}

// TestEventsGroupCommit: concurrent reads log their events without a commit
// each; reading the log sees every event logged before it; closing writes what
// is queued.
func TestEventsGroupCommit(t *testing.T) {
	dir := t.TempDir()
	n, cc := openNode(t, dir)
	ctx := t.Context()
	s := adapter.PublicSession()
	// SynchronizationFailed logs one event per call, for any identifier.
	const workers, each = 8, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n.SynchronizationFailed(ctx, s, &adapter.Exception{PID: fmt.Sprintf("p-%d-%d", w, i)})
			}
		}()
	}
	wg.Wait()
	l, err := n.LogRecords(ctx, s, adapter.LogQuery{Count: 0})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != workers*each {
		t.Fatalf("the log has %d events after a flush, want %d", l.Total, workers*each)
	}
	if b := cc.batches.Load(); b >= workers*each {
		t.Errorf("%d events took %d transactions: no batching", workers*each, b)
	}
	t.Logf("%d events in %d transactions", workers*each, cc.batches.Load())

	for i := range 50 {
		n.SynchronizationFailed(ctx, s, &adapter.Exception{PID: fmt.Sprintf("late-%d", i)})
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2, _ := openNode(t, dir)
	defer n2.Close()
	l, err = n2.LogRecords(ctx, s, adapter.LogQuery{Count: 0, IDFilter: "late-"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 50 {
		t.Fatalf("after Close and reopen, %d of 50 queued events are in the log", l.Total)
	}
}
