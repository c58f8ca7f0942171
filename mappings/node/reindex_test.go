package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/metrics"
)

// createObject creates pid with data through the node and returns its blob key.
func (e *harvestEnv) createObject(pid, formatID string, data []byte) string {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.n.Stage(ctx, bytes.NewReader(data), []string{"SHA-256"})
	if err != nil {
		e.t.Fatal(err)
	}
	sm := &adapter.SystemMetadata{Identifier: pid, FormatID: formatID, Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: sha256Hex(data)}, RightsHolder: harvestOwner}
	if _, err := e.n.Create(ctx, &adapter.Session{Subject: harvestOwner}, sm, u); err != nil {
		e.t.Fatal(err)
	}
	return u.Ref
}

// insert registers a record straight in the catalog, with the stated facts.
func (e *harvestEnv) insert(pid, formatID, key string, size uint64, sum string, modified time.Time) {
	e.t.Helper()
	at := adapter.NewTime(modified)
	err := e.cat.Insert(context.Background(), &node.Record{BlobKey: key, Meta: &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: pid, FormatID: formatID, Size: size, RightsHolder: harvestOwner,
		Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: sum}, DateUploaded: at, DateSysMetadataModified: at,
		OriginMemberNode: "urn:node:t", AuthoritativeMemberNode: "urn:node:t",
	}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// waitReindex waits until the batch reindex has handled n records and ended.
func (e *harvestEnv) waitReindex(n float64) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var sum float64
		for _, o := range []string{"updated", "unchanged", "skipped", "failed"} {
			sum += e.counter("d1bridge_reindex_records_total", o)
		}
		if sum >= n && e.counter("d1bridge_reindex_running", "") == 0 {
			if sum > n {
				e.t.Errorf("the batch handled %v records, want %v", sum, n)
			}
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the batch reindex handled %v of %v records in 60s", sum, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantKind(t *testing.T, what string, err error, kind adapter.Kind, pid string) {
	t.Helper()
	ex := adapter.AsException(err)
	if err == nil || ex.Kind != kind {
		t.Errorf("%s: %v, want %v", what, err, kind)
		return
	}
	if pid != "" && (ex.PID != pid || !strings.Contains(ex.Description, pid)) {
		t.Errorf("%s: the exception (pid %q) does not name %q: %s", what, ex.PID, pid, ex.Description)
	}
}

// TestReindexOne: one PID is reindexed before Reindex returns, and its record
// changes only when its bytes did.
func TestReindexOne(t *testing.T) {
	e := newHarvestEnv(t, "")
	ctx := context.Background()
	s := &adapter.Session{Subject: "CN=admin"}
	one := func(id string) error { return e.n.Reindex(ctx, s, adapter.AdminQuery{PIDs: []string{id}}) }

	key := e.createObject("r1", "text/plain", []byte("first"))
	if c, err := e.n.Checksum(ctx, adapter.PublicSession(), "r1", "MD5"); err != nil || c.Value != md5Hex([]byte("first")) {
		t.Fatalf("MD5: %v %v", c, err)
	}
	before := e.meta("r1")
	if err := one("r1"); err != nil {
		t.Fatal(err)
	}
	if sm := e.meta("r1"); sm.SerialVersion != before.SerialVersion || !sm.DateSysMetadataModified.Equal(before.DateSysMetadataModified.Time) {
		t.Errorf("reindexing an unchanged object changed it: %+v", sm)
	}

	if _, err := e.blobs.Put(ctx, key, strings.NewReader("second, longer")); err != nil {
		t.Fatal(err)
	}
	if err := one("r1"); err != nil {
		t.Fatal(err)
	}
	sm := e.meta("r1")
	if sm.SerialVersion != before.SerialVersion+1 || sm.Size != 14 || sm.Checksum.Value != sha256Hex([]byte("second, longer")) ||
		!sm.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
		t.Errorf("after the bytes changed: %+v", sm)
	}
	if c, _ := e.n.Checksum(ctx, adapter.PublicSession(), "r1", "MD5"); c.Value != md5Hex([]byte("second, longer")) {
		t.Errorf("the MD5 computed before is not recomputed: %v", c)
	}

	wantKind(t, "unknown pid", one("nope"), adapter.InvalidRequest, "nope")
	e.insert("meta-only", "text/plain", "", 3, "abc", t0)
	if err := one("meta-only"); err != nil {
		t.Errorf("a record without bytes: %v", err)
	}
	e.blobs.Delete(ctx, key)
	wantKind(t, "missing bytes", one("r1"), adapter.ServiceFailure, "r1")

	for outcome, want := range map[string]float64{"updated": 1, "unchanged": 1, "skipped": 1, "failed": 1} {
		if got := e.counter("d1bridge_reindex_records_total", outcome); got != want {
			t.Errorf("reindex records %s: %v, want %v", outcome, got, want)
		}
	}

	for name, q := range map[string]adapter.AdminQuery{
		"nothing":        {},
		"pids and all":   {PIDs: []string{"a", "b"}, All: true},
		"empty range":    {FromDate: adapter.NewTime(t0), ToDate: adapter.NewTime(t0)},
		"an unknown pid": {PIDs: []string{"meta-only", "nope"}},
	} {
		wantKind(t, name, e.n.Reindex(ctx, s, q), adapter.InvalidRequest, "")
	}
}

