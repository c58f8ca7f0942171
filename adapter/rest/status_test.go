package rest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// monitoredFake is a member node with statistics and a log of 50 records in
// the status page's window; it records what the status page asks.
type monitoredFake struct {
	*fakeNode
	mu        sync.Mutex
	stats     int
	logQs     []adapter.LogQuery
	sessions  []string
	eventsQ   []adapter.StatsQuery
	upstreams int
}

func (f *monitoredFake) ObjectStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.ObjectStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats++
	return &adapter.ObjectStats{Objects: 1234, Bytes: 5 << 30, Formats: []adapter.FormatStats{{FormatID: "text/csv", Objects: 1234, Bytes: 5 << 30}}}, nil
}

func (f *monitoredFake) EventStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.EventStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eventsQ = append(f.eventsQ, q)
	return &adapter.EventStats{Period: q.Period, Counts: []adapter.EventCount{{Event: "read", Period: "2026-11", Count: 40}, {Event: "create", Period: "2026-11", Count: 10}}}, nil
}

func (f *monitoredFake) LogRecords(ctx context.Context, s *adapter.Session, q adapter.LogQuery) (*adapter.Log, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logQs = append(f.logQs, q)
	f.sessions = append(f.sessions, s.Subject)
	out := &adapter.Log{Slice: adapter.Slice{Start: q.Start, Total: 50}}
	for i := q.Start; i < min(q.Start+q.Count, 50); i++ {
		id := "pub-" + string(rune('A'+i%26))
		if i == 49 {
			id = "<script>alert(1)</script>"
		}
		out.LogEntry = append(out.LogEntry, adapter.LogEntry{Identifier: id, Event: "read",
			Subject: "CN=alice,DC=example", IPAddress: "10.1.2.3", UserAgent: "secret-agent/1",
			DateLogged: adapter.NewTime(time.Now().Add(time.Duration(i-50) * time.Minute))})
	}
	out.Count = len(out.LogEntry)
	return out, nil
}

func TestStatusPage(t *testing.T) {
	f := &monitoredFake{fakeNode: newFake()}
	m := metrics.New(prometheus.NewRegistry(), "test")
	m.ObserveHarvestPass(metrics.HarvestOK, 90*time.Second, time.Now())
	m.ObserveHarvestRecord("registered")
	done := m.ReindexStarted()
	defer done()
	m.SetReindexSelected(80)
	m.ObserveReindexRecord("updated")
	h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:STATUS", Name: "Status & Co", BaseURL: "https://n.example/d1"},
		MN: f, Metrics: m, Version: "1.2.3",
		Upstreams: func(ctx context.Context) []Upstream {
			f.mu.Lock()
			f.upstreams++
			f.mu.Unlock()
			return []Upstream{{Name: "bucket", Type: "s3", Breaker: "open", Error: "bucket: connection refused"}, {Name: "share", Type: "webdav", Breaker: "closed", Up: true}}
		}})
	get := func(method string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, "/", nil))
		return w
	}
	w := get(http.MethodGet)
	body := w.Body.String()
	if w.Code != 200 || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %v\n%s", w.Code, w.Header(), body)
	}
	for _, want := range []string{
		`<td id="node-id" class="id">urn:node:STATUS</td>`, "Status &amp; Co", "1.2.3",
		`<td id="objects-count" class="n">1234</td>`, "5.0 GiB",
		`<tr id="upstream-bucket">`, `<span class="bad">open</span>`, "bucket: connection refused", `<span class="ok">closed</span>`,
		"ok 1;", "registered 1;", `<span class="warn">running</span>: 1 of 80 records done`,
		"create <span class=\"n\">10</span>", "read <span class=\"n\">40</span>",
		"&lt;script&gt;alert(1)&lt;/script&gt;", "pub-E",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, leak := range []string{"alice", "10.1.2.3", "secret-agent", "<script>"} {
		if strings.Contains(body, leak) {
			t.Errorf("the page shows %q", leak)
		}
	}
	// Newest first: the tail of the log, reversed.
	if i, j := strings.Index(body, "&lt;script&gt;"), strings.Index(body, "pub-E"); i < 0 || j < 0 || i > j {
		t.Errorf("events are not newest first")
	}

	// The log was read as the public: counted, then its last statusEvents
	// records, in the window, and only on objects the public may read.
	if len(f.logQs) != 2 || f.logQs[0].Count != 0 || f.logQs[1].Start != 50-statusEvents || f.logQs[1].Count != statusEvents {
		t.Fatalf("log queries: %+v", f.logQs)
	}
	for i, q := range f.logQs {
		if !slices.Equal(q.ReadableBy, []string{adapter.SubjectPublic}) || f.sessions[i] != adapter.SubjectPublic ||
			time.Since(q.FromDate.Time) > statusEventWindow+time.Minute {
			t.Errorf("log query %d: %+v as %s", i, q, f.sessions[i])
		}
	}

	// Views within statusTTL share one build: no catalog count, log read or
	// upstream check more.
	for range 5 {
		if w := get(http.MethodGet); w.Code != 200 {
			t.Fatalf("GET /: %d", w.Code)
		}
	}
	if w := get(http.MethodHead); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("HEAD /: %d, %d bytes", w.Code, w.Body.Len())
	}
	if f.stats != 1 || len(f.logQs) != 2 || f.upstreams != 1 || len(f.eventsQ) != 1 {
		t.Errorf("7 views cost %d counts, %d log reads, %d upstream checks, %d event counts; want 1, 2, 1, 1", f.stats, len(f.logQs), f.upstreams, len(f.eventsQ))
	}
}

// TestStatusPageWithoutMonitor: a store without statistics or events shows
// that, and the page still renders.
func TestStatusPageWithoutMonitor(t *testing.T) {
	h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:BARE"}, MN: newFake()})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	body := w.Body.String()
	for _, want := range []string{"urn:node:BARE", "keeps no counts", `id="upstreams-none"`, "no harvest pass since start", `id="events-none"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}
