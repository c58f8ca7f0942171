package node_test

// The harvest shared by instances on one PostgreSQL catalog: one pass at a
// time under the lease, a pass cut short resumed by the next holder from its
// checkpoint, a holder that lost the lease writing nothing more, and the mark
// kept across a restart.

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

const leaseName = "harvest:up"

// leaseCluster is instances sharing one PostgreSQL catalog, one file store and
// one upstream listing (12 objects, 3 a page: cursors "", 3, 6, 9).
type leaseCluster struct {
	t        *testing.T
	dsn, dir string
	lister   *fakeLister
	admin    *sqlcatalog.Catalog // reads the lease
	log      *leaseLog
}

func newLeaseCluster(t *testing.T) *leaseCluster {
	t.Helper()
	c := &leaseCluster{t: t, dsn: pgtest.Start(t), dir: t.TempDir(), lister: &fakeLister{pageSize: 3, stalled: make(chan struct{})}, log: &leaseLog{}}
	fs, err := fsblobs.New(filepath.Join(c.dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		key := fmt.Sprintf("o%02d", i)
		if _, err := fs.Put(t.Context(), key, strings.NewReader("bytes of "+key)); err != nil {
			t.Fatal(err)
		}
		c.lister.set(node.Found{Key: key, Size: -1, Modified: t0.Add(time.Duration(i) * time.Minute)})
	}
	c.admin = c.openCatalog()
	return c
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
	l, err := c.admin.Lease(c.t.Context(), leaseName)
	if err != nil {
		c.t.Fatal(err)
	}
	return l
}

// instance is one d1bridge instance of the cluster.
type instance struct {
	name   string
	n      *node.Node
	cat    *leaseCatalog
	lister *cursorLister
	reg    *prometheus.Registry
	closed bool
}

// start opens an instance harvesting the upstream "up" with ttl, every
// interval when not 0.
func (c *leaseCluster) start(name string, ttl, interval time.Duration) *instance {
	c.t.Helper()
	fs, err := fsblobs.New(filepath.Join(c.dir, "objects"))
	if err != nil {
		c.t.Fatal(err)
	}
	in := &instance{name: name, cat: &leaseCatalog{Catalog: c.openCatalog(), name: name, log: c.log},
		lister: &cursorLister{fakeLister: c.lister}, reg: prometheus.NewRegistry()}
	in.n = node.New("urn:node:t", fs, in.cat, nil)
	in.n.StartHarvest(in.lister, node.HarvestOptions{Name: "up", Holder: name, LeaseTTL: ttl, Interval: interval,
		Readers: []string{adapter.SubjectPublic}, Metrics: metrics.New(in.reg, "test")})
	c.t.Cleanup(in.close)
	return in
}

func (in *instance) close() {
	if !in.closed {
		in.closed = true
		in.n.Close()
	}
}

// cursorLister is the shared listing as one instance sees it: it records the
// cursors asked for, and before may hold or fail a List.
type cursorLister struct {
	*fakeLister
	mu      sync.Mutex
	cursors []string
	before  func(ctx context.Context, cursor string) error
}

func (l *cursorLister) List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error) {
	l.mu.Lock()
	l.cursors = append(l.cursors, cursor)
	before := l.before
	l.mu.Unlock()
	if before != nil {
		if err := before(ctx, cursor); err != nil {
			return nil, "", err
		}
	}
	return l.fakeLister.List(ctx, since, cursor)
}

func (l *cursorLister) asked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.cursors)
}

