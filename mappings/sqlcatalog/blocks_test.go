package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// testBlockRows is the block size of these tests: small, so that a few
// hundred rows are cut into blocks as 2,048-row blocks would be by a million.
const testBlockRows = 64

// withBlockRows sets the rows per list block.
func withBlockRows(n int) Option { return func(c *config) { c.blockRows = n } }

// withMaxGranted sets the most access rows a signed-in list's seek reads.
func withMaxGranted(n int) Option { return func(c *config) { c.maxGranted = n } }

func TestSQLiteBlocks(t *testing.T) {
	t.Parallel()
	checkBlocks(t, sqliteOpener(WithCache(0, 0), withBlockRows(testBlockRows))(t).(*Catalog))
}

// TestSQLiteBlocksManyGranted: signed-in lists whose subjects were granted
// more than maxGranted rows are counted, and give the same pages.
func TestSQLiteBlocksManyGranted(t *testing.T) {
	t.Parallel()
	checkBlocks(t, sqliteOpener(WithCache(0, 0), withBlockRows(testBlockRows), withMaxGranted(8))(t).(*Catalog))
}

func TestSQLiteBlocksMigrate(t *testing.T) {
	t.Parallel()
	open := sqliteOpener(WithCache(0, 0), withBlockRows(testBlockRows))
	checkBlocksMigrate(t, open(t).(*Catalog), func() *Catalog { return open(t).(*Catalog) })
}

