package rest

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/gin-gonic/gin"
)

// handlerFunc parses a request, calls the node and renders the answer; any error
// goes to the one exception writer.
type handlerFunc func(r *request) error

// request is one call of an operation, with what wrap established before the handler.
type request struct {
	*gin.Context
	ctx     context.Context // the HTTP request's: what r is as a context (see Done)
	op      string
	role    string
	version int
	perm    auth.Perm
	session *adapter.Session
	id      string                  // the :id path value, unescaped once and checked
	pid     string                  // the PID the object permission was checked on
	meta    *adapter.SystemMetadata // its system metadata, once loaded (see object)
	e       *engine
	gone    bool               // the client went away: 499 is recorded, nothing is written
	wrapped bool               // wrap logs the request's line (else renderException does)
	ex      *adapter.Exception // the exception answered, for the request line
}

// A request is the context of what it calls: the HTTP request's, not gin's.
// gin pools its Context and reuses it for the next request once the handler
// returns, while what a handler started with r may still ask it (database/sql
// watches a query's context from a goroutine that reads Err after the rows
// close): that read raced with the reuse.
func (r *request) Deadline() (time.Time, bool) { return r.ctx.Deadline() }
func (r *request) Done() <-chan struct{}       { return r.ctx.Done() }
func (r *request) Err() error                  { return r.ctx.Err() }
func (r *request) Value(key any) any           { return r.ctx.Value(key) }

// wrap is the one wrapper of every route: session, identifier, permission, handler,
// exception writer, metrics.
func (e *engine) wrap(rt route, role string, version int) gin.HandlerFunc {
	h := rt.h
	if h == nil {
		h = notImplemented
	}
	return func(c *gin.Context) {
		start := time.Now()
		e.opts.Metrics.RequestStarted()
		defer e.opts.Metrics.RequestEnded()
		body := &countingReader{r: c.Request.Body}
		c.Request.Body = body
		r := &request{Context: c, ctx: c.Request.Context(), op: rt.op, role: role, version: version, perm: rt.perm, e: e, wrapped: true}
		if err := r.call(func() error { return r.prepare(rt) }); err != nil {
			e.writeException(r, err)
		} else {
			if err := r.call(func() error { return r.upload(h) }); err != nil {
				e.writeException(r, err)
			}
			if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
				// A write may have changed rights on the object, a failed one too
				// (an upstream that applied it and then timed out, a publish whose
				// last step failed): forget decisions on it. Only once the caller
				// was let in: refused calls must not fill the generations map.
				e.opts.Authorizer.Invalidate(r.pid, r.id)
			}
		}
		d, out := time.Since(start), int64(max(c.Writer.Size(), 0))
		status := c.Writer.Status()
		if r.gone {
			status = statusClientClosed
		}
		e.opts.Metrics.ObserveRequest(role, version, rt.op, status, d, body.n, out)
		if level := requestLevel(status); e.log.Enabled(c, level) { // successes are rarely logged: build nothing for them
			e.log.LogAttrs(c, level, "request", append([]slog.Attr{slog.String("op", rt.op), slog.String("method", c.Request.Method),
				slog.String("path", c.Request.URL.EscapedPath()), slog.Int("status", status),
				slog.Float64("duration_seconds", d.Seconds()), slog.Int64("bytes_in", body.n), slog.Int64("bytes_out", out),
				slog.String("subject", subjectOf(r.session))}, exceptionAttrs(r.ex)...)...)
		}
		if r.gone {
			// gin would otherwise write the header at the end of the request (a 200,
			// or the 499 it was once given). ErrAbortHandler makes net/http close the
			// connection (or reset the HTTP/2 stream) without a response or a log line.
			panic(http.ErrAbortHandler)
		}
	}
}

