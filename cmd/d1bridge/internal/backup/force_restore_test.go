package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestForceRestoreRepairsStore: a --force restore of a good backup into the
// node it was taken from, one of whose store files has since been replaced by
// damaged bytes, puts the backup's bytes back. The restore used to keep any
// file already in the store, so it kept the damaged one and failed its
// verification, every time.
func TestForceRestoreRepairsStore(t *testing.T) {
	ctx := context.Background()
	n := newTestNode(t)
	for _, pid := range []string{"a", "b"} {
		n.create(t, pid)
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Backup(ctx, dir, n.opts()); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(n.dir, "objects", "objects", keyPath("key-b"))
	if err := writeFile(live, bytes.NewReader([]byte("damaged"))); err != nil {
		t.Fatal(err)
	}
	good := sha256.Sum256([]byte("the bytes of b"))
	if _, err := checkFile(filepath.Join(dir, "blobs", keyPath("key-b")),
		adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(good[:])}, 14, "the backup"); err != nil {
		t.Fatalf("the backup itself is damaged: %v", err)
	}
	s, err := RestoreBackup(ctx, dir, RestoreOptions{Options: n.opts(), Force: true})
	if err != nil {
		t.Errorf("restore --force of a good backup: %v (%+v)", err, s)
	}
}
