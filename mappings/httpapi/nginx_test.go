package httpapi

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// nginxOptions describe a real nginx (WebDAV methods) as a legacy
// repository: files in dir, described by HEAD, written by PUT and removed by
// DELETE. keyPath is how a key becomes a file's path: {key.blob} for any key
// at all, {key} for a flat directory that can also be listed (nginxList).
func nginxOptions(dir, keyPath string) string {
	return fmt.Sprintf(`
get: {url: "/%[1]s/%[2]s"}
put: {url: "/%[1]s/%[2]s"}
delete: {url: "/%[1]s/%[2]s"}
stat: {method: HEAD, url: "/%[1]s/%[2]s", fields: {size: "header:Content-Length", modified: "header:Last-Modified"}}
`, dir, keyPath)
}

// nginxList lists dir through nginx's JSON autoindex: files only, their
// names the keys.
func nginxList(dir string) string {
	return fmt.Sprintf(`fields: {key: name, size: size, modified: mtime}
list: {url: "/%s/", items: ., where: {type: file}}
`, dir)
}

var dirs atomic.Int64

// TestAcceptanceNginx runs the shared Blobs suite over nginx described as a
// legacy repository, every store in a directory of its own.
func TestAcceptanceNginx(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	mappingtest.Blobs(t, func(t *testing.T) node.Blobs {
		dir := fmt.Sprintf("legacy%d", dirs.Add(1))
		s := open(t, upstreamConfig(t, d.URL, nginxOptions(dir, "{key.blob}")), nil)
		return mappingtest.FilesIn(s, filepath.Join(d.Root, dir))
	})
}

// TestNginxListing harvests a flat nginx directory through its JSON
// autoindex: files only, with their sizes and times, which Stat (HEAD) and
// Get agree with.
func TestNginxListing(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	s := open(t, upstreamConfig(t, d.URL, nginxOptions("flat", "{key}")+nginxList("flat")), nil)
	ctx := t.Context()
	before := time.Now().Add(-time.Second)
	want := map[string]string{"a.csv": "1,2,3\n", "b with space.txt": "hello", "empty": ""}
	for k, v := range want {
		if _, err := s.Put(ctx, k, strings.NewReader(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.Root, "flat", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	page, next, err := s.List(ctx, time.Time{}, "")
	if err != nil || next != "" {
		t.Fatalf("List: next %q, %v", next, err)
	}
	var keys []string
	for _, f := range page {
		keys = append(keys, f.Key)
		if f.Size != int64(len(want[f.Key])) || f.PID != f.Key || f.Modified.Before(before.Truncate(time.Second)) || f.Modified.After(time.Now()) {
			t.Errorf("listed %+v", f)
		}
		st, err := s.Stat(ctx, f.Key)
		if err != nil || st.Key != f.Key || st.Size != f.Size || !st.Modified.Equal(f.Modified) {
			t.Errorf("Stat(%q) = %+v, %v; listed %+v", f.Key, st, err, f)
		}
		r, err := s.Get(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(r); err != nil || string(b) != want[f.Key] {
			t.Errorf("Get(%q) = %q, %v", f.Key, b, err)
		}
		r.Close()
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a.csv", "b with space.txt", "empty"}) {
		t.Errorf("listed %q", keys)
	}
	if _, err := s.Stat(ctx, "missing"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Stat of a missing file: %v", err)
	}
	if _, err := s.Get(ctx, ".."); !adapter.IsKind(err, adapter.InvalidRequest) {
		t.Errorf(`Get("..") in a flat layout: %v`, err)
	}
}
