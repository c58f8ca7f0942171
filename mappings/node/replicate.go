package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
)

// maxReplicationJobs bounds the replica copies that run at once in one
// process; more wait in the queue.
const maxReplicationJobs = 2

// Replication is what the member node needs to pull replicas (API.md §9): the
// node registry to find a source node's base URL in, the bearer token to present
// to it, and the coordinating node to report the outcome to.
type Replication struct {
	// Registry is the federation's nodes, by id; BaseURL is each one's MN base
	// URL (…/mn), without the version.
	Registry []adapter.NodeRef
	// Token is presented as a bearer token to source nodes and to the CN.
	Token string
	// CNBaseURL is the coordinating node (…/cn) to notify; empty: no notice.
	CNBaseURL string
	// Metrics records the calls to source nodes and the CN; may be nil.
	Metrics *metrics.Metrics
	// Accept is node.replicate: when false, replicate is refused.
	Accept bool
	// Policy limits the replicas accepted (node.replicationPolicy); nil, or
	// fields nil or empty: no limit. Read only.
	Policy *adapter.NodeReplicationPolicy
	// JobsDir is where earlier versions kept each accepted job in a file;
	// StartWork moves the files it finds into the catalog's queue. Empty:
	// none.
	JobsDir string
	// StallTimeout fails a copy whose source sends nothing for that long, so
	// that a stalled source does not hold a replication slot; 0: 30s.
	StallTimeout time.Duration
	// MaxAttempts is how many times a replication job runs before it ends
	// failed (a transient failure is tried again, after RetryBackoff, then
	// twice as long each time, up to an hour); 0: 5.
	MaxAttempts int
	// RetryBackoff is the wait before a job's second attempt; 0: 30s.
	RetryBackoff time.Duration
	// RescueAfter is the lease of a running job, replication or reindex: an
	// instance renews it every third of it while the job runs, and once it has
	// expired (the instance died) another instance, or this one restarted,
	// takes the job over. 0: 2 minutes. Poll is how often idle instances look
	// for jobs others queued; 0: 1s. Both apply when the node starts working
	// (StartWork).
	RescueAfter, Poll time.Duration
	// Changed is told the PIDs whose system metadata a job of the node
	// changed (a replica's, refreshed from the CN), as the writes made through
	// the API tell the authorizer (Authorizer.Invalidate), so that the
	// decisions kept on them end at once: on SQLite no change log brings
	// them. nil: nobody is told.
	Changed func(pids ...string)
}

// maxAttempts is cfg.MaxAttempts, or its default.
func maxAttempts(cfg Replication) int { return cmp.Or(cfg.MaxAttempts, 5) }

// workOptions are the options of the jobs of the node, from cfg.
func workOptions(cfg Replication, workers int) WorkOptions {
	return WorkOptions{Workers: workers, Lease: cfg.RescueAfter, Poll: cfg.Poll, MinBackoff: cfg.RetryBackoff}
}

// errStalled ends a copy whose source stopped sending.
var errStalled = errors.New("the source node stopped sending")

// replicator holds the node's replication settings and the state of its work
// on the catalog's queue.
type replicator struct {
	ctx    context.Context // the node's lifetime
	cancel context.CancelFunc

	mu       sync.Mutex
	cfg      Replication
	clients  map[string]*upstream.Client // by name and base URL
	working  map[string]bool             // the kinds of jobs this node works
	stopWork func()                      // the queue's StopWork, once working
	migrated bool                        // the job files of JobsDir were moved
	// reindexing counts the reindex jobs running here; endReindex ends the
	// running state of the metrics when the last ends.
	reindexing int
	endReindex func()
}

func newReplicator() *replicator {
	ctx, cancel := context.WithCancel(context.Background())
	return &replicator{ctx: ctx, cancel: cancel, clients: map[string]*upstream.Client{}, working: map[string]bool{}}
}

// close stops working the queue: the jobs running here are cut short and go
// back to the queue, for another instance or the next start.
func (r *replicator) close() {
	r.mu.Lock()
	r.cancel()
	stop := r.stopWork
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.clients {
		c.Close()
	}
}

// client is the upstream client for name at baseURL, made once.
func (r *replicator) client(name, baseURL string) *upstream.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := name + " " + baseURL
	if c, ok := r.clients[key]; ok {
		return c
	}
	c := upstream.New(config.Upstream{Name: name, Type: config.UpstreamDataONE, BaseURL: baseURL}, r.cfg.Metrics)
	r.clients[key] = c
	return c
}

