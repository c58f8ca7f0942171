package upstream

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

// These tests compare goroutine counts, so they do not run in parallel.

// noLeaks fails t if goroutines started during the test outlive it. Call it
// first: its cleanup runs last, after the servers and clients are closed.
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		n := runtime.NumGoroutine()
		for n > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		if n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines before the test, %d after:\n%s", before, n, buf)
		}
	})
}

// fixture is a client over a fake upstream, with a registry to read metrics from.
type fixture struct {
	c    *Client
	srv  *httptest.Server
	reg  *prometheus.Registry
	hits atomic.Int64
}

func testConfig(name, baseURL string) config.Upstream {
	return config.Upstream{
		Name: name, Type: config.UpstreamHTTP, BaseURL: baseURL,
		DialTimeout: 300 * time.Millisecond, HeaderTimeout: 200 * time.Millisecond, Timeout: time.Second,
		MaxConns: 4,
		Retry:    config.Retry{Max: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		Breaker:  config.Breaker{Failures: 3, OpenFor: 200 * time.Millisecond},
	}
}

// newFixture serves h as the upstream "up"; tune adjusts its configuration.
func newFixture(t *testing.T, h http.HandlerFunc, tune func(*config.Upstream)) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry()}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	u := testConfig("up", f.srv.URL)
	if tune != nil {
		tune(&u)
	}
	f.c = New(u, metrics.New(f.reg, "test"))
	t.Cleanup(f.c.Close)
	return f
}

func (f *fixture) do(t *testing.T, ctx context.Context, method string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, f.srv.URL+"/obj", nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.c.HTTP().Do(req)
}

// metric reads a counter or gauge of the registry by its labels.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return value(m)
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

func outcomes(t *testing.T, f *fixture, op, outcome string) float64 {
	return metric(t, f.reg, "d1bridge_upstream_requests_total", map[string]string{"upstream": "up", "operation": op, "outcome": outcome})
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOKCarriesRequestIDAndOperation(t *testing.T) {
	noLeaks(t)
	var gotID atomic.Value
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		gotID.Store(r.Header.Get("X-Request-Id"))
		io.WriteString(w, "hello")
	}, nil)
	ctx := WithOperation(adapter.WithRequest(t.Context(), "req-42"), "GetObject")
	resp, err := f.do(t, ctx, http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "hello" {
		t.Errorf("body %q", body)
	}
	if id, _ := gotID.Load().(string); id != "req-42" {
		t.Errorf("X-Request-Id %q, want req-42", id)
	}
	if n := outcomes(t, f, "GetObject", OutcomeOK); n != 1 {
		t.Errorf("ok outcomes %v, want 1", n)
	}
	// Without an operation, the method names the call.
	resp, err = f.do(t, t.Context(), http.MethodHead)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := outcomes(t, f, "HEAD", OutcomeOK); n != 1 {
		t.Errorf("HEAD outcomes %v, want 1", n)
	}
	if f.c.Name() != "up" || f.c.State() != "closed" {
		t.Errorf("name %q state %q", f.c.Name(), f.c.State())
	}
}

// deadAddr is a loopback port where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestDeadUpstreamFailsQuickly(t *testing.T) {
	noLeaks(t)
	u := testConfig("up", "")
	reg := prometheus.NewRegistry()
	c := New(u, metrics.New(reg, "test"))
	t.Cleanup(c.Close)
	start := time.Now()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+deadAddr(t)+"/obj", nil)
	_, err := c.HTTP().Do(req)
	if err == nil {
		t.Fatal("a dead upstream answered")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	e := adapter.AsException(c.Error(err, `object "k"`))
	if e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, `upstream "up" is unreachable`) {
		t.Errorf("exception %v", e)
	}
	if n := metric(t, reg, "d1bridge_upstream_requests_total", map[string]string{"outcome": OutcomeError}); n != 1 {
		t.Errorf("error outcomes %v, want 1 (retries are one call)", n)
	}
}

