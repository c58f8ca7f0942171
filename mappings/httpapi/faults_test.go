package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// faultOptions read the fake's JSON API in pages of 500 (a page is longer
// than servers.CutAfter).
var faultOptions = jsonOptions + `list: {url: "/api/records?page={page}&per_page={pageSize}", paging: page, pageSize: 500, items: records}`

func wantFailure(t *testing.T, what string, err error, want string) {
	t.Helper()
	if e := adapter.AsException(err); err == nil || e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, want) {
		t.Errorf("%s: %v, want a ServiceFailure with %q", what, err, want)
	}
}

// quick fails t when fn takes longer than limit.
func quick(t *testing.T, limit time.Duration, what string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	if d := time.Since(start); d > limit {
		t.Errorf("%s took %v, more than %v", what, d, limit)
	}
}

// TestFaults: through a proxy that fails, every operation fails quickly with a
// ServiceFailure that says how; reads are retried twice, writes never; a body
// cut mid-stream is an error; and it all works again after.
func TestFaults(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 2500)
	p := servers.NewFaultProxy(t, l.URL)
	u := upstreamConfig(t, p.URL, faultOptions)
	u.HeaderTimeout = 200 * time.Millisecond
	u.Breaker.Failures = 100 // this test is about retries
	s := open(t, u, nil)
	ctx := t.Context()
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	if _, err := s.Put(ctx, "big", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, "big"); return err }},
		{"Stat", func() error { _, err := s.Stat(ctx, "big"); return err }},
		{"List", func() error { _, _, err := s.List(ctx, time.Time{}, ""); return err }},
	}
	for _, tc := range []struct {
		fault servers.Fault
		want  string
	}{
		{servers.Unavailable, `upstream "legacy" failed (HTTP 503)`},
		{servers.Overloaded, `upstream "legacy" is overloaded (HTTP 429)`},
		{servers.Hang, `upstream "legacy" did not answer in time`},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			p.Set(tc.fault)
			defer p.Set(servers.Pass)
			for _, r := range reads {
				p.ResetHits()
				quick(t, 2*time.Second, r.name, func() { wantFailure(t, r.name, r.call(), tc.want) })
				if n := p.Hits(http.MethodGet); n != 3 {
					t.Errorf("%s: %d upstream hits, want 3 (two retries)", r.name, n)
				}
			}
			p.ResetHits()
			_, err := s.Put(ctx, "other", strings.NewReader("x"))
			wantFailure(t, "Put", err, `upstream "legacy"`)
			wantFailure(t, "Delete", s.Delete(ctx, "other"), `upstream "legacy"`)
			if n := p.Hits(http.MethodPut) + p.Hits(http.MethodDelete); n != 2 {
				t.Errorf("Put and Delete: %d upstream hits, want 2 (not retried)", n)
			}
		})
	}
	t.Run("cut", func(t *testing.T) {
		p.Set(servers.CutGET)
		defer p.Set(servers.Pass)
		r, err := s.Get(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(b) >= len(data) {
			t.Errorf("read %d bytes, error %v: a cut body must be an error", len(b), err)
		}
		_, _, err = s.List(ctx, time.Time{}, "")
		wantFailure(t, "a cut list page", err, `upstream "legacy" is unreachable (the list page at the start)`)
	})
	t.Run("recovered", func(t *testing.T) {
		r, err := s.Get(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if b, err := io.ReadAll(r); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%d bytes, %v", len(b), err)
		}
		if page, _, err := s.List(ctx, time.Time{}, ""); err != nil || len(page) != 500 {
			t.Errorf("List: %d, %v", len(page), err)
		}
	})
}

