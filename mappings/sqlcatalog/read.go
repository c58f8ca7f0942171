package sqlcatalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// Lookup finds the record of a PID, or of the head of the series a SID names:
// a copy, which the caller may change.
func (c *Catalog) Lookup(ctx context.Context, id string) (*node.Record, error) {
	rec, err := c.View(ctx, id)
	if err != nil {
		return nil, err
	}
	return clone(rec), nil
}

// View is Lookup without the copy (node.RecordViewer): the record is shared
// with the cache and the request's memo, not to be changed. A request's second
// lookup of id comes from its memo (adapter.Memo).
func (c *Catalog) View(ctx context.Context, id string) (*node.Record, error) {
	memo := adapter.MemoOf(ctx)
	var key any = lookupKey(id) // boxed once for Load and Store
	if v, ok := memo.Load(key); ok {
		return v.(*node.Record), nil
	}
	rec, err := c.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	memo.Store(key, rec)
	if rec.Meta.Identifier != id { // a SID: the PID finds it too
		memo.Store(lookupKey(rec.Meta.Identifier), rec)
	}
	return rec, nil
}

// lookupKey is the memo's key of a lookup.
type lookupKey string

// lookup returns the record id names, shared with the cache: not to be changed.
func (c *Catalog) lookup(ctx context.Context, id string) (*node.Record, error) {
	if c.d.inProcess {
		// Two reads by index, too short to interrupt: without a context that
		// can end, database/sql and the SQLite driver start no goroutine per
		// query to watch it (a fifth of a lookup's cost on a miss).
		ctx = context.WithoutCancel(ctx)
	}
	if rec, ok, err := c.lookupPID(ctx, id); ok || err != nil {
		return rec, err
	}
	s, err := c.resolve(ctx, c.db, id, "")
	if err != nil {
		return nil, err
	}
	return s.record(), nil
}

// resolve loads the object id names: a PID, or else a SID, whose head is the
// newest member (by dateUploaded, then insertion) that no other member of the
// series obsoletes. lock is "" or c.d.forUpdate.
func (c *Catalog) resolve(ctx context.Context, q querier, id, lock string) (*stored, error) {
	s, err := c.loadPID(ctx, q, id, lock)
	if err != nil || s != nil {
		return s, err
	}
	s, err = c.scanStored(q.QueryRowContext(ctx, c.d.q(`SELECT `+storedColumns+` FROM objects o
		WHERE o.sid = ?
		ORDER BY CASE WHEN o.obsoleted_by IS NULL OR NOT EXISTS (
				SELECT 1 FROM objects n WHERE n.pid = o.obsoleted_by AND n.sid = o.sid)
			THEN 0 ELSE 1 END,
			o.date_uploaded DESC, o.seq DESC
		LIMIT 1`+lock), id))
	if err != nil || s != nil {
		return s, err
	}
	return nil, notFound(id)
}

// loadPID loads the object pid; nil when there is none. lock is "" or
// c.d.forUpdate, for a row that the transaction will change.
func (c *Catalog) loadPID(ctx context.Context, q querier, pid, lock string) (*stored, error) {
	return c.scanStored(q.QueryRowContext(ctx, c.d.q(`SELECT `+storedColumns+` FROM objects o WHERE o.pid = ?`+lock), pid))
}

// storedColumns are the columns of objects o that scanStored reads.
const storedColumns = `o.seq, o.blob_key, COALESCE(o.meta, o.sysmeta), o.sums`

func (c *Catalog) scanStored(row *sql.Row) (*stored, error) {
	var s stored
	var doc string
	var sums sql.NullString
	err := row.Scan(&s.seq, &s.blobKey, &doc, &sums)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	if err := s.decode(doc, sums); err != nil {
		return nil, err
	}
	return &s, nil
}

// decode sets s.meta from the stored document doc: meta (compact, or JSON
// in rows written before it) or, in rows written before meta, sysmeta (XML);
// and s.sums from sums (compact or JSON).
func (s *stored) decode(doc string, sums sql.NullString) error {
	var err error
	switch {
	case strings.HasPrefix(doc, compactPrefix):
		s.meta, err = decodeMeta(doc[len(compactPrefix):])
	case strings.HasPrefix(doc, "{"):
		s.meta = new(adapter.SystemMetadata)
		err = json.Unmarshal([]byte(doc), s.meta)
	default:
		s.meta = new(adapter.SystemMetadata)
		err = adapter.Decode(strings.NewReader(doc), s.meta)
	}
	if err != nil {
		return fmt.Errorf("sqlcatalog: the stored system metadata of row %d: %w", s.seq, err)
	}
	s.sums = nil
	switch {
	case !sums.Valid:
	case strings.HasPrefix(sums.String, compactPrefix):
		s.sums, err = decodeSums(sums.String[len(compactPrefix):])
	default:
		err = json.Unmarshal([]byte(sums.String), &s.sums)
	}
	if err != nil {
		return fmt.Errorf("sqlcatalog: the stored checksums of row %d: %w", s.seq, err)
	}
	return nil
}

