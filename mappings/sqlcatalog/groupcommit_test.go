package sqlcatalog

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// TestGroupCommit: concurrent creates on SQLite share commits, and a write
// that fails in a group (a duplicate identifier, an obsoleted object that does
// not exist, a batch whose second record fails after its first was written)
// leaves no trace, not even its event, while the others of its group are
// stored and logged.
func TestGroupCommit(t *testing.T) {
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const writers = 48
	errs := make([]error, writers)
	pids := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		rec := dumpRecord(fmt.Sprintf("group-%02d", i))
		switch i % 8 {
		case 3:
			rec = dumpRecord("group-duplicate")
		case 5:
			rec.Meta.Obsoletes = "no-such-object"
		}
		pids[i] = rec.Meta.Identifier
		ctx := node.WithEvents(t.Context(), adapter.LogEntry{Identifier: pids[i], Event: adapter.EventCreate,
			IPAddress: "127.0.0.1", UserAgent: "t", Subject: "CN=owner"})
		if i%8 == 6 {
			bad := dumpRecord(rec.Meta.Identifier + "-second")
			bad.Meta.Obsoletes = "no-such-object"
			wg.Go(func() {
				_, errs[i] = c.Apply(ctx, &node.Batch{Records: []*node.Record{rec, bad}})
			})
			continue
		}
		wg.Go(func() { errs[i] = c.Insert(ctx, rec) })
	}
	commits := c.commits.Load()
	wg.Wait()
	commits = c.commits.Load() - commits

	stored, duplicates := 0, 0
	for i, err := range errs {
		switch {
		case i%8 == 5 || i%8 == 6:
			if !adapter.IsKind(err, adapter.NotFound) {
				t.Errorf("%s (or the batch it is in) obsoletes a missing object: %v, want NotFound", pids[i], err)
			}
			if rec, _ := c.Lookup(t.Context(), pids[i]); rec != nil {
				t.Errorf("%s failed but is stored", pids[i])
			}
		case i%8 == 3 && err != nil:
			if !adapter.IsKind(err, adapter.IdentifierNotUnique) {
				t.Errorf("duplicate create: %v, want IdentifierNotUnique", err)
			}
			duplicates++
		case err != nil:
			t.Errorf("%s: %v", pids[i], err)
		default:
			stored++
			if rec, err := c.Lookup(t.Context(), pids[i]); rec == nil || err != nil {
				t.Errorf("%s was acknowledged but is not stored: %v", pids[i], err)
			}
		}
	}
	if want := writers - 3*writers/8 + 1; stored != want || duplicates != writers/8-1 {
		t.Errorf("%d stored and %d refused as duplicates, want %d and %d", stored, duplicates, want, writers/8-1)
	}
	l, err := c.Events(t.Context(), adapter.LogQuery{Count: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != stored {
		t.Errorf("%d events logged for %d stored objects", l.Total, stored)
	}
	for _, e := range l.LogEntry {
		if rec, _ := c.Lookup(t.Context(), e.Identifier); rec == nil {
			t.Errorf("an event of %s, which is not stored", e.Identifier)
		}
	}
	if commits >= writers {
		t.Errorf("%d concurrent writes took %d commits: none shared", writers, commits)
	}
	t.Logf("%d writes, %d commits", writers, commits)
}
