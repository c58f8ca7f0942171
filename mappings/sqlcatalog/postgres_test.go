package sqlcatalog

// The catalog on a real PostgreSQL server (pgtest starts one for the test
// binary): the acceptance suite, the tests added after it, and what SQLite
// cannot show: two Catalog values on one database, as two d1bridge processes
// sharing a catalog, writing at the same time.
//
// The races are made deterministic where it matters: a third connection (raw)
// holds a lock that both instances need, the test waits until both are blocked
// behind it (pg_blocking_pids), then lets them go, so that they really meet in
// the database rather than one after the other.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Start(t) // holds the one cluster for every subtest

	t.Run("Acceptance", func(t *testing.T) {
		t.Parallel()
		sqlcatalogtest.CatalogAcceptance(t, postgresOpener(withSparseIDEvents(-1)))
	})
	t.Run("AcceptanceWithoutCache", func(t *testing.T) {
		// What the binary runs with on PostgreSQL (and a small batch of
		// the log's index by PID, as TestSQLiteAcceptanceWithoutCache).
		t.Parallel()
		sqlcatalogtest.CatalogAcceptance(t, postgresOpener(WithCache(0, 0), WithRecordCache(0), withPIDIndexEvery(4)))
	})
	t.Run("Reservations", func(t *testing.T) {
		t.Parallel()
		checkReservations(t, postgresOpener()(t).(*Catalog))
	})
	t.Run("Statistics", func(t *testing.T) {
		t.Parallel()
		checkStatistics(t, postgresOpener()(t).(*Catalog))
	})
	t.Run("Blocks", func(t *testing.T) {
		t.Parallel()
		checkBlocks(t, postgresOpener(WithCache(0, 0), WithRecordCache(0), withBlockRows(testBlockRows))(t).(*Catalog))
	})
	t.Run("OwnerOfPublicObjectsSeeks", func(t *testing.T) {
		t.Parallel()
		checkOwnerOfPublicObjectsSeeks(t, postgresOpener(WithCache(0, 0), WithRecordCache(0), withMaxGranted(8))(t).(*Catalog))
	})
	t.Run("HeavyReaderSeeks", func(t *testing.T) {
		t.Parallel()
		checkHeavyReaderSeeks(t, postgresOpener(WithCache(0, 0), WithRecordCache(0), withBlockRows(testBlockRows), withMaxGranted(12))(t).(*Catalog))
	})
	t.Run("ReadersProbed", func(t *testing.T) {
		t.Parallel()
		testReadersProbed(t)
	})
	t.Run("BlocksMigrate", func(t *testing.T) {
		t.Parallel()
		open := postgresOpener(WithCache(0, 0), WithRecordCache(0), withBlockRows(testBlockRows))
		checkBlocksMigrate(t, open(t).(*Catalog), func() *Catalog { return open(t).(*Catalog) })
	})
	t.Run("BlocksTwoInstances", func(t *testing.T) {
		t.Parallel()
		testBlocksTwoInstances(t)
	})
	t.Run("ConcurrentOpen", func(t *testing.T) {
		t.Parallel()
		testPostgresConcurrentOpen(t)
	})
	t.Run("TwoInstances", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			fn   func(t *testing.T, a, b *Catalog, raw *rawConn)
		}{
			{"SamePID", testTwoSamePID},
			{"SamePIDBehindALock", testTwoSamePIDBehindALock},
			{"SameSID", testTwoSameSID},
			{"ChainBehindALock", testTwoChainBehindALock},
			{"ChainNeverBranches", testTwoChainNeverBranches},
			{"Reservations", testTwoReservations},
			{"SeeEachOther", testTwoSeeEachOther},
			{"CommitOrder", testTwoCommitOrder},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				// Each instance names its connections, so that the test can
				// tell when they wait for a lock.
				dsn := pgtest.Start(t)
				_, schema, _ := strings.Cut(dsn, "search_path=")
				raw := &rawConn{apps: []string{schema + "-a", schema + "-b"}}
				a := openPostgres(t, dsn+"&application_name="+raw.apps[0], WithCache(0, 0), WithRecordCache(0))
				b := openPostgres(t, dsn+"&application_name="+raw.apps[1], WithCache(0, 0), WithRecordCache(0))
				var err error
				if raw.DB, err = sql.Open("pgx", dsn); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { raw.Close() })
				tc.fn(t, a, b, raw)
			})
		}
	})
}