// record is the record of the row s.
func (s *stored) record() *node.Record {
	return &node.Record{Meta: s.meta, BlobKey: s.blobKey, Checksums: s.sums}
}

// List answers listObjects, ordered by (dateSysMetadataModified, seq).
func (c *Catalog) List(ctx context.Context, q adapter.ListQuery) (*adapter.ObjectList, error) {
	if err := checkSlice(q.Start, q.Count); err != nil {
		return nil, err
	}
	f := newListFilter(q, c.nodeID)
	out := &adapter.ObjectList{Slice: adapter.Slice{Start: q.Start}}
	if f.none {
		return out, nil
	}
	where, args := f.where(true)
	whereAfter, argsAfter := f.where(false)
	pq := pageQuery{
		filter: f, table: "objects o", where: where, args: args,
		whereAfter: whereAfter, argsAfter: argsAfter, from: fromOf(f.hasFrom, f.from),
		keyT: "o.date_modified", keyID: "o.seq",
		cols: "o.pid, o.format_id, o.checksum_algorithm, o.checksum_value, o.size, o.date_modified, o.seq",
	}
	if bf, ok := f.blockFilter(); ok && !c.countLists {
		pq.seek = func(ctx context.Context, tx *sql.Tx, start int) (int, int, *sortKey, error) {
			return c.seekBlocks(ctx, tx, pq, f, bf, start)
		}
	}
	total, err := c.page(ctx, pq, q.Start, q.Count, func(rows *sql.Rows) (sortKey, error) {
		var oi adapter.ObjectInfo
		var size, t, seq int64
		if err := rows.Scan(&oi.Identifier, &oi.FormatID, &oi.Checksum.Algorithm, &oi.Checksum.Value, &size, &t, &seq); err != nil {
			return sortKey{}, err
		}
		oi.Size, oi.DateSysMetadataModified = uint64(size), fromMillis(t)
		out.ObjectInfo = append(out.ObjectInfo, oi)
		return sortKey{t, seq}, nil
	})
	if err != nil {
		return nil, err
	}
	out.Count, out.Total = len(out.ObjectInfo), total
	return out, nil
}

// Events answers getLogRecords, ordered by (dateLogged, entry id).
func (c *Catalog) Events(ctx context.Context, q adapter.LogQuery) (*adapter.Log, error) {
	if err := checkSlice(q.Start, q.Count); err != nil {
		return nil, err
	}
	f := newEventFilter(q)
	out := &adapter.Log{Slice: adapter.Slice{Start: q.Start}}
	if f.none {
		return out, nil
	}
	byID := true
	if f.id != "" {
		var err error
		if byID, err = c.fewIDEvents(ctx, f); err != nil {
			return nil, err
		}
	}
	where, args := f.where(true, byID)
	whereAfter, argsAfter := f.where(false, byID)
	pq := pageQuery{
		filter: f, table: "events e", where: where, args: args,
		whereAfter: whereAfter, argsAfter: argsAfter, from: fromOf(f.hasFrom, f.from),
		keyT: "e.date_logged", keyID: "e.entry_id",
		cols: "e.entry_ref, e.pid, e.ip, e.user_agent, e.subject, e.event, e.node_id, e.date_logged, e.entry_id",
	}
	total, err := c.page(ctx, pq, q.Start, q.Count, func(rows *sql.Rows) (sortKey, error) {
		var le adapter.LogEntry
		var ref sql.NullString
		var t, id int64
		if err := rows.Scan(&ref, &le.Identifier, &le.IPAddress, &le.UserAgent, &le.Subject, &le.Event, &le.NodeIdentifier, &t, &id); err != nil {
			return sortKey{}, err
		}
		le.EntryID, le.DateLogged = entryID(id, ref), fromMillis(t)
		out.LogEntry = append(out.LogEntry, le)
		return sortKey{t, id}, nil
	})
	if err != nil {
		return nil, err
	}
	out.Count, out.Total = len(out.LogEntry), total
	return out, nil
}

func checkSlice(start, count int) error {
	switch {
	case start < 0:
		return adapter.Errorf(adapter.InvalidRequest, "start is %d; it must not be negative", start)
	case count < 0:
		return adapter.Errorf(adapter.InvalidRequest, "count is %d; it must not be negative", count)
	}
	return nil
}

func fromMillis(ms int64) adapter.Time { return adapter.NewTime(time.UnixMilli(ms)) }

