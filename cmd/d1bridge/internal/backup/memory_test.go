package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// heapAtWalkEnd is a Log writer that records the live heap at the line the
// backup prints once it has walked every object of the snapshot.
type heapAtWalkEnd struct {
	bytes.Buffer
	live uint64
}

func (h *heapAtWalkEnd) Write(p []byte) (int, error) {
	if strings.HasPrefix(string(p), "backup: bytes:") {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.live = ms.HeapAlloc
	}
	return h.Buffer.Write(p)
}

// TestBackupMemoryDoesNotGrowWithCatalog: the heap a backup holds while it
// walks the snapshot does not grow with the number of objects. It held the
// path of every object (about 120 B each, 1.2 GB for 10 million objects) to
// remove, at the end, the files the snapshot did not name.
func TestBackupMemoryDoesNotGrowWithCatalog(t *testing.T) {
	ctx := context.Background()
	held := func(objects int) int64 {
		n := newTestNode(t)
		data := []byte("x")
		sum := sha256.Sum256(data)
		b := &node.Batch{}
		for i := range objects {
			key := fmt.Sprintf("key-%d", i)
			p := filepath.Join(n.dir, "objects", "objects", keyPath(key))
			if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o640); err != nil {
				t.Fatal(err)
			}
			b.Records = append(b.Records, &node.Record{BlobKey: key, Meta: &adapter.SystemMetadata{
				Identifier: fmt.Sprintf("pid-%d", i), FormatID: "text/plain", Size: 1, SerialVersion: 1, RightsHolder: "CN=o",
				Checksum:     adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])},
				DateUploaded: adapter.Now(), DateSysMetadataModified: adapter.Now()}})
			if len(b.Records) == 1000 || i == objects-1 {
				if _, err := n.cat.Apply(ctx, b); err != nil {
					t.Fatal(err)
				}
				b.Records = nil
			}
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		log := &heapAtWalkEnd{}
		o := n.opts()
		o.Log, o.Verify = log, false
		if _, err := Backup(ctx, filepath.Join(t.TempDir(), "b"), o); err != nil {
			t.Fatal(err)
		}
		return int64(log.live) - int64(before)
	}
	small, large := held(1000), held(11000)
	perObject := float64(large-small) / 10000
	t.Logf("heap held at the end of the walk: %d B with 1,000 objects, %d B with 11,000: %.0f B per object", small, large, perObject)
	if perObject > 16 {
		t.Errorf("a backup holds %.0f bytes of heap per object of the catalog (%.1f GB for 10 million objects)", perObject, perObject*1e7/1e9)
	}
}
