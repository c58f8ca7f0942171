package fsblobs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/fastcache"
	"github.com/d1bridge/d1bridge/adapter"
)

// TestMemory: a small object read twice is served from memory (its file gone
// behind the store's back, the bytes still come), one read once is not kept; a
// larger one is its file, which the REST layer sends with sendfile; Delete
// forgets, and bytes read while a Put replaced them are not kept.
func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := New(t.TempDir(), WithMemory(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	small := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 1024) }
	for i := range 6 {
		if _, err := s.Put(ctx, fmt.Sprintf("small-%02d", i), bytes.NewReader(small(i))); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("z"), MemoryObjectMax+1)
	if _, err := s.Put(ctx, "big", bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "once", bytes.NewReader(small(9))); err != nil {
		t.Fatal(err)
	}
	get(t, s, "once")
	for range 2 {
		for i := range 6 {
			if got := get(t, s, fmt.Sprintf("small-%02d", i)); !bytes.Equal(got, small(i)) {
				t.Fatalf("small-%02d: %d bytes, not what was put", i, len(got))
			}
		}
	}
	for range 2 {
		r, err := s.Get(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*os.File); !ok {
			t.Errorf("an object of %d bytes came as a %T, want its file", len(big), r)
		}
		r.Close()
	}

	// Their files removed, the objects read twice are still read.
	for _, key := range []string{"small-00", "small-01", "small-02", "small-03", "small-04", "small-05", "once", "big"} {
		_, file := s.path(key)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"once", "big"} {
		if _, err := s.Get(ctx, key); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("%s was kept (%v)", key, err)
		}
	}
	for i := range 6 {
		if got := get(t, s, fmt.Sprintf("small-%02d", i)); !bytes.Equal(got, small(i)) {
			t.Errorf("small-%02d from memory: %d bytes, not what was put", i, len(got))
		}
	}
	// 17 reads from the files (once, twice each small object and big, then
	// once and big again), 6 from memory.
	if kept, hits, misses := s.MemoryStats(); kept < 6*1024 || hits != 6 || misses != 17 {
		t.Errorf("MemoryStats: %d bytes, %d hits, %d misses; want at least %d, 6, 17", kept, hits, misses, 6*1024)
	}
	if err := s.Delete(ctx, "small-05"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "small-05"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
	// Bytes read while the key was being replaced are not kept.
	var buf []byte
	s.mem.lookup("fresh", &buf)
	_, keep, mark := s.mem.lookup("fresh", &buf)
	if _, err := s.Put(ctx, "fresh", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if !keep {
		t.Error("a key read twice is not to be kept")
	}
	s.mem.put("fresh", []byte("old"), mark)
	if got := get(t, s, "fresh"); string(got) != "new" {
		t.Errorf("after a Put replaced it: %q, want new", got)
	}
}

// TestMemoryBounds: what is kept stays within the budget (at least 32 MiB),
// the oldest going first; a key is kept at its second read among the last
// seenKeys read, not after more keys than that came between.
func TestMemoryBounds(t *testing.T) {
	t.Parallel()
	m := newMemory(32 << 20)
	defer m.close()
	var buf []byte
	lookup := func(key string) (hit, keep bool) { hit, keep, _ = m.lookup(key, &buf); return hit, keep }
	b := bytes.Repeat([]byte("b"), MemoryObjectMax)
	const n = 3 * (32 << 20) / MemoryObjectMax // three budgets' worth
	for i := range n {
		m.put(fmt.Sprint(i), b, 0)
	}
	var st fastcache.Stats
	m.kept.UpdateStats(&st)
	if st.BytesSize > 32<<20 {
		t.Errorf("%d bytes kept, over the budget of %d", st.BytesSize, 32<<20)
	}
	if hit, _ := lookup("0"); hit {
		t.Error("the first key put is still kept after three budgets' worth")
	}
	if hit, _ := lookup(fmt.Sprint(n - 1)); !hit || !bytes.Equal(buf, b) {
		t.Error("the last key put is not kept, or not its bytes")
	}

	if _, keep := lookup("x"); keep {
		t.Error("a key read once is to be kept")
	}
	for i := range seenKeys - 1 {
		lookup(fmt.Sprint("y", i))
	}
	if _, keep := lookup("x"); !keep {
		t.Errorf("a key read again after %d others is not to be kept", seenKeys-1)
	}
	lookup("z")
	for i := range seenKeys {
		lookup(fmt.Sprint("w", i))
	}
	if _, keep := lookup("z"); keep {
		t.Errorf("a key read again after %d others is to be kept", seenKeys)
	}
}

// TestSmallObjectsReadWhole: an object of at most MemoryObjectMax bytes comes
// back as its bytes, read whole, its file already closed (no memory needed);
// a larger one as its open file. Not parallel: it counts the process's open
// files.
func TestSmallObjectsReadWhole(t *testing.T) {
	ctx := t.Context()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	openFiles := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd to count open files with")
		}
		return len(fds)
	}
	for _, size := range []int{0, 1, 1024, MemoryObjectMax, MemoryObjectMax + 1} {
		key := fmt.Sprintf("size-%d", size)
		want := bytes.Repeat([]byte("q"), size)
		if _, err := s.Put(ctx, key, bytes.NewReader(want)); err != nil {
			t.Fatal(err)
		}
		before := openFiles()
		r, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		held := openFiles() - before
		_, isFile := r.(*os.File)
		if small := size <= MemoryObjectMax; isFile == small || held != map[bool]int{true: 0, false: 1}[small] {
			t.Errorf("%d bytes: a %T holding %d open files; want bytes and none up to %d bytes, the file above",
				size, r, held, MemoryObjectMax)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read %d bytes (%v), not what was put", size, len(got), err)
		}
		r.Close()
		if n := openFiles(); n != before {
			t.Errorf("%d bytes: %d open files after Close, %d before Get", size, n, before)
		}
	}
	if _, err := s.Get(ctx, "never-put"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get of a key never put: %v, want NotFound", err)
	}
}
