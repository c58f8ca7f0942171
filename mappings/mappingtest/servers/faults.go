package servers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Fault is what a FaultProxy does to the requests it passes on.
type Fault string

// Faults a FaultProxy injects.
const (
	// Pass forwards every request unchanged.
	Pass Fault = ""
	// ServerError answers every request 500 without forwarding it.
	ServerError Fault = "500"
	// Unavailable answers every request 503 without forwarding it.
	Unavailable Fault = "503"
	// Overloaded answers every request 429 with Retry-After: 1.
	Overloaded Fault = "429"
	// Hang never answers: it holds each request until the client gives up.
	Hang Fault = "hang"
	// CutGET forwards, and drops the connection of a GET's answer after
	// CutAfter body bytes.
	CutGET Fault = "cut"
)

// CutAfter is how many body bytes CutGET lets through.
const CutAfter = 100_000

// FaultProxy is a reverse proxy in front of a real server, on a loopback port,
// that injects faults and counts the requests it receives. It keeps the
// client's Host header, so S3 signatures and WebDAV Destination headers made
// for the proxy's address stay valid.
type FaultProxy struct {
	// URL is the proxy's root, http://127.0.0.1:PORT (with target's path).
	URL   string
	fault atomic.Value
	mu    sync.Mutex
	hits  map[string]int64 // by method
}

// NewFaultProxy starts a proxy to target (an http URL), closed when t ends.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{hits: map[string]int64{}}
	p.fault.Store(Pass)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL.Scheme, r.Out.URL.Host = u.Scheme, u.Host
		r.Out.Host = r.In.Host
	}}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.hits[r.Method]++
		p.mu.Unlock()
		switch p.fault.Load().(Fault) {
		case ServerError:
			w.WriteHeader(http.StatusInternalServerError)
			return
		case Unavailable:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case Overloaded:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case Hang:
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		case CutGET:
			if r.Method == http.MethodGet {
				rp.ServeHTTP(&cutWriter{ResponseWriter: w, left: CutAfter}, r)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: no handler outlives the test
	p.URL = srv.URL + u.Path
	return p
}

// Set changes the fault from now on.
func (p *FaultProxy) Set(f Fault) { p.fault.Store(f) }

// Hits is the number of requests with method received since the last
// ResetHits; every request when method is "".
func (p *FaultProxy) Hits(method string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if method != "" {
		return p.hits[method]
	}
	var n int64
	for _, h := range p.hits {
		n += h
	}
	return n
}

// ResetHits sets the counts to zero.
func (p *FaultProxy) ResetHits() {
	p.mu.Lock()
	clear(p.hits)
	p.mu.Unlock()
}

// cutWriter aborts the answer after left body bytes.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if len(b) > c.left {
		c.ResponseWriter.Write(b[:c.left])
		http.NewResponseController(c.ResponseWriter).Flush()
		panic(http.ErrAbortHandler) // net/http drops the connection
	}
	c.left -= len(b)
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

// LoseAnswer starts a reverse proxy to target that forwards every request;
// a request held selects is carried out to the end, then giveUp is called
// and its answer is kept until the client has gone: the client gave up on
// a request that the server completed. It returns the proxy's URL.
func LoseAnswer(t *testing.T, target string, held func(*http.Request) bool, giveUp func()) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL.Scheme, r.Out.URL.Host = u.Scheme, u.Host
		r.Out.Host = r.In.Host // S3 signatures and WebDAV's Destination name the proxy
	}}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !held(r) {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		if rec.Code >= 300 {
			t.Errorf("%s %s: %d %s", r.Method, r.URL.Path, rec.Code, rec.Body)
		}
		giveUp()
		<-r.Context().Done()
	}))
	t.Cleanup(proxy.Close)
	return proxy.URL
}
