package webdav

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestGetOfACollectionIsNotFound: Get of a holding that is a collection is
// NotFound, as Stat says, and a file in it still reads. Get used to follow
// nginx's 301 from /data to /data/ and return the collection's autoindex
// listing as the object's bytes (real nginx).
func TestGetOfACollectionIsNotFound(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	os.MkdirAll(filepath.Join(d.Root, "repo", "data"), 0o755)
	os.WriteFile(filepath.Join(d.Root, "repo", "data", "a.csv"), []byte("1,2,3\n"), 0o644)
	s := open(t, upstreamConfig(t, d.URL, "prefix: repo\n"), nil)
	if _, err := s.Stat(t.Context(), "/data"); !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("Stat(/data): %v", err)
	}
	r, err := s.Get(t.Context(), "/data")
	if err == nil {
		b, _ := io.ReadAll(r)
		r.Close()
		t.Errorf("Get(/data) of a collection returned %d bytes: %q", len(b), b)
	} else if !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get(/data): %v, want NotFound", err)
	}
	r, err = s.Get(t.Context(), "/data/a.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "1,2,3\n" {
		t.Errorf("Get(/data/a.csv): %q, %v", b, err)
	}
}
