// Package upstream is the HTTP client every mapping uses to reach an existing
// store: one *http.Client per configured upstream, whose transport is a chain of
// small http.RoundTripper decorators (Caddy's reverseproxy, go-kit's gobreaker):
//
//	metrics → breaker → retry → request id → *http.Transport
//
// Each layer is small:
//
//   - metrics records every call with ObserveUpstream(upstream, operation,
//     outcome, time to the answer's headers); the operation comes from
//     WithOperation, else the method.
//   - breaker (sony/gobreaker/v2) opens after breaker.failures consecutive
//     failures (network errors, timeouts, 5xx and 429; any other answer,
//     such as a genuine 404, is a success) and answers at once with a
//     ServiceFailure naming the upstream until breaker.openFor has passed and a
//     trial call succeeds. A call that failed because of its caller (canceled,
//     or its request body failed to read) counts neither way, and its outcome
//     is client_error.
//   - retry repeats GET and HEAD without a body, only before any body byte is
//     read: on transport errors and on 5xx/429 answers, whose bodies it drains
//     and closes, with exponential backoff between retry.minBackoff and
//     retry.maxBackoff (or the answer's Retry-After, capped), stopping when the
//     context ends. A retried call is one call to the breaker and the metrics.
//   - request id sets X-Request-Id from adapter.RequestID(ctx).
//   - the pooled *http.Transport bounds connections (maxConns), dialing
//     (dialTimeout) and waiting for headers (headerTimeout), and never
//     decompresses: object bytes arrive as stored. Its TLS verifies the
//     upstream with tls.ca (else the system's roots) and presents the client
//     certificate tls.cert with tls.key (tls.go); ReloadTLS replaces it.
//     Calls made with Anonymous go through a twin transport that presents no
//     client certificate.
//
// There is no overall client timeout, since object bodies stream for as long as
// they flow; metadata calls take WithTimeout (the upstream's timeout).
//
// A response cut off mid-body is seen by whoever reads the body; the breaker
// and the metrics have already counted the call by then (at its headers).
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/sony/gobreaker/v2"
	"go.yaml.in/yaml/v3"
)

// Client reaches one upstream. It is safe for concurrent use.
type Client struct {
	u     config.Upstream
	base  *pooled
	chain http.RoundTripper
	http  *http.Client
	cb    *gobreaker.CircuitBreaker[*http.Response]
}

// New builds the client of upstream u (config.UpstreamDefaults fills its zero
// settings); m may be nil. When u's TLS files do not load, every call of the
// client fails with a ServiceFailure saying why: use Open to fail at once.
func New(u config.Upstream, m *metrics.Metrics) *Client {
	u = config.UpstreamDefaults(u)
	c := &Client{u: u, base: &pooled{name: u.Name}}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   u.DialTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxConnsPerHost:       u.MaxConns,
		MaxIdleConns:          u.MaxConns,
		MaxIdleConnsPerHost:   u.MaxConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   u.DialTimeout,
		ResponseHeaderTimeout: u.HeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	if cfg, err := LoadTLS(u); err != nil {
		c.base.tlsErr.Store(&err)
	} else {
		tr.TLSClientConfig = cfg
	}
	c.base.store(tr)
	c.cb = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:    u.Name,
		Timeout: u.Breaker.OpenFor,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return n.ConsecutiveFailures >= u.Breaker.Failures
		},
		IsExcluded: isCallerFault,
		OnStateChange: func(name string, _, to gobreaker.State) {
			m.SetBreakerState(name, int(to))
		},
	})
	m.SetBreakerState(u.Name, int(gobreaker.StateClosed))
	var rt http.RoundTripper = c.base
	rt = requestID{next: rt}
	rt = &retry{next: rt, cfg: u.Retry}
	rt = &breaker{next: rt, cb: c.cb, name: u.Name, failures: u.Breaker.Failures}
	rt = &observe{next: rt, m: m, name: u.Name}
	c.chain = rt
	c.http = &http.Client{Transport: rt, CheckRedirect: sameHostHeaders}
	return c
}

// Name is the upstream's configured name.
func (c *Client) Name() string { return c.u.Name }

// Config is the upstream's configuration with the defaults applied.
func (c *Client) Config() config.Upstream { return c.u }

// HTTP is the client: no overall timeout, redirects followed as net/http does.
func (c *Client) HTTP() *http.Client { return c.http }

// Transport is the whole decorator chain, for libraries that take a
// RoundTripper (minio-go).
func (c *Client) Transport() http.RoundTripper { return c.chain }

// State is the breaker's state, for monitoring: closed, half-open or open.
func (c *Client) State() string { return c.cb.State().String() }

// WithTimeout bounds a call that carries no object bytes (metadata, listings,
// deletes) by the upstream's timeout.
func (c *Client) WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.u.Timeout)
}

// Close closes the idle pooled connections.
func (c *Client) Close() { c.base.closeIdle() }

type opKey struct{}

// WithOperation names the operation of the calls made with ctx, for the
// upstream metrics (GetObject, PutObject, MOVE...).
func WithOperation(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// operation is the name WithOperation gave, else the request's method.
func operation(r *http.Request) string {
	if op, ok := r.Context().Value(opKey{}).(string); ok && op != "" {
		return op
	}
	return r.Method
}

// DecodeOptions decodes the upstream's options into v strictly: a key v does
// not know is an error. Empty options leave v as it is.
func DecodeOptions(u config.Upstream, v any) error {
	if u.Options.IsZero() {
		return nil
	}
	b, err := yaml.Marshal(&u.Options)
	if err != nil {
		return fmt.Errorf("upstream %q: options: %w", u.Name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		// The decoder counts lines from the options' first key.
		return fmt.Errorf("upstream %q: options (from line %d of the file): %w", u.Name, u.Options.Line, err)
	}
	return nil
}

// OptionProblems is how a mapping reports what is wrong with an upstream's
// options (and baseURL): errs joined, one problem a line, each prefixed
// `<mapping>: upstream "<name>": ` so that every line names its upstream.
// Joined errors among errs are taken apart, and nils left out; nil when there
// is no problem.
func OptionProblems(mapping string, u config.Upstream, errs ...error) error {
	var out []error
	var add func(err error)
	add = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				add(e)
			}
			return
		}
		if err != nil {
			out = append(out, fmt.Errorf("%s: upstream %q: %w", mapping, u.Name, err))
		}
	}
	for _, err := range errs {
		add(err)
	}
	return errors.Join(out...)
}

// redirectSafeHeaders are the request headers kept on a redirect to another
// host: they describe the request, not who makes it.
var redirectSafeHeaders = []string{"Accept", "Range", "If-Range", "If-Match", "If-None-Match",
	"If-Modified-Since", "User-Agent", RequestIDHeader}

// sameHostHeaders follows up to 10 redirects, as net/http does, but a
// redirect to another host (a CDN, a presigned URL) carries no header but
// redirectSafeHeaders: net/http drops only Authorization and Cookie, and a
// mapping's own credential headers (an API key) must not leave the upstream.
func sameHostHeaders(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Host == via[0].URL.Host {
		return nil
	}
	kept := http.Header{}
	for _, k := range redirectSafeHeaders {
		if v, ok := req.Header[k]; ok {
			kept[k] = v
		}
	}
	req.Header = kept
	return nil
}
