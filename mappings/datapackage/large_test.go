package datapackage

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestLargeResourceMapReadable: ResourceMap writes a package of any
// size, but Aggregated (which the harvest's next version, withdrawal and
// getPackage read a map with) stopped at 64 MiB: a dataset of some 100,000
// files (the harvest reads BagIt manifests of "about 500,000 files") got a
// map of more than 64 MiB, registered and then unreadable by the node that
// wrote it. Only another node's maps are bounded (MaxForeignResourceMap).
func TestLargeResourceMapReadable(t *testing.T) {
	t.Parallel()
	const n = 110_000
	pids := make([]string, n)
	for i := range pids {
		pids[i] = fmt.Sprintf("repo:survey-2024@v1/data/images/IMG_%06d.tif", i)
	}
	body := ResourceMap("resource_map_repo:survey-2024@v1", "repo:survey-2024@v1", pids, time.Time{})
	t.Logf("resource map of %d data objects: %d bytes", n, len(body))
	got, err := Aggregated(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the node cannot read the resource map it wrote (%d bytes): %v", len(body), err)
	}
	if len(got) != n+1 {
		t.Fatalf("aggregated %d, want %d", len(got), n+1)
	}
}