// requestLevel is the level of a request's log line: a failure is one line at
// the default level (warn for the client's mistakes, error for the node's),
// a client that went away is info, a success is detail.
func requestLevel(status int) slog.Level {
	switch {
	case status == statusClientClosed:
		return slog.LevelInfo
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// prepare establishes the session and the identifier and checks the route's
// permission: on the object :id names for object permissions (objects found
// before rights are checked, so a missing object is NotFound), on the node else.
func (r *request) prepare(rt route) error {
	s, err := r.e.opts.Sessions(r.Request)
	if err != nil {
		return err
	}
	// ClientIP believes X-Forwarded-For only from Options.TrustedProxies (none by
	// default), so a client cannot write any address it likes into the event log.
	s.Address, s.UserAgent = r.ClientIP(), r.Request.UserAgent()
	r.session = s
	// A credential that was presented and failed verification is never taken
	// for no credential: every operation that may raise InvalidToken does, with
	// the reason; the others (ping, capabilities) serve the caller as public.
	if s.CredentialError != "" && raises(rt.op, r.version, adapter.InvalidToken) {
		return adapter.Errorf(adapter.InvalidToken, "%s", s.CredentialError)
	}
	if _, ok := r.Params.Get("id"); ok {
		id, err := r.pathParam("id")
		if err != nil {
			return err
		}
		if err := adapter.CheckIdentifier(id); err != nil {
			return adapter.Errorf(adapter.InvalidRequest, "%v", err).WithPID(id)
		}
		r.id = id
	}
	switch {
	case !rt.perm.OnObject():
		err = r.e.opts.Authorizer.Check(r, s, rt.perm, nil)
	case r.id != "": // else the identifier is in the body: the handler calls authorize
		err = r.authorize(r.id)
	}
	if err == nil && raises(rt.op, r.version, adapter.InvalidRequest) {
		err = checkQueryText(r.Request.URL)
	}
	return err
}

// checkQueryText refuses query values that are not text: invalid UTF-8 or a
// NUL, which one catalog would match against nothing and another refuse with
// an error of its own. Operations that cannot raise InvalidRequest (ping,
// capabilities) ignore their query as before.
func checkQueryText(u *url.URL) error {
	if u.RawQuery == "" {
		return nil
	}
	for k, vs := range u.Query() {
		for _, v := range vs {
			switch {
			case !utf8.ValidString(v):
				return adapter.Errorf(adapter.InvalidRequest, "parameter %s: %q is not valid UTF-8", k, v)
			case strings.IndexByte(v, 0) >= 0:
				return adapter.Errorf(adapter.InvalidRequest, "parameter %s: %q holds a control character (NUL)", k, v)
			}
		}
	}
	return nil
}

// upload runs h, holding one of the node's upload slots when the operation
// carries an object's bytes (Options.Uploads).
func (r *request) upload(h handlerFunc) error {
	if !uploadOps[r.op] {
		return h(r)
	}
	release, err := r.e.opts.Uploads.acquire(r.session.Address)
	if err != nil {
		return err
	}
	defer release()
	return h(r)
}

// call runs fn; a panic in it is this request's ServiceFailure, counted and
// logged as every other answer (engine.recover answers the rest, uncounted).
func (r *request) call(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			r.e.log.Error("panic in handler", "panic", p, "op", r.op, "stack", string(debug.Stack()))
			err = adapter.Errorf(adapter.ServiceFailure, "internal error")
		}
	}()
	return fn()
}

// authorize finds the object id names and checks the route's permission on it.
// It is the one place object permissions are checked, for ids in the path (from
// prepare) and in the body (from handlers). Where the decision is the answer
// (decisionOps), a remembered one saves the lookup; r.pid is then set and
// r.meta is loaded only if a handler needs it.
func (r *request) authorize(id string) error {
	authz := r.e.opts.Authorizer
	remember := decisionOps[r.op]
	var mark uint64
	if remember {
		pid, allowed, hit := authz.Cached(r.session, r.role, id, r.perm)
		r.e.opts.Metrics.ObserveAuthDecision(hit)
		if hit && allowed {
			r.pid = pid
			return nil
		}
		mark = authz.Mark() // before the read, so that a change during it is not remembered over
	}
	sm, err := r.lookup(id)
	if err != nil {
		return err
	}
	err = authz.Check(r, r.session, r.perm, sm)
	// Decisions are kept by PID only: which object a SID names changes with
	// every update, which another instance sharing the catalog may make, and
	// the head must be read where the update was acknowledged.
	if remember && sm.Identifier == id {
		authz.Remember(r.session, r.role, id, r.perm, sm.Identifier, err == nil, mark)
	}
	if err != nil {
		return err
	}
	r.meta, r.pid = sm, sm.Identifier
	return nil
}