func (l *cursorLister) setBefore(f func(ctx context.Context, cursor string) error) {
	l.mu.Lock()
	l.before = f
	l.mu.Unlock()
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

// holdAt makes in's List at cursor wait until its context ends, and returns
// a channel closed when it starts waiting.
func holdAt(in *instance, cursor string) <-chan struct{} {
	reached := make(chan struct{})
	var once sync.Once
	in.lister.setBefore(func(ctx context.Context, c string) error {
		if c != cursor {
			return nil
		}
		once.Do(func() { close(reached) })
		<-ctx.Done()
		return ctx.Err()
	})
	return reached
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// harvested checks that every object is registered once, with one create
// event each.
func (c *leaseCluster) harvested(ins ...*instance) {
	c.t.Helper()
	ctx := c.t.Context()
	s := adapter.PublicSession()
	var lg *adapter.Log
	for _, in := range ins { // each flushes its own events
		var err error
		if lg, err = in.n.LogRecords(ctx, s, adapter.LogQuery{Event: adapter.EventCreate, Count: 100}); err != nil {
			c.t.Fatal(err)
		}
	}
	if lg.Total != 12 {
		c.t.Errorf("%d create events, want 12 (one per object)", lg.Total)
	}
	l, err := ins[0].n.ListObjects(ctx, s, adapter.ListQuery{Count: 100})
	if err != nil || l.Total != 12 {
		c.t.Fatalf("listObjects: %v objects, %v; want 12", l.Total, err)
	}
}

// TestHarvestLeaseTakeover: while A runs a pass, B's pass is refused; A
// stopped after two pages (its context cancelled, releasing the lease, or
// killed, leaving it to expire), B resumes at the third page at a later
// epoch and finishes the pass; a restarted instance keeps the mark.
func TestHarvestLeaseTakeover(t *testing.T) {
	t.Parallel()
	pgtest.Start(t) // one cluster for the subtests
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprint("crash=", crash), func(t *testing.T) {
			t.Parallel()
			testHarvestLeaseTakeover(t, crash)
		})
	}
}

