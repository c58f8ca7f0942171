// Package dataone serves the member node from an existing DataONE member node
// (Metacat, GMN, or another d1bridge): every operation is forwarded to the same
// operation of the upstream's v2 REST API, through the upstream's client
// (metrics, breaker, retries of GET). d1bridge adds its sessions, directory
// groups, authorization cache, breaker and metrics in front.
//
// Identity. The upstream learns who calls as options.forward says:
//
//	none   the bridge calls as itself: with its client certificate
//	       (upstreams[].tls.cert and key, mutual TLS, as DataONE nodes
//	       authenticate each other: GMN, Metacat), with options.token (or
//	       tokenFile) as a bearer token, else as public. The front's
//	       authorization is the only one that sees the caller; create and
//	       update send the caller as the submitter (GMN keeps it with
//	       TRUST_CLIENT_SUBMITTER).
//	token  the caller's bearer token (Session.Token) is sent as
//	       Authorization: Bearer; the upstream must trust the same CN keys. A
//	       caller without a token (public, or a client certificate) calls as
//	       public.
//	proxy  the caller's subject is sent in the upstream's trusted-proxy headers
//	       (subjectHeader, verifyHeader: SUCCESS, secretHeader: secret), as a
//	       TLS-terminating proxy does for Metacat, or for a d1bridge with
//	       enableSessionFromHeader. A public caller sends none of them.
//
// The upstream checks its own rules again with that identity; with token and
// proxy it sees the primary subject only, not the groups the front added.
// listObjects and getLogRecords are filtered by the upstream for the identity
// it sees (the front's ReadableBy is not sent: DataONE has no such parameter).
//
// Listings with forward none. The upstream would filter listObjects and
// getLogRecords (v1 and v2, and the status page's recent events) for the
// bridge, which it usually trusts with every object and every event. So the
// front asks them as the bridge as they are only for a caller it trusts itself
// (node.subjects, administrators, cnSubjects: the callers whose listings it
// does not filter). For a caller without credential it asks without its own
// (neither client certificate, upstream.Anonymous, nor token), and the
// upstream answers what it answers the public, totals included. For an
// authenticated caller it does not trust, it reads the whole listing that
// matches the query's filters as the bridge, keeps the entries of objects the
// caller's subjects may read (their system metadata, read as the bridge: one
// call per distinct object) and pages them itself; more than 10000 matching
// entries are a ServiceFailure asking for narrower filters (listing.go).
// getPackage, which the upstream would check for the bridge too (and GMN 3.5.2
// checks for the resource map only, never its members), is checked by the
// front first for a caller it does not trust: canRead on the resource map and
// on every object it aggregates, one system metadata call each (package.go);
// the package is then asked as the bridge. An upstream that requires a client
// certificate of every caller (SSLVerifyClient require) fails the calls made
// without it. The other calls are made as the bridge, after the front's own
// authorization allowed them.
//
// Objects. get asks for the system metadata and the bytes at once, and streams
// the bytes through; when the upstream serves byte ranges (Accept-Ranges:
// bytes), the body also seeks, with ranged GETs (upstream.Seekable). create and
// update first spool the object to a file under spoolDir while hashing it
// (Stage: the bytes may arrive before the system metadata), check its size
// and checksum, then stream pid/newPid, sysmeta and the file as one
// multipart/form-data body with a Content-Length (GMN behind mod_wsgi refuses
// chunked bodies); only the system metadata document is held in memory. The
// spool file is removed when the call ends, whatever its outcome.
//
// Errors. A DataONE error document from the upstream is passed on as the same
// kind, detail code and identifier, its description prefixed with the
// upstream's name; any other failing answer is a ServiceFailure naming the
// upstream and its status. An open breaker and network errors come from the
// upstream client. setAccessPolicy on an upstream without it (404, 405 or 501
// for an object that exists) is NotImplemented.
//
// Options (upstreams[].options), decoded strictly:
//
//	forward:        none (default), token or proxy
//	token:          none: the bridge's own bearer token; or tokenFile
//	subjectHeader:  proxy: the subject header (default Ssl-Client-Subject-Dn)
//	verifyHeader:   proxy: sent as SUCCESS (default Ssl-Client-Verify; "" sends none)
//	secretHeader:   proxy: the secret's header (default X-Proxy-Key)
//	secret:         proxy: the upstream's proxy secret; or secretFile
//	spoolDir:       where staged objects wait for their create (default the
//	                system's temporary directory)
//
// baseURL is the upstream's MN base URL, such as https://host/metacat/d1/mn
// (a trailing /v1 or /v2 is ignored).
package dataone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// Forward modes.
const (
	ForwardNone  = "none"
	ForwardToken = "token"
	ForwardProxy = "proxy"
)

