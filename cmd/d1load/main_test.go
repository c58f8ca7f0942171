package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/d1bridge/d1bridge/adapter"
)

func TestHistogramQuantiles(t *testing.T) {
	t.Parallel()
	var h histogram
	for i := 1; i <= 10000; i++ { // 1 µs .. 10 ms, uniform
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.99, 9900 * time.Microsecond}, {1, 10 * time.Millisecond}} {
		got := h.quantile(tc.q)
		if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > 1.0/64 {
			t.Errorf("q%.2f = %v, want %v within 1/64", tc.q, got, tc.want)
		}
	}
	if h.max != 10*time.Millisecond {
		t.Errorf("max %v", h.max)
	}
	// Every bucket's middle maps back to the bucket, and buckets are ordered.
	for i := 1; i < len(h.counts)-1; i++ {
		if b := bucketOf(uint64(valueOf(i))); b != i {
			t.Fatalf("bucketOf(valueOf(%d)=%v) = %d", i, valueOf(i), b)
		}
		if valueOf(i) <= valueOf(i-1) {
			t.Fatalf("valueOf not increasing at %d", i)
		}
	}
	if bucketOf(uint64(time.Hour.Microseconds())) >= len(h.counts)-1 {
		t.Error("an hour does not fit the histogram")
	}
}

