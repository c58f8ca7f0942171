package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
)

// faultOptions read the fake's JSON API in pages of 500 (a page is longer
// than servers.CutAfter).
var faultOptions = jsonOptions + `list: {url: "/api/records?page={page}&per_page={pageSize}", paging: page, pageSize: 500, items: records}`

// remote is the fake l read with faultOptions, for the shared fault suite,
// which also reads it with Stat and List.
func remote(t testing.TB, l *legacy) mappingtest.Remote[*Store] {
	return mappingtest.Remote[*Store]{Upstream: upstreamConfig(t, l.URL, faultOptions), New: New,
		ListWhat: "the list page at the start"}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	mappingtest.Faults(t, remote(t, newLegacy(t, 2500)))
}

// TestNoGoroutineLeaks is not parallel: it counts goroutines.
func TestNoGoroutineLeaks(t *testing.T) {
	mappingtest.NoGoroutineLeaks(t, remote(t, newLegacy(t, 600)))
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
	start := time.Now()
	_, _, err := s.List(t.Context(), time.Time{}, "")
	want := `upstream "legacy" did not answer in time (the list page at the start)`
	if e := adapter.AsException(err); err == nil || e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, want) {
		t.Errorf("List: %v, want a ServiceFailure with %q", err, want)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("List took %v", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Errorf("reading: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("reading a stalled object took %v", d)
	}
}
