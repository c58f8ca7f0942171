package main

// Benchmarks of the coordinating node (issue 8), through the real binary
// (TestMain builds it; cnStart, cn_test.go, runs it with the CN configuration):
//
//   - BenchmarkCNResolve: resolve's 303 from parallel clients (b.RunParallel),
//     anonymous on a public object and with a bearer token (an RS256 check per
//     request) on a private one; req/s is the throughput.
//   - BenchmarkCNLogRecords: getLogRecords pages of count=1000 over a log of
//     1,000,000 events, as the trusted subject (no access filter), on two
//     kinds of filter: none (unfiltered; a server started for the iteration
//     has no total or cursor for it) and a fromDate before every event that no
//     request has used (fromDate; the harvester's filter). page/* times a page
//     at start 0 and one at start 500,000, each first on a fresh filter (cold:
//     the server counts the total and, at 500,000, seeks the position), then
//     again (warm); x-*-start500000/0 is the ratio of the two starts in the same
//     run. harvest/* pages through the whole log in order (1,000 pages) on a
//     fresh filter, then asks page 0 again; ns/page is the mean page,
//     x-page/start0 the mean page after the first over that warm page 0,
//     x-start500000/start0 and x-last/start0 the pages at 500,000 and 999,000
//     over it (1 is a flat harvest).
//
// Run them with, for example:
//
//	go test -run '^$' -bench 'CNResolve' -benchtime 3s ./cmd/d1bridge/
//	go test -run '^$' -bench 'CNLogRecords' -benchtime 3x ./cmd/d1bridge/
//
// The 1,000,000 events are written once into a catalog database (opened with
// sqlcatalog.OpenSQLite, which creates the schema, then closed, then filled
// by multi-row INSERTs in one transaction over database/sql) and kept under
// $TMPDIR/d1bridge-bench-cn-log/v<cnBenchFillVersion>-<schema digest>;
// delete that directory to refill (about 10 s). Speed is never asserted.

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

const (
	// cnBenchFillVersion keys the cached event log: bump it when cnBenchFill
	// writes something else.
	cnBenchFillVersion = 1
	cnBenchEvents      = 1_000_000
	cnBenchCount       = 1000
	cnBenchMid         = 500_000
	cnBenchPages       = cnBenchEvents / cnBenchCount
)

