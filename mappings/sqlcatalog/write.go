package sqlcatalog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// querier is what reads need of a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// writeFn is one write's work in a transaction: what it changed, or why it
// did nothing. Its ctx carries the caller's values (events, the request's
// memo); in a group, it does not end with the caller (commitGroup).
type writeFn func(ctx context.Context, tx *sql.Tx) (*change, error)

// pendingWrite is a write waiting for its group's commit.
type pendingWrite struct {
	ctx  context.Context
	fn   writeFn
	err  error
	done bool // under wmu
}

// maxGroup bounds the writes one commit carries.
const maxGroup = 64

// write runs fn in a write transaction and tells the cache what it changed.
//
// On SQLite the writes that come while a commit is under way share the next
// one (group commit): the first to take wmu commits every write queued, each
// in a savepoint of its own, so that one write's failure undoes only its own
// work. A commit waits for the disk; sharing it is what lets concurrent
// creates go faster than one fsync each. On PostgreSQL every write commits
// alone: the writes of all the instances take one lock in turn (commitGroup),
// which a group would hold for the work of all its writes.
func (c *Catalog) write(ctx context.Context, fn writeFn) error {
	adapter.MemoOf(ctx).Clear() // and again once committed
	defer adapter.MemoOf(ctx).Clear()
	w := &pendingWrite{ctx: ctx, fn: fn}
	if !c.d.groupCommit || c.commitAlone {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		c.commitGroup(c.db, "", []*pendingWrite{w})
		return c.outcome(w.err)
	}
	c.wqmu.Lock()
	c.wq = append(c.wq, w)
	c.wqmu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for !w.done {
		c.wqmu.Lock()
		n := min(len(c.wq), maxGroup)
		group := slices.Clone(c.wq[:n])
		c.wq = slices.Delete(c.wq, 0, n)
		c.wqmu.Unlock()
		c.commitGroup(c.db, "", group)
	}
	return c.outcome(w.err)
}

// outcome is a write's error as the node answers it: a full disk is
// InsufficientResources (the client may try again later), not a failure.
func (c *Catalog) outcome(err error) error {
	if err != nil && !adapter.IsKind(err, adapter.InsufficientResources) && c.d.isFull(err) {
		return adapter.Wrap(adapter.InsufficientResources, err, "the node's catalog has no space left on its disk")
	}
	return err
}

// writeOn runs fn alone in a transaction on db, first the statement first (if
// any).
func (c *Catalog) writeOn(ctx context.Context, db *sql.DB, first string, fn writeFn) error {
	adapter.MemoOf(ctx).Clear()
	defer adapter.MemoOf(ctx).Clear()
	w := &pendingWrite{ctx: ctx, fn: fn}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.commitGroup(db, first, []*pendingWrite{w})
	return c.outcome(w.err)
}

