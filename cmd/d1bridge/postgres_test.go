package main

// The binary with its catalog on a real PostgreSQL server (pgtest starts one
// for this test binary; each test gets a schema of its own) and the object
// bytes under dataDir: the member node's operations over HTTP, and two
// instances sharing one catalog and one data directory, as behind a load
// balancer.

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

// postgresEnv configures the catalog on the PostgreSQL database dsn.
func postgresEnv(dsn string, more ...string) []string {
	return append([]string{"D1BRIDGE_CATALOG_DRIVER=postgres", "D1BRIDGE_CATALOG_DSN=" + dsn}, more...)
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Start(t) // holds the one cluster for every subtest
	t.Run("Operations", func(t *testing.T) {
		t.Parallel()
		testPostgresOperations(t)
	})
	t.Run("TwoBinaries", func(t *testing.T) {
		t.Parallel()
		testPostgresTwoBinaries(t)
	})
}

// testPostgresOperations runs create, get, describe, getSystemMetadata,
// listObjects, getLogRecords, update and delete through one instance, then
// restarts it: the catalog is in the database, the bytes in dataDir.
func testPostgresOperations(t *testing.T) {
	s := startServer(t, "", postgresEnv(pgtest.Start(t), adminEnv)...)
	if r := s.get(t, "/readyz"); r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte("ready")) {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	all := []adapter.Permission{adapter.PermChangePermission}
	d1, d2 := genBytes(2001, 70_000), genBytes(2002, 1234)
	if l := listObjects(t, s, 2, ""); l.Total != 0 {
		t.Fatalf("a new catalog lists %v", pids(l))
	}

	// create
	sm1 := newSysmeta("pg-1", "text/csv", "SHA-256", d1, all...)
	sm1.SeriesID = "pg-series"
	create(t, s, sm1, d1)
	wantError(t, s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(newSysmeta("pg-1", "text/plain", "MD5", d2), bytes.NewReader(d2), false)...),
		http.StatusConflict, "IdentifierNotUnique")
	wantError(t, s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(newSysmeta("pg-series", "text/plain", "MD5", d2), bytes.NewReader(d2), false)...),
		http.StatusConflict, "IdentifierNotUnique")

	// get, getSystemMetadata, describe
	if r := s.get(t, objectPath(2, "pg-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d1) {
		t.Error("get pg-1: the bytes differ")
	}
	m := getMeta(t, s, 2, "pg-1")
	if m.Identifier != "pg-1" || m.SeriesID != "pg-series" || m.Size != uint64(len(d1)) || m.Checksum.Value != sm1.Checksum.Value ||
		m.Submitter != "public" || m.AuthoritativeMemberNode != testNodeID || m.SerialVersion != 1 {
		t.Errorf("getSystemMetadata pg-1: %+v", m)
	}
	if h := s.head(t, objectPath(2, "pg-1")); wantStatus(t, h, http.StatusOK) && h.Header.Get("DataONE-Checksum") != "SHA-256,"+sm1.Checksum.Value {
		t.Errorf("describe pg-1: DataONE-Checksum %q", h.Header.Get("DataONE-Checksum"))
	}
	wantNotFound(t, s, 2, "pg-missing")

	// listObjects
	create(t, s, newSysmeta("pg-other", "text/plain", "MD5", d2), d2)
	if l := listObjects(t, s, 2, ""); !slices.Equal(pids(l), []string{"pg-1", "pg-other"}) || l.Total != 2 {
		t.Errorf("listObjects: %v (total %d)", pids(l), l.Total)
	}
	if l := listObjects(t, s, 2, "formatId=text%2Fcsv"); !slices.Equal(pids(l), []string{"pg-1"}) {
		t.Errorf("listObjects of text/csv: %v", pids(l))
	}
	if l := listObjects(t, s, 1, "start=1&count=1"); !slices.Equal(pids(l), []string{"pg-other"}) || l.Total != 2 {
		t.Errorf("listObjects page 2: %v (total %d)", pids(l), l.Total)
	}

	// update, by PID then by SID
	sm2 := newSysmeta("pg-2", "text/plain", "MD5", d2, all...)
	sm2.SeriesID = "pg-series"
	r := s.send(t, http.MethodPut, objectPath(2, "pg-1"), false,
		textPart("newPid", "pg-2"), filePart("object", "content.bin", bytes.NewReader(d2)), docPart("sysmeta", sm2))
	if !wantIdentifier(t, r, "pg-2") {
		t.FailNow()
	}
	if old := getMeta(t, s, 2, "pg-1"); old.ObsoletedBy != "pg-2" || old.SerialVersion != 2 {
		t.Errorf("pg-1 after the update: obsoletedBy %q, serialVersion %d", old.ObsoletedBy, old.SerialVersion)
	}
	if r := s.get(t, objectPath(2, "pg-series")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d2) {
		t.Error("get by the series id: not the bytes of pg-2")
	}
	again := newSysmeta("pg-2b", "text/plain", "MD5", d2, all...)
	wantError(t, s.send(t, http.MethodPut, objectPath(2, "pg-1"), false,
		textPart("newPid", "pg-2b"), filePart("object", "content.bin", bytes.NewReader(d2)), docPart("sysmeta", again)),
		http.StatusBadRequest, "InvalidRequest")
	wantNotFound(t, s, 2, "pg-2b")

	// delete
	if !wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "pg-other"), nil), "pg-other") {
		t.FailNow()
	}
	wantNotFound(t, s, 2, "pg-other")
	if l := listObjects(t, s, 2, ""); !slices.Equal(pids(l), []string{"pg-1", "pg-2"}) {
		t.Errorf("listObjects after the delete: %v", pids(l))
	}

	// getLogRecords
	got := events(logRecords(t, s, 2, ""))
	for _, want := range []string{"pg-1 create", "pg-1 read", "pg-1 update", "pg-other create", "pg-other delete"} {
		if !slices.Contains(got, want) {
			t.Errorf("the log %v lacks %q", got, want)
		}
	}
	if l := logRecords(t, s, 2, "idFilter=pg-series"); l.Total == 0 || slices.ContainsFunc(l.LogEntry, func(e adapter.LogEntry) bool { return e.Identifier == "pg-other" }) {
		t.Errorf("the log of the series: %v", events(l))
	}
	files := countFiles(t, s.DataDir)

	// A restart finds everything where it was.
	s.stop()
	s = s.restart(t)
	if l := listObjects(t, s, 2, ""); !slices.Equal(pids(l), []string{"pg-1", "pg-2"}) {
		t.Errorf("listObjects after a restart: %v", pids(l))
	}
	if r := s.get(t, objectPath(2, "pg-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d1) {
		t.Error("get pg-1 after a restart: the bytes differ")
	}
	if got2 := events(logRecords(t, s, 2, "")); len(got2) != len(got)+1 {
		t.Errorf("the log after a restart and one read: %v, before %v", got2, got)
	}
	if n := countFiles(t, s.DataDir); n != files || n != 2 {
		t.Errorf("%d files under the object store, want 2", n)
	}
}