// TestStalledBody: an answer whose body stops flowing ends a list at the
// upstream's timeout, and an object read when its caller gives up.
func TestStalledBody(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"records": [`)
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	u := upstreamConfig(t, srv.URL, faultOptions)
	u.Timeout = 300 * time.Millisecond
	s := open(t, u, nil)
	quick(t, time.Second, "List", func() {
		_, _, err := s.List(t.Context(), time.Time{}, "")
		wantFailure(t, "List", err, `upstream "legacy" did not answer in time (the list page at the start)`)
	})
	ctx, cancel := context.WithCancel(t.Context())
	r, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	time.AfterFunc(100*time.Millisecond, cancel)
	quick(t, time.Second, "reading a stalled object", func() {
		if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
			t.Errorf("reading: %v", err)
		}
	})
}

// TestBreakerOpensAndCloses: failing calls open the breaker, which then
// answers at once without reaching the upstream, and closes again after
// openFor when a trial call succeeds.
func TestBreakerOpensAndCloses(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 10)
	p := servers.NewFaultProxy(t, l.URL)
	s := open(t, upstreamConfig(t, p.URL, faultOptions), nil) // 3 failures, open for 300ms
	ctx := t.Context()
	p.Set(servers.Unavailable)
	for range 3 {
		_, err := s.Stat(ctx, "r00001")
		wantFailure(t, "Stat", err, "HTTP 503")
	}
	p.ResetHits()
	quick(t, 50*time.Millisecond, "calls with the breaker open", func() {
		_, err := s.Get(ctx, "r00001")
		wantFailure(t, "Get", err, `upstream "legacy" is unavailable (circuit open after 3 failures)`)
		_, _, err = s.List(ctx, time.Time{}, "")
		wantFailure(t, "List", err, `upstream "legacy" is unavailable`)
	})
	if h := p.Hits(""); h != 0 || s.c.State() != "open" {
		t.Errorf("breaker %s, %d requests reached the upstream", s.c.State(), h)
	}
	p.Set(servers.Pass)
	time.Sleep(350 * time.Millisecond)
	if page, _, err := s.List(ctx, time.Time{}, ""); err != nil || len(page) != 10 {
		t.Fatalf("after openFor: %d, %v", len(page), err)
	}
	if s.c.State() != "closed" {
		t.Errorf("breaker %s after a good trial call", s.c.State())
	}
	for range 5 {
		if _, err := s.Stat(ctx, "missing"); !adapter.IsKind(err, adapter.NotFound) {
			t.Fatal(err)
		}
	}
	if s.c.State() != "closed" {
		t.Errorf("breaker %s after NotFounds", s.c.State())
	}
}

// TestStoppedUpstream: with nothing listening, calls fail at once as
// unreachable, and the breaker opens after three.
func TestStoppedUpstream(t *testing.T) {
	t.Parallel()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	u := upstreamConfig(t, "http://"+addr, faultOptions)
	u.Breaker.OpenFor = time.Minute // open for the whole test
	s := open(t, u, nil)
	ctx := t.Context()
	quick(t, 2*time.Second, "calls to a stopped upstream", func() {
		_, err := s.Get(ctx, "k")
		wantFailure(t, "Get", err, `upstream "legacy" is unreachable (object "k")`)
		_, err = s.Stat(ctx, "k")
		wantFailure(t, "Stat", err, `upstream "legacy" is unreachable (object "k")`)
		_, _, err = s.List(ctx, time.Time{}, "")
		wantFailure(t, "List", err, `upstream "legacy" is unreachable (the list page at the start)`)
		_, err = s.Put(ctx, "k", strings.NewReader("x"))
		wantFailure(t, "Put", err, `upstream "legacy" is unavailable (circuit open after 3 failures)`)
	})
}

// TestNoGoroutineLeaks: reads whole, abandoned, missing, failed and cut, and
// puts that succeed or fail, leave no goroutine behind once the clients and
// servers are closed. It does not run in parallel: it counts goroutines.
func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		l := newLegacy(t, 600)
		defer l.Close() // now, not at the end of the test
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000000")
			w.Write(make([]byte, 1000))
			panic(http.ErrAbortHandler) // cut
		}))
		defer srv.Close()
		for _, base := range []string{l.URL, srv.URL} {
			u := upstreamConfig(t, base, faultOptions)
			c := upstream.New(u, nil)
			defer c.Close()
			s, err := New(u, c)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			for range 3 {
				if r, err := s.Get(ctx, "r00001"); err == nil {
					io.ReadAll(r)
					r.Close()
				}
				if r, err := s.Get(ctx, "r00002"); err == nil {
					r.Read(make([]byte, 3))
					r.Close() // abandoned
				}
				s.Get(ctx, "missing")
				s.Stat(ctx, "r00003")
				s.List(ctx, time.Time{}, "")
				s.Put(ctx, "new", strings.NewReader("bytes"))
				s.Put(ctx, "failing", io.MultiReader(strings.NewReader("some"), iotest.ErrReader(errors.New("the client went away"))))
			}
		}
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
