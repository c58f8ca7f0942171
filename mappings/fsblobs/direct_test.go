package fsblobs

import (
	"os"
	"path/filepath"
	"testing"
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
	if limit := int64(directChunks+2) * directChunk; src.off > limit {
		t.Errorf("%d bytes read after the first write failed, more than %d", src.off, limit)
	}
}
