package sqlcatalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

func openSQLiteT(t *testing.T) *Catalog {
	t.Helper()
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"), WithNodeID("urn:node:dump"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dumpRecord(pid string) *node.Record {
	return &node.Record{BlobKey: "key-" + pid, Checksums: map[string]string{"MD5": "0123"}, Meta: &adapter.SystemMetadata{
		Identifier: pid, FormatID: "text/plain", Size: 3, SerialVersion: 1,
		Checksum:     adapter.Checksum{Algorithm: "SHA-256", Value: "abc"},
		RightsHolder: "CN=owner", Submitter: "CN=owner", AuthoritativeMemberNode: "urn:node:dump",
		DateUploaded: adapter.Now(), DateSysMetadataModified: adapter.Now(),
		AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"CN=reader"}, Permission: []adapter.Permission{adapter.PermRead}}}},
	}}
}

// fill writes every kind of row: a chain with a series, access rules, later
// checksums, events, a reservation and a document.
func fill(t *testing.T, c *Catalog) {
	ctx := context.Background()
	a := dumpRecord("pid-a")
	a.Meta.SeriesID = "series"
	must(t, c.Insert(ctx, a))
	b := dumpRecord("pid-b ünïcode/?&")
	b.Meta.SeriesID, b.Meta.Obsoletes = "series", "pid-a"
	must(t, c.Insert(ctx, b))
	must(t, c.SetChecksum(ctx, "pid-a", "SHA-1", "beef"))
	for i := range 5 {
		must(t, c.AddEvent(ctx, adapter.LogEntry{Identifier: "pid-a", IPAddress: "127.0.0.1", UserAgent: "t", Subject: "public", Event: adapter.EventRead}))
		_ = i
	}
	must(t, c.Reserve(ctx, "reserved-id", "CN=someone"))
	doc := dumpRecord("pid-doc")
	doc.BlobKey = node.DocumentKeyPrefix + "d1"
	_, err := c.Apply(ctx, &node.Batch{Documents: map[string][]byte{doc.BlobKey: {0, 1, 2, 0xff}}, Records: []*node.Record{doc}})
	must(t, err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dumpOf dumps c, less its header line (which names the driver).
func dumpOf(t *testing.T, c *Catalog) (string, map[string]int64) {
	t.Helper()
	full, counts := fullDumpOf(t, c)
	_, rest, _ := strings.Cut(full.String(), "\n")
	return rest, counts
}

// fullDumpOf dumps c.
func fullDumpOf(t *testing.T, c *Catalog) (*bytes.Buffer, map[string]int64) {
	t.Helper()
	s, err := c.Snapshot(context.Background())
	must(t, err)
	defer s.Close()
	var b bytes.Buffer
	counts, err := s.WriteDump(context.Background(), &b, nil)
	must(t, err)
	return &b, counts
}

// loadTargets are an empty SQLite catalog and an empty PostgreSQL one.
func loadTargets(t *testing.T) map[string]*Catalog {
	t.Helper()
	pg, err := OpenPostgres(pgtest.Start(t), WithNodeID("urn:node:dump"))
	must(t, err)
	t.Cleanup(func() { pg.Close() })
	return map[string]*Catalog{"sqlite": openSQLiteT(t), "postgres": pg}
}

// TestDumpLoad: a dump of SQLite loads into an empty SQLite catalog and into
// PostgreSQL, whose dumps are then the same rows; the loaded catalogs answer
// lookups and logs as the first did, and new rows continue the counters.
func TestDumpLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLiteT(t)
	fill(t, src)
	want, counts := dumpOf(t, src)
	for table, n := range map[string]int64{"objects": 3, "access": 6, "checksums": 0, "events": 5, "reservations": 1, "documents": 1} {
		if counts[table] != n {
			t.Errorf("%s: %d rows dumped, want %d", table, counts[table], n)
		}
	}
	full, _ := fullDumpOf(t, src)

	for name, dst := range loadTargets(t) {
		t.Run(name, func(t *testing.T) {
			got, err := dst.Load(ctx, bytes.NewReader(full.Bytes()), LoadOptions{})
			must(t, err)
			if fmt.Sprint(got) != fmt.Sprint(counts) {
				t.Errorf("loaded %v, dumped %v", got, counts)
			}
			if again, _ := dumpOf(t, dst); again != want {
				t.Errorf("the dump of the loaded catalog differs:\n%s\nwant:\n%s", again, want)
			}
			rec, err := dst.Lookup(ctx, "series")
			must(t, err)
			if rec.Meta.Identifier != "pid-b ünïcode/?&" || rec.Checksums["MD5"] != "0123" {
				t.Errorf("lookup of the series: %+v", rec)
			}
			if b, err := dst.Document(ctx, node.DocumentKeyPrefix+"d1"); err != nil || !bytes.Equal(b, []byte{0, 1, 2, 0xff}) {
				t.Errorf("document: %v %v", b, err)
			}
			must(t, dst.Insert(ctx, dumpRecord("pid-new")))
			must(t, dst.AddEvent(ctx, adapter.LogEntry{Identifier: "pid-new", IPAddress: "::1", UserAgent: "t", Subject: "public", Event: adapter.EventCreate}))
			log, err := dst.Events(ctx, adapter.LogQuery{Count: 100})
			must(t, err)
			if len(log.LogEntry) != 6 || log.LogEntry[5].Identifier != "pid-new" {
				t.Errorf("the log after a new event: %+v", log.LogEntry)
			}
			if _, err := dst.Load(ctx, bytes.NewReader(full.Bytes()), LoadOptions{}); !errors.Is(err, ErrNotEmpty) {
				t.Errorf("a second load: %v, want ErrNotEmpty", err)
			}
			if _, err := dst.Load(ctx, bytes.NewReader(full.Bytes()), LoadOptions{Replace: true}); err != nil {
				t.Fatalf("a load with Replace: %v", err)
			}
			if rec, _ := dst.Lookup(ctx, "pid-new"); rec != nil {
				t.Errorf("pid-new, which the load replaced, is still found")
			}
			if again, _ := dumpOf(t, dst); again != want {
				t.Errorf("after Replace the dump differs")
			}
		})
	}
}

// TestDumpLoadBeforeSums: a dump of schema version 9, whose later checksums
// are rows of checksums, loads into SQLite and PostgreSQL with the checksums
// in their objects' rows, and its reader blocks counted.
func TestDumpLoadBeforeSums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLiteT(t)
	fill(t, src)
	must(t, src.toOldLayout(ctx))
	for _, q := range append(slices.Clip(toSchema13), `ALTER TABLE objects DROP COLUMN sums`, `DROP TABLE event_pids`, `DROP TABLE event_pids_mark`, `DROP TABLE event_pid_runs`, `UPDATE catalog_schema SET version = 9`) {
		_, err := src.db.ExecContext(ctx, q)
		must(t, err)
	}
	old, counts := fullDumpOf(t, src)
	if counts["checksums"] != 4 || !strings.Contains(old.String(), `"schemaVersion":9`) {
		t.Fatalf("the old dump has %d checksums rows: %.200s", counts["checksums"], old.String())
	}
	for name, dst := range loadTargets(t) {
		t.Run(name, func(t *testing.T) {
			_, err := dst.Load(ctx, bytes.NewReader(old.Bytes()), LoadOptions{})
			must(t, err)
			for pid, want := range map[string]map[string]string{
				"pid-a": {"MD5": "0123", "SHA-1": "beef"}, "pid-b ünïcode/?&": {"MD5": "0123"}, "pid-doc": {"MD5": "0123"},
			} {
				rec, err := dst.Lookup(ctx, pid)
				must(t, err)
				if !maps.Equal(rec.Checksums, want) {
					t.Errorf("%s: checksums %v, want %v", pid, rec.Checksums, want)
				}
			}
			var left int
			must(t, dst.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM checksums`).Scan(&left))
			if left != 0 {
				t.Errorf("%d rows left in checksums", left)
			}
			// Its list and reader blocks are counted (schemas 5 and 16).
			checkBlockCounts(t, dst, "loaded")
			// Its log is indexed by PID (schema 11).
			var indexed int64
			must(t, dst.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM event_pids`).Scan(&indexed))
			if indexed != counts["events"] {
				t.Errorf("%d of %d events indexed by PID", indexed, counts["events"])
			}
		})
	}
}

