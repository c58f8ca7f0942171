package node_test

// What the harvest lease tests (harvestlease_test.go, datasetlease_test.go)
// share: instances on one PostgreSQL catalog and one file store, each with a
// catalog of its own whose lease calls go to one log, and the helpers that
// hold, resume and check their passes.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// leaseCluster is instances sharing one PostgreSQL catalog, one file store
// and the lease leaseName.
type leaseCluster struct {
	t         *testing.T
	dsn, dir  string
	leaseName string
	admin     *sqlcatalog.Catalog // reads the lease
	log       *leaseLog
}

// newLeaseCluster starts a cluster whose file store holds each of keys, its
// bytes "bytes of " and the key.
func newLeaseCluster(t *testing.T, leaseName string, keys []string) *leaseCluster {
	t.Helper()
	c := &leaseCluster{t: t, dsn: pgtest.Start(t), dir: t.TempDir(), leaseName: leaseName, log: &leaseLog{}}
	fs := c.files()
	for _, key := range keys {
		if _, err := fs.Put(t.Context(), key, strings.NewReader("bytes of "+key)); err != nil {
			t.Fatal(err)
		}
	}
	c.admin = c.openCatalog()
	return c
}

func (c *leaseCluster) files() *fsblobs.Store {
	c.t.Helper()
	fs, err := fsblobs.New(filepath.Join(c.dir, "objects"))
	if err != nil {
		c.t.Fatal(err)
	}
	return fs
}

func (c *leaseCluster) openCatalog() *sqlcatalog.Catalog {
	cat, err := sqlcatalog.OpenPostgres(c.dsn, sqlcatalog.WithNodeID("urn:node:t"), sqlcatalog.WithCache(0, 0), sqlcatalog.WithRecordCache(0))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cat.Close() })
	return cat
}

func (c *leaseCluster) lease() node.Lease {
	c.t.Helper()
	l, err := c.admin.Lease(c.t.Context(), c.leaseName)
	if err != nil {
		c.t.Fatal(err)
	}
	return l
}

// leaseCatalog opens the catalog of the instance name.
func (c *leaseCluster) leaseCatalog(name string) *leaseCatalog {
	return &leaseCatalog{Catalog: c.openCatalog(), name: name, log: c.log}
}

// leaseInstance is one d1bridge instance of the cluster.
type leaseInstance struct {
	name   string
	n      *node.Node
	m      *metrics.Metrics
	reg    *prometheus.Registry
	closed bool
}

// open opens the instance name on cat (its leaseCatalog, or one around it)
// and the shared file store; it is closed when the test ends.
func (c *leaseCluster) open(name string, cat node.Catalog) *leaseInstance {
	c.t.Helper()
	fs := c.files()
	in := &leaseInstance{name: name, reg: prometheus.NewRegistry()}
	in.m = metrics.New(in.reg, "test")
	in.n = node.New("urn:node:t", fs, cat, nil)
	c.t.Cleanup(in.close)
	return in
}

func (in *leaseInstance) close() {
	if !in.closed {
		in.closed = true
		in.n.Close()
	}
}

func (in *leaseInstance) base() *leaseInstance { return in }

// createEvents is the number of create events once each of ins has flushed
// its own, read count at a time.
func createEvents[I interface{ base() *leaseInstance }](t *testing.T, count int, ins []I) int {
	t.Helper()
	var lg *adapter.Log
	for _, in := range ins { // each flushes its own events
		var err error
		if lg, err = in.base().n.LogRecords(t.Context(), adapter.PublicSession(), adapter.LogQuery{Event: adapter.EventCreate, Count: count}); err != nil {
			t.Fatal(err)
		}
	}
	return lg.Total
}

// leaseCatalog is an instance's catalog, whose lease calls go to the shared
// log; renewals fail while paused (the instance cut off), and releases are
// dropped while crashed (the instance killed).
type leaseCatalog struct {
	*sqlcatalog.Catalog
	name    string
	log     *leaseLog
	paused  atomic.Bool
	crashed atomic.Bool
}

func (c *leaseCatalog) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (node.Lease, bool, error) {
	l, ok, err := c.Catalog.Acquire(ctx, name, holder, ttl)
	if ok && err == nil {
		c.log.add(leaseEvent{c.name, "acquired", l.Epoch})
	}
	return l, ok, err
}

func (c *leaseCatalog) Renew(ctx context.Context, name string, epoch int64, ttl time.Duration) error {
	if c.paused.Load() {
		return errors.New("paused")
	}
	return c.Catalog.Renew(ctx, name, epoch, ttl)
}

func (c *leaseCatalog) Checkpoint(ctx context.Context, name string, epoch int64, state string, ttl time.Duration) error {
	if c.paused.Load() {
		return errors.New("paused")
	}
	return c.Catalog.Checkpoint(ctx, name, epoch, state, ttl)
}

