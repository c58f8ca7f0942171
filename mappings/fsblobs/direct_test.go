package fsblobs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// A direct write that fails stops the copy: the error comes back at once,
// without the rest of the body being read.
func TestCopyDirectWriteFails(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read-only: every write fails
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src := &patterned{n: 1 << 30}
	done := make(chan error, 1)
	go func() {
		_, err := copyDirect(t.Context(), f, src, 0)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("copyDirect still copying a minute after its first write failed")
	}
	if err == nil {
		t.Fatal("copyDirect into a read-only file succeeded")
	}
	// Each buffer is read at most once: the fresh ones may all be filled
	// before the writer's first write fails, none after a buffer comes back.
	if limit := int64(directChunks) * directChunk; src.off > limit {
		t.Errorf("%d bytes read after the first write failed, more than %d", src.off, limit)
	}
}

// panicking reads its first n bytes from patterned, then panics.
type panicking struct {
	patterned
	after int64
}

func (p *panicking) Read(b []byte) (int, error) {
	if p.off >= p.after {
		panic("body reader")
	}
	return p.patterned.Read(b)
}

// A body reader that panics (net/http recovers the handler) leaves no writer
// behind: synctest fails the test if a goroutine of the bubble is still
// blocked when it ends.
func TestCopyDirectReaderPanics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	synctest.Test(t, func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("the reader's panic did not reach the caller")
			}
		}()
		copyDirect(context.Background(), f, &panicking{patterned{n: 1 << 30}, 3 * directChunk}, 0)
	})
}
