package node_test

// Dataset sources harvested by instances sharing one PostgreSQL catalog: one
// pass at a time under the source's lease, a pass cut short walked again by
// the next holder, a holder that lost the lease writing nothing more, the
// mark and the time of the last walk of everything kept across a restart,
// and the instances whose turn it was not not looking stalled.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/metrics"
)

const datasetLease = "datasets:src"

// datasetSource is the upstream the instances share: datasets d0 to d7, one
// file each (f0 to f7), d<i> modified at t0 + i minutes; d0 comes in two
// versions (the second's file is f8), so that a pass writes d0's first
// before it reads on (the second version waits for it). It walks what
// changed since the time asked.
type datasetSource struct {
	mu     sync.Mutex
	list   []*node.Dataset
	sinces []time.Time // of each walk
}

func newDatasetSource() *datasetSource {
	s := &datasetSource{}
	for i := range 8 {
		d := &node.Dataset{ID: fmt.Sprintf("d%d", i), Sequence: 1, Version: "1", Modified: t0.Add(time.Duration(i) * time.Minute),
			Files: []node.Found{{Key: fmt.Sprintf("f%d", i), FileName: "data.txt", Size: -1}}}
		s.list = append(s.list, d)
		if i == 0 {
			v2 := *d
			v2.Sequence, v2.Version, v2.Modified = 2, "2", t0.Add(30*time.Second)
			v2.Files = []node.Found{{Key: "f8", FileName: "data.txt", Size: -1}}
			s.list = append(s.list, &v2)
		}
	}
	return s
}

func (s *datasetSource) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	s.mu.Lock()
	s.sinces = append(s.sinces, since)
	list := slices.Clone(s.list)
	s.mu.Unlock()
	for _, d := range list {
		if !since.IsZero() && d.Modified.Before(since) {
			continue
		}
		c := *d
		c.Files = slices.Clone(d.Files)
		if err := fn(&c); err != nil {
			return err
		}
	}
	return nil
}

func (s *datasetSource) walks() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sinces)
}

// instanceSource is the source as one instance sees it: it counts the walks,
// and before may hold or fail the walk at a dataset.
type instanceSource struct {
	*datasetSource
	walked atomic.Int64
	mu     sync.Mutex
	before func(ctx context.Context, d *node.Dataset) error
}

func (s *instanceSource) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	s.walked.Add(1)
	return s.datasetSource.Walk(ctx, since, func(d *node.Dataset) error {
		s.mu.Lock()
		before := s.before
		s.mu.Unlock()
		if before != nil {
			if err := before(ctx, d); err != nil {
				return err
			}
		}
		return fn(d)
	})
}

func (s *instanceSource) setBefore(f func(ctx context.Context, d *node.Dataset) error) {
	s.mu.Lock()
	s.before = f
	s.mu.Unlock()
}

// applyCounting is an instance's catalog that counts the batches it is asked
// to write.
type applyCounting struct {
	*leaseCatalog
	applies atomic.Int64
}

func (c *applyCounting) Apply(ctx context.Context, b *node.Batch) ([]string, error) {
	c.applies.Add(1)
	return c.leaseCatalog.Apply(ctx, b)
}

// datasetCluster is instances sharing one PostgreSQL catalog, one file store
// and one dataset source.
type datasetCluster struct {
	*leaseCluster
	src *datasetSource
	// full is the instances' FullInterval; 0: the default.
	full time.Duration
}

func newDatasetCluster(t *testing.T) *datasetCluster {
	t.Helper()
	keys := make([]string, 9)
	for i := range keys {
		keys[i] = fmt.Sprintf("f%d", i)
	}
	return &datasetCluster{leaseCluster: newLeaseCluster(t, datasetLease, keys), src: newDatasetSource()}
}

// datasetInstance is one d1bridge instance of the cluster.
type datasetInstance struct {
	*leaseInstance
	cat *applyCounting
	src *instanceSource
}

// start opens an instance harvesting the source "src" with ttl, every
// interval when not 0.
func (c *datasetCluster) start(name string, ttl, interval time.Duration) *datasetInstance {
	c.t.Helper()
	cat := &applyCounting{leaseCatalog: c.leaseCatalog(name)}
	in := &datasetInstance{leaseInstance: c.open(name, cat), cat: cat, src: &instanceSource{datasetSource: c.src}}
	in.n.StartDatasets(in.src, node.DatasetOptions{Name: "src", Holder: name, LeaseTTL: ttl, Interval: interval, FullInterval: c.full,
		Readers: []string{adapter.SubjectPublic}, Metrics: in.m})
	return in
}