// TestDumpLoadBeforeRuns: a dump of schema version 12, whose log index has
// no runs, loads into SQLite and PostgreSQL with that index as run 0.
func TestDumpLoadBeforeRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLiteT(t)
	fill(t, src)
	tx, err := src.db.BeginTx(ctx, nil)
	must(t, err)
	must(t, src.indexEventPIDs(ctx, tx, -1))
	must(t, tx.Commit())
	toSchema12(t, src)
	old, counts := fullDumpOf(t, src)
	if counts["event_pids"] == 0 || !strings.Contains(old.String(), `"schemaVersion":12`) {
		t.Fatalf("the old dump has %d event_pids rows: %.200s", counts["event_pids"], old.String())
	}
	for name, dst := range loadTargets(t) {
		t.Run(name, func(t *testing.T) {
			_, err := dst.Load(ctx, bytes.NewReader(old.Bytes()), LoadOptions{})
			must(t, err)
			var run, events, level int64
			must(t, dst.db.QueryRowContext(ctx, `SELECT run, events, level FROM event_pid_runs`).Scan(&run, &events, &level))
			if run != 0 || events != counts["event_pids"] || level != maxRunLevel {
				t.Errorf("the loaded index is run %d of %d events at level %d, want run 0 of %d at %d", run, events, level, counts["event_pids"], maxRunLevel)
			}
			var pid string
			must(t, dst.db.QueryRowContext(ctx, `SELECT pid FROM events ORDER BY entry_id LIMIT 1`).Scan(&pid))
			var want int
			must(t, dst.db.QueryRowContext(ctx, dst.d.q(`SELECT COUNT(*) FROM events WHERE pid = ?`), pid).Scan(&want))
			l, err := dst.Events(ctx, adapter.LogQuery{IDFilter: pid, PIDsOnly: true, Count: 100})
			if err != nil || l.Total != want {
				t.Errorf("the log of %q after the load: %+v, %v; want %d events", pid, l, err, want)
			}
		})
	}
}