func (r *replicator) settings() Replication {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// SetReplication sets how the node pulls replicas; it may be called again (a
// configuration reload) while jobs run: each job reads the settings once.
// IsRegisteredNode tells whether s holds a subject of a node of the registry:
// a member node that may read what it replicates (getReplica).
func (n *Node) IsRegisteredNode(s *adapter.Session) bool {
	for _, ref := range n.repl.settings().Registry {
		if slices.ContainsFunc(ref.Subjects, s.Has) {
			return true
		}
	}
	return false
}

func (n *Node) SetReplication(cfg Replication) {
	n.repl.mu.Lock()
	defer n.repl.mu.Unlock()
	cfg.Registry = append([]adapter.NodeRef(nil), cfg.Registry...)
	cfg.CNBaseURL = strings.TrimRight(cfg.CNBaseURL, "/")
	if cfg.Policy != nil {
		p := *cfg.Policy
		p.AllowedNode = slices.Clone(p.AllowedNode)
		p.AllowedObjectFormat = slices.Clone(p.AllowedObjectFormat)
		cfg.Policy = &p
	}
	n.repl.cfg = cfg
}

var _ adapter.MNReplication = (*Node)(nil)

// Replicate checks the request against node.replicate and the replication
// policy and queues the copy of sm's object from sourceNode in the catalog,
// where any instance sharing it works it; it answers once the job is durable,
// before the copy is made (API.md §9). A job for the same PID queued or running
// is IdentifierNotUnique. The job's outcome is logged, recorded in the event
// log when it fails (replication_failed), and reported to the coordinating
// node.
func (n *Node) Replicate(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, sourceNode string) error {
	pid := sm.Identifier
	if err := adapter.CheckIdentifier(pid); err != nil {
		return adapter.Errorf(adapter.InvalidRequest, "sysmeta identifier: %v", err).WithPID(pid)
	}
	if strings.TrimSpace(sourceNode) == "" {
		return adapter.Errorf(adapter.InvalidRequest, "the source node is missing").WithPID(pid)
	}
	cfg := n.repl.settings()
	// The policy comes before the identifier's checks, as in GMN.
	if err := checkPolicy(cfg, sm, sourceNode); err != nil {
		return err
	}
	if _, err := n.cat.Lookup(ctx, pid); err == nil {
		return adapter.Errorf(adapter.IdentifierNotUnique, "%q is already on this node", pid).WithPID(pid)
	} else if !adapter.IsKind(err, adapter.NotFound) {
		return err
	}
	if _, ok := adapter.CanonicalAlgorithm(sm.Checksum.Algorithm); !ok {
		return adapter.Errorf(adapter.InvalidRequest, "checksum algorithm %q is not supported; supported: %s",
			sm.Checksum.Algorithm, strings.Join(adapter.ChecksumAlgorithms, ", ")).WithPID(pid)
	}
	q, err := n.queue()
	if err != nil {
		return err
	}
	var doc bytes.Buffer
	if err := adapter.Encode(&doc, sm, 2); err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "encoding the system metadata of %q", pid).WithPID(pid)
	}
	payload, err := json.Marshal(jobRecord{SourceNode: sourceNode, Subject: s.Subject, Address: s.Address,
		UserAgent: s.UserAgent, Accepted: time.Now().UTC(), SystemMetadata: doc.String()})
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "encoding the replication job of %q", pid).WithPID(pid)
	}
	// The space check runs in the queue's transaction, serialized with every
	// other instance's: the copies under way are the queued and running jobs.
	_, err = q.Enqueue(ctx, NewJob{Kind: jobReplicate, Key: n.replicaKey(pid), Payload: payload, Weight: int64(sm.Size),
		MaxAttempts: maxAttempts(cfg)}, func(ctx context.Context, active int64) error {
		return n.checkSpace(ctx, cfg.Policy, sm, uint64(max(active, 0)))
	})
	switch {
	case errors.Is(err, ErrJobActive):
		return adapter.Errorf(adapter.IdentifierNotUnique, "%q is already being replicated to this node", pid).WithPID(pid)
	case errors.As(err, new(*adapter.Exception)): // admit's refusal
		return err
	case err != nil:
		return adapter.Wrap(adapter.ServiceFailure, err, "recording the replication job of %q", pid).WithPID(pid)
	}
	n.workReplication()
	return nil
}

