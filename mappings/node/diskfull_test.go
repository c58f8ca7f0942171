//go:build linux

package node_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestCatalogDiskFull creates objects until the filesystem of the
// catalog (a 1 MiB tmpfs) is full. The create that finds no room must answer
// InsufficientResources, not ServiceFailure, and leave no trace: its staged
// bytes are discarded.
func TestCatalogDiskFull(t *testing.T) {
	dir := t.TempDir()
	small := smallFS(t, dir)

	cat := openCatalog(t, small)
	n := newNode(t, dir, cat, slog.New(slog.DiscardHandler)) // bytes off the full filesystem
	t.Cleanup(func() { n.Close() })
	ctx := t.Context()
	s := &adapter.Session{Subject: harvestOwner}
	desc := strings.Repeat("padding the system metadata so the catalog fills fast ", 40)
	for i := range 100000 {
		data := []byte(fmt.Sprintf("object %d", i))
		u, err := n.Stage(ctx, bytes.NewReader(data), []string{"SHA-256"})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sm := &adapter.SystemMetadata{Identifier: fmt.Sprintf("full-%d-%s", i, desc[:200]), FormatID: "text/plain", Size: uint64(len(data)),
			Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])}, RightsHolder: harvestOwner + desc}
		_, err = n.Create(ctx, s, sm, u)
		if err == nil {
			continue
		}
		t.Logf("create %d failed: %v", i, err)
		if !adapter.IsKind(err, adapter.InsufficientResources) {
			t.Errorf("catalog disk full: got %s, want InsufficientResources", adapter.AsException(err).Kind)
		}
		// No trace: exactly the i objects created have bytes.
		files := 0
		filepath.WalkDir(filepath.Join(dir, "objects", "objects"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files++
			}
			return nil
		})
		if files != i {
			t.Errorf("%d files for %d objects created", files, i)
		}
		// The failed create is not in the catalog, now or after a restart.
		if _, err := n.SystemMetadata(ctx, s, sm.Identifier); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("after its failed create, getSystemMetadata answers %v", err)
		}
		n.Close()
		cat2 := openCatalog(t, small)
		n2 := newNode(t, filepath.Join(dir, "again"), cat2, slog.New(slog.DiscardHandler))
		defer n2.Close()
		if _, err := n2.SystemMetadata(ctx, s, sm.Identifier); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("after its failed create and a restart, getSystemMetadata answers %v", err)
		}
		return
	}
	t.Fatal("the catalog never filled its filesystem")
}

// TestStageDiskFullIsInsufficientResources stages an object larger than
// the free space of the object store's filesystem (a 1 MiB tmpfs): the node
// must answer InsufficientResources (the kind MNStorage.create/update list for
// a node that cannot take the object), not ServiceFailure, and leave no file
// behind.
func TestStageDiskFullIsInsufficientResources(t *testing.T) {
	dir := t.TempDir()
	small := smallFS(t, dir)

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

// smallFS mounts a 1 MiB tmpfs under dir (root only: the test is skipped
// otherwise), unmounted when the test ends.
func smallFS(t *testing.T, dir string) string {
	t.Helper()
	small := filepath.Join(dir, "small")
	if err := os.Mkdir(small, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): needs root", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, syscall.MNT_DETACH) })
	return small
}