// gauge is the value of the gauge name{source="src"}; -1 when absent.
func (in *datasetInstance) gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := in.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "source" && lp.GetValue() == "src" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// holdDatasetAt makes in's walk wait at the dataset id until its context
// ends, and returns a channel closed when it starts waiting.
func holdDatasetAt(in *datasetInstance, id string) <-chan struct{} {
	before, reached := holdWhere(func(d *node.Dataset) bool { return d.ID == id })
	in.src.setBefore(before)
	return reached
}

// passIn runs a pass of in in the background.
func passIn(ctx context.Context, in *datasetInstance) <-chan passResult[node.DatasetReport] {
	return inBackground(func() (node.DatasetReport, error) { return in.n.HarvestDatasets(ctx, "src") })
}

// takeOver runs in's pass until the lease is free, and returns it and how
// long it waited.
func takeOver(t *testing.T, in *datasetInstance) (node.DatasetReport, time.Duration) {
	t.Helper()
	rep, waited, err := untilFree(t, fmt.Sprintf("%s never took the lease over", in.name),
		func() (node.DatasetReport, error) { return in.n.HarvestDatasets(t.Context(), "src") })
	if err != nil {
		t.Fatalf("%s's pass: %v", in.name, err)
	}
	return rep, waited
}

func datasetCounts(r node.DatasetReport) [5]int {
	return [5]int{r.Registered, r.Updated, r.Archived, r.Unchanged, r.Failed}
}

// registered checks that every version of every dataset is registered once:
// 9 resource maps, one per version, and one create event per object.
func (c *datasetCluster) registered(ins ...*datasetInstance) {
	c.t.Helper()
	ctx := c.t.Context()
	s := adapter.PublicSession()
	maps, err := ins[0].n.ListObjects(ctx, s, adapter.ListQuery{FormatID: datapackage.FormatORE, Count: 100})
	if err != nil || maps.Total != 9 {
		c.t.Fatalf("resource maps: %v, %v; want 9 (8 datasets, d0 in two versions)", maps.Total, err)
	}
	all, err := ins[0].n.ListObjects(ctx, s, adapter.ListQuery{Count: 1000})
	if err != nil {
		c.t.Fatal(err)
	}
	if n := createEvents(c.t, 1000, ins); n != all.Total {
		c.t.Errorf("%d create events for %d objects: an object was registered twice, or without its event", n, all.Total)
	}
}

// TestDatasetLeaseTakeover: while A walks the source, B's pass is refused and
// walks nothing; A stopped (its context cancelled, releasing the lease, or
// killed, leaving it to expire), B takes the lease at a later epoch and walks
// the source again from the same mark (a walk has no cursor), registering
// what A did not; a restarted instance keeps the mark and the time of the
// last walk of everything.
func TestDatasetLeaseTakeover(t *testing.T) {
	t.Parallel()
	eachCrash(t, testDatasetLeaseTakeover)
}

