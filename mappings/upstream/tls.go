package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/metrics"
)

// TLS of an upstream (upstreams[].tls):
//
//	ca    PEM certificate authorities trusted for the upstream's server
//	      certificate, instead of the system's
//	cert  PEM client certificate (with its chain) presented to the upstream
//	key   its PEM private key; cert and key together (mutual TLS, as DataONE
//	      nodes authenticate each other)
//
// The files are read when the client is built (Open fails naming the key and
// the file of a problem; New returns a client whose every call fails with it)
// and again by ReloadTLS, which replaces the pooled transport: calls in flight
// finish on the old connections, new calls present the renewed certificate.
//
// A call made with a context from Anonymous presents no client certificate:
// it goes through a second pooled transport, the same but for the
// certificate (same CA, same limits), so that its connections are never ones
// a certificate was presented on. It shares the chain (metrics, breaker,
// retries) with every other call; maxConns bounds each pool.

// LoadTLS reads the TLS files of u into the client configuration of its
// transport: nil, nil when u configures none. An error names the upstream, the
// key (tls.ca, tls.cert, tls.key) and the file.
func LoadTLS(u config.Upstream) (*tls.Config, error) {
	t := u.TLS
	if t == (config.UpstreamTLS{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: tls.ca: %w", u.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("upstream %q: tls.ca: %s holds no PEM certificate", u.Name, t.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.Cert != "" && t.Key == "":
		return nil, fmt.Errorf("upstream %q: tls.cert is set without tls.key", u.Name)
	case t.Key != "" && t.Cert == "":
		return nil, fmt.Errorf("upstream %q: tls.key is set without tls.cert", u.Name)
	case t.Cert != "":
		for _, f := range [][2]string{{"tls.cert", t.Cert}, {"tls.key", t.Key}} {
			if _, err := os.Stat(f[1]); err != nil {
				return nil, fmt.Errorf("upstream %q: %s: %w", u.Name, f[0], err)
			}
		}
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: tls.cert %s and tls.key %s: %w", u.Name, t.Cert, t.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// ReloadTLS reads the upstream's TLS files again (a renewed client
// certificate, a new CA bundle) and, when they load, makes new connections use
// them: the pooled transport is replaced by a copy with the new TLS
// configuration, and the old one's idle connections are closed. When they do
// not load, the client keeps what it had and the error says why. Without TLS
// files it does nothing.
func (c *Client) ReloadTLS() error {
	cfg, err := LoadTLS(c.u)
	if err != nil || cfg == nil {
		return err
	}
	old, oldAnon := c.base.cur.Load(), c.base.anon.Load()
	next := old.Clone()
	next.TLSClientConfig = cfg
	c.base.store(next)
	c.base.tlsErr.Store(nil)
	old.CloseIdleConnections()
	oldAnon.CloseIdleConnections()
	return nil
}

// Open builds the client of upstream u as New does, and fails when its TLS
// files do not load (the error names the key and the file).
func Open(u config.Upstream, m *metrics.Metrics) (*Client, error) {
	c := New(u, m)
	if err := c.base.tlsErr.Load(); err != nil {
		return nil, *err
	}
	return c, nil
}

// pooled is the *http.Transport at the end of the chain, swapped whole by
// ReloadTLS, and its twin without the client certificate for Anonymous calls.
type pooled struct {
	cur    atomic.Pointer[http.Transport]
	anon   atomic.Pointer[http.Transport] // cur without the client certificate
	tlsErr atomic.Pointer[error]          // TLS files that did not load at New: every call fails
	name   string
}

// store makes tr the transport, and its copy without client certificate the
// anonymous one.
func (p *pooled) store(tr *http.Transport) {
	anon := tr.Clone()
	if anon.TLSClientConfig != nil {
		anon.TLSClientConfig.Certificates = nil
		anon.TLSClientConfig.GetClientCertificate = nil
	}
	p.anon.Store(anon)
	p.cur.Store(tr)
}

func (p *pooled) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := p.tlsErr.Load(); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, adapter.Wrap(adapter.ServiceFailure, *err, "upstream %q cannot be called: its TLS files did not load", p.name)
	}
	if isAnonymous(r.Context()) {
		return p.anon.Load().RoundTrip(r)
	}
	return p.cur.Load().RoundTrip(r)
}

func (p *pooled) closeIdle() {
	p.cur.Load().CloseIdleConnections()
	p.anon.Load().CloseIdleConnections()
}

type anonKey struct{}

// Anonymous makes the calls made with ctx present no client certificate
// (upstreams[].tls.cert): the upstream sees them as public, unless the
// request itself carries a credential. A mapping that calls with its own
// identity uses it for a caller the upstream must not trust as much as it
// trusts the mapping.
func Anonymous(ctx context.Context) context.Context {
	return context.WithValue(ctx, anonKey{}, true)
}

func isAnonymous(ctx context.Context) bool {
	v, _ := ctx.Value(anonKey{}).(bool)
	return v
}