// TestReindexBatch: a batch selected by format reindexes each of its records
// once, however many share a modification date and however many change (and
// so move to the end of the list).
func TestReindexBatch(t *testing.T) {
	defer node.SetReindexPage(40)()
	e := newHarvestEnv(t, "")
	ctx := context.Background()
	const same, others = 110, 40 // more records of one date than a page
	want := map[string]string{}
	var stale int
	for i := range 10 { // records share ten blobs: fewer synced writes
		if _, err := e.blobs.Put(ctx, fmt.Sprint("blob-", i), bytes.NewReader([]byte(fmt.Sprint("batch ", i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range same + others {
		pid, key, data := fmt.Sprintf("b%04d", i), fmt.Sprint("blob-", i%10), []byte(fmt.Sprint("batch ", i%10))
		format, at := "text/a", t0
		if i >= same {
			at = t0.Add(time.Duration(i) * time.Second)
		}
		if i%5 == 0 {
			format = "text/b"
		}
		sum := sha256Hex(data)
		if i%3 == 0 { // the catalog is stale
			sum = sha256Hex([]byte("old"))
			if format == "text/a" {
				stale++
			}
		}
		e.insert(pid, format, key, uint64(len(data)), sum, at)
		if format == "text/a" {
			want[pid] = sha256Hex(data)
		}
	}
	if err := e.n.Reindex(ctx, &adapter.Session{Subject: "CN=admin"}, adapter.AdminQuery{FormatID: "text/a"}); err != nil {
		t.Fatal(err)
	}
	e.waitReindex(float64(len(want)))
	if got := e.counter("d1bridge_reindex_records_total", "updated"); got != float64(stale) {
		t.Errorf("%v records updated, want %d", got, stale)
	}
	if got := e.counter("d1bridge_reindex_batch_records", ""); got != float64(len(want)) {
		t.Errorf("the batch selected %v records, want %d", got, len(want))
	}
	for pid, sum := range want {
		if sm := e.meta(pid); sm.Checksum.Value != sum {
			t.Fatalf("%s not reindexed: %+v", pid, sm)
		}
	}
	if sm := e.meta("b0000"); sm.Checksum.Value != sha256Hex([]byte("old")) {
		t.Errorf("b0000 (text/b) was reindexed by a batch of text/a")
	}
}

// TestReindexBatchConcurrency: a second batch while one runs is refused with
// its progress; closing the node stops the running batch.
func TestReindexBatchConcurrency(t *testing.T) {
	e := newHarvestEnv(t, "")
	ctx := context.Background()
	s := &adapter.Session{Subject: "CN=admin"}
	for i := range 3 {
		e.createObject(fmt.Sprint("c", i), "text/plain", []byte(fmt.Sprint("c ", i)))
	}
	e.blobs.gate = make(chan struct{})
	if err := e.n.Reindex(ctx, s, adapter.AdminQuery{All: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.counter("d1bridge_reindex_batch_records", "") != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the batch did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	err := e.n.Reindex(ctx, s, adapter.AdminQuery{PIDs: []string{"c0", "c1"}})
	wantKind(t, "second batch", err, adapter.ServiceFailure, "")
	if err == nil || !strings.Contains(err.Error(), "already running (0 of 3 done)") {
		t.Errorf("second batch: %v", err)
	}
	closed := make(chan struct{})
	go func() { e.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the batch")
	}
	if got := e.counter("d1bridge_reindex_running", ""); got != 0 {
		t.Errorf("reindex running %v after Close", got)
	}
}

// TestReindexListerStore: over a store that lists its objects, reindex asks
// the store about the object (its format, whether it still has it), and a
// batch of all first harvests everything only the store knows.
func TestReindexListerStore(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	s := &adapter.Session{Subject: "CN=admin"}
	e.put(node.Found{Key: "l1", Modified: t0}, []byte("listed"))
	e.once()
	// Changed behind the store's back: same modification time, a new format.
	e.put(node.Found{Key: "l1", Modified: t0, FormatID: "text/csv"}, []byte("listed, changed"))
	if rep := e.once(); rep.Updated != 0 {
		t.Fatalf("the harvest noticed a change the store does not list: %+v", rep)
	}
	// Older than the mark: an incremental pass does not list it.
	e.put(node.Found{Key: "l2", Modified: t0.Add(-time.Hour)}, []byte("only upstream"))
	if rep := e.once(); rep.Registered != 0 {
		t.Fatalf("an incremental pass listed an object older than its mark: %+v", rep)
	}
	if err := e.n.Reindex(ctx, s, adapter.AdminQuery{All: true}); err != nil {
		t.Fatal(err)
	}
	e.waitReindex(2)
	sm := e.meta("l1")
	if sm.FormatID != "text/csv" || sm.Size != 15 || sm.SerialVersion != 2 {
		t.Errorf("l1 after reindex: %+v", sm)
	}
	if sm := e.meta("l2"); sm.Checksum.Value != sha256Hex([]byte("only upstream")) {
		t.Errorf("l2 after reindex all: %+v", sm)
	}
	e.lister.mu.Lock()
	e.lister.objs = e.lister.objs[1:] // the store lost l1
	e.lister.mu.Unlock()
	wantKind(t, "gone from the store", e.n.Reindex(ctx, s, adapter.AdminQuery{PIDs: []string{"l1"}}), adapter.ServiceFailure, "l1")
}

// sourceBytes is a dataset source's Reader: its files by key.
type sourceBytes map[string]string

func (b sourceBytes) Get(_ context.Context, key string) (io.ReadCloser, error) {
	v, ok := b[key]
	if !ok {
		return nil, adapter.Errorf(adapter.NotFound, "no file %q in the source", key)
	}
	return io.NopCloser(strings.NewReader(v)), nil
}

// TestReindexDatasetObjectsOverListerStore: over a store that lists its
// objects, the objects of a dataset harvest that the store does not hold (a
// source's file, a document the harvest wrote) are read where they are. They
// were looked for in the store, and reported missing.
func TestReindexDatasetObjectsOverListerStore(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	src := &versions{list: []*node.Dataset{{ID: "oai:x:1", Version: "2024-01-01T00:00:00Z", Modified: t0,
		Files: []node.Found{{Key: "f1", FileName: "one.txt", Size: -1}}}}}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "oai", Readers: []string{adapter.SubjectPublic}, Reader: sourceBytes{"f1": "one"}})
	if rep := e.datasets("oai"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass: %+v", rep)
	}
	s := &adapter.Session{Subject: "CN=admin"}
	for _, pid := range []string{"oai:x:1@v1/one.txt", "oai:x:1@v1", "resource_map_oai:x:1@v1"} {
		before := e.meta(pid)
		if err := e.n.Reindex(context.Background(), s, adapter.AdminQuery{PIDs: []string{pid}}); err != nil {
			t.Errorf("reindex %s: %v", pid, err)
			continue
		}
		if after := e.meta(pid); after.Checksum != before.Checksum || after.Size != before.Size {
			t.Errorf("%s changed: %+v, was %+v", pid, after, before)
		}
	}
}

// statless is a store that lists its objects but describes none alone.
type statless struct{ *fakeLister }

func (statless) Stat(ctx context.Context, key string) (*node.Found, error) {
	return nil, adapter.Errorf(adapter.NotImplemented, "the store describes no single object")
}

// TestReindexStoreWithoutStat: over a store that lists but has no stat,
// reindex reads the bytes and indexes them.
func TestReindexStoreWithoutStat(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.n.StartHarvest(statless{e.lister}, node.HarvestOptions{Metrics: e.m})
	ctx := context.Background()
	e.put(node.Found{Key: "n1", Modified: t0}, []byte("listed"))
	e.once()
	if _, err := e.blobs.Put(ctx, "n1", strings.NewReader("listed, then changed")); err != nil {
		t.Fatal(err)
	}
	if err := e.n.Reindex(ctx, &adapter.Session{Subject: "CN=admin"}, adapter.AdminQuery{PIDs: []string{"n1"}}); err != nil {
		t.Fatalf("reindex: %v", err)
	}
	if sm := e.meta("n1"); sm.Size != 20 || sm.Checksum.Value != sha256Hex([]byte("listed, then changed")) {
		t.Errorf("n1 after reindex: %+v", sm)
	}
}

// TestReindexBatchWindowLosses: in a batch over records of one date, a record
// updated whose last write failed, and one deleted while the batch runs, do
// not make the batch skip the records after them.
func TestReindexBatchWindowLosses(t *testing.T) {
	defer node.SetReindexPage(2)()
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	for i := range 5 {
		key := fmt.Sprint("w", i)
		e.put(node.Found{Key: key, Modified: t0.Add(time.Hour)}, []byte(fmt.Sprint("window ", i)))
		e.insert(key, "text/w", key, 8, sha256Hex([]byte("old")), t0)
	}
	failed := false
	e.hooked.mu.Lock()
	e.hooked.setChecksum = func(pid, alg string) error {
		if pid == "w0" && alg == "d1bridge:upstream-modified" && !failed {
			failed = true
			return adapter.Errorf(adapter.ServiceFailure, "the catalog is busy")
		}
		return nil
	}
	e.hooked.lookup = func(id string) {
		if id == "w3" {
			e.cat.Delete(ctx, "w3")
		}
	}
	e.hooked.mu.Unlock()
	if err := e.n.Reindex(ctx, &adapter.Session{Subject: "CN=admin"}, adapter.AdminQuery{FormatID: "text/w"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.counter("d1bridge_reindex_records_total", "updated") < 4 || e.counter("d1bridge_reindex_running", "") != 0 {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, i := range []int{0, 1, 2, 4} {
		if sm := e.meta(fmt.Sprint("w", i)); sm.Checksum.Value != sha256Hex([]byte(fmt.Sprint("window ", i))) {
			t.Errorf("w%d not reindexed: %+v", i, sm.Checksum)
		}
	}
}

// TestReindexSharedCatalog: two nodes on one PostgreSQL catalog and one
// store, as two replicas; a batch asked of one is cut into ranges that both
// work, and every record is reindexed once.
func TestReindexSharedCatalog(t *testing.T) {
	defer node.SetReindexPage(2)() // ranges of 8 records
	dsn, store := pgtest.Start(t), t.TempDir()
	ctx := context.Background()
	type replica struct {
		n   *node.Node
		cat *sqlcatalog.Catalog
		env *harvestEnv // for counter
	}
	open := func() replica {
		cat, err := sqlcatalog.OpenPostgres(dsn, sqlcatalog.WithNodeID("urn:node:t"), sqlcatalog.WithCache(0, 0), sqlcatalog.WithRecordCache(0))
		if err != nil {
			t.Fatal(err)
		}
		// Each record takes a while, so that the replicas meet.
		hooked := &hookedCatalog{Catalog: cat, lookup: func(string) { time.Sleep(10 * time.Millisecond) }}
		blobs, err := fsblobs.New(store)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		m := metrics.New(reg, "test")
		n := node.New("urn:node:t", blobs, hooked, nil)
		n.SetReindexMetrics(m)
		n.SetReplication(node.Replication{RescueAfter: 5 * time.Second, Poll: 20 * time.Millisecond})
		n.StartWork()
		t.Cleanup(func() { n.Close() })
		return replica{n, cat, &harvestEnv{t: t, reg: reg}}
	}
	a, b := open(), open()
	const records = 96
	want := map[string]string{}
	blobs, err := fsblobs.New(store)
	if err != nil {
		t.Fatal(err)
	}
	for i := range records {
		pid, data := fmt.Sprintf("s%03d", i), []byte(fmt.Sprint("shared ", i))
		if _, err := blobs.Put(ctx, pid, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		at := adapter.NewTime(t0.Add(time.Duration(i) * time.Second))
		if err := a.cat.Insert(ctx, &node.Record{BlobKey: pid, Meta: &adapter.SystemMetadata{
			SerialVersion: 1, Identifier: pid, FormatID: "text/s", Size: uint64(len(data)), RightsHolder: harvestOwner,
			Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: sha256Hex([]byte("stale"))}, DateUploaded: at, DateSysMetadataModified: at,
			OriginMemberNode: "urn:node:t", AuthoritativeMemberNode: "urn:node:t",
		}}); err != nil {
			t.Fatal(err)
		}
		want[pid] = sha256Hex(data)
	}
	if err := a.n.Reindex(ctx, &adapter.Session{Subject: "CN=admin"}, adapter.AdminQuery{FormatID: "text/s"}); err != nil {
		t.Fatal(err)
	}
	err = b.n.Reindex(ctx, &adapter.Session{Subject: "CN=admin"}, adapter.AdminQuery{All: true})
	wantKind(t, "a second batch through the other replica", err, adapter.ServiceFailure, "")
	if err != nil && !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second batch: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := a.cat.Count(ctx, "reindex", "")
		if err == nil && c.Done == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch did not end: %+v %v", c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for pid, sum := range want {
		rec, err := b.cat.Lookup(ctx, pid)
		if err != nil || rec.Meta.Checksum.Value != sum {
			t.Fatalf("%s not reindexed: %+v %v", pid, rec, err)
		}
	}
	ranges, err := a.cat.Jobs(ctx, "reindex-range")
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]int{}
	for _, r := range ranges {
		if r.State != "done" {
			t.Errorf("range %s: %+v", r.Key, r)
		}
		holders[r.Holder]++
	}
	if len(ranges) < records/8 || len(holders) != 2 {
		t.Errorf("%d ranges by %v, want at least %d, by both replicas", len(ranges), holders, records/8)
	}
	ua, ub := a.env.counter("d1bridge_reindex_records_total", "updated"), b.env.counter("d1bridge_reindex_records_total", "updated")
	if ua+ub != records || ua == 0 || ub == 0 {
		t.Errorf("updated by A %v, by B %v; want %d in all, by both", ua, ub, records)
	}
	t.Logf("%d ranges: by replica %v; records updated by A %v, by B %v", len(ranges), holders, ua, ub)
}
