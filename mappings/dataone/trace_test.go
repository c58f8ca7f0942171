package dataone

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/rest"
)

// TestUpstreamStackTraceNotForwarded: GMN in production mode wraps any
// internal exception in a ServiceFailure whose description is
// traceback.format_exc() and whose traceInformation lists file(line) frames
// and the exception's value (d1_gmn/app/middleware/exception_handler.py,
// _wrap_internal_exception_in_dataone_exception). The bridge must not hand
// the upstream's stack trace (file paths, the database error with its host)
// to its own clients: it belongs in the log, as the front's own panics do.
func TestUpstreamStackTraceNotForwarded(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.put("p", "", []byte("data"))
	const tb = "Traceback (most recent call last):\n  File \"/var/local/dataone/gmn_venv_py3/lib/python3.9/site-packages/d1_gmn/app/views/external.py\", line 273, in get_meta\n" +
		"psycopg2.OperationalError: connection to server at \"db.internal.example\" (10.0.0.5), port 5432 failed: FATAL: password authentication failed for user \"gmn\""
	const trace = "external.py(273)\nType: <class 'psycopg2.OperationalError'>\nValue: connection to server at \"db.internal.example\" failed"
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.URL.Path, "/mn/v2/meta/") {
			return false
		}
		e := &adapter.Exception{Kind: adapter.ServiceFailure, DetailCode: "1090", Description: tb, TraceInformation: trace, NodeID: "urn:node:gmn"}
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		adapter.EncodeException(w, e)
		return true
	})
	u := upstreamConfig(t, f.URL, "")
	u.Breaker.Failures = 100
	n := open(t, u, nil)
	h := rest.New(rest.Options{Svc: "d1", Node: rest.NodeInfo{ID: "urn:node:bridge"}, MN: n})

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/d1/mn/v2/meta/p", nil))
	body, _ := io.ReadAll(w.Body)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("HTTP %d: %s", w.Code, body)
	}
	for _, leak := range []string{"external.py", "psycopg2", "db.internal.example", "Traceback"} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the client's error document carries the upstream's stack trace (%q):\n%s", leak, body)
			break
		}
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodHead, "/d1/mn/v2/object/p", nil))
	for k, v := range w.Header() {
		if s := strings.Join(v, " "); strings.Contains(s, "psycopg2") || strings.Contains(s, "external.py") {
			t.Errorf("describe's header %s carries the upstream's stack trace: %q", k, s)
		}
	}
}