// checkBlocks runs writes that make blocks be cut, emptied and started below
// the first (creates with old dates, changes of dates, formats and access,
// deletes), and after each checks that object_blocks counts what the objects
// hold, and that every filter the blocks answer gives, at many starts, what
// counting and skipping gives.
func checkBlocks(t *testing.T, c *Catalog) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	formats := []string{"text/plain", "text/csv", "application/json"}
	nodes := []string{sqlcatalogtest.NodeID, "urn:node:other"}
	// Readers: the public, or some subjects only (lists of signed-in
	// callers count those apart from the blocks), or the rights holder alone.
	readers := func(subjects ...string) *adapter.AccessPolicy {
		return &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: subjects, Permission: []adapter.Permission{adapter.PermRead}}}}
	}
	policies := []*adapter.AccessPolicy{readers(adapter.SubjectPublic), readers(adapter.SubjectPublic, "CN=bob"),
		readers("CN=bob"), readers(adapter.SubjectAuthenticatedUser), readers("CN=carol", "CN=bob"), nil, nil}
	owners := []string{"CN=owner", "CN=alice"}
	next := 0
	newSM := func(date time.Time) *adapter.SystemMetadata {
		sm := sqlcatalogtest.SM(fmt.Sprintf("obj-%06d", next), adapter.NewTime(date))
		next++
		sm.FormatID = formats[rng.IntN(len(formats))]
		sm.AuthoritativeMemberNode = nodes[rng.IntN(len(nodes))]
		sm.RightsHolder = owners[rng.IntN(len(owners))]
		sm.AccessPolicy = policies[rng.IntN(len(policies))]
		return sm
	}
	var pids []string
	apply := func(n int, date func(i int) time.Time) {
		var b node.Batch
		for i := range n {
			sm := newSM(date(i))
			pids = append(pids, sm.Identifier)
			b.Records = append(b.Records, &node.Record{Meta: sm})
		}
		if _, err := c.Apply(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		run  func()
	}{
		// Many rows of one date, then later ones: the first block is cut.
		{"tied", func() { apply(160, func(int) time.Time { return t0 }) }},
		{"later", func() { apply(80, func(i int) time.Time { return t0.Add(time.Duration(i/4) * time.Second) }) }},
		// Rows before every block, and in the middle of existing ones.
		{"older", func() { apply(48, func(i int) time.Time { return t0.Add(-time.Duration(1+i%50) * time.Hour) }) }},
		{"between", func() {
			apply(48, func(i int) time.Time { return t0.Add(time.Duration(rng.IntN(1000)) * time.Second) })
		}},
		{"modify", func() {
			for range 150 {
				pid := pids[rng.IntN(len(pids))]
				_, err := c.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error {
					sm.FormatID = formats[rng.IntN(len(formats))]
					sm.AuthoritativeMemberNode = nodes[rng.IntN(len(nodes))]
					sm.AccessPolicy = policies[rng.IntN(len(policies))]
					sm.RightsHolder = owners[rng.IntN(len(owners))]
					sm.DateSysMetadataModified = adapter.NewTime(t0.Add(time.Duration(rng.IntN(3000)-1000) * time.Second))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"delete", func() {
			// Every row of the oldest blocks, and some elsewhere.
			l, err := c.List(ctx, adapter.ListQuery{Count: 144})
			if err != nil {
				t.Fatal(err)
			}
			err = c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
				var all change
				for i, oi := range l.ObjectInfo {
					if i < 132 || rng.IntN(10) == 0 {
						ch, _, err := c.deleteTx(ctx, tx, oi.Identifier)
						if err != nil {
							return nil, err
						}
						all.merge(ch)
					}
				}
				return &all, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Delete(ctx, pids[len(pids)-1]); err != nil {
				t.Fatal(err)
			}
		}},
		{"older again", func() { apply(16, func(i int) time.Time { return t0.Add(-time.Duration(100+i) * time.Hour) }) }},
	}
	for _, st := range steps {
		st.run()
		checkBlockCounts(t, c, st.name)
		checkBlockLists(t, c, st.name, t0)
	}
}

// checkBlockCounts compares each block's counts with the objects in its range.
func checkBlockCounts(t *testing.T, c *Catalog, step string) {
	t.Helper()
	ctx := t.Context()
	rows, err := c.db.QueryContext(ctx, `SELECT DISTINCT low_date, low_seq FROM object_blocks ORDER BY low_date, low_seq`)
	if err != nil {
		t.Fatal(err)
	}
	var lows []sortKey
	for rows.Next() {
		var k sortKey
		if err := rows.Scan(&k.t, &k.id); err != nil {
			t.Fatal(err)
		}
		lows = append(lows, k)
	}
	rows.Close()
	var objects, counted int
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM objects`).Scan(&objects); err != nil {
		t.Fatal(err)
	}
	for i, lo := range lows {
		var hi *sortKey
		if i+1 < len(lows) {
			hi = &lows[i+1]
		}
		before := counted
		for _, pub := range []int{0, 1} {
			want := map[[2]string]int{}
			for _, p := range keyRange("o.date_modified", "o.seq", &lo, hi) {
				q := `SELECT o.format_id, o.authoritative_mn, COUNT(*) FROM objects o WHERE ` +
					joinConds([]string{p.cond, "(EXISTS (SELECT 1 FROM access a WHERE a.pid = o.pid AND a.subject = 'public')) = (? = 1)"}) +
					` GROUP BY o.format_id, o.authoritative_mn`
				rows, err := c.db.QueryContext(ctx, c.d.q(q), append(slices.Clone(p.args), pub)...)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var f, a string
					var n int
					if err := rows.Scan(&f, &a, &n); err != nil {
						t.Fatal(err)
					}
					want[[2]string{f, a}] += n
				}
				rows.Close()
			}
			got := map[[2]string]int{}
			rows, err := c.db.QueryContext(ctx, c.d.q(`SELECT format_id, authoritative_mn, n FROM object_blocks
				WHERE low_date = ? AND low_seq = ? AND public = ?`), lo.t, lo.id, pub)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var f, a string
				var n int
				if err := rows.Scan(&f, &a, &n); err != nil {
					t.Fatal(err)
				}
				got[[2]string{f, a}] = n
				counted += n
			}
			rows.Close()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: block %d (%v) public %d counts %v; the objects hold %v", step, i, lo, pub, got, want)
			}
		}
		if n := counted - before; n > 2*c.blockRows {
			t.Fatalf("%s: block %d (%v) holds %d rows, more than %d", step, i, lo, n, 2*c.blockRows)
		}
	}
	if counted != objects {
		t.Fatalf("%s: the blocks count %d objects; there are %d", step, counted, objects)
	}
	checkReaderCounts(t, c, step, lows)
	if len(lows) > 0 && lows[0] != lowest {
		var below int
		c.db.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*) FROM objects WHERE date_modified < ? OR (date_modified = ? AND seq < ?)`),
			lows[0].t, lows[0].t, lows[0].id).Scan(&below)
		if below > 0 {
			t.Fatalf("%s: %d objects sort before the first block", step, below)
		}
	}
}

