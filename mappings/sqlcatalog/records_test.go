package sqlcatalog

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

// TestRecordCache: lookups served from the cache are copies, and every kind of
// write is seen by the next lookup.
func TestRecordCache(t *testing.T) {
	c := sqliteOpener()(t).(*Catalog)
	ctx := t.Context()
	sm := sqlcatalogtest.SM("rc-1", adapter.Now())
	if err := c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Lookup(ctx, "rc-1") // read, then kept
	if err != nil {
		t.Fatal(err)
	}
	a.Meta.RightsHolder = "mutated by a caller"
	b, err := c.Lookup(ctx, "rc-1") // from the cache
	if err != nil {
		t.Fatal(err)
	}
	if b.Meta.RightsHolder == "mutated by a caller" {
		t.Fatal("a caller's change to a looked-up record reached the cache")
	}
	if _, err := c.Modify(ctx, "rc-1", func(sm *adapter.SystemMetadata) error { sm.RightsHolder = "CN=new"; return nil }); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Lookup(ctx, "rc-1"); r.Meta.RightsHolder != "CN=new" {
		t.Fatalf("after Modify the lookup says %q", r.Meta.RightsHolder)
	}
	if err := c.SetChecksum(ctx, "rc-1", "SHA-512", "abc"); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Lookup(ctx, "rc-1"); r.Checksums["SHA-512"] != "abc" {
		t.Fatalf("after SetChecksum the lookup has %v", r.Checksums)
	}
	if _, err := c.Delete(ctx, "rc-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, "rc-1"); !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("after Delete: %v", err)
	}
}

// TestViewShares: View answers the cached record itself, the same for every
// caller and without copying it (the read operations' path); Lookup still
// answers a copy of it, which a caller may change without the cache seeing.
func TestViewShares(t *testing.T) {
	c := sqliteOpener()(t).(*Catalog)
	ctx := t.Context()
	if err := c.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM("view-1", adapter.Now()), BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.View(ctx, "view-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.View(ctx, "view-1")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Meta != b.Meta {
		t.Fatal("two views of a cached record are not the same record")
	}
	l, err := c.Lookup(ctx, "view-1")
	if err != nil {
		t.Fatal(err)
	}
	if l == a || l.Meta == a.Meta || !reflect.DeepEqual(l, a) {
		t.Fatalf("Lookup answered %p, want a copy of the view %p with the same contents", l, a)
	}
	l.Meta.RightsHolder = "mutated by a caller"
	if v, _ := c.View(ctx, "view-1"); v.Meta.RightsHolder == "mutated by a caller" {
		t.Fatal("a change to a looked-up copy reached the view")
	}
	// A view allocates no copy: at most its memo key and the context that
	// keeps the query from watching for cancellation.
	views := testing.AllocsPerRun(100, func() { c.View(ctx, "view-1") })
	lookups := testing.AllocsPerRun(100, func() { c.Lookup(ctx, "view-1") })
	if views > 2 || lookups <= views {
		t.Fatalf("a view allocates %.0f times and a lookup %.0f, want at most 2 and a copy's more", views, lookups)
	}
	if _, err := c.Modify(ctx, "view-1", func(sm *adapter.SystemMetadata) error { sm.RightsHolder = "CN=new"; return nil }); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.View(ctx, "view-1"); v.Meta.RightsHolder != "CN=new" || a.Meta.RightsHolder == "CN=new" {
		t.Fatalf("after Modify the view says %q and the earlier view %q: want the new record, the old one untouched", v.Meta.RightsHolder, a.Meta.RightsHolder)
	}
}

// TestRecordCacheCompactTier: a record no longer among the decoded ones is
// answered from the compact tier, not the catalog, until a write forgets it.
func TestRecordCacheCompactTier(t *testing.T) {
	ctx := t.Context()
	open := sqliteOpener(WithRecordCache(1))
	c := open(t).(*Catalog)
	for _, pid := range []string{"ct-a", "ct-b"} {
		if err := c.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM(pid, adapter.Now()), BlobKey: "key-" + pid}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetChecksum(ctx, "ct-a", "SHA-512", "abc"); err != nil {
		t.Fatal(err)
	}
	want, err := c.Lookup(ctx, "ct-a") // kept in both tiers
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, "ct-b"); err != nil { // ct-a leaves the decoded tier
		t.Fatal(err)
	}
	if _, ok := c.recs.lru.Peek("ct-a"); ok {
		t.Fatal("ct-a is still decoded: the test would not reach the compact tier")
	}
	// Behind the catalog's back, so that only a lookup that queries it sees it.
	if _, err := c.db.ExecContext(ctx, `UPDATE objects SET blob_key = 'changed' WHERE pid = 'ct-a'`); err != nil {
		t.Fatal(err)
	}
	got, err := c.Lookup(ctx, "ct-a")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("from the compact tier:\n got %+v\nwant %+v", got, want)
	}
	if _, err := c.Modify(ctx, "ct-a", func(sm *adapter.SystemMetadata) error { sm.RightsHolder = "CN=new"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, "ct-b"); err != nil {
		t.Fatal(err)
	}
	got, err = c.Lookup(ctx, "ct-a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Meta.RightsHolder != "CN=new" || got.BlobKey != "changed" {
		t.Fatalf("after Modify the lookup says %q, blob %q", got.Meta.RightsHolder, got.BlobKey)
	}

	// Without the compact tier, the same lookup queries the catalog.
	plain := sqliteOpener(WithRecordCache(1), WithRecordMemory(0))(t).(*Catalog)
	if err := plain.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM("ct-a", adapter.Now()), BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.db.ExecContext(ctx, `UPDATE objects SET blob_key = 'changed' WHERE pid = 'ct-a'`); err != nil {
		t.Fatal(err)
	}
	if got, err := plain.Lookup(ctx, "ct-a"); err != nil || got.BlobKey != "changed" {
		t.Fatalf("without the compact tier: %+v, %v", got, err)
	}
}

