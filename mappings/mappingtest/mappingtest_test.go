package mappingtest_test

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// inspected is an fsblobs store whose files the suite can list.
type inspected struct {
	*fsblobs.Store
	dir string
}

// Stored lists every file under the store's directory, temporary ones included.
func (s inspected) Stored(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestFSBlobs(t *testing.T) {
	t.Parallel()
	mappingtest.Blobs(t, func(t *testing.T) node.Blobs {
		dir := t.TempDir()
		s, err := fsblobs.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return inspected{s, dir}
	})
}