// Options are the upstream's options for a DataONE member node.
type Options struct {
	Forward       string `yaml:"forward"`
	Token         string `yaml:"token"`
	TokenFile     string `yaml:"tokenFile"`
	SubjectHeader string `yaml:"subjectHeader"`
	VerifyHeader  string `yaml:"verifyHeader"`
	SecretHeader  string `yaml:"secretHeader"`
	Secret        string `yaml:"secret"`
	SecretFile    string `yaml:"secretFile"`
	SpoolDir      string `yaml:"spoolDir"`
}

// DefaultOptions are the options an empty options block gives.
func DefaultOptions() Options {
	return Options{
		Forward:       ForwardNone,
		SubjectHeader: "Ssl-Client-Subject-Dn",
		VerifyHeader:  "Ssl-Client-Verify",
		SecretHeader:  "X-Proxy-Key",
	}
}

// Node is a member node served by an upstream DataONE member node. It is safe
// for concurrent use.
type Node struct {
	c      *upstream.Client
	http   *http.Client // c's transport; redirects stay on the upstream's host
	base   string       // the MN base URL, without a trailing slash or version
	o      Options
	token  string // none: the bridge's own token
	secret string // proxy: the proxy secret
	spool  string
	log    *slog.Logger
}

var (
	_ adapter.MemberNode      = (*Node)(nil)
	_ adapter.MNAuthorization = (*Node)(nil)
	_ adapter.MNStorage       = (*Node)(nil)
)

// Option adjusts a Node.
type Option func(*Node)

// WithLogger logs what the node cannot report to its caller (a spool file it
// could not remove).
func WithLogger(l *slog.Logger) Option {
	return func(n *Node) {
		if l != nil {
			n.log = l
		}
	}
}

// StaleSpool is how old a spool file must be for New to remove it as left
// behind by a crash.
const StaleSpool = 24 * time.Hour

// New builds the node upstream u describes, calling it through c. It does not
// contact the upstream; it makes spoolDir and removes stale spool files.
func New(u config.Upstream, c *upstream.Client, opts ...Option) (*Node, error) {
	n, err := parse(u)
	if err != nil {
		return nil, err
	}
	n.c, n.log = c, slog.New(slog.DiscardHandler)
	n.http = &http.Client{Transport: c.Transport(), CheckRedirect: sameHost}
	for _, opt := range opts {
		opt(n)
	}
	if err := os.MkdirAll(n.spool, 0o700); err != nil {
		return nil, fmt.Errorf("dataone: upstream %q: options.spoolDir: %w", u.Name, err)
	}
	n.sweep(StaleSpool)
	return n, nil
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on but making spoolDir. It reads tokenFile and secretFile.
func CheckOptions(u config.Upstream) error {
	_, err := parse(u)
	return err
}

// parse decodes and checks u's options into a node without its upstream
// client; it touches no directory.
func parse(u config.Upstream) (*Node, error) {
	o := DefaultOptions()
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, fmt.Errorf("dataone: %w", err)
	}
	n := &Node{o: o}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	b, err := url.Parse(u.BaseURL)
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" || b.RawQuery != "" || b.Fragment != "" {
		bad("baseURL %q is not an http(s) URL without query", u.BaseURL)
	} else {
		base := strings.TrimRight(b.String(), "/")
		for _, v := range []string{"/v1", "/v2"} {
			base = strings.TrimSuffix(base, v)
		}
		n.base = strings.TrimRight(base, "/")
	}

	forward := true // forward is a known mode
	switch o.Forward {
	case ForwardNone, ForwardToken, ForwardProxy:
	default:
		forward = false
		bad("options.forward: %q is not none, token or proxy", o.Forward)
	}
	if n.token, err = secretOption("token", o.Token, o.TokenFile); err != nil {
		errs = append(errs, err)
	}
	if n.secret, err = secretOption("secret", o.Secret, o.SecretFile); err != nil {
		errs = append(errs, err)
	}
	if forward && n.token != "" && o.Forward != ForwardNone {
		bad("options.token is the bridge's own identity, used only with forward: none (forward is %s)", o.Forward)
	}
	if forward && n.secret != "" && o.Forward != ForwardProxy {
		bad("options.secret is sent only with forward: proxy (forward is %s)", o.Forward)
	}
	if o.Forward == ForwardProxy {
		if !validHeaderName(o.SubjectHeader) {
			bad("options.subjectHeader %q is not a header name", o.SubjectHeader)
		}
		if o.VerifyHeader != "" && !validHeaderName(o.VerifyHeader) {
			bad("options.verifyHeader %q is not a header name", o.VerifyHeader)
		}
		if n.secret != "" && !validHeaderName(o.SecretHeader) {
			bad("options.secretHeader %q is not a header name", o.SecretHeader)
		}
	}
	if !validHeaderValue(n.token) || !validHeaderValue(n.secret) {
		bad("options.token and options.secret must be one line of printable characters")
	}

	n.spool = o.SpoolDir
	if n.spool == "" {
		n.spool = os.TempDir()
	}
	if n.spool, err = filepath.Abs(n.spool); err != nil {
		bad("options.spoolDir: %v", err)
	}
	if err := upstream.OptionProblems("dataone", u, errs...); err != nil {
		return nil, err
	}
	return n, nil
}