// commitGroup runs the writes of group in one transaction on db and commits
// it, setting each write's outcome; wmu is held. A write alone runs under its
// caller's context. In a group, a write whose caller has gone by its turn
// fails without running, and once begun it runs to the commit whatever its
// caller does: an interrupted statement may roll back the whole transaction
// (SQLite), and so the other writes of the group.
func (c *Catalog) commitGroup(db *sql.DB, first string, group []*pendingWrite) {
	detach := func(ctx context.Context) context.Context {
		if len(group) == 1 {
			return ctx
		}
		return context.WithoutCancel(ctx)
	}
	var ran []*pendingWrite // the writes that did their work, to commit
	defer func() {
		for _, w := range group {
			w.done = true
		}
	}()
	// fail fails the writes that ran and those not yet run; a write that
	// failed by itself keeps its own error.
	fail := func(err error) {
		for _, w := range group {
			if w.err == nil {
				w.err = err
			}
		}
	}
	ctx := detach(group[0].ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		for _, w := range group {
			w.err = fmt.Errorf("sqlcatalog: %w", err)
		}
		return
	}
	c.newestRead = false
	// On PostgreSQL the log's lock comes first: other instances' writes then
	// commit before this one dates its rows or after it has committed
	// (orderDate), and no write takes it after locks another may hold.
	for _, q := range []string{first, c.d.logLock} {
		if q == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			tx.Rollback()
			for _, w := range group {
				w.err = fmt.Errorf("sqlcatalog: %w", err)
			}
			return
		}
	}
	savepoints := len(group) > 1
	var all change
	for _, w := range group {
		if w.err = w.ctx.Err(); w.err != nil {
			continue
		}
		wctx := detach(w.ctx)
		if savepoints {
			if _, err := tx.ExecContext(wctx, "SAVEPOINT grouped"); err != nil {
				tx.Rollback()
				w.err = fmt.Errorf("sqlcatalog: %w", err)
				fail(w.err)
				return
			}
		}
		ch, err := w.fn(wctx, tx)
		w.err = err
		if savepoints {
			if err := endSavepoint(wctx, tx, w.err == nil); err != nil {
				tx.Rollback()
				w.err = fmt.Errorf("sqlcatalog: %w", err)
				fail(w.err)
				return
			}
		}
		if w.err != nil {
			// Its savepoint undone, the rows and the kept date it wrote
			// are gone, but not what it left in c.newest: a date it gave a
			// row that is no more would make keepNewest pass over the
			// newest row a later write deletes. Read it again.
			c.newestRead = false
			continue
		}
		all.merge(ch)
		all.logged = append(all.logged, node.EventsOf(w.ctx)...)
		ran = append(ran, w)
	}
	if len(ran) == 0 {
		tx.Rollback()
		return
	}
	if err := c.updateBlocks(ctx, tx, &all); err != nil {
		tx.Rollback()
		fail(err)
		return
	}
	if err := c.logChange(ctx, tx, &all); err != nil {
		tx.Rollback()
		fail(err)
		return
	}
	seq := c.cache.begin(&all)
	err = tx.Commit()
	c.commits.Add(1)
	pids := all.pids()
	c.recs.forget(pids...) // committed or maybe not: either way, read again
	if err == nil && !c.d.changeLog {
		// New objects are often read soon (the CN's synchronization asks
		// for their system metadata). Under wmu, no later write's forget can
		// come first; with other instances writing (changeLog), one might.
		c.recs.keepCreated(unchanged(all.created, pids))
	}
	// A failed commit may or may not have happened (the connection broke): the
	// cache then forgets everything.
	c.cache.end(seq, &all, err == nil, err != nil)
	if err != nil {
		fail(fmt.Errorf("sqlcatalog: commit: %w", err))
	}
}

// orderDate keeps the list's order that of the commits (node.Catalog): sm,
// about to be written with a new dateSysMetadataModified, takes the newest
// date of the catalog when its own is older. Its caller dated it before
// waiting for wmu (SQLite) or the log's lock (PostgreSQL), under which every
// other write has committed or waits for this one, so a harvester that has
// listed up to the newest date lists this write too. The date also comes
// after the one the row had (after, in milliseconds): a change that kept
// its row's date would pass updateSystemMetadata's check of a stale copy.
// ctx WithGivenDates: sm keeps its date.
func (c *Catalog) orderDate(ctx context.Context, tx *sql.Tx, sm *adapter.SystemMetadata, after int64) error {
	if node.GivenDates(ctx) {
		return nil
	}
	if err := c.readNewest(ctx, tx); err != nil {
		return err
	}
	given := millis(sm.DateSysMetadataModified)
	d := max(given, c.newest)
	if d <= after {
		d = after + 1
	}
	if d != given {
		sm.DateSysMetadataModified = fromMillis(d)
	}
	c.newest = d
	return nil
}

