package rest

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// getPackage streams a data package as a BagIt zip. Every member is found and
// its read permission checked before the first byte; a failure after that
// aborts the connection, so a client never takes a truncated zip for whole.
func (h *mnHandlers) getPackage(r *request) error {
	if h.pkg == nil {
		return tierMissing(r)
	}
	packageType, id, err := r.packageParams()
	if err != nil {
		return err
	}
	r.id = id
	canRead := func(sm *adapter.SystemMetadata) bool {
		return h.e.opts.Authorizer.Allowed(r.session, readPerm, sm)
	}
	p, err := h.pkg.Package(r, r.session, packageType, id, canRead)
	if err != nil {
		return refusedWithoutCredential(r.session, err)
	}
	if p.Close != nil {
		defer p.Close()
	}
	r.Header("Content-Type", p.ContentType)
	r.Header("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": p.Name}))
	r.Status(http.StatusOK)
	if r.Request.Method == http.MethodHead {
		return nil
	}
	if err := p.Write(r, r.Writer); err != nil {
		h.e.log.Error("package stream failed after its start; aborting the response", "pid", id, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// refusedWithoutCredential is err, but a refusal (NotAuthorized) of a caller
// who presented no credential is InvalidToken, as Authorizer.Check makes it on
// every other read: the package's canRead answers only yes or no. (A credential
// that failed verification was refused before, in prepare.)
func refusedWithoutCredential(s *adapter.Session, err error) error {
	var e *adapter.Exception
	if s.Subject != adapter.SubjectPublic || !errors.As(err, &e) || e.Kind != adapter.NotAuthorized {
		return err
	}
	token := *e
	token.Kind, token.DetailCode, token.Status = adapter.InvalidToken, "", 0
	token.Description = "no credential was presented; " + e.Description
	return &token
}

// packageParams reads the package type and the resource map id: v2 and the
// spec's v1 1.2 form give /packages/{type}/{id}; Metacat's v1 form gives
// /packages/{id}, with BagIt 0.97.
func (r *request) packageParams() (string, string, error) {
	rest := strings.TrimPrefix(r.Param("rest"), "/")
	segs := []string{r.Param("type"), r.Param("id")}
	if rest != "" {
		segs = strings.SplitN(rest, "/", 2)
		if len(segs) == 1 {
			segs = []string{adapter.PackageBagIt097, segs[0]}
		}
	}
	var out [2]string
	for i, seg := range segs {
		v, err := unescape(seg)
		if err != nil {
			return "", "", err
		}
		out[i] = v
	}
	if err := adapter.CheckIdentifier(out[1]); err != nil {
		return "", "", invalid("%v", err)
	}
	return out[0], out[1], nil
}

// replicaGate is a node that knows the federation's member nodes, and asks
// the CN which replicas it asked them for.
type replicaGate interface {
	IsRegisteredNode(s *adapter.Session) bool
	ReplicaAuthorized(ctx context.Context, s *adapter.Session, pid string) error
}

// getReplica streams an object to a replicating node: a trusted caller (the
// CN), or a member node of the registry, the target of the replication (API.md
// §9 step 2), which reads what it may read, or what the CN says it asked it to
// replicate (isNodeAuthorized).
func (h *mnHandlers) getReplica(r *request) error {
	if h.replicaSource == nil {
		return tierMissing(r)
	}
	trusted := h.e.opts.Authorizer.IsTrusted(r.session)
	gate, _ := h.replicaSource.(replicaGate)
	if !trusted && (gate == nil || !gate.IsRegisteredNode(r.session)) {
		return adapter.Errorf(adapter.NotAuthorized, "%s is neither trusted nor a registered member node: getReplica is for the nodes that replicate", r.session.Subject).WithPID(r.id)
	}
	if !trusted || r.version == 1 {
		// The route looks nothing up before: the caller's read permission,
		// and v1's rule that a series id is an unknown PID, apply here.
		sm, err := r.lookup(r.id)
		if err != nil {
			return err
		}
		if !trusted {
			err := h.e.opts.Authorizer.Check(r, r.session, auth.Read, sm)
			if adapter.IsKind(err, adapter.NotAuthorized) {
				err = gate.ReplicaAuthorized(r, r.session, sm.Identifier)
			}
			if err != nil {
				return err
			}
		}
	}
	obj, err := h.replicaSource.GetReplica(r, r.session, r.id)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	h.objectHeaders(r, obj.Meta)
	if r.Request.Method == http.MethodHead {
		// net/http discards a HEAD's body: copying it would read the object to its end for nothing.
		r.Status(http.StatusOK)
		return nil
	}
	r.DataFromReader(http.StatusOK, int64(obj.Meta.Size), mediaType(obj.Meta, h.e.opts.Formats), io.NopCloser(obj.Body), nil)
	return nil
}
