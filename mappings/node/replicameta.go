package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// ReplicaAuthorized asks the CN whether it asked the member node s is (a node
// of the registry, whose subject is s's) for a replica of pid
// (CNReplication.isNodeAuthorized): getReplica of an object the node may not
// read otherwise. nil when the CN says yes.
func (n *Node) ReplicaAuthorized(ctx context.Context, s *adapter.Session, pid string) error {
	cfg := n.repl.settings()
	if cfg.CNBaseURL == "" {
		return adapter.Errorf(adapter.NotAuthorized, "%s may not read %q, and no coordinating node is configured to ask whether it replicates it", s.Subject, pid).WithPID(pid)
	}
	path := "/v2/replicaAuthorizations/" + adapter.EscapeIdentifier(pid) + "?targetNodeSubject=" + url.QueryEscape(s.Subject)
	what := fmt.Sprintf("the replication authorization of %q", pid)
	return n.askCN(ctx, cfg, "CNReplication.isNodeAuthorized", http.MethodGet, path, "", nil, what, func(c *upstream.Client, resp *http.Response) error {
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusUnauthorized:
			return adapter.Errorf(adapter.NotAuthorized, "the coordinating node did not ask %s for a replica of %q", s.Subject, pid).WithPID(pid)
		}
		return c.Exception(resp, what)
	})
}

// askCN sends a request to the coordinating node (cfg.CNBaseURL, with the
// node's token) as operation op, and gives its answer to read, within the
// client's timeout; the body is drained and closed after.
func (n *Node) askCN(ctx context.Context, cfg Replication, op, method, path, contentType string, body io.Reader, what string,
	read func(c *upstream.Client, resp *http.Response) error) error {
	c := n.repl.client("replication:cn", cfg.CNBaseURL)
	ctx, cancel := c.WithTimeout(upstream.WithOperation(ctx, op))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, cfg.CNBaseURL+path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return c.Error(err, what)
	}
	defer upstream.Discard(resp)
	return read(c, resp)
}

// A replica's system metadata belongs to its authoritative member node and
// the CN: when it changes there (an access policy withdrawn, an archive), the
// CN calls systemMetadataChanged on the nodes holding replicas, and each
// fetches the CN's copy (API.md §9). The fetch is a job of the queue, so that
// a notice outlives a crash or a CN out of reach.

const jobRefreshMeta = "refresh-sysmeta"

// maxMetaDocument bounds the system metadata document read from the CN.
const maxMetaDocument = 4 << 20

// refreshReplicaMeta queues the fetch of the CN's copy of rec's system
// metadata when rec is a replica and the CN's serialVersion is newer.
func (n *Node) refreshReplicaMeta(ctx context.Context, rec *Record, serialVersion uint64) error {
	sm, cfg := rec.Meta, n.repl.settings()
	if sm.AuthoritativeMemberNode == "" || sm.AuthoritativeMemberNode == n.id || serialVersion <= sm.SerialVersion {
		return nil // this node's own object, or nothing newer
	}
	if cfg.CNBaseURL == "" {
		n.log.Warn("a replica's system metadata changed, and no coordinating node is configured to fetch it from",
			"pid", sm.Identifier, "serialVersion", serialVersion)
		return nil
	}
	q, err := n.queue()
	if err != nil {
		return err
	}
	// One fetch per notice's serialVersion: a fetch running when a newer
	// notice comes may have read the older copy. A repeated notice is the
	// same job, and a fetch that finds its copy stored already changes nothing.
	key := n.replicaKey(sm.Identifier) + " " + strconv.FormatUint(serialVersion, 10)
	_, err = q.Enqueue(ctx, NewJob{Kind: jobRefreshMeta, Key: key, Payload: []byte(sm.Identifier), MaxAttempts: 10}, nil)
	if err != nil && !errors.Is(err, ErrJobActive) {
		return adapter.Wrap(adapter.ServiceFailure, err, "recording the fetch of the system metadata of %q", sm.Identifier).WithPID(sm.Identifier)
	}
	n.workRefreshMeta()
	return nil
}

