package sqlcatalogtest

// The acceptance tests of listObjects: filters, paging, lists after writes.

import (
	"fmt"
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

func pids(l *adapter.ObjectList) []string {
	var out []string
	for _, o := range l.ObjectInfo {
		out = append(out, o.Identifier)
	}
	return out
}

func entryPIDs(l *adapter.Log) []string {
	var out []string
	for _, e := range l.LogEntry {
		out = append(out, e.Identifier)
	}
	return out
}

// fixture is a set of objects with known attributes, inserted in order, so that
// the expected answer to any query can be computed.
type fixture struct {
	objs []*adapter.SystemMetadata // in insertion order
}

func (f *fixture) expect(q adapter.ListQuery) []string {
	type row struct {
		sm  *adapter.SystemMetadata
		ord int
	}
	var rows []row
	for i, sm := range f.objs {
		if matches(sm, q) {
			rows = append(rows, row{sm, i})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return a.sm.DateSysMetadataModified.Compare(b.sm.DateSysMetadataModified.Time)
	})
	var out []string
	for _, r := range rows {
		out = append(out, r.sm.Identifier)
	}
	return out
}

func matches(sm *adapter.SystemMetadata, q adapter.ListQuery) bool {
	d := sm.DateSysMetadataModified
	switch {
	case !q.FromDate.IsZero() && d.Before(q.FromDate.Time), !q.ToDate.IsZero() && !d.Before(q.ToDate.Time):
		return false
	case q.FormatID != "" && sm.FormatID != q.FormatID:
		return false
	case q.Identifier != "" && sm.Identifier != q.Identifier && sm.SeriesID != q.Identifier:
		return false
	case q.ExcludeReplicas && sm.AuthoritativeMemberNode != NodeID, q.NodeID != "" && sm.AuthoritativeMemberNode != q.NodeID:
		return false
	case len(q.ReadableBy) > 0:
		for _, s := range q.ReadableBy {
			if s == sm.RightsHolder {
				return true
			}
			if sm.AccessPolicy != nil {
				for _, r := range sm.AccessPolicy.Allow {
					if slices.Contains(r.Subject, s) && len(r.Permission) > 0 {
						return true
					}
				}
			}
		}
		return false
	}
	return true
}

// buildFixture inserts n objects: dates with ties, three formats, every fifth
// a replica, every third public, a series of three.
func buildFixture(t *testing.T, c node.Catalog, n int) *fixture {
	f := &fixture{}
	formats := []string{"text/plain", "text/csv", "application/json"}
	for i := range n {
		sm := SM(fmt.Sprintf("obj-%03d", i), at((i*7)%(n/2+1), 0)) // dates repeat
		sm.FormatID = formats[i%3]
		if i%5 == 0 {
			sm.AuthoritativeMemberNode = OtherNode
		}
		if i%3 == 0 {
			sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
		}
		if i%4 == 1 {
			sm.RightsHolder = "CN=other"
		}
		if i == 10 || i == 20 || i == 30 {
			sm.SeriesID = "fixture-series"
			if i > 10 {
				sm.Obsoletes = f.objs[i-10].Identifier
			}
		}
		insert(t, c, sm)
		if sm.Obsoletes != "" {
			old := f.objs[i-10]
			old.ObsoletedBy, old.DateSysMetadataModified = sm.Identifier, sm.DateSysMetadataModified
			old.SerialVersion++
		}
		f.objs = append(f.objs, sm)
	}
	return f
}

func listAll(t *testing.T, c node.Catalog, q adapter.ListQuery) (*adapter.ObjectList, []string) {
	t.Helper()
	l, err := c.List(ctxT(t), q)
	if err != nil {
		t.Fatalf("List(%+v): %v", q, err)
	}
	return l, pids(l)
}

func testListFilters(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	f := buildFixture(t, c, 60)
	queries := map[string]adapter.ListQuery{
		"all":                  {},
		"fromDate inclusive":   {FromDate: at(14, 0)},
		"toDate exclusive":     {ToDate: at(14, 0)},
		"date range":           {FromDate: at(7, 0), ToDate: at(21, 0)},
		"empty date range":     {FromDate: at(7, 0), ToDate: at(7, 0)},
		"formatId":             {FormatID: "text/csv"},
		"formatId unknown":     {FormatID: "text/nope"},
		"identifier PID":       {Identifier: "obj-005"},
		"identifier SID":       {Identifier: "fixture-series"},
		"identifier unknown":   {Identifier: "nope"},
		"excludeReplicas":      {ExcludeReplicas: true},
		"nodeId":               {NodeID: OtherNode},
		"nodeId and local":     {NodeID: OtherNode, ExcludeReplicas: true},
		"readable by public":   {ReadableBy: []string{"public"}},
		"readable by other":    {ReadableBy: []string{"CN=other"}},
		"readable by either":   {ReadableBy: []string{"CN=other", "public", "public"}},
		"readable by nobody":   {ReadableBy: []string{"CN=nobody"}},
		"format, date, public": {FormatID: "text/plain", FromDate: at(5, 0), ReadableBy: []string{"public"}, ExcludeReplicas: true},
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			want := f.expect(q)
			q.Count = 1000
			l, got := listAll(t, c, q)
			diff(t, "pids", got, want)
			diff(t, "slice", l.Slice, adapter.Slice{Count: len(want), Start: 0, Total: len(want)})
			// The entries carry the listed attributes.
			for _, oi := range l.ObjectInfo {
				sm := f.byPID(oi.Identifier)
				diff(t, "objectInfo", oi, adapter.ObjectInfo{
					Identifier: sm.Identifier, FormatID: sm.FormatID, Checksum: sm.Checksum,
					DateSysMetadataModified: sm.DateSysMetadataModified, Size: sm.Size,
				})
			}
		})
	}
}

