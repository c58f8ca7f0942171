package node

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
)

// maxReplicationJobs bounds the replica copies that run at once; more wait.
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
	// JobsDir keeps each accepted job in a file until the job ends, so that
	// it survives a crash or a shutdown (ResumeReplication); empty: jobs live
	// in memory only. A directory belongs to one process.
	JobsDir string
	// StallTimeout fails a copy whose source sends nothing for that long, so
	// that a stalled source does not hold a replication slot; 0: 30s.
	StallTimeout time.Duration
}

// errStalled ends a copy whose source stopped sending.
var errStalled = errors.New("the source node stopped sending")

// replicator holds the node's replication jobs and settings.
type replicator struct {
	ctx    context.Context // the node's lifetime: jobs outlive their request
	cancel context.CancelFunc
	jobs   sync.WaitGroup
	sem    chan struct{}

	mu       sync.Mutex
	cfg      Replication
	clients  map[string]*upstream.Client // by name and base URL
	inflight map[string]uint64           // PIDs being copied, with their sizes
	resumed  bool                        // ResumeReplication has run
}

func newReplicator() *replicator {
	ctx, cancel := context.WithCancel(context.Background())
	return &replicator{ctx: ctx, cancel: cancel, sem: make(chan struct{}, maxReplicationJobs),
		clients: map[string]*upstream.Client{}, inflight: map[string]uint64{}}
}