// workRefreshMeta makes this node work the fetches of replicas' system
// metadata.
func (n *Node) workRefreshMeta() {
	n.work(jobRefreshMeta, workOptions(n.repl.settings(), 2), refreshMetaWork{n})
}

// fitReplicaMeta refuses a CN's copy of a replica's system metadata, cur, that
// is unfit to replace it: one that is not valid, that describes other bytes,
// or that names no authoritative member node (the replica would become this
// node's own object, writable here and no longer following the CN; the CN
// may make this node authoritative, by naming it).
func (n *Node) fitReplicaMeta(cur, fetched *adapter.SystemMetadata) error {
	pid := cur.Identifier
	if err := adapter.CheckSystemMetadata(fetched); err != nil {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the coordinating node's system metadata of %q: %s", pid, adapter.AsException(err).Description).WithPID(pid)
	}
	fetchedAlg, _ := adapter.CanonicalAlgorithm(fetched.Checksum.Algorithm)
	curAlg, _ := adapter.CanonicalAlgorithm(cur.Checksum.Algorithm)
	switch {
	case fetched.Identifier != cur.Identifier || fetched.Size != cur.Size || fetchedAlg != curAlg ||
		!strings.EqualFold(strings.TrimSpace(fetched.Checksum.Value), cur.Checksum.Value):
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the coordinating node's system metadata of %q describes other bytes", pid).WithPID(pid)
	case fetched.AuthoritativeMemberNode == "":
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the coordinating node's system metadata of %q names no authoritative member node", pid).WithPID(pid)
	}
	return nil
}

// refreshMetaWork fetches the CN's copy of a replica's system metadata and
// stores it when it is newer.
type refreshMetaWork struct{ n *Node }

func (w refreshMetaWork) Run(ctx context.Context, j *Job) error {
	n, pid := w.n, string(j.Payload)
	fetched, err := n.cnMeta(ctx, pid)
	if err != nil {
		if adapter.IsKind(err, adapter.ServiceFailure) {
			return err // the CN out of reach: tried again
		}
		return Permanent(err)
	}
	_, err = n.cat.Modify(WithGivenDates(ctx), pid, func(sm *adapter.SystemMetadata) error {
		if fetched.SerialVersion <= sm.SerialVersion {
			return errUnchanged
		}
		if err := n.fitReplicaMeta(sm, fetched); err != nil {
			return err
		}
		stored := sm.Checksum // the same, in the form this node stores
		*sm = *fetched.Clone()
		sm.Checksum = stored
		return nil
	})
	switch {
	case errors.Is(err, errUnchanged), adapter.IsKind(err, adapter.NotFound): // deleted since
		return nil
	case err != nil && !adapter.IsKind(err, adapter.ServiceFailure):
		return Permanent(err)
	case err == nil:
		if changed := n.repl.settings().Changed; changed != nil {
			changed(pid) // its access policy may be another now
		}
		n.log.Info("a replica's system metadata follows the coordinating node's", "pid", pid, "serialVersion", fetched.SerialVersion)
	}
	return err
}

func (w refreshMetaWork) Failed(ctx context.Context, j *Job, err error) {
	w.n.log.Error("a replica's system metadata could not be fetched from the coordinating node; it stays as it was",
		"pid", string(j.Payload), "attempts", j.Attempt, "err", err)
}

// cnMeta reads the CN's v2 system metadata of pid.
func (n *Node) cnMeta(ctx context.Context, pid string) (*adapter.SystemMetadata, error) {
	sm := &adapter.SystemMetadata{}
	what := fmt.Sprintf("the system metadata of %q", pid)
	err := n.askCN(ctx, n.repl.settings(), "CNRead.getSystemMetadata", http.MethodGet, "/v2/meta/"+adapter.EscapeIdentifier(pid), "", nil, what,
		func(c *upstream.Client, resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				return c.Exception(resp, what)
			}
			if err := adapter.Decode(io.LimitReader(resp.Body, maxMetaDocument), sm); err != nil {
				return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q answered %s with a document that does not read", c.Name(), what).WithPID(pid)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return sm, nil
}