// hangupServer accepts connections and closes them at once, counting them.
func hangupServer(t *testing.T) (addr string, accepts *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String(), accepts
}

func TestTransportErrorsRetriedOnlyForGetAndHead(t *testing.T) {
	noLeaks(t)
	addr, accepts := hangupServer(t)
	for _, tc := range []struct {
		method string
		body   io.Reader
		calls  int64
	}{
		{http.MethodGet, nil, 3},
		{http.MethodHead, nil, 3},
		{http.MethodGet, strings.NewReader("a body"), 1},
		{http.MethodPut, strings.NewReader("x"), 1},
		{http.MethodDelete, nil, 1},
		{"MOVE", nil, 1},
	} {
		t.Run(tc.method, func(t *testing.T) {
			c := New(testConfig("up", "http://"+addr), nil)
			defer c.Close()
			accepts.Store(0)
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, "http://"+addr+"/obj", tc.body)
			if _, err := c.HTTP().Do(req); err == nil {
				t.Fatal("no error")
			}
			if n := accepts.Load(); n != tc.calls {
				t.Errorf("%d connections, want %d", n, tc.calls)
			}
		})
	}
}

func TestSlowUpstreamTimesOut(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, nil)
	t.Cleanup(func() { close(release) }) // runs before the server closes
	start := time.Now()
	_, err := f.do(t, t.Context(), http.MethodGet)
	if err == nil {
		t.Fatal("no error")
	}
	// 3 attempts of 200ms each, plus backoff.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("took %v", d)
	}
	if n := f.hits.Load(); n != 3 {
		t.Errorf("%d hits, want 3", n)
	}
	e := adapter.AsException(f.c.Error(err, `object "k"`))
	if !strings.Contains(e.Description, `upstream "up" did not answer in time`) {
		t.Errorf("exception %v", e)
	}
	// A PUT is not retried.
	f.hits.Store(0)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, f.srv.URL+"/obj", strings.NewReader("x"))
	if _, err := f.c.HTTP().Do(req); err == nil {
		t.Fatal("no error")
	}
	if n := f.hits.Load(); n != 1 {
		t.Errorf("PUT: %d hits, want 1", n)
	}
}

func TestWithTimeoutBoundsAMetadataCall(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // the body stalls after the headers
		case <-release:
		case <-r.Context().Done():
		}
	}, func(u *config.Upstream) { u.Timeout = time.Second }) // the headers come within it on a loaded machine too
	t.Cleanup(func() { close(release) })
	ctx, cancel := f.c.WithTimeout(t.Context())
	defer cancel()
	start := time.Now()
	resp, err := f.do(t, ctx, http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read error %v, want the deadline", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestServerErrorsRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header string
	}{
		{"500", http.StatusInternalServerError, ""},
		{"503", http.StatusServiceUnavailable, ""},
		{"429", http.StatusTooManyRequests, "1"}, // Retry-After capped at maxBackoff
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, "upstream trouble")
			}, nil)
			start := time.Now()
			resp, err := f.do(t, t.Context(), http.MethodGet)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Errorf("status %d", resp.StatusCode)
			}
			// The last answer comes back unread.
			e := adapter.AsException(f.c.Exception(resp, `object "k"`))
			if e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, `upstream "up"`) ||
				!strings.Contains(e.Err.Error(), "upstream trouble") {
				t.Errorf("exception %v", e)
			}
			if n := f.hits.Load(); n != 3 {
				t.Errorf("%d hits, want 3", n)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("took %v", d)
			}
			if n := outcomes(t, f, "GET", OutcomeServerError); n != 1 {
				t.Errorf("server_error outcomes %v, want 1", n)
			}
			// Not retried: a POST.
			f.hits.Store(0)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+"/obj", strings.NewReader("x"))
			resp, err = f.c.HTTP().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n := f.hits.Load(); n != 1 {
				t.Errorf("POST: %d hits, want 1", n)
			}
		})
	}
}

