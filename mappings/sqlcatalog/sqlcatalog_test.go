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

// withPIDIndexEvery sets how many events past the mark are indexed by PID.
func withPIDIndexEvery(n int) Option { return func(c *config) { c.pidIndexEvery = n } }

// The variants without the cache index the log by PID every 4 events, so
// that the suite's queries by PID find events on both sides of the mark.
func TestSQLiteAcceptanceWithoutCache(t *testing.T) {
	t.Parallel()
	sqlcatalogtest.CatalogAcceptance(t, sqliteOpener(WithCache(0, 0), withPIDIndexEvery(4)))
}

// withSparseIDEvents sets the most events a query by identifier reads by
// their ids; -1 makes every such query scan the log in order.
func withSparseIDEvents(n int) Option { return func(c *config) { c.sparseIDEvents = n } }

// The variants with a tiny cache (SQLite) or a cache (PostgreSQL) read the
// events of an identifier by scanning the log in order, the others by their
// ids (eventpids.go). The tiny one keeps one record decoded, so that its
// lookups are mostly answered by the compact tier of the record cache.
func TestSQLiteAcceptanceTinyCache(t *testing.T) {
	t.Parallel()
	sqlcatalogtest.CatalogAcceptance(t, sqliteOpener(WithCache(2, 3), withSparseIDEvents(-1), WithRecordCache(1)))
}

// TestSQLiteMemory: every connection has the page cache and the memory map
// asked for.
func TestSQLiteMemory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		opts              []Option
		wantCache, wantMM int64
	}{
		{"default", nil, -8192, 2147418112}, // SQLite lowers 2 GiB to its limit
		{"set", []Option{WithSQLiteMemory(64<<20, 256<<20)}, -65536, 256 << 20},
		{"no map", []Option{WithSQLiteMemory(2<<20, 0)}, -2048, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := sqliteOpener(tc.opts...)(t).(*Catalog)
			// Hold several connections at once, so that each answers.
			ctx := t.Context()
			for range 3 {
				conn, err := c.db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				var cache, mm int64
				if err := conn.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
					t.Fatal(err)
				}
				if err := conn.QueryRowContext(ctx, `PRAGMA mmap_size`).Scan(&mm); err != nil {
					t.Fatal(err)
				}
				if cache != tc.wantCache || mm != tc.wantMM {
					t.Errorf("cache_size %d, mmap_size %d; want %d, %d", cache, mm, tc.wantCache, tc.wantMM)
				}
			}
		})
	}
}
