package fsblobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func get(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer r.Close()
	if _, ok := r.(io.Seeker); !ok {
		t.Errorf("Get(%q) returned a %T, which cannot seek", key, r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tmpEntries lists the temporary files left under dir/tmp, in every instance's
// directory (their lock files aside).
func tmpEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, "tmp"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() != ".lock" {
			out = append(out, d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPutGetDelete(t *testing.T) {
	t.Parallel()
	t.Run("files", func(t *testing.T) {
		t.Parallel()
		s, dir := newStore(t)
		checkPutGetDelete(t, s, dir)
	})
	t.Run("memory", func(t *testing.T) {
		// Gets before the replacing Put and the Delete keep the bytes in memory.
		t.Parallel()
		dir := t.TempDir()
		s, err := New(dir, WithMemory(1<<20))
		if err != nil {
			t.Fatal(err)
		}
		checkPutGetDelete(t, s, dir)
	})
}

func checkPutGetDelete(t *testing.T, s *Store, dir string) {
	ctx := t.Context()
	n, err := s.Put(ctx, "k1", strings.NewReader("hello"))
	if err != nil || n != 5 {
		t.Fatalf("Put: %d, %v", n, err)
	}
	if got := get(t, s, "k1"); string(got) != "hello" {
		t.Errorf("got %q", got)
	}
	// Seeking works, for ranges.
	r, _ := s.Get(ctx, "k1")
	if _, err := r.(io.Seeker).Seek(2, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	r.Close()
	if string(rest) != "llo" {
		t.Errorf("after seeking: %q", rest)
	}
	// Put replaces.
	if _, err := s.Put(ctx, "k1", strings.NewReader("bye")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "k1"); string(got) != "bye" {
		t.Errorf("after replacing: %q", got)
	}
	// An empty object is an object.
	if n, err := s.Put(ctx, "empty", bytes.NewReader(nil)); err != nil || n != 0 {
		t.Fatalf("Put empty: %d, %v", n, err)
	}
	if got := get(t, s, "empty"); len(got) != 0 {
		t.Errorf("empty object: %q", got)
	}
	if err := s.Delete(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k1"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
	if err := s.Delete(ctx, "k1"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if _, err := s.Get(ctx, "never"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get of a missing key: %v, want NotFound", err)
	}
	if left := tmpEntries(t, dir); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// patterned is n bytes of a repeating pattern, read in odd-sized pieces.
type patterned struct{ n, off int64 }

func (p *patterned) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n-p.off, 70001)]
	for i := range b {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func TestLargeObject(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	// Around the first buffer (written through the page cache), the direct
	// chunks that follow and their alignment, and several writeback windows
	// and a piece of one (write-behind, where direct I/O is refused): every
	// byte must come back.
	sizes := []int64{
		bufSize - 1, bufSize, bufSize + 1, bufSize + directAlign, bufSize + directAlign + 1,
		bufSize + directChunk, bufSize + directChunks*directChunk - 1, bufSize + (directChunks+3)*directChunk + 4095,
		(writebackAhead+2)*writebackWindow + 5<<20 + 17,
	}
	for _, size := range sizes {
		key := fmt.Sprint("big-", size)
		n, err := s.Put(t.Context(), key, &patterned{n: size})
		if err != nil || n != size {
			t.Fatalf("Put of %d bytes: %d, %v", size, n, err)
		}
		want := sha256.New()
		io.Copy(want, &patterned{n: size})
		got := get(t, s, key)
		if sum := sha256.Sum256(got); int64(len(got)) != size || !bytes.Equal(sum[:], want.Sum(nil)) {
			t.Errorf("%d bytes: the %d bytes read back differ", size, len(got))
		}
	}
}

// failing yields n zero bytes, then err.
type failing struct {
	n   int
	err error
}

func (f *failing) Read(b []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	m := min(len(b), f.n)
	f.n -= m
	return m, nil
}

// cancelAfter reads r and calls cancel once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(b []byte) (int, error) {
	m, err := c.r.Read(b)
	if c.n -= m; c.n <= 0 {
		c.cancel()
	}
	return m, err
}

func TestFailedPutLeavesNothing(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	cases := map[string]func(ctx context.Context, cancel context.CancelFunc) (io.Reader, error){
		"reader error": func(context.Context, context.CancelFunc) (io.Reader, error) {
			return &failing{n: 600 << 10, err: boom}, boom
		},
		"reader error after direct chunks": func(context.Context, context.CancelFunc) (io.Reader, error) {
			return &failing{n: bufSize + 6*directChunk + 5, err: boom}, boom
		},
		"reader panics after direct chunks": func(context.Context, context.CancelFunc) (io.Reader, error) {
			return &panicking{patterned{n: 1 << 30}, bufSize + 3*directChunk}, errPanicked
		},
		"canceled midway": func(_ context.Context, cancel context.CancelFunc) (io.Reader, error) {
			// The reader cancels once it has been read a while, then goes on.
			return &cancelAfter{r: &patterned{n: 1 << 30}, n: 600 << 10, cancel: cancel}, context.Canceled
		},
		"canceled before": func(_ context.Context, cancel context.CancelFunc) (io.Reader, error) {
			cancel()
			return strings.NewReader("x"), context.Canceled
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, dir := newStore(t)
			if _, err := s.Put(t.Context(), "kept", strings.NewReader("old")); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"new", "kept"} {
				ctx, cancel := context.WithCancel(t.Context())
				r, wantErr := mk(ctx, cancel)
				err := putRecovering(ctx, s, key, r)
				cancel()
				if !errors.Is(err, wantErr) {
					t.Errorf("Put(%s): %v, want %v", key, err, wantErr)
				}
			}
			if left := tmpEntries(t, dir); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
			if _, err := s.Get(t.Context(), "new"); !adapter.IsKind(err, adapter.NotFound) {
				t.Errorf("a failed Put left something: %v", err)
			}
			if got := get(t, s, "kept"); string(got) != "old" {
				t.Errorf("a failed Put changed an existing key: %q", got)
			}
		})
	}
}

var errPanicked = errors.New("the body's reader panicked")

// putRecovering is s.Put with a panic of the body's reader (which net/http
// recovers in a handler) returned as errPanicked.
func putRecovering(ctx context.Context, s *Store, key string, r io.Reader) (err error) {
	defer func() {
		if recover() != nil {
			err = errPanicked
		}
	}()
	_, err = s.Put(ctx, key, r)
	return err
}

func TestOddKeys(t *testing.T) {
	t.Parallel()
	s, dir := newStore(t)
	ctx := t.Context()
	keys := []string{
		"../../../../etc/passwd", "..", ".", "/", "/abs/path", "a/b/c", `a\b`, "con", "nul.txt",
		"key with spaces", "ünïcödé/日本", "new\nline", "nul\x00byte", "%2F%2e%2e", strings.Repeat("x", 800),
		"urn:uuid:0a1b2c3d-0000-4000-8000-000000000000", "doi:10.5063/F1ABCDEF",
	}
	for i, k := range keys {
		if _, err := s.Put(ctx, k, strings.NewReader(fmt.Sprint(i))); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	for i, k := range keys {
		if got := string(get(t, s, k)); got != fmt.Sprint(i) {
			t.Errorf("Get(%q) = %q, want %q", k, got, fmt.Sprint(i))
		}
	}
	// Every file is a hash-named object under objects/xx/yy.
	name := regexp.MustCompile(`^objects/([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{64})$`)
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Name() == ".lock" && strings.HasPrefix(filepath.ToSlash(rel), "tmp/") {
			return nil // the instance's lock, not an object
		}
		m := name.FindStringSubmatch(filepath.ToSlash(rel))
		if m == nil || !strings.HasPrefix(m[3], m[1]+m[2]) {
			t.Errorf("unexpected file %s", rel)
		}
		files++
		return nil
	})
	if files != len(keys) {
		t.Errorf("%d files for %d keys", files, len(keys))
	}
	if _, err := s.Put(ctx, "", strings.NewReader("x")); err == nil {
		t.Errorf("Put with an empty key succeeded")
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
}

func TestStaleTempFilesRemoved(t *testing.T) {
	t.Parallel()
	s, dir := newStore(t)
	if _, err := s.Put(t.Context(), "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}
	// A crashed instance left an upload in its directory; its lock died with it.
	dead := filepath.Join(dir, "tmp", "i-crashed")
	if err := os.MkdirAll(dead, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "put-12345"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A live instance sharing the directory (s, still open) has an upload running.
	if err := os.WriteFile(filepath.Join(s.tmp, "put-live"), []byte("uploading"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if left := tmpEntries(t, dir); len(left) != 1 || left[0] != "put-live" {
		t.Errorf("after another instance opened, the temporary files are %v; want only the live upload", left)
	}
	if got := get(t, s2, "k"); string(got) != "v" {
		t.Errorf("after reopening: %q", got)
	}
	// Once the first instance is gone, the next open removes its leftovers.
	s.lock.Close()
	s3, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if left := tmpEntries(t, dir); len(left) != 0 {
		t.Errorf("after the instance ended, left: %v", left)
	}
}

func TestConcurrentPuts(t *testing.T) {
	t.Parallel()
	s, dir := newStore(t)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			k := fmt.Sprintf("k%d", i%10) // writers race on the same keys too
			if _, err := s.Put(t.Context(), k, &patterned{n: int64(300<<10 + i%10)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range 10 {
		if got := len(get(t, s, fmt.Sprintf("k%d", i))); got != 300<<10+i {
			t.Errorf("k%d holds %d bytes", i, got)
		}
	}
	if left := tmpEntries(t, dir); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestNewNeedsADirectory(t *testing.T) {
	t.Parallel()
	if _, err := New(""); err == nil {
		t.Errorf("New(\"\") succeeded")
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := New(file); err == nil {
		t.Errorf("New on a file succeeded")
	}
}

// TestWriteBehind checks the writeback bookkeeping of a large copy: every
// byte reaches the file, the writeback of each full window is started, and
// the bytes not yet waited for never exceed writebackAhead windows plus the
// one being filled (what bounds an upload's dirty pages).
func TestWriteBehind(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := newWriteBehind(f)
	const size = (2*writebackAhead+3)*writebackWindow + 12345
	src := &patterned{n: size}
	buf := make([]byte, 300<<10) // not a divisor of the window
	var maxAhead int64
	for {
		m, rerr := src.Read(buf)
		if m > 0 {
			if k, err := w.Write(buf[:m]); err != nil || k != m {
				t.Fatalf("Write: %d of %d, %v", k, m, err)
			}
			maxAhead = max(maxAhead, w.n-w.waited)
		}
		if rerr == io.EOF {
			break
		}
	}
	if w.n != size {
		t.Fatalf("wrote %d bytes, want %d", w.n, size)
	}
	if w.started < size-writebackWindow {
		t.Errorf("writeback started up to %d only, of %d", w.started, size)
	}
	if w.waited == 0 || w.started-w.waited > writebackAhead*writebackWindow {
		t.Errorf("waited up to %d with writeback started up to %d: not bounded by %d windows", w.waited, w.started, writebackAhead)
	}
	if limit := int64(writebackAhead+1)*writebackWindow + int64(len(buf)); maxAhead > limit {
		t.Errorf("up to %d bytes were not waited for, more than %d", maxAhead, limit)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(&patterned{n: size})
	if !bytes.Equal(got, want) {
		t.Errorf("the file differs from what was written (%d bytes, want %d)", len(got), len(want))
	}
}