// close stops the jobs and waits for them; a job cut short keeps its file and
// resumes at the next start.
func (r *replicator) close() {
	r.cancel()
	r.jobs.Wait()
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
// policy, records the job (JobsDir) and queues the copy of sm's object from
// sourceNode; it answers before the copy is made (API.md §9). The job's
// outcome is logged, recorded in the event log when it fails
// (replication_failed), and reported to the coordinating node.
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
	job := &replicaJob{n: n, s: cloneSession(s), sm: sm.Clone(), source: sourceNode, cfg: cfg}
	if err := n.admit(ctx, job, true); err != nil {
		return err
	}
	// Acknowledged only once recorded: the job then survives a crash.
	if err := n.saveJob(job); err != nil {
		n.repl.release(pid)
		n.repl.jobs.Done()
		return adapter.Wrap(adapter.ServiceFailure, err, "recording the replication job of %q", pid).WithPID(pid)
	}
	n.launch(job)
	return nil
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

// admit reserves j's PID and size and counts the job in r.jobs: refused when
// the PID is being copied, when the node is shutting down, or (checkSpace)
// when the replicas would exceed the space allocated. The catalog is counted
// under the lock, so that two requests cannot both take the last of the space.
func (n *Node) admit(ctx context.Context, j *replicaJob, checkSpace bool) error {
	r, pid := n.repl, j.sm.Identifier
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.inflight[pid]; ok {
		return adapter.Errorf(adapter.IdentifierNotUnique, "%q is already being replicated to this node", pid).WithPID(pid)
	}
	if r.ctx.Err() != nil {
		return adapter.Errorf(adapter.ServiceFailure, "the node is shutting down").WithPID(pid)
	}
	if checkSpace {
		if err := n.checkSpace(ctx, j.cfg.Policy, j.sm, r.reserved()); err != nil {
			return err
		}
	}
	r.inflight[pid] = j.sm.Size
	r.jobs.Add(1)
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

// reserved is the bytes of the copies under way; r.mu is held.
func (r *replicator) reserved() uint64 {
	var sum uint64
	for _, size := range r.inflight {
		sum += size
	}
	return sum
}

// stored drops pid's reservation to nothing once its copy is in the catalog,
// which counts its bytes from then on; the PID stays taken until the job ends.
func (r *replicator) stored(pid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.inflight[pid]; ok {
		r.inflight[pid] = 0
	}
}

// release forgets a PID admit reserved.
func (r *replicator) release(pid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, pid)
}

// launch runs an admitted job in the background.
func (n *Node) launch(j *replicaJob) {
	r := n.repl
	go func() {
		defer r.jobs.Done()
		defer r.release(j.sm.Identifier)
		j.run(r.ctx)
	}()
}

func cloneSession(s *adapter.Session) *adapter.Session {
	c := *s
	c.Subjects = append([]string(nil), s.Subjects...)
	return &c
}

// replicaJob is one queued copy.
type replicaJob struct {
	n      *Node
	s      *adapter.Session // the caller of replicate (the CN), for the event log
	sm     *adapter.SystemMetadata
	source string
	cfg    Replication
	file   string // the job's file in JobsDir; "" when jobs are not kept
	// resumed: the job was read back at start, and its copy may have been
	// stored before the stop.
	resumed bool
}

// run copies and reports. A job the node's shutdown cuts short ends without a
// report: its file stays, and it resumes at the next start. Any other end
// removes the file, whether or not the CN took the report.
func (j *replicaJob) run(ctx context.Context) {
	n, pid := j.n, j.sm.Identifier
	err := func() error {
		select {
		case n.repl.sem <- struct{}{}:
			defer func() { <-n.repl.sem }()
		case <-ctx.Done():
			return ctx.Err()
		}
		return j.copy(ctx)
	}()
	if err != nil && ctx.Err() != nil {
		j.interrupted(err)
		return
	}
	status := adapter.ReplicaCompleted
	if err != nil {
		status = adapter.ReplicaFailed
		n.log.Error("replication failed", "pid", pid, "source", j.source, "err", err)
		n.event(ctx, j.s, pid, adapter.EventReplicationFailed)
	} else {
		n.log.Info("replicated", "pid", pid, "source", j.source)
	}
	if err := j.notify(ctx, status); err != nil {
		if ctx.Err() != nil {
			j.interrupted(err)
			return
		}
		n.log.Error("notifying the coordinating node of a replica", "pid", pid, "status", status, "err", err)
	}
	n.removeJob(j)
}

func (j *replicaJob) interrupted(err error) {
	if j.file == "" {
		j.n.log.Warn("replication cut short by the shutdown; not kept (no jobs directory)", "pid", j.sm.Identifier, "source", j.source, "err", err)
		return
	}
	j.n.log.Info("replication cut short by the shutdown; it resumes at the next start", "pid", j.sm.Identifier, "source", j.source, "file", j.file)
}

// copy pulls the object from the source node, checks it and stores it; on any
// error nothing is kept.
func (j *replicaJob) copy(ctx context.Context) error {
	n, pid := j.n, j.sm.Identifier
	if j.resumed {
		if rec, err := n.cat.Lookup(ctx, pid); err == nil {
			// Stored before the stop, which came before the report.
			if rec.Meta.Size == j.sm.Size && strings.EqualFold(rec.Meta.Checksum.Value, strings.TrimSpace(j.sm.Checksum.Value)) {
				n.repl.stored(pid)
				return nil
			}
			return adapter.Errorf(adapter.IdentifierNotUnique, "another object %q is on this node", pid).WithPID(pid)
		} else if !adapter.IsKind(err, adapter.NotFound) {
			return err
		}
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
		base+"/v2/replica/"+url.PathEscape(pid), nil)
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
	if err := n.cat.Insert(ctx, &Record{Meta: c2, BlobKey: u.Ref, Replica: true}); err != nil {
		return n.fail(ctx, u, err)
	}
	n.repl.stored(pid)
	n.event(ctx, j.s, pid, adapter.EventCreate)
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
	c := j.n.repl.client("replication:cn", j.cfg.CNBaseURL)
	ctx, cancel := c.WithTimeout(upstream.WithOperation(ctx, "CNReplication.setReplicationStatus"))
	defer cancel()
	pid := j.sm.Identifier
	req, err := http.NewRequestWithContext(ctx, http.MethodPut,
		j.cfg.CNBaseURL+"/v2/replicaNotifications/"+url.PathEscape(pid), &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if j.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+j.cfg.Token)
	}
	what := fmt.Sprintf("the replica notification of %q", pid)
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return c.Error(err, what)
	}
	if resp.StatusCode/100 != 2 {
		return c.Exception(resp, what)
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
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