func testDatasetLeaseTakeover(t *testing.T, crash bool) {
	const ttl = 1500 * time.Millisecond
	c := newDatasetCluster(t)
	a, b := c.start("A", ttl, 0), c.start("B", ttl, 0)
	reached := holdDatasetAt(a, "d4")
	ctxA, stopA := context.WithCancel(t.Context())
	doneA := passIn(ctxA, a)
	wait(t, reached, "A to reach d4")

	rep, err := b.n.HarvestDatasets(t.Context(), "src")
	if !errors.Is(err, node.ErrHarvestBusy) || b.src.walked.Load() != 0 {
		t.Fatalf("B's pass while A walks: %+v, %v, %d walks; want ErrHarvestBusy and no walk", rep, err, b.src.walked.Load())
	}
	if l := c.lease(); l.Holder != "A" || l.Epoch != 1 {
		t.Fatalf("the lease while A walks: %+v", l)
	}
	if held, epoch := a.gauge(t, "d1bridge_dataset_lease_held"), a.gauge(t, "d1bridge_dataset_lease_epoch"); held != 1 || epoch != 1 {
		t.Errorf("A's lease gauges while it walks: held %v, epoch %v; want 1, 1", held, epoch)
	}
	if held := b.gauge(t, "d1bridge_dataset_lease_held"); held == 1 {
		t.Errorf("B's lease gauge says it holds the lease A holds")
	}

	a.cat.crashed.Store(crash)
	stopA()
	ra := <-doneA
	// d0's first version was written before its second was read; the
	// group gathered after it (d0's second version, d1 to d3) never is.
	if !errors.Is(ra.err, context.Canceled) || datasetCounts(ra.rep) != [5]int{1, 0, 0, 0, 0} || ra.rep.Epoch != 1 {
		t.Fatalf("A stopped: %+v, %v; want 1 registered at epoch 1 and the context's error", ra.rep, ra.err)
	}
	if held := a.gauge(t, "d1bridge_dataset_lease_held"); held != 0 {
		t.Errorf("A's lease gauge after its pass: %v", held)
	}

	rb, waited := takeOver(t, b)
	checkWaited(t, crash, waited, ttl)
	if walks := c.src.walks(); len(walks) != 2 || !walks[1].IsZero() {
		t.Errorf("the walks since %v; want A's and B's, both of everything (A left no mark)", walks)
	}
	// d0's first version is A's: unchanged.
	if datasetCounts(rb) != [5]int{7, 1, 0, 1, 0} || rb.Epoch != 2 || !rb.Since.IsZero() {
		t.Errorf("B's pass: %+v; want at epoch 2 a walk of everything: 7 registered, 1 updated (d0), 1 unchanged", rb)
	}
	c.registered(a, b)
	c.log.checkTakenOver(t, crash)
	l := c.lease()
	if l.Holder != "" || l.Epoch != 2 || !strings.Contains(l.State, `"mark":"`+t0.Add(7*time.Minute).Format(time.RFC3339)) ||
		!strings.Contains(l.State, `"full":"`) || !strings.Contains(l.State, `"ended":"`) {
		t.Errorf("the lease after B's complete pass: %+v; want released, the mark at d7, the walk of everything and the pass's end", l)
	}

	// A restart keeps the mark: its first pass asks for what changed since,
	// not for everything.
	a.close()
	b.close()
	r := c.start("R", ttl, 0)
	rr, err := r.n.HarvestDatasets(t.Context(), "src")
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(6 * time.Minute); !rr.Since.Equal(want) || rr.Epoch != 3 || datasetCounts(rr) != [5]int{0, 0, 0, 2, 0} {
		t.Errorf("the restarted instance's pass: %+v; want since %v (the mark less the overlap), 2 unchanged, epoch 3", rr, want)
	}
	if got := r.m.Progress().HarvestLastSuccess; got.IsZero() {
		t.Error("the restarted instance's last harvest success is not set after its pass")
	}
}

// TestDatasetLeaseLost: A, cut off from the catalog in the middle of a walk
// (its renewals fail), loses the lease to B; A, back, writes nothing more
// and reports ErrLeaseLost.
func TestDatasetLeaseLost(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	c := newDatasetCluster(t)
	a, b := c.start("A", ttl, 0), c.start("B", ttl, 0)
	reached := make(chan struct{})
	back := newComeBack(t) // before the instances close
	var once sync.Once
	a.src.setBefore(func(ctx context.Context, d *node.Dataset) error {
		if d.ID == "d4" {
			once.Do(func() {
				a.cat.paused.Store(true)
				close(reached)
				<-back.back // A stalls here, its lease running out; then it goes on
			})
		}
		return nil
	})
	doneA := passIn(t.Context(), a)
	wait(t, reached, "A to reach d4")
	applied := a.cat.applies.Load()
	if applied == 0 {
		t.Fatal("A wrote nothing before its stall: d0's first version is written before its second is read")
	}

	rb, _ := takeOver(t, b)
	if rb.Epoch != 2 || datasetCounts(rb) != [5]int{7, 1, 0, 1, 0} {
		t.Fatalf("B's pass: %+v; want at epoch 2 7 registered, d0 updated, d0's first version (A's) unchanged", rb)
	}

	a.cat.paused.Store(false)
	back.now()
	ra := <-doneA
	if !errors.Is(ra.err, node.ErrLeaseLost) || ra.rep.Epoch != 1 || datasetCounts(ra.rep) != [5]int{1, 0, 0, 0, 0} {
		t.Fatalf("A after its stall: %+v, %v; want ErrLeaseLost, d0's first version alone registered", ra.rep, ra.err)
	}
	if got := a.cat.applies.Load(); got != applied {
		t.Errorf("A asked the catalog to write %d more batches after it lost the lease", got-applied)
	}
	c.registered(a, b)
	c.log.check(t, false)
	if l := c.lease(); l.Epoch != 2 || l.Holder != "" || !strings.Contains(l.State, `"mark":"`) {
		t.Errorf("the lease after B's pass and A's return: %+v", l)
	}
}

