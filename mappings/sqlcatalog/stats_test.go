package sqlcatalog

import (
	"fmt"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

func TestReservations(t *testing.T) { checkReservations(t, sqliteOpener()(t).(*Catalog)) }

func TestStatistics(t *testing.T) { checkStatistics(t, sqliteOpener()(t).(*Catalog)) }

// checkReservations: a reservation is bound to its subject (SQLite and PostgreSQL).
func checkReservations(t *testing.T, c *Catalog) {
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
	// Hold takes a held reservation and makes a new one.
	for _, id := range []string{"r1", "r2"} {
		if err := c.Hold(ctx, id, "carol"); err != nil {
			t.Fatal(err)
		}
		if who, err := c.Reservation(ctx, id); err != nil || who != "carol" {
			t.Fatalf("%s: holder after Hold %q %v", id, who, err)
		}
	}
}

// checkStatistics counts objects and events by format and period, with sizes
// beyond 32 bits (SUM of a BIGINT is a NUMERIC on PostgreSQL) and hourly buckets.
func checkStatistics(t *testing.T, c *Catalog) {
	ctx := t.Context()
	day := func(d int) adapter.Time { return adapter.NewTime(time.Date(2026, 3, d, 10, 0, 0, 0, time.UTC)) }
	const big = 5 << 40 // 5 TiB
	for i, f := range []struct {
		format string
		size   uint64
		d      int
	}{{"text/csv", 10, 1}, {"text/csv", 20, 2}, {"text/plain", 5, 3}, {"application/x-big", big, 4}, {"application/x-big", big, 4}} {
		sm := sqlcatalogtest.SM(string(rune('a'+i)), day(f.d))
		sm.FormatID, sm.Size, sm.DateUploaded = f.format, f.size, day(f.d)
		if err := c.Insert(ctx, &node.Record{Meta: sm, BlobKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.ObjectStatistics(ctx, adapter.StatsQuery{ToDate: day(4)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Objects != 3 || st.Bytes != 35 || len(st.Formats) != 2 || st.Formats[0].FormatID != "text/csv" || st.Formats[0].Objects != 2 || st.Formats[0].Bytes != 30 {
		t.Fatalf("before the 4th: %+v", st)
	}
	st, err = c.ObjectStatistics(ctx, adapter.StatsQuery{FormatID: "text/csv", FromDate: day(2)})
	if err != nil || st.Objects != 1 || st.Bytes != 20 {
		t.Fatalf("csv from the 2nd: %+v %v", st, err)
	}
	st, err = c.ObjectStatistics(ctx, adapter.StatsQuery{})
	if err != nil || st.Objects != 5 || st.Bytes != 35+2*big || len(st.Formats) != 3 || st.Formats[0] != (adapter.FormatStats{FormatID: "application/x-big", Objects: 2, Bytes: 2 * big}) {
		t.Fatalf("all: %+v %v", st, err)
	}
	st, err = c.ObjectStatistics(ctx, adapter.StatsQuery{FormatID: "no/such"})
	if err != nil || st.Objects != 0 || st.Bytes != 0 || len(st.Formats) != 0 {
		t.Fatalf("no match: %+v %v", st, err)
	}
	st, err = c.ObjectStatistics(ctx, adapter.StatsQuery{Replicas: true})
	if err != nil || st.Objects != 0 || st.Bytes != 0 {
		t.Fatalf("replicas, none yet: %+v %v", st, err)
	}
	rep := sqlcatalogtest.SM("replica", day(5))
	rep.Size, rep.AuthoritativeMemberNode = 7, "urn:node:elsewhere"
	if err := c.Insert(ctx, &node.Record{Meta: rep, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	st, err = c.ObjectStatistics(ctx, adapter.StatsQuery{Replicas: true})
	if err != nil || st.Objects != 1 || st.Bytes != 7 {
		t.Fatalf("replicas: %+v %v", st, err)
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
	if fmt.Sprint(ev.Counts) != fmt.Sprint(want) {
		t.Fatalf("by day: %+v, want %+v", ev.Counts, want)
	}
	ev, err = c.EventStatistics(ctx, adapter.StatsQuery{Period: "month", Event: "read"})
	if err != nil || len(ev.Counts) != 1 || ev.Counts[0] != (adapter.EventCount{Event: "read", Period: "2026-03", Count: 3}) {
		t.Fatalf("reads by month: %+v %v", ev, err)
	}
	ev, err = c.EventStatistics(ctx, adapter.StatsQuery{Period: "hour", FromDate: day(2)})
	if err != nil || len(ev.Counts) != 1 || ev.Counts[0] != (adapter.EventCount{Event: "read", Period: "2026-03-02T10:00Z", Count: 1}) {
		t.Fatalf("by hour from the 2nd: %+v %v", ev, err)
	}
}