// decisionOps are the operations whose answer is the authorization decision,
// the only ones a remembered decision saves a lookup for: every other one
// reads the object's record anyway (get, describe, getSystemMetadata, the
// writes), so remembering its decisions would only cost their keys and
// entries, and the collector's time over a cache that random reads over many
// objects fill with decisions never asked for again.
var decisionOps = map[string]bool{"MNAuthorization.isAuthorized": true, "CNAuthorization.isAuthorized": true}

// object is the object :id names: the one prepare found for an object
// permission, or found now (trusted routes such as delete).
func (r *request) object() (*adapter.SystemMetadata, error) {
	if r.meta == nil {
		sm, err := r.lookup(cmp.Or(r.pid, r.id))
		if err != nil {
			return nil, err
		}
		r.meta, r.pid = sm, sm.Identifier
	}
	return r.meta, nil
}

// lookup finds the system metadata of the object id names; on v1 a series id
// names nothing (API.md §10 rule 15).
func (r *request) lookup(id string) (*adapter.SystemMetadata, error) {
	var (
		sm  *adapter.SystemMetadata
		err error
	)
	switch {
	case r.role == "mn" && r.e.opts.MN != nil:
		sm, err = r.e.opts.MN.SystemMetadata(r, r.session, id)
	case r.role == "cn" && r.e.opts.CN != nil:
		sm, err = r.e.opts.CN.SystemMetadata(r, r.session, id)
	default:
		return nil, adapter.Errorf(adapter.NotImplemented, "%s is not implemented on this node", r.op)
	}
	if err != nil {
		return nil, err
	}
	if r.version == 1 && sm.Identifier != id {
		return nil, notOnV1(id)
	}
	return sm, nil
}

func notOnV1(id string) error {
	return adapter.Errorf(adapter.NotFound, "no object %q on this node (v1 does not resolve series ids)", id).WithPID(id)
}

// pathParam is a path segment, percent-decoded exactly once (a '+' stays a '+').
func (r *request) pathParam(name string) (string, error) {
	v, err := unescape(r.Param(name))
	if err != nil {
		return "", adapter.Errorf(adapter.InvalidRequest, "the %s in the path is not validly percent-encoded: %v", name, err)
	}
	return v, nil
}

func unescape(seg string) (string, error) {
	v, err := url.PathUnescape(seg)
	if err != nil {
		return "", adapter.Errorf(adapter.InvalidRequest, "%q is not validly percent-encoded: %v", seg, err)
	}
	return v, nil
}

func notImplemented(r *request) error {
	return adapter.Errorf(adapter.NotImplemented, "%s is not implemented yet", r.op)
}

func (e *engine) noRoute(c *gin.Context) {
	r := &request{Context: c, ctx: c.Request.Context(), op: "notFound", e: e}
	e.writeException(r, adapter.Errorf(adapter.NotFound, "no DataONE operation at %s %s", c.Request.Method, c.Request.URL.EscapedPath()))
}

func (e *engine) noMethod(c *gin.Context) {
	r := &request{Context: c, ctx: c.Request.Context(), op: "notAllowed", e: e}
	ex := adapter.Errorf(adapter.InvalidRequest, "%s is not allowed on %s; allowed: %s", c.Request.Method, c.Request.URL.EscapedPath(), c.Writer.Header().Get("Allow"))
	e.renderException(r, ex, http.StatusMethodNotAllowed)
}

// recover turns a panic into a ServiceFailure without leaking the stack to the client.
func (e *engine) recover(c *gin.Context) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			e.log.Error("panic in handler", "panic", p, "path", c.Request.URL.EscapedPath())
			r := &request{Context: c, ctx: c.Request.Context(), op: c.FullPath(), e: e}
			e.writeException(r, adapter.Errorf(adapter.ServiceFailure, "internal error"))
			c.Abort()
		}
	}()
	c.Next()
}

// countingReader counts the request body bytes a handler reads.
type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

func subjectOf(s *adapter.Session) string {
	if s == nil {
		return ""
	}
	return s.Subject
}
