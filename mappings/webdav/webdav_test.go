package webdav

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	xwebdav "golang.org/x/net/webdav"
)

// upstreamConfig is a WebDAV upstream named dav at baseURL with the given
// options (YAML).
func upstreamConfig(t testing.TB, baseURL, options string) config.Upstream {
	t.Helper()
	return mappingtest.UpstreamConfig(t, config.UpstreamWebDAV, "dav", baseURL, options)
}

func open(t testing.TB, u config.Upstream, m *metrics.Metrics) *Store {
	t.Helper()
	return mappingtest.Open(t, u, m, New)
}

var prefixes atomic.Int64

// acceptance runs the suite over the server at baseURL, whose files are under
// root, each store with its own prefix.
func acceptance(t *testing.T, baseURL, root, auth string) {
	mappingtest.Blobs(t, func(t *testing.T) node.Blobs {
		prefix := fmt.Sprintf("s%d/objects", prefixes.Add(1))
		s := open(t, upstreamConfig(t, baseURL, "prefix: "+prefix+"\n"+auth), nil)
		return mappingtest.FilesIn(s, filepath.Join(root, filepath.FromSlash(prefix)))
	})
}

func TestAcceptanceNginx(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	acceptance(t, d.URL, d.Root, "")
}

// TestAcceptanceNginxStrict: without create_full_put_path, a PUT needs its
// collection (the store makes tmp/), and the server wants a password.
func TestAcceptanceNginxStrict(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{Strict: true, Username: "d1", Password: "pw"})
	pwFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pwFile, []byte("pw\n"), 0o600)
	acceptance(t, d.URL, d.Root, "username: d1\npasswordFile: "+pwFile+"\n")
}

