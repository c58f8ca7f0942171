package main

// End-to-end tests of the member node's listings (e2e_test.go says how they
// run): listObjects and getLogRecords, their filters and paging.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// listObjects: filters, paging and order, on v1 and v2.
func TestListObjects(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 12
	fmts := []string{"text/plain", "application/octet-stream", "text/csv"}
	var infos []adapter.ObjectInfo // in creation order
	for i := range n {
		d := genBytes(uint64(800+i), 100+i)
		sm := newSysmeta(fmt.Sprintf("list-%02d", i), fmts[i%3], "MD5", d, adapter.PermChangePermission)
		create(t, s, sm, d)
		m := getMeta(t, s, 2, sm.Identifier)
		infos = append(infos, adapter.ObjectInfo{Identifier: m.Identifier, FormatID: m.FormatID, Checksum: m.Checksum, DateSysMetadataModified: m.DateSysMetadataModified, Size: m.Size})
		// Distinct dates, so that date filters split the list exactly.
		for time.Now().Truncate(time.Millisecond).Equal(m.DateSysMetadataModified.Time) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
	ids := func(is []adapter.ObjectInfo) []string {
		var out []string
		for _, i := range is {
			out = append(out, i.Identifier)
		}
		return out
	}
	where := func(f func(i int, oi adapter.ObjectInfo) bool) []string {
		var out []string
		for i, oi := range infos {
			if f(i, oi) {
				out = append(out, oi.Identifier)
			}
		}
		return out
	}
	mid := infos[5].DateSysMetadataModified
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			for _, c := range []struct {
				name  string
				q     string
				want  []string // the page
				total int
				start int
			}{
				{"all", "", ids(infos), n, 0},
				{"fromDate inclusive", "fromDate=" + at(mid), where(func(i int, _ adapter.ObjectInfo) bool { return i >= 5 }), n - 5, 0},
				{"toDate exclusive", "toDate=" + at(mid), where(func(i int, _ adapter.ObjectInfo) bool { return i < 5 }), 5, 0},
				{"fromDate and toDate", "fromDate=" + at(infos[2].DateSysMetadataModified) + "&toDate=" + at(infos[7].DateSysMetadataModified),
					where(func(i int, _ adapter.ObjectInfo) bool { return i >= 2 && i < 7 }), 5, 0},
				{"fromDate with an offset", "fromDate=" + url.QueryEscape(mid.In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000-07:00")),
					where(func(i int, _ adapter.ObjectInfo) bool { return i >= 5 }), n - 5, 0},
				{"empty date range", "fromDate=" + at(mid) + "&toDate=" + at(mid), nil, 0, 0},
				{"bare dates", "fromDate=2000-01-01&toDate=2999-12-31", ids(infos), n, 0},
				{"a future fromDate", "fromDate=2999-01-01T00:00:00Z", nil, 0, 0},
				{"formatId", "formatId=" + url.QueryEscape("text/csv"), where(func(_ int, oi adapter.ObjectInfo) bool { return oi.FormatID == "text/csv" }), n / 3, 0},
				{"formatId and fromDate", "formatId=text%2Fplain&fromDate=" + at(mid),
					where(func(i int, oi adapter.ObjectInfo) bool { return i >= 5 && oi.FormatID == "text/plain" }), 2, 0},
				{"unknown formatId", "formatId=image%2Fpng", nil, 0, 0},
				{"identifier", "identifier=list-07", []string{"list-07"}, 1, 0},
				{"unknown identifier", "identifier=list-99", nil, 0, 0},
				{"replicaStatus=false", "replicaStatus=false", ids(infos), n, 0},
				{"replicaStatus=true", "replicaStatus=true", ids(infos), n, 0},
				{"first page", "start=0&count=5", ids(infos[:5]), n, 0},
				{"second page", "start=5&count=5", ids(infos[5:10]), n, 5},
				{"last page", "start=10&count=5", ids(infos[10:]), n, 10},
				{"count 0", "count=0", nil, n, 0},
				{"start at the end", "start=12", nil, n, 12},
				{"start past the end", "start=100&count=5", nil, n, 100},
				{"filtered page", "formatId=text%2Fplain&start=1&count=2", where(func(i int, oi adapter.ObjectInfo) bool { return oi.FormatID == "text/plain" && i > 0 && i < 9 }), 4, 1},
			} {
				t.Run(c.name, func(t *testing.T) {
					l := listObjects(t, s, v, c.q)
					if got := pids(l); !slices.Equal(got, c.want) || l.Total != c.total || l.Start != c.start {
						t.Errorf("start %d total %d %v, want start %d total %d %v", l.Start, l.Total, got, c.start, c.total, c.want)
					}
					for i := 1; i < len(l.ObjectInfo); i++ {
						if l.ObjectInfo[i].DateSysMetadataModified.Before(l.ObjectInfo[i-1].DateSysMetadataModified.Time) {
							t.Errorf("not in ascending dateSysMetadataModified order: %v", pids(l))
						}
					}
					for _, oi := range l.ObjectInfo {
						for _, want := range infos {
							if want.Identifier == oi.Identifier && (want.FormatID != oi.FormatID || want.Size != oi.Size ||
								want.Checksum != oi.Checksum || !want.DateSysMetadataModified.Equal(oi.DateSysMetadataModified.Time)) {
								t.Errorf("listed %+v, stored %+v", oi, want)
							}
						}
					}
				})
			}
			t.Run("pages add up", func(t *testing.T) {
				var got []string
				for start := 0; start < n; start += 5 {
					l := listObjects(t, s, v, fmt.Sprintf("start=%d&count=5", start))
					if l.Total != n {
						t.Errorf("total %d at start %d", l.Total, start)
					}
					got = append(got, pids(l)...)
				}
				if !slices.Equal(got, ids(infos)) {
					t.Errorf("paged %v, want %v", got, ids(infos))
				}
			})
			for _, q := range []string{"count=-1", "count=abc", "start=-1", "start=1.5", "fromDate=yesterday", "toDate=2024-13-45", "replicaStatus=maybe", "identifier=a%20b", "formatId=%FF", "nodeId=urn:node:%00"} {
				t.Run("bad "+q, func(t *testing.T) {
					wantError(t, s.get(t, mnp(v, "/object")+"?"+q), http.StatusBadRequest, "InvalidRequest")
				})
			}
		})
	}
	t.Run("after changes", func(t *testing.T) { listAfterChanges(t, s, ids(infos)) })
}

