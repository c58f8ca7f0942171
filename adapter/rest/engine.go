// Package rest serves the DataONE REST contract with gin: the four route tables,
// the handlers (parse, call, render) and the one exception writer.
package rest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/gin-gonic/gin"
)

// NodeInfo is the node identity the capabilities documents declare.
type NodeInfo struct {
	ID, Name, Description string
	BaseURL               string // up to and including the svc segment
	Subjects              []string
	ContactSubjects       []string
	Replicate             bool
	Synchronize           bool
	// ReplicationPolicy is advertised (nodeReplicationPolicy) when the MN
	// accepts replicas; the node enforces it.
	ReplicationPolicy *adapter.NodeReplicationPolicy
}

// SessionFunc derives the caller's session from a request; an unusable credential
// is an InvalidToken exception.
type SessionFunc func(r *http.Request) (*adapter.Session, error)

// Options is everything the engine serves.
type Options struct {
	Svc           string
	Node          NodeInfo
	MN            adapter.MemberNode // nil: the MN role is off
	CN            CoordinatingNode   // nil: the CN role is off
	Formats       *adapter.Formats
	Authorizer    *auth.Authorizer
	Sessions      SessionFunc // nil: every caller is public
	Metrics       *metrics.Metrics
	Logger        *slog.Logger
	MaxUploadSize int64
	// Uploads bounds the object uploads in flight; nil: no bound.
	Uploads *Uploads
	// TrustedProxies are the addresses (CIDRs) whose X-Forwarded-For is believed
	// for the client address in the event log; none by default.
	TrustedProxies []string
	Version        string                               // the build's, for monitor/status
	Upstreams      func(ctx context.Context) []Upstream // nil: none (the embedded store)
	// Tokens issues a bearer token for a session (the token operation); nil:
	// the node issues none.
	Tokens func(s *adapter.Session) (string, error)
	// CORS lets browser pages on other origins call the node; nil or no
	// allowed origin: no CORS headers, and OPTIONS is not served.
	CORS *CORS
}

type engine struct {
	opts Options
	log  *slog.Logger
	mn   *mnHandlers
	cn   *cnHandlers

	statusCache statusCache // the status page's last build (status.go)
}

// New builds the gin engine for opts.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Formats == nil {
		opts.Formats = adapter.OfficialFormats()
	}
	if opts.Authorizer == nil {
		opts.Authorizer = auth.NewAuthorizer(auth.Policy{})
	}
	if opts.Sessions == nil {
		opts.Sessions = func(r *http.Request) (*adapter.Session, error) { return adapter.PublicSession(), nil }
	}
	e := &engine{opts: opts, log: opts.Logger}
	if opts.MN != nil {
		e.mn = newMNHandlers(e, opts.MN)
	}
	if opts.CN != nil {
		e.cn = newCNHandlers(e, opts.CN)
	}

	gin.SetMode(gin.ReleaseMode)
	g := gin.New()
	// Route on the path as the client escaped it (rawRouted sets RawPath) and
	// unescape identifiers ourselves: gin's own unescaping is a query decoder
	// that turns '+' into a space.
	g.UseRawPath = true
	g.UnescapePathValues = false
	g.RemoveExtraSlash = false
	g.RedirectTrailingSlash = false
	g.RedirectFixedPath = false
	g.HandleMethodNotAllowed = true
	g.ContextWithFallback = true
	if err := g.SetTrustedProxies(opts.TrustedProxies); err != nil {
		opts.Logger.Error("trusted proxies", "err", err)
		g.SetTrustedProxies(nil)
	}
	g.Use(e.requestID, e.recover)
	if opts.CORS != nil && len(opts.CORS.AllowedOrigins) > 0 {
		g.Use(opts.CORS.middleware())
	}
	e.register(g)
	g.NoRoute(e.noRoute)
	g.NoMethod(e.noMethod)
	return rawRouted{g}
}

// rawRouted is the engine routing on the path as the client escaped it.
type rawRouted struct{ g *gin.Engine }

func (h rawRouted) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	req.URL.RawPath = clientPath(req.URL)
	keepSemicolons(req.URL)
	h.g.ServeHTTP(w, req)
}

// keepSemicolons makes a ';' in the query part of the value it is in, as GMN
// (Django) and Metacat (Tomcat) read it: they split a query on '&' only. Go's
// parser drops a pair holding a ';' ("invalid semicolon separator"), and gin
// ignores that error, so identifier=a;b filtered on nothing.
func keepSemicolons(u *url.URL) {
	if strings.IndexByte(u.RawQuery, ';') >= 0 {
		u.RawQuery = strings.ReplaceAll(u.RawQuery, ";", "%3B")
	}
}

// clientPath is the path as the client escaped it, which gin routes on
// (UseRawPath), and which u.EscapedPath gives from then on. url.URL keeps the
// client's escaping in RawPath only when it differs from its own (empty
// RawPath: its own escaping of Path is the client's), and EscapedPath drops
// it when a byte of it is one url.URL would escape: a raw '{', '|', '"' or
// non-ASCII byte anywhere made it escape the decoded path again, so that a
// %2F inside an identifier became a '/' (API.md §1.2). Such bytes are
// percent-encoded here, the client's own %XX kept; the path they decode to
// does not change. One pass, no allocation for a path left as sent: gin no
// longer escapes and checks it again.
func clientPath(u *url.URL) string {
	raw := u.RawPath
	if raw == "" {
		return u.EscapedPath()
	}
	i := 0
	for i < len(raw) && keptInPath(raw[i]) {
		i++
	}
	if i == len(raw) {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw) + 16)
	b.WriteString(raw[:i])
	for ; i < len(raw); i++ {
		if c := raw[i]; keptInPath(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// keptInPath: the bytes a path carries as they are (RFC 3986 pchar, '/' and
// the '%' of an escape), which url.URL's EscapedPath accepts in RawPath.
func keptInPath(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@[]%/", c) >= 0
}

// requestID gives every request an id: the client's X-Request-Id when it sends a
// sane one, else a new one. It is echoed, logged on every line and sent upstream.
func (e *engine) requestID(c *gin.Context) {
	id := c.GetHeader("X-Request-Id")
	if len(id) == 0 || len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
		id = newRequestID()
	}
	c.Header("X-Request-Id", id)
	c.Request = c.Request.WithContext(adapter.WithRequest(c.Request.Context(), id))
	c.Next()
}

func newRequestID() string {
	var b [12]byte
	var h [24]byte
	rand.Read(b[:])
	hex.Encode(h[:], b[:])
	return string(h[:]) // one allocation: hex.EncodeToString makes two
}
