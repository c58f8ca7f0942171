package sqlcatalog

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestFewIDEvents: a query by identifier reads by their ids the events of an
// identifier naming few of them, and scans the log for one naming many, with
// the same answer either way.
func TestFewIDEvents(t *testing.T) {
	ctx := context.Background()
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"), withPIDIndexEvery(1), withSparseIDEvents(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var es []adapter.LogEntry
	for i, pid := range []string{"many/0", "few/1", "many/1", "many/2", "few/0", "many/3", "many/4"} {
		es = append(es, adapter.LogEntry{Identifier: pid, Event: adapter.EventRead, Subject: "public"})
		if i == 3 || i == 6 {
			if err := c.AddEvents(ctx, es); err != nil { // indexed as they come: pidIndexEvery 1
				t.Fatal(err)
			}
			es = es[:0]
		}
	}
	for _, tc := range []struct {
		id   string
		few  bool
		pids []string
	}{
		{"many/", false, []string{"many/0", "many/1", "many/2", "many/3", "many/4"}},
		{"few/", true, []string{"few/1", "few/0"}},
		{"many/3", true, []string{"many/3"}},
	} {
		f := newEventFilter(adapter.LogQuery{IDFilter: tc.id, PIDsOnly: true})
		few, err := c.fewIDEvents(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if few != tc.few {
			t.Errorf("%q: few is %v, want %v", tc.id, few, tc.few)
		}
		log, err := c.Events(ctx, adapter.LogQuery{IDFilter: tc.id, PIDsOnly: true, Count: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range log.LogEntry {
			got = append(got, e.Identifier)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.pids) || log.Total != len(tc.pids) {
			t.Errorf("%q: events %v (total %d), want %v", tc.id, got, log.Total, tc.pids)
		}
	}
}

// TestEventPIDRuns: each indexing appends a run, runFanout runs of level 0
// merge into one of level 1, every indexed event is in one run once, and a
// query by PID finds its events in every run, the tail after the mark too.
// A catalog of schema 12 (one index without runs) migrates into run 0.
func TestEventPIDRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := OpenSQLite(path, withPIDIndexEvery(3))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	pids := []string{"p/a", "p/b", "p/c", "p/d", "p/e"}
	const events = 100
	for i := range events {
		e := adapter.LogEntry{Identifier: pids[i*7%len(pids)], Event: adapter.EventRead, Subject: "public"}
		if err := c.AddEvents(ctx, []adapter.LogEntry{e}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, wantRuns map[int]int) {
		t.Helper()
		var indexed, distinct, listed, upto int
		must(t, c.db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT entry_id) FROM event_pids`).Scan(&indexed, &distinct))
		must(t, c.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(events), 0) FROM event_pid_runs`).Scan(&listed))
		must(t, c.db.QueryRowContext(ctx, `SELECT MAX(upto) FROM event_pids_mark`).Scan(&upto))
		if indexed != distinct || indexed != listed || indexed != upto {
			t.Errorf("%s: %d rows in event_pids for %d events, the runs list %d, the mark is at %d", when, indexed, distinct, listed, upto)
		}
		var stray int
		must(t, c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM event_pids WHERE run NOT IN (SELECT run FROM event_pid_runs)`).Scan(&stray))
		if stray != 0 {
			t.Errorf("%s: %d rows of event_pids in no listed run", when, stray)
		}
		runs := map[int]int{}
		rows, err := c.db.QueryContext(ctx, `SELECT level, COUNT(*) FROM event_pid_runs GROUP BY level`)
		must(t, err)
		for rows.Next() {
			var level, n int
			must(t, rows.Scan(&level, &n))
			runs[level] = n
		}
		must(t, rows.Err())
		if fmt.Sprint(runs) != fmt.Sprint(wantRuns) {
			t.Errorf("%s: runs by level %v, want %v", when, runs, wantRuns)
		}
		for _, pid := range pids {
			l, err := c.Events(ctx, adapter.LogQuery{IDFilter: pid, PIDsOnly: true, Count: events})
			if err != nil || l.Total != events/len(pids) || len(l.LogEntry) != l.Total {
				t.Errorf("%s: the log of %s: %d of total %d events (%v), want %d", when, pid, len(l.LogEntry), l.Total, err, events/len(pids))
			}
		}
	}
	// 100 events indexed 3 at a time: 33 runs, 32 of them merged 8 by 8.
	check("written", map[int]int{0: 1, 1: 4})

	toSchema12(t, c)
	c.Close()
	if c, err = OpenSQLite(path, withPIDIndexEvery(3)); err != nil {
		t.Fatal(err)
	}
	check("migrated from schema 12", map[int]int{maxRunLevel: 1})
}

// toSchema12 turns the SQLite catalog c's log index into what schema 12 left:
// one index, no runs.
func toSchema12(t *testing.T, c *Catalog) {
	t.Helper()
	for _, q := range append(slices.Clip(toSchema13),
		`CREATE TABLE event_pids_12 (pid TEXT NOT NULL, entry_id BIGINT NOT NULL, PRIMARY KEY (pid, entry_id)) WITHOUT ROWID`,
		`INSERT INTO event_pids_12 SELECT pid, entry_id FROM event_pids`,
		`DROP TABLE event_pids`, `DROP TABLE event_pid_runs`,
		`ALTER TABLE event_pids_12 RENAME TO event_pids`,
		`UPDATE catalog_schema SET version = 12`,
	) {
		if _, err := c.db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
}