// listAfterChanges pages through listObjects (so that any paging state is
// warm), changes objects, and checks that totals, pages and filters follow.
func listAfterChanges(t *testing.T, s *server, initial []string) {
	// order is the expected list: initial, less what moved, plus what moved, in the order moved.
	order := slices.Clone(initial)
	moved := func(ids ...string) {
		for _, id := range ids {
			if i := slices.Index(order, id); i >= 0 {
				order = slices.Delete(order, i, i+1)
			}
			order = append(order, id)
		}
	}
	check := func(t *testing.T, what string) {
		t.Helper()
		for _, v := range []int{1, 2} {
			var got []string
			for start := 0; start < len(order)+3; start += 3 {
				l := listObjects(t, s, v, fmt.Sprintf("start=%d&count=3", start))
				if l.Total != len(order) {
					t.Errorf("%s: v%d start %d: total %d, want %d", what, v, start, l.Total, len(order))
				}
				got = append(got, pids(l)...)
			}
			if !slices.Equal(got, order) {
				t.Errorf("%s: v%d pages give %v, want %v", what, v, got, order)
			}
			csv := listObjects(t, s, v, "formatId=text%2Fcsv")
			want := 0
			for _, id := range order {
				if getMeta(t, s, 2, id).FormatID == "text/csv" {
					want++
				}
			}
			if csv.Total != want || csv.Count != want {
				t.Errorf("%s: v%d formatId=text/csv: total %d count %d, want %d", what, v, csv.Total, csv.Count, want)
			}
		}
	}
	check(t, "before")
	wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/list-02"), nil), "list-02")
	moved("list-02")
	check(t, "after archive")
	d := genBytes(850, 10)
	r := s.send(t, http.MethodPut, objectPath(2, "list-04"), false, textPart("newPid", "list-04-next"),
		filePart("object", "o", bytes.NewReader(d)), docPart("sysmeta", newSysmeta("list-04-next", "text/csv", "MD5", d)))
	if wantIdentifier(t, r, "list-04-next") {
		moved("list-04", "list-04-next")
	}
	check(t, "after update")
	m := getMeta(t, s, 2, "list-00")
	m.FormatID = "text/csv" // moves it into the text/csv filter
	if wantStatus(t, s.send(t, http.MethodPut, mnp(2, "/meta"), false, textPart("pid", "list-00"), docPart("sysmeta", m)), http.StatusOK) {
		moved("list-00")
	}
	check(t, "after updateSystemMetadata")
	d = genBytes(851, 10)
	create(t, s, newSysmeta("list-new", "text/csv", "MD5", d), d)
	moved("list-new")
	check(t, "after create")
}