// TestDatasetLeaseBackground: two instances' background loops over one source
// take turns: the lease is never held by both, its epoch only grows, the
// interval is shared (about one walk per interval between them, not one
// each), and the instance whose turn it was not keeps its last-success time
// up to date (the stalled-harvest alert does not fire on it).
func TestDatasetLeaseBackground(t *testing.T) {
	t.Parallel()
	const interval = 300 * time.Millisecond
	c := newDatasetCluster(t)
	ins := []*datasetInstance{c.start("A", time.Second, interval), c.start("B", time.Second, interval)}
	for _, in := range ins {
		in.src.setBefore(func(ctx context.Context, d *node.Dataset) error {
			time.Sleep(5 * time.Millisecond) // a walk takes a while
			return nil
		})
	}
	const run = 3 * time.Second
	background(t, c.log, run, ins, c.registered)
	if n := len(c.src.walks()); n < 3 || n > int(run/interval)+1 {
		t.Errorf("%d walks in %v at an interval of %v between two instances; want about one per interval", n, run, interval)
	}
	if walks := c.src.walks(); len(walks) > 1 && walks[1].IsZero() {
		t.Errorf("the second walk was of everything (since %v): the mark was not shared", walks)
	}
	ended := time.Time{}
	if err := unmarshalEnded(c.lease().State, &ended); err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if got := in.m.Progress().HarvestLastSuccess; got.Before(ended.Add(-1500 * time.Millisecond)) {
			t.Errorf("%s's last harvest success %v, the last pass of the instances ended at %v", in.name, got, ended)
		}
	}
}

// TestDatasetLeaseMetrics: an instance that finds the lease held by another
// takes the end of the holder's last complete pass as its last harvest
// success, so that it does not look stalled; it counts no pass of its own.
func TestDatasetLeaseMetrics(t *testing.T) {
	t.Parallel()
	c := newDatasetCluster(t)
	a, b := c.start("A", 5*time.Second, 0), c.start("B", 5*time.Second, 0)
	if _, err := a.n.HarvestDatasets(t.Context(), "src"); err != nil {
		t.Fatal(err)
	}
	var ended time.Time
	if err := unmarshalEnded(c.lease().State, &ended); err != nil || ended.IsZero() {
		t.Fatalf("the lease's state %q: %v", c.lease().State, err)
	}
	if got := b.m.Progress().HarvestLastSuccess; !got.IsZero() {
		t.Fatalf("B's last success %v before it saw the lease", got)
	}
	reached := holdDatasetAt(a, "d7")
	ctxA, stopA := context.WithCancel(t.Context())
	defer stopA()
	doneA := passIn(ctxA, a)
	wait(t, reached, "A's second pass")
	if _, err := b.n.HarvestDatasets(t.Context(), "src"); !errors.Is(err, node.ErrHarvestBusy) {
		t.Fatalf("B's pass while A holds the lease: %v", err)
	}
	p := b.m.Progress()
	if !p.HarvestLastSuccess.Equal(ended) || len(p.HarvestPasses) != 0 {
		t.Errorf("B after its pass was refused: last success %v, passes %v; want %v, none", p.HarvestLastSuccess, p.HarvestPasses, ended)
	}
	stopA()
	<-doneA
	if got := a.m.Progress().HarvestPasses; got[metrics.HarvestOK] != 1 || got[metrics.HarvestFailed] != 1 {
		t.Errorf("A's passes %v; want one ok, one stopped", got)
	}
}

// TestDatasetLeaseArchivesWhatAnotherRegistered: a walk of everything
// archives the datasets the source no longer holds, among them those another
// instance registered since this one's last walk.
func TestDatasetLeaseArchivesWhatAnotherRegistered(t *testing.T) {
	t.Parallel()
	c := newDatasetCluster(t)
	c.full = time.Nanosecond // every pass walks everything
	a, b := c.start("A", 5*time.Second, 0), c.start("B", 5*time.Second, 0)
	if rep, err := a.n.HarvestDatasets(t.Context(), "src"); err != nil || rep.Registered != 8 {
		t.Fatalf("A's first pass: %+v, %v", rep, err)
	}
	c.src.mu.Lock()
	c.src.list = append(c.src.list, &node.Dataset{ID: "d9", Version: "1", Modified: t0.Add(time.Hour),
		Files: []node.Found{{Key: "f8", FileName: "data.txt", Size: -1}}})
	c.src.mu.Unlock()
	if rep, err := b.n.HarvestDatasets(t.Context(), "src"); err != nil || rep.Registered != 1 || rep.Epoch != 2 {
		t.Fatalf("B's pass: %+v, %v; want d9 registered at epoch 2", rep, err)
	}
	c.src.mu.Lock()
	c.src.list = c.src.list[:len(c.src.list)-1]
	c.src.mu.Unlock()
	rep, err := a.n.HarvestDatasets(t.Context(), "src")
	if err != nil || rep.Archived != 1 || rep.Epoch != 3 {
		t.Fatalf("A's pass after d9 went: %+v, %v; want d9, which B registered, archived", rep, err)
	}
	if sm, err := a.n.SystemMetadata(t.Context(), adapter.PublicSession(), "resource_map_d9@v1"); err != nil || !sm.Archived {
		t.Fatalf("d9's resource map after it went: %+v, %v", sm, err)
	}
}

