package mappings_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestStatusChecksTheStore: an upstream that serves is up only when the
// store's own check passes against the real server, not when its base URL
// merely answers: a missing bucket, refused credentials, a missing WebDAV
// collection and an http repository whose list answers 404 are each down,
// with a reason that names the upstream and says why.
func TestStatusChecksTheStore(t *testing.T) {
	t.Parallel()
	s3 := servers.VersityGW(t)
	dav := servers.NginxDAV(t, servers.DAVOptions{})
	legacy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/records" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"records": [{"id": "a"}]}`)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(legacy.Close)
	s3Store := func(bucket, secret string) string {
		return fmt.Sprintf("upstreams:\n  - {name: bucket, type: s3, baseURL: %q, retry: {max: 0}, options: {bucket: %s, accessKey: %s, secretKey: %s}}\nstore: bucket\n",
			s3.Endpoint, bucket, s3.AccessKey, secret)
	}
	davStore := func(collection string) string {
		return fmt.Sprintf("upstreams:\n  - {name: share, type: webdav, baseURL: %q, retry: {max: 0}}\nstore: share\n", dav.URL+collection)
	}
	httpStore := func(list string) string {
		return fmt.Sprintf("upstreams:\n  - {name: legacy, type: http, baseURL: %q, retry: {max: 0}, options: {get: {url: \"/records/{key}/content\"}, list: {url: %q, items: records, fields: {key: id}}}}\nstore: legacy\n",
			legacy.URL, list)
	}
	for _, tc := range []struct {
		name, config string
		want         []string // parts of the reason; none: up
	}{
		{name: "s3", config: s3Store(s3.Bucket, s3.Secret)},
		{name: "s3 missing bucket", config: s3Store("no-such-bucket", s3.Secret), want: []string{`bucket "no-such-bucket"`, `upstream "bucket"`}},
		{name: "s3 wrong credentials", config: s3Store(s3.Bucket, "wrong-secret"), want: []string{`upstream "bucket" refused access`, "403"}},
		{name: "webdav", config: davStore("")},
		{name: "webdav missing collection", config: davStore("no-such-collection/"), want: []string{`upstream "share"`, "base collection"}},
		{name: "http", config: httpStore("/records")},
		{name: "http list answering 404", config: httpStore("/gone"), want: []string{`upstream "legacy"`, "readiness probe", "first page of list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := loadConfig(t, "dataDir: "+t.TempDir()+"\n"+tc.config)
			n, err := mappings.New(cfg, slog.New(slog.DiscardHandler), metrics.New(prometheus.NewRegistry(), "test"))
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			st := n.Status(t.Context())
			if len(st) != 1 {
				t.Fatalf("status: %+v", st)
			}
			if len(tc.want) == 0 {
				if !st[0].Up {
					t.Fatalf("down: %s", st[0].Error)
				}
				return
			}
			if st[0].Up {
				t.Fatalf("up; want down saying %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(st[0].Error, w) {
					t.Errorf("reason %q does not say %q", st[0].Error, w)
				}
			}
		})
	}
}

// TestStatusHeadReason: an upstream without a check of its own (here the
// identifiers' DataCite) is checked by a HEAD of its base URL; down, its
// reason names it and says why without the transport's text, which names the
// host and port (the status endpoints are public).
func TestStatusHeadReason(t *testing.T) {
	t.Parallel()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, url string
		want      []string
	}{
		{"refused", closed.URL, []string{`upstream "doi"`, "unreachable"}},
		{"503", failing.URL, []string{`upstream "doi"`, "HTTP 503"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t, "dataDir: "+t.TempDir()+fmt.Sprintf(`
upstreams:
  - {name: doi, type: datacite, baseURL: %q, retry: {max: 0},
     options: {prefix: "10.5072", username: EXAMPLE.REPO, passwordFile: %s}}
identifiers: doi
`, tc.url, secret))
			n, err := mappings.New(cfg, slog.New(slog.DiscardHandler), metrics.New(prometheus.NewRegistry(), "test"))
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			st := n.Status(t.Context())
			if len(st) != 1 || st[0].Up {
				t.Fatalf("status %+v, want doi down", st)
			}
			for _, w := range tc.want {
				if !strings.Contains(st[0].Error, w) {
					t.Errorf("reason %q does not say %q", st[0].Error, w)
				}
			}
			if host := strings.TrimPrefix(tc.url, "http://"); strings.Contains(st[0].Error, host) {
				t.Errorf("reason %q names the address %s", st[0].Error, host)
			}
		})
	}
}
