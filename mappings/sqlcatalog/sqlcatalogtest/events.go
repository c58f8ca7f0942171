package sqlcatalogtest

// The acceptance tests of the event log: filters, paging, events with writes.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

func testEvents(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	pub := SM("ev-a", at(1, 0))
	pub.SeriesID = "EVS"
	pub.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	insert(t, c, pub)
	next := SM("ev-b", at(2, 0))
	next.SeriesID, next.Obsoletes = "EVS", "ev-a"
	insert(t, c, next)
	insert(t, c, SM("other", at(3, 0)))

	add := func(e adapter.LogEntry) {
		t.Helper()
		if err := c.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	add(adapter.LogEntry{Identifier: "ev-a", Event: adapter.EventCreate, IPAddress: "10.0.0.1", UserAgent: "ua/1", Subject: "CN=owner", DateLogged: at(10, 0), NodeIdentifier: NodeID})
	add(adapter.LogEntry{Identifier: "ev-a", Event: adapter.EventRead, IPAddress: "10.0.0.2", UserAgent: "ua/2", Subject: "public", DateLogged: at(11, 0), NodeIdentifier: NodeID})
	add(adapter.LogEntry{Identifier: "ev-b", Event: adapter.EventUpdate, Subject: "CN=owner", DateLogged: at(12, 0), NodeIdentifier: NodeID})
	add(adapter.LogEntry{Identifier: "other", Event: adapter.EventRead, Subject: "CN=x", DateLogged: at(12, 0), NodeIdentifier: NodeID})
	add(adapter.LogEntry{Identifier: "other", Event: "custom_v2_event", Subject: "CN=x", DateLogged: at(11, 500), NodeIdentifier: NodeID, EntryID: "kept-id"})
	before := adapter.Now()
	add(adapter.LogEntry{Identifier: "ev-b", Event: adapter.EventRead, Subject: "CN=y", NodeIdentifier: NodeID})

	all, err := c.Events(ctx, adapter.LogQuery{Count: 100})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "all events in order", entryPIDs(all), []string{"ev-a", "ev-a", "other", "ev-b", "other", "ev-b"})
	diff(t, "slice", all.Slice, adapter.Slice{Count: 6, Start: 0, Total: 6})
	diff(t, "first entry", all.LogEntry[0], adapter.LogEntry{
		EntryID: all.LogEntry[0].EntryID, Identifier: "ev-a", Event: adapter.EventCreate, IPAddress: "10.0.0.1",
		UserAgent: "ua/1", Subject: "CN=owner", DateLogged: at(10, 0), NodeIdentifier: NodeID,
	})
	diff(t, "a given entry id", all.LogEntry[2].EntryID, "kept-id")
	seen := map[string]bool{}
	for _, e := range all.LogEntry {
		if e.EntryID == "" || seen[e.EntryID] {
			t.Errorf("entry id %q is empty or repeated", e.EntryID)
		}
		seen[e.EntryID] = true
	}
	// Equal dates keep the order of arrival.
	if a, b := all.LogEntry[3], all.LogEntry[4]; a.Identifier != "ev-b" || b.Identifier != "other" {
		t.Errorf("events logged at the same time are out of order: %+v, %+v", a, b)
	}
	if last := all.LogEntry[5]; last.DateLogged.Before(before.Time) || last.DateLogged.After(time.Now()) {
		t.Errorf("an empty dateLogged became %v, want now", last.DateLogged)
	}

	queries := map[string]struct {
		q    adapter.LogQuery
		want []string // event names
	}{
		"fromDate inclusive": {adapter.LogQuery{FromDate: at(11, 500)}, []string{"custom_v2_event", "update", "read", "read"}},
		"toDate exclusive":   {adapter.LogQuery{ToDate: at(11, 500)}, []string{"create", "read"}},
		"event":              {adapter.LogQuery{Event: adapter.EventRead}, []string{"read", "read", "read"}},
		"event v2":           {adapter.LogQuery{Event: "custom_v2_event"}, []string{"custom_v2_event"}},
		"PID prefix":         {adapter.LogQuery{IDFilter: "ev-"}, []string{"create", "read", "update", "read"}},
		"exact PID":          {adapter.LogQuery{IDFilter: "ev-b"}, []string{"update", "read"}},
		"prefix of nothing":  {adapter.LogQuery{IDFilter: "zz"}, nil},
		"SID":                {adapter.LogQuery{IDFilter: "EVS"}, []string{"create", "read", "update", "read"}},
		"readable by public": {adapter.LogQuery{ReadableBy: []string{"public"}}, []string{"create", "read"}},
		"readable by owner":  {adapter.LogQuery{ReadableBy: []string{"CN=owner"}}, []string{"create", "read", "custom_v2_event", "update", "read", "read"}},
		"read, readable, after": {adapter.LogQuery{Event: adapter.EventRead, ReadableBy: []string{"public", "CN=nobody"}, FromDate: at(11, 0)},
			[]string{"read"}},
	}
	for name, tc := range queries {
		t.Run(name, func(t *testing.T) {
			q := tc.q
			q.Count = 100
			l, err := c.Events(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range l.LogEntry {
				got = append(got, e.Event)
			}
			diff(t, "events", got, tc.want)
			diff(t, "slice", l.Slice, adapter.Slice{Count: len(tc.want), Total: len(tc.want)})
		})
	}
	_, err = c.Events(ctx, adapter.LogQuery{Start: -1})
	wantKind(t, err, adapter.InvalidRequest)
}

func testEventPaging(t *testing.T, open func(t *testing.T) node.Catalog) {
	c := open(t)
	ctx := ctxT(t)
	const n = 57
	var want []string
	for i := range n {
		pid := fmt.Sprintf("p%02d", i%9)
		// Dates go back and forth and repeat.
		if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: pid, Event: adapter.EventRead, DateLogged: at(0, (i*37)%20*100)}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.Events(ctx, adapter.LogQuery{Count: n})
	if err != nil {
		t.Fatal(err)
	}
	if all.Total != n || len(all.LogEntry) != n {
		t.Fatalf("slice %+v", all.Slice)
	}
	for i := 1; i < n; i++ {
		if all.LogEntry[i].DateLogged.Before(all.LogEntry[i-1].DateLogged.Time) {
			t.Fatalf("entries %d and %d are out of order", i-1, i)
		}
	}
	for _, e := range all.LogEntry {
		want = append(want, e.EntryID)
	}
	check := func(step string, want []string) {
		for _, count := range []int{1, 5, 10} {
			var starts []int
			for s := 0; s < len(want)+count; s += count {
				starts = append(starts, s)
			}
			rev := slices.Clone(starts)
			slices.Reverse(rev)
			starts = append(rev, starts...)
			for _, s := range starts {
				l, err := c.Events(ctx, adapter.LogQuery{Start: s, Count: count})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range l.LogEntry {
					got = append(got, e.EntryID)
				}
				end := min(s+count, len(want))
				var w []string
				if s < len(want) {
					w = want[s:end]
				}
				diff(t, fmt.Sprintf("%s: start %d count %d", step, s, count), got, w)
				diff(t, fmt.Sprintf("%s: total", step), l.Total, len(want))
			}
		}
	}
	check("initial", want)
	// An event logged now goes to the end; one dated in the past goes before.
	if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: "p00", Event: adapter.EventRead}); err != nil {
		t.Fatal(err)
	}
	if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: "p01", Event: adapter.EventRead, DateLogged: at(0, 0)}); err != nil {
		t.Fatal(err)
	}
	all, err = c.Events(ctx, adapter.LogQuery{Count: n + 10})
	if err != nil {
		t.Fatal(err)
	}
	var want2 []string
	for _, e := range all.LogEntry {
		want2 = append(want2, e.EntryID)
	}
	if len(want2) != n+2 || want2[len(want2)-1] == want[len(want)-1] {
		t.Fatalf("after two more events: %v", want2)
	}
	check("after more events", want2)
}

