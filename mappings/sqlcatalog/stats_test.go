package sqlcatalog

import (
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

func TestReservations(t *testing.T) {
	c := sqliteOpener()(t).(*Catalog)
	ctx := t.Context()
	if _, err := c.Reservation(ctx, "r1"); !adapter.IsKind(err, adapter.NotFound) {
		t.Fatalf("no reservation yet: %v", err)
	}
	if err := c.Reserve(ctx, "r1", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(ctx, "r1", "alice"); err != nil {
		t.Fatalf("reserving again by the holder: %v", err)
	}
	if err := c.Reserve(ctx, "r1", "bob"); !adapter.IsKind(err, adapter.IdentifierNotUnique) {
		t.Fatalf("another subject's reservation: %v", err)
	}
	if who, err := c.Reservation(ctx, "r1"); err != nil || who != "alice" {
		t.Fatalf("holder %q %v", who, err)
	}
}

func TestStatistics(t *testing.T) {
	c := sqliteOpener()(t).(*Catalog)
	ctx := t.Context()
	day := func(d int) adapter.Time { return adapter.NewTime(time.Date(2026, 3, d, 10, 0, 0, 0, time.UTC)) }
	for i, f := range []struct {
		format string
		size   uint64
		d      int
	}{{"text/csv", 10, 1}, {"text/csv", 20, 2}, {"text/plain", 5, 3}} {
		sm := sqlcatalogtest.SM(string(rune('a'+i)), day(f.d))
		sm.FormatID, sm.Size, sm.DateUploaded = f.format, f.size, day(f.d)
		if err := c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.ObjectStatistics(ctx, adapter.StatsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Objects != 3 || st.Bytes != 35 || len(st.Formats) != 2 || st.Formats[0].Objects != 2 || st.Formats[0].Bytes != 30 {
		t.Fatalf("all: %+v", st)
	}
	st, _ = c.ObjectStatistics(ctx, adapter.StatsQuery{FormatID: "text/csv", FromDate: day(2)})
	if st.Objects != 1 || st.Bytes != 20 {
		t.Fatalf("csv from the 2nd: %+v", st)
	}
	for _, e := range []struct {
		ev string
		d  int
	}{{"read", 1}, {"read", 1}, {"create", 1}, {"read", 2}} {
		if err := c.AddEvent(ctx, adapter.LogEntry{Identifier: "a", Event: e.ev, DateLogged: day(e.d), IPAddress: "x", UserAgent: "x", Subject: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := c.EventStatistics(ctx, adapter.StatsQuery{Period: "day"})
	if err != nil {
		t.Fatal(err)
	}
	want := []adapter.EventCount{{Event: "create", Period: "2026-03-01", Count: 1}, {Event: "read", Period: "2026-03-01", Count: 2}, {Event: "read", Period: "2026-03-02", Count: 1}}
	if len(ev.Counts) != len(want) {
		t.Fatalf("by day: %+v", ev.Counts)
	}
	for i := range want {
		if ev.Counts[i] != want[i] {
			t.Fatalf("by day: %+v, want %+v", ev.Counts, want)
		}
	}
	ev, _ = c.EventStatistics(ctx, adapter.StatsQuery{Period: "month", Event: "read"})
	if len(ev.Counts) != 1 || ev.Counts[0] != (adapter.EventCount{Event: "read", Period: "2026-03", Count: 3}) {
		t.Fatalf("reads by month: %+v", ev.Counts)
	}
}
