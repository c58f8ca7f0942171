package node_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	cc := &countingCatalog{Catalog: openCatalog(t, dir)}
	return newNode(t, dir, cc, nil), cc
}

// openCatalog opens the SQLite catalog of dir.
func openCatalog(t *testing.T, dir string) *sqlcatalog.Catalog {
	t.Helper()
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// newNode is a node over cat with its objects in dir.
func newNode(t *testing.T, dir string, cat node.Catalog, log *slog.Logger) *node.Node {
	t.Helper()
	blobs, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	return node.New("urn:node:t", blobs, cat, log)
}

// createText creates pid holding data, owned by harvestOwner.
func createText(t *testing.T, n *node.Node, pid string, data []byte) {
	t.Helper()
	ctx := t.Context()
	u, err := n.Stage(ctx, bytes.NewReader(data), []string{"SHA-256"})
	if err != nil {
		t.Fatal(err)
	}
	sm := &adapter.SystemMetadata{Identifier: pid, FormatID: "text/plain", Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: sha256Hex(data)}, RightsHolder: harvestOwner}
	if _, err := n.Create(ctx, &adapter.Session{Subject: harvestOwner}, sm, u); err != nil {
		t.Fatal(err)
	}
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

	// Events a millisecond apart, from one reader, wait for one another
	// rather than taking a commit each.
	before := cc.batches.Load()
	const spaced = 20
	for i := range spaced {
		n.SynchronizationFailed(ctx, s, &adapter.Exception{PID: fmt.Sprintf("spaced-%d", i)})
		time.Sleep(time.Millisecond)
	}
	if _, err := n.LogRecords(ctx, s, adapter.LogQuery{Count: 0}); err != nil {
		t.Fatal(err)
	}
	if b := cc.batches.Load() - before; b > spaced/4 {
		t.Errorf("%d events a millisecond apart took %d transactions, want a few", spaced, b)
	}

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

// blockingCatalog holds AddEvents, once block is set, until release is closed:
// a catalog that writes events slower than they come.
type blockingCatalog struct {
	*sqlcatalog.Catalog
	block   atomic.Bool
	entered chan struct{} // receives when a held AddEvents starts
	release chan struct{}
}

func (c *blockingCatalog) AddEvents(ctx context.Context, es []adapter.LogEntry) error {
	if c.block.Load() {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		<-c.release
	}
	return c.Catalog.AddEvents(ctx, es)
}

// TestEventsFullQueueNeverBlocksReads: with the catalog's event writes held
// and the queue full, reads still return; their events are dropped and
// counted, the drop is logged once (not once per event), and the events that
// found room are written once the catalog answers.
func TestEventsFullQueueNeverBlocksReads(t *testing.T) {
	const queue, reads = 64, 500
	defer node.SetEventQueueSize(queue)()
	dir := t.TempDir()
	var logged lockedBuffer
	bc := &blockingCatalog{Catalog: openCatalog(t, dir), entered: make(chan struct{}, 1), release: make(chan struct{})}
	n := newNode(t, dir, bc, slog.New(slog.NewTextHandler(&logged, nil)))
	ctx := t.Context()
	owner := &adapter.Session{Subject: harvestOwner}
	createText(t, n, "pid-r", []byte("read me"))
	if _, err := n.LogRecords(ctx, owner, adapter.LogQuery{}); err != nil { // the create event is written
		t.Fatal(err)
	}

	read := func() {
		o, err := n.Get(ctx, adapter.PublicSession(), "pid-r")
		if err != nil {
			t.Error(err)
			return
		}
		o.Body.Close()
	}
	bc.block.Store(true)
	read() // its event is the batch the writer now holds
	<-bc.entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range reads {
			read()
		}
	}()
	// Not a timing: a read that waited for the queue would wait forever.
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("reads are blocked behind a full event queue")
	}
	if got, want := n.DroppedEvents(), uint64(reads-queue); got != want {
		t.Errorf("%d read events dropped, want %d (%d reads, %d queued)", got, want, reads, queue)
	}
	if c := strings.Count(logged.String(), "read events dropped"); c != 1 {
		t.Errorf("the drops were logged %d times, want once:\n%s", c, logged.String())
	}

	close(bc.release)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2, _ := openNode(t, dir)
	defer n2.Close()
	l, err := n2.LogRecords(ctx, owner, adapter.LogQuery{Event: adapter.EventRead})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 1+queue {
		t.Fatalf("%d read events written, want %d (the one in flight and the queue)", l.Total, 1+queue)
	}
}

// sharedCatalog is a catalog other instances write too, whose event commits
// take a while.
type sharedCatalog struct{ *sqlcatalog.Catalog }

func (sharedCatalog) Shared() bool { return true }

func (c sharedCatalog) AddEvents(ctx context.Context, es []adapter.LogEntry) error {
	time.Sleep(20 * time.Millisecond)
	return c.Catalog.AddEvents(ctx, es)
}

// TestEventsSharedCatalogCommitBeforeAnswer: on a catalog shared by replicas,
// a read's event is in the catalog when the read returns, since the next
// request may reach another replica, whose log read cannot flush this one's
// queue (the replicas conformance backend: getReplica, then getLogRecords).
func TestEventsSharedCatalogCommitBeforeAnswer(t *testing.T) {
	dir := t.TempDir()
	cat := openCatalog(t, dir)
	n := newNode(t, dir, sharedCatalog{cat}, nil)
	defer n.Close()
	ctx := t.Context()
	owner := &adapter.Session{Subject: harvestOwner}
	createText(t, n, "pid-s", []byte("read me anywhere"))
	for i := range 3 {
		o, err := n.Get(ctx, owner, "pid-s")
		if err != nil {
			t.Fatal(err)
		}
		o.Body.Close()
		// The catalog itself, as another replica reads it: no flush of this
		// node's queue.
		l, err := cat.Events(ctx, adapter.LogQuery{Event: adapter.EventRead, IDFilter: "pid-s"})
		if err != nil {
			t.Fatal(err)
		}
		if l.Total != i+1 {
			t.Fatalf("after read %d the shared catalog holds %d read events", i+1, l.Total)
		}
	}
}

// lockedBuffer is a bytes.Buffer written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