// cnBenchClient keeps enough connections for the parallel benchmarks and does
// not follow resolve's redirect.
func cnBenchClient() *http.Client {
	return &http.Client{
		Timeout:       2 * time.Minute,
		Transport:     &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// cnBenchDo sends one request and reads the whole answer into buf (reset
// first); it fails unless the status is want.
func cnBenchDo(c *http.Client, method, u, token string, want int, buf *bytes.Buffer) error {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s, want %d\n%.2000s", method, u, resp.Status, want, buf.Bytes())
	}
	return nil
}

// --- resolve

func BenchmarkCNResolve(b *testing.B) {
	c := cnStart(b)
	pub, pubData := cnObject("cn-bench-resolve-public", true)
	priv, privData := cnObject("cn-bench-resolve-private", false)
	c.create(b, pub, pubData)
	c.create(b, priv, privData)
	// A completed replica on MN2: two locations to list.
	for _, pid := range []string{pub.Identifier, priv.Identifier} {
		if r := c.form(b, cnAdmin, http.MethodPut, "/replicaNotifications/"+segment(pid), textPart("nodeRef", cnMN2), textPart("status", "completed")); r.Status != http.StatusOK {
			b.Fatalf("setReplicationStatus: %d\n%s", r.Status, r.Body)
		}
	}
	for _, c2 := range []struct {
		name, pid, who string
	}{
		{"anonymous", pub.Identifier, ""},
		{"token", priv.Identifier, cnAlice},
	} {
		b.Run(c2.name, func(b *testing.B) {
			u := c.URL + cnID(2, "resolve", c2.pid)
			token := ""
			if c2.who != "" {
				token = c.tokens[c2.who]
			}
			// One answer checked in full (schema, Location) before the loop.
			r := c.noFollow(b, c2.who, http.MethodGet, cnID(2, "resolve", c2.pid))
			if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), c.URL+"/d1/mn/v2/object/") {
				b.Fatalf("resolve: %d Location %q\n%s", r.Status, r.Header.Get("Location"), r.Body)
			}
			client := cnBenchClient()
			b.SetParallelism(4) // 4 × GOMAXPROCS clients: the server, not the client, is the limit
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				var buf bytes.Buffer
				for pb.Next() {
					if err := cnBenchDo(client, http.MethodGet, u, token, http.StatusSeeOther, &buf); err != nil {
						b.Error(err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		})
	}
}

// --- getLogRecords over 1,000,000 events

func BenchmarkCNLogRecords(b *testing.B) {
	dataDir := cnBenchLogDir(b)
	c := cnStartOn(b, dataDir)
	client := cnBenchClient()
	var buf bytes.Buffer
	// target is where the pages are asked: the log of a server, as cnAdmin,
	// with a fromDate or none.
	type target struct{ base, token, fromDate string }
	get := func(b *testing.B, tg target, start int) {
		u := fmt.Sprintf("%s?start=%d&count=%d", tg.base, start, cnBenchCount)
		if tg.fromDate != "" {
			u += "&fromDate=" + url.QueryEscape(tg.fromDate)
		}
		if err := cnBenchDo(client, http.MethodGet, u, tg.token, http.StatusOK, &buf); err != nil {
			b.Fatal(err)
		}
	}
	// fresh is a filter the server has no total or cursor for: a new fromDate
	// (before every event) on the shared server, or no fromDate on a server
	// started for it (done stops it). The timer stops meanwhile.
	fresh := func(b *testing.B, filtered bool) (target, func()) {
		if filtered {
			return target{c.URL + cnp(2, "/log"), c.tokens[cnAdmin], cnBenchFromDate()}, func() {}
		}
		b.StopTimer()
		s := cnStartOn(b, dataDir)
		b.StartTimer()
		return target{s.URL + cnp(2, "/log"), s.tokens[cnAdmin], ""}, func() { b.StopTimer(); s.stop(); b.StartTimer() }
	}

	// The fill as the server sees it: one page in full (the schema included),
	// at the middle.
	r := c.call(b, cnAdmin, http.MethodGet, cnp(2, fmt.Sprintf("/log?start=%d&count=%d", cnBenchMid, cnBenchCount)))
	var l adapter.Log
	decode(b, r, &l)
	if l.Total != cnBenchEvents || l.Count != cnBenchCount || len(l.LogEntry) != cnBenchCount ||
		l.LogEntry[0].EntryID != strconv.Itoa(cnBenchMid+1) || l.LogEntry[0].Identifier != cnBenchPID(cnBenchMid) {
		b.Fatalf("start=%d: count %d total %d, first %+v", cnBenchMid, l.Count, l.Total, l.LogEntry[0])
	}

	// page: start 0 and start 500,000, each first on a fresh filter (cold: the
	// total is counted and, at 500,000, the position sought), then again (warm).
	page := func(b *testing.B, filtered bool) {
		starts := []int{0, cnBenchMid}
		cold := make([]time.Duration, len(starts))
		warm := make([]time.Duration, len(starts))
		for i := 0; i < b.N; i++ {
			for j := range starts {
				k := (i + j) % len(starts) // alternate which start goes first
				tg, done := fresh(b, filtered)
				t0 := time.Now()
				get(b, tg, starts[k])
				cold[k] += time.Since(t0)
				t0 = time.Now()
				get(b, tg, starts[k])
				warm[k] += time.Since(t0)
				done()
			}
		}
		per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(per(cold[0]), "cold-start0-ns")
		b.ReportMetric(per(cold[1]), "cold-start500000-ns")
		b.ReportMetric(per(cold[1])/per(cold[0]), "x-cold-start500000/0")
		b.ReportMetric(per(warm[0]), "warm-start0-ns")
		b.ReportMetric(per(warm[1]), "warm-start500000-ns")
		b.ReportMetric(per(warm[1])/per(warm[0]), "x-warm-start500000/0")
	}
	b.Run("page/unfiltered", func(b *testing.B) { page(b, false) })
	b.Run("page/fromDate", func(b *testing.B) { page(b, true) })

	// harvest: every page in order on a fresh filter, then page 0 again (warm)
	// as the reference of a page's cost.
	harvest := func(b *testing.B, filtered bool) {
		spent := make([]time.Duration, cnBenchPages)
		var page0 time.Duration
		for i := 0; i < b.N; i++ {
			tg, done := fresh(b, filtered)
			for p := range cnBenchPages {
				t0 := time.Now()
				get(b, tg, p*cnBenchCount)
				spent[p] += time.Since(t0)
			}
			t0 := time.Now()
			get(b, tg, 0)
			page0 += time.Since(t0)
			done()
		}
		var all, rest time.Duration
		for p, d := range spent {
			all += d
			if p > 0 {
				rest += d
			}
		}
		n := float64(b.N)
		ref := float64(page0.Nanoseconds()) / n
		at := func(p int) float64 { return float64(spent[p].Nanoseconds()) / n }
		b.ReportMetric(float64(all.Nanoseconds())/n, "ns/op")
		b.ReportMetric(float64(all.Nanoseconds())/n/cnBenchPages, "ns/page")
		b.ReportMetric(at(0), "first-page-ns")
		b.ReportMetric(ref, "start0-ns")
		b.ReportMetric(float64(rest.Nanoseconds())/n/float64(cnBenchPages-1)/ref, "x-page/start0")
		b.ReportMetric(at(cnBenchMid/cnBenchCount)/ref, "x-start500000/start0")
		b.ReportMetric(at(cnBenchPages-1)/ref, "x-last/start0")
	}
	b.Run("harvest/unfiltered", func(b *testing.B) { harvest(b, false) })
	b.Run("harvest/fromDate", func(b *testing.B) { harvest(b, true) })
}

var cnBenchFromSeq atomic.Int64

// cnBenchFromDate is a fromDate no request has used, before every event: a
// filter that selects the whole log but that the server has no total or
// cursor for.
func cnBenchFromDate() string {
	t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(cnBenchFromSeq.Add(1)) * time.Millisecond)
	return t.Format("2006-01-02T15:04:05.000Z")
}

// cnBenchPID is the identifier of event i: 200,000 objects in turn.
func cnBenchPID(i int) string { return fmt.Sprintf("obj-%07d", i%200_000) }

// cnBenchLogDir returns a data directory whose catalog holds cnBenchEvents
// events, filling it the first time. The benchmarks only read it, so runs
// share it.
func cnBenchLogDir(tb testing.TB) string {
	key := fmt.Sprintf("v%d-%s", cnBenchFillVersion, benchSchemaKey())
	return benchCached(tb, "d1bridge-bench-cn-log", key, func(name string) bool { return name == key },
		func(dir string) (string, error) {
			start := time.Now()
			if err := cnBenchFill(filepath.Join(dir, "catalog.db"), cnBenchEvents); err != nil {
				return "", fmt.Errorf("filling the event log: %w", err)
			}
			return fmt.Sprintf("%d events, filled in %s", cnBenchEvents, time.Since(start).Round(time.Millisecond)), nil
		})
}

// cnBenchFill writes n events into the catalog database at path: the catalog
// creates its schema (OpenSQLite, then Close), then the rows go in as the
// catalog engineer's bulkEvents (mappings/sqlcatalog/bench_test.go) puts them:
// one event every 10 ms for three in a row, three reads to a create, over
// 200,000 PIDs, in one transaction, with multi-row INSERTs over database/sql
// (AddEvent, a durable transaction per event, takes about 1 ms each).
func cnBenchFill(path string, n int) error {
	cat, err := sqlcatalog.OpenSQLite(path, sqlcatalog.WithNodeID(testNodeID))
	if err != nil {
		return err
	}
	if err := cat.Close(); err != nil {
		return err
	}
	// The driver sqlcatalog registers (modernc.org/sqlite); the file keeps its
	// WAL journal, and the fill needs no fsync until the end.
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=cache_size(-262144)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	const rows = 500 // 3,500 parameters a statement
	stmt := func(k int) string {
		return "INSERT INTO events (pid, ip, user_agent, subject, event, date_logged, node_id) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?),", k), ",")
	}
	full, err := tx.Prepare(stmt(rows))
	if err != nil {
		return err
	}
	defer full.Close()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	events := []string{adapter.EventRead, adapter.EventRead, adapter.EventRead, adapter.EventCreate}
	args := make([]any, 0, 7*rows)
	for i := 0; i < n; i += rows {
		k := min(rows, n-i)
		args = args[:0]
		for j := i; j < i+k; j++ {
			args = append(args, cnBenchPID(j), "10.0.0.1", "bench/1", adapter.SubjectPublic, events[j%len(events)], t0+int64(j/3)*10, testNodeID)
		}
		st := full
		if k < rows {
			if st, err = tx.Prepare(stmt(k)); err != nil {
				return err
			}
			defer st.Close()
		}
		if _, err := st.Exec(args...); err != nil {
			return fmt.Errorf("events %d to %d: %w", i, i+k, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	var total int
	if err := db.QueryRow(`SELECT COUNT(*) FROM events`).Scan(&total); err != nil {
		return err
	}
	if total != n {
		return fmt.Errorf("%d events in the log, want %d", total, n)
	}
	// What the catalog's Close does, then the WAL into the database file.
	if _, err := db.Exec(`PRAGMA optimize`); err != nil {
		return err
	}
	_, err = db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}