func TestGrowthRule(t *testing.T) {
	t.Parallel()
	series := func(n int, f func(i int) float64) (ts, vs []float64) {
		for i := range n {
			ts, vs = append(ts, float64(10*(i+1))), append(vs, f(i))
		}
		return
	}
	tests := []struct {
		name  string
		n     int
		f     func(i int) float64
		grows bool
	}{
		{"flat", 13, func(int) float64 { return 120 }, false},
		{"noise", 13, func(i int) float64 { return 120 + float64(i%3*4) }, false},
		{"plateau reached in the first sample", 13, func(i int) float64 { return map[bool]float64{true: 30, false: 190}[i == 0] }, false},
		{"spike at the end", 13, func(i int) float64 { return map[bool]float64{true: 400, false: 100}[i == 12] }, false},
		{"spike in the middle", 13, func(i int) float64 { return map[bool]float64{true: 400, false: 100}[i == 6] }, false},
		{"slow leak within the allowance", 13, func(i int) float64 { return 100 + float64(i) }, false},
		{"leak of one every 4 s", 13, func(i int) float64 { return 100 + 2.5*float64(i) }, true},
		{"leak of one a second", 13, func(i int) float64 { return 100 + 10*float64(i) }, true},
		{"step up in the middle, then flat", 13, func(i int) float64 { return map[bool]float64{true: 100, false: 200}[i < 6] }, true},
		{"too few samples", 5, func(i int) float64 { return 100 * float64(i) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, vs := series(tc.n, tc.f)
			g := grows(ts, vs, 0.1, 10)
			if g.Grows != tc.grows {
				t.Errorf("grows = %v, want %v (%s)", g.Grows, tc.grows, g.Why)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	o, err := parseFlags([]string{"-rate", "12000/m", "-mix", "get=3,create=1"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rate != 200 || o.mix[opGet] != 3 || o.mix[opCreate] != 1 || o.mix[opLog] != 0 {
		t.Errorf("rate %v mix %v", o.rate, o.mix)
	}
	if o, err := parseFlags([]string{"-pids", "p"}, env, io.Discard); err != nil || o.preload != 0 {
		t.Errorf("-pids: preload %d (%v), want 0 unless given", o.preload, err)
	}
	if o, err := parseFlags([]string{"-pids", "p", "-preload", "7", "-duration", "0"}, env, io.Discard); err != nil || o.preload != 7 {
		t.Errorf("-pids -preload 7 -duration 0: preload %d (%v)", o.preload, err)
	}
	if o, _ := parseFlags(nil, func(string) string { return "tok" }, io.Discard); o.token != "tok" {
		t.Errorf("D1LOAD_TOKEN not read: %q", o.token)
	}
	for _, bad := range [][]string{
		{"-mix", "get=1,fly=2"}, {"-mix", "get=0"}, {"-rate", "fast"}, {"-rate", "5/h"},
		{"-rate", "10", "-capacity", "5s"}, {"-token", "x", "-key", "k.pem"}, {"-anon", "0.5", "-private"},
		{"-page", "0"}, {"extra"}, {"-duration", "0", "-preload", "0"}, {"-hot", "-1"},
		{"-urls", "u", "-pids", "p"}, {"-urls", "u", "-mix", "get=1,describe=1"}, {"-urls", "u", "-preload", "5"},
	} {
		if _, err := parseFlags(bad, env, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCursorPagesLikeAHarvester(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := cursor{from: t0}
	from, start := c.next(100)
	c.done(from, start, 100, 100, 250, t0.Add(time.Second)) // a full page: go on
	from, start = c.next(100)
	if !from.Equal(t0) || start != 100 {
		t.Fatalf("second page from %v start %d", from, start)
	}
	c.done(from, start, 100, 100, 250, t0.Add(2*time.Second))
	from, start = c.next(100)
	c.done(from, start, 100, 50, 250, t0.Add(3*time.Second)) // the short last page
	from, start = c.next(100)
	if !from.Equal(t0.Add(3*time.Second)) || start != 0 {
		t.Fatalf("after the last page: from %v start %d, want the last date and 0", from, start)
	}
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\n" +
		"go_goroutines_other 7\nprocess_open_fds 1.7e+01\nprocess_resident_memory_bytes{x=\"y\"} 9\n"
	m := parseMetrics(strings.NewReader(text), map[string]int64{"go_goroutines": -1, "process_open_fds": -1, "process_resident_memory_bytes": -1})
	if m["go_goroutines"] != 42 || m["process_open_fds"] != 17 || m["process_resident_memory_bytes"] != -1 {
		t.Errorf("%v", m)
	}
}

// fakeNode is just enough of a member node for d1load: every operation
// answers 200 with a valid document, except that creates answer failStatus
// once fail is set.
type fakeNode struct {
	fail       atomic.Bool
	failStatus int
	creates    atomic.Int64

	mu    sync.Mutex
	reads map[string]int // escaped paths of the object reads (GET, HEAD)
}

func (f *fakeNode) read(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reads == nil {
		f.reads = map[string]int{}
	}
	f.reads[p]++
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.EscapedPath(), "/d1/mn/v2")
	doc := func(v any) {
		w.Header().Set("Content-Type", "text/xml")
		adapter.Encode(w, v, 2)
	}
	switch {
	case p == "/monitor/ping":
	case p == "/whoami":
		doc(&adapter.SessionDoc{Subject: "CN=fake"})
	case p == "/metrics":
		fmt.Fprintf(w, "go_goroutines 12\nprocess_open_fds 9\nprocess_resident_memory_bytes %d\n", 30<<20)
	case r.Method == http.MethodPost && p == "/object":
		if f.fail.Load() {
			http.Error(w, "no", f.failStatus)
			return
		}
		f.creates.Add(1)
		io.Copy(io.Discard, r.Body)
		doc(&adapter.Identifier{Value: "x"})
	case p == "/object":
		doc(&adapter.ObjectList{ObjectInfo: []adapter.ObjectInfo{{Identifier: "a", DateSysMetadataModified: adapter.Now()}}})
	case p == "/log":
		doc(&adapter.Log{})
	case strings.HasPrefix(p, "/object/"):
		f.read(p)
		w.Write(bytes.Repeat([]byte{'x'}, 64))
	case strings.HasPrefix(p, "/meta/"), strings.HasPrefix(p, "/accessRules/"):
		io.Copy(io.Discard, r.Body)
	default:
		http.NotFound(w, r)
	}
}

func TestRunAgainstAFakeNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		failStatus int
		args       []string
		wantErr    string
	}{
		{"all answered", 0, nil, ""},
		{"a 5xx fails the run", 500, nil, "500 answers to create"},
		{"a 4xx fails the run", 413, nil, "answers in 4xx"},
		{"tolerated 4xx", 413, []string{"-max-4xx", "1000000"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeNode{failStatus: tc.failStatus}
			f.fail.Store(tc.failStatus != 0)
			srv := httptest.NewServer(f)
			defer srv.Close()
			var out bytes.Buffer
			args := append([]string{"-url", srv.URL + "/d1/mn", "-size", "64", "-preload", "0", "-capacity", "300ms",
				"-duration", "700ms", "-sample", "10s", "-max-missed", "1", "-metrics", srv.URL + "/d1/mn/v2/metrics", "-token", "t"}, tc.args...)
			err := run(context.Background(), args, func(string) string { return "" }, &out)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("run: %v, want %q\n%s", err, tc.wantErr, out.String())
			}
			// A busy machine may take fewer samples or send fewer requests than
			// asked in so short a run: the growth rule and the rate have their
			// own tests.
			for _, want := range []string{"== capacity: closed loop", "== run: open loop", "first sample", "goroutines: "} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("no %q in the output:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestLoadThenRead loads objects with -duration 0 and -pids-out, then reads
// the hot few of them with -pids and -hot: no create is sent, and every read
// is of one of the first -hot identifiers listed.
func TestLoadThenRead(t *testing.T) {
	t.Parallel()
	f := &fakeNode{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	pids := filepath.Join(t.TempDir(), "pids")
	common := []string{"-url", srv.URL + "/d1/mn", "-size", "64", "-sample", "0", "-token", "t"}
	var out bytes.Buffer
	if err := run(context.Background(), append(common, "-preload", "20", "-duration", "0", "-pids-out", pids), func(string) string { return "" }, &out); err != nil {
		t.Fatalf("load: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "== run") {
		t.Errorf("-duration 0 ran a run phase:\n%s", out.String())
	}
	ids, err := readLines(pids, 0)
	if err != nil || len(ids) != 20 || f.creates.Load() != 20 {
		t.Fatalf("-pids-out lists %d identifiers (%v), the node saw %d creates; want 20", len(ids), err, f.creates.Load())
	}
	out.Reset()
	if err := run(context.Background(), append(common, "-pids", pids, "-hot", "3", "-mix", "describe=1,get=1", "-duration", "300ms"), func(string) string { return "" }, &out); err != nil {
		t.Fatalf("read: %v\n%s", err, out.String())
	}
	if f.creates.Load() != 20 {
		t.Errorf("reading -pids created %d objects", f.creates.Load()-20)
	}
	hot := map[string]bool{}
	for _, id := range ids[:3] {
		hot["/object/"+url.PathEscape(id)] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reads) == 0 {
		t.Fatal("no object was read")
	}
	for p := range f.reads {
		if !hot[p] {
			t.Errorf("read %s, not one of the 3 hot objects", p)
		}
	}
}

// TestURLs gets -urls from a server that is not a node (no ping): only the
// first -hot URLs are fetched, and a body of the wrong size fails the run.
func TestURLs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/files/") {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		w.Write(bytes.Repeat([]byte{'x'}, 100))
	}))
	defer srv.Close()
	urls := filepath.Join(t.TempDir(), "urls")
	var list strings.Builder
	for i := range 5 {
		fmt.Fprintf(&list, "%s/files/%d\n", srv.URL, i)
	}
	if err := os.WriteFile(urls, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-url", "http://127.0.0.1:1/unused", "-urls", urls, "-hot", "2", "-mix", "get=1", "-workers", "4", "-duration", "300ms", "-sample", "0"}
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "-size", "100"), func(string) string { return "" }, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	mu.Lock()
	if len(seen) != 2 || seen["/files/0"] == 0 || seen["/files/1"] == 0 {
		t.Errorf("fetched %v, want /files/0 and /files/1 alone", seen)
	}
	mu.Unlock()
	out.Reset()
	if err := run(context.Background(), append(args, "-size", "99"), func(string) string { return "" }, &out); err == nil {
		t.Errorf("bodies of 100 bytes passed for -size 99:\n%s", out.String())
	}
}

// TestOpenLoopStartDelay: the open loop reports its own start delay. With one
// request in flight at most and answers slower than the interval, requests
// wait in the client: the delay is counted (late, StartP99ms) and is part of
// the latency, never more than it.
func TestOpenLoopStartDelay(t *testing.T) {
	t.Parallel()
	w := &workload{weights: []opID{opGet}, urls: []target{{}}} // gets of URLs need no object
	w.ops[opGet] = &op{opGet, func(context.Context) (int, error) {
		time.Sleep(15 * time.Millisecond)
		return http.StatusOK, nil
	}}
	ph := w.openLoop(context.Background(), "run", 100, 1, 300*time.Millisecond)
	if len(ph.Ops) != 1 {
		t.Fatalf("ops %+v", ph.Ops)
	}
	get := ph.Ops[0]
	if ph.Late == 0 || ph.StartP99ms < 10 {
		t.Errorf("answers of 15 ms every 10 ms, one in flight: late %d, start p99 %.2f ms; want late requests and a p99 over 10 ms", ph.Late, ph.StartP99ms)
	}
	if ph.StartP99ms > get.P99ms || get.P50ms < 15 {
		t.Errorf("start p99 %.2f ms, latency p50 %.2f p99 %.2f ms: the latency counts from the due time, start delay included", ph.StartP99ms, get.P50ms, get.P99ms)
	}
}

// TestSignedAuthorization: with -key each request carries one signed token for
// its subject, made once and read without an allocation, and renewed when
// less than 10 minutes of it remain; -token is sent as given.
func TestSignedAuthorization(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := newCredentials(&options{keyFile: keyFile, subject: "CN=load"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.authorization()
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := strings.CutPrefix(first, "Bearer ")
	if !ok {
		t.Fatalf("Authorization %.20q…, want a bearer token", first)
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil }, jwt.WithValidMethods([]string{"RS256"})); err != nil || claims["sub"] != "CN=load" {
		t.Fatalf("token does not verify for CN=load: %v %v", err, claims)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if again, _ := c.authorization(); again != first {
			t.Fatal("a second request got another token")
		}
	}); allocs != 0 {
		t.Errorf("%v allocations a request, want none", allocs)
	}
	// (Signed in the same second, the renewed token may be the same bytes.)
	c.issued.Store(&issued{header: "Bearer old", exp: time.Now().Add(9 * time.Minute)})
	if renewed, _ := c.authorization(); renewed != c.issued.Load().header || renewed == "Bearer old" || time.Until(c.issued.Load().exp) < 59*time.Minute {
		t.Errorf("a token with 9 minutes left was not renewed for an hour: %.20q…", renewed)
	}
	static, _ := newCredentials(&options{token: "abc"})
	if h, _ := static.authorization(); h != "Bearer abc" {
		t.Errorf("-token abc sends %q", h)
	}
	if h, _ := (&credentials{}).authorization(); h != "" {
		t.Errorf("no credential sends %q", h)
	}
}

// TestCPUShare: a phase reports how busy the machine's CPUs were and
// d1load's own part, from /proc/stat's first line and getrusage.
func TestCPUShare(t *testing.T) {
	busy, all := parseCPULine("cpu  1000 5 300 8000 200 10 20 7 0 0\n")
	if busy != (1000+5+300+10+20+7)*clockTick || all != (1000+5+300+8000+200+10+20+7)*clockTick {
		t.Fatalf("parseCPULine: busy %v of %v", busy, all)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 x 4 5 6 7 8", "cpu 1 2 3"} {
		if b, a := parseCPULine(bad); b != 0 || a != 0 {
			t.Errorf("parseCPULine(%q) = %v, %v; want nothing", bad, b, a)
		}
	}
	a := cpuTime{busy: 10 * time.Second, all: 40 * time.Second, self: time.Second}
	b := cpuTime{busy: 16 * time.Second, all: 48 * time.Second, self: 3 * time.Second}
	if m, c := cpuShare(a, b); m != 75 || c != 25 {
		t.Errorf("cpuShare: machine %v%%, client %v%%; want 75 and 25", m, c)
	}
	if m, c := cpuShare(cpuTime{self: time.Second}, cpuTime{self: 2 * time.Second}); m != 0 || c != 0 {
		t.Errorf("without /proc/stat: %v, %v; want nothing", m, c)
	}
	if _, err := os.Stat("/proc/stat"); err != nil {
		return // not Linux: the figures are left out
	}
	// Spinning for 300 ms shows on both.
	ph := newPhase("spin", "closed", 1, 0)
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	ph.finish(300 * time.Millisecond)
	if ph.MachineCPU <= 0 || ph.MachineCPU > 100 || ph.ClientCPU <= 0 {
		t.Errorf("a spinning phase: machine %v%% busy, d1load %v%%", ph.MachineCPU, ph.ClientCPU)
	}
	var out bytes.Buffer
	ph.print(&out)
	if !strings.Contains(out.String(), "machine CPU busy") {
		t.Errorf("the phase does not print its CPU:\n%s", out.String())
	}
}
