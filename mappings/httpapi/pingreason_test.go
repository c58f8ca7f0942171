package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestPingReasonNamesNoHostOrSecret: Ping's reason is shown on the public
// status page. An API behind a proxy that builds its next links with its
// internal address fails the same-origin check, and the reason carried that
// link (with the token it echoes) and the base URL's host.
func TestPingReasonNamesNoHostOrSecret(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"records": [{"id": "a"}], "next": "http://10.0.3.7:8080/api/records?page=2&access_token=s3cr3t-t0ken"}`))
	}))
	t.Cleanup(srv.Close)
	s := open(t, upstreamConfig(t, srv.URL+"/api",
		`{get: {url: "/c/{key}"}, list: {url: "/records?access_token=s3cr3t-t0ken", items: records, paging: nextURL, next: next, fields: {key: id}}}`), nil)
	err := s.Ping(t.Context())
	if err == nil {
		t.Fatal("ready")
	}
	reason := description(err)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, secret := range []string{"s3cr3t-t0ken", "10.0.3.7", host, url.QueryEscape(host)} {
		if strings.Contains(reason, secret) {
			t.Errorf("the public reason names %q: %s", secret, reason)
		}
	}
}
