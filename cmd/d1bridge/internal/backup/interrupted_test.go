package backup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreRefusesInterruptedExport: an export that failed part way was
// restored as if it were whole, its later objects missing and the one it
// stopped at without bytes. It is no export now (its settings and manifest
// are written last), and a directory with d1bridge's pid list and no
// manifest is refused.
func TestRestoreRefusesInterruptedExport(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t)
	for _, pid := range []string{"a", "b", "c"} {
		n.create(t, pid)
	}
	// b's file in the store is damaged: the export stops there, with an error.
	if err := writeFile(filepath.Join(n.dir, "objects", "objects", keyPath("key-b")), bytes.NewReader([]byte("damaged"))); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e")
	if _, err := Export(ctx, dir, ExportOptions{Options: n.opts()}); err == nil {
		t.Fatal("the export of a damaged store succeeded")
	}
	if k := Kind(dir); k != "" {
		t.Errorf("Kind of the interrupted export: %q, want neither", k)
	}
	// Even with the settings written by hand, the restore refuses it.
	if err := writeFile(filepath.Join(dir, hashstoreConfig), bytes.NewReader([]byte(hashstoreYAML))); err != nil {
		t.Fatal(err)
	}
	r := newTestNode(t)
	s, err := RestoreExport(ctx, dir, RestoreOptions{Options: r.opts()})
	if err == nil {
		key := "(no record)"
		if rec, lerr := r.cat.Lookup(ctx, "b"); lerr == nil {
			key = rec.BlobKey
		}
		t.Errorf("the restore of an interrupted export succeeded: %+v; restored pids %q (c is missing); b's blob key %q (its bytes are gone)",
			s, pidsOf(t, r.cat), key)
	}
}

// TestRestoreSkipsVanished: an object deleted while the export ran (its bytes
// gone when the export reached them) is in the manifest's vanished list, and
// is not restored as a record without bytes.
func TestRestoreSkipsVanished(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t)
	for _, pid := range []string{"a", "b"} {
		n.create(t, pid)
	}
	if err := os.Remove(filepath.Join(n.dir, "objects", "objects", keyPath("key-b"))); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e")
	m, err := Export(ctx, dir, ExportOptions{Options: n.opts()})
	if err != nil || len(m.Vanished) != 1 || m.Vanished[0] != "b" {
		t.Fatalf("export: %+v, %v; want b vanished", m, err)
	}
	r := newTestNode(t)
	if _, err := RestoreExport(ctx, dir, RestoreOptions{Options: r.opts()}); err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(t, r.cat); got != "a" {
		t.Errorf("restored %q, want only a", got)
	}
}

// TestRestoreRefusesTruncatedExport: a copy of an export cut short (a pid's
// ref left out, the pid list cut) restored what it held without a word: an
// object without its bytes, or fewer objects. Its manifest's counts tell.
func TestRestoreRefusesTruncatedExport(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t)
	for _, pid := range []string{"a", "b", "c"} {
		n.create(t, pid)
	}
	for name, cut := range map[string]func(t *testing.T, dir string){
		"a ref left out": func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, pidRefPath("b"))); err != nil {
				t.Fatal(err)
			}
		},
		"the pid list cut": func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, pidList))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.SplitAfter(string(b), "\n")
			if err := os.WriteFile(filepath.Join(dir, pidList), []byte(strings.Join(lines[:2], "")), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "e")
			if _, err := Export(ctx, dir, ExportOptions{Options: n.opts()}); err != nil {
				t.Fatal(err)
			}
			cut(t, dir)
			r := newTestNode(t)
			_, err := RestoreExport(ctx, dir, RestoreOptions{Options: r.opts()})
			if err == nil || !strings.Contains(err.Error(), "the export is not whole") {
				t.Errorf("restore of %s: %v (restored %q), want the export refused as not whole", name, err, pidsOf(t, r.cat))
			}
		})
	}
}

// TestRestoreExportRefusesOddRefs: an object file that is a symbolic link
// was linked into the store as the link (to bytes outside it).
func TestRestoreExportRefusesOddRefs(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t)
	n.create(t, "a")
	for name, spoil := range map[string]func(t *testing.T, dir string){
		"a symbolic link": func(t *testing.T, dir string) {
			ref, err := os.ReadFile(filepath.Join(dir, pidRefPath("a")))
			if err != nil {
				t.Fatal(err)
			}
			obj := filepath.Join(dir, "objects", shard(strings.TrimSpace(string(ref))))
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.Rename(obj, outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, obj); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "e")
			if _, err := Export(ctx, dir, ExportOptions{Options: n.opts()}); err != nil {
				t.Fatal(err)
			}
			spoil(t, dir)
			r := newTestNode(t)
			if _, err := RestoreExport(ctx, dir, RestoreOptions{Options: r.opts()}); err == nil {
				t.Errorf("restore with %s succeeded", name)
			}
		})
	}
}
