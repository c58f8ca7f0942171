// Package mappingtest is the acceptance suite every node.Blobs must pass,
// whatever store is behind it (objstore's AcceptanceTest): the embedded files,
// S3, WebDAV and http stores run the same cases. The stores that reach an
// upstream over HTTP also share a fault suite (Faults, NoGoroutineLeaks) and a
// Get benchmark against the upstream read directly (BenchGet), each given a
// small adapter (Remote).
package mappingtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// Inspector can be implemented by the store newStore returns (a test wrapper
// around the real one) to let the suite look behind the interface.
type Inspector interface {
	// Stored lists every name the store's upstream holds for this store, in
	// any order: objects, and also temporary files, incomplete multipart
	// uploads and anything else a failed Put could leave.
	Stored(t *testing.T) []string
}

// LargeSize is the size of the suite's large object.
const LargeSize = 64 << 20

// FailAfter is where the suite's failing readers fail in the larger case: past
// a 5 MiB multipart part, so that a store using parts that small has sent some.
const FailAfter = 12 << 20

// Blobs runs the suite. newStore must return an empty store, independent of
// every other one it returns (its own directory, bucket or prefix); it is called
// from parallel subtests and should release what it opened when t ends.
func Blobs(t *testing.T, newStore func(t *testing.T) node.Blobs) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s node.Blobs)
	}{
		{"RoundTrip", testRoundTrip},
		{"Empty", testEmpty},
		{"Large", testLarge},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"FailedPut", testFailedPut},
		{"CanceledPut", testCanceledPut},
		{"Concurrent", testConcurrent},
		{"OddKeys", testOddKeys},
		{"Seek", testSeek},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// --- helpers

func put(t *testing.T, s node.Blobs, key string, data []byte) {
	t.Helper()
	n, err := s.Put(t.Context(), key, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put(%q) stored %d bytes, want %d", key, n, len(data))
	}
}

func get(t *testing.T, s node.Blobs, key string) []byte {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading %q: %v", key, err)
	}
	return b
}

func wantNotFound(t *testing.T, s node.Blobs, key string) {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err == nil {
		r.Close()
		t.Fatalf("Get(%q) found bytes, want NotFound", key)
	}
	if !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("Get(%q): %v, want an adapter NotFound", key, err)
	}
}

func stored(t *testing.T, s node.Blobs) []string {
	t.Helper()
	in, ok := s.(Inspector)
	if !ok {
		return nil
	}
	names := in.Stored(t)
	slices.Sort(names)
	return names
}

// sameStored checks that what the store holds has not changed since before.
func sameStored(t *testing.T, s node.Blobs, before []string, when string) {
	t.Helper()
	if _, ok := s.(Inspector); !ok {
		return
	}
	if after := stored(t, s); !slices.Equal(before, after) {
		t.Errorf("%s, the store holds %q; before, %q", when, after, before)
	}
}

