package sqlcatalog

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestFewIDEvents: a query by identifier reads by their ids the events of an
// identifier naming few of them, and scans the log for one naming many, with
// the same answer either way.
func TestFewIDEvents(t *testing.T) {
	ctx := context.Background()
	c, err := OpenSQLite(filepath.Join(t.TempDir(), "catalog.db"), withPIDIndexEvery(1), withSparseIDEvents(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var es []adapter.LogEntry
	for i, pid := range []string{"many/0", "few/1", "many/1", "many/2", "few/0", "many/3", "many/4"} {
		es = append(es, adapter.LogEntry{Identifier: pid, Event: adapter.EventRead, Subject: "public"})
		if i == 3 || i == 6 {
			if err := c.AddEvents(ctx, es); err != nil { // indexed as they come: pidIndexEvery 1
				t.Fatal(err)
			}
			es = es[:0]
		}
	}
	for _, tc := range []struct {
		id   string
		few  bool
		pids []string
	}{
		{"many/", false, []string{"many/0", "many/1", "many/2", "many/3", "many/4"}},
		{"few/", true, []string{"few/1", "few/0"}},
		{"many/3", true, []string{"many/3"}},
	} {
		f := newEventFilter(adapter.LogQuery{IDFilter: tc.id, PIDsOnly: true})
		few, err := c.fewIDEvents(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if few != tc.few {
			t.Errorf("%q: few is %v, want %v", tc.id, few, tc.few)
		}
		log, err := c.Events(ctx, adapter.LogQuery{IDFilter: tc.id, PIDsOnly: true, Count: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range log.LogEntry {
			got = append(got, e.Identifier)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.pids) || log.Total != len(tc.pids) {
			t.Errorf("%q: events %v (total %d), want %v", tc.id, got, log.Total, tc.pids)
		}
	}
}