// replicaKey is the queue's key of the replica of pid on this node: one job
// per PID and target node.
func (n *Node) replicaKey(pid string) string { return n.id + " " + pid }

// workReplication makes this node work the replication jobs.
func (n *Node) workReplication() {
	n.work(jobReplicate, workOptions(n.repl.settings(), maxReplicationJobs), replicationWork{n})
}

// checkPolicy applies node.replicate and the node's replication policy, in
// GMN's order (d1_gmn/app/local_replica.py), except spaceAllocated, which
// admit checks under its lock. GMN answers InvalidRequest to every refusal;
// here one by size or space is InsufficientResources and one by format
// UnsupportedType, the kinds the spec lists for replicate.
func checkPolicy(cfg Replication, sm *adapter.SystemMetadata, source string) error {
	pid := sm.Identifier
	if !cfg.Accept {
		return adapter.Errorf(adapter.InvalidRequest, "this node does not accept replicas (node.replicate is off)").WithPID(pid)
	}
	p := cfg.Policy
	if p == nil {
		return nil
	}
	if p.MaxObjectSize != nil && sm.Size > *p.MaxObjectSize {
		return adapter.Errorf(adapter.InsufficientResources, "%q has %d bytes; this node accepts replicas of at most %d bytes (maxObjectSize)",
			pid, sm.Size, *p.MaxObjectSize).WithPID(pid)
	}
	if len(p.AllowedNode) > 0 && !slices.Contains(p.AllowedNode, source) {
		return adapter.Errorf(adapter.InvalidRequest, "%q comes from %s; this node accepts replicas from these nodes only: %s",
			pid, source, strings.Join(p.AllowedNode, ", ")).WithPID(pid)
	}
	if len(p.AllowedObjectFormat) > 0 && !slices.Contains(p.AllowedObjectFormat, sm.FormatID) {
		return adapter.Errorf(adapter.UnsupportedType, "%q has format %q; this node accepts replicas of these formats only: %s",
			pid, sm.FormatID, strings.Join(p.AllowedObjectFormat, ", ")).WithPID(pid)
	}
	return nil
}

// checkSpace refuses a replica that would take the bytes of the replicas held
// (objects another node is authoritative for) and of the copies under way
// (reserved) beyond spaceAllocated; GMN counts the same.
func (n *Node) checkSpace(ctx context.Context, p *adapter.NodeReplicationPolicy, sm *adapter.SystemMetadata, reserved uint64) error {
	if p == nil || p.SpaceAllocated == nil {
		return nil
	}
	st, err := n.statistics()
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "counting the space replicas use (spaceAllocated)").WithPID(sm.Identifier)
	}
	stats, err := st.ObjectStatistics(ctx, adapter.StatsQuery{Replicas: true})
	if err != nil {
		return err
	}
	used, alloc := uint64(stats.Bytes)+reserved, *p.SpaceAllocated
	if sm.Size > alloc || used > alloc-sm.Size {
		return adapter.Errorf(adapter.InsufficientResources, "%q has %d bytes; replicas use %d of the %d bytes allocated to them (spaceAllocated), %d of those in copies under way",
			sm.Identifier, sm.Size, used, alloc, reserved).WithPID(sm.Identifier)
	}
	return nil
}

// replicaJob is one replication job, read from its payload.
type replicaJob struct {
	n       *Node
	s       *adapter.Session // the caller of replicate (the CN), for the event log
	sm      *adapter.SystemMetadata
	source  string
	payload []byte
	cfg     Replication
	id      int64 // the job's id in the queue
}

// replicationWork runs the replication jobs of the queue.
type replicationWork struct{ n *Node }