// checkReaderCounts compares reader_blocks with the access rows of the
// objects that are not public in each of the blocks lows.
func checkReaderCounts(t *testing.T, c *Catalog, step string, lows []sortKey) {
	t.Helper()
	ctx := t.Context()
	rows, err := c.db.QueryContext(ctx, `SELECT o.date_modified, o.seq, o.format_id, o.authoritative_mn, a.subject
		FROM objects o JOIN access a ON a.pid = o.pid
		WHERE NOT EXISTS (SELECT 1 FROM access p WHERE p.pid = o.pid AND p.subject = 'public')`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for rows.Next() {
		var k sortKey
		var f, a, s string
		if err := rows.Scan(&k.t, &k.id, &f, &a, &s); err != nil {
			t.Fatal(err)
		}
		i, found := slices.BinarySearchFunc(lows, k, func(l, k sortKey) int {
			if k.less(l) {
				return 1
			}
			if l.less(k) {
				return -1
			}
			return 0
		})
		if !found {
			i--
		}
		if i < 0 {
			t.Fatalf("%s: object %v sorts before every block", step, k)
		}
		want[fmt.Sprint(s, lows[i], f, a)]++
	}
	rows.Close()
	got := map[string]int{}
	rows, err = c.db.QueryContext(ctx, `SELECT subject, low_date, low_seq, format_id, authoritative_mn, n FROM reader_blocks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k sortKey
		var f, a, s string
		var n int
		if err := rows.Scan(&s, &k.t, &k.id, &f, &a, &n); err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprint(s, k, f, a)] = n
	}
	rows.Close()
	if !maps.Equal(got, want) {
		t.Fatalf("%s: reader blocks\n%v\nthe access rows of objects that are not public\n%v", step, got, want)
	}
	if len(want) == 0 {
		t.Fatalf("%s: no object that is not public", step)
	}
}

// checkBlockLists compares pages and totals through the blocks with those of
// counting and skipping.
func checkBlockLists(t *testing.T, c *Catalog, step string, t0 time.Time) {
	t.Helper()
	at := func(s int) adapter.Time { return adapter.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	queries := []adapter.ListQuery{
		{},
		{FromDate: at(0)},
		{FromDate: at(1), ToDate: at(500)},
		{ToDate: at(0)},
		{FromDate: at(-3600 * 30), ToDate: at(0)},
		{FromDate: at(0), ToDate: adapter.NewTime(t0.Add(time.Millisecond))},
		{FormatID: "text/csv"},
		{FormatID: "text/csv", FromDate: at(100), ToDate: at(900)},
		{NodeID: "urn:node:other"},
		{ExcludeReplicas: true, FromDate: at(-3600 * 20)},
		{ReadableBy: []string{adapter.SubjectPublic}},
		{ReadableBy: []string{adapter.SubjectPublic}, FormatID: "application/json", ToDate: at(700)},
		// Signed-in callers: the public's objects and what was granted to them.
		{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=alice"}},
		{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=bob"}, FromDate: at(1), ToDate: at(500)},
		{ReadableBy: []string{adapter.SubjectPublic, "CN=carol", "CN=nobody"}, FormatID: "text/csv"},
		{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=owner"}, ExcludeReplicas: true, FromDate: at(-3600 * 20)},
		// Without the public (counted and skipped).
		{ReadableBy: []string{"CN=bob"}},
	}
	for i, q := range queries {
		var total int
		for _, start := range []int{0, 1, testBlockRows - 1, testBlockRows, 2*testBlockRows + 2, 280, 640} {
			for _, count := range []int{0, 7} {
				q.Start, q.Count = start, count
				total = listAsCounted(t, c, q, fmt.Sprintf("%s: query %d", step, i)).Total
			}
		}
		if i == 0 && total == 0 {
			t.Fatalf("%s: no objects listed", step)
		}
	}
}

// grantsOf is what a seek of a signed-in list of the public and readers
// counts apart from the public's blocks.
func grantsOf(t *testing.T, c *Catalog, readers ...string) (granted, error) {
	t.Helper()
	f := newListFilter(adapter.ListQuery{ReadableBy: append([]string{adapter.SubjectPublic}, readers...)}, c.nodeID)
	bf, ok := f.blockFilter()
	if !ok {
		t.Fatal("blocks do not answer a signed-in list")
	}
	tx, err := c.db.BeginTx(t.Context(), c.d.readTx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	return c.grants(t.Context(), tx, pageQuery{table: "objects o", keyT: "o.date_modified", keyID: "o.seq"}, f, bf.others)
}

// listAsCounted lists q through the blocks and fails unless counting and
// skipping gives the same list, which it returns.
func listAsCounted(t *testing.T, c *Catalog, q adapter.ListQuery, what string) *adapter.ObjectList {
	t.Helper()
	c.countLists = true
	want, err := c.List(t.Context(), q)
	c.countLists = false
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.List(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s (%+v): through the blocks\n%v\nwant\n%v", what, q, got, want)
	}
	return want
}

// checkBlocksMigrate: a catalog from before the blocks gets them when opened,
// and its rows (the XML only, the later checksums in rows of checksums) read
// as they did.
// toSchema13 undoes schemas 16 (the reader blocks), 15 (the kept newest
// date) and 14 (the access rows' public).
var toSchema13 = []string{`DROP TABLE reader_blocks`, `DROP TABLE newest_date`, `DROP INDEX access_subject`, `ALTER TABLE access DROP COLUMN public`, `CREATE INDEX access_subject ON access (subject, pid)`}

func checkBlocksMigrate(t *testing.T, c *Catalog, reopen func() *Catalog) {
	ctx := t.Context()
	var b node.Batch
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 160 {
		sm := sqlcatalogtest.SM(fmt.Sprintf("m-%05d", i), adapter.NewTime(t0.Add(time.Duration(i/7)*time.Second)))
		if i%4 == 0 {
			sm.FormatID = "text/csv"
		}
		if i%5 == 0 {
			sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic, "CN=reader"}, Permission: []adapter.Permission{adapter.PermRead}}}}
		}
		rec := &node.Record{Meta: sm}
		if i%3 == 1 {
			rec.Checksums = map[string]string{"MD5": fmt.Sprintf("md5-%d", i), "SHA-256": fmt.Sprintf("sha256-%d", i)}
		}
		b.Records = append(b.Records, rec)
	}
	if _, err := c.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	var reads []adapter.LogEntry
	for i := range 30 {
		reads = append(reads, adapter.LogEntry{Identifier: fmt.Sprintf("m-%05d", i%10), Event: adapter.EventRead, Subject: "public"})
	}
	if err := c.AddEvents(ctx, reads); err != nil {
		t.Fatal(err)
	}
	// As schema version 15 left it: no reader blocks.
	for _, q := range []string{`DROP TABLE reader_blocks`, `UPDATE catalog_schema SET version = 15`} {
		if _, err := c.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	c = reopen()
	checkBlockCounts(t, c, "reader blocks migrated")
	// As schema version 4 left it: no blocks, no meta, the XML in sysmeta,
	// the later checksums in checksums, the log indexed by PID.
	if err := c.toOldLayout(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range append(slices.Clip(toSchema13), `DROP TABLE event_pids`, `DROP TABLE event_pids_mark`, `DROP TABLE event_pid_runs`, `CREATE INDEX events_pid ON events (pid, date_logged, entry_id)`, `DROP TABLE object_blocks`, `ALTER TABLE objects DROP COLUMN meta`, `ALTER TABLE objects DROP COLUMN sums`, `DROP TABLE changes`, `DROP TABLE leases`, `DROP TABLE jobs`, `UPDATE catalog_schema SET version = 4`) {
		if _, err := c.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	c = reopen()
	var blocks int
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT low_date) FROM object_blocks`).Scan(&blocks); err != nil {
		t.Fatal(err)
	}
	if blocks != 3 {
		t.Errorf("160 objects in %d blocks of %d, want 3", blocks, testBlockRows)
	}
	checkBlockCounts(t, c, "migrated")
	checkBlockLists(t, c, "migrated", t0)
	// Rows from before meta are read from their XML, with their checksums.
	rec, err := c.Lookup(ctx, "m-00004")
	if err != nil || rec.Meta.FormatID != "text/csv" || !rec.Meta.DateUploaded.Equal(t0) ||
		!maps.Equal(rec.Checksums, map[string]string{"MD5": "md5-4", "SHA-256": "sha256-4"}) {
		t.Errorf("Lookup of a row without meta: %+v, %v", rec, err)
	}
	if rec, err := c.Lookup(ctx, "m-00005"); err != nil || rec.Checksums != nil {
		t.Errorf("Lookup of a row without later checksums: %+v, %v", rec, err)
	}
	var left int
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM checksums`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows left in checksums (%v)", left, err)
	}
	// Access rows say whether their object is public (schema 14).
	var public, wrong int
	if err := c.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(public), 0), COALESCE(SUM(CASE WHEN public <> (CASE WHEN EXISTS (SELECT 1 FROM access p
		WHERE p.pid = a.pid AND p.subject = 'public') THEN 1 ELSE 0 END) THEN 1 ELSE 0 END), 0) FROM access a`).Scan(&public, &wrong); err != nil || public != 3*32 || wrong != 0 {
		t.Errorf("access rows of public objects marked public: %d, want %d; wrongly marked %d (%v)", public, 3*32, wrong, err)
	}
	// The log is indexed by PID from the migration on.
	var indexed int
	if err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM event_pids`).Scan(&indexed); err != nil || indexed != len(reads) {
		t.Errorf("%d of %d events indexed by PID (%v)", indexed, len(reads), err)
	}
	if l, err := c.Events(ctx, adapter.LogQuery{IDFilter: "m-00003", PIDsOnly: true, Count: 10}); err != nil || l.Total != 3 {
		t.Errorf("the log of m-00003 after the migration: %+v, %v", l, err)
	}
}

// testBlocksTwoInstances: two processes sharing a PostgreSQL catalog write
// at once, into the same blocks and making them be cut; the counts stay those
// of the objects.
func testBlocksTwoInstances(t *testing.T) {
	dsn := pgtest.Start(t)
	cats := []*Catalog{openPostgres(t, dsn, WithCache(0, 0), WithRecordCache(0), withBlockRows(testBlockRows)), openPostgres(t, dsn, WithCache(0, 0), WithRecordCache(0), withBlockRows(testBlockRows))}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(cats))
	for i, c := range cats {
		wg.Go(func() {
			for j := range 6 {
				var b node.Batch
				for k := range 25 {
					date := t0.Add(time.Duration(k%40) * time.Second)
					b.Records = append(b.Records, &node.Record{Meta: sqlcatalogtest.SM(fmt.Sprintf("two-%d-%02d-%03d", i, j, k), adapter.NewTime(date))})
				}
				if _, err := c.Apply(t.Context(), &b); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("written in %v", time.Since(began))
	checkBlockCounts(t, cats[0], "two instances")
	t.Logf("counts checked in %v", time.Since(began))
	checkBlockLists(t, cats[1], "two instances", t0)
	t.Logf("lists checked in %v", time.Since(began))
}

// TestSQLiteOwnerOfPublicObjectsSeeks: the rights holder of many public
// objects (a harvested catalog's owner) was "granted" each of them, and a
// list of theirs was counted, however few private objects they held. Only
// the grants of objects that are not public decide, and follow the object
// when its policy changes.
func TestSQLiteOwnerOfPublicObjectsSeeks(t *testing.T) {
	t.Parallel()
	checkOwnerOfPublicObjectsSeeks(t, sqliteOpener(WithCache(0, 0), withMaxGranted(8))(t).(*Catalog))
}

func checkOwnerOfPublicObjectsSeeks(t *testing.T, c *Catalog) {
	ctx := t.Context()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	public := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
	var b node.Batch
	for i := range 40 {
		sm := sqlcatalogtest.SM(fmt.Sprintf("owned-%02d", i), adapter.NewTime(t0.Add(time.Duration(i)*time.Second)))
		if i%10 != 0 {
			sm.AccessPolicy = public
		}
		b.Records = append(b.Records, &node.Record{Meta: sm})
	}
	if _, err := c.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	granted := func() []sortKey {
		t.Helper()
		g, err := grantsOf(t, c, "CN=owner")
		if err != nil || g.heavy != "" {
			t.Fatalf("the owner of 36 public objects and 4 private ones (at most 8 read): %+v, %v", g, err)
		}
		return g.keys
	}
	if keys := granted(); len(keys) != 4 {
		t.Fatalf("%d keys granted apart from the public, want the 4 private objects", len(keys))
	}
	// One private object made public and one public made private.
	for pid, p := range map[string]*adapter.AccessPolicy{"owned-00": public, "owned-01": nil} {
		if _, err := c.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error { sm.AccessPolicy = p; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	keys := granted()
	var pids []string
	for _, k := range keys {
		var pid string
		if err := c.db.QueryRowContext(ctx, c.d.q(`SELECT pid FROM objects WHERE seq = ?`), k.id).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if want := []string{"owned-01", "owned-10", "owned-20", "owned-30"}; !slices.Equal(pids, want) {
		t.Fatalf("granted apart from the public after the changes: %v, want %v", pids, want)
	}
	l, err := c.List(ctx, adapter.ListQuery{ReadableBy: []string{adapter.SubjectPublic, "CN=owner"}, Count: 100})
	if err != nil || l.Total != 40 || l.Count != 40 {
		t.Fatalf("the owner's list: %+v %v, want all 40", l, err)
	}
}

// TestSQLiteHeavyReaderSeeks: a signed-in caller one of whose subjects was
// given more than maxGranted objects (a curators' group, the owner of the
// private objects) has that subject's share counted by the reader blocks
// and the rest listed one by one, without what the heavy subject was given
// too; two such subjects are counted. Every page and total is the counted
// one's.
func TestSQLiteHeavyReaderSeeks(t *testing.T) {
	t.Parallel()
	checkHeavyReaderSeeks(t, sqliteOpener(WithCache(0, 0), withBlockRows(testBlockRows), withMaxGranted(12))(t).(*Catalog))
}

func checkHeavyReaderSeeks(t *testing.T, c *Catalog) {
	ctx := t.Context()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := func(subjects ...string) *adapter.AccessPolicy {
		return &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: subjects, Permission: []adapter.Permission{adapter.PermRead}}}}
	}
	// 300 objects: every third public; the others owned by CN=owner, but
	// for every 40th, CN=bob's alone; every 20th granted to CN=bob, and
	// every other one of the rest to CN=curators.
	var b node.Batch
	for i := range 300 {
		sm := sqlcatalogtest.SM(fmt.Sprintf("h-%03d", i), adapter.NewTime(t0.Add(time.Duration(i/2)*time.Second)))
		sm.RightsHolder = "CN=owner"
		switch {
		case i%3 == 0:
			sm.AccessPolicy = policy(adapter.SubjectPublic)
		case i%40 == 1:
			sm.RightsHolder, sm.AccessPolicy = "CN=someone", policy("CN=bob")
		case i%20 == 1:
			sm.AccessPolicy = policy("CN=bob")
		case i%2 == 0:
			sm.AccessPolicy = policy("CN=curators")
		}
		if i%3 == 2 {
			sm.FormatID = "text/csv"
		}
		b.Records = append(b.Records, &node.Record{Meta: sm})
	}
	if _, err := c.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	grants := func(readers ...string) (granted, error) { return grantsOf(t, c, readers...) }
	// With at most 12 read one by one: bob was given 10 objects, 4 of them
	// owned by CN=owner (194 private objects), CN=curators 100.
	if g, err := grants("CN=owner", "CN=bob"); err != nil || g.heavy != "CN=owner" || len(g.keys) != 6 {
		t.Fatalf("owner and bob: heavy %q with %d keys besides (%v), want CN=owner and bob's 6 others", g.heavy, len(g.keys), err)
	}
	if g, err := grants("CN=bob", "CN=nobody"); err != nil || g.heavy != "" || len(g.keys) != 10 {
		t.Fatalf("bob alone: heavy %q with %d keys (%v), want bob's 10 keys one by one", g.heavy, len(g.keys), err)
	}
	if _, err := grants("CN=owner", "CN=curators"); !errors.Is(err, errNoSeek) {
		t.Fatalf("two subjects given more than 12: %v, want them counted", err)
	}
	at := func(s int) adapter.Time { return adapter.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	for _, q := range []adapter.ListQuery{
		{ReadableBy: []string{adapter.SubjectPublic, "CN=owner", "CN=bob"}},
		{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=owner", "CN=bob"}, FormatID: "text/csv"},
		{ReadableBy: []string{adapter.SubjectPublic, "CN=bob", "CN=owner"}, FromDate: at(20), ToDate: at(120)},
		{ReadableBy: []string{adapter.SubjectPublic, "CN=curators"}, FromDate: at(33)},
		{ReadableBy: []string{adapter.SubjectPublic, "CN=owner", "CN=curators"}},
	} {
		for _, start := range []int{0, 1, testBlockRows + 3, 150, 280} {
			for _, count := range []int{0, 9} {
				q.Start, q.Count = start, count
				listAsCounted(t, c, q, "reader blocks")
			}
		}
	}
}