func (c *leaseCatalog) Release(ctx context.Context, name string, epoch int64) error {
	if c.crashed.Load() {
		return nil
	}
	// Logged before the release commits, so that it is in the log before
	// the next holder's acquisition.
	c.log.add(leaseEvent{c.name, "releasing", epoch})
	return c.Catalog.Release(ctx, name, epoch)
}

type leaseEvent struct {
	who, what string
	epoch     int64
}

// leaseLog is the lease's history as the instances saw it.
type leaseLog struct {
	mu     sync.Mutex
	events []leaseEvent
}

func (l *leaseLog) add(e leaseEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// check fails t unless the epochs acquired grow strictly, and, when
// exclusive, each holder released before the next acquired.
func (l *leaseLog) check(t *testing.T, exclusive bool) []leaseEvent {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var holder string
	var epoch int64
	for i, e := range l.events {
		switch e.what {
		case "acquired":
			if e.epoch <= epoch {
				t.Errorf("event %d: %s acquired epoch %d after epoch %d: %v", i, e.who, e.epoch, epoch, l.events)
			}
			if exclusive && holder != "" {
				t.Errorf("event %d: %s acquired the lease while %s held it: %v", i, e.who, holder, l.events)
			}
			holder, epoch = e.who, e.epoch
		case "releasing":
			if e.who == holder && e.epoch == epoch {
				holder = ""
			}
		}
	}
	return slices.Clone(l.events)
}

// checkTakenOver fails t unless the log, checked exclusive unless crash (a
// killed holder's lease expires: it releases nothing), ends with B
// releasing epoch 2.
func (l *leaseLog) checkTakenOver(t *testing.T, crash bool) {
	t.Helper()
	events := l.check(t, !crash)
	if len(events) == 0 || events[len(events)-1] != (leaseEvent{"B", "releasing", 2}) {
		t.Errorf("lease history %v", events)
	}
}

// background lets the instances' background loops run for run, checks with
// done what they harvested, and closes them; it returns the lease history,
// which must be exclusive and at least 4 events long.
func background[I interface{ base() *leaseInstance }](t *testing.T, log *leaseLog, run time.Duration, ins []I, done func(ins ...I)) []leaseEvent {
	t.Helper()
	time.Sleep(run)
	done(ins...)
	for _, in := range ins {
		in.base().close()
	}
	events := log.check(t, true)
	if len(events) < 4 {
		t.Errorf("lease history %v: too short", events)
	}
	return events
}

// eachCrash runs test in parallel subtests on one PostgreSQL cluster, with
// the first holder stopped (crash false) and killed (crash true).
func eachCrash(t *testing.T, test func(t *testing.T, crash bool)) {
	pgtest.Start(t) // one cluster for the subtests
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			t.Parallel()
			test(t, crash)
		})
	}
}

// checkWaited fails t unless B took a released lease over within half its
// ttl, or the lease of a killed holder (crash) no sooner.
func checkWaited(t *testing.T, crash bool, waited, ttl time.Duration) {
	t.Helper()
	switch {
	case !crash && waited > ttl/2:
		t.Errorf("B took %v to take over a released lease", waited)
	case crash && waited < ttl/2:
		t.Errorf("B took over in %v the lease of an instance killed holding it (TTL %v)", waited, ttl)
	}
}

// holdWhere is a before function that waits where at says until its
// context ends, and a channel closed when it first starts waiting.
func holdWhere[T any](at func(T) bool) (func(ctx context.Context, x T) error, <-chan struct{}) {
	reached := make(chan struct{})
	var once sync.Once
	return func(ctx context.Context, x T) error {
		if !at(x) {
			return nil
		}
		once.Do(func() { close(reached) })
		<-ctx.Done()
		return ctx.Err()
	}, reached
}

// comeBack lets an instance stalled on back go on; at the latest when the
// test ends, before the instances started before it close.
type comeBack struct {
	back chan struct{}
	once sync.Once
}

func newComeBack(t *testing.T) *comeBack {
	b := &comeBack{back: make(chan struct{})}
	t.Cleanup(b.now)
	return b
}

func (b *comeBack) now() { b.once.Do(func() { close(b.back) }) }

type passResult[R any] struct {
	rep R
	err error
}

// inBackground runs pass in the background.
func inBackground[R any](pass func() (R, error)) <-chan passResult[R] {
	done := make(chan passResult[R], 1)
	go func() {
		rep, err := pass()
		done <- passResult[R]{rep, err}
	}()
	return done
}

// untilFree runs pass until it is not refused for the lease being held,
// and returns its report, how long it waited (until the pass that was let
// in began: not that pass's own work) and its error; it fails t with
// timedOut after 20 seconds.
func untilFree[R any](t *testing.T, timedOut string, pass func() (R, error)) (R, time.Duration, error) {
	t.Helper()
	began := time.Now()
	for {
		tried := time.Now()
		rep, err := pass()
		if !errors.Is(err, node.ErrHarvestBusy) {
			return rep, tried.Sub(began), err
		}
		if time.Since(began) > 20*time.Second {
			t.Fatal(timedOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