// TestAcceptanceXNetWebDAV runs the suite over golang.org/x/net/webdav in
// front of which a MOVE into a missing collection is answered 409 Conflict, as
// RFC 4918 §9.9.4 and Apache mod_dav have it (x/net answers 403, and nginx
// makes the collections itself): the store must make the fan-out collections.
func TestAcceptanceXNetWebDAV(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, "dav"), 0o755) // the base URL's collection exists
	var conflicts atomic.Int64
	h := &xwebdav.Handler{FileSystem: xwebdav.Dir(root), LockSystem: xwebdav.NewMemLS()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "MOVE" {
			if u, err := url.Parse(r.Header.Get("Destination")); err == nil {
				parent := filepath.Join(root, filepath.FromSlash(path.Dir(u.Path)))
				if _, err := os.Stat(parent); errors.Is(err, fs.ErrNotExist) {
					conflicts.Add(1)
					http.Error(w, "the destination's collection is missing", http.StatusConflict)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Run("suite", func(t *testing.T) { acceptance(t, srv.URL+"/dav/", filepath.Join(root, "dav"), "") })
	if conflicts.Load() == 0 {
		t.Error("no MOVE met a missing collection: the MKCOL path was not exercised")
	}
}

func TestLayout(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	s := open(t, upstreamConfig(t, d.URL, "prefix: /a b/objects/"), nil)
	for _, key := range []string{"8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b", "../../../../etc/passwd", "ü/x y"} {
		if _, err := s.Put(t.Context(), key, strings.NewReader(key)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(d.Root, "a b", "objects", filepath.FromSlash(upstream.BlobName(key)))
		if b, err := os.ReadFile(path); err != nil || string(b) != key {
			t.Errorf("%q: %s: %q %v", key, path, b, err)
		}
	}
	if es, _ := os.ReadDir(filepath.Join(d.Root, "a b", "objects", tmpCollection)); len(es) != 0 {
		t.Errorf("temporary files left: %v", es)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pwFile, []byte("secret\r\n"), 0o600)
	for _, tc := range []struct {
		name, baseURL, options, wantErr string
	}{
		{"none", "http://h/dav", "", ""},
		{"prefix", "http://h/dav/", "prefix: a/b", ""},
		{"passwordFile", "http://h/", "username: u\npasswordFile: " + pwFile, ""},
		{"unknown option", "http://h/", "prefx: a", "field prefx not found"},
		{"dot dot", "http://h/", "prefix: a/../b", `has a ".." segment`},
		{"empty segment", "http://h/", "prefix: a//b", "empty segment"},
		{"both passwords", "http://h/", "username: u\npassword: p\npasswordFile: " + pwFile, "both set"},
		{"password alone", "http://h/", "password: p", "without options.username"},
		{"missing file", "http://h/", "username: u\npasswordFile: /nonexistent", "passwordFile"},
		{"query", "http://h/?x=1", "", "no query"},
		{"credentials in URL", "http://u:p@h/", "", "no query, fragment or credentials"},
		{"not http", "ftp://h/", "", "not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := mappingtest.CheckNew(t, upstreamConfig(t, tc.baseURL, tc.options), New, tc.wantErr)
			switch { // these succeed, or CheckNew failed the test
			case tc.name == "passwordFile" && s.password != "secret":
				t.Errorf("password %q", s.password)
			case tc.name == "prefix" && s.object("k") != "http://h/dav/a/b/"+upstream.BlobName("k"):
				t.Errorf("object URL %s", s.object("k"))
			}
		})
	}
}

func TestWrongPassword(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{Username: "d1", Password: "pw"})
	s := open(t, upstreamConfig(t, d.URL, "username: d1\npassword: nope"), nil)
	_, err := s.Get(t.Context(), "k")
	if e := adapter.AsException(err); e.Kind != adapter.NotAuthorized || !strings.Contains(e.Description, `upstream "dav" refused access`) {
		t.Errorf("Get: %v", err)
	}
	if _, err := s.Put(t.Context(), "k", strings.NewReader("x")); !adapter.IsKind(err, adapter.NotAuthorized) {
		t.Errorf("Put: %v", err)
	}
	if err := s.Ping(t.Context()); !adapter.IsKind(err, adapter.NotAuthorized) {
		t.Errorf("Ping: %v", err)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	if err := open(t, upstreamConfig(t, d.URL, ""), nil).Ping(t.Context()); err != nil {
		t.Error(err)
	}
}

// remote is the prefix f of nginx d, for the shared fault suite. A Put's
// first request is a MKCOL of tmp when it is not known to exist (after a
// failed PUT), else the PUT.
func remote(t testing.TB, d servers.DAV) mappingtest.Remote[*Store] {
	return mappingtest.Remote[*Store]{Upstream: upstreamConfig(t, d.URL, "prefix: f"), New: New,
		PutMethods: []string{http.MethodPut, "MKCOL"}}
}

// blobsOnly is the store without its node.Lister methods, for the shared
// fault suite, whose Lister reads are an http store's (retried GETs):
// List and Stat here are PROPFINDs, which the upstream client does not
// retry. TestListFaults covers them.
type blobsOnly struct{ node.Blobs }

func TestFaults(t *testing.T) {
	t.Parallel()
	r := remote(t, servers.NginxDAV(t, servers.DAVOptions{}))
	mappingtest.Faults(t, mappingtest.Remote[blobsOnly]{Upstream: r.Upstream, PutMethods: r.PutMethods,
		New: func(u config.Upstream, c *upstream.Client) (blobsOnly, error) {
			s, err := New(u, c)
			return blobsOnly{s}, err
		}})
}

// TestNoGoroutineLeaks is not parallel: it counts goroutines.
func TestNoGoroutineLeaks(t *testing.T) {
	mappingtest.NoGoroutineLeaks(t, remote(t, servers.NginxDAV(t, servers.DAVOptions{})))
}

// brokenUpload yields n bytes, then fails, as a client gone mid-upload.
type brokenUpload struct{ n int }

var errGone = errors.New("the client went away")

func (b *brokenUpload) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errGone
	}
	n := min(len(p), b.n)
	clear(p[:n])
	b.n -= n
	return n, nil
}

// TestClientFailuresDoNotTrip: uploads that fail on the client's side are not
// the upstream's failures.
func TestClientFailuresDoNotTrip(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	reg := prometheus.NewRegistry()
	s := open(t, upstreamConfig(t, d.URL, "prefix: c"), metrics.New(reg, "test"))
	for range 5 {
		if _, err := s.Put(t.Context(), "k", &brokenUpload{n: 3 << 20}); !errors.Is(err, errGone) {
			t.Fatalf("Put: %v", err)
		}
	}
	if s.c.State() != "closed" {
		t.Errorf("breaker %s after client failures", s.c.State())
	}
	if es, _ := os.ReadDir(filepath.Join(d.Root, "c", tmpCollection)); len(es) != 0 {
		t.Errorf("temporary files left: %v", es)
	}
}

// TestOverwriteWhileReading: a range read after an overwrite fails instead of
// mixing two versions.
func TestOverwriteWhileReading(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	s := open(t, upstreamConfig(t, d.URL, ""), nil)
	ctx := t.Context()
	if _, err := s.Put(ctx, "k", strings.NewReader(strings.Repeat("a", 1000))); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	time.Sleep(1100 * time.Millisecond) // nginx's ETag has the mtime in seconds
	if _, err := s.Put(ctx, "k", strings.NewReader(strings.Repeat("b", 1000))); err != nil {
		t.Fatal(err)
	}
	r.(io.Seeker).Seek(500, io.SeekStart)
	if b, err := io.ReadAll(r); err == nil {
		t.Errorf("read %q across an overwrite", b[:10])
	}
}

// TestSweepRemovesStaleTemporaries: the first Put removes the temporary
// resources a crash left, only the stale ones, and only names the store
// makes.
func TestSweepRemovesStaleTemporaries(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	tmp := filepath.Join(d.Root, "p", tmpCollection)
	os.MkdirAll(tmp, 0o755)
	stale1, stale2, fresh := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	for _, name := range []string{stale1, stale2, fresh, "notes.txt"} {
		os.WriteFile(filepath.Join(tmp, name), []byte(name), 0o644)
	}
	old := time.Now().Add(-StaleAfter - time.Hour)
	for _, name := range []string{stale1, stale2, "notes.txt"} {
		os.Chtimes(filepath.Join(tmp, name), old, old)
	}
	s := open(t, upstreamConfig(t, d.URL, "prefix: p"), nil)
	if _, err := s.Put(t.Context(), "k", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	var left []string
	es, _ := os.ReadDir(tmp)
	for _, e := range es {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != fresh+",notes.txt" {
		t.Errorf("%s holds %v, want only the fresh one and notes.txt", tmpCollection, left)
	}
	if n, err := s.Sweep(t.Context(), 0); err != nil || n != 1 {
		t.Errorf("Sweep(0): %d, %v; want the fresh one", n, err)
	}
}