// readNewest reads the newest date of the catalog once per write group: the
// newest row's, or the one kept when a newer row went (keepNewest).
func (c *Catalog) readNewest(ctx context.Context, tx *sql.Tx) error {
	if c.newestRead {
		return nil
	}
	var rows, kept int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT MAX(date_modified) FROM objects), 0),
		COALESCE((SELECT MAX(at) FROM newest_date), 0)`).Scan(&rows, &kept); err != nil {
		return fmt.Errorf("sqlcatalog: reading the newest date: %w", err)
	}
	c.newest, c.newestRead = max(rows, kept), true
	return nil
}

// keepNewest keeps the date t of a row about to be deleted or given an older
// date (WithGivenDates), when it may be the newest: a harvester may have
// listed up to it, and later writes must still come after it (orderDate).
func (c *Catalog) keepNewest(ctx context.Context, tx *sql.Tx, t int64) error {
	if err := c.readNewest(ctx, tx); err != nil {
		return err
	}
	if t < c.newest {
		return nil // an older row: the newest date stays where it is
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO newest_date (one, at) VALUES (1, ?)
		ON CONFLICT (one) DO UPDATE SET at = excluded.at`), t); err != nil {
		return fmt.Errorf("sqlcatalog: keeping the newest date: %w", err)
	}
	c.newest = t
	return nil
}

// unchanged are the created rows that no other change of the commit (pids,
// the created rows' own among them) touched: a row the same commit modified,
// obsoleted or deleted after creating it would be kept as it was created.
func unchanged(created []*stored, pids []string) []*stored {
	if len(created) == 0 {
		return nil
	}
	n := make(map[string]int, len(pids))
	for _, pid := range pids {
		n[pid]++
	}
	return slices.DeleteFunc(slices.Clone(created), func(s *stored) bool { return n[s.meta.Identifier] > 1 })
}

// endSavepoint keeps (releases) or undoes the savepoint of one write of a
// group.
func endSavepoint(ctx context.Context, tx *sql.Tx, keep bool) error {
	if !keep {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT grouped"); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT grouped")
	return err
}

// Insert adds rec with its chain, enforcing the PID, SID and chain rules of
// node.Catalog.
func (c *Catalog) Insert(ctx context.Context, rec *node.Record) error {
	return c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) { return c.insertTx(ctx, tx, rec) })
}

// insertTx is Insert inside tx.
func (c *Catalog) insertTx(ctx context.Context, tx *sql.Tx, rec *node.Record) (*change, error) {
	if rec == nil || rec.Meta == nil {
		return nil, errors.New("sqlcatalog: Insert of a record without system metadata")
	}
	sm := rec.Meta.Clone()
	pid, sid := sm.Identifier, sm.SeriesID
	if pid == "" {
		return nil, adapter.Errorf(adapter.InvalidSystemMetadata, "the system metadata has no identifier")
	}
	var ch change
	if err := c.checkNewPID(ctx, tx, pid); err != nil {
		return nil, err
	}
	if rec.Replica {
		return c.insertReplica(ctx, tx, rec, sm)
	}
	var old *stored
	if sm.Obsoletes != "" {
		var err error
		if old, err = c.loadPID(ctx, tx, sm.Obsoletes, c.d.forUpdate); err != nil {
			return nil, err
		}
		if old == nil {
			return nil, adapter.Errorf(adapter.NotFound, "the object %q that %q obsoletes does not exist", sm.Obsoletes, pid).WithPID(sm.Obsoletes)
		}
		switch {
		case old.meta.Archived:
			return nil, adapter.Errorf(adapter.InvalidRequest, "the object %q is archived and cannot be obsoleted", sm.Obsoletes).WithPID(sm.Obsoletes)
		case old.meta.ObsoletedBy != "":
			return nil, adapter.Errorf(adapter.InvalidRequest, "the object %q is already obsoleted by %q; a chain cannot branch", sm.Obsoletes, old.meta.ObsoletedBy).WithPID(sm.Obsoletes)
		}
	}
	if sid != "" {
		var oldSID string
		if old != nil {
			oldSID = old.meta.SeriesID
		}
		if err := c.checkSID(ctx, tx, pid, sid, oldSID); err != nil {
			return nil, err
		}
	}
	after := int64(math.MinInt64)
	if old != nil {
		after = millis(old.meta.DateSysMetadataModified)
	}
	if err := c.orderDate(ctx, tx, sm, after); err != nil {
		return nil, err
	}
	rec.Meta.DateSysMetadataModified = sm.DateSysMetadataModified // as stored
	if old != nil {
		before := old.info()
		old.meta.ObsoletedBy = pid
		old.meta.DateSysMetadataModified = sm.DateSysMetadataModified
		old.meta.SerialVersion++
		if err := c.updateRow(ctx, tx, old); err != nil {
			return nil, err
		}
		ch.rows = append(ch.rows, rowChange{before: before, after: old.info()})
	}
	s := &stored{meta: sm, blobKey: rec.BlobKey, sums: rec.Checksums}
	if err := c.insertRow(ctx, tx, s); err != nil {
		return nil, err
	}
	ch.rows = append(ch.rows, rowChange{after: s.info()})
	ch.created = append(ch.created, s)
	return &ch, nil
}

