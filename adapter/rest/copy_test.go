package rest

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestGetCopiesThroughPooledBuffers: a get copies the object's bytes through
// a pooled buffer, not a buffer of its own per request (io.Copy's: the
// object's size, up to 32 KiB, of garbage per get; a large buffer's, up to
// 1 MiB), small or large, whether the store's body is seekable
// (ServeContent) or not; and the bytes arrive whole.
func TestGetCopiesThroughPooledBuffers(t *testing.T) {
	// A buffer per request allocates at least buffer bytes a get; a pooled one
	// none, but for the race detector's dropping a quarter of what is put back
	// (at random: a third or more in some runs of 50) and the request's own
	// few KiB.
	for _, c := range []struct{ size, buffer int }{{32 << 10, 32 << 10}, {4 * largeCopyFrom, largeCopyBuffer}} {
		size := c.size
		for _, seekable := range []bool{true, false} {
			f := newFake()
			f.body, f.meta.Size, f.seekable = strings.Repeat("x", size), uint64(size), seekable
			h, _ := testEngine(t, f, false)
			req := httptest.NewRequest(http.MethodGet, "http://x/d1/mn/v2/object/x%2Fy", nil)
			w := &countingWriter{header: http.Header{}}
			h.ServeHTTP(w, req) // warm the pools
			if w.status != http.StatusOK || w.n != size {
				t.Fatalf("size %d, seekable %v: %d, %d bytes; want 200 and %d", size, seekable, w.status, w.n, size)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const n = 50
			for range n {
				h.ServeHTTP(&countingWriter{header: http.Header{}}, req)
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / n; per >= uint64(3*c.buffer/4) {
				t.Errorf("size %d, seekable %v: %d bytes allocated per get of %d bytes: a copy buffer per request", size, seekable, per, size)
			}
		}
	}
}

// countingWriter is a ResponseWriter that keeps nothing of the body.
type countingWriter struct {
	header http.Header
	status int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