// secretOption is a value given inline or in a file (less trailing newlines).
func secretOption(name, inline, file string) (string, error) {
	if inline != "" && file != "" {
		return "", fmt.Errorf("options.%s and options.%sFile are both set", name, name)
	}
	if file == "" {
		return inline, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("options.%sFile: %w", name, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("options.%sFile %s is empty", name, file)
	}
	return v, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue: no control characters (a subject or secret cannot smuggle
// a header in).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// sameHost follows a redirect only to the upstream's own host (and from http
// to https, not back): the identity headers, the proxy secret among them, are
// sent again on a redirect. Another answer is handed back as it is, and is an
// error.
func sameHost(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) >= 10:
		return errors.New("stopped after 10 redirects")
	case req.URL.Host != first.Host, req.URL.Scheme != first.Scheme && req.URL.Scheme != "https":
		return http.ErrUseLastResponse
	}
	return nil
}

// Name is the upstream's name.
func (n *Node) Name() string { return n.c.Name() }

// State is the upstream breaker's state: closed, half-open or open.
func (n *Node) State() string { return n.c.State() }

// Close closes the idle connections to the upstream.
func (n *Node) Close() error {
	n.c.Close()
	return nil
}

// identify sets the headers that tell the upstream who calls (see the package
// documentation).
func (n *Node) identify(h http.Header, s *adapter.Session) error {
	switch n.o.Forward {
	case ForwardNone:
		if n.token != "" {
			h.Set("Authorization", "Bearer "+n.token)
		}
	case ForwardToken:
		if s != nil && s.Token != "" {
			if !validHeaderValue(s.Token) {
				return adapter.Errorf(adapter.InvalidToken, "the bearer token cannot be forwarded to upstream %q", n.c.Name())
			}
			h.Set("Authorization", "Bearer "+s.Token)
		}
	case ForwardProxy:
		if s == nil || s.Subject == "" || s.Subject == adapter.SubjectPublic || s.CredentialError != "" {
			return nil
		}
		if !validHeaderValue(s.Subject) {
			return adapter.Errorf(adapter.NotAuthorized, "the subject %q cannot be forwarded to upstream %q in a header", s.Subject, n.c.Name())
		}
		h.Set(n.o.SubjectHeader, s.Subject)
		if n.o.VerifyHeader != "" {
			h.Set(n.o.VerifyHeader, "SUCCESS")
		}
		if n.secret != "" {
			h.Set(n.o.SecretHeader, n.secret)
		}
	}
	return nil
}

// Ping asks the upstream's ping.
func (n *Node) Ping(ctx context.Context) error {
	return n.call(ctx, nil, request{op: "MNCore.ping", method: http.MethodGet, path: "/monitor/ping", what: "ping"}, nil)
}
