package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// testNode is a catalog and an embedded store, as the node keeps them.
type testNode struct {
	dir   string
	cat   *sqlcatalog.Catalog
	blobs *fsblobs.Store
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	dir := t.TempDir()
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	st, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &testNode{dir: dir, cat: cat, blobs: st}
}

func (n *testNode) opts() Options {
	return Options{Catalog: n.cat, Files: filepath.Join(n.dir, "objects"), Blobs: n.blobs, Verify: true}
}

// create stores bytes then the record, as the node's create does.
func (n *testNode) create(t *testing.T, pid string) {
	t.Helper()
	data := []byte("the bytes of " + pid)
	sum := sha256.Sum256(data)
	key := "key-" + pid
	if _, err := n.blobs.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	err := n.cat.Insert(context.Background(), &node.Record{BlobKey: key, Meta: &adapter.SystemMetadata{
		Identifier: pid, FormatID: "text/plain", Size: uint64(len(data)), SerialVersion: 1, RightsHolder: "CN=o",
		Checksum:     adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])},
		DateUploaded: adapter.Now(), DateSysMetadataModified: adapter.Now(),
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// remove deletes the record then the bytes, as the node's delete does.
func (n *testNode) remove(t *testing.T, pid string) {
	t.Helper()
	rec, err := n.cat.Delete(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.blobs.Delete(context.Background(), rec.BlobKey); err != nil {
		t.Fatal(err)
	}
}

// pidsOf lists the objects of a catalog.
func pidsOf(t *testing.T, cat *sqlcatalog.Catalog) string {
	t.Helper()
	s, err := cat.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []string
	if err := s.Objects(context.Background(), func(r sqlcatalog.ObjectRow) error { out = append(out, r.PID); return nil }); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func countFiles(t *testing.T, root string) int {
	t.Helper()
	n := 0
	if err := walkFiles(context.Background(), root, func(string) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackupRaces: writes between the passes of a backup. An object deleted
// after the first pass but before the snapshot is left out, one created then
// is in; one deleted after the snapshot keeps its bytes; one created after the
// first pass and deleted after the snapshot makes the backup take another.
// Each backup restores into a new node with every object it names verified.
func TestBackupRaces(t *testing.T) {
	for name, tc := range map[string]struct {
		captured, snapshot func(t *testing.T, n *testNode)
		want               string
		retry              bool
	}{
		"deleted before the snapshot": {captured: func(t *testing.T, n *testNode) { n.remove(t, "b") }, want: "a c"},
		"created before the snapshot": {captured: func(t *testing.T, n *testNode) { n.create(t, "d") }, want: "a b c d"},
		"deleted after the snapshot":  {snapshot: func(t *testing.T, n *testNode) { n.remove(t, "b") }, want: "a b c"},
		"created and deleted": {
			captured: func(t *testing.T, n *testNode) { n.create(t, "d") },
			snapshot: func(t *testing.T, n *testNode) {
				if _, err := os.Stat(filepath.Join(n.dir, "objects", "objects", keyPath("key-d"))); err == nil {
					n.remove(t, "d")
				}
			},
			want: "a b c", retry: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newTestNode(t)
			for _, pid := range []string{"a", "b", "c"} {
				n.create(t, pid)
			}
			first := true
			testHookCaptured = func() {
				if first && tc.captured != nil {
					tc.captured(t, n)
				}
			}
			testHookSnapshot = func() {
				if first && tc.snapshot != nil {
					tc.snapshot(t, n)
				}
				first = false
			}
			defer func() { testHookCaptured, testHookSnapshot = nil, nil }()
			dir := filepath.Join(t.TempDir(), "b")
			var log bytes.Buffer
			o := n.opts()
			o.Log = &log
			m, err := Backup(context.Background(), dir, o)
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			k := len(strings.Fields(tc.want))
			if m.Objects != int64(k) || m.Files != int64(k) || countFiles(t, filepath.Join(dir, "blobs")) != k {
				t.Errorf("the backup has %d objects, %d files (%d in blobs/), want %d\n%s", m.Objects, m.Files, countFiles(t, filepath.Join(dir, "blobs")), k, log.String())
			}
			if retried := strings.Contains(log.String(), "taking a new snapshot"); retried != tc.retry {
				t.Errorf("the backup took a new snapshot: %v, want %v\n%s", retried, tc.retry, log.String())
			}
			r := newTestNode(t)
			if _, err := RestoreBackup(context.Background(), dir, RestoreOptions{Options: r.opts()}); err != nil {
				t.Fatal(err)
			}
			if got := pidsOf(t, r.cat); got != tc.want {
				t.Errorf("restored %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRestoreRefuses: a damaged catalog file, a backup of bytes into a node
// with an external store, a directory that is neither.
func TestRestoreRefuses(t *testing.T) {
	n := newTestNode(t)
	n.create(t, "a")
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Backup(context.Background(), dir, n.opts()); err != nil {
		t.Fatal(err)
	}
	if _, err := Backup(context.Background(), dir, n.opts()); err == nil {
		t.Error("a backup into a directory that is not empty")
	}
	r := newTestNode(t)
	ext := r.opts()
	ext.Files, ext.Store = "", "bucket"
	if _, err := RestoreBackup(context.Background(), dir, RestoreOptions{Options: ext}); err == nil || !strings.Contains(err.Error(), "store") {
		t.Errorf("a restore of bytes into a node with an external store: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, catalogName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "x")
	f.Close()
	if _, err := RestoreBackup(context.Background(), dir, RestoreOptions{Options: r.opts()}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a restore of a damaged backup: %v", err)
	}
	if empty, _ := r.cat.Empty(context.Background()); !empty {
		t.Error("a refused restore wrote to the catalog")
	}
	if Kind(t.TempDir()) != "" || Kind(dir) != "backup" {
		t.Error("Kind")
	}
}

// TestKeyPathIsTheStoreLayout: keyPath names where fsblobs keeps a key.
func TestKeyPathIsTheStoreLayout(t *testing.T) {
	n := newTestNode(t)
	if _, err := n.blobs.Put(context.Background(), "some/key ü", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(n.dir, "objects", "objects", keyPath("some/key ü"))); err != nil || string(b) != "x" {
		t.Errorf("the store's file is not at keyPath: %v", err)
	}
}

// TestExportRestoreAgain: an export restores into an empty node; again only
// with Force, which skips what is there; a changed object fails alone.
func TestExportRestoreAgain(t *testing.T) {
	n := newTestNode(t)
	for i := range 450 { // more than two batches
		n.create(t, fmt.Sprintf("p%03d", i))
	}
	dir := filepath.Join(t.TempDir(), "e")
	m, err := Export(context.Background(), dir, ExportOptions{Options: n.opts()})
	if err != nil || m.Objects != 450 || m.Files != 450 {
		t.Fatalf("export: %+v %v", m, err)
	}
	r := newTestNode(t)
	s, err := RestoreExport(context.Background(), dir, RestoreOptions{Options: r.opts()})
	if err != nil || s.Objects != 450 {
		t.Fatalf("restore: %+v %v", s, err)
	}
	if got, want := pidsOf(t, r.cat), pidsOf(t, n.cat); got != want {
		t.Errorf("restored %q, want %q", got, want)
	}
	if _, err := RestoreExport(context.Background(), dir, RestoreOptions{Options: r.opts()}); err == nil {
		t.Error("a restore into a catalog that is not empty")
	}
	// p007's bytes are changed: its content id no longer matches.
	rec, err := n.cat.Lookup(context.Background(), "p007")
	if err != nil {
		t.Fatal(err)
	}
	sum := checksumOfFile(t, filepath.Join(n.dir, "objects", "objects", keyPath(rec.BlobKey)))
	if err := os.WriteFile(filepath.Join(dir, "objects", shard(sum)), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	r2 := newTestNode(t)
	s, err = RestoreExport(context.Background(), dir, RestoreOptions{Options: r2.opts()})
	if err == nil || s.Objects != 449 || len(s.Failures) != 1 || !strings.Contains(s.Failures[0], "p007") {
		t.Errorf("restore of a changed export: %+v %v", s, err)
	}
	s, err = RestoreExport(context.Background(), dir, RestoreOptions{Options: r.opts(), Force: true})
	if err == nil || s.Skipped != 449 || s.Objects != 0 {
		t.Errorf("restore with Force into the restored node: %+v %v", s, err)
	}
}

func checksumOfFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestRowCounts: the summaries name tables and their rows for a person; they
// printed a Go map (map[access:6 checksums:0 ...]).
func TestRowCounts(t *testing.T) {
	if got := RowCounts(map[string]int64{"objects": 46, "access": 6, "checksums": 0}); got != "access 6, objects 46" {
		t.Errorf("RowCounts = %q", got)
	}
	if got := RowCounts(nil); got != "no rows" {
		t.Errorf("RowCounts(nil) = %q", got)
	}
}