// TestDatasetWithoutLeases: a catalog without Leases harvests as before: no
// epoch, the mark in memory, a restart walks everything again.
func TestDatasetWithoutLeases(t *testing.T) {
	dir := t.TempDir()
	e := newHarvestEnvLeases(t, dir, false)
	src := newDatasetSource()
	for i := range 9 {
		e.put(node.Found{Key: fmt.Sprintf("f%d", i)}, []byte(fmt.Sprint("bytes of f", i)))
	}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "src"})
	if rep := e.datasets("src"); rep.Epoch != 0 || datasetCounts(rep) != [5]int{8, 1, 0, 0, 0} {
		t.Fatalf("first pass: %+v", rep)
	}
	if rep := e.datasets("src"); rep.Epoch != 0 || !rep.Since.Equal(t0.Add(6*time.Minute)) || datasetCounts(rep) != [5]int{0, 0, 0, 2, 0} {
		t.Fatalf("second pass: %+v; want since the mark less the overlap", rep)
	}
	e.close()
	e = newHarvestEnvLeases(t, dir, false)
	e.n.StartDatasets(src, node.DatasetOptions{Name: "src"})
	if rep := e.datasets("src"); !rep.Since.IsZero() || datasetCounts(rep) != [5]int{0, 0, 0, 9, 0} {
		t.Fatalf("pass after a restart without leases: %+v; want a walk of everything", rep)
	}
}

// TestDatasetLeaseRestartSQLite: on the embedded catalog (SQLite, which has
// Leases), a restart keeps the mark, and a full walk is not due again before
// FullInterval.
func TestDatasetLeaseRestartSQLite(t *testing.T) {
	dir := t.TempDir()
	e := newHarvestEnv(t, dir)
	src := newDatasetSource()
	for i := range 9 {
		e.put(node.Found{Key: fmt.Sprintf("f%d", i)}, []byte(fmt.Sprint("bytes of f", i)))
	}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "src"})
	if rep := e.datasets("src"); rep.Epoch != 1 || datasetCounts(rep) != [5]int{8, 1, 0, 0, 0} {
		t.Fatalf("first pass: %+v", rep)
	}
	e.close()
	e = newHarvestEnv(t, dir)
	e.n.StartDatasets(src, node.DatasetOptions{Name: "src"})
	if rep := e.datasets("src"); rep.Epoch != 2 || !rep.Since.Equal(t0.Add(6*time.Minute)) || datasetCounts(rep) != [5]int{0, 0, 0, 2, 0} {
		t.Fatalf("pass after a restart: %+v; want since the mark less the overlap at epoch 2", rep)
	}
	// The time of the last walk of everything is kept too: with a
	// FullInterval of a minute, the next pass after a restart walks only
	// what changed; a FullInterval shorter than the time since walks all.
	e.close()
	e = newHarvestEnv(t, dir)
	e.n.StartDatasets(src, node.DatasetOptions{Name: "src", FullInterval: time.Minute})
	if rep := e.datasets("src"); rep.Since.IsZero() {
		t.Fatalf("pass after a restart with a full walk a moment ago: %+v; want since the mark", rep)
	}
	e.close()
	e = newHarvestEnv(t, dir)
	e.n.StartDatasets(src, node.DatasetOptions{Name: "src", FullInterval: time.Nanosecond})
	if rep := e.datasets("src"); !rep.Since.IsZero() || datasetCounts(rep) != [5]int{0, 0, 0, 9, 0} {
		t.Fatalf("pass after a restart with a full walk due: %+v; want a walk of everything", rep)
	}
}

// unmarshalEnded reads the end of the last complete pass from a lease's
// state.
func unmarshalEnded(state string, ended *time.Time) error {
	var st struct {
		Ended time.Time `json:"ended"`
	}
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		return err
	}
	*ended = st.Ended
	return nil
}
