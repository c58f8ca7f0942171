package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rangeServer serves data with ranges, counting GETs.
func rangeServer(t *testing.T, data []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	gets := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, gets
}

func openSeekable(t *testing.T, c *Client, url string, size int64) *Seekable {
	t.Helper()
	open := func(ctx context.Context, off int64) (io.ReadCloser, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if off > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
		}
		resp, err := c.HTTP().Do(req)
		if err != nil {
			return nil, c.Error(err, "object")
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
			return nil, c.Exception(resp, "object")
		}
		return resp.Body, nil
	}
	first, err := open(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return NewSeekable(t.Context(), first, size, open)
}

func TestSeekable(t *testing.T) {
	noLeaks(t)
	data := []byte("abcdefghijklmnopqrstuvwxyz")
	srv, gets := rangeServer(t, data)
	c := New(testConfig("up", srv.URL), nil)
	t.Cleanup(c.Close)

	s := openSeekable(t, c, srv.URL, 26)
	// Size, then back to the start: no new request.
	if n, _ := s.Seek(0, io.SeekEnd); n != 26 {
		t.Errorf("end at %d", n)
	}
	s.Seek(0, io.SeekStart)
	b := make([]byte, 3)
	if _, err := io.ReadFull(s, b); err != nil || string(b) != "abc" {
		t.Fatalf("%q %v", b, err)
	}
	if gets.Load() != 1 {
		t.Errorf("%d GETs after reading the start, want 1", gets.Load())
	}
	// A seek forward reopens at the new position.
	s.Seek(20, io.SeekStart)
	rest, err := io.ReadAll(s)
	if err != nil || string(rest) != "uvwxyz" {
		t.Errorf("%q %v", rest, err)
	}
	s.Seek(-3, io.SeekCurrent)
	rest, _ = io.ReadAll(s)
	if string(rest) != "xyz" {
		t.Errorf("%q", rest)
	}
	if gets.Load() != 3 {
		t.Errorf("%d GETs, want 3", gets.Load())
	}
	if _, err := s.Seek(-1, io.SeekStart); err == nil {
		t.Error("a negative position was accepted")
	}
	s.Close()
	if _, err := s.Read(b); err == nil {
		t.Error("read after close")
	}

	// http.ServeContent serves a range from it.
	s = openSeekable(t, c, srv.URL, 26)
	defer s.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Range", "bytes=5-9")
	http.ServeContent(rec, req, "", time.Time{}, s)
	if rec.Code != http.StatusPartialContent || rec.Body.String() != "fghij" {
		t.Errorf("range: %d %q", rec.Code, rec.Body.String())
	}
}

func TestSeekableReadsToTheEndReuseTheConnection(t *testing.T) {
	noLeaks(t)
	data := []byte(strings.Repeat("z", 10_000))
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := New(testConfig("up", srv.URL), nil)
	t.Cleanup(c.Close)
	for range 5 {
		s := openSeekable(t, c, srv.URL, int64(len(data)))
		if _, err := io.Copy(io.Discard, s); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential reads, want 1", n)
	}
}
