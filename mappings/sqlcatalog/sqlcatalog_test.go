package sqlcatalog

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// sqliteOpener opens a catalog in a temporary directory of its own per test,
// the same one again when called again for the same test.
func sqliteOpener(opts ...Option) func(t *testing.T) node.Catalog {
	var mu sync.Mutex
	dirs := map[*testing.T]string{}
	return func(t *testing.T) node.Catalog {
		mu.Lock()
		dir, ok := dirs[t]
		if !ok {
			dir = t.TempDir()
			dirs[t] = dir
		}
		mu.Unlock()
		c, err := OpenSQLite(filepath.Join(dir, "catalog.db"), append([]Option{WithNodeID(sqlcatalogtest.NodeID)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func TestSQLiteAcceptance(t *testing.T) {
	t.Parallel()
	sqlcatalogtest.CatalogAcceptance(t, sqliteOpener())
}

func TestSQLiteAcceptanceWithoutCache(t *testing.T) {
	t.Parallel()
	sqlcatalogtest.CatalogAcceptance(t, sqliteOpener(WithCache(0, 0)))
}

func TestSQLiteAcceptanceTinyCache(t *testing.T) {
	t.Parallel()
	sqlcatalogtest.CatalogAcceptance(t, sqliteOpener(WithCache(2, 3)))
}