// TestDumpLoadRefusesDamage: a dump cut short or with a row count that does
// not match loads nothing.
func TestDumpLoadRefusesDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLiteT(t)
	fill(t, src)
	full, _ := fullDumpOf(t, src)
	lines := strings.SplitAfter(full.String(), "\n")
	cut := strings.Join(lines[:len(lines)-3], "")
	miscount := strings.Replace(full.String(), `{"end":"events","rows":5}`, `{"end":"events","rows":4}`, 1)
	for name, dump := range map[string]string{"cut": cut, "miscount": miscount} {
		dst := openSQLiteT(t)
		if _, err := dst.Load(ctx, strings.NewReader(dump), LoadOptions{}); err == nil {
			t.Errorf("%s: loaded", name)
		}
		if empty, err := dst.Empty(ctx); err != nil || !empty {
			t.Errorf("%s: the catalog is not empty after a failed load (%v)", name, err)
		}
	}
}

// TestSnapshotIsConsistent: writes after a snapshot began are not in its dump.
func TestSnapshotIsConsistent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := openSQLiteT(t)
	must(t, c.Insert(ctx, dumpRecord("before")))
	s, err := c.Snapshot(ctx)
	must(t, err)
	defer s.Close()
	must(t, c.Insert(ctx, dumpRecord("after")))
	_, err = c.Delete(ctx, "before")
	must(t, err)
	var pids []string
	must(t, s.Objects(ctx, func(o ObjectRow) error { pids = append(pids, o.PID); return nil }))
	if fmt.Sprint(pids) != "[before]" {
		t.Errorf("the snapshot's objects: %v, want [before]", pids)
	}
	var b bytes.Buffer
	counts, err := s.WriteDump(ctx, &b, nil)
	must(t, err)
	if counts["objects"] != 1 || counts["access"] != 2 || strings.Contains(b.String(), `"after"`) {
		t.Errorf("the snapshot's dump: %v\n%s", counts, b.String())
	}
}

// TestSnapshotObjectsMayReadDocuments: Objects walks more than one page of
// rows in seq order, and fn may read the snapshot's documents meanwhile. On
// PostgreSQL, Document used to fail with "driver: bad connection" while the
// objects query was still open on the transaction's connection.
func TestSnapshotObjectsMayReadDocuments(t *testing.T) {
	// Not parallel: its thousand inserts would slow the lease timings of the
	// jobs tests that run in parallel.
	ctx := context.Background()
	for name, c := range loadTargets(t) {
		t.Run(name, func(t *testing.T) {
			key := node.DocumentKeyPrefix + "shared"
			var recs []*node.Record
			for i := range objectsPage + 2 {
				rec := dumpRecord(fmt.Sprintf("pid-%04d", i))
				rec.BlobKey = key
				recs = append(recs, rec)
			}
			_, err := c.Apply(ctx, &node.Batch{Documents: map[string][]byte{key: []byte("doc")}, Records: recs})
			must(t, err)
			s, err := c.Snapshot(ctx)
			must(t, err)
			defer s.Close()
			var walked int
			must(t, s.Objects(ctx, func(o ObjectRow) error {
				if want := fmt.Sprintf("pid-%04d", walked); o.PID != want {
					return fmt.Errorf("object %d is %q, want %q", walked, o.PID, want)
				}
				walked++
				b, err := s.Document(ctx, o.BlobKey)
				if err == nil && string(b) != "doc" {
					err = fmt.Errorf("the document of %q is %q", o.PID, b)
				}
				return err
			}))
			if walked != len(recs) {
				t.Errorf("walked %d objects, want %d", walked, len(recs))
			}
		})
	}
}
