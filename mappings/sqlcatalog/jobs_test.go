package sqlcatalog

// The job queue (jobs.go) on SQLite and on PostgreSQL: uniqueness and admission,
// retries with backoff, permanent failures, an instance that dies mid-job and
// one that stops, and, on PostgreSQL, instances claiming at once.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

// handlerFunc is a node.JobHandler of two functions; failed may be nil.
type handlerFunc struct {
	run    func(ctx context.Context, j *node.Job) error
	failed func(ctx context.Context, j *node.Job, err error)
}

func (h handlerFunc) Run(ctx context.Context, j *node.Job) error { return h.run(ctx, j) }
func (h handlerFunc) Failed(ctx context.Context, j *node.Job, err error) {
	if h.failed != nil {
		h.failed(ctx, j, err)
	}
}

// jobsEnv opens catalogs on one database: SQLite (one file) or PostgreSQL (one
// schema).
type jobsEnv struct {
	t    *testing.T
	open func() *Catalog
}

func (e jobsEnv) catalog() *Catalog {
	c := e.open()
	e.t.Cleanup(func() {
		c.StopWork()
		c.Close()
	})
	return c
}

func TestJobsSQLite(t *testing.T) {
	t.Parallel()
	testJobs(t, func(t *testing.T) jobsEnv {
		path := filepath.Join(t.TempDir(), "catalog.db")
		return jobsEnv{t, func() *Catalog {
			c, err := OpenSQLite(path)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}}
	})
}

func TestJobsPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Start(t)
	testJobs(t, func(t *testing.T) jobsEnv {
		dsn := pgtest.Start(t)
		return jobsEnv{t, func() *Catalog {
			c, err := OpenPostgres(dsn, WithCache(0, 0), WithRecordCache(0))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}}
	})
	t.Run("ClaimsAtOnce", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Start(t)
		e := jobsEnv{t, func() *Catalog {
			c, err := OpenPostgres(dsn, WithCache(0, 0), WithRecordCache(0))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}}
		testClaimsAtOnce(t, e.catalog(), e.catalog(), e.catalog())
	})
	t.Run("AdmitUnderLoad", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Start(t)
		testAdmitUnderLoad(t, jobsEnv{t, func() *Catalog {
			c, err := OpenPostgres(dsn, WithCache(0, 0), WithRecordCache(0))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}}.catalog())
	})
}

// testAdmitUnderLoad: more Enqueues at once than the pool has connections,
// each admit reading the catalog (as replicate's space check does), all go
// through: the admit reads on the Enqueue's own transaction, not on a second
// connection that the Enqueues waiting on the kind's lock would all hold.
func testAdmitUnderLoad(t *testing.T, c *Catalog) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const n = 40 // the pool has 16
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.Enqueue(ctx, node.NewJob{Kind: "admit-load", Key: fmt.Sprint(i), Payload: []byte("{}"), Weight: 1, MaxAttempts: 1},
				func(ctx context.Context, active int64) error {
					_, err := c.ObjectStatistics(ctx, adapter.StatsQuery{Replicas: true})
					return err
				})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("an Enqueue among %d at once: %v", n, err)
		}
	}
}

// wait polls ok for up to d.
func wait(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
	}
}

