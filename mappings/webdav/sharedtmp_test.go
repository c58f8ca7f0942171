package webdav

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestSweepSparesTheCollectionsOwnTmp: a collection the store shares (holdings
// default to the prefix) keeps its own tmp/ folder: the store's temporary
// collection was named tmp, so the first Put deleted the folder's files older
// than a day, and List never showed them (real nginx).
func TestSweepSparesTheCollectionsOwnTmp(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	old := time.Now().Add(-48 * time.Hour)
	for _, p := range []string{"repo/data/a.csv", "repo/tmp/survey-2019.csv"} {
		f := filepath.Join(d.Root, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(f), 0o755)
		os.WriteFile(f, []byte("bytes of "+p), 0o644)
		os.Chtimes(f, old, old)
	}
	s := open(t, upstreamConfig(t, d.URL, "prefix: repo\n"), nil)
	page, _, err := s.List(t.Context(), time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range page {
		keys = append(keys, f.Key)
	}
	if !strings.Contains(strings.Join(keys, " "), "/tmp/survey-2019.csv") {
		t.Errorf("List of the collection shows %q, not its file tmp/survey-2019.csv", keys)
	}
	if _, err := s.Put(t.Context(), "8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Root, "repo", "tmp", "survey-2019.csv")); err != nil {
		t.Errorf("the collection's file tmp/survey-2019.csv is gone after the node's first Put: %v", err)
	}
}
