package sqlcatalog

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// bulkLoad inserts objects without the chain checks, in one transaction, for
// building large fixtures.
func (c *Catalog) bulkLoad(ctx context.Context, sms []*adapter.SystemMetadata) error {
	err := c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		var ch change
		for _, sm := range sms {
			// The node keeps the checksums it computed besides the one of
			// the system metadata: two for an object created through it.
			s := &stored{meta: sm, blobKey: sm.Identifier, sums: map[string]string{
				"MD5": "900150983cd24fb0d6963f7d28e17f72", "SHA-256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}}
			if err := c.insertRow(ctx, tx, s); err != nil {
				return nil, err
			}
			ch.rows = append(ch.rows, rowChange{after: s.info()})
		}
		return &ch, nil
	})
	c.cache.reset()
	return err
}

// bulkEvents appends n events, one every 10 ms over 9 PIDs in 10, in one
// transaction.
func (c *Catalog) bulkEvents(ctx context.Context, n int) error {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	err := c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		st, err := tx.PrepareContext(ctx, c.d.q(`INSERT INTO events
			(pid, ip, user_agent, subject, event, date_logged, node_id) VALUES (?, ?, ?, ?, ?, ?, ?)`))
		if err != nil {
			return nil, err
		}
		defer st.Close()
		events := []string{adapter.EventRead, adapter.EventRead, adapter.EventRead, adapter.EventCreate}
		for i := range n {
			if _, err := st.ExecContext(ctx, fmt.Sprintf("obj-%07d", i%200000), "10.0.0.1", "bench/1", "public",
				events[i%len(events)], t0+int64(i/3)*10, sqlcatalogtest.NodeID); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	c.cache.reset()
	return err
}

// benchObjects builds a catalog of n objects: one new date every 3 objects
// (every object the same date when tied), three formats, every third object
// public.
func benchObjects(b *testing.B, n int, tied bool) *Catalog {
	b.Helper()
	return benchObjectsAt(b, filepath.Join(b.TempDir(), "bench.db"), n, tied)
}

// benchObjectsAt is benchObjects in the database file path.
func benchObjectsAt(b *testing.B, path string, n int, tied bool) *Catalog {
	b.Helper()
	c, err := OpenSQLite(path, WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	loadBenchObjects(b, c, n, tied)
	return c
}

// loadBenchObjects inserts the fixture's n objects (benchSMs) into c.
func loadBenchObjects(b *testing.B, c *Catalog, n int, tied bool) {
	start := time.Now()
	for i := 0; i < n; i += benchBatch {
		if err := c.bulkLoad(b.Context(), benchSMs(i, min(i+benchBatch, n), tied)); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d objects in %v", n, time.Since(start).Round(time.Millisecond))
}

// benchBatch is how many objects one transaction of a fixture inserts.
const benchBatch = 20000

// benchSMs is the system metadata of the fixture's objects from to to: one
// every third of a second (all at one date if tied), three formats, every
// third public (owned by CN=curator, the others by CN=owner), every tenth a
// replica of another node's object.
func benchSMs(from, to int, tied bool) []*adapter.SystemMetadata {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	formats := []string{"text/plain", "text/csv", "application/json"}
	public := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	var sms []*adapter.SystemMetadata
	for j := from; j < to; j++ {
		date := t0.Add(time.Duration(j/3) * time.Second)
		if tied {
			date = t0
		}
		sm := sqlcatalogtest.SM(fmt.Sprintf("obj-%07d", j), adapter.NewTime(date))
		sm.FormatID = formats[j%3]
		if j%3 == 0 {
			sm.AccessPolicy = public
			sm.RightsHolder = "CN=curator" // the owner of the public objects
		}
		if j%10 == 9 {
			sm.AuthoritativeMemberNode = "urn:node:other" // a replica
		}
		sms = append(sms, sm)
	}
	return sms
}

// benchPages runs the paging benchmarks of one list.
func benchPages(b *testing.B, c *Catalog, n, mid int, list func(start, count int) (int, error)) {
	const count = 1000
	page := func(b *testing.B, start int) {
		got, err := list(start, count)
		if err != nil {
			b.Fatal(err)
		}
		if got != min(count, n-start) {
			b.Fatalf("page at %d has %d entries", start, got)
		}
	}
	for _, start := range []int{0, mid} {
		b.Run(fmt.Sprintf("start=%d", start), func(b *testing.B) {
			page(b, start) // the first request at a start pays once for the skip
			b.ResetTimer()
			for b.Loop() {
				page(b, start)
			}
		})
		b.Run(fmt.Sprintf("start=%d/cold", start), func(b *testing.B) {
			for b.Loop() {
				c.cache.reset() // count, skip and page on every request
				page(b, start)
			}
		})
	}
	b.Run("harvest", func(b *testing.B) {
		pages := 0
		for b.Loop() {
			c.cache.reset()
			for s := 0; s < n; s += count {
				page(b, s)
				pages++
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
	})
}

// BenchmarkList: listObjects over 200,000 objects, pages of 1,000.
func BenchmarkList(b *testing.B) {
	const n = 200000
	c := benchObjects(b, n, false)
	ctx := b.Context()
	b.Run("all", func(b *testing.B) {
		benchPages(b, c, n, n/2, func(start, count int) (int, error) {
			l, err := c.List(ctx, adapter.ListQuery{Start: start, Count: count})
			if err != nil {
				return 0, err
			}
			if l.Total != n {
				return 0, fmt.Errorf("total %d", l.Total)
			}
			return l.Count, nil
		})
	})
	b.Run("public", func(b *testing.B) {
		benchPages(b, c, n/3+1, n/6, func(start, count int) (int, error) {
			l, err := c.List(ctx, adapter.ListQuery{Start: start, Count: count, ReadableBy: []string{"public", "CN=someone"}})
			if err != nil {
				return 0, err
			}
			return l.Count, nil
		})
	})
}

// BenchmarkListTied: listObjects over 100,000 objects of one date, where
// only the second half of the sort key tells rows apart.
func BenchmarkListTied(b *testing.B) {
	const n = 100000
	c := benchObjects(b, n, true)
	benchPages(b, c, n, n*9/10, func(start, count int) (int, error) {
		l, err := c.List(b.Context(), adapter.ListQuery{Start: start, Count: count})
		if err != nil {
			return 0, err
		}
		return l.Count, nil
	})
}

// BenchmarkEvents: getLogRecords over 1,000,000 events, pages of 1,000.
func BenchmarkEvents(b *testing.B) {
	const n = 1000000
	c, err := OpenSQLite(filepath.Join(b.TempDir(), "bench.db"), WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := c.bulkEvents(b.Context(), n); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d events in %v", n, time.Since(start).Round(time.Millisecond))
	ctx := b.Context()
	b.Run("all", func(b *testing.B) {
		benchPages(b, c, n, n/2, func(start, count int) (int, error) {
			l, err := c.Events(ctx, adapter.LogQuery{Start: start, Count: count})
			if err != nil {
				return 0, err
			}
			if l.Total != n {
				return 0, fmt.Errorf("total %d", l.Total)
			}
			return l.Count, nil
		})
	})
	b.Run("event=create", func(b *testing.B) {
		benchPages(b, c, n/4, n/8, func(start, count int) (int, error) {
			l, err := c.Events(ctx, adapter.LogQuery{Start: start, Count: count, Event: adapter.EventCreate})
			if err != nil {
				return 0, err
			}
			return l.Count, nil
		})
	})
}

// BenchmarkInsert: durable creates from 8 goroutines, sharing commits (group
// commit) and, in the same run, each committing alone (the previous design):
// ns/op is the former's, alone-ns/op the latter's and x-alone their ratio of
// rates.
//
//	go test -run '^$' -bench BenchmarkInsert -benchtime 5000x ./mappings/sqlcatalog/
func BenchmarkInsert(b *testing.B) {
	const workers = 8
	run := func(alone bool) time.Duration {
		c, err := OpenSQLite(filepath.Join(b.TempDir(), fmt.Sprintf("alone-%v.db", alone)), WithNodeID(sqlcatalogtest.NodeID))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		c.commitAlone = alone
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
					sm := sqlcatalogtest.SM(fmt.Sprintf("ins-%d", i), adapter.Now())
					if err := c.Insert(b.Context(), &node.Record{Meta: sm}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	grouped, alone := run(false), run(true)
	b.StopTimer()
	b.ReportMetric(float64(grouped.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(alone.Nanoseconds())/float64(b.N), "alone-ns/op")
	b.ReportMetric(alone.Seconds()/grouped.Seconds(), "x-alone")
}

var (
	benchN       = flag.Int("objects", 1000000, "objects of BenchmarkListNewFilter")
	benchCatalog = flag.String("catalog", "", "database file of BenchmarkListNewFilter: used if it exists (built with the same -objects), else built there and kept")
)

// BenchmarkListNewFilter: the first page (1,000 entries) of a filter the
// catalog has not seen, at start 0 and on the last page, and the total of a
// date window (count=0), over -objects objects; "count" is the baseline, the
// catalog as it was (counting the filter's rows, then skipping to start; 2 MiB
// page cache, no memory map), "blocks" the catalog as it runs, on the same
// file. Every iteration forgets the paging cache.
func BenchmarkListNewFilter(b *testing.B) {
	n, path := *benchN, filepath.Join(b.TempDir(), "bench.db")
	if *benchCatalog != "" {
		path = *benchCatalog
	}
	if _, err := os.Stat(path); err != nil {
		benchObjectsAt(b, path, n, false).Close()
	}
	c, err := OpenSQLite(path, WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// The baseline: the code before, with SQLite's default memory.
	before, err := OpenSQLite(path, WithNodeID(sqlcatalogtest.NodeID), WithSQLiteMemory(2<<20, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer before.Close()
	before.countLists = true
	benchNewFilters(b, before, c, n)
}

// BenchmarkListNewFilterPostgres: BenchmarkListNewFilter on a real
// PostgreSQL server (pgtest), the same -objects loaded into it first;
// "count" is a second catalog on the same schema that counts and skips.
//
//	go test -run '^$' -bench ListNewFilterPostgres -benchtime 5x ./mappings/sqlcatalog/
func BenchmarkListNewFilterPostgres(b *testing.B) {
	n, dsn := *benchN, pgtest.Start(b)
	c, err := OpenPostgres(dsn, WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	loadBenchObjects(b, c, n, false)
	if _, err := c.db.ExecContext(b.Context(), `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	before, err := OpenPostgres(dsn, WithNodeID(sqlcatalogtest.NodeID))
	if err != nil {
		b.Fatal(err)
	}
	defer before.Close()
	before.countLists = true
	benchNewFilters(b, before, c, n)
}

// benchNewFilters runs the filters of BenchmarkListNewFilter on before (the
// baseline) and after, two catalogs of the same n objects.
func benchNewFilters(b *testing.B, before, after *Catalog, n int) {
	ctx := b.Context()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	date := func(i int) adapter.Time { return adapter.NewTime(t0.Add(time.Duration(i/3) * time.Second)) }
	filters := []struct {
		name string
		q    adapter.ListQuery
	}{
		{"all", adapter.ListQuery{}},
		{"fromDate", adapter.ListQuery{FromDate: date(n / 10)}},
		{"formatId", adapter.ListQuery{FormatID: "text/csv"}},
		{"nodeId", adapter.ListQuery{NodeID: "urn:node:other"}},
		{"replicaStatus=false", adapter.ListQuery{ExcludeReplicas: true}},
		{"public", adapter.ListQuery{ReadableBy: []string{adapter.SubjectPublic}}},
		{"signed-in", adapter.ListQuery{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=reader"}}},
		{"owner", adapter.ListQuery{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=owner"}}},
		{"curator", adapter.ListQuery{ReadableBy: []string{adapter.SubjectPublic, adapter.SubjectAuthenticatedUser, "CN=curator"}}},
		{"identifier", adapter.ListQuery{Identifier: fmt.Sprintf("obj-%07d", n/2)}},
	}
	run := func(b *testing.B, q adapter.ListQuery, want int) {
		for _, c := range []*Catalog{before, after} {
			mode := "blocks"
			if c.countLists {
				mode = "count"
			}
			b.Run(mode, func(b *testing.B) {
				for b.Loop() {
					c.cache.reset()
					l, err := c.List(ctx, q)
					if err != nil {
						b.Fatal(err)
					}
					if l.Count != want {
						b.Fatalf("%d entries, want %d", l.Count, want)
					}
				}
			})
		}
	}
	for _, f := range filters {
		q := f.q
		q.Count = 0
		l, err := after.List(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		total := l.Total
		for _, start := range slices.Compact([]int{0, max(total-1000, 0)}) {
			q := f.q
			q.Start, q.Count = start, 1000
			b.Run(fmt.Sprintf("%s/start=%d", f.name, start), func(b *testing.B) { run(b, q, min(1000, total-start)) })
		}
	}
	b.Run("window/count=0", func(b *testing.B) {
		run(b, adapter.ListQuery{FromDate: date(n / 4), ToDate: date(3 * n / 4)}, 0)
	})
}

var benchLookups = flag.Int("lookups", 200000, "objects of BenchmarkLookupMiss, without -catalog")

// lookupCatalog is the catalog of the lookup benchmarks and its number of
// objects: -catalog, or one of -lookups objects built here.
func lookupCatalog(b *testing.B) (int, string) {
	n, path := *benchLookups, filepath.Join(b.TempDir(), "bench.db")
	if *benchCatalog != "" {
		n, path = *benchN, *benchCatalog
	}
	if _, err := os.Stat(path); err != nil {
		benchObjectsAt(b, path, n, false).Close()
	}
	return n, path
}

// BenchmarkLookupMiss: Lookup of random PIDs among -lookups objects without
// the record cache (every lookup reads the database), as a node serving
// random gets over a large catalog does. In the same loop, alternating:
// "before" is the catalog as it was: rows that also carry the system
// metadata's XML, the later checksums (two per object, as the node keeps) in
// rows of checksums, read by joining them; "after" the catalog as it is: the
// JSON only and the checksums in the row, one row read. ns/op is after's; x-before the speed
// ratio after/before; B/object the database's size per object.
//
//	go test -run '^$' -bench BenchmarkLookupMiss -benchtime 20000x ./mappings/sqlcatalog/
func BenchmarkLookupMiss(b *testing.B) {
	n, path := lookupCatalog(b)
	fat := filepath.Join(b.TempDir(), "fat.db")
	if err := copyFile(path, fat); err != nil {
		b.Fatal(err)
	}
	before, err := OpenSQLite(fat, WithRecordCache(0))
	if err != nil {
		b.Fatal(err)
	}
	defer before.Close()
	if err := before.toOldLayout(b.Context()); err != nil {
		b.Fatal(err)
	}
	after, err := OpenSQLite(path, WithRecordCache(0))
	if err != nil {
		b.Fatal(err)
	}
	defer after.Close()
	ctx := b.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	var spent [2]time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			k := (i + j) % 2
			pid := fmt.Sprintf("obj-%07d", rng.IntN(n))
			start := time.Now()
			var rec *node.Record
			var err error
			if k == 0 {
				rec, err = after.Lookup(ctx, pid)
			} else {
				rec, err = before.oldLookup(ctx, pid)
			}
			spent[k] += time.Since(start)
			if err != nil || rec == nil || rec.Meta.Identifier != pid {
				b.Fatalf("%s: %v %v", pid, rec, err)
			}
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "before-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-before")
	for name, c := range map[string]*Catalog{"B/object": after, "before-B/object": before} {
		var pages, size int64
		if err := c.db.QueryRowContext(ctx, `SELECT page_count, page_size FROM pragma_page_count, pragma_page_size`).Scan(&pages, &size); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(pages*size)/float64(n), name)
	}
}

// BenchmarkLookupCompact: Lookup of random PIDs among -lookups objects, as a
// node serving random gets over a large catalog does, alternating in one
// loop: "db" without the record cache (every lookup reads the database),
// the other with one record decoded and the compact tier holding them all
// (read once each before the timer starts). ns/op is the compact tier's;
// x-db the speed ratio compact/db.
//
//	go test -run '^$' -bench BenchmarkLookupCompact -benchtime 50000x ./mappings/sqlcatalog/
func BenchmarkLookupCompact(b *testing.B) {
	n, path := lookupCatalog(b)
	db, err := OpenSQLite(path, WithRecordCache(0))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	compact, err := OpenSQLite(path, WithRecordCache(1), WithRecordMemory(int64(n)*1024))
	if err != nil {
		b.Fatal(err)
	}
	defer compact.Close()
	ctx := b.Context()
	for i := range n {
		if _, err := compact.Lookup(ctx, fmt.Sprintf("obj-%07d", i)); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var spent [2]time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			k := (i + j) % 2
			pid := fmt.Sprintf("obj-%07d", rng.IntN(n))
			c := compact
			if k == 1 {
				c = db
			}
			start := time.Now()
			rec, err := c.Lookup(ctx, pid)
			spent[k] += time.Since(start)
			if err != nil || rec.Meta.Identifier != pid {
				b.Fatalf("%s: %v %v", pid, rec, err)
			}
		}
	}
	if _, hits, _ := compact.RecordMemory(); hits < uint64(b.N)*9/10 {
		b.Fatalf("the compact tier answered %d of %d lookups", hits, b.N)
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "db-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-db")
}

// oldLookup is the lookup of a record-cache miss before one copy of the system
// metadata and the checksums in the row: the row joined with its checksums.
func (c *Catalog) oldLookup(ctx context.Context, pid string) (*node.Record, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT o.seq, o.blob_key, COALESCE(o.meta, o.sysmeta), k.algorithm, k.value
		FROM objects o LEFT JOIN checksums k ON k.pid = o.pid WHERE o.pid = ?`, pid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rec *node.Record
	for rows.Next() {
		var s stored
		var doc string
		var alg, val sql.NullString
		if err := rows.Scan(&s.seq, &s.blobKey, &doc, &alg, &val); err != nil {
			return nil, err
		}
		if rec == nil {
			if err := s.decode(doc, sql.NullString{}); err != nil {
				return nil, err
			}
			rec = &node.Record{Meta: s.meta, BlobKey: s.blobKey, Checksums: map[string]string{}}
		}
		if alg.Valid {
			rec.Checksums[alg.String] = val.String
		}
	}
	return rec, rows.Err()
}

// toOldLayout writes every row as rows were written before one copy of the
// system metadata and the checksums in the row: the XML in sysmeta beside the
// JSON, the later checksums in rows of checksums.
func (c *Catalog) toOldLayout(ctx context.Context) error {
	return c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		rows, err := tx.QueryContext(ctx, `SELECT seq, meta, sums FROM objects`)
		if err != nil {
			return nil, err
		}
		var docs []stored
		for rows.Next() {
			var s stored
			var doc string
			var sums sql.NullString
			if err := rows.Scan(&s.seq, &doc, &sums); err != nil {
				return nil, err
			}
			if err := s.decode(doc, sums); err != nil {
				return nil, err
			}
			docs = append(docs, s)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for _, s := range docs {
			var xml bytes.Buffer
			if err := adapter.Encode(&xml, s.meta, 2); err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE objects SET sysmeta = ?, sums = NULL WHERE seq = ?`), xml.String(), s.seq); err != nil {
				return nil, err
			}
			for alg, v := range s.sums {
				if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO checksums (pid, algorithm, value) VALUES (?, ?, ?)`), s.meta.Identifier, alg, v); err != nil {
					return nil, err
				}
			}
		}
		return nil, nil
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BenchmarkRequestLookups is what a get or describe asks of a PostgreSQL
// catalog (no record cache, as instances sharing it run): a lookup to
// authorize, then the operation's lookup of the same PID. In the same loop,
// alternating: "before" makes both lookups of the database, "after" keeps
// the first in the request's memo (adapter.WithRequest). ns/op is after's;
// x-before the speed ratio after/before.
func BenchmarkRequestLookups(b *testing.B) {
	c, err := OpenPostgres(pgtest.Start(b), WithRecordCache(0), WithCache(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := b.Context()
	const n = 1000
	for i := range n {
		pid := fmt.Sprintf("req-%04d", i)
		if err := c.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM(pid, adapter.NewTime(time.Now())), BlobKey: pid}); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var spent [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			k := (i + j) % 2
			pid := fmt.Sprintf("req-%04d", rng.IntN(n))
			req := ctx
			if k == 0 {
				req = adapter.WithRequest(ctx, "")
			}
			start := time.Now()
			for range 2 {
				if rec, err := c.Lookup(req, pid); err != nil || rec.Meta.Identifier != pid {
					b.Fatalf("%s: %v %v", pid, rec, err)
				}
			}
			spent[k] += time.Since(start)
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "before-ns/op")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "x-before")
}
