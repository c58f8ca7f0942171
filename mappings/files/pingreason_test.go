package files

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestPingHidesLocalPath: a failed Ping's description is the upstream's
// "error" in the public monitor/status document and on the status page; it
// named the server's directory. The failure is made by closing the tree's
// root (in production: a permission change, NFS ESTALE, EIO).
func TestPingHidesLocalPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "srv-private-archive")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	err = tr.Ping(context.Background())
	if err == nil {
		t.Fatal("Ping of a closed root succeeded")
	}
	if d := adapter.AsException(err).Description; strings.Contains(d, dir) {
		t.Fatalf("the public description names the local directory: %q", d)
	}
}