// testEventsWithWrites: the events a write's ctx carries (node.WithEvents)
// are appended when, and only when, the write commits.
func testEventsWithWrites(t *testing.T, open func(t *testing.T) node.Catalog) {
	ctx := t.Context()
	c := open(t)
	logged := func(pid, event string) context.Context {
		return node.WithEvents(ctx, adapter.LogEntry{Identifier: pid, Event: event, Subject: "CN=owner"})
	}
	now := adapter.NewTime(time.Now())
	if err := c.Insert(logged("w1", adapter.EventCreate), &node.Record{Meta: SM("w1", now), BlobKey: "k1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Insert(logged("w1", "refused"), &node.Record{Meta: SM("w1", now), BlobKey: "k2"}); !adapter.IsKind(err, adapter.IdentifierNotUnique) {
		t.Fatalf("a second w1: %v, want IdentifierNotUnique", err)
	}
	if _, err := c.Modify(logged("w1", adapter.EventUpdate), "w1", func(sm *adapter.SystemMetadata) error { sm.Archived = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Modify(logged("w1", "aborted"), "w1", func(*adapter.SystemMetadata) error {
		return adapter.Errorf(adapter.InvalidRequest, "no")
	}); err == nil {
		t.Fatal("an aborted Modify succeeded")
	}
	if _, err := c.Delete(logged("w1", adapter.EventDelete), "w1"); err != nil {
		t.Fatal(err)
	}
	l, err := c.Events(ctx, adapter.LogQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range l.LogEntry {
		got = append(got, e.Identifier+" "+e.Event)
	}
	diff(t, "events of the writes", got, []string{"w1 create", "w1 update", "w1 delete"})
}
