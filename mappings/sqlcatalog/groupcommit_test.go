package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

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

// TestGroupSavepointLost: when a write of a group ends the transaction (as
// SQLite does on a full disk), the writes after it fail; none is acknowledged
// without its row.
func TestGroupSavepointLost(t *testing.T) {
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	first := &pendingWrite{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) (*change, error) {
		if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
			return nil, err
		}
		return nil, errors.New("the disk is full")
	}}
	second := &pendingWrite{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) (*change, error) {
		return c.insertTx(ctx, tx, dumpRecord("after-the-loss"))
	}}
	c.wmu.Lock()
	c.commitGroup(c.db, "", []*pendingWrite{first, second})
	c.wmu.Unlock()
	if second.err == nil {
		t.Error("the write after the lost transaction is acknowledged")
	}
	if rec, _ := c.Lookup(ctx, "after-the-loss"); rec != nil {
		t.Error("the write after the lost transaction is stored")
	}
}

// TestCreatedThenChangedInOneCommit: an object created and changed by the
// same commit (a batch that obsoletes or archives what it creates, or a group
// with a create and a delete of one PID) is read back as the commit left it,
// not as it was created.
func TestCreatedThenChangedInOneCommit(t *testing.T) {
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	b := dumpRecord("B")
	b.Meta.Obsoletes = "A"
	if _, err := c.Apply(ctx, &node.Batch{Records: []*node.Record{dumpRecord("A"), b, dumpRecord("C")}, Archive: []string{"C"}}); err != nil {
		t.Fatal(err)
	}
	if rec, err := c.Lookup(ctx, "A"); err != nil || rec.Meta.ObsoletedBy != "B" || rec.Meta.SerialVersion != 2 {
		t.Errorf("A: %+v %v, want obsoleted by B at serial version 2", rec, err)
	}
	if rec, err := c.Lookup(ctx, "C"); err != nil || !rec.Meta.Archived {
		t.Errorf("C: %+v %v, want archived", rec, err)
	}
	create := &pendingWrite{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) (*change, error) {
		return c.insertTx(ctx, tx, dumpRecord("G"))
	}}
	del := &pendingWrite{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) (*change, error) {
		ch, _, err := c.deleteTx(ctx, tx, "G")
		return ch, err
	}}
	c.wmu.Lock()
	c.commitGroup(c.db, "", []*pendingWrite{create, del})
	c.wmu.Unlock()
	if create.err != nil || del.err != nil {
		t.Fatalf("create %v, delete %v", create.err, del.err)
	}
	if rec, _ := c.Lookup(ctx, "G"); rec != nil {
		t.Errorf("G, created and deleted in one commit, is found: %+v", rec.Meta)
	}
}

// TestGroupRollbackKeepsNewest: a write of a group that dated a row after the
// newest (orderDate raised the cached newest date) and then failed, its
// savepoint undone, must not keep a later write of the group that deletes
// the newest row from keeping that row's date: a harvester may have listed
// up to it, and a write dated before it must still come after it.
func TestGroupRollbackKeepsNewest(t *testing.T) {
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int) adapter.Time { return adapter.NewTime(base.Add(time.Duration(min) * time.Minute)) }
	insert := func(pid string, min int) {
		t.Helper()
		rec := dumpRecord(pid)
		rec.Meta.DateSysMetadataModified = at(min)
		must(t, c.Insert(ctx, rec))
	}
	insert("old", 10)
	insert("newest", 20) // a harvester lists up to 20

	// One group: a write dated 60 that fails after orderDate (its savepoint
	// undone), then the delete of the newest row.
	failed := &pendingWrite{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) (*change, error) {
		rec := dumpRecord("never")
		rec.Meta.DateSysMetadataModified = at(60)
		if _, err := c.insertTx(ctx, tx, rec); err != nil {
			return nil, err
		}
		return nil, errors.New("a later step of the write failed")
	}}
	del := &pendingWrite{ctx: ctx, fn: func(ctx context.Context, tx *sql.Tx) (*change, error) {
		ch, _, err := c.deleteTx(ctx, tx, "newest")
		return ch, err
	}}
	c.wmu.Lock()
	c.commitGroup(c.db, "", []*pendingWrite{failed, del})
	c.wmu.Unlock()
	if failed.err == nil || del.err != nil {
		t.Fatalf("the failed write: %v; the delete: %v", failed.err, del.err)
	}
	if rec, _ := c.Lookup(ctx, "never"); rec != nil {
		t.Fatal("the failed write is stored")
	}

	insert("late", 15) // dated before the deleted newest row
	rec, err := c.Lookup(ctx, "late")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Meta.DateSysMetadataModified.Time; got.Before(at(20).Time) {
		t.Errorf("a write after the newest row (20) was deleted is dated %s, before it: a harvester that listed up to 20 misses it", got.Sub(base))
	}
}
