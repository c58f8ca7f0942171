// Package sqlcatalogtest is the acceptance suite that every node.Catalog must
// pass, whatever database is behind it.
package sqlcatalogtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// NodeID is the local node id that open must give the catalog (for
// ListQuery.ExcludeReplicas).
const NodeID = "urn:node:LOCAL"

// OtherNode is a node id the suite uses for objects held as replicas.
const OtherNode = "urn:node:OTHER"

// base is the date the suite's fixtures count from.
var base = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// at is base plus n seconds and ms milliseconds, at DataONE precision.
func at(n, ms int) adapter.Time {
	return adapter.NewTime(base.Add(time.Duration(n)*time.Second + time.Duration(ms)*time.Millisecond))
}

// CatalogAcceptance runs the suite. open must return an empty catalog configured
// with NodeID, and, called again with the same t after that catalog is closed,
// a catalog on the same storage; it should close what it opened when t ends
// (closing twice must be harmless).
func CatalogAcceptance(t *testing.T, open func(t *testing.T) node.Catalog) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) node.Catalog)
	}{
		{"RoundTrip", testRoundTrip},
		{"Uniqueness", testUniqueness},
		{"Chains", testChains},
		{"SeriesHead", testSeriesHead},
		{"Replicas", testReplicas},
		{"HoldsBlob", testHoldsBlob},
		{"Modify", testModify},
		{"LargeAccessPolicy", testLargeAccessPolicy},
		{"SetChecksum", testSetChecksum},
		{"ApplyKept", testApplyKept},
		{"Delete", testDelete},
		{"ListFilters", testListFilters},
		{"ListPaging", testListPaging},
		{"ListAfterWrites", testListAfterWrites},
		{"CommitOrder", testCommitOrder},
		{"Events", testEvents},
		{"EventPaging", testEventPaging},
		{"EventsWithWrites", testEventsWithWrites},
		{"RequestMemo", testRequestMemo},
		{"Concurrency", testConcurrency},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// SM returns minimal valid system metadata: identifier pid, modified and
// uploaded at date, authoritative on NodeID, readable by its rights holder.
func SM(pid string, date adapter.Time) *adapter.SystemMetadata {
	return &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: pid, FormatID: "text/plain", Size: 3,
		Checksum:  adapter.Checksum{Algorithm: "SHA-1", Value: "a9993e364706816aba3e25717850c26c9cd0d89d"},
		Submitter: "CN=submitter", RightsHolder: "CN=owner",
		DateUploaded: date, DateSysMetadataModified: date,
		OriginMemberNode: NodeID, AuthoritativeMemberNode: NodeID,
	}
}

// fullSM sets every field of the v2 system metadata.
func fullSM(pid string) *adapter.SystemMetadata {
	yes, three := true, 3
	return &adapter.SystemMetadata{
		SerialVersion: 7, Identifier: pid, FormatID: "eml://ecoinformatics.org/eml-2.1.1", Size: 123456789012,
		Checksum:  adapter.Checksum{Algorithm: "MD5", Value: "0cc175b9c0f1b6a831c399e269772661"},
		Submitter: "CN=Jane Doe A123,O=Google,C=US,DC=cilogon,DC=org", RightsHolder: "CN=owner,DC=org",
		AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{
			{Subject: []string{"public", "CN=reader"}, Permission: []adapter.Permission{adapter.PermRead}},
			{Subject: []string{"CN=editor"}, Permission: []adapter.Permission{adapter.PermRead, adapter.PermWrite}},
			{Subject: []string{"CN=admins,DC=org"}, Permission: []adapter.Permission{adapter.PermChangePermission}},
		}},
		ReplicationPolicy: &adapter.ReplicationPolicy{
			ReplicationAllowed: &yes, NumberReplicas: &three,
			PreferredMemberNode: []string{"urn:node:A", "urn:node:B"}, BlockedMemberNode: []string{"urn:node:C"},
		},
		Archived:                false,
		DateUploaded:            adapter.NewTime(time.Date(2014, 9, 18, 17, 18, 33, 123e6, time.FixedZone("x", -6*3600))),
		DateSysMetadataModified: adapter.NewTime(time.Date(2014, 9, 19, 11, 27, 14, 7e6, time.UTC)),
		OriginMemberNode:        "urn:node:ORIGIN", AuthoritativeMemberNode: NodeID,
		Replica: []adapter.Replica{
			{ReplicaMemberNode: "urn:node:A", ReplicationStatus: adapter.ReplicaCompleted, ReplicaVerified: adapter.NewTime(time.Date(2015, 5, 21, 19, 2, 49, 5e6, time.UTC))},
			{ReplicaMemberNode: "urn:node:B", ReplicationStatus: adapter.ReplicaFailed, ReplicaVerified: adapter.NewTime(time.Date(2016, 5, 21, 19, 2, 49, 0, time.UTC))},
		},
		SeriesID: "series-" + pid,
		MediaType: &adapter.MediaType{Name: "text/xml", Property: []adapter.MediaTypeProperty{
			{Name: "charset", Value: "utf-8"}, {Name: "schema", Value: "eml <2.1.1> & \"more\""},
		}},
		FileName: "data file ü.xml",
	}
}

