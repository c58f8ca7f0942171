package sqlcatalog

// The workers of the job queue (# Jobs in jobs.go): Work starts them for a
// kind; each claims the oldest due job, runs it while renewing its lease, and
// writes how it ended. StopWork stops them.

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/mappings/node"
)

// jobQueue is a Catalog's queue: its workers and whom they hold jobs as.
type jobQueue struct {
	c      *Catalog
	holder string

	mu      sync.Mutex
	ctx     context.Context // the workers' lifetime
	cancel  context.CancelFunc
	kinds   map[string]*kindWork
	stopped bool
	wg      sync.WaitGroup
}

// kindWork is how this process works one kind.
type kindWork struct {
	kind string
	o    node.WorkOptions
	h    node.JobHandler
	log  *slog.Logger
	wake chan struct{}
}

func newJobQueue(c *Catalog) *jobQueue {
	ctx, cancel := context.WithCancel(context.Background())
	return &jobQueue{c: c, holder: newHolder(), ctx: ctx, cancel: cancel, kinds: map[string]*kindWork{}}
}

func (c *Catalog) queue() *jobQueue { return c.jobs.Load() }

// newHolder names this process in the leases it takes: host, pid and a
// random part, since a restarted process may get the same pid.
func newHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Work implements node.Queue.
func (c *Catalog) Work(kind string, o node.WorkOptions, h node.JobHandler) error {
	q := c.queue()
	ctx, cancel := context.WithTimeout(q.ctx, time.Minute)
	defer cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.stopped:
		return errors.New("sqlcatalog: the queue's workers were stopped")
	case q.kinds[kind] != nil:
		return fmt.Errorf("sqlcatalog: the %s jobs are worked already", kind)
	}
	if len(q.kinds) == 0 && c.d == sqliteDialect {
		// One process per SQLite catalog: a running job is an earlier run's.
		if _, err := c.execJobs(ctx, `UPDATE jobs SET expires = 0 WHERE state = 'running'`); err != nil {
			return fmt.Errorf("sqlcatalog: taking back the jobs of an earlier run: %w", err)
		}
	}
	o.Workers = max(o.Workers, 1)
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 30 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	k := &kindWork{kind: kind, o: o, h: h, log: cmp.Or(o.Log, slog.New(slog.DiscardHandler)), wake: make(chan struct{}, 1)}
	q.kinds[kind] = k
	for range o.Workers {
		q.wg.Add(1)
		go func() {
			defer q.wg.Done()
			q.worker(k)
		}()
	}
	return nil
}

// StopWork implements node.Queue.
func (c *Catalog) StopWork() {
	// A new queue takes its place, for work started again.
	q := c.jobs.Swap(newJobQueue(c))
	q.mu.Lock()
	q.stopped = true
	q.cancel()
	q.mu.Unlock()
	q.wg.Wait()
}

// wake tells this process's idle workers of kind that a job was queued.
func (q *jobQueue) wake(kind string) {
	q.mu.Lock()
	k := q.kinds[kind]
	q.mu.Unlock()
	if k != nil {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// worker claims and runs jobs of k.kind until the queue stops.
func (q *jobQueue) worker(k *kindWork) {
	var lastPrune time.Time
	for q.ctx.Err() == nil {
		if time.Since(lastPrune) > time.Hour {
			lastPrune = time.Now()
			q.prune(k)
		}
		q.abandon(k)
		j, err := q.claim(k)
		if err != nil && q.ctx.Err() == nil {
			k.log.Error("claiming a job", "kind", k.kind, "err", err)
		}
		if j != nil {
			q.run(k, j)
			continue
		}
		t := time.NewTimer(jitter(k.o.Poll))
		select {
		case <-q.ctx.Done():
		case <-k.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// jitter is d ± 20%, so that instances do not poll in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*mrand.Float64()))
}

// errLost cancels a job whose lease this process lost.
var errLost = errors.New("the job's lease was lost")

// run runs j under its lease, renewed every third of it, and writes how it
// ended.
func (q *jobQueue) run(k *kindWork, j *node.Job) {
	ctx, cancel := context.WithCancelCause(q.ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		q.renew(ctx, cancel, k, j)
	}()
	err := safeRun(ctx, k.h, j)
	cancel(nil)
	<-renewed
	switch {
	case errors.Is(context.Cause(ctx), errLost):
		k.log.Warn("a job's lease was lost; another instance may run it", "kind", j.Kind, "key", j.Key, "attempt", j.Attempt, "err", err)
	case err != nil && q.ctx.Err() != nil:
		// Cut short by the shutdown: back to the queue, the attempt not counted.
		q.end(k, j, `state = 'queued', attempt = attempt - 1, run_at = ?, holder = '', expires = 0`, q.c.nowMillis())
	case err == nil:
		q.end(k, j, `state = 'done', ended = ?, expires = 0, error = ''`, q.c.nowMillis())
	case node.IsPermanent(err) || j.Attempt >= j.MaxAttempts:
		// Told before it is written: at least once, should this process die.
		q.failed(k, j, err)
		q.end(k, j, `state = 'failed', ended = ?, expires = 0, error = ?`, q.c.nowMillis(), err.Error())
	default:
		backoff := k.o.MinBackoff << min(j.Attempt-1, 30)
		if backoff <= 0 || backoff > k.o.MaxBackoff {
			backoff = k.o.MaxBackoff
		}
		at := q.c.now().Add(jitter(backoff)).UnixMilli()
		q.end(k, j, `state = 'queued', run_at = ?, holder = '', expires = 0, error = ?`, at, err.Error())
	}
}

// safeRun runs the handler, a panic being its error.
func safeRun(ctx context.Context, h node.JobHandler, j *node.Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the job panicked: %v", p)
		}
	}()
	return h.Run(ctx, j)
}

// failed tells the handler of a job that ended failed, with a context the
// shutdown does not cut.
func (q *jobQueue) failed(k *kindWork, j *node.Job, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), time.Minute)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			k.log.Error("a job's failure handler panicked", "kind", j.Kind, "key", j.Key, "panic", p)
		}
	}()
	k.h.Failed(ctx, j, err)
}

// renew renews j's lease every third of it until ctx ends; when the lease is
// lost, or cannot be renewed before it ends, it cancels the job.
func (q *jobQueue) renew(ctx context.Context, cancel context.CancelCauseFunc, k *kindWork, j *node.Job) {
	lease := k.o.Lease
	expires := time.Now().Add(lease)
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, lease/3)
		n, err := q.c.execJobs(rctx, `UPDATE jobs SET expires = ? WHERE id = ? AND holder = ? AND attempt = ? AND state = 'running'`,
			q.c.now().Add(lease).UnixMilli(), j.ID, q.holder, j.Attempt)
		rcancel()
		switch {
		case err == nil && n == 1:
			expires = time.Now().Add(lease)
		case err == nil:
			cancel(errLost)
			return
		case ctx.Err() != nil:
			return
		case time.Until(expires) < lease/3:
			k.log.Error("a job's lease cannot be renewed; the job stops", "kind", j.Kind, "key", j.Key, "err", err)
			cancel(errLost)
			return
		default:
			k.log.Warn("renewing a job's lease", "kind", j.Kind, "key", j.Key, "err", err)
		}
	}
}
