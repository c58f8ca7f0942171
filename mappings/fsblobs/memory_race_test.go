package fsblobs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestMemoryDeleteRace races a Get of a small, often-read object with
// its Delete. WithMemory promises "an entry is never stale: Put and Delete
// forget their key, and bytes read while either ran are not kept". Delete
// forgot the key only before it removed the file, so a Get that looked the
// key up after the forget and read the file before the remove kept the
// deleted bytes, and every later Get served them.
func TestMemoryDeleteRace(t *testing.T) {
	ctx := t.Context()
	s, err := New(t.TempDir(), WithMemory(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := bytes.Repeat([]byte("d"), 512)
	for i := range 2000 {
		key := fmt.Sprintf("k-%d", i)
		dir, file := s.path(key)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		// The bytes without Put's fsyncs, to race many times.
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if r, err := s.Get(ctx, key); err != nil { // first read: the key is seen
			t.Fatal(err)
		} else {
			r.Close()
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if r, err := s.Get(ctx, key); err == nil { // second read: kept
				r.Close()
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if err := s.Delete(ctx, key); err != nil {
				t.Error(err)
			}
		}()
		close(start)
		wg.Wait()
		r, err := s.Get(ctx, key)
		if err == nil {
			b, _ := io.ReadAll(r)
			r.Close()
			t.Fatalf("iteration %d: %q was deleted (its file is gone: %v), yet Get serves %d bytes from memory",
				i, key, func() bool { _, e := os.Stat(file); return os.IsNotExist(e) }(), len(b))
		}
		if !adapter.IsKind(err, adapter.NotFound) {
			t.Fatal(err)
		}
	}
}
