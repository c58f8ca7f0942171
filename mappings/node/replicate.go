package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"

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
}

// replicator holds the node's replication jobs and settings.
type replicator struct {
	ctx    context.Context // the node's lifetime: jobs outlive their request
	cancel context.CancelFunc
	jobs   sync.WaitGroup
	sem    chan struct{}

	mu       sync.Mutex
	cfg      Replication
	clients  map[string]*upstream.Client // by name and base URL
	inflight map[string]bool             // PIDs being copied
}

func newReplicator() *replicator {
	ctx, cancel := context.WithCancel(context.Background())
	return &replicator{ctx: ctx, cancel: cancel, sem: make(chan struct{}, maxReplicationJobs),
		clients: map[string]*upstream.Client{}, inflight: map[string]bool{}}
}

// close stops the jobs (a job cut short fails) and waits for them.
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
	n.repl.cfg = cfg
}

var _ adapter.MNReplication = (*Node)(nil)

// Replicate checks the request and queues the copy of sm's object from
// sourceNode; it answers before the copy is made (API.md §9). The job's outcome
// is logged, recorded in the event log when it fails (replication_failed), and
// reported to the coordinating node.
func (n *Node) Replicate(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, sourceNode string) error {
	pid := sm.Identifier
	if err := adapter.CheckIdentifier(pid); err != nil {
		return adapter.Errorf(adapter.InvalidRequest, "sysmeta identifier: %v", err).WithPID(pid)
	}
	if strings.TrimSpace(sourceNode) == "" {
		return adapter.Errorf(adapter.InvalidRequest, "the source node is missing").WithPID(pid)
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
	r := n.repl
	r.mu.Lock()
	if r.inflight[pid] {
		r.mu.Unlock()
		return adapter.Errorf(adapter.IdentifierNotUnique, "%q is already being replicated to this node", pid).WithPID(pid)
	}
	if r.ctx.Err() != nil {
		r.mu.Unlock()
		return adapter.Errorf(adapter.ServiceFailure, "the node is shutting down").WithPID(pid)
	}
	r.inflight[pid] = true
	r.jobs.Add(1)
	r.mu.Unlock()

	job := &replicaJob{n: n, s: cloneSession(s), sm: sm.Clone(), source: sourceNode, cfg: r.settings()}
	go func() {
		defer r.jobs.Done()
		defer func() {
			r.mu.Lock()
			delete(r.inflight, pid)
			r.mu.Unlock()
		}()
		job.run(r.ctx)
	}()
	return nil
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
}

func (j *replicaJob) run(ctx context.Context) {
	n, pid := j.n, j.sm.Identifier
	err := func() error {
		select {
		case n.repl.sem <- struct{}{}:
			defer func() { <-n.repl.sem }()
		case <-ctx.Done():
			return adapter.Errorf(adapter.ServiceFailure, "the node shut down before the copy started")
		}
		return j.copy(ctx)
	}()
	status := adapter.ReplicaCompleted
	if err != nil {
		status = adapter.ReplicaFailed
		n.log.Error("replication failed", "pid", pid, "source", j.source, "err", err)
		n.event(ctx, j.s, pid, adapter.EventReplicationFailed)
	} else {
		n.log.Info("replicated", "pid", pid, "source", j.source)
	}
	if err := j.notify(ctx, status); err != nil {
		n.log.Error("notifying the coordinating node of a replica", "pid", pid, "status", status, "err", err)
	}
}

// copy pulls the object from the source node, checks it and stores it; on any
// error nothing is kept.
func (j *replicaJob) copy(ctx context.Context) error {
	n, pid := j.n, j.sm.Identifier
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
	req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, "MNReplication.getReplica"), http.MethodGet,
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
	alg, _ := adapter.CanonicalAlgorithm(j.sm.Checksum.Algorithm)
	// One byte more than declared is enough to tell a size mismatch.
	u, err := n.Stage(ctx, io.LimitReader(resp.Body, int64(j.sm.Size)+1), []string{alg})
	if err != nil {
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
	if err := n.cat.Insert(ctx, &Record{Meta: c2, BlobKey: u.Ref}); err != nil {
		return n.fail(ctx, u, err)
	}
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