// insertReplica stores a replica's record as the coordinating node gave it:
// its chain and series are the origin's, and other members may or may not be
// here, so they are neither checked nor changed.
func (c *Catalog) insertReplica(ctx context.Context, tx *sql.Tx, rec *node.Record, sm *adapter.SystemMetadata) (*change, error) {
	pid, sid := sm.Identifier, sm.SeriesID
	if sid != "" {
		if sid == pid {
			return nil, adapter.Errorf(adapter.IdentifierNotUnique, "the series id %q is the object's own identifier; it must differ", sid).WithPID(pid)
		}
		var n int
		if err := tx.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*) FROM objects WHERE pid = ?`), sid).Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlcatalog: %w", err)
		}
		if n > 0 {
			return nil, adapter.Errorf(adapter.IdentifierNotUnique, "series id %q is already in use as an identifier", sid).WithPID(pid)
		}
	}
	s := &stored{meta: sm, blobKey: rec.BlobKey, sums: rec.Checksums}
	if err := c.insertRow(ctx, tx, s); err != nil {
		return nil, err
	}
	return &change{rows: []rowChange{{after: s.info()}}}, nil
}

// HoldsBlob reports whether a record holds the bytes under key.
func (c *Catalog) HoldsBlob(ctx context.Context, key string) (bool, error) {
	var n int
	err := c.db.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*) FROM objects WHERE blob_key = ?`), key).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sqlcatalog: %w", err)
	}
	return n > 0, nil
}

// checkNewPID fails unless pid is unused as a PID and as a SID.
func (c *Catalog) checkNewPID(ctx context.Context, q querier, pid string) error {
	var p string
	var s sql.NullString
	err := q.QueryRowContext(ctx, c.d.q(`SELECT pid, sid FROM objects WHERE pid = ? OR sid = ? LIMIT 1`), pid, pid).Scan(&p, &s)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("sqlcatalog: %w", err)
	case p == pid:
		return adapter.Errorf(adapter.IdentifierNotUnique, "identifier %q is already in use", pid).WithPID(pid)
	}
	return adapter.Errorf(adapter.IdentifierNotUnique, "identifier %q is already in use as a series id", pid).WithPID(pid)
}

