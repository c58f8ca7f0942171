package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestPutWhoseAnswerIsLostLeavesNothing: a Put whose caller gives up after
// the store has made the whole object (by one PUT, or by
// CompleteMultipartUpload) but before its answer arrives fails and leaves
// nothing under key. The object used to stay: Put returned an error, the
// node's Stage reported a failed create, and nothing ever deleted the orphan
// (real versitygw).
func TestPutWhoseAnswerIsLostLeavesNothing(t *testing.T) {
	t.Parallel()
	srv := servers.VersityGW(t)
	target, _ := url.Parse(srv.Endpoint)
	for name, tc := range map[string]struct {
		size int
		held func(r *http.Request) bool
	}{
		"one PUT": {size: 100, held: func(r *http.Request) bool {
			return r.Method == http.MethodPut
		}},
		"CompleteMultipartUpload": {size: MinPartSize + 100, held: func(r *http.Request) bool {
			return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host
				r.Out.Host = r.In.Host
			}}
			// The proxy forwards every request; the held one's answer is
			// kept until the caller has given up.
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !tc.held(r) {
					rp.ServeHTTP(w, r)
					return
				}
				rp.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
				cancel()
				<-r.Context().Done()
			}))
			t.Cleanup(proxy.Close)
			s := open(t, upstreamConfig(t, proxy.URL, credOptions(srv)+fmt.Sprintf("bucket: %s\npartSize: %d\n", srv.Bucket, MinPartSize)), nil)
			key := fmt.Sprintf("8e0a4c1e-5f6b-4d2c-9a1b-%012d", tc.size)
			if _, err := s.Put(ctx, key, bytes.NewReader(bytes.Repeat([]byte("x"), tc.size))); err == nil {
				t.Fatal("Put succeeded")
			}
			r, err := s.Get(t.Context(), key)
			if err == nil {
				b, _ := io.ReadAll(r)
				r.Close()
				t.Errorf("Put failed, but %d bytes are stored under its key", len(b))
			} else if !adapter.IsKind(err, adapter.NotFound) {
				t.Fatal(err)
			}
		})
	}
}
