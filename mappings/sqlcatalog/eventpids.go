package sqlcatalog

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
)

// The log's index by PID is deferred, and written in runs. An index of
// events on pid takes an insert at a random place of a B-tree for every
// event, so read events dirtied about a page each, and writing those pages
// was most of what an event cost (BenchmarkAddEvents). Instead, event_pids
// holds (run, pid, id) of the events up to event_pids_mark's upto, and
// insertEvents indexes the events past the mark once there are
// pidIndexEvery of them: a new run, in PID order, appended after every
// other (run ids increase), so that it writes only its own pages however
// large the log. runFanout runs of one level are merged into one of the
// next, up to maxRunLevel: a query by PID seeks once per run (event_pid_runs
// lists them), so there are about one per 65,536 events, and a merge
// rewrites at most that many. A query by PID reads event_pids and the events
// after the mark, found by their ids.
//
// The mark holds on PostgreSQL too: events are appended under logLock, so
// their ids commit in order and no event at or below the mark comes later.

// pidsVersion is the schema version that defers the log's index by PID;
// runsVersion the one that writes it in runs.
const (
	pidsVersion = 11
	runsVersion = 13
)

// pidIndexEvery is how many events past the mark make insertEvents index
// them: the most events a query by PID reads without the index.
const pidIndexEvery = 8192

// runFanout runs of a level below maxRunLevel make one of the next.
const (
	runFanout   = 8
	maxRunLevel = 1
)

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
	run, err := nextRun(ctx, tx)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO event_pids (run, pid, entry_id)
		SELECT ?, pid, entry_id FROM events WHERE entry_id > ? AND entry_id <= ? ORDER BY pid, entry_id`), run, upto, last)
	if err != nil {
		return fmt.Errorf("sqlcatalog: indexing the log: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlcatalog: indexing the log: %w", err)
	}
	level := 0
	if newest < 0 {
		level = maxRunLevel // the whole log at once: not to be merged again
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO event_pid_runs (run, events, level) VALUES (?, ?, ?)`), run, n, level); err != nil {
		return fmt.Errorf("sqlcatalog: indexing the log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM event_pids_mark`); err != nil {
		return fmt.Errorf("sqlcatalog: moving the log's index mark: %w", err)
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO event_pids_mark (upto) VALUES (?)`), last); err != nil {
		return fmt.Errorf("sqlcatalog: moving the log's index mark: %w", err)
	}
	return c.mergeRuns(ctx, tx, level)
}

// mergeRuns merges the runs of level into one of the next, and so on up,
// while a level below maxRunLevel has runFanout of them.
func (c *Catalog) mergeRuns(ctx context.Context, tx *sql.Tx, level int) error {
	for ; level < maxRunLevel; level++ {
		var runs, events int64
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*), COALESCE(SUM(events), 0) FROM event_pid_runs WHERE level = ?`), level).Scan(&runs, &events)
		if err != nil {
			return fmt.Errorf("sqlcatalog: reading the log's index runs: %w", err)
		}
		if runs < runFanout {
			return nil
		}
		run, err := nextRun(ctx, tx)
		if err != nil {
			return err
		}
		merged := `(SELECT run FROM event_pid_runs WHERE level = ?)`
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO event_pids (run, pid, entry_id)
				SELECT ?, pid, entry_id FROM event_pids WHERE run IN ` + merged + ` ORDER BY pid, entry_id`, []any{run, level}},
			{`DELETE FROM event_pids WHERE run IN ` + merged, []any{level}},
			{`DELETE FROM event_pid_runs WHERE level = ?`, []any{level}},
			{`INSERT INTO event_pid_runs (run, events, level) VALUES (?, ?, ?)`, []any{run, events, level + 1}},
		} {
			if _, err := tx.ExecContext(ctx, c.d.q(q.sql), q.args...); err != nil {
				return fmt.Errorf("sqlcatalog: merging the log's index runs: %w", err)
			}
		}
	}
	return nil
}

// nextRun is the id of a new run: after every other.
func nextRun(ctx context.Context, tx *sql.Tx) (int64, error) {
	var run int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(run), 0) + 1 FROM event_pid_runs`).Scan(&run); err != nil {
		return 0, fmt.Errorf("sqlcatalog: reading the log's index runs: %w", err)
	}
	return run, nil
}

