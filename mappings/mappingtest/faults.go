package mappingtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Faults runs the fault suite: through a servers.FaultProxy in front of the
// origin, every call fails quickly with a ServiceFailure that says how; reads
// are retried twice, writes never; a body cut mid-stream is an error; and it
// all works again after (the subtests 500, 503, 429, hang, cut, recovered,
// one after another). StoppedUpstream and BreakerOpensAndCloses run in
// parallel after them. The reads are Get and, when the store is a
// node.Lister, Stat and List.
func Faults[S node.Blobs](t *testing.T, r Remote[S]) {
	t.Run("StoppedUpstream", func(t *testing.T) { t.Parallel(); testStoppedUpstream(t, r) })
	t.Run("BreakerOpensAndCloses", func(t *testing.T) { t.Parallel(); testBreaker(t, r) })
	testFailingUpstream(t, r)
}

// faulty is a store under test and what the suite knows of it.
type faulty struct {
	s     node.Blobs
	c     *upstream.Client
	name  string // `upstream "name"`, as its errors say
	reads []read
}

// read is one of a store's reads, with how its errors name what it read.
type read struct {
	name, what string
	call       func(ctx context.Context) error
}

// open builds r's store at baseURL (a FaultProxy's URL, which keeps the
// origin's path, or a closed port), with the timeouts, retries and breaker
// the suite counts on, tuned by tune.
func (r Remote[S]) open(t *testing.T, baseURL string, tune func(*config.Upstream)) faulty {
	t.Helper()
	u := r.Upstream
	u.BaseURL = baseURL
	u.HeaderTimeout = 200 * time.Millisecond
	u.Retry = config.Retry{Max: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	u.Breaker = config.Breaker{Failures: 3, OpenFor: 300 * time.Millisecond}
	if tune != nil {
		tune(&u)
	}
	c := upstream.New(u, metrics.New(prometheus.NewRegistry(), "test"))
	t.Cleanup(c.Close)
	s, err := r.New(u, c)
	if err != nil {
		t.Fatal(err)
	}
	f := faulty{s: s, c: c, name: fmt.Sprintf("upstream %q", u.Name)}
	f.reads = []read{{"Get", `object "obj"`, func(ctx context.Context) error {
		rc, err := s.Get(ctx, "obj")
		if err == nil {
			rc.Close()
		}
		return err
	}}}
	if r.lister() {
		l := any(s).(node.Lister)
		f.reads = append(f.reads,
			read{"Stat", `object "obj"`, func(ctx context.Context) error { _, err := l.Stat(ctx, "obj"); return err }},
			read{"List", r.ListWhat, func(ctx context.Context) error { _, _, err := l.List(ctx, time.Time{}, ""); return err }})
	}
	return f
}

// lister reports whether r's stores are node.Listers, whose Stat and List are
// reads too.
func (r Remote[S]) lister() bool {
	_, ok := any(*new(S)).(node.Lister)
	return ok
}

// putMethods are the methods of the requests a Put may send first.
func (r Remote[S]) putMethods() []string {
	if len(r.PutMethods) == 0 {
		return []string{http.MethodPut}
	}
	return r.PutMethods
}

// wantFailure fails t unless err is a ServiceFailure whose description holds want.
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

// listed is the keys of the first page of s's listing, if s is a node.Lister.
func listed(t *testing.T, s node.Blobs) []string {
	t.Helper()
	l, ok := s.(node.Lister)
	if !ok {
		return nil
	}
	page, _, err := l.List(t.Context(), time.Time{}, "")
	if err != nil || len(page) == 0 {
		t.Fatalf("List: %d, %v", len(page), err)
	}
	var keys []string
	for _, f := range page {
		keys = append(keys, f.Key)
	}
	return keys
}

// faultData is the object the suite reads through faults: longer than
// servers.CutAfter.
var faultData = bytes.Repeat([]byte("0123456789"), 100_000)

func testFailingUpstream[S node.Blobs](t *testing.T, r Remote[S]) {
	p := servers.NewFaultProxy(t, r.Upstream.BaseURL)
	f := r.open(t, p.URL, func(u *config.Upstream) { u.Breaker.Failures = 100 }) // this is about retries
	ctx := t.Context()
	put(t, f.s, "obj", faultData)
	keys := listed(t, f.s)
	for _, tc := range []struct {
		fault servers.Fault
		want  string // its what's %s
	}{
		{servers.ServerError, "failed (HTTP 500) on %s"},
		{servers.Unavailable, "failed (HTTP 503) on %s"},
		{servers.Overloaded, "is overloaded (HTTP 429) and refused %s"},
		{servers.Hang, "did not answer in time (%s)"},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			p.Set(tc.fault)
			defer p.Set(servers.Pass)
			for _, rd := range f.reads {
				p.ResetHits()
				quick(t, 2*time.Second, rd.name, func() {
					wantFailure(t, rd.name, rd.call(ctx), f.name+" "+fmt.Sprintf(tc.want, rd.what))
				})
				if n, all := p.Hits(http.MethodGet), p.Hits(""); n != 3 || all != 3 {
					t.Errorf("%s: %d upstream requests, %d GETs; want 3 GETs (two retries)", rd.name, all, n)
				}
			}
			p.ResetHits()
			_, err := f.s.Put(ctx, "obj2", strings.NewReader("x"))
			wantFailure(t, "Put", err, f.name)
			var n int64
			for _, m := range r.putMethods() {
				n += p.Hits(m)
			}
			if n != 1 {
				t.Errorf("Put: %d %v requests, want 1 (not retried)", n, r.putMethods())
			}
			p.ResetHits()
			wantFailure(t, "Delete", f.s.Delete(ctx, "obj2"), f.name)
			if n := p.Hits(http.MethodDelete); n != 1 {
				t.Errorf("Delete: %d requests, want 1 (not retried)", n)
			}
		})
	}
	t.Run("cut", func(t *testing.T) {
		p.Set(servers.CutGET)
		defer p.Set(servers.Pass)
		rc, err := f.s.Get(ctx, "obj")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(b) >= len(faultData) {
			t.Errorf("read %d bytes, error %v: a cut body must be an error", len(b), err)
		}
		if l, ok := f.s.(node.Lister); ok {
			_, _, err = l.List(ctx, time.Time{}, "")
			wantFailure(t, "a cut list page", err, f.name+" is unreachable ("+r.ListWhat+")")
		}
	})
	t.Run("recovered", func(t *testing.T) {
		// Judged over a few seconds: on a loaded machine (CI runs every
		// package at once, under -race) one answer may take longer than the
		// 200 ms the suite gives a response's headers.
		recovered := func() error {
			r, err := f.s.Get(t.Context(), "obj")
			if err != nil {
				return err
			}
			b, err := io.ReadAll(r)
			r.Close()
			switch {
			case err != nil:
				return err
			case !bytes.Equal(b, faultData):
				return fmt.Errorf("%d bytes, not those put", len(b))
			}
			if l, ok := f.s.(node.Lister); ok {
				page, _, err := l.List(t.Context(), time.Time{}, "")
				if err != nil {
					return err
				}
				var after []string
				for _, f := range page {
					after = append(after, f.Key)
				}
				if !slices.Equal(after, keys) {
					return fmt.Errorf("listed %d keys, %d before the faults", len(after), len(keys))
				}
			}
			return nil
		}
		deadline := time.Now().Add(5 * time.Second)
		for err := recovered(); err != nil; err = recovered() {
			if time.Now().After(deadline) {
				t.Fatalf("not recovered 5 s after the faults: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// testStoppedUpstream: with nothing listening, calls fail at once as
// unreachable, and the breaker opens after three.
func testStoppedUpstream[S node.Blobs](t *testing.T, r Remote[S]) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	f := r.open(t, "http://"+addr, func(u *config.Upstream) { u.Breaker.OpenFor = time.Minute }) // open for the whole test
	ctx := t.Context()
	quick(t, 2*time.Second, "calls to a stopped upstream", func() {
		for i := range 3 {
			rd := f.reads[i%len(f.reads)]
			wantFailure(t, rd.name, rd.call(ctx), f.name+" is unreachable ("+rd.what+")")
		}
		_, err := f.s.Put(ctx, "obj", strings.NewReader("x"))
		wantFailure(t, "Put after 3 failures", err, f.name+" is unavailable (circuit open after 3 failures)")
	})
	if f.c.State() != "open" {
		t.Errorf("breaker %s", f.c.State())
	}
}

// testBreaker: failing calls open the breaker, which then answers at once
// without reaching the upstream, and closes again after openFor when a trial
// call succeeds; NotFounds leave it closed.
func testBreaker[S node.Blobs](t *testing.T, r Remote[S]) {
	p := servers.NewFaultProxy(t, r.Upstream.BaseURL)
	// The refused calls (Get, Put, and Stat and List of a Lister) take at
	// most a second on a loaded machine (CI, with -race), and the store's
	// own waits after a failure; the breaker stays open for 300ms more,
	// after the third failure's wait too.
	calls := 2
	if r.lister() {
		calls = 4
	}
	refused := time.Second + time.Duration(calls)*r.Backoff
	openFor := 300*time.Millisecond + refused + r.Backoff
	f := r.open(t, p.URL, func(u *config.Upstream) { u.Breaker.OpenFor = openFor })
	ctx := t.Context()
	data := []byte("the breaker's object")
	put(t, f.s, "breaker", data)
	p.Set(servers.Unavailable)
	for i := range 3 {
		rd := f.reads[i%len(f.reads)]
		wantFailure(t, rd.name, rd.call(ctx), "HTTP 503")
	}
	p.ResetHits()
	open := f.name + " is unavailable (circuit open after 3 failures)"
	quick(t, refused, "calls with the breaker open", func() {
		for _, rd := range f.reads {
			wantFailure(t, rd.name, rd.call(ctx), open)
		}
		_, err := f.s.Put(ctx, "breaker", strings.NewReader("x"))
		wantFailure(t, "Put", err, open)
	})
	if h := p.Hits(""); h != 0 || f.c.State() != "open" {
		t.Errorf("breaker %s, %d requests reached the upstream", f.c.State(), h)
	}
	p.Set(servers.Pass)
	time.Sleep(openFor + 50*time.Millisecond)
	if b := get(t, f.s, "breaker"); !bytes.Equal(b, data) {
		t.Errorf("after openFor: %q", b)
	}
	if f.c.State() != "closed" {
		t.Errorf("breaker %s after a good trial call", f.c.State())
	}
	listed(t, f.s)
	for range 5 {
		if _, err := f.s.Get(ctx, "missing"); !adapter.IsKind(err, adapter.NotFound) {
			t.Fatal(err)
		}
		if l, ok := f.s.(node.Lister); ok {
			if _, err := l.Stat(ctx, "missing"); !adapter.IsKind(err, adapter.NotFound) {
				t.Fatal(err)
			}
		}
	}
	if f.c.State() != "closed" {
		t.Errorf("breaker %s after NotFounds", f.c.State())
	}
}

// NoGoroutineLeaks checks that reads whole, abandoned, missing, failed and
// cut, and puts and deletes that succeed or fail, leave no goroutine behind
// once the store's clients and servers are closed. The test that calls it
// must not be parallel (it counts goroutines), and must have started the
// origin already.
func NoGoroutineLeaks[S node.Blobs](t *testing.T, r Remote[S]) {
	before := runtime.NumGoroutine()
	func() {
		cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "1000000")
			w.Write(make([]byte, 1000))
			panic(http.ErrAbortHandler) // cut
		}))
		defer cut.Close()
		for _, base := range []string{r.Upstream.BaseURL, cut.URL} {
			u := r.Upstream
			u.BaseURL = base
			c := upstream.New(u, nil)
			defer c.Close() // now, not at the end of the test
			s, err := r.New(u, c)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			for range 3 {
				s.Put(ctx, "leak", bytes.NewReader(faultData))
				if rc, err := s.Get(ctx, "leak"); err == nil {
					io.ReadAll(rc)
					rc.Close()
				}
				if rc, err := s.Get(ctx, "leak"); err == nil {
					rc.Read(make([]byte, 3))
					rc.Close() // abandoned
				}
				s.Get(ctx, "missing")
				if l, ok := any(s).(node.Lister); ok {
					l.Stat(ctx, "leak")
					l.List(ctx, time.Time{}, "")
				}
				s.Put(ctx, "failing", io.MultiReader(strings.NewReader("some"), iotest.ErrReader(errors.New("the client went away"))))
				s.Delete(ctx, "leak")
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

// WantNothingAt fails t when s holds an object under key, as after a Put
// that failed.
func WantNothingAt(t *testing.T, s node.Blobs, key string) {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err == nil {
		b, _ := io.ReadAll(r)
		r.Close()
		t.Errorf("Put failed, but %d bytes are stored under its key", len(b))
	} else if !adapter.IsKind(err, adapter.NotFound) {
		t.Fatal(err)
	}
}