func TestRetrySucceeds(t *testing.T) {
	noLeaks(t)
	var n atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusBadGateway)
			w.Write(bytes.Repeat([]byte("x"), 100<<10)) // longer than what is drained
			return
		}
		io.WriteString(w, "third time")
	}, nil)
	resp, err := f.do(t, t.Context(), http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "third time" {
		t.Errorf("body %q", body)
	}
	if f.c.State() != "closed" {
		t.Errorf("state %s", f.c.State())
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	noLeaks(t)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}, func(u *config.Upstream) {
		u.Retry = config.Retry{Max: 5, MinBackoff: 5 * time.Second, MaxBackoff: 10 * time.Second}
	})
	// The context covers the first answer on a loaded machine too, and ends
	// well before the first backoff would.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	resp, err := f.do(t, ctx, http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 || f.hits.Load() != 1 {
		t.Errorf("status %d after %d hits", resp.StatusCode, f.hits.Load())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestCutMidBody(t *testing.T) {
	noLeaks(t)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		w.Write(bytes.Repeat([]byte("a"), 100_000))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}, nil)
	resp, err := f.do(t, t.Context(), http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read %d bytes, error %v; want an unexpected EOF", len(b), err)
	}
	if n := f.hits.Load(); n != 1 {
		t.Errorf("%d hits: a body already started must not be retried", n)
	}
}

func TestBreakerOpensAndCloses(t *testing.T) {
	noLeaks(t)
	var healthy atomic.Bool
	// Open long enough that the checks made while it is open come within
	// it on a loaded machine (CI, with -race).
	const openFor = 2 * time.Second
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}, func(u *config.Upstream) { u.Breaker.OpenFor = openFor })
	gauge := func() float64 {
		return metric(t, f.reg, "d1bridge_upstream_breaker_state", map[string]string{"upstream": "up"})
	}
	// Three failing calls (a GET with its retries is one) open it.
	for range 3 {
		resp, err := f.do(t, t.Context(), http.MethodGet)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if f.c.State() != "open" || gauge() != 2 {
		t.Fatalf("state %s, gauge %v after 3 failures", f.c.State(), gauge())
	}
	hits := f.hits.Load()
	start := time.Now()
	_, err := f.do(t, t.Context(), http.MethodGet)
	e := adapter.AsException(f.c.Error(err, `object "k"`))
	if e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, `upstream "up" is unavailable (circuit open after 3 failures)`) {
		t.Errorf("exception %v", e)
	}
	if time.Since(start) > openFor/2 || f.hits.Load() != hits {
		t.Errorf("an open breaker reached the upstream, or was slow")
	}
	if !IsUnavailable(err) || outcomes(t, f, "GET", OutcomeBreakerOpen) != 1 {
		t.Errorf("breaker_open outcomes %v", outcomes(t, f, "GET", OutcomeBreakerOpen))
	}
	// After openFor, one trial: a failure opens it again...
	time.Sleep(openFor + 50*time.Millisecond)
	if f.c.State() != "half-open" || gauge() != 1 {
		t.Fatalf("state %s gauge %v after openFor", f.c.State(), gauge())
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL, nil)
	resp, err := f.c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f.c.State() != "open" {
		t.Fatalf("state %s after a failed trial", f.c.State())
	}
	// ...and a success closes it.
	healthy.Store(true)
	time.Sleep(openFor + 50*time.Millisecond)
	resp, err = f.do(t, t.Context(), http.MethodGet)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); body != "ok" {
		t.Errorf("body %q", body)
	}
	if f.c.State() != "closed" || gauge() != 0 {
		t.Errorf("state %s gauge %v after a good trial", f.c.State(), gauge())
	}
}