// TestRecordCacheKeepsCreated: a new object's record is in the compact tier
// once its create commits, as a read of its row gives it; a failed create
// keeps nothing.
func TestRecordCacheKeepsCreated(t *testing.T) {
	ctx := t.Context()
	c := sqliteOpener()(t).(*Catalog)
	sm := sqlcatalogtest.SM("kc-1", adapter.NewTime(time.UnixMicro(1_700_000_000_123_456))) // below DataONE's ms
	sm.SeriesID, sm.FileName = "kc-series", "a \"name\".csv"
	if err := c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "key-1", Checksums: map[string]string{"SHA-512": "abc"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Insert(ctx, &node.Record{Meta: sqlcatalogtest.SM("kc-2", adapter.Now()), BlobKey: "key-2", Checksums: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []string{"kc-1", "kc-2"} {
		fromRow, err := c.loadRecord(ctx, pid) // the database, not the cache
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.db.ExecContext(ctx, `UPDATE objects SET blob_key = 'changed' WHERE pid = ?`, pid); err != nil {
			t.Fatal(err)
		}
		got, err := c.Lookup(ctx, pid)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, fromRow) {
			t.Fatalf("%s from the cache:\n got %+v\nwant %+v (the row)", pid, got, fromRow)
		}
	}
	// A create refused (the PID is taken) keeps nothing of its record.
	dup := sqlcatalogtest.SM("kc-1", adapter.Now())
	dup.RightsHolder = "CN=someone else"
	if err := c.Insert(ctx, &node.Record{Meta: dup, BlobKey: "other"}); !adapter.IsKind(err, adapter.IdentifierNotUnique) {
		t.Fatalf("a second kc-1: %v", err)
	}
	c.recs.lru.Purge()
	if got, err := c.Lookup(ctx, "kc-1"); err != nil || got.Meta.RightsHolder == dup.RightsHolder || got.BlobKey != "key-1" {
		t.Fatalf("after a refused create: %+v, %v", got, err)
	}
}

// TestMetaIsTheXML: what a lookup decodes from meta is what decoding the
// v2 document of the system metadata gives, for system metadata that sets
// every field, with empty lists, odd characters and ids that are not
// UTF-8-clean in XML; the row keeps that one copy, in the compact form
// (sysmeta is ""), and rows written before, with meta as JSON or without
// meta (their XML only), read the same, by Lookup and by a snapshot's Objects.
func TestMetaIsTheXML(t *testing.T) {
	t.Parallel()
	c := sqliteOpener(WithRecordCache(0))(t).(*Catalog)
	ctx := t.Context()
	yes, three := true, 3
	sm := sqlcatalogtest.SM("meta-1", adapter.Now())
	sm.SeriesID, sm.Submitter, sm.FileName = "meta-series", " CN=a\r\nb ", "x\x01y<&>.csv"
	sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{
		{Subject: []string{"public", "CN=reader"}, Permission: []adapter.Permission{adapter.PermRead}},
		{Subject: []string{}, Permission: []adapter.Permission{adapter.PermWrite}},
	}}
	sm.ReplicationPolicy = &adapter.ReplicationPolicy{ReplicationAllowed: &yes, NumberReplicas: &three,
		PreferredMemberNode: []string{"urn:node:A"}, BlockedMemberNode: []string{}}
	sm.Replica = []adapter.Replica{{ReplicaMemberNode: "urn:node:A", ReplicationStatus: adapter.ReplicaCompleted, ReplicaVerified: adapter.Now()}}
	sm.MediaType = &adapter.MediaType{Name: "text/csv", Property: []adapter.MediaTypeProperty{{Name: "header", Value: "present"}}}
	var xml bytes.Buffer
	if err := adapter.Encode(&xml, sm, 2); err != nil {
		t.Fatal(err)
	}
	var want adapter.SystemMetadata
	if err := adapter.Decode(bytes.NewReader(xml.Bytes()), &want); err != nil {
		t.Fatal(err)
	}
	if err := c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	var meta, doc sql.NullString
	if err := c.db.QueryRowContext(ctx, `SELECT meta, sysmeta FROM objects WHERE pid = 'meta-1'`).Scan(&meta, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(meta.String, compactPrefix) || doc.String != "" {
		t.Fatalf("meta is %q, sysmeta %q: want the compact form once", meta.String, doc.String)
	}
	read := func(when string) {
		t.Helper()
		rec, err := c.Lookup(ctx, "meta-1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rec.Meta, &want) {
			t.Errorf("%s, from Lookup:\n%#v\nfrom the XML:\n%#v", when, rec.Meta, &want)
		}
		snap, err := c.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer snap.Close()
		n := 0
		if err := snap.Objects(ctx, func(o ObjectRow) error {
			if n++; !reflect.DeepEqual(o.Meta, &want) {
				t.Errorf("%s, from Objects:\n%#v\nfrom the XML:\n%#v", when, o.Meta, &want)
			}
			return nil
		}); err != nil || n != 1 {
			t.Fatalf("%s: Objects walked %d rows: %v", when, n, err)
		}
	}
	read("written now")
	js, err := json.Marshal(&want)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.ExecContext(ctx, `UPDATE objects SET meta = ? WHERE pid = 'meta-1'`, string(js)); err != nil {
		t.Fatal(err)
	}
	read("written as JSON")
	if _, err := c.db.ExecContext(ctx, `UPDATE objects SET meta = NULL, sysmeta = ? WHERE pid = 'meta-1'`, xml.String()); err != nil {
		t.Fatal(err)
	}
	read("written before meta")
}