func ctxT(t *testing.T) context.Context { return t.Context() }

// insert stores sm with the dates it has: the suite's fixtures are dated
// out of the order they are written in (testCommitOrder tests the order of
// commits).
func insert(t *testing.T, c node.Catalog, sm *adapter.SystemMetadata) {
	t.Helper()
	if err := c.Insert(node.WithGivenDates(ctxT(t)), &node.Record{Meta: sm, BlobKey: "blob-" + sm.Identifier}); err != nil {
		t.Fatalf("Insert(%s): %v", sm.Identifier, err)
	}
}

func lookup(t *testing.T, c node.Catalog, id string) *node.Record {
	t.Helper()
	rec, err := c.Lookup(ctxT(t), id)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", id, err)
	}
	return rec
}

// wantKind checks that err is an *adapter.Exception of kind k whose description
// mentions every one of words.
func wantKind(t *testing.T, err error, k adapter.Kind, words ...string) {
	t.Helper()
	var e *adapter.Exception
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want a %s exception", err, k)
	}
	if e.Kind != k {
		t.Fatalf("got %s (%s), want %s", e.Kind, e.Description, k)
	}
	for _, w := range words {
		if !strings.Contains(e.Description, w) {
			t.Errorf("description %q does not mention %q", e.Description, w)
		}
	}
}