// testPostgresTwoBinaries runs two instances on one catalog and one data
// directory: what one writes, the other lists and serves, and a create of one
// PID through both at once succeeds exactly once.
func testPostgresTwoBinaries(t *testing.T) {
	env := postgresEnv(pgtest.Start(t))
	dataDir := t.TempDir()
	s1 := startServer(t, dataDir, env...)
	s2 := startServer(t, dataDir, env...)
	all := []adapter.Permission{adapter.PermChangePermission}

	d1 := genBytes(2101, 50_000)
	sm1 := newSysmeta("two-1", "text/csv", "SHA-1", d1, all...)
	sm1.SeriesID = "two-series"
	create(t, s1, sm1, d1)
	if l := listObjects(t, s2, 2, ""); !slices.Equal(pids(l), []string{"two-1"}) || l.Total != 1 {
		t.Fatalf("s2 lists %v (total %d) after s1's create", pids(l), l.Total)
	}
	if r := s2.get(t, objectPath(2, "two-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d1) {
		t.Error("s2 serves other bytes than s1 stored")
	}
	if m := getMeta(t, s2, 2, "two-series"); m.Identifier != "two-1" || m.Checksum.Value != sm1.Checksum.Value {
		t.Errorf("s2's system metadata of the series: %+v", m)
	}
	if h := s2.head(t, objectPath(1, "two-1")); wantStatus(t, h, http.StatusOK) && h.Header.Get("DataONE-Checksum") != "SHA-1,"+sm1.Checksum.Value {
		t.Errorf("s2 describe: DataONE-Checksum %q", h.Header.Get("DataONE-Checksum"))
	}
	wantError(t, s2.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm1, bytes.NewReader(d1), false)...),
		http.StatusConflict, "IdentifierNotUnique")

	// s2 updates what s1 created; s1 sees the chain and serves s2's bytes.
	d2 := genBytes(2102, 3000)
	sm2 := newSysmeta("two-2", "text/plain", "MD5", d2, all...)
	sm2.SeriesID = "two-series"
	r := s2.send(t, http.MethodPut, objectPath(2, "two-1"), false,
		textPart("newPid", "two-2"), filePart("object", "content.bin", bytes.NewReader(d2)), docPart("sysmeta", sm2))
	if !wantIdentifier(t, r, "two-2") {
		t.FailNow()
	}
	if m := getMeta(t, s1, 2, "two-1"); m.ObsoletedBy != "two-2" {
		t.Errorf("s1: two-1 obsoletedBy %q after s2's update", m.ObsoletedBy)
	}
	if r := s1.get(t, objectPath(2, "two-series")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d2) {
		t.Error("s1 does not serve s2's new head of the series")
	}
	if l := listObjects(t, s1, 2, ""); !slices.Equal(pids(l), []string{"two-1", "two-2"}) {
		t.Errorf("s1 lists %v after s2's update", pids(l))
	}

	// One PID created through both at once: one wins, and both serve its bytes.
	datas := [][]byte{genBytes(2103, 200_000), genBytes(2104, 200_001)}
	rs := make([]*response, 2)
	var wg sync.WaitGroup
	for i, s := range []*server{s1, s2} {
		wg.Go(func() {
			sm := newSysmeta("two-race", "application/octet-stream", "MD5", datas[i], all...)
			rs[i] = s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(datas[i]), false)...)
		})
	}
	wg.Wait()
	winner := -1
	for i, r := range rs {
		if r == nil {
			t.Fatalf("create %d got no answer", i)
		}
		if r.Status == http.StatusOK {
			if winner >= 0 {
				t.Fatal("both creates of two-race succeeded")
			}
			winner = i
			continue
		}
		wantError(t, r, http.StatusConflict, "IdentifierNotUnique")
	}
	if winner < 0 {
		t.Fatal("no create of two-race succeeded")
	}
	for _, s := range []*server{s1, s2} {
		if r := s.get(t, objectPath(2, "two-race")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, datas[winner]) {
			t.Errorf("%s serves other bytes than the winner's", s.URL)
		}
	}
	if n := countFiles(t, dataDir); n != 3 {
		t.Errorf("%d files under the shared object store, want 3 (the loser's bytes must go)", n)
	}

	// Each logs its own events into the one log.
	got := events(logRecords(t, s1, 2, ""))
	for _, want := range []string{"two-1 create", "two-1 read", "two-1 update", "two-2 read", "two-race create"} {
		if !slices.Contains(got, want) {
			t.Errorf("the shared log %v lacks %q", got, want)
		}
	}
}