func TestNotFoundDoesNotTrip(t *testing.T) {
	noLeaks(t)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}, nil)
	for range 10 {
		resp, err := f.do(t, t.Context(), http.MethodGet)
		if err != nil {
			t.Fatal(err)
		}
		e := adapter.AsException(f.c.Exception(resp, `object "k"`))
		if e.Kind != adapter.NotFound {
			t.Fatalf("exception %v", e)
		}
	}
	if f.c.State() != "closed" {
		t.Errorf("state %s after 404s", f.c.State())
	}
	if n := f.hits.Load(); n != 10 {
		t.Errorf("%d hits: a 404 must not be retried", n)
	}
	if n := outcomes(t, f, "GET", OutcomeNotFound); n != 10 {
		t.Errorf("not_found outcomes %v", n)
	}
}

func TestCanceledCallsDoNotTrip(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, func(u *config.Upstream) { u.HeaderTimeout = 5 * time.Second })
	t.Cleanup(func() { close(release) })
	for range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		if _, err := f.do(t, ctx, http.MethodGet); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	}
	if f.c.State() != "closed" {
		t.Errorf("state %s: the caller's cancellations tripped the breaker", f.c.State())
	}
}

func TestConcurrentCallsRespectMaxConns(t *testing.T) {
	noLeaks(t)
	var cur, peak atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}, func(u *config.Upstream) { u.MaxConns = 2 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := f.do(t, t.Context(), http.MethodGet)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 2 {
		t.Errorf("%d concurrent calls, want at most maxConns=2", p)
	}
}

func TestStatusExceptions(t *testing.T) {
	c := New(testConfig("bucket", ""), nil)
	defer c.Close()
	for status, want := range map[int]adapter.Kind{
		400: adapter.ServiceFailure, 401: adapter.NotAuthorized, 403: adapter.NotAuthorized,
		404: adapter.NotFound, 409: adapter.ServiceFailure, 410: adapter.NotFound,
		413: adapter.InsufficientResources, 429: adapter.ServiceFailure, 500: adapter.ServiceFailure,
		502: adapter.ServiceFailure, 503: adapter.ServiceFailure, 507: adapter.InsufficientResources,
	} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			resp := &http.Response{StatusCode: status, Status: http.StatusText(status),
				Body: io.NopCloser(strings.NewReader("detail")), Request: httptest.NewRequest("GET", "http://u:p@x/k?X-Amz-Signature=s", nil)}
			e := adapter.AsException(c.Exception(resp, `object "k"`))
			if e.Kind != want {
				t.Errorf("kind %v, want %v", e.Kind, want)
			}
			if want == adapter.ServiceFailure && !strings.Contains(e.Description, `upstream "bucket"`) {
				t.Errorf("description %q does not name the upstream", e.Description)
			}
			if strings.Contains(e.Error(), "Signature") || strings.Contains(e.Error(), "u:p") {
				t.Errorf("the cause leaks credentials: %v", e)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	r := &retry{cfg: config.Retry{Max: 5, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 20 {
			if d := r.backoff(attempt, nil); d < want/2 || d > want {
				t.Fatalf("attempt %d: %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
	resp := &http.Response{Header: http.Header{"Retry-After": {"30"}}}
	if d := r.backoff(0, resp); d != time.Second {
		t.Errorf("Retry-After 30 gave %v, want maxBackoff", d)
	}
}

func TestDecodeOptions(t *testing.T) {
	var u config.Upstream
	if err := yaml.Unmarshal([]byte("name: b\noptions:\n  bucket: x\n  partSize: 123\n"), &u); err != nil {
		t.Fatal(err)
	}
	var o struct {
		Bucket   string `yaml:"bucket"`
		PartSize int64  `yaml:"partSize"`
	}
	if err := DecodeOptions(u, &o); err != nil || o.Bucket != "x" || o.PartSize != 123 {
		t.Errorf("%+v %v", o, err)
	}
	if err := yaml.Unmarshal([]byte("name: b\noptions:\n  bukket: x\n"), &u); err != nil {
		t.Fatal(err)
	}
	err := DecodeOptions(u, &o)
	if err == nil || !strings.Contains(err.Error(), "bukket") {
		t.Errorf("an unknown option gave %v", err)
	}
	if err := DecodeOptions(config.Upstream{}, &o); err != nil {
		t.Errorf("empty options: %v", err)
	}
}

func TestOptionProblems(t *testing.T) {
	u := config.Upstream{Name: "b"}
	if err := OptionProblems("s3", u, nil, errors.Join(nil, nil)); err != nil {
		t.Errorf("no problem gave %v", err)
	}
	err := OptionProblems("s3", u, errors.New("one"), nil, errors.Join(errors.New("two"), errors.New("three")))
	want := "s3: upstream \"b\": one\ns3: upstream \"b\": two\ns3: upstream \"b\": three"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestBlobName(t *testing.T) {
	keys := []string{"8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b", "a/b", "../x", ".hidden", "", "ünï",
		strings.Repeat("k", 300), strings.Repeat("k", 128), "nul\x00", "~x"}
	seen := map[string]string{}
	for _, k := range keys {
		n := BlobName(k)
		if prev, ok := seen[n]; ok {
			t.Errorf("%q and %q share %q", prev, k, n)
		}
		seen[n] = k
		parts := strings.Split(n, "/")
		if len(parts) != 3 || len(parts[0]) != 2 || len(parts[1]) != 2 || len(parts[2]) > 128 && parts[2][0] != '~' || len(parts[2]) > 130 {
			t.Errorf("%q → %q", k, n)
		}
		for _, p := range parts {
			if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "/\x00") {
				t.Errorf("%q → %q has a bad segment", k, n)
			}
		}
	}
	if n := BlobName("8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b"); !strings.HasSuffix(n, "/8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b") {
		t.Errorf("a UUID key is not kept readable: %q", n)
	}
}

// brokenBody yields some bytes, then fails, as a client that goes away mid-upload.
type brokenBody struct{ n int }

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errBodyBroke
	}
	n := min(len(p), b.n)
	clear(p[:n])
	b.n -= n
	return n, nil
}

var errBodyBroke = errors.New("the client went away")

func TestCallerBodyFailureDoesNotTrip(t *testing.T) {
	noLeaks(t)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}, nil)
	for range 5 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, f.srv.URL+"/obj", &brokenBody{n: 100_000})
		_, err := f.c.HTTP().Do(req)
		if !errors.Is(err, errBodyBroke) {
			t.Fatalf("err %v, want the body's error", err)
		}
	}
	if f.c.State() != "closed" {
		t.Errorf("state %s: failing request bodies tripped the breaker", f.c.State())
	}
	if n := outcomes(t, f, "PUT", OutcomeClientError); n != 5 {
		t.Errorf("client_error outcomes %v, want 5", n)
	}
}