// Run copies and reports completed. A failure another attempt may cure (the
// source or the network, a ServiceFailure) is returned for a retry; any other
// is Permanent. A job cut short (a shutdown, its lease lost) ends without a
// report: it runs again, here or on another instance, and finds its replica
// if it was stored.
func (w replicationWork) Run(ctx context.Context, qj *Job) error {
	n := w.n
	j, err := n.decodeJob(qj.Payload)
	if err != nil {
		return Permanent(fmt.Errorf("the job cannot be read: %w", err))
	}
	j.cfg, j.id = n.repl.settings(), qj.ID
	pid := j.sm.Identifier
	if qj.TakenFrom != "" {
		n.log.Info("replication taken over from a stopped instance", "pid", pid, "source", j.source, "from", qj.TakenFrom, "attempt", qj.Attempt)
	}
	if err := j.copy(ctx); err != nil {
		if ctx.Err() != nil {
			n.log.Info("replication cut short; it runs again, here or on another instance", "pid", pid, "source", j.source, "err", err)
			return err
		}
		if !retryable(err) {
			return Permanent(err)
		}
		if qj.Attempt < qj.MaxAttempts {
			n.log.Warn("a replication attempt failed; it is tried again", "pid", pid, "source", j.source,
				"attempt", qj.Attempt, "maxAttempts", qj.MaxAttempts, "err", err)
		}
		return err
	}
	n.log.Info("replicated", "pid", pid, "source", j.source)
	// The notice is the only way the CN learns of the replica: one it may
	// take later (a restart, a 503) is tried again as a copy would be, and
	// the next attempt finds the replica stored and only reports it.
	if err := j.notify(ctx, adapter.ReplicaCompleted); err != nil {
		if ctx.Err() != nil || retryable(err) {
			n.log.Warn("notifying the coordinating node of a replica failed; it is tried again", "pid", pid, "attempt", qj.Attempt, "err", err)
			return err
		}
		n.log.Error("the coordinating node refused the notice of a replica", "pid", pid, "status", adapter.ReplicaCompleted, "err", err)
	}
	return nil
}

// Failed logs a job that ended failed, records replication_failed and tells
// the CN.
func (w replicationWork) Failed(ctx context.Context, qj *Job, cause error) {
	n := w.n
	j, err := n.decodeJob(qj.Payload)
	if err != nil {
		n.log.Error("replication failed; its job cannot be read", "job", qj.ID, "key", qj.Key, "err", err, "cause", cause)
		return
	}
	j.cfg, j.id = n.repl.settings(), qj.ID
	pid := j.sm.Identifier
	if j.stored(ctx) == nil {
		// The last attempt stored the replica, and its instance died before
		// it could say so: the job is done, not failed.
		n.log.Warn("replication job abandoned after its replica was stored", "pid", pid, "source", j.source, "attempts", qj.Attempt)
		if err := j.notify(ctx, adapter.ReplicaCompleted); err != nil {
			n.log.Error("notifying the coordinating node of a replica", "pid", pid, "status", adapter.ReplicaCompleted, "err", err)
		}
		return
	}
	n.log.Error("replication failed", "pid", pid, "source", j.source, "attempts", qj.Attempt, "err", cause)
	n.event(ctx, j.s, pid, adapter.EventReplicationFailed)
	if err := j.notify(ctx, adapter.ReplicaFailed); err != nil {
		n.log.Error("notifying the coordinating node of a replica", "pid", pid, "status", adapter.ReplicaFailed, "err", err)
	}
}

// retryable tells a failure another attempt may cure: the source node or the
// network (ServiceFailure, which timeouts, stalls and 5xx are), or space.
func retryable(err error) bool {
	var ex *adapter.Exception
	if !errors.As(err, &ex) {
		return true
	}
	return ex.Kind == adapter.ServiceFailure || ex.Kind == adapter.InsufficientResources
}

// stored returns nil when pid is in the catalog as j's replica (an earlier
// or a concurrent attempt stored it), NotFound when it is not there, and
// IdentifierNotUnique when another object holds the PID.
func (j *replicaJob) stored(ctx context.Context) error {
	pid := j.sm.Identifier
	rec, err := j.n.cat.Lookup(ctx, pid)
	if err != nil {
		return err
	}
	if rec.Meta.Identifier == pid && rec.Meta.Size == j.sm.Size && strings.EqualFold(rec.Meta.Checksum.Value, strings.TrimSpace(j.sm.Checksum.Value)) {
		return nil
	}
	return adapter.Errorf(adapter.IdentifierNotUnique, "another object %q is on this node", pid).WithPID(pid)
}

// holdsNothing drops the job's weight once its replica is in the catalog,
// which counts its bytes from then on.
func (j *replicaJob) holdsNothing(ctx context.Context) {
	if q, err := j.n.queue(); err == nil {
		if err := q.SetWeight(ctx, j.id, 0); err != nil {
			j.n.log.Warn("releasing the space a replication job holds", "pid", j.sm.Identifier, "err", err)
		}
	}
}