// registerRunZero lists run 0, the index of a catalog (or dump) from before
// runs, when it holds anything; it is not merged again.
func registerRunZero(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO event_pid_runs (run, events, level)
		SELECT 0, COUNT(*), `+strconv.Itoa(maxRunLevel)+` FROM event_pids HAVING COUNT(*) > 0`); err != nil {
		return fmt.Errorf("sqlcatalog: listing the log's index: %w", err)
	}
	return nil
}

// A query by identifier reads the events it names in one of two ways. When
// they are few, by their ids: event_pids and the tail after its mark give the
// ids, and each event is fetched by its id (idEvents). When they are many, a
// prefix matching most of the log, building that list of ids and fetching
// each would cost seconds per million, where a scan of the log in its order
// (events_order holds the PID) checks each event's PID without fetching it
// and stops at the page (pidCond). Which one, a bounded count of the indexed
// events tells (fewIDEvents).

// sparseIDEvents is the most events named by an identifier that a query reads
// by their ids.
const sparseIDEvents = 16384

// fewIDEvents reports whether f's identifier names at most c.sparseIDEvents
// events up to the mark, counting no more than one past that.
func (c *Catalog) fewIDEvents(ctx context.Context, f eventFilter) (bool, error) {
	q, args := f.indexedIDEvents()
	var n int
	err := c.db.QueryRowContext(ctx, c.d.q("SELECT COUNT(*) FROM ("+q+" LIMIT ?) ids"), append(args, c.sparseIDEvents+1)...).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("sqlcatalog: counting the events of %q: %w", f.id, err)
	}
	return n <= c.sparseIDEvents, nil
}

// pidCond is the condition on the PID column col of the events f's
// identifier names: a prefix of their PID, or, unless f.pidsOnly, a series
// it is the SID of.
func (f eventFilter) pidCond(col string) (string, []any) {
	cond, args := f.prefixCond(col)
	if !f.pidsOnly {
		cond = "(" + cond + " OR " + col + " IN (SELECT s.pid FROM objects s WHERE s.sid = ?))"
		args = append(args, f.id)
	}
	return cond, args
}

func (f eventFilter) prefixCond(col string) (string, []any) {
	if hi, bounded := prefixEnd(f.id); bounded {
		return "(" + col + " >= ? AND " + col + " < ?)", []any{f.id, hi}
	}
	return col + " >= ?", []any{f.id}
}

// indexedIDEvents selects the ids of the events up to the mark that f's
// identifier names, from event_pids.
func (f eventFilter) indexedIDEvents() (string, []any) {
	const inRuns = "p.run IN (SELECT run FROM event_pid_runs) AND " // a seek per run
	cond, args := f.prefixCond("p.pid")
	q := "SELECT p.entry_id FROM event_pids p WHERE " + inRuns + cond
	if !f.pidsOnly {
		q += " UNION ALL SELECT p.entry_id FROM event_pids p WHERE " + inRuns + "p.pid IN (SELECT s.pid FROM objects s WHERE s.sid = ?)"
		args = append(args, f.id)
	}
	return q, args
}

// idEvents selects the ids of every event f's identifier names: from
// event_pids, and from the events after its mark.
func (f eventFilter) idEvents() (string, []any) {
	q, args := f.indexedIDEvents()
	tail, tailArgs := f.pidCond("t.pid")
	q += " UNION ALL SELECT t.entry_id FROM events t" +
		" WHERE t.entry_id > (SELECT COALESCE(MAX(upto), 0) FROM event_pids_mark) AND " + tail
	return q, append(args, tailArgs...)
}
