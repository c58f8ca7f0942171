package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestPutWhoseAnswerIsLostLeavesNothing: a Put whose caller gives up after
// the upstream has stored the whole object, but before the PUT's answer
// arrives, fails and leaves nothing under key. The object used to stay,
// though node.Blobs promises nothing is left after an error (real nginx).
func TestPutWhoseAnswerIsLostLeavesNothing(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	target, _ := url.Parse(d.URL)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host
	}}
	// The proxy forwards every request; a PUT's answer is kept until the
	// caller has given up.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		if rec.Code != http.StatusCreated && rec.Code != http.StatusNoContent {
			t.Errorf("PUT: %d %s", rec.Code, rec.Body)
		}
		cancel()
		<-r.Context().Done()
	}))
	t.Cleanup(proxy.Close)
	s := open(t, upstreamConfig(t, proxy.URL, nginxOptions("lost", "{key.blob}")), nil)
	const key = "8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b"
	if _, err := s.Put(ctx, key, strings.NewReader("the whole object")); err == nil {
		t.Fatal("Put succeeded")
	}
	r, err := s.Get(t.Context(), key)
	if err == nil {
		b, _ := io.ReadAll(r)
		r.Close()
		t.Errorf("Put failed, but %q is stored under its key", b)
	} else if !adapter.IsKind(err, adapter.NotFound) {
		t.Fatal(err)
	}
}