func (f *fixture) byPID(pid string) *adapter.SystemMetadata {
	for _, sm := range f.objs {
		if sm.Identifier == pid {
			return sm
		}
	}
	return nil
}

func testListPaging(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	f := buildFixture(t, c, 60)
	for _, q := range []adapter.ListQuery{{}, {FormatID: "text/csv"}, {ReadableBy: []string{"public"}}} {
		want := f.expect(q)
		n := len(want)
		for _, count := range []int{1, 7, n} {
			// Forward, backward and scattered starts must agree with the full list.
			var starts []int
			for s := 0; s < n; s += count {
				starts = append(starts, s)
			}
			order := slices.Clone(starts)
			slices.Reverse(order)
			order = append(order, starts...)
			for _, s := range order {
				q := q
				q.Start, q.Count = s, count
				l, got := listAll(t, c, q)
				end := min(s+count, n)
				diff(t, fmt.Sprintf("%+v", q), got, want[s:end])
				diff(t, fmt.Sprintf("slice of %+v", q), l.Slice, adapter.Slice{Count: end - s, Start: s, Total: n})
			}
		}
		for _, s := range []int{n, n + 1, n + 1000} {
			q := q
			q.Start, q.Count = s, 10
			l, got := listAll(t, c, q)
			diff(t, fmt.Sprintf("past the end %+v", q), l.Slice, adapter.Slice{Count: 0, Start: s, Total: n})
			diff(t, "entries past the end", got, []string(nil))
		}
		q.Start, q.Count = 3, 0
		l, _ := listAll(t, c, q)
		diff(t, "count 0", l.Slice, adapter.Slice{Count: 0, Start: 3, Total: n})
	}
	_, err := c.List(ctxT(t), adapter.ListQuery{Start: -1, Count: 5})
	wantKind(t, err, adapter.InvalidRequest)
	_, err = c.List(ctxT(t), adapter.ListQuery{Count: -1})
	wantKind(t, err, adapter.InvalidRequest)
}

// testListAfterWrites pages through lists, changes them in every way, and
// checks that no answer is stale.
func testListAfterWrites(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	f := buildFixture(t, c, 40)
	ctx := ctxT(t)
	queries := []adapter.ListQuery{{}, {FormatID: "text/plain"}, {ReadableBy: []string{"public"}}, {FromDate: at(5, 0), ToDate: at(15, 0)}, {ExcludeReplicas: true}}
	check := func(step string) {
		t.Helper()
		for _, q := range queries {
			want := f.expect(q)
			for _, count := range []int{3, 10} {
				// Backward first, so that cursors kept from before the write are
				// used before paging forward replaces them.
				var starts []int
				for s := 0; s <= len(want); s += count {
					starts = append(starts, s)
				}
				slices.Reverse(starts)
				for _, s := range starts {
					q := q
					q.Start, q.Count = s, count
					l, got := listAll(t, c, q)
					end := min(s+count, len(want))
					diff(t, fmt.Sprintf("%s: %+v", step, q), got, want[s:end])
					if l.Total != len(want) {
						t.Errorf("%s: %+v: total %d, want %d", step, q, l.Total, len(want))
					}
				}
			}
		}
	}
	check("initial")

	late := SM("late", at(100, 0))
	insert(t, c, late)
	f.objs = append(f.objs, late)
	check("after inserting a late object")

	early := SM("early", at(0, 1))
	early.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	insert(t, c, early)
	f.objs = append(f.objs, early)
	check("after inserting an early object")

	modify := func(pid string, fn func(sm *adapter.SystemMetadata)) {
		t.Helper()
		if _, err := c.Modify(node.WithGivenDates(ctx), pid, func(sm *adapter.SystemMetadata) error { fn(sm); return nil }); err != nil {
			t.Fatal(err)
		}
		fn(f.byPID(pid))
	}
	modify("obj-002", func(sm *adapter.SystemMetadata) { sm.DateSysMetadataModified = at(50, 0) })
	check("after moving an object to the end")
	modify("obj-038", func(sm *adapter.SystemMetadata) { sm.DateSysMetadataModified = at(1, 0) })
	check("after moving an object to the front")
	modify("obj-004", func(sm *adapter.SystemMetadata) { sm.FormatID = "text/plain"; sm.AccessPolicy = nil })
	check("after changing format and access")
	modify("obj-007", func(sm *adapter.SystemMetadata) { sm.AuthoritativeMemberNode = OtherNode })
	check("after making an object a replica")

	upd := SM("obj-001-v2", at(60, 0))
	upd.Obsoletes = "obj-001"
	insert(t, c, upd)
	f.objs = append(f.objs, upd)
	old := f.byPID("obj-001")
	old.DateSysMetadataModified = upd.DateSysMetadataModified
	check("after an update")

	for _, pid := range []string{"obj-003", "obj-039", "early"} {
		if _, err := c.Delete(ctx, pid); err != nil {
			t.Fatal(err)
		}
		f.objs = slices.DeleteFunc(f.objs, func(sm *adapter.SystemMetadata) bool { return sm.Identifier == pid })
	}
	check("after deletes")
}

