package dataone

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// quick fails t if fn takes longer than d.
func quick(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	if took := time.Since(start); took > d {
		t.Errorf("%s took %v, more than %v", what, took, d)
	}
}

func wantFailure(t *testing.T, err error, desc string) {
	t.Helper()
	if e := adapter.AsException(err); e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, desc) {
		t.Errorf("got %v, want a ServiceFailure saying %q", err, desc)
	}
}

// TestUpstreamStopped: nothing listens: calls fail at once as unreachable,
// then the breaker opens and answers without dialing.
func TestUpstreamStopped(t *testing.T) {
	t.Parallel()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	cfg := upstreamConfig(t, "http://"+addr+"/mn", "")
	cfg.Breaker.OpenFor = 2 * time.Second // still open when the next call comes, on a loaded machine too
	n := open(t, cfg, nil)
	s := session("CN=x", "")
	quick(t, 2*time.Second, "three calls to a stopped upstream", func() {
		for i := range 3 {
			_, err := n.SystemMetadata(t.Context(), s, "p")
			wantFailure(t, err, `upstream "up" is unreachable (the system metadata of "p")`)
			_ = i
		}
	})
	quick(t, time.Second, "a call with the breaker open", func() {
		_, err := n.Get(t.Context(), s, "p")
		wantFailure(t, err, `upstream "up" is unavailable (circuit open after 3 failures)`)
	})
	if n.State() != "open" {
		t.Errorf("breaker %s", n.State())
	}
	data := []byte("bytes")
	u := stage(t, n, data)
	_, err := n.Create(t.Context(), s, newSysmeta("p", data, "SHA-1"), u)
	wantFailure(t, err, `upstream "up" is unavailable`)
	if got := spooled(t, n); len(got) != 0 {
		t.Errorf("spool files left: %v", got)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	data := randomBytes(3, 300_000)
	f.put("p", "", data)
	p := servers.NewFaultProxy(t, f.URL)
	newNode := func(t *testing.T, tune func(u *config.Upstream)) *Node {
		u := upstreamConfig(t, p.URL, "")
		u.HeaderTimeout, u.Timeout = 200*time.Millisecond, time.Second
		if tune != nil {
			tune(&u)
		}
		return open(t, u, nil)
	}
	s := session("CN=x", "")
	// The subtests share the proxy: they run in order.

	t.Run("503", func(t *testing.T) {
		n := newNode(t, func(u *config.Upstream) { u.Breaker.Failures = 100 })
		p.Set(servers.Unavailable)
		defer p.Set(servers.Pass)
		p.ResetHits()
		quick(t, time.Second, "a 503", func() {
			_, err := n.SystemMetadata(t.Context(), s, "p")
			wantFailure(t, err, `upstream "up" answered HTTP 503 to the system metadata of "p", not a DataONE error`)
		})
		if h := p.Hits("GET"); h != 3 {
			t.Errorf("%d GETs, want 3 (two retries)", h)
		}
		p.ResetHits()
		_, err := n.Create(t.Context(), s, newSysmeta("q", data, "SHA-1"), stage(t, n, data))
		wantFailure(t, err, `upstream "up" answered HTTP 503 to the new object "q"`)
		if h := p.Hits("POST"); h != 1 {
			t.Errorf("%d POSTs, want 1 (a create is not retried)", h)
		}
		if got := spooled(t, n); len(got) != 0 {
			t.Errorf("spool files left: %v", got)
		}
	})
	t.Run("500 from the node", func(t *testing.T) {
		n := newNode(t, nil)
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			fail(w, adapter.ServiceFailure, "p", "database down")
			return true
		})
		defer f.setHook(nil)
		// Its own words go to the log (the cause), not to the client.
		_, err := n.SystemMetadata(t.Context(), s, "p")
		wantFailure(t, err, `up: the upstream failed (HTTP 500) to answer the system metadata of "p"`)
		if !strings.Contains(err.Error(), "database down") {
			t.Errorf("the cause for the log lost the upstream's description: %v", err)
		}
	})
	t.Run("hang", func(t *testing.T) {
		n := newNode(t, func(u *config.Upstream) { u.Breaker.Failures = 100 })
		p.Set(servers.Hang)
		defer p.Set(servers.Pass)
		quick(t, 2*time.Second, "a hanging upstream's metadata", func() {
			_, err := n.SystemMetadata(t.Context(), s, "p")
			wantFailure(t, err, `upstream "up" did not answer in time (the system metadata of "p")`)
		})
		quick(t, 2*time.Second, "a hanging upstream's object", func() {
			_, err := n.Get(t.Context(), s, "p")
			wantFailure(t, err, `upstream "up" did not answer in time`)
		})
	})
	t.Run("slow body", func(t *testing.T) {
		n := newNode(t, nil)
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, "/mn/v2/meta/") {
				return false
			}
			w.Header().Set("Content-Type", "text/xml")
			io.WriteString(w, `<?xml version="1.0"?><d2:systemMetadata xmlns:d2="http://ns.dataone.org/service/types/v2.0">`)
			http.NewResponseController(w).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return true
		})
		defer f.setHook(nil)
		quick(t, 2*time.Second, "a document that stops flowing", func() {
			_, err := n.SystemMetadata(t.Context(), s, "p")
			wantFailure(t, err, `upstream "up" did not answer in time (the system metadata of "p")`)
		})
	})
	t.Run("cut document", func(t *testing.T) {
		n := newNode(t, nil)
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, "/mn/v2/meta/") {
				return false
			}
			w.Header().Set("Content-Length", "5000")
			io.WriteString(w, `<?xml version="1.0"?><d2:systemMetadata xmlns:d2="http://ns.dataone.org/service/types/v2.0">`)
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		})
		defer f.setHook(nil)
		_, err := n.SystemMetadata(t.Context(), s, "p")
		wantFailure(t, err, `upstream "up" is unreachable (the system metadata of "p")`)
	})
	t.Run("cut object", func(t *testing.T) {
		n := newNode(t, nil)
		p.Set(servers.CutGET)
		defer p.Set(servers.Pass)
		obj, err := n.Get(t.Context(), s, "p")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Body.Close()
		var b []byte
		quick(t, time.Second, "reading a cut object", func() { b, err = io.ReadAll(obj.Body) })
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(b) >= len(data) {
			t.Errorf("read %d of %d bytes, error %v: a cut body must fail", len(b), len(data), err)
		}
	})
	t.Run("cut upload", func(t *testing.T) {
		n := newNode(t, nil)
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			io.CopyN(io.Discard, r.Body, 1<<20)
			panic(http.ErrAbortHandler)
		})
		defer f.setHook(nil)
		big := bytes.Repeat([]byte("x"), 8<<20)
		quick(t, 2*time.Second, "an upload the upstream drops", func() {
			_, err := n.Create(t.Context(), s, newSysmeta("cut", big, "SHA-1"), stage(t, n, big))
			wantFailure(t, err, `upstream "up"`)
		})
		if got := spooled(t, n); len(got) != 0 {
			t.Errorf("spool files left: %v", got)
		}
	})
	t.Run("breaker opens and closes", func(t *testing.T) {
		const openFor = 2 * time.Second // the checks while open come within it on a loaded machine too
		n := newNode(t, func(u *config.Upstream) { u.Breaker.OpenFor = openFor })
		p.Set(servers.Unavailable)
		for range 3 {
			_, err := n.SystemMetadata(t.Context(), s, "p")
			wantFailure(t, err, "HTTP 503")
		}
		p.ResetHits()
		quick(t, openFor/2, "a call with the breaker open", func() {
			_, err := n.SystemMetadata(t.Context(), s, "p")
			wantFailure(t, err, `upstream "up" is unavailable (circuit open after 3 failures)`)
		})
		if h := p.Hits(""); h != 0 || n.State() != "open" {
			t.Errorf("breaker %s, %d requests reached the upstream", n.State(), h)
		}
		p.Set(servers.Pass)
		time.Sleep(openFor + 50*time.Millisecond)
		if _, err := n.SystemMetadata(t.Context(), s, "p"); err != nil {
			t.Fatalf("after openFor: %v", err)
		}
		if n.State() != "closed" {
			t.Errorf("breaker %s after a good trial call", n.State())
		}
	})
	t.Run("not found does not trip", func(t *testing.T) {
		n := newNode(t, nil)
		for range 5 {
			if _, err := n.SystemMetadata(t.Context(), s, "missing"); !adapter.IsKind(err, adapter.NotFound) {
				t.Fatal(err)
			}
		}
		if n.State() != "closed" {
			t.Errorf("breaker %s after NotFounds", n.State())
		}
	})
}