// getLogRecords: filters and paging.
func TestLogRecords(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, pid := range []string{"log-a-1", "log-a-2", "log-b-1"} {
		d := genBytes(900, 50)
		create(t, s, newSysmeta(pid, "text/plain", "MD5", d), d)
	}
	for _, pid := range []string{"log-a-1", "log-b-1", "log-a-1", "log-a-2", "log-b-1"} {
		wantStatus(t, s.get(t, objectPath(2, pid)), http.StatusOK)
		time.Sleep(2 * time.Millisecond)
	}
	all := logRecords(t, s, 2, "")
	if all.Total != 8 || all.Count != 8 {
		t.Fatalf("%d (total %d) events, want 3 creates and 5 reads: %v", all.Count, all.Total, events(all))
	}
	for i := 1; i < len(all.LogEntry); i++ {
		if all.LogEntry[i].DateLogged.Before(all.LogEntry[i-1].DateLogged.Time) {
			t.Errorf("not in ascending dateLogged order: %v", all.LogEntry)
		}
	}
	entries := func(f func(e adapter.LogEntry) bool) []string {
		var out []string
		for _, e := range all.LogEntry {
			if f(e) {
				out = append(out, e.EntryID)
			}
		}
		return out
	}
	ids := func(l *adapter.Log) []string {
		var out []string
		for _, e := range l.LogEntry {
			out = append(out, e.EntryID)
		}
		return out
	}
	from := all.LogEntry[4].DateLogged
	for _, v := range []int{1, 2} {
		idParam := "idFilter"
		if v == 1 {
			idParam = "pidFilter"
		}
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			for _, c := range []struct {
				name  string
				q     string
				want  []string
				total int
			}{
				{"all", "", entries(func(adapter.LogEntry) bool { return true }), 8},
				{"event create", "event=create", entries(func(e adapter.LogEntry) bool { return e.Event == "create" }), 3},
				{"event read", "event=read", entries(func(e adapter.LogEntry) bool { return e.Event == "read" }), 5},
				{"event delete", "event=delete", nil, 0},
				{"id prefix", idParam + "=log-a", entries(func(e adapter.LogEntry) bool { return strings.HasPrefix(e.Identifier, "log-a") }), 5},
				{"whole id", idParam + "=log-b-1", entries(func(e adapter.LogEntry) bool { return e.Identifier == "log-b-1" }), 3},
				{"id and event", idParam + "=log-a&event=read", entries(func(e adapter.LogEntry) bool { return strings.HasPrefix(e.Identifier, "log-a") && e.Event == "read" }), 3},
				{"fromDate inclusive", "fromDate=" + at(from), entries(func(e adapter.LogEntry) bool { return !e.DateLogged.Before(from.Time) }), -1},
				{"toDate exclusive", "toDate=" + at(from), entries(func(e adapter.LogEntry) bool { return e.DateLogged.Before(from.Time) }), -1},
				{"page", "start=2&count=3", ids(all)[2:5], 8},
				{"page past the end", "start=8&count=3", nil, 8},
				{"filtered page", "event=read&start=1&count=2", entries(func(e adapter.LogEntry) bool { return e.Event == "read" })[1:3], 5},
			} {
				t.Run(c.name, func(t *testing.T) {
					l := logRecords(t, s, v, c.q)
					total := c.total
					if total < 0 {
						total = len(c.want)
					}
					if got := ids(l); !slices.Equal(got, c.want) || l.Total != total {
						t.Errorf("total %d entries %v, want total %d %v", l.Total, got, total, c.want)
					}
				})
			}
			for _, q := range []string{"count=-1", "start=x", "fromDate=soon", "toDate=2024-02-30T00:00:00Z", "event=read%00", "idFilter=%C3"} {
				t.Run("bad "+q, func(t *testing.T) {
					wantError(t, s.get(t, mnp(v, "/log")+"?"+q), http.StatusBadRequest, "InvalidRequest")
				})
			}
		})
	}
	t.Run("new events", func(t *testing.T) {
		// After the pages above, new events must show in totals and pages.
		before := logRecords(t, s, 2, "event=read&"+"idFilter=log-a")
		for range 3 {
			wantStatus(t, s.get(t, objectPath(2, "log-a-2")), http.StatusOK)
		}
		after := logRecords(t, s, 2, "event=read&idFilter=log-a&start=1&count=100")
		if after.Total != before.Total+3 || after.Count != before.Total+2 {
			t.Errorf("after 3 reads: total %d count %d, had total %d", after.Total, after.Count, before.Total)
		}
		if l := logRecords(t, s, 1, ""); l.Total != 11 {
			t.Errorf("v1: total %d, want 11", l.Total)
		}
	})
	t.Run("who is logged", func(t *testing.T) {
		// The address is the peer's: headers a client sends cannot forge it.
		// A trusted caller (here the public, made administrator) sees it.
		admin := startServer(t, "", adminEnv)
		d := genBytes(901, 50)
		create(t, admin, newSysmeta("log-who", "text/plain", "MD5", d), d)
		r := admin.get(t, objectPath(2, "log-who"), "User-Agent", "e2e-agent/1.0", "X-Forwarded-For", "203.0.113.9", "X-Real-IP", "203.0.113.10")
		wantStatus(t, r, http.StatusOK)
		l := logRecords(t, admin, 2, "idFilter=log-who&event=read")
		e := l.LogEntry[len(l.LogEntry)-1]
		if e.IPAddress != "127.0.0.1" || e.UserAgent != "e2e-agent/1.0" || e.Subject != "public" || e.NodeIdentifier != testNodeID {
			t.Errorf("logged %+v, want ipAddress 127.0.0.1, userAgent e2e-agent/1.0, subject public", e)
		}
		// Anyone else sees neither the address nor the subject of another's
		// event, an anonymous one included (GMN's <NotAuthorized>).
		wantStatus(t, s.get(t, objectPath(2, "log-b-1"), "User-Agent", "e2e-agent/1.0"), http.StatusOK)
		l = logRecords(t, s, 2, "idFilter=log-b-1&event=read&count=1000")
		e = l.LogEntry[len(l.LogEntry)-1]
		if e.IPAddress != "<NotAuthorized>" || e.Subject != "<NotAuthorized>" || e.UserAgent != "e2e-agent/1.0" {
			t.Errorf("an anonymous caller sees %+v, want ipAddress and subject <NotAuthorized>", e)
		}
	})
	t.Run("v1 refuses an event outside its enumeration", func(t *testing.T) {
		wantError(t, s.get(t, mnp(1, "/log")+"?event=custom_event"), http.StatusBadRequest, "InvalidRequest")
		if l := logRecords(t, s, 2, "event=custom_event"); l.Total != 0 {
			t.Errorf("v2: %v", events(l))
		}
	})
}