// checkSID fails unless the object pid may carry series id sid: sid is not a
// PID, and is either unused or the series of the object pid obsoletes or is
// obsoleted by (neighbour, its series id; "" for none).
func (c *Catalog) checkSID(ctx context.Context, q querier, pid, sid, neighbour string) error {
	if sid == pid {
		return adapter.Errorf(adapter.IdentifierNotUnique, "the series id %q is the object's own identifier; it must differ", sid).WithPID(pid)
	}
	var n int
	if err := q.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*) FROM objects WHERE pid = ?`), sid).Scan(&n); err != nil {
		return fmt.Errorf("sqlcatalog: %w", err)
	}
	if n > 0 {
		return adapter.Errorf(adapter.IdentifierNotUnique, "series id %q is already in use as an identifier", sid).WithPID(pid)
	}
	if sid == neighbour {
		return nil
	}
	var other string
	err := q.QueryRowContext(ctx, c.d.q(`SELECT pid FROM objects WHERE sid = ? AND pid <> ? LIMIT 1`), sid, pid).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("sqlcatalog: %w", err)
	}
	return adapter.Errorf(adapter.IdentifierNotUnique, "series id %q is already in use by %q, which %q does not obsolete", sid, other, pid).WithPID(pid)
}

// Modify runs fn on the stored system metadata of id (a PID, or a SID for the
// head of its series) and stores what it leaves, in one transaction.
func (c *Catalog) Modify(ctx context.Context, id string, fn func(sm *adapter.SystemMetadata) error) (*adapter.SystemMetadata, error) {
	var out *adapter.SystemMetadata
	err := c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		ch, sm, err := c.modifyTx(ctx, tx, id, fn)
		out = sm
		return ch, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// modifyTx is Modify inside tx; it returns a copy of what it stored.
func (c *Catalog) modifyTx(ctx context.Context, tx *sql.Tx, id string, fn func(sm *adapter.SystemMetadata) error) (*change, *adapter.SystemMetadata, error) {
	var out *adapter.SystemMetadata
	ch, err := func() (*change, error) {
		s, err := c.resolve(ctx, tx, id, c.d.forUpdate)
		if err != nil {
			return nil, err
		}
		before := s.info()
		oldSID, oldSerial := s.meta.SeriesID, s.meta.SerialVersion
		if err := fn(s.meta); err != nil {
			return nil, err
		}
		sm := s.meta
		if sm.Identifier != before.pid {
			return nil, adapter.Errorf(adapter.InvalidSystemMetadata, "the identifier of %q cannot change (to %q)", before.pid, sm.Identifier).WithPID(before.pid)
		}
		// A new serial version is a change of system metadata, which takes a
		// new date even when its caller dated it in the stored date's
		// millisecond: updateSystemMetadata's check and a harvester's fromDate
		// must see it.
		if millis(sm.DateSysMetadataModified) != before.key.t || sm.SerialVersion != oldSerial {
			if err := c.orderDate(ctx, tx, sm, before.key.t); err != nil {
				return nil, err
			}
			if millis(sm.DateSysMetadataModified) < before.key.t { // given an older date
				if err := c.keepNewest(ctx, tx, before.key.t); err != nil {
					return nil, err
				}
			}
		}
		if sm.SeriesID != "" && sm.SeriesID != oldSID {
			if err := c.checkModifiedSID(ctx, tx, sm); err != nil {
				return nil, err
			}
		}
		if err := c.updateRow(ctx, tx, s); err != nil {
			return nil, err
		}
		out = sm.Clone()
		return &change{rows: []rowChange{{before: before, after: s.info()}}}, nil
	}()
	return ch, out, err
}

// checkModifiedSID applies checkSID to a series id that Modify sets: the
// series may be that of the object's predecessor or successor.
func (c *Catalog) checkModifiedSID(ctx context.Context, q querier, sm *adapter.SystemMetadata) error {
	neighbour := ""
	for _, n := range []string{sm.Obsoletes, sm.ObsoletedBy} {
		if n == "" {
			continue
		}
		var s sql.NullString
		err := q.QueryRowContext(ctx, c.d.q(`SELECT sid FROM objects WHERE pid = ?`), n).Scan(&s)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlcatalog: %w", err)
		}
		if s.String == sm.SeriesID {
			neighbour = s.String
		}
	}
	return c.checkSID(ctx, q, sm.Identifier, sm.SeriesID, neighbour)
}

// SetChecksum records a checksum computed later, replacing one of the same
// algorithm.
func (c *Catalog) SetChecksum(ctx context.Context, pid, algorithm, value string) error {
	return c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		return c.keepTx(ctx, tx, pid, "", map[string]string{algorithm: value})
	})
}

// keepTx stores the key of the object pid's bytes (when not empty) and adds
// sums to its later checksums: neither is system metadata, which stays as
// it is, and so does the object's place in the list.
func (c *Catalog) keepTx(ctx context.Context, tx *sql.Tx, pid, blobKey string, sums map[string]string) (*change, error) {
	s, err := c.loadPID(ctx, tx, pid, c.d.forUpdate)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, notFound(pid)
	}
	s.blobKey = cmp.Or(blobKey, s.blobKey)
	s.sums = maps.Clone(s.sums)
	if s.sums == nil {
		s.sums = map[string]string{}
	}
	maps.Copy(s.sums, sums)
	return &change{touched: []string{pid}}, c.putBlobAndSums(ctx, tx, s)
}

// Delete removes the object pid (a PID only) and returns its record; its events
// stay.
func (c *Catalog) Delete(ctx context.Context, pid string) (*node.Record, error) {
	var rec *node.Record
	err := c.write(ctx, func(ctx context.Context, tx *sql.Tx) (ch *change, err error) {
		ch, rec, err = c.deleteTx(ctx, tx, pid)
		return ch, err
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// deleteTx is Delete inside tx.
func (c *Catalog) deleteTx(ctx context.Context, tx *sql.Tx, pid string) (*change, *node.Record, error) {
	s, err := c.loadPID(ctx, tx, pid, c.d.forUpdate)
	if err != nil {
		return nil, nil, err
	}
	if s == nil {
		return nil, nil, notFound(pid)
	}
	rec := s.record()
	if err := c.keepNewest(ctx, tx, s.info().key.t); err != nil {
		return nil, nil, err
	}
	for _, q := range []string{
		`DELETE FROM access WHERE pid = ?`,
		`DELETE FROM objects WHERE pid = ?`,
	} {
		if _, err := tx.ExecContext(ctx, c.d.q(q), pid); err != nil {
			return nil, nil, fmt.Errorf("sqlcatalog: deleting %q: %w", pid, err)
		}
	}
	ch := &change{rows: []rowChange{{before: s.info()}}}
	// The chain closes over the gap (GMN's cut_from_chain): a predecessor
	// left obsoleted by an object that is gone could never be updated again.
	prev, next := s.meta.Obsoletes, s.meta.ObsoletedBy
	relink := func(id string, field func(sm *adapter.SystemMetadata) *string, to string) error {
		if id == "" {
			return nil
		}
		rc, _, err := c.modifyTx(ctx, tx, id, func(sm *adapter.SystemMetadata) error {
			ref := field(sm)
			if *ref != pid {
				return errNotLinked
			}
			*ref = to
			sm.SerialVersion++
			sm.DateSysMetadataModified = adapter.NewTime(c.now())
			return nil
		})
		switch {
		case errors.Is(err, errNotLinked), adapter.IsKind(err, adapter.NotFound):
			return nil
		case err != nil:
			return err
		}
		ch.merge(rc)
		return nil
	}
	if err := relink(prev, func(sm *adapter.SystemMetadata) *string { return &sm.ObsoletedBy }, next); err != nil {
		return nil, nil, err
	}
	if err := relink(next, func(sm *adapter.SystemMetadata) *string { return &sm.Obsoletes }, prev); err != nil {
		return nil, nil, err
	}
	return ch, rec, nil
}

// errNotLinked: a neighbour of a deleted object does not name it.
var errNotLinked = errors.New("sqlcatalog: not linked to the deleted object")

// AddEvent appends e to the log. An empty EntryID is assigned (the row's
// increasing id), an empty DateLogged is the time of the insert (see
// logChange), an empty NodeIdentifier is the node's (WithNodeID).
func (c *Catalog) AddEvent(ctx context.Context, e adapter.LogEntry) error {
	return c.AddEvents(ctx, []adapter.LogEntry{e})
}

// AddEvents appends events in one transaction: one commit for all, which is
// what lets the node log every read without paying a commit per read. The
// commit does not wait for the disk (c.lazy): these are the events of the
// node's group commit (node.EventBatcher), which a crash may lose anyway; a
// power failure may now lose the last of them too, never tear the catalog,
// and a write's events still go durably with the write (node.WithEvents).
func (c *Catalog) AddEvents(ctx context.Context, es []adapter.LogEntry) error {
	if len(es) == 0 {
		return nil
	}
	return c.writeOn(ctx, c.lazy, c.d.lazyCommit, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		return &change{logged: es}, nil
	})
}

func notFound(id string) *adapter.Exception {
	return adapter.Errorf(adapter.NotFound, "no object has the identifier %q", id).WithPID(id)
}

// entryID renders an event's id.
func entryID(id int64, ref sql.NullString) string {
	if ref.Valid {
		return ref.String
	}
	return strconv.FormatInt(id, 10)
}