// testCommitOrder: a write dated before the newest date of the catalog (its
// caller dated it, then waited for the write before it to commit) takes that
// date, so that a harvester that has listed from the newest date it saw lists
// it next time; replicas and writes WithGivenDates keep theirs.
func testCommitOrder(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	write := func(sm *adapter.SystemMetadata) {
		t.Helper()
		if err := c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "blob-" + sm.Identifier}); err != nil {
			t.Fatalf("Insert(%s): %v", sm.Identifier, err)
		}
	}
	dated := func(pid string) adapter.Time {
		t.Helper()
		return lookup(t, c, pid).Meta.DateSysMetadataModified
	}
	write(SM("first", at(10, 0)))
	seen, _ := listAll(t, c, adapter.ListQuery{Count: 100}) // a harvester's look, from the newest date next time
	newest := seen.ObjectInfo[len(seen.ObjectInfo)-1].DateSysMetadataModified

	late := SM("late", at(5, 0)) // dated before "first", committed after it
	write(late)
	diff(t, "the late write's date", dated("late"), at(10, 0))
	_, next := listAll(t, c, adapter.ListQuery{FromDate: newest, Count: 100})
	diff(t, "the harvester's next look", next, []string{"first", "late"})

	// An update obsoleting "late", dated before: both take a date after the
	// newest, which the obsoleted one had (a change gives a row a new date:
	// updateSystemMetadata's optimistic locking compares it).
	v2 := SM("late.v2", at(7, 0))
	v2.Obsoletes = "late"
	write(v2)
	diff(t, "the new version's date", dated("late.v2"), at(10, 1))
	diff(t, "the obsoleted version's date", dated("late"), at(10, 1))

	// A modification dated before the newest takes it (a date after its
	// own); one that leaves the date alone leaves it.
	if _, err := c.Modify(ctx, "first", func(sm *adapter.SystemMetadata) error {
		sm.DateSysMetadataModified = at(3, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	diff(t, "a modification's date", dated("first"), at(10, 1))
	write(SM("later", at(20, 0)))
	if _, err := c.Modify(ctx, "first", func(sm *adapter.SystemMetadata) error { sm.FormatID = "text/csv"; return nil }); err != nil {
		t.Fatal(err)
	}
	diff(t, "the date of a modification that keeps it", dated("first"), at(10, 1))
	// A new serial version dated in the stored date's millisecond (a change
	// made within it) is a change all the same: it takes a later date.
	if _, err := c.Modify(ctx, "late.v2", func(sm *adapter.SystemMetadata) error { sm.SerialVersion++; return nil }); err != nil {
		t.Fatal(err)
	}
	diff(t, "a new serial version's date", dated("late.v2"), at(20, 0))

	// Another node's dates are kept.
	if _, err := c.Modify(node.WithGivenDates(ctx), "first", func(sm *adapter.SystemMetadata) error {
		sm.DateSysMetadataModified = at(2, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	diff(t, "a modification with given dates", dated("first"), at(2, 0))
	replica := SM("replica", at(1, 0))
	replica.AuthoritativeMemberNode = OtherNode
	if err := c.Insert(ctx, &node.Record{Meta: replica, BlobKey: "blob-replica", Replica: true}); err != nil {
		t.Fatal(err)
	}
	diff(t, "a replica's date", dated("replica"), at(1, 0))
	write(SM("after", at(15, 0)))
	diff(t, "a write after them", dated("after"), at(20, 0))

	// The newest rows going away, or back, take nothing from what a
	// harvester has seen: a write dated before it still takes the newest
	// date the catalog ever listed.
	for _, pid := range []string{"after", "later"} {
		if _, err := c.Delete(ctx, pid); err != nil {
			t.Fatal(err)
		}
	}
	write(SM("after-deletes", at(16, 0)))
	diff(t, "a write after the newest rows' deletes", dated("after-deletes"), at(20, 0))
	write(SM("newest", at(30, 0)))
	if _, err := c.Modify(node.WithGivenDates(ctx), "newest", func(sm *adapter.SystemMetadata) error {
		sm.DateSysMetadataModified = at(4, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	write(SM("after-given-dates", at(25, 0)))
	diff(t, "a write after the newest row was given an older date", dated("after-given-dates"), at(30, 0))
}
