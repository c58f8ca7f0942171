package s3

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest"
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
			proxy := servers.LoseAnswer(t, srv.Endpoint, tc.held, cancel)
			s := open(t, upstreamConfig(t, proxy, credOptions(srv)+fmt.Sprintf("bucket: %s\npartSize: %d\n", srv.Bucket, MinPartSize)), nil)
			key := fmt.Sprintf("8e0a4c1e-5f6b-4d2c-9a1b-%012d", tc.size)
			if _, err := s.Put(ctx, key, bytes.NewReader(bytes.Repeat([]byte("x"), tc.size))); err == nil {
				t.Fatal("Put succeeded")
			}
			mappingtest.WantNothingAt(t, s, key)
		})
	}
}
