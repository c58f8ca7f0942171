package mappings_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
