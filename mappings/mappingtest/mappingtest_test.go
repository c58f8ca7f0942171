package mappingtest_test

import (
	"testing"

	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/node"
)

func TestFSBlobs(t *testing.T) {
	t.Parallel()
	mappingtest.Blobs(t, func(t *testing.T) node.Blobs {
		dir := t.TempDir()
		s, err := fsblobs.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return mappingtest.FilesIn(s, dir)
	})
}
