package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// TestWalkListWhileObjectsChange: a walk over the catalog's list visits every
// object though objects it has passed change meanwhile (and move to the end
// of the list), which paging by offset would answer by skipping the object
// pushed back into the page already read; and one date holding more objects
// than a page is walked through once.
func TestWalkListWhileObjectsChange(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cat := openCatalog(t, t.TempDir())
	t.Cleanup(func() { cat.Close() })
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []string
	for i := range 10 {
		pid := fmt.Sprintf("walk-%02d", i)
		all = append(all, pid)
		if err := cat.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM(pid, adapter.NewTime(base.Add(time.Duration(i)*time.Second))), BlobKey: pid}); err != nil {
			t.Fatal(err)
		}
	}
	var visited []string
	err := node.WalkList(ctx, cat, adapter.ListQuery{}, 3, func(oi adapter.ObjectInfo) error {
		visited = append(visited, oi.Identifier)
		if len(visited) <= 3 { // each of the first page changes, and moves to the end
			_, err := cat.Modify(ctx, oi.Identifier, func(sm *adapter.SystemMetadata) error {
				sm.SerialVersion++
				return nil
			})
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range all {
		if !slices.Contains(visited, pid) {
			t.Errorf("%s was not visited: %v", pid, visited)
		}
	}

	same := adapter.NewTime(base.Add(time.Hour))
	for i := range 7 {
		pid := fmt.Sprintf("same-%02d", i)
		if err := cat.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM(pid, same), BlobKey: pid}); err != nil {
			t.Fatal(err)
		}
	}
	visited = nil
	err = node.WalkList(ctx, cat, adapter.ListQuery{FromDate: same}, 3, func(oi adapter.ObjectInfo) error {
		visited = append(visited, oi.Identifier)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(visited) != 7 || len(slices.Compact(slices.Sorted(slices.Values(visited)))) != 7 {
		t.Errorf("the 7 objects of one date, 3 a page: visited %v", visited)
	}
}
