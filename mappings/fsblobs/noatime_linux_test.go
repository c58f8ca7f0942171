package fsblobs

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Get leaves the object's access time alone, where a plain read of a file
// in the same state updates it (relatime: the first read after a change).
func TestGetLeavesAccessTime(t *testing.T) {
	s, _ := newStore(t)
	for _, size := range []int{1 << 10, 2 * MemoryObjectMax} { // read whole, and handed out open
		key := strings.Repeat("k", size%97+1)
		if _, err := s.Put(t.Context(), key, strings.NewReader(strings.Repeat("x", size))); err != nil {
			t.Fatal(err)
		}
		_, file := s.path(key)
		control := file + ".control"
		if err := os.WriteFile(control, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{file, control} {
			if err := os.Chtimes(f, time.Now().Add(-time.Hour), time.Now()); err != nil { // accessed before the change
				t.Fatal(err)
			}
		}
		// As the filesystem keeps them (some to the second).
		then, controlThen := atime(t, file), atime(t, control)
		if _, err := os.ReadFile(control); err != nil {
			t.Fatal(err)
		}
		if !atime(t, control).After(controlThen) {
			t.Skip("this filesystem does not record access times (noatime)")
		}
		if got := get(t, s, key); len(got) != size {
			t.Fatalf("Get returned %d bytes, want %d", len(got), size)
		}
		if at := atime(t, file); !at.Equal(then) {
			t.Errorf("a Get of %d bytes moved the access time from %v to %v", size, then, at)
		}
	}
}

func atime(t *testing.T, file string) time.Time {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return time.Unix(st.Atim.Sec, st.Atim.Nsec)
}
