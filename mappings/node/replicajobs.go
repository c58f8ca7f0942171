package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/durable"
)

// Queue is durable background work kept in the catalog and worked by every
// instance that shares it (sqlcatalog implements it). A job is queued, then
// running under one instance's lease, which that instance renews while the
// job runs; it ends done or failed. A job whose lease expires (its instance
// died) is taken over by any instance; every write of a running job's outcome
// is fenced by its attempt, so an instance that lost a job cannot end it.
type Queue interface {
	// Enqueue adds j, durably, unless a job of its kind and key is queued or
	// running: then ErrJobActive, and nothing is added. admit, when not nil,
	// runs first, serialized with every other Enqueue of j.Kind on every
	// instance, with the sum of the weights of that kind's queued and running
	// jobs; an error from it refuses j and is returned.
	Enqueue(ctx context.Context, j NewJob, admit func(ctx context.Context, active int64) error) (int64, error)
	// EnqueueAll adds jobs in one transaction, all or none, skipping those
	// whose kind and key are queued or running already.
	EnqueueAll(ctx context.Context, jobs []NewJob) error
	// SetWeight changes the weight of job id (what admit is given).
	SetWeight(ctx context.Context, id, weight int64) error
	// Count counts the jobs of kind whose key begins with keyPrefix, by state.
	Count(ctx context.Context, kind, keyPrefix string) (JobCounts, error)
	// Work runs h for the jobs of kind, up to o.Workers at once in this
	// process, until StopWork; once per kind.
	Work(kind string, o WorkOptions, h JobHandler) error
	// StopWork stops every worker of this process and waits for them: the
	// jobs they run are cut short (their context is cancelled) and go back to
	// the queue, their attempt not counted.
	StopWork()
}

// NewJob is a job to queue.
type NewJob struct {
	Kind, Key string
	Payload   []byte
	// Weight is what the job holds while queued or running (a replica's
	// bytes): admit sees the sum.
	Weight int64
	// MaxAttempts is how many times the job runs before it ends failed; an
	// attempt cut short by its instance's death counts, one cut short by a
	// shutdown does not. 0: 1.
	MaxAttempts int
}

// Job is a job a worker runs.
type Job struct {
	ID                   int64
	Kind, Key            string
	Payload              []byte
	Weight               int64
	Attempt, MaxAttempts int // Attempt counts from 1
	// TakenFrom is the instance whose lease on the job expired, when this
	// attempt took it over.
	TakenFrom string
}

// JobCounts are jobs by state.
type JobCounts struct{ Queued, Running, Done, Failed int }

// Active is the jobs queued or running.
func (c JobCounts) Active() int { return c.Queued + c.Running }

// WorkOptions are how an instance works one kind of job.
type WorkOptions struct {
	// Workers is how many jobs of the kind run at once here; 0: 1.
	Workers int
	// Lease is how long a running job stays this instance's without a renewal;
	// it is renewed every third of it. A job whose instance died is taken over
	// once its lease has expired. 0: 2 minutes.
	Lease time.Duration
	// Poll is how often idle workers look for jobs other instances queued
	// (jobs queued here wake them at once). 0: 1s.
	Poll time.Duration
	// MinBackoff is the wait before the second attempt; it doubles with every
	// attempt, up to MaxBackoff. 0: 30s and 1h.
	MinBackoff, MaxBackoff time.Duration
	// Log is where the queue logs what it cannot write; nil: nowhere.
	Log *slog.Logger
}

// JobHandler runs the jobs of one kind.
type JobHandler interface {
	// Run does the job. nil ends it done; an error runs it again after a
	// backoff, unless it is Permanent or the last attempt: then it ends failed.
	// Run returns soon after ctx ends (a shutdown, or the lease lost).
	Run(ctx context.Context, j *Job) error
	// Failed is told once of a job that ended failed: err is Run's last error,
	// or ErrJobAbandoned when its last attempt's instance died.
	Failed(ctx context.Context, j *Job, err error)
}

var (
	// ErrJobActive refuses a job whose kind and key are queued or running.
	ErrJobActive = errors.New("a job of this kind and key is queued or running")
	// ErrJobAbandoned ends a job whose last attempt's instance died.
	ErrJobAbandoned = errors.New("the instance running the last attempt stopped renewing its lease")
)

// Permanent marks a Run error that another attempt cannot cure.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// IsPermanent reports whether err is marked Permanent.
func IsPermanent(err error) bool { return errors.As(err, new(permanent)) }

// queue is the catalog's job queue; NotImplemented when it keeps none.
func (n *Node) queue() (Queue, error) {
	q, ok := n.cat.(Queue)
	if !ok {
		return nil, adapter.Errorf(adapter.NotImplemented, "this catalog keeps no job queue")
	}
	return q, nil
}

// The kinds of jobs of a node.
const (
	jobReplicate    = "replicate"
	jobReindex      = "reindex"       // a batch: plans the ranges and waits for them
	jobReindexRange = "reindex-range" // a range of a batch
)

// work starts working kind with h, once per node; false when the catalog
// keeps no queue or the node is closing.
func (n *Node) work(kind string, o WorkOptions, h JobHandler) bool {
	q, err := n.queue()
	if err != nil {
		return false
	}
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.working[kind] || r.ctx.Err() != nil {
		return r.working[kind]
	}
	o.Log = n.log
	if err := q.Work(kind, o, h); err != nil {
		n.log.Error("working the job queue", "kind", kind, "err", err)
		return false
	}
	r.working[kind], r.stopWork = true, q.StopWork
	return true
}