// generated is n deterministic pseudo-random bytes, streamed.
func generated(seed uint64, n int64) io.Reader {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

func bytesOf(seed uint64, n int) []byte {
	b, _ := io.ReadAll(generated(seed, int64(n)))
	return b
}

var errBoom = errors.New("mappingtest: the reader broke")

// failing yields its reader's bytes, then err.
type failing struct {
	r   io.Reader
	err error
}

func failAfter(seed uint64, n int64) io.Reader { return &failing{generated(seed, n), errBoom} }

func (f *failing) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// --- cases

func testRoundTrip(t *testing.T, s node.Blobs) {
	for _, size := range []int{1, 1000, 256 << 10} {
		key := fmt.Sprintf("round-%d", size)
		data := bytesOf(uint64(size), size)
		put(t, s, key, data)
		if got := get(t, s, key); !bytes.Equal(got, data) {
			t.Errorf("%s: got %d bytes back, different from the %d put", key, len(got), len(data))
		}
	}
	put(t, s, "text", []byte("hello, world\n"))
	if got := get(t, s, "text"); string(got) != "hello, world\n" {
		t.Errorf("got %q", got)
	}
}

func testEmpty(t *testing.T, s node.Blobs) {
	put(t, s, "empty", nil)
	if got := get(t, s, "empty"); len(got) != 0 {
		t.Errorf("an empty object came back with %d bytes", len(got))
	}
}

func testLarge(t *testing.T, s node.Blobs) {
	in := sha256.New()
	start := time.Now()
	n, err := s.Put(t.Context(), "large", io.TeeReader(generated(64, LargeSize), in))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n != LargeSize {
		t.Fatalf("Put stored %d bytes, want %d", n, LargeSize)
	}
	put := time.Since(start)
	start = time.Now()
	r, err := s.Get(t.Context(), "large")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := sha256.New()
	m, err := io.Copy(out, r)
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	if m != LargeSize || !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		t.Errorf("read back %d bytes with another SHA-256", m)
	}
	t.Logf("64 MiB: put %v, get %v", put.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func testMissing(t *testing.T, s node.Blobs) {
	wantNotFound(t, s, "never-put")
	put(t, s, "present", []byte("x"))
	wantNotFound(t, s, "present-not")
	wantNotFound(t, s, "presen")
}

func testDelete(t *testing.T, s node.Blobs) {
	before := stored(t, s)
	if err := s.Delete(t.Context(), "never-put"); err != nil {
		t.Errorf("deleting a missing key: %v", err)
	}
	put(t, s, "doomed", []byte("bytes"))
	put(t, s, "kept", []byte("other bytes"))
	if err := s.Delete(t.Context(), "doomed"); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, "doomed")
	if err := s.Delete(t.Context(), "doomed"); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	if got := get(t, s, "kept"); string(got) != "other bytes" {
		t.Errorf("a neighbour changed: %q", got)
	}
	if err := s.Delete(t.Context(), "kept"); err != nil {
		t.Fatal(err)
	}
	sameStored(t, s, before, "after every key is deleted")
}

func testOverwrite(t *testing.T, s node.Blobs) {
	put(t, s, "k", []byte("the first, longer version"))
	put(t, s, "k", []byte("second"))
	if got := get(t, s, "k"); string(got) != "second" {
		t.Errorf("after an overwrite: %q", got)
	}
	// A failed Put over an existing key leaves it as it was.
	if _, err := s.Put(t.Context(), "k", failAfter(1, 1000)); !errors.Is(err, errBoom) {
		t.Errorf("a failing reader's Put: %v, want its error", err)
	}
	if got := get(t, s, "k"); string(got) != "second" {
		t.Errorf("after a failed overwrite: %q", got)
	}
}

func testFailedPut(t *testing.T, s node.Blobs) {
	before := stored(t, s)
	for _, n := range []int64{0, 1000, FailAfter} {
		key := fmt.Sprintf("failed-%d", n)
		_, err := s.Put(t.Context(), key, failAfter(uint64(n), n))
		if !errors.Is(err, errBoom) {
			t.Errorf("Put with a reader failing after %d bytes: %v, want the reader's error", n, err)
		}
		wantNotFound(t, s, key)
		sameStored(t, s, before, fmt.Sprintf("after a Put failed at byte %d", n))
		// A body cut short (net/http's error for a connection that ends
		// before its length or last chunk) is a failure, not the object's end.
		key = fmt.Sprintf("cut-%d", n)
		_, err = s.Put(t.Context(), key, &failing{generated(uint64(n), n), io.ErrUnexpectedEOF})
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Put with a body cut after %d bytes: %v, want io.ErrUnexpectedEOF", n, err)
		}
		wantNotFound(t, s, key)
		sameStored(t, s, before, fmt.Sprintf("after a Put cut at byte %d", n))
	}
}

// cancelling cancels its context after n bytes, and goes on yielding bytes.
type cancelling struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelling) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
		time.Sleep(time.Millisecond) // let the store see it
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

