//go:build linux

package node_test

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestStageDiskFullIsInsufficientResources stages an object larger than
// the free space of the object store's filesystem (a 1 MiB tmpfs): the node
// must answer InsufficientResources (the kind MNStorage.create/update list for
// a node that cannot take the object), not ServiceFailure, and leave no file
// behind.
func TestStageDiskFullIsInsufficientResources(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.Mkdir(small, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): needs root", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })

	cat := openCatalog(t, dir) // the catalog is not on the full filesystem
	n := newNode(t, small, cat, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { n.Close() })

	data := bytes.Repeat([]byte{'x'}, 4<<20)
	u, err := n.Stage(t.Context(), bytes.NewReader(data), []string{"MD5"})
	if err == nil {
		t.Fatalf("staged %d bytes on a 1 MiB filesystem", u.Size)
	}
	if !adapter.IsKind(err, adapter.InsufficientResources) {
		t.Errorf("disk full: got %s (%v), want InsufficientResources", adapter.AsException(err).Kind, err)
	}
	var left []string
	filepath.WalkDir(small, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() != ".lock" {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("a failed stage left files: %v", left)
	}
}