func testHarvestLeaseTakeover(t *testing.T, crash bool) {
	const ttl = 1500 * time.Millisecond
	c := newLeaseCluster(t)
	a, b := c.start("A", ttl, 0), c.start("B", ttl, 0)
	reached := holdAt(a, "6")
	ctxA, stopA := context.WithCancel(t.Context())
	type result struct {
		rep node.HarvestReport
		err error
	}
	doneA := make(chan result, 1)
	go func() {
		rep, err := a.n.HarvestOnce(ctxA)
		doneA <- result{rep, err}
	}()
	wait(t, reached, "A to reach its third page")

	rep, err := b.n.HarvestOnce(t.Context())
	if !errors.Is(err, node.ErrHarvestBusy) || len(b.lister.asked()) != 0 {
		t.Fatalf("B's pass while A harvests: %+v, %v, listing %q; want ErrHarvestBusy and no listing", rep, err, b.lister.asked())
	}
	l := c.lease()
	if l.Holder != "A" || l.Epoch != 1 || !strings.Contains(l.State, `"cursor":"6"`) || !strings.Contains(l.State, `"pages":2`) {
		t.Fatalf("the lease while A is at its third page: %+v", l)
	}

	a.cat.crashed.Store(crash)
	stopA()
	ra := <-doneA
	if !errors.Is(ra.err, context.Canceled) || ra.rep.Registered != 6 || ra.rep.Epoch != 1 || ra.rep.Resumed {
		t.Fatalf("A stopped: %+v, %v; want 6 registered at epoch 1 and the context's error", ra.rep, ra.err)
	}

	took := time.Now()
	var rb node.HarvestReport
	for {
		rb, err = b.n.HarvestOnce(t.Context())
		if !errors.Is(err, node.ErrHarvestBusy) {
			break
		}
		if time.Since(took) > 20*time.Second {
			t.Fatal("B never took the lease over")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waited := time.Since(took)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !crash && waited > ttl/2:
		t.Errorf("B took %v to take over a released lease", waited)
	case crash && waited < ttl/2:
		t.Errorf("B took over in %v the lease of an instance killed holding it (TTL %v)", waited, ttl)
	}
	if got := b.lister.asked(); !slices.Equal(got, []string{"6", "9"}) {
		t.Errorf("B listed the cursors %q; want the pass resumed at A's checkpoint: 6, 9", got)
	}
	if !rb.Resumed || rb.Registered != 6 || rb.Unchanged != 0 || rb.Epoch != 2 || !rb.Mark.Equal(t0.Add(11*time.Minute)) {
		t.Errorf("B's pass: %+v; want resumed at epoch 2, 6 registered, the mark at the last object", rb)
	}
	c.harvested(a, b)
	events := c.log.check(t, !crash) // a killed holder's lease expires: it releases nothing
	if len(events) == 0 || events[len(events)-1] != (leaseEvent{"B", "releasing", 2}) {
		t.Errorf("lease history %v", events)
	}
	if l := c.lease(); l.Holder != "" || l.Epoch != 2 || strings.Contains(l.State, `"pass"`) {
		t.Errorf("the lease after B's complete pass: %+v; want released, no pass in progress", l)
	}

	// A restart keeps the mark: its first pass asks for what changed since.
	a.close()
	b.close()
	sinces := len(c.lister.sinces)
	r := c.start("R", ttl, 0)
	rr, err := r.n.HarvestOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c.lister.mu.Lock()
	since := c.lister.sinces[sinces]
	c.lister.mu.Unlock()
	if want := t0.Add(11*time.Minute - time.Minute); !since.Equal(want) || rr.Resumed || rr.Epoch != 3 || counts(rr) != report(0, 0, 2, 0) {
		t.Errorf("the restarted instance's pass: %+v since %v; want since %v (the mark less the overlap), 2 unchanged, epoch 3", rr, since, want)
	}
}

// TestHarvestLeaseLost: A, cut off from the catalog in the middle of a pass
// (its renewals fail), loses the lease to B, which resumes from A's last
// checkpoint; A, back, writes nothing more and reports ErrLeaseLost.
func TestHarvestLeaseLost(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	c := newLeaseCluster(t)
	a, b := c.start("A", ttl, 0), c.start("B", ttl, 0)
	reached := make(chan struct{})
	back := make(chan struct{})
	var comeBack sync.Once
	t.Cleanup(func() { comeBack.Do(func() { close(back) }) }) // before the instances close
	a.lister.setBefore(func(ctx context.Context, cursor string) error {
		if cursor == "3" {
			a.cat.paused.Store(true)
			close(reached)
			<-back // A stalls here, its lease running out; then it goes on
		}
		return nil
	})
	type result struct {
		rep node.HarvestReport
		err error
	}
	doneA := make(chan result, 1)
	go func() {
		rep, err := a.n.HarvestOnce(t.Context())
		doneA <- result{rep, err}
	}()
	wait(t, reached, "A's second page")

	var rb node.HarvestReport
	var err error
	deadline := time.Now().Add(20 * time.Second)
	for {
		rb, err = b.n.HarvestOnce(t.Context())
		if !errors.Is(err, node.ErrHarvestBusy) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B never took the lease A lost")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !rb.Resumed || rb.Epoch != 2 || rb.Registered != 9 {
		t.Fatalf("B's pass: %+v, %v; want it resumed at A's checkpoint (page 2), 9 registered, at epoch 2", rb, err)
	}
	if got := b.lister.asked(); !slices.Equal(got, []string{"3", "6", "9"}) {
		t.Errorf("B listed %q, want 3, 6, 9", got)
	}

	a.cat.paused.Store(false)
	comeBack.Do(func() { close(back) })
	ra := <-doneA
	if !errors.Is(ra.err, node.ErrLeaseLost) || ra.rep.Registered+ra.rep.Updated+ra.rep.Unchanged+ra.rep.Failed != 3 {
		t.Fatalf("A after its stall: %+v, %v; want ErrLeaseLost and nothing done after the first page", ra.rep, ra.err)
	}
	if got := a.lister.asked(); !slices.Equal(got, []string{"", "3"}) {
		t.Errorf("A listed %q after losing the lease", got)
	}
	c.harvested(a, b)
	c.log.check(t, false)
	if l := c.lease(); l.Epoch != 2 || strings.Contains(l.State, `"pass"`) {
		t.Errorf("the lease after B's pass and A's return: %+v", l)
	}
}

// TestHarvestLeaseBackground: two instances' background loops on one
// catalog take turns: the lease is never held by both, its epoch only grows,
// and the interval is shared (about one pass per interval between them, not
// one each).
func TestHarvestLeaseBackground(t *testing.T) {
	t.Parallel()
	const interval = 300 * time.Millisecond
	c := newLeaseCluster(t)
	var passes atomic.Int64
	ins := []*instance{c.start("A", time.Second, interval), c.start("B", time.Second, interval)}
	for _, in := range ins {
		in.lister.setBefore(func(ctx context.Context, cursor string) error {
			if cursor == "" {
				passes.Add(1)
			}
			time.Sleep(10 * time.Millisecond) // a pass takes a while
			return nil
		})
	}
	const run = 3 * time.Second
	time.Sleep(run)
	c.harvested(ins...)
	for _, in := range ins {
		in.close()
	}
	events := c.log.check(t, true)
	if n := passes.Load(); n < 3 || n > int64(run/interval)+1 {
		t.Errorf("%d passes in %v at an interval of %v between two instances; want about one per interval", n, run, interval)
	}
	if len(events) < 4 {
		t.Errorf("lease history %v: too short", events)
	}
}