// TestRedirectKeepsCredentialsOnTheUpstream: a redirect to another host gets
// none of the request's own headers (a mapping's API key), only those that
// describe the request; a redirect on the same host keeps them all.
func TestRedirectKeepsCredentialsOnTheUpstream(t *testing.T) {
	seen := make(chan http.Header, 2)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		io.WriteString(w, "bytes")
	}))
	t.Cleanup(elsewhere.Close)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/here" {
			seen <- r.Header.Clone()
			io.WriteString(w, "bytes")
			return
		}
		target := elsewhere.URL + "/there"
		if r.URL.Query().Get("to") == "here" {
			target = "/here"
		}
		http.Redirect(w, r, target, http.StatusFound)
	}, nil)
	for _, tc := range []struct {
		query    string
		keepsKey bool
	}{{"to=elsewhere", false}, {"to=here", true}} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/object?"+tc.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Api-Key", "secret")
		req.Header.Set("Range", "bytes=1-")
		resp, err := f.c.HTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		h := <-seen
		if got := h.Get("X-Api-Key") != ""; got != tc.keepsKey {
			t.Errorf("%s: the API key reached the target: %v, want %v", tc.query, got, tc.keepsKey)
		}
		if h.Get("Range") != "bytes=1-" {
			t.Errorf("%s: Range %q was not kept", tc.query, h.Get("Range"))
		}
	}
}