// StartWork makes this node work the jobs in the catalog's queue, which every
// instance sharing the catalog works: replication (copies, and fetches of
// replicas' system metadata) and reindex. Call it once
// at start, after SetReplication: replication jobs need its registry, token
// and coordinating node (a reload's settings reach the jobs that start
// after it). Before, the queue takes jobs and nothing runs them here.
//
// It first moves the replication jobs an earlier version kept as files in
// JobsDir into the queue, and removes the files; it returns how many. A file
// that cannot be read is logged and renamed with the suffix .bad, and a
// half-written one is removed; nothing here stops the start.
func (n *Node) StartWork() int {
	moved := n.migrateJobFiles()
	n.workReplication()
	n.workRefreshMeta()
	n.workReindex()
	return moved
}

// jobRecord is a replication job's payload in the queue, and the file of
// earlier versions (JobsDir/<sha256 of the PID>.json): what any instance
// needs to run it.
type jobRecord struct {
	SourceNode string    `json:"sourceNode"`
	Subject    string    `json:"subject"` // the caller of replicate, for the event log
	Address    string    `json:"address,omitempty"`
	UserAgent  string    `json:"userAgent,omitempty"`
	Accepted   time.Time `json:"accepted"`
	// SystemMetadata is the CN's system metadata, as a v2 document.
	SystemMetadata string `json:"systemMetadata"`
}

const (
	jobExt = ".json"
	badExt = ".bad" // a job file that could not be read, set aside
)

// migrateJobFiles moves the job files of JobsDir into the queue.
func (n *Node) migrateJobFiles() int {
	r := n.repl
	r.mu.Lock()
	done := r.migrated
	r.migrated = true
	r.mu.Unlock()
	cfg := r.settings()
	if done || cfg.JobsDir == "" {
		return 0
	}
	entries, err := os.ReadDir(cfg.JobsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		n.log.Error("reading the replication job files; none moved to the queue", "dir", cfg.JobsDir, "err", err)
		return 0
	}
	q, err := n.queue()
	if err != nil {
		n.log.Error("replication job files found, and no queue to move them to", "dir", cfg.JobsDir, "err", err)
		return 0
	}
	moved := 0
	for _, e := range entries {
		name, file := e.Name(), filepath.Join(cfg.JobsDir, e.Name())
		switch {
		case e.IsDir():
			continue
		case strings.HasPrefix(name, durable.TempPrefix):
			os.Remove(file) // a job file a crash left half written: that job was not acknowledged
			continue
		case !strings.HasSuffix(name, jobExt):
			continue
		}
		j, err := n.loadJob(file)
		if err != nil {
			n.log.Error("a replication job file cannot be read; set aside", "file", file+badExt, "err", err)
			if err := os.Rename(file, file+badExt); err != nil {
				n.log.Error("setting aside a replication job file", "file", file, "err", err)
			}
			continue
		}
		pid := j.sm.Identifier
		_, err = q.Enqueue(r.ctx, NewJob{Kind: jobReplicate, Key: n.replicaKey(pid), Payload: j.payload, Weight: int64(j.sm.Size),
			MaxAttempts: maxAttempts(cfg)}, nil)
		if err != nil && !errors.Is(err, ErrJobActive) { // active: moved before, the file's removal cut short
			n.log.Error("a replication job file cannot be moved to the queue; kept", "pid", pid, "file", file, "err", err)
			continue
		}
		if err := durable.Remove(file); err != nil {
			n.log.Error("removing a replication job file moved to the queue", "pid", pid, "file", file, "err", err)
		}
		n.log.Info("replication job moved from its file to the queue", "pid", pid, "source", j.source, "file", file)
		moved++
	}
	if err := os.Remove(cfg.JobsDir); err == nil { // gone once empty
		durable.SyncDir(filepath.Dir(cfg.JobsDir))
	}
	return moved
}

// loadJob reads a job file, checked as a queued job is.
func (n *Node) loadJob(file string) (*replicaJob, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return n.decodeJob(data)
}

// decodeJob reads a job's payload back into a job.
func (n *Node) decodeJob(data []byte) (*replicaJob, error) {
	var rec jobRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, err
	}
	sm := &adapter.SystemMetadata{}
	if err := adapter.Decode(strings.NewReader(rec.SystemMetadata), sm); err != nil {
		return nil, fmt.Errorf("systemMetadata: %w", err)
	}
	switch {
	case adapter.CheckIdentifier(sm.Identifier) != nil:
		return nil, fmt.Errorf("systemMetadata: identifier %q is not valid", sm.Identifier)
	case strings.TrimSpace(rec.SourceNode) == "":
		return nil, errors.New("no sourceNode")
	}
	if _, ok := adapter.CanonicalAlgorithm(sm.Checksum.Algorithm); !ok {
		return nil, fmt.Errorf("systemMetadata: checksum algorithm %q is not supported", sm.Checksum.Algorithm)
	}
	s := &adapter.Session{Subject: rec.Subject, Subjects: []string{rec.Subject}, Address: rec.Address, UserAgent: rec.UserAgent}
	return &replicaJob{n: n, s: s, sm: sm, source: rec.SourceNode, payload: data}, nil
}