// copy pulls the object from the source node, checks it and stores it; on any
// error nothing is kept.
func (j *replicaJob) copy(ctx context.Context) error {
	n, pid := j.n, j.sm.Identifier
	// Stored by an attempt cut short after the insert, or by one running at
	// the same time on another instance.
	switch err := j.stored(ctx); {
	case err == nil:
		j.holdsNothing(ctx)
		return nil
	case !adapter.IsKind(err, adapter.NotFound):
		return err
	}
	var base string
	for _, ref := range j.cfg.Registry {
		if ref.ID == j.source {
			base = strings.TrimRight(ref.BaseURL, "/")
			break
		}
	}
	if base == "" {
		return adapter.Errorf(adapter.NotFound, "source node %q is not in the node registry", j.source).WithPID(pid)
	}
	c := n.repl.client("replica:"+j.source, base)
	what := fmt.Sprintf("the replica of %q", pid)
	fetch, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	req, err := http.NewRequestWithContext(upstream.WithOperation(fetch, "MNReplication.getReplica"), http.MethodGet,
		base+"/v2/replica/"+adapter.EscapeIdentifier(pid), nil)
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "building the request for %s", what)
	}
	if j.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+j.cfg.Token)
	}
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return c.Error(err, what)
	}
	if resp.StatusCode != http.StatusOK {
		return c.Exception(resp, what)
	}
	defer resp.Body.Close()
	stall := cmp.Or(j.cfg.StallTimeout, 30*time.Second)
	body := &stallGuard{r: resp.Body, d: stall, t: time.AfterFunc(stall, func() { stop(errStalled) })}
	defer body.t.Stop()
	alg, _ := adapter.CanonicalAlgorithm(j.sm.Checksum.Algorithm)
	// One byte more than declared is enough to tell a size mismatch.
	u, err := n.Stage(ctx, io.LimitReader(body, int64(j.sm.Size)+1), []string{alg})
	if err != nil {
		if errors.Is(context.Cause(fetch), errStalled) {
			return adapter.Errorf(adapter.ServiceFailure, "source node %q sent nothing of %q for %s", j.source, pid, stall).WithPID(pid)
		}
		return err
	}
	if err := n.verify(ctx, j.sm, u); err != nil {
		return n.fail(ctx, u, err)
	}
	// A replica keeps the CN's system metadata (origin and authoritative node
	// included); only the modification date is this node's.
	c2 := j.sm.Clone()
	c2.DateSysMetadataModified = adapter.Now()
	c2.Checksum = adapter.Checksum{Algorithm: alg, Value: strings.ToLower(strings.TrimSpace(c2.Checksum.Value))}
	if err := n.insert(n.logging(ctx, j.s, pid, adapter.EventCreate), &Record{Meta: c2, BlobKey: u.Ref, Replica: true}, u); err != nil {
		if adapter.IsKind(err, adapter.IdentifierNotUnique) && j.stored(ctx) == nil {
			return nil // a concurrent attempt stored it first; its bytes stay
		}
		return err
	}
	j.holdsNothing(ctx)
	return nil
}

// notify reports the outcome to the coordinating node, when one is configured:
// PUT {cn}/v2/replicaNotifications/{pid} with nodeRef and status.
func (j *replicaJob) notify(ctx context.Context, status string) error {
	if j.cfg.CNBaseURL == "" {
		return nil
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("nodeRef", j.n.id)
	mw.WriteField("status", status)
	if err := mw.Close(); err != nil {
		return err
	}
	pid := j.sm.Identifier
	what := fmt.Sprintf("the replica notification of %q", pid)
	return j.n.askCN(ctx, j.cfg, "CNReplication.setReplicationStatus", http.MethodPut, "/v2/replicaNotifications/"+adapter.EscapeIdentifier(pid),
		mw.FormDataContentType(), &body, what, func(c *upstream.Client, resp *http.Response) error {
			if resp.StatusCode/100 != 2 {
				return c.Exception(resp, what)
			}
			return nil
		})
}

// stallGuard restarts its timer whenever bytes arrive.
type stallGuard struct {
	r io.Reader
	d time.Duration
	t *time.Timer
}

func (g *stallGuard) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if n > 0 {
		g.t.Reset(g.d)
	}
	return n, err
}