// selectAfter returns the query of cols (which end with the sort key) of the
// rows after key k (all rows when k is nil), in order, followed by tail, and its
// arguments. After a key, rows of the same date and rows of later dates are
// two index range scans merged: a row value comparison would make SQLite scan
// every row of the key's date before the first one wanted.
func (pq pageQuery) selectAfter(cols string, k *sortKey, tail string) (string, []any) {
	where := func(cond string) string {
		if pq.where == "" {
			return " WHERE " + cond
		}
		return " WHERE " + pq.where + " AND " + cond
	}
	if k == nil {
		q := "SELECT " + cols + " FROM " + pq.table
		if pq.where != "" {
			q += " WHERE " + pq.where
		}
		return q + " ORDER BY " + pq.keyT + ", " + pq.keyID + tail, pq.args
	}
	// Rows after a cursor at or past fromDate are past fromDate too: without that
	// bound the seek starts at the cursor, not at fromDate (SQLite ranges on the
	// lower bound it is given).
	if k.t >= pq.from {
		pq.where, pq.args = pq.whereAfter, pq.argsAfter
	}
	n := strings.Count(cols, ",") + 1
	q := "SELECT " + cols + " FROM " + pq.table + where(pq.keyT+" = ? AND "+pq.keyID+" > ?") +
		" UNION ALL SELECT " + cols + " FROM " + pq.table + where(pq.keyT+" > ?") +
		fmt.Sprintf(" ORDER BY %d, %d", n-1, n) + tail
	args := make([]any, 0, 2*len(pq.args)+3)
	args = append(append(args, pq.args...), k.t, k.id)
	args = append(append(args, pq.args...), k.t)
	return q, args
}

// pageQuery is one list: the rows of table (with an alias) that where selects,
// sorted by (keyT, keyID). cols ends with keyT, keyID.
type pageQuery struct {
	filter       filter
	table, where string
	args         []any
	// whereAfter is where without the fromDate bound, for seeks after a cursor;
	// from is that bound (math.MinInt64 when there is none).
	whereAfter  string
	argsAfter   []any
	from        int64
	keyT, keyID string
	cols        string
	// seek, when not nil, returns the total and a cursor at or below start
	// without counting (blocks.go).
	seek func(ctx context.Context, tx *sql.Tx, start int) (total, pos int, key *sortKey, err error)
}

// page reads the rows at positions [start, start+count) of pq through scan,
// which returns each row's sort key, and returns the total; see the package
// comment for how the cache makes this cost the same at any start.
func (c *Catalog) page(ctx context.Context, pq pageQuery, start, count int, scan func(*sql.Rows) (sortKey, error)) (int, error) {
	from, pos, after, total, hasTotal := c.cache.lookup(pq.filter, start)
	var found []posKey
	var newTotal *int

	tx, err := c.db.BeginTx(ctx, c.d.readTx)
	if err != nil {
		return 0, fmt.Errorf("sqlcatalog: %w", err)
	}
	defer tx.Rollback()

	if pq.seek != nil && (!hasTotal || start-pos > c.blockRows) {
		t, p, k, err := pq.seek(ctx, tx, start)
		switch {
		case errors.Is(err, errNoSeek): // counted below
		case err != nil:
			return 0, err
		default:
			if !hasTotal {
				total, hasTotal, newTotal = t, true, &t
			}
			if p > pos {
				pos, after = p, k
			}
		}
	}
	if !hasTotal {
		q := "SELECT COUNT(*) FROM " + pq.table
		if pq.where != "" {
			q += " WHERE " + pq.where
		}
		if err := tx.QueryRowContext(ctx, c.d.q(q), pq.args...).Scan(&total); err != nil {
			return 0, fmt.Errorf("sqlcatalog: counting: %w", err)
		}
		newTotal = &total
	}
	if count > 0 && start < total && start > pos {
		// Skip to the row before start on the sort key's index alone.
		q, args := pq.selectAfter(pq.keyT+", "+pq.keyID, after, " LIMIT 1 OFFSET ?")
		var k sortKey
		err := tx.QueryRowContext(ctx, c.d.q(q), append(args, start-pos-1)...).Scan(&k.t, &k.id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			count = 0 // the list is shorter than the total said
		case err != nil:
			return 0, fmt.Errorf("sqlcatalog: seeking position %d: %w", start, err)
		default:
			after = &k
			found = append(found, posKey{start, k})
		}
	}
	if count > 0 && start < total {
		q, args := pq.selectAfter(pq.cols, after, " LIMIT ?")
		rows, err := tx.QueryContext(ctx, c.d.q(q), append(args, count)...)
		if err != nil {
			return 0, fmt.Errorf("sqlcatalog: listing: %w", err)
		}
		n := 0
		var last sortKey
		for rows.Next() {
			if last, err = scan(rows); err != nil {
				rows.Close()
				return 0, fmt.Errorf("sqlcatalog: listing: %w", err)
			}
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("sqlcatalog: listing: %w", err)
		}
		if n > 0 {
			found = append(found, posKey{start + n, last})
		}
	}
	c.cache.store(pq.filter, from, found, newTotal)
	return total, nil
}

func fromOf(has bool, from int64) int64 {
	if !has {
		return math.MinInt64
	}
	return from
}
