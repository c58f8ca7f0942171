package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// mtlsServer answers with the common name of the client certificate it was
// shown; it requires one issued by ca.
func mtlsServer(t *testing.T, ca *servers.CA) *httptest.Server {
	t.Helper()
	certFile, keyFile := ca.Server(t, "server")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.Config.ErrorLog = nil
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func subjectSeen(t *testing.T, c *Client, url string) (string, error) {
	t.Helper()
	resp, err := c.HTTP().Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestMutualTLS: the client verifies the upstream with tls.ca and presents
// tls.cert and tls.key; without them the handshake fails.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := servers.NewCA(t, dir, "upstream CA")
	srv := mtlsServer(t, ca)
	cert, key := ca.Client(t, "bridge", "CN=urn:node:bridge,DC=dataone,DC=org", time.Time{}, time.Time{})
	u := config.Upstream{Name: "mn", Type: config.UpstreamDataONE, BaseURL: srv.URL,
		TLS: config.UpstreamTLS{CA: ca.File, Cert: cert, Key: key}}

	c, err := Open(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := subjectSeen(t, c, srv.URL); err != nil || got != "urn:node:bridge" {
		t.Fatalf("the upstream saw %q, %v", got, err)
	}

	t.Run("no client certificate", func(t *testing.T) {
		u := u
		u.TLS.Cert, u.TLS.Key = "", ""
		c, err := Open(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got, err := subjectSeen(t, c, srv.URL); err == nil {
			t.Fatalf("the upstream answered %q to a caller without a certificate", got)
		}
	})
	t.Run("system roots", func(t *testing.T) {
		u := u
		u.TLS.CA = ""
		c, err := Open(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := subjectSeen(t, c, srv.URL); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("without tls.ca: %v", err)
		}
	})
	t.Run("another CA's certificate", func(t *testing.T) {
		other := servers.NewCA(t, filepath.Join(dir, "other"), "other CA")
		cert, key := other.Client(t, "stranger", "CN=stranger", time.Time{}, time.Time{})
		u := u
		u.TLS.Cert, u.TLS.Key = cert, key
		c, err := Open(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got, err := subjectSeen(t, c, srv.URL); err == nil {
			t.Fatalf("the upstream answered %q to a certificate of another CA", got)
		}
	})
}

// TestReloadTLS: a renewed certificate at the same paths is presented after
// ReloadTLS without a new client; a reload that fails keeps the old one.
func TestReloadTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := servers.NewCA(t, dir, "upstream CA")
	srv := mtlsServer(t, ca)
	cert, key := ca.Client(t, "bridge", "CN=first", time.Time{}, time.Time{})
	u := config.Upstream{Name: "mn", Type: config.UpstreamHTTP, BaseURL: srv.URL,
		TLS: config.UpstreamTLS{CA: ca.File, Cert: cert, Key: key}}
	c, err := Open(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := subjectSeen(t, c, srv.URL); err != nil || got != "first" {
		t.Fatalf("before: %q, %v", got, err)
	}

	// The renewed certificate replaces the files (same name, so same paths).
	if c2, k2 := ca.Client(t, "bridge", "CN=renewed", time.Time{}, time.Time{}); c2 != cert || k2 != key {
		t.Fatal("the renewed files are elsewhere")
	}
	if got, _ := subjectSeen(t, c, srv.URL); got != "first" {
		t.Fatalf("before ReloadTLS the pooled connection presented %q", got)
	}
	if err := c.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got, err := subjectSeen(t, c, srv.URL); err != nil || got != "renewed" {
		t.Fatalf("after ReloadTLS: %q, %v", got, err)
	}

	// A key that does not match: the reload fails, naming the files, and
	// the client keeps presenting the renewed certificate.
	_, otherKey := ca.Client(t, "other", "CN=other", time.Time{}, time.Time{})
	b, _ := os.ReadFile(otherKey)
	os.WriteFile(key, b, 0o600)
	err = c.ReloadTLS()
	if err == nil || !strings.Contains(err.Error(), `upstream "mn": tls.cert `+cert+` and tls.key `+key) {
		t.Fatalf("reload with a wrong key: %v", err)
	}
	if got, err := subjectSeen(t, c, srv.URL); err != nil || got != "renewed" {
		t.Fatalf("after a failed reload: %q, %v", got, err)
	}
}

// TestTLSFileErrors: Open names the key and the file of every kind of
// problem; New's client fails every call with it.
func TestTLSFileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := servers.NewCA(t, dir, "upstream CA")
	cert, key := ca.Client(t, "bridge", "CN=bridge", time.Time{}, time.Time{})
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644)
	_, otherKey := ca.Client(t, "other", "CN=other", time.Time{}, time.Time{})
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		tls  config.UpstreamTLS
		err  string
	}{
		{"missing ca", config.UpstreamTLS{CA: missing}, `upstream "mn": tls.ca: open ` + missing + `: no such file or directory`},
		{"ca not PEM", config.UpstreamTLS{CA: notPEM}, `upstream "mn": tls.ca: ` + notPEM + ` holds no PEM certificate`},
		{"missing cert", config.UpstreamTLS{Cert: missing, Key: key}, `upstream "mn": tls.cert: stat ` + missing + `: no such file or directory`},
		{"missing key", config.UpstreamTLS{Cert: cert, Key: missing}, `upstream "mn": tls.key: stat ` + missing + `: no such file or directory`},
		{"cert without key", config.UpstreamTLS{Cert: cert}, `upstream "mn": tls.cert is set without tls.key`},
		{"key without cert", config.UpstreamTLS{Key: key}, `upstream "mn": tls.key is set without tls.cert`},
		{"key of another certificate", config.UpstreamTLS{Cert: cert, Key: otherKey},
			`upstream "mn": tls.cert ` + cert + ` and tls.key ` + otherKey + `: tls: private key does not match public key`},
		{"cert not PEM", config.UpstreamTLS{Cert: notPEM, Key: key}, `upstream "mn": tls.cert ` + notPEM + ` and tls.key ` + key + `: tls: failed to find any PEM data in certificate input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := config.Upstream{Name: "mn", Type: config.UpstreamHTTP, BaseURL: "https://127.0.0.1:1", TLS: tc.tls}
			if _, err := LoadTLS(u); err == nil || err.Error() != tc.err {
				t.Errorf("LoadTLS: %v\nwant %s", err, tc.err)
			}
			if c, err := Open(u, nil); err == nil || err.Error() != tc.err || c != nil {
				t.Errorf("Open: %v, %v", c, err)
			}
			c := New(u, nil)
			defer c.Close()
			_, err := c.HTTP().Get(u.BaseURL)
			e := adapter.AsException(err)
			if e.Kind != adapter.ServiceFailure || !strings.Contains(e.Error(), tc.err) {
				t.Errorf("a call of New's client: %v", err)
			}
		})
	}
	if cfg, err := LoadTLS(config.Upstream{Name: "mn"}); cfg != nil || err != nil {
		t.Errorf("no TLS files: %v, %v", cfg, err)
	}
}

// TestAnonymous: a call made with Anonymous presents no client certificate,
// before and after ReloadTLS, on connections of its own (never one a
// certificate was presented on), while other calls keep presenting it; both
// verify the upstream with tls.ca and count in the metrics.
func TestAnonymous(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := servers.NewCA(t, dir, "upstream CA")
	certFile, keyFile := ca.Server(t, "server")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(ca.File)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			io.WriteString(w, "anonymous")
			return
		}
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cert, key := ca.Client(t, "bridge", "CN=first", time.Time{}, time.Time{})
	u := config.Upstream{Name: "mn", Type: config.UpstreamDataONE, BaseURL: srv.URL,
		TLS: config.UpstreamTLS{CA: ca.File, Cert: cert, Key: key}}
	c, err := Open(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := func(anon bool) string {
		t.Helper()
		ctx := t.Context()
		if anon {
			ctx = Anonymous(ctx)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := c.HTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for i, want := range []struct {
		anon bool
		who  string
	}{{false, "first"}, {true, "anonymous"}, {false, "first"}, {true, "anonymous"}} {
		if got := seen(want.anon); got != want.who {
			t.Errorf("call %d (anonymous %v): the upstream saw %q, want %q", i, want.anon, got, want.who)
		}
	}
	ca.Client(t, "bridge", "CN=renewed", time.Time{}, time.Time{})
	if err := c.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := seen(true); got != "anonymous" {
		t.Errorf("anonymous after ReloadTLS: the upstream saw %q", got)
	}
	if got := seen(false); got != "renewed" {
		t.Errorf("after ReloadTLS: the upstream saw %q", got)
	}
}
