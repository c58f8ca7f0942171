package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPing: the readiness probe is the first page of list, else stat of
// probeKey (a 404 is an answer), else get of it; a refusal, a failure or a
// missing list is not ready, and the reason names the upstream.
func TestPing(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/records":
			w.Write([]byte(`{"records": []}`))
		case strings.HasPrefix(r.URL.Path, "/denied/"):
			http.Error(w, "no", http.StatusForbidden)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, options string
		want          string // part of the reason; "": ready
	}{
		{name: "list", options: `{get: {url: "/c/{key}"}, list: {url: "/records", items: records, fields: {key: id}}}`},
		{name: "list answering 404", options: `{get: {url: "/c/{key}"}, list: {url: "/gone", items: records, fields: {key: id}}}`,
			want: `the readiness probe (the first page of list): the list page at the start is not in upstream "legacy"`},
		{name: "stat of the probe answering 404", options: `{get: {url: "/c/{key}"}, stat: {url: "/s/{key}"}}`},
		{name: "stat refused", options: `{get: {url: "/c/{key}"}, stat: {url: "/denied/{key}"}}`,
			want: `upstream "legacy" refused access`},
		{name: "get refused", options: `{get: {url: "/denied/{key}"}}`, want: `upstream "legacy" refused access`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, upstreamConfig(t, srv.URL, tc.options), nil)
			err := s.Ping(t.Context())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("not ready: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(description(err), tc.want)):
				t.Fatalf("Ping: %v; want a reason with %q", err, tc.want)
			}
		})
	}
}