// TestNoGoroutineLeaks: gets read whole, abandoned or failed, and creates
// that succeed or are cut, leave no goroutine behind once the connections are
// closed. It does not run in parallel: it counts goroutines.
func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		f := newFake(t)
		defer f.srv.Close()
		data := randomBytes(4, 200_000)
		f.put("p", "", data)
		u := upstreamConfig(t, f.URL, "spoolDir: "+t.TempDir())
		c := upstream.New(u, nil)
		defer c.Close()
		n, err := New(u, c)
		if err != nil {
			t.Fatal(err)
		}
		s := session("CN=x", "")
		for range 3 {
			obj, err := n.Get(t.Context(), s, "p")
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(obj.Body)
			obj.Body.Close()
			obj, _ = n.Get(t.Context(), s, "p")
			obj.Body.(io.Seeker).Seek(150_000, io.SeekStart)
			io.CopyN(io.Discard, obj.Body, 10)
			obj.Body.Close() // abandoned mid-way
			n.Get(t.Context(), s, "missing")
			n.Create(t.Context(), s, newSysmeta("c", data, "SHA-1"), stage(t, n, data))
			n.Create(t.Context(), s, newSysmeta("c", data, "SHA-1"), stage(t, n, data)) // taken
		}
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			io.CopyN(io.Discard, r.Body, 1000)
			panic(http.ErrAbortHandler)
		})
		n.Create(t.Context(), s, newSysmeta("cut", data, "SHA-1"), stage(t, n, data))
	}()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestOwnCredentialRefused: with forward none (or proxy, a subject sent) an
// upstream's InvalidToken is about this node's own credential (or proxy
// secret), which the client cannot fix: it reached the client as
// InvalidToken, as if its own token were bad. It is a ServiceFailure that
// says whose credential; with forward token the client's token was refused,
// and InvalidToken stays.
func TestOwnCredentialRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		options string
		want    adapter.Kind
	}{
		{"{forward: none, token: expired-token}", adapter.ServiceFailure},
		{"{forward: proxy, secret: stale, subjectHeader: X-Subject}", adapter.ServiceFailure},
		{"forward: token", adapter.InvalidToken},
	} {
		t.Run(tc.options, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				fail(w, adapter.InvalidToken, "p", "the token has expired")
				return true
			})
			n := open(t, upstreamConfig(t, f.URL, tc.options), nil)
			_, err := n.SystemMetadata(t.Context(), session("CN=x", "client-token"), "p")
			e := adapter.AsException(err)
			if e.Kind != tc.want {
				t.Fatalf("got %s %q, want %s", e.Kind, e.Description, tc.want)
			}
			if tc.want == adapter.ServiceFailure && !strings.Contains(e.Description, "own credential") {
				t.Errorf("the description does not say whose credential was refused: %q", e.Description)
			}
		})
	}
}