func diff(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, ok := got.([]string); ok && len(g) == 0 {
		got = []string(nil)
	}
	if w, ok := want.([]string); ok && len(w) == 0 {
		want = []string(nil)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func testRoundTrip(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	sm := fullSM("pid-full")
	rec := &node.Record{Meta: sm.Clone(), BlobKey: "key/ü 1", Checksums: map[string]string{"SHA-256": "abc", "SHA-1": "def"}}
	if err := c.Insert(ctxT(t), rec); err != nil {
		t.Fatal(err)
	}
	rec.Meta.Identifier = "changed after insert" // the catalog must have copied it
	got := lookup(t, c, "pid-full")
	diff(t, "meta", got.Meta, sm)
	diff(t, "blob key", got.BlobKey, "key/ü 1")
	diff(t, "checksums", got.Checksums, map[string]string{"SHA-256": "abc", "SHA-1": "def"})
	if !got.Meta.DateUploaded.Equal(time.Date(2014, 9, 18, 23, 18, 33, 123e6, time.UTC)) || got.Meta.DateUploaded.Location() != time.UTC {
		t.Errorf("dateUploaded %v, want 2014-09-18T23:18:33.123Z in UTC", got.Meta.DateUploaded)
	}
	got.Meta.AccessPolicy.Allow[0].Subject[0] = "scribble" // and hand out copies
	diff(t, "meta by SID", lookup(t, c, "series-pid-full").Meta, sm)

	minimal := SM("pid-min", at(0, 1))
	insert(t, c, minimal)
	got = lookup(t, c, "pid-min")
	diff(t, "minimal meta", got.Meta, minimal)
	if len(got.Checksums) != 0 {
		t.Errorf("checksums %v, want none", got.Checksums)
	}

	_, err := c.Lookup(ctxT(t), "nope")
	wantKind(t, err, adapter.NotFound, "nope")
	if err := c.Ping(ctxT(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if err := c.Insert(ctxT(t), &node.Record{Meta: SM("", at(0, 0))}); err == nil {
		t.Errorf("Insert without identifier succeeded")
	}
}

func testUniqueness(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	a := SM("a", at(1, 0))
	a.SeriesID = "S"
	insert(t, c, a)
	cases := []struct {
		name  string
		sm    *adapter.SystemMetadata
		words []string
	}{
		{"PID in use as a PID", SM("a", at(2, 0)), []string{`"a"`, "already in use"}},
		{"PID in use as a SID", SM("S", at(2, 0)), []string{`"S"`}},
		{"SID in use as a PID", func() *adapter.SystemMetadata { s := SM("b", at(2, 0)); s.SeriesID = "a"; return s }(), []string{`"a"`}},
		{"SID of another series", func() *adapter.SystemMetadata { s := SM("b", at(2, 0)); s.SeriesID = "S"; return s }(), []string{`"S"`}},
		{"SID equal to the PID", func() *adapter.SystemMetadata { s := SM("b", at(2, 0)); s.SeriesID = "b"; return s }(), []string{`"b"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Insert(ctxT(t), &node.Record{Meta: tc.sm})
			wantKind(t, err, adapter.IdentifierNotUnique, tc.words...)
		})
	}
	if _, err := c.Lookup(ctxT(t), "b"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("a rejected insert left b behind: %v", err)
	}
	// A new SID, and continuing a series by obsoleting its member, are fine.
	b := SM("b", at(3, 0))
	b.SeriesID = "T"
	insert(t, c, b)
	a2 := SM("a2", at(4, 0))
	a2.SeriesID, a2.Obsoletes = "S", "a"
	insert(t, c, a2)
	// A series that a2 does not continue is still taken.
	c2 := SM("c2", at(5, 0))
	c2.SeriesID, c2.Obsoletes = "T", "a2"
	err := c.Insert(ctxT(t), &node.Record{Meta: c2})
	wantKind(t, err, adapter.IdentifierNotUnique, `"T"`)
}

func testChains(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	insert(t, c, SM("v1", at(1, 0)))
	v2 := SM("v2", at(2, 500))
	v2.Obsoletes = "v1"
	insert(t, c, v2)

	old := lookup(t, c, "v1").Meta
	diff(t, "v1 obsoletedBy", old.ObsoletedBy, "v2")
	diff(t, "v1 dateSysMetadataModified", old.DateSysMetadataModified, at(2, 500))
	diff(t, "v1 serialVersion", old.SerialVersion, uint64(2))
	diff(t, "v1 dateUploaded", old.DateUploaded, at(1, 0))
	diff(t, "v2 obsoletes", lookup(t, c, "v2").Meta.Obsoletes, "v1")

	branch := SM("v2b", at(3, 0))
	branch.Obsoletes = "v1"
	wantKind(t, c.Insert(ctxT(t), &node.Record{Meta: branch}), adapter.InvalidRequest, `"v1"`)
	missing := SM("orphan", at(3, 0))
	missing.Obsoletes = "ghost"
	wantKind(t, c.Insert(ctxT(t), &node.Record{Meta: missing}), adapter.NotFound, `"ghost"`)

	arch := SM("arch", at(4, 0))
	arch.Archived = true
	insert(t, c, arch)
	next := SM("arch2", at(5, 0))
	next.Obsoletes = "arch"
	wantKind(t, c.Insert(ctxT(t), &node.Record{Meta: next}), adapter.InvalidRequest, `"arch"`, "archived")

	// Nothing of the rejected inserts was kept, not even the change to v1.
	for _, pid := range []string{"v2b", "orphan", "arch2"} {
		if _, err := c.Lookup(ctxT(t), pid); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("Lookup(%s) after a rejected insert: %v", pid, err)
		}
	}
	diff(t, "v1 after a rejected branch", lookup(t, c, "v1").Meta, old)
	if a := lookup(t, c, "arch").Meta; a.ObsoletedBy != "" || a.SerialVersion != 1 {
		t.Errorf("arch changed by a rejected update: %+v", a)
	}
}

func testSeriesHead(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	prev := ""
	for i, pid := range []string{"h1", "h2", "h3"} {
		sm := SM(pid, at(10*i, 0))
		sm.SeriesID, sm.Obsoletes = "H", prev
		insert(t, c, sm)
		diff(t, fmt.Sprintf("head after %s", pid), lookup(t, c, "H").Meta.Identifier, pid)
		prev = pid
	}
	// A successor that starts a new series leaves h3 the head of H.
	h4 := SM("h4", at(40, 0))
	h4.SeriesID, h4.Obsoletes = "H2", "h3"
	insert(t, c, h4)
	diff(t, "head of H", lookup(t, c, "H").Meta.Identifier, "h3")
	diff(t, "head of H2", lookup(t, c, "H2").Meta.Identifier, "h4")
	// A PID never resolves as a series.
	diff(t, "lookup of a member PID", lookup(t, c, "h1").Meta.Identifier, "h1")
}

// testReplicas: a replica is stored with the chain and series the CN gave,
// whatever this node holds of them, in any order.
func testReplicas(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	replica := func(sm *adapter.SystemMetadata) error {
		return c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "blob-" + sm.Identifier, Replica: true})
	}
	r2 := SM("r2", at(20, 0))
	r2.SeriesID, r2.Obsoletes, r2.AuthoritativeMemberNode = "R", "r1", "urn:node:ORIGIN"
	if err := replica(r2); err != nil {
		t.Fatalf("a replica obsoleting an object not held here: %v", err)
	}
	r1 := SM("r1", at(10, 0))
	r1.SeriesID, r1.ObsoletedBy, r1.AuthoritativeMemberNode = "R", "r2", "urn:node:ORIGIN"
	if err := replica(r1); err != nil {
		t.Fatalf("the earlier replica of a series held here: %v", err)
	}
	diff(t, "head of R", lookup(t, c, "R").Meta.Identifier, "r2")
	diff(t, "r1 obsoletedBy", lookup(t, c, "r1").Meta.ObsoletedBy, "r2")
	diff(t, "r2 serialVersion (not touched)", lookup(t, c, "r2").Meta.SerialVersion, uint64(1))
	wantKind(t, replica(SM("r1", at(30, 0))), adapter.IdentifierNotUnique, "r1")
	bad := SM("r3", at(30, 0))
	bad.SeriesID = "r1"
	wantKind(t, replica(bad), adapter.IdentifierNotUnique, "r1")
	// An object created here still has its chain checked.
	orphan := SM("o2", at(40, 0))
	orphan.Obsoletes = "o1"
	wantKind(t, c.Insert(ctx, &node.Record{Meta: orphan, BlobKey: "blob-o2"}), adapter.NotFound, "o1")
}

func testHoldsBlob(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	insert(t, c, SM("hb", at(1, 0)))
	for key, want := range map[string]bool{"blob-hb": true, "blob-other": false, "": false} {
		got, err := c.HoldsBlob(ctx, key)
		if err != nil || got != want {
			t.Errorf("HoldsBlob(%q) = %v, %v; want %v", key, got, err, want)
		}
	}
	if _, err := c.Delete(ctx, "hb"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.HoldsBlob(ctx, "blob-hb"); err != nil || got {
		t.Errorf("HoldsBlob after Delete = %v, %v; want false", got, err)
	}
}

func testModify(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	sm := SM("m1", at(1, 0))
	sm.SeriesID = "M"
	insert(t, c, sm)
	ctx := ctxT(t)
	readable := func(subject string) []string {
		l, err := c.List(ctx, adapter.ListQuery{Count: 10, ReadableBy: []string{subject}})
		if err != nil {
			t.Fatal(err)
		}
		return pids(l)
	}
	diff(t, "readable by public before", readable("public"), []string(nil))

	got, err := c.Modify(ctx, "M", func(sm *adapter.SystemMetadata) error {
		sm.FormatID = "text/csv"
		sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
		sm.RightsHolder = "CN=new owner"
		sm.DateSysMetadataModified = at(9, 9)
		sm.SerialVersion++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := sm.Clone()
	want.FormatID, want.RightsHolder, want.DateSysMetadataModified, want.SerialVersion = "text/csv", "CN=new owner", at(9, 9), 2
	want.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	diff(t, "Modify's answer", got, want)
	diff(t, "stored after Modify", lookup(t, c, "m1").Meta, want)
	diff(t, "readable by public after", readable("public"), []string{"m1"})
	diff(t, "readable by the old owner", readable("CN=owner"), []string(nil))
	diff(t, "readable by the new owner", readable("CN=new owner"), []string{"m1"})
	l, err := c.List(ctx, adapter.ListQuery{Count: 10, FormatID: "text/csv", FromDate: at(9, 9)})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "listed by the new format and date", pids(l), []string{"m1"})

	boom := errors.New("boom")
	_, err = c.Modify(ctx, "m1", func(sm *adapter.SystemMetadata) error {
		sm.FormatID = "lost"
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Modify returned %v, want fn's error", err)
	}
	diff(t, "stored after an aborted Modify", lookup(t, c, "m1").Meta, want)

	_, err = c.Modify(ctx, "ghost", func(*adapter.SystemMetadata) error { return nil })
	wantKind(t, err, adapter.NotFound, `"ghost"`)
	_, err = c.Modify(ctx, "m1", func(sm *adapter.SystemMetadata) error { sm.Identifier = "m2"; return nil })
	if err == nil {
		t.Errorf("Modify changed the identifier")
	}
}

// testLargeAccessPolicy: a policy at the caps (adapter.MaxAccessRules rules,
// adapter.MaxAccessSubjects subjects) is stored whole, on insert and on Modify;
// one statement per policy hit the databases' bound-variable limits (SQLite's
// 32766) and failed with "too many SQL variables".
func testLargeAccessPolicy(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	policy := func(prefix string) *adapter.AccessPolicy {
		p := &adapter.AccessPolicy{}
		per := adapter.MaxAccessSubjects / adapter.MaxAccessRules
		for i := range adapter.MaxAccessRules {
			r := adapter.AccessRule{Permission: []adapter.Permission{adapter.PermRead}}
			for j := range per {
				r.Subject = append(r.Subject, fmt.Sprintf("CN=%s %d-%d,DC=org", prefix, i, j))
			}
			p.Allow = append(p.Allow, r)
		}
		return p
	}
	readable := func(subject string) []string {
		l, err := c.List(ctx, adapter.ListQuery{Count: 10, ReadableBy: []string{subject}})
		if err != nil {
			t.Fatal(err)
		}
		return pids(l)
	}
	sm := SM("big", at(1, 0))
	sm.AccessPolicy = policy("a")
	insert(t, c, sm)
	diff(t, "stored policy", lookup(t, c, "big").Meta.AccessPolicy, sm.AccessPolicy)
	last := fmt.Sprintf("CN=a %d-%d,DC=org", adapter.MaxAccessRules-1, adapter.MaxAccessSubjects/adapter.MaxAccessRules-1)
	diff(t, "readable by the last subject", readable(last), []string{"big"})

	p := policy("b")
	if _, err := c.Modify(ctx, "big", func(sm *adapter.SystemMetadata) error {
		sm.AccessPolicy = p
		sm.SerialVersion++
		return nil
	}); err != nil {
		t.Fatalf("Modify with %d subjects: %v", adapter.MaxAccessSubjects, err)
	}
	diff(t, "stored policy after Modify", lookup(t, c, "big").Meta.AccessPolicy, p)
	diff(t, "readable by an old subject", readable(last), []string(nil))
	diff(t, "readable by a new subject", readable(strings.Replace(last, "CN=a", "CN=b", 1)), []string{"big"})
}

func testSetChecksum(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	insert(t, c, SM("c1", at(1, 0)))
	ctx := ctxT(t)
	if err := c.SetChecksum(ctx, "c1", "MD5", "one"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetChecksum(ctx, "c1", "SHA-256", "two"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetChecksum(ctx, "c1", "MD5", "three"); err != nil {
		t.Fatal(err)
	}
	diff(t, "checksums", lookup(t, c, "c1").Checksums, map[string]string{"MD5": "three", "SHA-256": "two"})
	wantKind(t, c.SetChecksum(ctx, "ghost", "MD5", "x"), adapter.NotFound, `"ghost"`)
}

// testApplyKept: a batch's kept records move to their new blob key and
// gain their checksums, their system metadata untouched, in the batch's
// transaction: an unknown one fails the whole batch.
func testApplyKept(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	sm := SM("k1", at(1, 0))
	insert(t, c, sm)
	if err := c.SetChecksum(ctx, "k1", "MD5", "one"); err != nil {
		t.Fatal(err)
	}
	kept := &node.Record{Meta: &adapter.SystemMetadata{Identifier: "k1"}, BlobKey: "blob-moved", Checksums: map[string]string{"SHA-256": "two"}}
	_, err := c.Apply(ctx, &node.Batch{Records: []*node.Record{{Meta: SM("k2", at(2, 0)), BlobKey: "blob-k2"}},
		Kept: []*node.Record{kept, {Meta: &adapter.SystemMetadata{Identifier: "ghost"}, BlobKey: "blob-ghost"}}})
	wantKind(t, err, adapter.NotFound, `"ghost"`)
	if _, err := c.Lookup(ctx, "k2"); !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("the record of a failed batch: %v", err)
	}
	diff(t, "record after a failed batch", lookup(t, c, "k1"), &node.Record{Meta: sm, BlobKey: "blob-k1", Checksums: map[string]string{"MD5": "one"}})
	if _, err := c.Apply(ctx, &node.Batch{Kept: []*node.Record{kept}}); err != nil {
		t.Fatal(err)
	}
	diff(t, "kept record", lookup(t, c, "k1"), &node.Record{Meta: sm, BlobKey: "blob-moved", Checksums: map[string]string{"MD5": "one", "SHA-256": "two"}})
	for key, want := range map[string]bool{"blob-k1": false, "blob-moved": true} {
		if got, err := c.HoldsBlob(ctx, key); err != nil || got != want {
			t.Errorf("HoldsBlob(%q) = %v, %v; want %v", key, got, err, want)
		}
	}
}

func testDelete(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	sm := SM("d1", at(1, 0))
	sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	insert(t, c, sm)
	insert(t, c, SM("d2", at(2, 0)))
	if err := c.SetChecksum(ctx, "d1", "MD5", "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: "d1", Event: adapter.EventCreate, Subject: "CN=owner"}); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Delete(ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "deleted record", rec, &node.Record{Meta: sm, BlobKey: "blob-d1", Checksums: map[string]string{"MD5": "x"}})
	_, err = c.Lookup(ctx, "d1")
	wantKind(t, err, adapter.NotFound)
	_, err = c.Delete(ctx, "d1")
	wantKind(t, err, adapter.NotFound, `"d1"`)
	l, err := c.List(ctx, adapter.ListQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "listed after delete", pids(l), []string{"d2"})
	diff(t, "total after delete", l.Total, 1)
	l, err = c.List(ctx, adapter.ListQuery{Count: 10, ReadableBy: []string{"public"}})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "readable after delete", pids(l), []string(nil))
	ev, err := c.Events(ctx, adapter.LogQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Total != 1 || ev.LogEntry[0].Identifier != "d1" {
		t.Errorf("the event log after delete: %+v", ev)
	}
}

func testConcurrency(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	insert(t, c, SM("root", at(0, 0)))
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	var updated, dup sync.Map
	for i := range n {
		wg.Add(3)
		go func() {
			defer wg.Done()
			sm := SM(fmt.Sprintf("conc-%02d", i), at(i, 0))
			sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
			if err := c.Insert(ctx, &node.Record{Meta: sm}); err != nil {
				errs <- err
			}
			if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: sm.Identifier, Event: adapter.EventCreate}); err != nil {
				errs <- err
			}
		}()
		go func() {
			// Everyone tries to obsolete root: exactly one may.
			defer wg.Done()
			sm := SM(fmt.Sprintf("upd-%02d", i), at(100, 0))
			sm.Obsoletes = "root"
			err := c.Insert(ctx, &node.Record{Meta: sm})
			switch {
			case err == nil:
				updated.Store(i, true)
			case !adapter.IsKind(err, adapter.InvalidRequest):
				errs <- err
			}
			// And everyone tries the same new PID: exactly one may.
			err = c.Insert(ctx, &node.Record{Meta: SM("same", at(200, 0))})
			switch {
			case err == nil:
				dup.Store(i, true)
			case !adapter.IsKind(err, adapter.IdentifierNotUnique):
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := c.List(ctx, adapter.ListQuery{Start: i % 7, Count: 5, ReadableBy: []string{"public"}}); err != nil {
				errs <- err
			}
			if _, err := c.Events(ctx, adapter.LogQuery{Count: 5}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	count := func(m *sync.Map) int {
		n := 0
		m.Range(func(any, any) bool { n++; return true })
		return n
	}
	diff(t, "successful updates of root", count(&updated), 1)
	diff(t, "successful inserts of one PID", count(&dup), 1)
	l, _ := listAll(t, c, adapter.ListQuery{Count: 1000, ReadableBy: []string{"public"}})
	diff(t, "public objects", l.Total, n)
	l, _ = listAll(t, c, adapter.ListQuery{Count: 1000})
	diff(t, "all objects", l.Total, n+3)
	ev, err := c.Events(ctx, adapter.LogQuery{Count: 1000})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "events", ev.Total, n)
}

func testReopen(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	full := fullSM("re-full")
	if err := c.Insert(ctx, &node.Record{Meta: full, BlobKey: "k", Checksums: map[string]string{"MD5": "m"}}); err != nil {
		t.Fatal(err)
	}
	v2 := SM("re-2", at(5, 0))
	v2.Obsoletes, v2.SeriesID = "re-full", full.SeriesID
	insert(t, c, v2)
	if err := c.SetChecksum(ctx, "re-2", "SHA-256", "s"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: "re-2", Event: adapter.EventCreate, DateLogged: at(6, 0)}); err != nil {
		t.Fatal(err)
	}
	beforeList, _ := listAll(t, c, adapter.ListQuery{Count: 10})
	beforeFull := lookup(t, c, "re-full")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = open(t)
	diff(t, "record after reopen", lookup(t, c, "re-full"), beforeFull)
	diff(t, "head after reopen", lookup(t, c, full.SeriesID).Meta.Identifier, "re-2")
	diff(t, "checksums after reopen", lookup(t, c, "re-2").Checksums, map[string]string{"SHA-256": "s"})
	l, _ := listAll(t, c, adapter.ListQuery{Count: 10})
	diff(t, "list after reopen", l, beforeList)
	ev, err := c.Events(ctx, adapter.LogQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "events after reopen", entryPIDs(ev), []string{"re-2"})
	// The rules still hold across the reopen.
	wantKind(t, c.Insert(ctx, &node.Record{Meta: SM("re-2", at(7, 0))}), adapter.IdentifierNotUnique)
	if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: "re-2", Event: adapter.EventRead, DateLogged: at(7, 0)}); err != nil {
		t.Fatal(err)
	}
	ev, err = c.Events(ctx, adapter.LogQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Total != 2 || ev.LogEntry[0].EntryID == ev.LogEntry[1].EntryID {
		t.Errorf("events after reopen: %+v", ev)
	}
}

// testRequestMemo: within one request (adapter.WithRequest) a second lookup
// gives what the first read, by PID or SID, until the request writes.
func testRequestMemo(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	req := adapter.WithRequest(t.Context(), "")
	sm := SM("m1", adapter.NewTime(time.Now()))
	sm.SeriesID = "m-series"
	if err := c.Insert(req, &node.Record{Meta: sm, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Lookup(req, "m-series")
	if err != nil {
		t.Fatal(err)
	}
	first.Meta.FormatID = "changed/by-the-caller" // a copy: the memo keeps its own
	// Another request changes the object meanwhile.
	other := t.Context()
	if _, err := c.Modify(other, "m1", func(sm *adapter.SystemMetadata) error { sm.Archived = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m-series", "m1"} {
		again, err := c.Lookup(req, id)
		if err != nil {
			t.Fatal(err)
		}
		if again.Meta.Archived || again.Meta.FormatID != "text/plain" {
			t.Errorf("lookup of %s in the same request: archived %v, format %q; want what the request first read", id, again.Meta.Archived, again.Meta.FormatID)
		}
	}
	if fresh, err := c.Lookup(other, "m1"); err != nil || !fresh.Meta.Archived {
		t.Errorf("another request: %v, %v; want the archived object", fresh, err)
	}
	// The request writes: its memo is cleared, and it reads what is stored.
	if _, err := c.Modify(req, "m1", func(sm *adapter.SystemMetadata) error { sm.FormatID = "text/csv"; return nil }); err != nil {
		t.Fatal(err)
	}
	after, err := c.Lookup(req, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if !after.Meta.Archived || after.Meta.FormatID != "text/csv" {
		t.Errorf("after the request's own write: archived %v, format %q", after.Meta.Archived, after.Meta.FormatID)
	}
}