// postgresOpener opens a catalog in a schema of its own per test, the same
// one again when called again for the same test.
func postgresOpener(opts ...Option) func(t *testing.T) node.Catalog {
	var mu sync.Mutex
	dsns := map[*testing.T]string{}
	return func(t *testing.T) node.Catalog {
		mu.Lock()
		dsn, ok := dsns[t]
		if !ok {
			dsn = pgtest.Start(t)
			dsns[t] = dsn
		}
		mu.Unlock()
		return openPostgres(t, dsn, opts...)
	}
}

// openPostgres opens the catalog at dsn with NodeID and opts, closed when t ends.
func openPostgres(t *testing.T, dsn string, opts ...Option) *Catalog {
	t.Helper()
	c, err := OpenPostgres(dsn, append([]Option{WithNodeID(sqlcatalogtest.NodeID)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testReadersProbed: a list for readers checks each row's access on the
// index, a probe PostgreSQL cannot turn into a join. On a large catalog the
// planner may judge a join cheaper, and read every access row of the
// subjects for a page that a few thousand probes answer (a last page of the
// public's list over 1M objects: 70 ms against 5); here nested loops are
// made costly, so that it would join what it can.
func testReadersProbed(t *testing.T) {
	c := openPostgres(t, pgtest.Start(t))
	ctx := t.Context()
	if err := c.bulkLoad(ctx, benchSMs(0, 3000, false)); err != nil {
		t.Fatal(err)
	}
	q := adapter.ListQuery{ReadableBy: []string{adapter.SubjectPublic, "CN=reader"}, Count: 100}
	where, args := newListFilter(q, c.nodeID).where(true)
	pq := pageQuery{table: "objects o", where: where, args: args, keyT: "o.date_modified", keyID: "o.seq"}
	query, args := pq.selectAfter("o.pid, o.date_modified, o.seq", nil, " LIMIT ?")
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL enable_nestloop = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.QueryContext(ctx, "EXPLAIN "+c.d.q(query), append(args, 100)...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); strings.Contains(p, "Join") {
		t.Errorf("the page of a list for readers joins the access table:\n%s", p)
	}
	l, err := c.List(ctx, q)
	if err != nil || l.Count != 100 || l.Total != 1000 {
		t.Fatalf("the public's list of 3,000 objects, a third public: %v, %v", l, err)
	}
}

// testPostgresConcurrentOpen starts several processes on a new database at
// once: each must create or find the schema, none may fail.
func testPostgresConcurrentOpen(t *testing.T) {
	dsn := pgtest.Start(t)
	const n = 4
	var wg sync.WaitGroup
	cats := make([]*Catalog, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { cats[i], errs[i] = OpenPostgres(dsn, WithNodeID(sqlcatalogtest.NodeID)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("open %d: %v", i, errs[i])
			continue
		}
		defer cats[i].Close()
	}
	if t.Failed() {
		return
	}
	if err := cats[0].Insert(t.Context(), &node.Record{Meta: sqlcatalogtest.SM("x", adapter.NewTime(time.Now()))}); err != nil {
		t.Fatal(err)
	}
	if _, err := cats[n-1].Lookup(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
}

// both runs fa on a and fb on b at the same moment and returns their errors.
func both(fa, fb func() error) (errA, errB error) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { <-start; errA = fa() })
	wg.Go(func() { <-start; errB = fb() })
	close(start)
	wg.Wait()
	return errA, errB
}

// oneWins checks that exactly one of errA and errB is nil and the other of
// kind k, and returns "a" or "b", the winner.
func oneWins(t *testing.T, what string, errA, errB error, k adapter.Kind) string {
	t.Helper()
	switch {
	case errA == nil && adapter.IsKind(errB, k):
		return "a"
	case errB == nil && adapter.IsKind(errA, k):
		return "b"
	}
	t.Fatalf("%s: a got %v, b got %v; want one success and one %s", what, errA, errB, k)
	return ""
}

// insertAs is Insert of a minimal object pid with BlobKey who, obsoleting
// obsoletes and in series sid when not "".
func insertAs(c *Catalog, ctx context.Context, who, pid, obsoletes, sid string) error {
	sm := sqlcatalogtest.SM(pid, adapter.NewTime(time.Now()))
	sm.Obsoletes, sm.SeriesID = obsoletes, sid
	return c.Insert(ctx, &node.Record{Meta: sm, BlobKey: who})
}

// testTwoCommitOrder: a write dated before another instance's last commit
// (the clocks of two machines differ, or the write waited for the other)
// takes that commit's date, which it reads from the database.
func testTwoCommitOrder(t *testing.T, a, b *Catalog, _ *rawConn) {
	ctx := t.Context()
	now := time.Now()
	ahead := adapter.NewTime(now.Add(time.Minute))
	if err := a.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM("ahead", ahead), BlobKey: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM("behind", adapter.NewTime(now)), BlobKey: "b"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Catalog{a, b} {
		rec, err := c.Lookup(ctx, "behind")
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Meta.DateSysMetadataModified.Equal(ahead.Time) {
			t.Errorf("the later commit is dated %s, before the earlier one's %s", rec.Meta.DateSysMetadataModified.Format(), ahead.Format())
		}
	}
	l, err := a.List(ctx, adapter.ListQuery{FromDate: ahead, Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(l.ObjectInfo); got != 2 {
		t.Errorf("listing from the first commit's date: %d objects, want both", got)
	}
}

// testTwoSamePID inserts the same PID through both instances at once, many
// times: exactly one wins each time, and both then read the winner's record.
func testTwoSamePID(t *testing.T, a, b *Catalog, _ *rawConn) {
	ctx := t.Context()
	for i := range 40 {
		pid := fmt.Sprintf("same-%02d", i)
		errA, errB := both(
			func() error { return insertAs(a, ctx, "a", pid, "", "") },
			func() error { return insertAs(b, ctx, "b", pid, "", "") })
		winner := oneWins(t, pid, errA, errB, adapter.IdentifierNotUnique)
		for _, c := range []*Catalog{a, b} {
			rec, err := c.Lookup(ctx, pid)
			if err != nil || rec.BlobKey != winner {
				t.Fatalf("%s: lookup %+v %v, want the record of %s", pid, rec, err, winner)
			}
		}
	}
}

// testTwoSameSID claims one new identifier through both instances at once,
// many times: as the series id of two new objects, and as a PID on one side and
// a series id on the other. Exactly one may have it each time.
func testTwoSameSID(t *testing.T, a, b *Catalog, _ *rawConn) {
	ctx := t.Context()
	for i := range 40 {
		sid := fmt.Sprintf("S-%02d", i)
		errA, errB := both(
			func() error { return insertAs(a, ctx, "a", "sa-"+sid, "", sid) },
			func() error { return insertAs(b, ctx, "b", "sb-"+sid, "", sid) })
		winner := oneWins(t, sid+" as two series ids", errA, errB, adapter.IdentifierNotUnique)
		if rec, err := b.Lookup(ctx, sid); err != nil || rec.Meta.Identifier != "s"+winner+"-"+sid {
			t.Fatalf("head of %s: %+v %v, want s%s-%s", sid, rec, err, winner, sid)
		}

		id := fmt.Sprintf("Q-%02d", i)
		errA, errB = both(
			func() error { return insertAs(a, ctx, "a", id, "", "") },
			func() error { return insertAs(b, ctx, "b", "qb-"+id, "", id) })
		switch oneWins(t, id+" as a PID and a series id", errA, errB, adapter.IdentifierNotUnique) {
		case "a":
			if rec, err := b.Lookup(ctx, id); err != nil || rec.Meta.Identifier != id || rec.Meta.SeriesID != "" {
				t.Fatalf("lookup of %s: %+v %v, want the object %s", id, rec, err, id)
			}
		case "b":
			if rec, err := a.Lookup(ctx, id); err != nil || rec.Meta.Identifier != "qb-"+id {
				t.Fatalf("lookup of %s: %+v %v, want the head qb-%s", id, rec, err, id)
			}
		}
	}
}

// rawConn is a connection to the instances' database of its own, and the
// application names of the instances' connections.
type rawConn struct {
	*sql.DB
	apps []string
}

// hold begins a transaction on raw and runs stmts in it, to hold locks that
// the instances will need.
func (raw *rawConn) hold(t *testing.T, stmts ...string) *sql.Tx {
	t.Helper()
	tx, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	for _, s := range stmts {
		if _, err := tx.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return tx
}

// waitBlocked waits until n connections of the instances wait for a lock
// (behind the holder, or behind one another in the holder's queue).
func (raw *rawConn) waitBlocked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got int
		if err := raw.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = ANY($1) AND wait_event_type = 'Lock'`, raw.apps).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections of the instances wait for a lock after 20s, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// behind starts fa and fb, waits until both wait for a lock, ends the holder
// h (commit or rollback) and returns their errors.
func behind(t *testing.T, raw *rawConn, h *sql.Tx, commit bool, fa, fb func() error) (errA, errB error) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { errA = fa() })
	wg.Go(func() { errB = fb() })
	raw.waitBlocked(t, 2)
	end := h.Rollback
	if commit {
		end = h.Commit
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return errA, errB
}

// testTwoSamePIDBehindALock has both instances insert the PID another
// transaction has inserted and not yet committed: neither sees it when it
// checks, both wait on the unique index, and when that transaction rolls back
// one wins and the other's unique violation is IdentifierNotUnique.
func testTwoSamePIDBehindALock(t *testing.T, a, b *Catalog, raw *rawConn) {
	ctx := t.Context()
	h := raw.hold(t, `INSERT INTO objects (pid, format_id, size, checksum_algorithm, checksum_value,
		rights_holder, archived, authoritative_mn, date_uploaded, date_modified, blob_key, sysmeta)
		VALUES ('locked', 'x', 0, 'MD5', 'x', 'x', false, 'x', 0, 0, 'raw', 'x')`)
	errA, errB := behind(t, raw, h, false,
		func() error { return insertAs(a, ctx, "a", "locked", "", "") },
		func() error { return insertAs(b, ctx, "b", "locked", "", "") })
	winner := oneWins(t, "locked", errA, errB, adapter.IdentifierNotUnique)
	if rec, err := b.Lookup(ctx, "locked"); err != nil || rec.BlobKey != winner {
		t.Fatalf("lookup %+v %v, want the record of %s", rec, err, winner)
	}
	l, err := a.List(ctx, adapter.ListQuery{Count: 10})
	if err != nil || l.Total != 1 {
		t.Fatalf("list %+v %v, want the one object", l, err)
	}
}

// testTwoChainBehindALock has both instances obsolete the same object while
// another transaction holds its row: the one that gets the row second must
// see that the first has obsoleted it (SELECT ... FOR UPDATE re-reads the
// row) and fail, so the chain does not branch.
func testTwoChainBehindALock(t *testing.T, a, b *Catalog, raw *rawConn) {
	ctx := t.Context()
	if err := insertAs(a, ctx, "a", "c0", "", "C"); err != nil {
		t.Fatal(err)
	}
	h := raw.hold(t, `SELECT 1 FROM objects WHERE pid = 'c0' FOR UPDATE`)
	errA, errB := behind(t, raw, h, true,
		func() error { return insertAs(a, ctx, "a", "c1-a", "c0", "C") },
		func() error { return insertAs(b, ctx, "b", "c1-b", "c0", "C") })
	winner := oneWins(t, "obsoleting c0", errA, errB, adapter.InvalidRequest)
	loser := map[string]string{"a": "b", "b": "a"}[winner]
	for _, c := range []*Catalog{a, b} {
		if rec, err := c.Lookup(ctx, "c0"); err != nil || rec.Meta.ObsoletedBy != "c1-"+winner || rec.Meta.SerialVersion != 2 {
			t.Fatalf("c0: %+v %v, want obsoleted by c1-%s once", rec, err, winner)
		}
		if rec, err := c.Lookup(ctx, "C"); err != nil || rec.Meta.Identifier != "c1-"+winner {
			t.Fatalf("head of C: %+v %v, want c1-%s", rec, err, winner)
		}
		if _, err := c.Lookup(ctx, "c1-"+loser); !adapter.IsKind(err, adapter.NotFound) {
			t.Fatalf("the losing successor c1-%s: %v, want NotFound", loser, err)
		}
	}
}

// testTwoChainNeverBranches extends one series from both instances as fast as
// they can, several workers each, every worker always obsoleting the head it
// last read: the series must end as one unbranched chain holding every
// successful insert.
func testTwoChainNeverBranches(t *testing.T, a, b *Catalog, _ *rawConn) {
	ctx := t.Context()
	if err := insertAs(a, ctx, "a", "n-0", "", "N"); err != nil {
		t.Fatal(err)
	}
	const workers, perWorker = 3, 10
	var conflicts atomic.Int64
	extend := func(c *Catalog, who string) error {
		for n := 0; n < perWorker; {
			head, err := c.Lookup(ctx, "N")
			if err != nil {
				return err
			}
			err = insertAs(c, ctx, who, fmt.Sprintf("n-%s-%02d", who, n), head.Meta.Identifier, "N")
			switch {
			case err == nil:
				n++
			case adapter.IsKind(err, adapter.InvalidRequest):
				conflicts.Add(1) // another got there first: read the head again
			default:
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	start := make(chan struct{})
	for i := range workers {
		for name, c := range map[string]*Catalog{"a": a, "b": b} {
			wg.Go(func() {
				<-start
				if err := extend(c, fmt.Sprintf("%s%d", name, i)); err != nil {
					errs <- err
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d inserts lost the race for the head", conflicts.Load())
	const total = 1 + 2*workers*perWorker

	// Walk the chain from its start, through b.
	l, err := b.List(ctx, adapter.ListQuery{Identifier: "N", Count: 1000})
	if err != nil || l.Total != total {
		t.Fatalf("the series: %v objects (%v), want %d", l.Total, err, total)
	}
	seen := map[string]bool{}
	pid, prev := "n-0", ""
	for pid != "" {
		if seen[pid] {
			t.Fatalf("the chain loops at %s", pid)
		}
		seen[pid] = true
		rec, err := b.Lookup(ctx, pid)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Meta.Obsoletes != prev {
			t.Fatalf("%s obsoletes %q, want %q", pid, rec.Meta.Obsoletes, prev)
		}
		prev, pid = pid, rec.Meta.ObsoletedBy
	}
	if len(seen) != l.Total {
		t.Fatalf("the chain from n-0 has %d objects, the series %d: it branched", len(seen), l.Total)
	}
	if head, err := a.Lookup(ctx, "N"); err != nil || head.Meta.Identifier != prev {
		t.Fatalf("head of N %+v %v, want the chain's end %s", head, err, prev)
	}
}

// testTwoReservations reserves one identifier through both instances at once,
// behind another transaction's uncommitted reservation that rolls back: for
// different subjects exactly one wins, for the same subject both succeed.
func testTwoReservations(t *testing.T, a, b *Catalog, raw *rawConn) {
	ctx := t.Context()
	for _, tc := range []struct {
		id, subjA, subjB string
	}{{"res-1", "alice", "bob"}, {"res-2", "carol", "carol"}} {
		h := raw.hold(t, fmt.Sprintf(`INSERT INTO reservations (id, subject, reserved) VALUES ('%s', 'raw', 0)`, tc.id))
		errA, errB := behind(t, raw, h, false,
			func() error { return a.Reserve(ctx, tc.id, tc.subjA) },
			func() error { return b.Reserve(ctx, tc.id, tc.subjB) })
		want := tc.subjA
		if tc.subjA != tc.subjB {
			if oneWins(t, tc.id, errA, errB, adapter.IdentifierNotUnique) == "b" {
				want = tc.subjB
			}
		} else if errA != nil || errB != nil {
			t.Fatalf("%s by %s twice: %v, %v", tc.id, tc.subjA, errA, errB)
		}
		for _, c := range []*Catalog{a, b} {
			if who, err := c.Reservation(ctx, tc.id); err != nil || who != want {
				t.Fatalf("%s held by %q (%v), want %q", tc.id, who, err, want)
			}
		}
	}
	// Sequentially, the other instance sees the reservation.
	if err := a.Reserve(ctx, "res-3", "dave"); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, "res-3", "erin"); !adapter.IsKind(err, adapter.IdentifierNotUnique) {
		t.Fatalf("res-3 by another subject through b: %v", err)
	}
}

// testTwoSeeEachOther checks that each instance's lists, lookups and logs see
// the other's writes at once (without a cache).
func testTwoSeeEachOther(t *testing.T, a, b *Catalog, _ *rawConn) {
	ctx := t.Context()
	listed := func(c *Catalog, q adapter.ListQuery) []string {
		t.Helper()
		q.Count = 100
		l, err := c.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if l.Total != len(l.ObjectInfo) {
			t.Fatalf("total %d with %d objects", l.Total, len(l.ObjectInfo))
		}
		var out []string
		for _, oi := range l.ObjectInfo {
			out = append(out, oi.Identifier)
		}
		return out
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	// Warm whatever each would cache.
	want("a lists", listed(a, adapter.ListQuery{}))
	want("b lists", listed(b, adapter.ListQuery{}))

	if err := insertAs(a, ctx, "a", "x1", "", ""); err != nil {
		t.Fatal(err)
	}
	want("b lists after a's insert", listed(b, adapter.ListQuery{}), "x1")
	if err := insertAs(b, ctx, "b", "x2", "", ""); err != nil {
		t.Fatal(err)
	}
	want("a lists after b's insert", listed(a, adapter.ListQuery{}), "x1", "x2")
	want("a lists page 2", func() []string {
		l, err := a.List(ctx, adapter.ListQuery{Start: 1, Count: 1})
		if err != nil || l.Total != 2 {
			t.Fatalf("page 2: %+v %v", l, err)
		}
		return []string{l.ObjectInfo[0].Identifier}
	}(), "x2")

	if _, err := b.Modify(ctx, "x1", func(sm *adapter.SystemMetadata) error {
		sm.FormatID = "text/csv"
		sm.DateSysMetadataModified = adapter.NewTime(time.Now())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec, err := a.Lookup(ctx, "x1"); err != nil || rec.Meta.FormatID != "text/csv" {
		t.Fatalf("a's lookup after b's modify: %+v %v", rec, err)
	}
	want("a lists csv after b's modify", listed(a, adapter.ListQuery{FormatID: "text/csv"}), "x1")
	want("a lists in order after b's modify", listed(a, adapter.ListQuery{}), "x2", "x1")

	if err := a.AddEvent(ctx, adapter.LogEntry{Identifier: "x1", Event: adapter.EventRead}); err != nil {
		t.Fatal(err)
	}
	if err := b.AddEvent(ctx, adapter.LogEntry{Identifier: "x2", Event: adapter.EventRead}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Catalog{"a": a, "b": b} {
		l, err := c.Events(ctx, adapter.LogQuery{Count: 10})
		if err != nil || l.Total != 2 {
			t.Fatalf("%s's log: %+v %v", name, l, err)
		}
	}

	if _, err := a.Delete(ctx, "x2"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup(ctx, "x2"); !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("b's lookup after a's delete: %v", err)
	}
	want("b lists after a's delete", listed(b, adapter.ListQuery{}), "x1")
	if _, err := b.Delete(ctx, "x2"); !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("deleting again through b: %v", err)
	}
}
