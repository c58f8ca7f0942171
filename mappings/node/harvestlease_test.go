package node_test

// The harvest shared by instances on one PostgreSQL catalog: one pass at a
// time under the lease, a pass cut short resumed by the next holder from its
// checkpoint, a holder that lost the lease writing nothing more, and the mark
// kept across a restart.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

const harvestLease = "harvest:up"

// harvestCluster is instances sharing one PostgreSQL catalog, one file store
// and one upstream listing (12 objects, 3 a page: cursors "", 3, 6, 9).
type harvestCluster struct {
	*leaseCluster
	lister *fakeLister
}

func newHarvestCluster(t *testing.T) *harvestCluster {
	t.Helper()
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("o%02d", i)
	}
	c := &harvestCluster{leaseCluster: newLeaseCluster(t, harvestLease, keys), lister: &fakeLister{pageSize: 3, stalled: make(chan struct{})}}
	for i, key := range keys {
		c.lister.set(node.Found{Key: key, Size: -1, Modified: t0.Add(time.Duration(i) * time.Minute)})
	}
	return c
}

// instance is one d1bridge instance of the cluster.
type instance struct {
	*leaseInstance
	cat    *leaseCatalog
	lister *cursorLister
}

// start opens an instance harvesting the upstream "up" with ttl, every
// interval when not 0.
func (c *harvestCluster) start(name string, ttl, interval time.Duration) *instance {
	c.t.Helper()
	cat := c.leaseCatalog(name)
	in := &instance{leaseInstance: c.open(name, cat), cat: cat, lister: &cursorLister{fakeLister: c.lister}}
	in.n.StartHarvest(in.lister, node.HarvestOptions{Name: "up", Holder: name, LeaseTTL: ttl, Interval: interval,
		Readers: []string{adapter.SubjectPublic}, Metrics: in.m})
	return in
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

// holdAt makes in's List at cursor wait until its context ends, and returns
// a channel closed when it starts waiting.
func holdAt(in *instance, cursor string) <-chan struct{} {
	before, reached := holdWhere(func(c string) bool { return c == cursor })
	in.lister.setBefore(before)
	return reached
}

// harvested checks that every object is registered once, with one create
// event each.
func (c *harvestCluster) harvested(ins ...*instance) {
	c.t.Helper()
	if n := createEvents(c.t, 100, ins); n != 12 {
		c.t.Errorf("%d create events, want 12 (one per object)", n)
	}
	l, err := ins[0].n.ListObjects(c.t.Context(), adapter.PublicSession(), adapter.ListQuery{Count: 100})
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
	eachCrash(t, testHarvestLeaseTakeover)
}

func testHarvestLeaseTakeover(t *testing.T, crash bool) {
	const ttl = 1500 * time.Millisecond
	c := newHarvestCluster(t)
	a, b := c.start("A", ttl, 0), c.start("B", ttl, 0)
	reached := holdAt(a, "6")
	ctxA, stopA := context.WithCancel(t.Context())
	doneA := inBackground(func() (node.HarvestReport, error) { return a.n.HarvestOnce(ctxA) })
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

	rb, waited, err := untilFree(t, "B never took the lease over", func() (node.HarvestReport, error) { return b.n.HarvestOnce(t.Context()) })
	if err != nil {
		t.Fatal(err)
	}
	checkWaited(t, crash, waited, ttl)
	if got := b.lister.asked(); !slices.Equal(got, []string{"6", "9"}) {
		t.Errorf("B listed the cursors %q; want the pass resumed at A's checkpoint: 6, 9", got)
	}
	if !rb.Resumed || rb.Registered != 6 || rb.Unchanged != 0 || rb.Epoch != 2 || !rb.Mark.Equal(t0.Add(11*time.Minute)) {
		t.Errorf("B's pass: %+v; want resumed at epoch 2, 6 registered, the mark at the last object", rb)
	}
	c.harvested(a, b)
	c.log.checkTakenOver(t, crash)
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
	c := newHarvestCluster(t)
	a, b := c.start("A", ttl, 0), c.start("B", ttl, 0)
	reached := make(chan struct{})
	back := newComeBack(t) // before the instances close
	a.lister.setBefore(func(ctx context.Context, cursor string) error {
		if cursor == "3" {
			a.cat.paused.Store(true)
			close(reached)
			<-back.back // A stalls here, its lease running out; then it goes on
		}
		return nil
	})
	doneA := inBackground(func() (node.HarvestReport, error) { return a.n.HarvestOnce(t.Context()) })
	wait(t, reached, "A's second page")

	rb, _, err := untilFree(t, "B never took the lease A lost", func() (node.HarvestReport, error) { return b.n.HarvestOnce(t.Context()) })
	if err != nil || !rb.Resumed || rb.Epoch != 2 || rb.Registered != 9 {
		t.Fatalf("B's pass: %+v, %v; want it resumed at A's checkpoint (page 2), 9 registered, at epoch 2", rb, err)
	}
	if got := b.lister.asked(); !slices.Equal(got, []string{"3", "6", "9"}) {
		t.Errorf("B listed %q, want 3, 6, 9", got)
	}

	a.cat.paused.Store(false)
	back.now()
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
	c := newHarvestCluster(t)
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
	background(t, c.log, run, ins, c.harvested)
	if n := passes.Load(); n < 3 || n > int64(run/interval)+1 {
		t.Errorf("%d passes in %v at an interval of %v between two instances; want about one per interval", n, run, interval)
	}
}