// jobRow is the row of the job of kind and key.
func jobRow(t *testing.T, c *Catalog, kind, key string) JobRow {
	t.Helper()
	rows, err := c.Jobs(t.Context(), kind)
	if err != nil {
		t.Fatal(err)
	}
	var found []JobRow
	for _, r := range rows {
		if r.Key == key {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("jobs %s %s: %+v, want one", kind, key, found)
	}
	return found[0]
}

var fast = node.WorkOptions{Workers: 2, Lease: time.Second, Poll: 50 * time.Millisecond, MinBackoff: 100 * time.Millisecond}

func testJobs(t *testing.T, newEnv func(t *testing.T) jobsEnv) {
	t.Run("EnqueueUniqueAdmit", func(t *testing.T) {
		t.Parallel()
		c := newEnv(t).catalog()
		ctx := t.Context()
		id, err := c.Enqueue(ctx, node.NewJob{Kind: "k", Key: "a", Payload: []byte(`{"x":1}`), Weight: 10, MaxAttempts: 3}, nil)
		if err != nil || id == 0 {
			t.Fatalf("enqueue: %d %v", id, err)
		}
		if _, err := c.Enqueue(ctx, node.NewJob{Kind: "k", Key: "a", Weight: 1}, nil); !errors.Is(err, node.ErrJobActive) {
			t.Fatalf("the same key again: %v, want ErrJobActive", err)
		}
		if _, err := c.Enqueue(ctx, node.NewJob{Kind: "other", Key: "a"}, nil); err != nil {
			t.Fatalf("the same key in another kind: %v", err)
		}
		var seen int64 = -1
		if _, err := c.Enqueue(ctx, node.NewJob{Kind: "k", Key: "b", Weight: 5}, func(ctx context.Context, active int64) error {
			seen = active
			return nil
		}); err != nil || seen != 10 {
			t.Fatalf("admit saw %d (%v), want 10", seen, err)
		}
		refusal := errors.New("no room")
		if _, err := c.Enqueue(ctx, node.NewJob{Kind: "k", Key: "c", Weight: 5}, func(ctx context.Context, active int64) error {
			seen = active
			return refusal
		}); err != refusal || seen != 15 {
			t.Fatalf("a refusal: %v (saw %d), want the admit's error unchanged and 15", err, seen)
		}
		if err := c.SetWeight(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
		c.Enqueue(ctx, node.NewJob{Kind: "k", Key: "d"}, func(ctx context.Context, active int64) error { seen = active; return refusal })
		if seen != 5 {
			t.Errorf("admit saw %d after SetWeight 0, want 5", seen)
		}
		if n, err := c.Count(ctx, "k", ""); err != nil || n != (node.JobCounts{Queued: 2}) {
			t.Errorf("count: %+v %v", n, err)
		}
		if _, err := c.Enqueue(ctx, node.NewJob{Kind: "prefix", Key: "düsseldorf/1"}, nil); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Count(ctx, "prefix", "dü"); err != nil || n != (node.JobCounts{Queued: 1}) {
			t.Errorf("count of a non-ASCII prefix: %+v %v, want one queued", n, err)
		}
		// Done, the key is free again.
		ran := make(chan string, 4)
		if err := c.Work("k", fast, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			ran <- j.Key + " " + string(j.Payload)
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		wait(t, 5*time.Second, "both jobs done", func() bool { n, _ := c.Count(ctx, "k", ""); return n.Done == 2 })
		if got := []string{<-ran, <-ran}; !(got[0] == `a {"x":1}` && got[1] == "b " || got[1] == `a {"x":1}` && got[0] == "b ") {
			t.Errorf("ran %q", got)
		}
		if _, err := c.Enqueue(ctx, node.NewJob{Kind: "k", Key: "a"}, nil); err != nil {
			t.Errorf("a done job's key again: %v", err)
		}
		if err := c.Work("k", fast, handlerFunc{}); err == nil {
			t.Error("a second Work of one kind was accepted")
		}
	})

	t.Run("EnqueueAll", func(t *testing.T) {
		t.Parallel()
		c := newEnv(t).catalog()
		ctx := t.Context()
		job := func(key string) node.NewJob {
			return node.NewJob{Kind: "all", Key: key, Payload: []byte("{}"), MaxAttempts: 1}
		}
		if _, err := c.Enqueue(ctx, job("b"), nil); err != nil {
			t.Fatal(err)
		}
		// One job without a key: none of the batch is queued.
		if err := c.EnqueueAll(ctx, []node.NewJob{job("x"), job("")}); err == nil {
			t.Fatal("a batch with a job without a key was queued")
		}
		if n, err := c.Count(ctx, "all", ""); err != nil || n.Queued != 1 {
			t.Fatalf("after a refused batch: %+v %v, want the one job queued before", n, err)
		}
		// b is queued already: it is skipped, the others are added.
		if err := c.EnqueueAll(ctx, []node.NewJob{job("a"), job("b"), job("c")}); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Count(ctx, "all", ""); err != nil || n.Queued != 3 {
			t.Fatalf("after EnqueueAll: %+v %v, want a, b and c queued once each", n, err)
		}
	})
	t.Run("RetryBackoff", func(t *testing.T) {
		t.Parallel()
		c := newEnv(t).catalog()
		var mu sync.Mutex
		var at []time.Time
		if err := c.Work("k", fast, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if j.Attempt != len(at) {
				t.Errorf("attempt %d on run %d", j.Attempt, len(at))
			}
			if j.Attempt < 3 {
				return fmt.Errorf("transient %d", j.Attempt)
			}
			return nil
		}, failed: func(ctx context.Context, j *node.Job, err error) { t.Errorf("failed: %v", err) }}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(t.Context(), node.NewJob{Kind: "k", Key: "flaky", MaxAttempts: 3}, nil); err != nil {
			t.Fatal(err)
		}
		wait(t, 5*time.Second, "the job done", func() bool { return jobRow(t, c, "k", "flaky").State == jobDone })
		mu.Lock()
		defer mu.Unlock()
		// 100ms, then 200ms, each ±20%.
		if d := at[1].Sub(at[0]); d < 80*time.Millisecond {
			t.Errorf("the first retry came after %s", d)
		}
		if d := at[2].Sub(at[1]); d < 160*time.Millisecond {
			t.Errorf("the second retry came after %s", d)
		}
		if r := jobRow(t, c, "k", "flaky"); r.Attempt != 3 || r.Error != "" {
			t.Errorf("the job: %+v", r)
		}
	})

	t.Run("Failures", func(t *testing.T) {
		t.Parallel()
		c := newEnv(t).catalog()
		var mu sync.Mutex
		runs, failed := map[string]int{}, map[string]error{}
		if err := c.Work("k", fast, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			mu.Lock()
			runs[j.Key]++
			mu.Unlock()
			if j.Key == "permanent" {
				return node.Permanent(errors.New("cannot be cured"))
			}
			return errors.New("fails every time")
		}, failed: func(ctx context.Context, j *node.Job, err error) {
			mu.Lock()
			defer mu.Unlock()
			if failed[j.Key] != nil {
				t.Errorf("%s: told twice", j.Key)
			}
			failed[j.Key] = err
		}}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"permanent", "exhausted"} {
			if _, err := c.Enqueue(t.Context(), node.NewJob{Kind: "k", Key: k, MaxAttempts: 2}, nil); err != nil {
				t.Fatal(err)
			}
		}
		wait(t, 5*time.Second, "both failed", func() bool { n, _ := c.Count(t.Context(), "k", ""); return n.Failed == 2 })
		mu.Lock()
		defer mu.Unlock()
		if runs["permanent"] != 1 || runs["exhausted"] != 2 {
			t.Errorf("runs: %v, want permanent 1, exhausted 2", runs)
		}
		if !node.IsPermanent(failed["permanent"]) || failed["exhausted"] == nil || failed["exhausted"].Error() != "fails every time" {
			t.Errorf("told: %v", failed)
		}
		if r := jobRow(t, c, "k", "exhausted"); r.Error != "fails every time" || r.Attempt != 2 {
			t.Errorf("the exhausted job: %+v", r)
		}
	})

	t.Run("InstanceDies", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		a, b := e.catalog(), e.catalog()
		started, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var byA, byB []int
		// A's lease is longer than fast's, and A has one worker, which the
		// frozen handler holds: on a loaded machine (CI, with -race) a
		// renewal late by a third of a second, and once by 3 s, let the
		// lease lapse before A died, and A's other worker took the job
		// again (attempts by A [1 2]).
		leaseA := fast
		leaseA.Lease, leaseA.Workers = 3*time.Second, 1
		if err := a.Work("k", leaseA, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			mu.Lock()
			byA = append(byA, j.Attempt)
			mu.Unlock()
			close(started)
			<-release // frozen: neither its context nor anything else moves it
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Enqueue(t.Context(), node.NewJob{Kind: "k", Key: "mid-job", MaxAttempts: 3}, nil); err != nil {
			t.Fatal(err)
		}
		<-started
		holderA := jobRow(t, a, "k", "mid-job").Holder
		a.db.Close() // A dies: its handler frozen, its database gone
		died := time.Now()
		var takenFrom string
		if err := b.Work("k", fast, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			mu.Lock()
			defer mu.Unlock()
			byB, takenFrom = append(byB, j.Attempt), j.TakenFrom
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		wait(t, 10*time.Second, "the job done by B", func() bool { return jobRow(t, b, "k", "mid-job").State == jobDone })
		t.Logf("taken over and done %s after A died (lease %s)", time.Since(died).Round(time.Millisecond), leaseA.Lease)
		close(release) // A wakes up: its end must not be written
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if len(byA) != 1 || len(byB) != 1 || byB[0] != 2 {
			t.Errorf("attempts: by A %v, by B %v; want [1] and [2]", byA, byB)
		}
		if takenFrom != holderA {
			t.Errorf("B took the job from %q, want A (%q)", takenFrom, holderA)
		}
		if r := jobRow(t, b, "k", "mid-job"); r.State != jobDone || r.Attempt != 2 || r.Holder == holderA {
			t.Errorf("the job: %+v", r)
		}
	})

	t.Run("LastAttemptAbandoned", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		a, b := e.catalog(), e.catalog()
		started, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(release) })
		if err := a.Work("k", fast, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			close(started)
			<-release // frozen until the test ends
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Enqueue(t.Context(), node.NewJob{Kind: "k", Key: "once", MaxAttempts: 1}, nil); err != nil {
			t.Fatal(err)
		}
		<-started
		a.db.Close()
		told := make(chan error, 2)
		if err := b.Work("k", fast, handlerFunc{
			run: func(ctx context.Context, j *node.Job) error {
				t.Error("an abandoned last attempt ran again")
				return nil
			},
			failed: func(ctx context.Context, j *node.Job, err error) { told <- err },
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-told:
			if !errors.Is(err, node.ErrJobAbandoned) {
				t.Errorf("told %v, want ErrJobAbandoned", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the abandoned job was not ended failed")
		}
		if r := jobRow(t, b, "k", "once"); r.State != jobFailed || r.Error != node.ErrJobAbandoned.Error() {
			t.Errorf("the job: %+v", r)
		}
	})

	t.Run("LongJobKeepsItsLease", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		a := e.catalog()
		// A lease a renewal late by a second does not lose (CI, with -race,
		// has seen such), so that only a renewal that never comes would.
		long := fast
		long.Lease = 3 * time.Second
		var mu sync.Mutex
		runs := 0
		h := handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			mu.Lock()
			runs++
			mu.Unlock()
			select { // two leases long, renewed meanwhile
			case <-time.After(2 * long.Lease):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
		if err := a.Work("k", long, h); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Enqueue(t.Context(), node.NewJob{Kind: "k", Key: "long", MaxAttempts: 3}, nil); err != nil {
			t.Fatal(err)
		}
		wait(t, 5*time.Second, "the job running", func() bool { return jobRow(t, a, "k", "long").State == jobRunning })
		if a.d == postgresDialect { // SQLite: one process per catalog, no second instance
			b := e.catalog()
			if err := b.Work("k", long, h); err != nil {
				t.Fatal(err)
			}
		}
		wait(t, 20*time.Second, "the job done", func() bool { return jobRow(t, a, "k", "long").State == jobDone })
		mu.Lock()
		defer mu.Unlock()
		if r := jobRow(t, a, "k", "long"); runs != 1 || r.Attempt != 1 {
			t.Errorf("a job two leases long ran %d times, attempt %d; want once", runs, r.Attempt)
		}
	})

	t.Run("EndsAreFenced", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		a, b := e.catalog(), e.catalog()
		ctx := t.Context()
		if _, err := a.Enqueue(ctx, node.NewJob{Kind: "k", Key: "fenced", MaxAttempts: 3}, nil); err != nil {
			t.Fatal(err)
		}
		k := &kindWork{kind: "k", o: fast, log: slog.New(slog.DiscardHandler)}
		ja, err := a.queue().claim(k)
		if err != nil || ja == nil {
			t.Fatalf("A's claim: %v %v", ja, err)
		}
		if jb, err := b.queue().claim(k); err != nil || jb != nil {
			t.Fatalf("B claimed a job A holds: %v %v", jb, err)
		}
		if _, err := a.execJobs(ctx, `UPDATE jobs SET expires = 0`); err != nil { // A's lease runs out
			t.Fatal(err)
		}
		jb, err := b.queue().claim(k)
		if err != nil || jb == nil || jb.Attempt != 2 || jb.TakenFrom != a.queue().holder {
			t.Fatalf("B's claim: %+v %v", jb, err)
		}
		a.queue().end(k, ja, `state = 'done', ended = ?`, a.nowMillis())
		if r := jobRow(t, a, "k", "fenced"); r.State != jobRunning || r.Holder != b.queue().holder {
			t.Fatalf("A ended a job B holds: %+v", r)
		}
		b.queue().end(k, jb, `state = 'done', ended = ?`, b.nowMillis())
		if r := jobRow(t, a, "k", "fenced"); r.State != jobDone {
			t.Fatalf("B's end: %+v", r)
		}
	})

	t.Run("StopWorkPutsBack", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		a := e.catalog()
		started := make(chan struct{})
		if err := a.Work("k", node.WorkOptions{Lease: time.Hour, Poll: 50 * time.Millisecond}, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Enqueue(t.Context(), node.NewJob{Kind: "k", Key: "cut", MaxAttempts: 1}, nil); err != nil {
			t.Fatal(err)
		}
		<-started
		a.StopWork()
		if r := jobRow(t, a, "k", "cut"); r.State != jobQueued || r.Attempt != 0 {
			t.Fatalf("after StopWork: %+v, want queued, no attempt counted", r)
		}
		// Another instance takes it at once, though the lease was an hour.
		b := e.catalog()
		done := make(chan int, 1)
		if err := b.Work("k", fast, handlerFunc{run: func(ctx context.Context, j *node.Job) error { done <- j.Attempt; return nil }}); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-done:
			if n != 1 {
				t.Errorf("attempt %d, want 1", n)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the job put back was not run")
		}
	})
}

// testClaimsAtOnce: three instances with four workers each work 60 jobs;
// each runs once.
func testClaimsAtOnce(t *testing.T, cs ...*Catalog) {
	var mu sync.Mutex
	runs := map[string]int{}
	const jobs = 60
	for i := range jobs {
		if _, err := cs[i%len(cs)].Enqueue(t.Context(), node.NewJob{Kind: "k", Key: fmt.Sprint("j", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs {
		o := fast
		o.Workers = 4
		if err := c.Work("k", o, handlerFunc{run: func(ctx context.Context, j *node.Job) error {
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			runs[j.Key]++
			mu.Unlock()
			return nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, 20*time.Second, "every job done", func() bool { n, _ := cs[0].Count(t.Context(), "k", ""); return n.Done == jobs })
	mu.Lock()
	defer mu.Unlock()
	for k, n := range runs {
		if n != 1 {
			t.Errorf("%s ran %d times", k, n)
		}
	}
	if len(runs) != jobs {
		t.Errorf("%d jobs ran, want %d", len(runs), jobs)
	}
}
