package sqlcatalog

import (
	"context"
	"database/sql"
	"fmt"
)

// The log's index by PID is deferred. An index of events on pid takes an
// insert at a random place of a B-tree for every event, so read events
// dirtied about a page each, and writing those pages was most of what an
// event cost (BenchmarkAddEvents). Instead, event_pids holds (pid, id) of
// the events up to event_pids_mark's upto, and insertEvents fills it once
// pidIndexEvery events have gone past the mark, in PID order in one
// statement, so that a batch writes each page it touches once. A query by
// PID reads event_pids and the events after the mark, found by their ids:
// its cost is bounded whatever the log's length.
//
// The mark holds on PostgreSQL too: events are appended under logLock, so
// their ids commit in order and no event at or below the mark comes later.

// pidsVersion is the schema version that defers the log's index by PID.
const pidsVersion = 11

// pidIndexEvery is how many events past the mark make insertEvents index
// them: the most events a query by PID reads without the index.
const pidIndexEvery = 8192

// indexEventPIDs indexes the events after the mark if newest (an event id)
// is at least c.pidIndexEvery past it; newest -1 indexes whatever there is
// (a migration, a load).
func (c *Catalog) indexEventPIDs(ctx context.Context, tx *sql.Tx, newest int64) error {
	var upto, last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(upto), 0) FROM event_pids_mark`).Scan(&upto); err != nil {
		return fmt.Errorf("sqlcatalog: reading the log's index mark: %w", err)
	}
	if newest >= 0 && newest-upto < int64(c.pidIndexEvery) {
		return nil
	}
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(entry_id), 0) FROM events`).Scan(&last); err != nil {
		return fmt.Errorf("sqlcatalog: reading the log: %w", err)
	}
	if last <= upto {
		return nil
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO event_pids (pid, entry_id)
		SELECT pid, entry_id FROM events WHERE entry_id > ? AND entry_id <= ? ORDER BY pid, entry_id`), upto, last); err != nil {
		return fmt.Errorf("sqlcatalog: indexing the log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM event_pids_mark`); err != nil {
		return fmt.Errorf("sqlcatalog: moving the log's index mark: %w", err)
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO event_pids_mark (upto) VALUES (?)`), last); err != nil {
		return fmt.Errorf("sqlcatalog: moving the log's index mark: %w", err)
	}
	return nil
}

// idEvents selects the ids of the events whose PID f.id names (a prefix of
// it, or, unless f.pidsOnly, a series it is the SID of): from event_pids,
// and from the events after its mark.
func (f eventFilter) idEvents() (string, []any) {
	hi, bounded := prefixEnd(f.id)
	named := func(col string) (string, []any) {
		if bounded {
			return "(" + col + " >= ? AND " + col + " < ?)", []any{f.id, hi}
		}
		return col + " >= ?", []any{f.id}
	}
	indexed, args := named("p.pid")
	tail, tailArgs := named("t.pid")
	q := "SELECT p.entry_id FROM event_pids p WHERE " + indexed
	if !f.pidsOnly {
		q += " UNION ALL SELECT p.entry_id FROM event_pids p JOIN objects s ON s.pid = p.pid WHERE s.sid = ?"
		args = append(args, f.id)
		tail = "(" + tail + " OR t.pid IN (SELECT s.pid FROM objects s WHERE s.sid = ?))"
		tailArgs = append(tailArgs, f.id)
	}
	q += " UNION ALL SELECT t.entry_id FROM events t" +
		" WHERE t.entry_id > (SELECT COALESCE(MAX(upto), 0) FROM event_pids_mark) AND " + tail
	return q, append(args, tailArgs...)
}