func testCanceledPut(t *testing.T, s node.Blobs) {
	before := stored(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &cancelling{r: generated(9, 64<<20), n: 2 << 20, cancel: cancel}
	if _, err := s.Put(ctx, "canceled", r); err == nil {
		t.Fatal("a Put whose context was canceled midway succeeded")
	}
	wantNotFound(t, s, "canceled")
	sameStored(t, s, before, "after a canceled Put")

	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "canceled-before", strings.NewReader("x")); err == nil {
		t.Error("a Put with a canceled context succeeded")
	}
	wantNotFound(t, s, "canceled-before")
}

func testConcurrent(t *testing.T, s node.Blobs) {
	const workers, each = 8, 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				seed := uint64(w*each + i)
				key := fmt.Sprintf("concurrent-%d-%d", w, i)
				data := bytesOf(seed, int(seed)*37_000+1)
				n, err := s.Put(t.Context(), key, bytes.NewReader(data))
				if err != nil || n != int64(len(data)) {
					t.Errorf("Put(%q): %d, %v", key, n, err)
				}
			}
		})
	}
	wg.Wait()
	for w := range workers {
		for i := range each {
			seed := uint64(w*each + i)
			key := fmt.Sprintf("concurrent-%d-%d", w, i)
			if got := get(t, s, key); !bytes.Equal(got, bytesOf(seed, int(seed)*37_000+1)) {
				t.Errorf("%s: %d bytes, not those put", key, len(got))
			}
		}
	}
}

// OddKeys are keys a store must keep apart and safe: none may reach outside
// the store, and each must come back as its own object.
var OddKeys = []string{
	"a/b/c", "a/b", "a", "/leading", "trailing/", "a//b", "./dot", "..", ".", "../../etc/passwd",
	"with space", "per%2Fcent", "q?uery#frag", "back\\slash", "ünïcødé/日本語", "emoji-🦆",
	"nul\x00byte", "new\nline", "~tilde", "UPPER", "upper", strings.Repeat("k", 300),
	strings.Repeat("é", 200), "8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b",
}

func testOddKeys(t *testing.T, s node.Blobs) {
	before := stored(t, s)
	for i, k := range OddKeys {
		n, err := s.Put(t.Context(), k, strings.NewReader(fmt.Sprintf("value %d", i)))
		if err != nil || n != int64(len(fmt.Sprintf("value %d", i))) {
			t.Errorf("Put(%q): %d, %v", k, n, err)
		}
	}
	for i, k := range OddKeys {
		if got := get(t, s, k); string(got) != fmt.Sprintf("value %d", i) {
			t.Errorf("Get(%q) = %q, want value %d", k, got, i)
		}
	}
	for _, k := range OddKeys {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
		wantNotFound(t, s, k)
	}
	sameStored(t, s, before, "after the odd keys are deleted")
}

func testSeek(t *testing.T, s node.Blobs) {
	data := bytesOf(7, 300_000)
	put(t, s, "seekable", data)
	r, err := s.Get(t.Context(), "seekable")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		t.Logf("Get returns a %T, which does not seek: ranges are not served from this store", r)
		return
	}
	if n, err := rs.Seek(0, io.SeekEnd); err != nil || n != int64(len(data)) {
		t.Fatalf("Seek to the end: %d, %v", n, err)
	}
	if _, err := rs.Seek(123_456, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rs)
	if err != nil || !bytes.Equal(rest, data[123_456:]) {
		t.Errorf("after a seek: %d bytes, %v", len(rest), err)
	}
	if _, err := rs.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(rs)
	if err != nil || !bytes.Equal(all, data) {
		t.Errorf("after seeking back: %d bytes, %v", len(all), err)
	}

	// http.ServeContent, as the get handler uses it, serves a range.
	r2, err := s.Get(t.Context(), "seekable")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/object/x", nil)
	req.Header.Set("Range", "bytes=1000-1999")
	http.ServeContent(rec, req, "", time.Time{}, r2.(io.ReadSeeker))
	if rec.Code != http.StatusPartialContent || !bytes.Equal(rec.Body.Bytes(), data[1000:2000]) {
		t.Errorf("a range: %d, %d bytes", rec.Code, rec.Body.Len())
	}
}
