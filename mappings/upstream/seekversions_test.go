package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestSeekableWithoutStrongETagDoesNotMixVersions: a resource served with
// Last-Modified and no ETag, changed between the first GET and a seek, fails
// the read. The ranged reopen used to be unconditional without a strong ETag,
// and the read returned the first version's head and the second's tail.
func TestSeekableWithoutStrongETagDoesNotMixVersions(t *testing.T) {
	v1, v2 := bytes.Repeat([]byte("1"), 1000), bytes.Repeat([]byte("2"), 1000)
	t1 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var changed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, mod := v1, t1
		if changed.Load() {
			data, mod = v2, t1.Add(time.Hour)
		}
		http.ServeContent(w, r, "", mod, bytes.NewReader(data)) // Last-Modified, no ETag
	}))
	t.Cleanup(srv.Close)
	c := New(testConfig("up", srv.URL), nil)
	t.Cleanup(c.Close)
	newReq := func(ctx context.Context) (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/obj", nil)
	}
	req, _ := newReq(t.Context())
	resp, err := c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Seekable(t.Context(), resp, `object "obj"`, newReq)
	defer r.Close()
	head := make([]byte, 100)
	if _, err := io.ReadFull(r, head); err != nil {
		t.Fatal(err)
	}
	changed.Store(true)
	r.(io.Seeker).Seek(500, io.SeekStart)
	tail, err := io.ReadAll(r)
	if err == nil && !bytes.Equal(tail, v1[500:]) {
		t.Errorf("one read returned %q then %q...: bytes of two versions", head[:5], tail[:5])
	}
}

// TestSeekablePinsTheVersion: whatever a server makes of the range and the
// preconditions, a reopen of another version fails, and a body with no
// validator that tells versions apart does not seek.
func TestSeekablePinsTheVersion(t *testing.T) {
	v1, v2 := bytes.Repeat([]byte("1"), 1000), bytes.Repeat([]byte("2"), 1200)
	t1 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for name, tc := range map[string]struct {
		etag        string // the first version's, if any; the second's is another
		mod2        time.Time
		date        func(mod time.Time) time.Time
		ignoreConds bool // the server ignores If-Match and If-Unmodified-Since
		ignoreRange bool
		data2       []byte
		seeks       bool
	}{
		"last-modified":                  {mod2: t1.Add(time.Hour), seeks: true},
		"weak etag, last-modified":       {etag: `W/"v1"`, mod2: t1.Add(time.Hour), seeks: true},
		"conditions ignored":             {mod2: t1.Add(time.Hour), ignoreConds: true, seeks: true},
		"conditions and range ignored":   {mod2: t1.Add(time.Hour), ignoreConds: true, ignoreRange: true, seeks: true},
		"etag, conditions ignored":       {etag: `"v1"`, mod2: t1, ignoreConds: true, seeks: true},
		"same last-modified, other size": {mod2: t1, ignoreConds: true, data2: v2, seeks: true},
		// Read in the second it was written: a change later in that second
		// would keep its Last-Modified.
		"read in the second it was written": {mod2: t1, date: func(mod time.Time) time.Time { return mod }},
	} {
		t.Run(name, func(t *testing.T) {
			var changed atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				data, mod, etag := v1, t1, tc.etag
				if changed.Load() {
					data, mod = v1[:500:500], tc.mod2
					data = append(data, bytes.Repeat([]byte("2"), 500)...)
					if tc.data2 != nil {
						data = tc.data2
					}
					if etag != "" {
						etag = strings.Replace(etag, "v1", "v2", 1)
					}
				}
				if tc.date != nil {
					w.Header()["Date"] = []string{tc.date(mod).Format(http.TimeFormat)}
				}
				if etag != "" {
					w.Header().Set("ETag", etag)
				}
				if tc.ignoreConds {
					r.Header.Del("If-Match")
					r.Header.Del("If-Unmodified-Since")
				}
				if tc.ignoreRange {
					r.Header.Del("Range")
				}
				http.ServeContent(w, r, "", mod, bytes.NewReader(data))
			}))
			t.Cleanup(srv.Close)
			c := New(testConfig("up", srv.URL), nil)
			t.Cleanup(c.Close)
			newReq := func(ctx context.Context) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/obj", nil)
			}
			req, _ := newReq(t.Context())
			resp, err := c.HTTP().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r := c.Seekable(t.Context(), resp, `object "obj"`, newReq)
			defer r.Close()
			rs, ok := r.(io.ReadSeeker)
			if ok != tc.seeks {
				t.Fatalf("the body seeks: %v, want %v", ok, tc.seeks)
			}
			if !ok {
				return
			}
			if _, err := io.ReadFull(rs, make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
			// Unchanged, a seek reads on.
			rs.Seek(600, io.SeekStart)
			if b, err := io.ReadAll(rs); err != nil || !bytes.Equal(b, v1[600:]) {
				t.Fatalf("unchanged: %d bytes, %v", len(b), err)
			}
			changed.Store(true)
			rs.Seek(700, io.SeekStart)
			b, err := io.ReadAll(rs)
			if err == nil {
				t.Errorf("read %q... of the second version", b[:5])
			} else if !adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), "changed") {
				t.Errorf("got %v, want a ServiceFailure saying the object changed", err)
			}
		})
	}
}
