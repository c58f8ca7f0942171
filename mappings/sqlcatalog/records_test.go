package sqlcatalog

import (
	"testing"

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
