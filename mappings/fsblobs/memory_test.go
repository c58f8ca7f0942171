package fsblobs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestMemory: a small object read twice is served from memory (its file gone
// behind the store's back, the bytes still come), one read once is not kept; a
// larger one is its file, which the REST layer sends with sendfile; the budget
// bounds what is kept, least recently read out first; Delete forgets.
func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const budget = 4 * (1024 + 16 + entryOverhead)
	s, err := New(t.TempDir(), WithMemory(budget))
	if err != nil {
		t.Fatal(err)
	}
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
	r, err := s.Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*os.File); !ok {
		t.Errorf("an object of %d bytes came as a %T, want its file", len(big), r)
	}
	r.Close()
	if s.mem.used > budget || s.mem.kept.Len() != 4 {
		t.Errorf("%d objects, %d bytes kept; want 4, at most %d", s.mem.kept.Len(), s.mem.used, budget)
	}

	// The 4 read last are in memory: their files removed, they are still read.
	for _, key := range []string{"small-00", "small-01", "small-02", "small-03", "small-04", "small-05", "once"} {
		_, file := s.path(key)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(ctx, "once"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("an object read once was kept (%v)", err)
	}
	for i := range 6 {
		key := fmt.Sprintf("small-%02d", i)
		r, err := s.Get(ctx, key)
		switch {
		case i < 2 && !adapter.IsKind(err, adapter.NotFound):
			t.Errorf("%s, read first, was kept (%v): the oldest go first", key, err)
		case i >= 2 && err != nil:
			t.Errorf("%s is not in memory: %v", key, err)
		}
		if r != nil {
			r.Close()
		}
	}
	// 17 reads from the files (twice each small object, big, once, then
	// once again, small-00 and small-01), 4 from memory.
	if kept, hits, misses := s.MemoryStats(); kept != s.mem.used || hits != 4 || misses != 17 {
		t.Errorf("MemoryStats: %d bytes, %d hits, %d misses; want %d, 4, 17", kept, hits, misses, s.mem.used)
	}
	if err := s.Delete(ctx, "small-05"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "small-05"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get after Delete: %v, want NotFound", err)
	}
	// Bytes read while the key was being replaced are not kept.
	s.mem.lookup("fresh")
	_, _, keep, mark := s.mem.lookup("fresh")
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
