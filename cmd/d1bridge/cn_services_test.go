package main

// End-to-end tests of the coordinating node's services around the objects
// (cn_test.go says how they run and who the callers are): the log, identifier
// reservations, authorization and replication.

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/metrics"
)

func TestCNLogRecords(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	pub, pubData := cnObject("cn-log-public", true)
	priv, privData := cnObject("cn-log-private", false)
	mn, mnData := cnObject("cn-log-mn", true)
	c.create(t, pub, pubData)
	c.create(t, priv, privData)
	wantStatus(t, c.get(t, cnID(2, "object", pub.Identifier)), http.StatusOK)                            // read by public, on the CN
	wantStatus(t, c.call(t, cnAlice, http.MethodGet, cnID(1, "object", priv.Identifier)), http.StatusOK) // read by alice, CN v1
	// created through the member node interface, by public (a submitter here)
	create(t, c.server, mn, mnData)

	logOf := func(t *testing.T, who, path string) *adapter.Log {
		t.Helper()
		r := c.call(t, who, http.MethodGet, path)
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		l := &adapter.Log{}
		decode(t, r, l)
		if l.Count != len(l.LogEntry) {
			t.Errorf("count %d with %d entries", l.Count, len(l.LogEntry))
		}
		return l
	}
	wantEvents := []string{
		pub.Identifier + " create", priv.Identifier + " create", pub.Identifier + " read",
		priv.Identifier + " read", mn.Identifier + " create",
	}
	all := logOf(t, cnAdmin, cnp(2, "/log"))

	t.Run("aggregated", func(t *testing.T) {
		if got := events(all); !slices.Equal(got, wantEvents) {
			t.Fatalf("log %v, want %v", got, wantEvents)
		}
		subjects := []string{cnAdmin, cnAdmin, "public", cnAlice, "public"}
		for i, e := range all.LogEntry {
			if e.NodeIdentifier != testNodeID || e.Subject != subjects[i] || e.EntryID == "" || e.IPAddress == "" || e.DateLogged.IsZero() {
				t.Errorf("entry %d: %+v", i, e)
			}
			if i > 0 && e.DateLogged.Before(all.LogEntry[i-1].DateLogged.Time) {
				t.Errorf("entry %d is logged before entry %d", i, i-1)
			}
		}
		// The member node's log is the same log.
		r := c.call(t, cnAdmin, http.MethodGet, mnp(2, "/log"))
		var ml adapter.Log
		if wantStatus(t, r, http.StatusOK) {
			decode(t, r, &ml)
			if !slices.Equal(events(&ml), wantEvents) {
				t.Errorf("the MN log is %v", events(&ml))
			}
		}
	})

	t.Run("versions", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.call(t, cnAdmin, http.MethodGet, cnp(v, "/log"))
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			if n := rootName(t, r.Body); n.Space != cnNS(v) || n.Local != "log" {
				t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
			}
			var l adapter.Log
			decode(t, r, &l)
			if !slices.Equal(events(&l), wantEvents) || l.Total != len(wantEvents) {
				t.Errorf("v%d: %v total %d", v, events(&l), l.Total)
			}
		}
	})

	t.Run("readers", func(t *testing.T) {
		public := []string{wantEvents[0], wantEvents[2], wantEvents[4]}
		for _, c2 := range []struct {
			who  string
			want []string
		}{
			{"", public}, {cnBob, public}, {cnAlice, wantEvents}, {cnAdmin, wantEvents},
		} {
			l := logOf(t, c2.who, cnp(2, "/log"))
			if got := events(l); !slices.Equal(got, c2.want) || l.Total != len(c2.want) {
				t.Errorf("as %q: %v (total %d), want %v", c2.who, got, l.Total, c2.want)
			}
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, c2 := range []struct {
			path string
			want []string
		}{
			{cnp(2, "/log?event=create"), []string{wantEvents[0], wantEvents[1], wantEvents[4]}},
			{cnp(1, "/log?event=read"), []string{wantEvents[2], wantEvents[3]}},
			{cnp(2, "/log?event=no-such-event"), nil},
			{cnp(2, "/log?idFilter="+priv.Identifier), []string{wantEvents[1], wantEvents[3]}},
			{cnp(1, "/log?pidFilter="+priv.Identifier), []string{wantEvents[1], wantEvents[3]}},
			{cnp(2, "/log?idFilter="+pub.Identifier+"&event=read"), []string{wantEvents[2]}},
			{cnp(2, "/log?fromDate=2999-01-01T00:00:00Z"), nil},
			{cnp(2, "/log?toDate=2000-01-01"), nil},
		} {
			if got := events(logOf(t, cnAdmin, c2.path)); !slices.Equal(got, c2.want) {
				t.Errorf("%s: %v, want %v", c2.path, got, c2.want)
			}
		}
		// Dates: fromDate is inclusive, toDate exclusive.
		mid := all.LogEntry[2].DateLogged
		var from, to []string
		for _, e := range all.LogEntry {
			if !e.DateLogged.Before(mid.Time) {
				from = append(from, e.Identifier+" "+e.Event)
			} else {
				to = append(to, e.Identifier+" "+e.Event)
			}
		}
		if got := events(logOf(t, cnAdmin, cnp(2, "/log?fromDate="+at(mid)))); !slices.Equal(got, from) {
			t.Errorf("fromDate %s: %v, want %v", mid.Format(), got, from)
		}
		if got := events(logOf(t, cnAdmin, cnp(1, "/log?toDate="+at(mid)))); !slices.Equal(got, to) {
			t.Errorf("toDate %s: %v, want %v", mid.Format(), got, to)
		}
	})

	t.Run("paging", func(t *testing.T) {
		for _, v := range cnVersions {
			l := logOf(t, cnAdmin, cnp(v, "/log?start=1&count=2"))
			if l.Start != 1 || l.Count != 2 || l.Total != 5 || !slices.Equal(events(l), wantEvents[1:3]) {
				t.Errorf("v%d start=1 count=2: start %d count %d total %d %v", v, l.Start, l.Count, l.Total, events(l))
			}
			if l := logOf(t, cnAdmin, cnp(v, "/log?count=0")); l.Count != 0 || l.Total != 5 {
				t.Errorf("v%d count=0: count %d total %d", v, l.Count, l.Total)
			}
			if l := logOf(t, cnAdmin, cnp(v, "/log?start=4&count=10")); !slices.Equal(events(l), wantEvents[4:]) || l.Total != 5 {
				t.Errorf("v%d start=4: %v total %d", v, events(l), l.Total)
			}
			// A harvest page by page gives the whole log once.
			var got []string
			for start := 0; start < 5; start += 2 {
				got = append(got, events(logOf(t, cnAdmin, cnp(v, fmt.Sprintf("/log?start=%d&count=2", start))))...)
			}
			if !slices.Equal(got, wantEvents) {
				t.Errorf("v%d: pages of 2 give %v", v, got)
			}
		}
	})

	t.Run("invalid", func(t *testing.T) {
		for _, v := range cnVersions {
			for _, q := range []string{"fromDate=yesterday", "toDate=2020-13-45", "start=-1", "count=-5", "start=x"} {
				cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnp(v, "/log?"+q)), http.StatusBadRequest, "InvalidRequest", "1480")
			}
		}
		// v1 events are a closed list.
		cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnp(1, "/log?event=no-such-event")), http.StatusBadRequest, "InvalidRequest", "1480")
	})
}

// --- reserveIdentifier, hasReservation, generateIdentifier.

func TestCNReservations(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	used, usedData := cnObject("cn-res-used", true)
	used.SeriesID = "cn-res-used-series"
	c.create(t, used, usedData)
	esc := url.PathEscape

	has := func(t *testing.T, who, path string) *response {
		t.Helper()
		return c.call(t, who, http.MethodGet, path)
	}
	for _, v := range cnVersions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			id := fmt.Sprintf("cn-res-%d", v)
			reserve := func(who, pid string) *response {
				return c.form(t, who, http.MethodPost, cnp(v, "/reserve"), textPart("pid", pid))
			}
			// None yet.
			cnWantError(t, has(t, cnAlice, cnID(v, "reserve", id)), http.StatusNotFound, "NotFound", "4923")
			cnWantError(t, has(t, "", cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnAlice)), http.StatusNotFound, "NotFound", "4923")
			cnWantError(t, has(t, "", cnID(v, "reserve", id)+"/"+esc(cnAlice)), http.StatusNotFound, "NotFound", "4923")

			// Alice reserves it, twice (idempotent).
			wantIdentifier(t, reserve(cnAlice, id), id)
			wantIdentifier(t, reserve(cnAlice, id), id)

			// The reservation is alice's: by session, by ?subject= (the spec) and
			// by /reserve/{pid}/{subject} (the Python client), whoever asks.
			for _, r := range []*response{
				has(t, cnAlice, cnID(v, "reserve", id)),
				has(t, "", cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnAlice)),
				has(t, cnBob, cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnAlice)),
				has(t, "", cnID(v, "reserve", id)+"/"+esc(cnAlice)),
				has(t, cnBob, cnID(v, "reserve", id)+"/"+esc(cnAlice)),
			} {
				cnWantOK(t, r)
			}
			// Anyone else's question: NotAuthorized.
			for _, r := range []*response{
				has(t, cnBob, cnID(v, "reserve", id)),
				has(t, "", cnID(v, "reserve", id)),
				has(t, cnAlice, cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnBob)),
				has(t, "", cnID(v, "reserve", id)+"/"+esc(cnBob)),
				has(t, cnAdmin, cnID(v, "reserve", id)+"/public"),
			} {
				cnWantError(t, r, http.StatusUnauthorized, "NotAuthorized", "4924")
			}
			// Another subject cannot take it; nor can anyone take an identifier in
			// use, as a PID or as a SID.
			cnWantError(t, reserve(cnBob, id), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, reserve(cnAdmin, id), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, reserve(cnAlice, used.Identifier), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, reserve(cnAlice, used.SeriesID), http.StatusConflict, "IdentifierNotUnique", "4210")
			// Who may reserve, and what.
			cnWantError(t, reserve("", id+"-anonymous"), http.StatusUnauthorized, "InvalidToken", "4190")
			cnWantError(t, reserve(cnAlice, "has space"), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, reserve(cnAlice, ""), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/reserve"), textPart("id", id+"-other")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.call(t, cnAlice, http.MethodPost, cnp(v, "/reserve")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, has(t, cnAlice, cnID(v, "reserve", id+"-anonymous")), http.StatusNotFound, "NotFound", "4923")
			// A HEAD of hasReservation answers as the GET does.
			wantStatus(t, c.call(t, cnAlice, http.MethodHead, cnID(v, "reserve", id)), http.StatusOK)
			cnWantError(t, c.call(t, cnBob, http.MethodHead, cnID(v, "reserve", id)), http.StatusUnauthorized, "NotAuthorized", "4924")
		})
	}

	t.Run("identifiers with reserved characters", func(t *testing.T) {
		id := "doi:10.5063/F1+ä/xy?#%"
		wantIdentifier(t, c.form(t, cnBob, http.MethodPost, cnp(2, "/reserve"), textPart("pid", id)), id)
		cnWantOK(t, has(t, cnBob, cnID(2, "reserve", id)))
		cnWantOK(t, has(t, "", cnID(2, "reserve", id)+"/"+esc(cnBob)))
		cnWantError(t, has(t, cnAlice, cnID(2, "reserve", id)), http.StatusUnauthorized, "NotAuthorized", "4924")
	})

	// The Python client POSTs reserveIdentifier to /reserve/{pid} (with the pid
	// part as well).
	t.Run("python client reserve path", func(t *testing.T) {
		for _, v := range cnVersions {
			id := fmt.Sprintf("cn-res-python-%d", v)
			wantIdentifier(t, c.form(t, cnAlice, http.MethodPost, cnID(v, "reserve", id), textPart("pid", id)), id)
			cnWantOK(t, has(t, "", cnID(v, "reserve", id)+"/"+esc(cnAlice)))
			cnWantError(t, c.form(t, cnBob, http.MethodPost, cnID(v, "reserve", id)), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, c.form(t, "", http.MethodPost, cnID(v, "reserve", id+"-anonymous")), http.StatusUnauthorized, "InvalidToken", "4190")
			// The path alone names the identifier.
			wantIdentifier(t, c.form(t, cnBob, http.MethodPost, cnID(v, "reserve", id+"-bob")), id+"-bob")
			cnWantOK(t, has(t, "", cnID(v, "reserve", id+"-bob")+"?subject="+url.QueryEscape(cnBob)))
			cnWantError(t, c.form(t, cnBob, http.MethodPost, cnID(v, "reserve", used.Identifier)), http.StatusConflict, "IdentifierNotUnique", "4210")
		}
	})

	t.Run("generateIdentifier", func(t *testing.T) {
		seen := map[string]bool{}
		for _, v := range cnVersions {
			for _, c2 := range []struct{ scheme, fragment, prefix string }{
				{"UUID", "", "urn:uuid:"}, {"uuid", "", "urn:uuid:"}, {"UUID", "cn-gen-", "cn-gen-"},
			} {
				parts := []part{textPart("scheme", c2.scheme)}
				if c2.fragment != "" {
					parts = append(parts, textPart("fragment", c2.fragment))
				}
				r := c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), parts...)
				if !wantStatus(t, r, http.StatusOK) {
					continue
				}
				if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "identifier" {
					t.Errorf("root {%s}%s", n.Space, n.Local)
				}
				var id adapter.Identifier
				decode(t, r, &id)
				if !strings.HasPrefix(id.Value, c2.prefix) || adapter.CheckIdentifier(id.Value) != nil || seen[id.Value] {
					t.Errorf("v%d %+v: generated %q", v, c2, id.Value)
				}
				seen[id.Value] = true
				// A generated identifier is reserved for its caller.
				cnWantOK(t, has(t, cnAlice, cnID(v, "reserve", id.Value)))
				cnWantError(t, has(t, cnBob, cnID(v, "reserve", id.Value)), http.StatusUnauthorized, "NotAuthorized", "4924")
				cnWantError(t, c.form(t, cnBob, http.MethodPost, cnp(v, "/reserve"), textPart("pid", id.Value)), http.StatusConflict, "IdentifierNotUnique", "4210")
			}
			cnWantError(t, c.form(t, "", http.MethodPost, cnp(v, "/generate"), textPart("scheme", "UUID")), http.StatusUnauthorized, "InvalidToken", "4190")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), textPart("scheme", "DOI")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), textPart("fragment", "x")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), textPart("scheme", "UUID"), textPart("fragment", "has space")), http.StatusBadRequest, "InvalidRequest", "4200")
		}
	})
}

// --- registerSystemMetadata: system metadata of an object held by a member
// node; resolve then points at that node.

func TestCNAuthorization(t *testing.T) {
	t.Parallel()
	c := cnStart(t)

	t.Run("setRightsHolder", func(t *testing.T) {
		for _, v := range cnVersions {
			sm, data := cnObject(fmt.Sprintf("cn-owner-%d", v), false)
			c.create(t, sm, data)
			path := cnID(v, "owner", sm.Identifier)
			put := func(who string, parts ...part) *response { return c.form(t, who, http.MethodPut, path, parts...) }

			cnWantError(t, put("", textPart("userId", cnBob), serial(1)), http.StatusUnauthorized, "InvalidToken", "4480")
			cnWantError(t, put(cnBob, textPart("userId", cnBob), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4440")
			cnWantError(t, c.form(t, cnAlice, http.MethodPut, cnID(v, "owner", "cn-owner-missing"), textPart("userId", cnBob), serial(1)),
				http.StatusNotFound, "NotFound", "4460")
			cnWantError(t, put(cnAlice, textPart("userId", cnBob)), http.StatusBadRequest, "InvalidRequest", "4442")
			cnWantError(t, put(cnAlice, textPart("userId", cnBob), textPart("serialVersion", "one")), http.StatusBadRequest, "InvalidRequest", "4442")
			cnWantError(t, put(cnAlice, serial(1)), http.StatusBadRequest, "InvalidRequest", "4442")
			cnWantError(t, c.call(t, cnAlice, http.MethodPut, path), http.StatusBadRequest, "InvalidRequest", "4442")
			for _, sv := range []uint64{0, 2, 99} {
				cnWantError(t, put(cnAlice, textPart("userId", cnBob), serial(sv)), http.StatusConflict, "VersionMismatch", "4443")
			}
			if m := c.meta(t, sm.Identifier); m.RightsHolder != cnAlice || m.SerialVersion != 1 {
				t.Fatalf("v%d: refused calls changed the object: %+v", v, m)
			}

			before := c.meta(t, sm.Identifier)
			r := put(cnAlice, textPart("userId", cnBob), serial(1))
			if !wantIdentifier(t, r, sm.Identifier) {
				t.FailNow()
			}
			m := c.meta(t, sm.Identifier)
			if m.RightsHolder != cnBob || m.SerialVersion != 2 || !m.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
				t.Errorf("v%d: after setRightsHolder %+v", v, m)
			}
			// Bob holds it now, Alice nothing.
			wantStatus(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", sm.Identifier)), http.StatusOK)
			cnWantError(t, c.call(t, cnAlice, http.MethodGet, cnID(v, "object", sm.Identifier)), http.StatusUnauthorized, "NotAuthorized", "1000")
			cnWantError(t, put(cnAlice, textPart("userId", cnAlice), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4440")
			// The old serialVersion is stale; the trusted subject may change it too.
			cnWantError(t, put(cnBob, textPart("userId", cnAlice), serial(1)), http.StatusConflict, "VersionMismatch", "4443")
			wantIdentifier(t, put(cnAdmin, textPart("userId", cnAlice), serial(2)), sm.Identifier)
			if m := c.meta(t, sm.Identifier); m.RightsHolder != cnAlice || m.SerialVersion != 3 {
				t.Errorf("v%d: after the trusted setRightsHolder %+v", v, m)
			}
		}
	})

	t.Run("isAuthorized", func(t *testing.T) {
		sm, data := cnObject("cn-isauth", false)
		sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermRead, cnBob)}}
		c.create(t, sm, data)
		pub, pubData := cnObject("cn-isauth-public", true)
		c.create(t, pub, pubData)
		for _, v := range cnVersions {
			ask := func(who, pid, action string) *response {
				return c.call(t, who, http.MethodGet, cnID(v, "isAuthorized", pid)+"?action="+action)
			}
			for _, c2 := range []struct {
				who, pid, action string
				code             int
				kind, detail     string
			}{
				{cnAlice, sm.Identifier, "changePermission", 200, "", ""},
				{cnAdmin, sm.Identifier, "changePermission", 200, "", ""},
				{cnBob, sm.Identifier, "read", 200, "", ""},
				{cnBob, sm.Identifier, "write", 401, "NotAuthorized", "1820"},
				{"", sm.Identifier, "read", 401, "InvalidToken", "1840"},
				{"", pub.Identifier, "read", 200, "", ""},
				{"", pub.Identifier, "write", 401, "InvalidToken", "1840"},
				{cnBob, pub.Identifier, "write", 401, "NotAuthorized", "1820"},
				{cnAlice, "cn-isauth-missing", "read", 404, "NotFound", "1800"},
				{cnAlice, sm.Identifier, "delete", 400, "InvalidRequest", "1761"},
				{cnAlice, sm.Identifier, "", 400, "InvalidRequest", "1761"},
			} {
				r := ask(c2.who, c2.pid, c2.action)
				if c2.code == 200 {
					cnWantOK(t, r)
				} else {
					cnWantError(t, r, c2.code, c2.kind, c2.detail)
				}
			}
		}
	})

	t.Run("setAccessPolicy", func(t *testing.T) {
		bobReads := &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermRead, cnBob)}}
		bobWrites := &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermWrite, cnBob), authRule(adapter.PermRead, "public")}}
		for _, v := range cnVersions {
			// PUT /accessRules/{pid} (the spec) and POST /accessRules with a pid
			// part (the seed).
			for _, form := range []string{http.MethodPut, http.MethodPost} {
				sm, data := cnObject(fmt.Sprintf("cn-access-%d-%s", v, form), false)
				c.create(t, sm, data)
				set := func(who string, pid string, parts ...part) *response {
					if form == http.MethodPut {
						return c.form(t, who, http.MethodPut, cnID(v, "accessRules", pid), parts...)
					}
					return c.form(t, who, http.MethodPost, cnp(v, "/accessRules"), append([]part{textPart("pid", pid)}, parts...)...)
				}
				id := sm.Identifier
				cnWantError(t, set("", id, docPart("accessPolicy", bobReads), serial(1)), http.StatusUnauthorized, "InvalidToken", "4410")
				cnWantError(t, set(cnBob, id, docPart("accessPolicy", bobReads), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4420")
				cnWantError(t, set(cnAlice, "cn-access-missing", docPart("accessPolicy", bobReads), serial(1)), http.StatusNotFound, "NotFound", "4400")
				// serialVersion is required and checked.
				cnWantError(t, set(cnAlice, id, docPart("accessPolicy", bobReads)), http.StatusBadRequest, "InvalidRequest", "4402")
				for _, sv := range []uint64{0, 2, 1000} {
					cnWantError(t, set(cnAlice, id, docPart("accessPolicy", bobReads), serial(sv)), http.StatusConflict, "VersionMismatch", "4403")
				}
				// The policy is required and must be one.
				cnWantError(t, set(cnAlice, id, serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
				cnWantError(t, set(cnAlice, id, filePart("accessPolicy", "a.xml", strings.NewReader("<accessPolicy>")), serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
				cnWantError(t, set(cnAlice, id, docPart("accessPolicy", &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{cnBob}, Permission: []adapter.Permission{"own"}}}}), serial(1)),
					http.StatusBadRequest, "InvalidRequest", "4402")
				if form == http.MethodPost {
					cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/accessRules"), docPart("accessPolicy", bobReads), serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
					cnWantError(t, c.form(t, "", http.MethodPost, cnp(v, "/accessRules"), docPart("accessPolicy", bobReads), serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
				}
				if m := c.meta(t, id); m.SerialVersion != 1 || m.AccessPolicy != nil {
					t.Fatalf("v%d %s: refused calls changed the object: %+v", v, form, m)
				}
				cnWantError(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", id)), http.StatusUnauthorized, "NotAuthorized", "1000")

				if !cnWantOK(t, set(cnAlice, id, docPart("accessPolicy", bobReads), serial(1))) {
					t.FailNow()
				}
				m := c.meta(t, id)
				if m.SerialVersion != 2 || m.AccessPolicy == nil || len(m.AccessPolicy.Allow) != 1 || m.AccessPolicy.Allow[0].Subject[0] != cnBob {
					t.Errorf("v%d %s: after setAccessPolicy %+v", v, form, m)
				}
				// The new rules hold at once (no stale authorization decision).
				wantStatus(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", id)), http.StatusOK)
				cnWantError(t, set(cnBob, id, docPart("accessPolicy", bobWrites), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4420")
				cnWantError(t, set(cnAlice, id, docPart("accessPolicy", bobWrites), serial(1)), http.StatusConflict, "VersionMismatch", "4403")
				if cnWantOK(t, set(cnAlice, id, docPart("accessPolicy", bobWrites), serial(2))) {
					wantStatus(t, c.get(t, cnID(v, "object", id)), http.StatusOK)
					cnWantOK(t, c.call(t, cnBob, http.MethodGet, cnID(v, "isAuthorized", id)+"?action=write"))
				}
				if m := c.meta(t, id); m.SerialVersion != 3 {
					t.Errorf("v%d %s: serialVersion %d after two changes", v, form, m.SerialVersion)
				}
			}
		}
	})
}

// --- the replication group: setReplicationPolicy, updateReplicationMetadata,
// setReplicationStatus, isNodeAuthorized, deleteReplicationMetadata.

// cnPaths are where a replication operation is served: the canonical v1 and v2
// paths, and the seed's literal one (v2), or the unversioned CN path for
// deleteReplicationMetadata, which has none.
type cnPaths struct {
	name string
	v    int
	seed bool
}

func (p cnPaths) at(resource, id string) string {
	if p.seed && resource != "removeReplicaMetadata" {
		return "/" + resource + "/" + segment(id)
	}
	return cnID(p.v, resource, id)
}

func TestCNReplication(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	yes, no := true, false
	three := 3
	allow := &adapter.ReplicationPolicy{ReplicationAllowed: &yes, NumberReplicas: &three,
		PreferredMemberNode: []string{cnMN2}, BlockedMemberNode: []string{cnMN3}}
	replica := func(node, status string) *adapter.Replica {
		return &adapter.Replica{ReplicaMemberNode: node, ReplicationStatus: status, ReplicaVerified: adapter.Now()}
	}

	for _, p := range []cnPaths{{"v1", 1, false}, {"v2", 2, false}, {"seed", 2, true}} {
		t.Run(p.name, func(t *testing.T) {
			sm, data := cnObject("cn-repl-"+p.name, false)
			c.create(t, sm, data)
			id := sm.Identifier
			missing := "cn-repl-missing"
			sv := func() uint64 { return c.meta(t, id).SerialVersion }
			authorized := func(who, subject, pid string) *response {
				q := ""
				if subject != "" {
					q = "?targetNodeSubject=" + url.QueryEscape(subject)
				}
				return c.call(t, who, http.MethodGet, p.at("replicaAuthorizations", pid)+q)
			}
			policy := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("replicaPolicies", pid), parts...)
			}
			metadata := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("replicaMetadata", pid), parts...)
			}
			status := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("replicaNotifications", pid), parts...)
			}
			remove := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("removeReplicaMetadata", pid), parts...)
			}

			// No policy yet: no node may replicate.
			cnWantError(t, authorized(cnMN2Subject, cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")

			// setReplicationPolicy: changePermission on the object, serialVersion.
			cnWantError(t, policy("", id, docPart("policy", allow), serial(1)), http.StatusUnauthorized, "InvalidToken", "4885")
			cnWantError(t, policy(cnBob, id, docPart("policy", allow), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4881")
			cnWantError(t, policy(cnMN2Subject, id, docPart("policy", allow), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4881")
			cnWantError(t, policy(cnAlice, missing, docPart("policy", allow), serial(1)), http.StatusNotFound, "NotFound", "4884")
			cnWantError(t, policy(cnAlice, id, docPart("policy", allow)), http.StatusBadRequest, "InvalidRequest", "4883")
			cnWantError(t, policy(cnAlice, id, serial(1)), http.StatusBadRequest, "InvalidRequest", "4883")
			cnWantError(t, policy(cnAlice, id, filePart("policy", "p.xml", strings.NewReader("<replicationPolicy")), serial(1)), http.StatusBadRequest, "InvalidRequest", "4883")
			cnWantError(t, policy(cnAlice, id, docPart("policy", allow), serial(2)), http.StatusConflict, "VersionMismatch", "4886")
			cnWantError(t, policy(cnAlice, id, docPart("policy", allow), serial(0)), http.StatusConflict, "VersionMismatch", "4886")
			if m := c.meta(t, id); m.SerialVersion != 1 || m.ReplicationPolicy != nil {
				t.Fatalf("refused calls changed the object: %+v", m)
			}
			if !cnWantOK(t, policy(cnAlice, id, docPart("policy", allow), serial(1))) {
				t.FailNow()
			}
			m := c.meta(t, id)
			if m.SerialVersion != 2 || m.ReplicationPolicy == nil || m.ReplicationPolicy.ReplicationAllowed == nil || !*m.ReplicationPolicy.ReplicationAllowed ||
				!slices.Equal(m.ReplicationPolicy.BlockedMemberNode, []string{cnMN3}) || *m.ReplicationPolicy.NumberReplicas != 3 {
				t.Errorf("after setReplicationPolicy: %+v", m.ReplicationPolicy)
			}
			// Allowed, but no replica was requested from MN2.
			cnWantError(t, authorized("", cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")

			// updateReplicationMetadata: trusted, serialVersion.
			cnWantError(t, metadata("", id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2)), http.StatusUnauthorized, "InvalidToken", "4856")
			cnWantError(t, metadata(cnAlice, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4851")
			cnWantError(t, metadata(cnMN2Subject, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4851")
			cnWantError(t, metadata(cnAdmin, missing, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(1)), http.StatusNotFound, "NotFound", "4854")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "requested"))), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, filePart("replicaMetadata", "r.xml", strings.NewReader("<replica>")), serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "lost")), serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica("", "requested")), serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(1)), http.StatusConflict, "VersionMismatch", "4855")
			if m := c.meta(t, id); m.SerialVersion != 2 || len(m.Replica) != 0 {
				t.Fatalf("refused calls changed the object: %+v", m)
			}
			if !cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2))) {
				t.FailNow()
			}
			cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN3, "queued")), serial(3)))
			m = c.meta(t, id)
			if m.SerialVersion != 4 || len(m.Replica) != 2 || m.Replica[0].ReplicaMemberNode != cnMN2 || m.Replica[0].ReplicationStatus != "requested" {
				t.Errorf("after updateReplicationMetadata: serialVersion %d replicas %+v", m.SerialVersion, m.Replica)
			}

			// isNodeAuthorized: a registered node with a requested replica, under a
			// policy that allows replication and does not block it.
			cnWantOK(t, authorized("", cnMN2Subject, id))
			cnWantOK(t, authorized(cnMN2Subject, cnMN2Subject, id))
			cnWantOK(t, authorized(cnBob, cnMN2Subject, id))
			cnWantError(t, authorized("", cnMN3Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871") // blocked
			cnWantError(t, authorized("", cnStranger, id), http.StatusUnauthorized, "NotAuthorized", "4871")   // not registered
			cnWantError(t, authorized("", cnAlice, id), http.StatusUnauthorized, "NotAuthorized", "4871")      // not a node
			cnWantError(t, authorized("", cnMN2Subject, missing), http.StatusNotFound, "NotFound", "4874")     // no object
			cnWantError(t, authorized("", "", id), http.StatusBadRequest, "InvalidRequest", "4873")            // no subject
			if !p.seed {                                                                                       // the seed's literal paths have no HEAD twin
				cnWantError(t, c.call(t, "", http.MethodHead, p.at("replicaAuthorizations", id)+"?targetNodeSubject="+url.QueryEscape(cnMN3Subject)),
					http.StatusUnauthorized, "NotAuthorized", "4871")
			}

			// setReplicationStatus: trusted or the node itself, no serialVersion.
			cnWantError(t, status("", id, textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusUnauthorized, "InvalidToken", "4710")
			cnWantError(t, status(cnMN3Subject, id, textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusUnauthorized, "NotAuthorized", "4720")
			cnWantError(t, status(cnAdmin, missing, textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusNotFound, "NotFound", "4740")
			cnWantError(t, status(cnAdmin, id, textPart("nodeRef", cnMN2), textPart("status", "done")), http.StatusBadRequest, "InvalidRequest", "4730")
			cnWantError(t, status(cnAdmin, id, textPart("status", "completed")), http.StatusBadRequest, "InvalidRequest", "4730")
			cnWantError(t, status(cnAdmin, id, textPart("nodeRef", cnMN2), textPart("status", "failed"), filePart("failure", "f.xml", strings.NewReader("not xml"))),
				http.StatusBadRequest, "InvalidRequest", "4730")
			if !cnWantOK(t, status(cnAdmin, id, textPart("nodeRef", cnMN2), textPart("status", "completed"))) {
				t.FailNow()
			}
			cnWantOK(t, status(cnAdmin, id, textPart("nodeRef", cnMN3), textPart("status", "failed"), filePart("failure", "failure.xml", bytes.NewReader(syncFailed(id)))))
			m = c.meta(t, id)
			states := map[string]string{}
			for _, r := range m.Replica {
				states[r.ReplicaMemberNode] = r.ReplicationStatus
			}
			if m.SerialVersion != 6 || states[cnMN2] != "completed" || states[cnMN3] != "failed" || len(m.Replica) != 2 {
				t.Errorf("after setReplicationStatus: serialVersion %d replicas %+v", m.SerialVersion, m.Replica)
			}
			// A completed replica is no longer a pending request.
			cnWantError(t, authorized("", cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")

			// deleteReplicationMetadata: trusted, nodeId, serialVersion.
			current := sv()
			cnWantError(t, remove("", id, textPart("nodeId", cnMN3), serial(current)), http.StatusUnauthorized, "InvalidToken", "4953")
			cnWantError(t, remove(cnAlice, id, textPart("nodeId", cnMN3), serial(current)), http.StatusUnauthorized, "NotAuthorized", "4954")
			cnWantError(t, remove(cnAdmin, missing, textPart("nodeId", cnMN3), serial(1)), http.StatusNotFound, "NotFound", "4956")
			cnWantError(t, remove(cnAdmin, id, textPart("nodeId", "urn:node:NONE"), serial(current)), http.StatusNotFound, "NotFound", "4956")
			cnWantError(t, remove(cnAdmin, id, serial(current)), http.StatusBadRequest, "InvalidRequest", "4952")
			cnWantError(t, remove(cnAdmin, id, textPart("nodeId", cnMN3)), http.StatusBadRequest, "InvalidRequest", "4952")
			cnWantError(t, c.call(t, cnAdmin, http.MethodPut, p.at("removeReplicaMetadata", id)), http.StatusBadRequest, "InvalidRequest", "4952")
			cnWantError(t, remove(cnAdmin, id, textPart("nodeId", cnMN3), serial(current-1)), http.StatusConflict, "VersionMismatch", "4955")
			if !cnWantOK(t, remove(cnAdmin, id, textPart("nodeId", cnMN3), serial(current))) {
				t.FailNow()
			}
			m = c.meta(t, id)
			if m.SerialVersion != current+1 || len(m.Replica) != 1 || m.Replica[0].ReplicaMemberNode != cnMN2 {
				t.Errorf("after deleteReplicationMetadata: serialVersion %d replicas %+v", m.SerialVersion, m.Replica)
			}

			// A policy that forbids replication denies even a requested replica
			// (a completed one is invalidated before it is asked for again).
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "queued")), serial(sv())), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "invalidated")), serial(sv())))
			cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "queued")), serial(sv())))
			cnWantOK(t, authorized("", cnMN2Subject, id))
			cnWantOK(t, policy(cnAlice, id, docPart("policy", &adapter.ReplicationPolicy{ReplicationAllowed: &no}), serial(sv())))
			cnWantError(t, authorized("", cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")
		})
	}
}

// --- setObsoletedBy and assertRelation.

// API.md §1.2: a '+' in an identifier in a path is sent as %2B (S); Metacat
// decodes the path with a form decoder, so a raw '+' is read as a space.
// resolve's Location and objectLocation/url point clients at member nodes.
func TestCNResolveEscapesPlus(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	sm, data := cnObject("cn-resolve-a+b", true)
	c.create(t, sm, data)
	for _, v := range []int{1, 2} {
		r := c.noFollow(t, "", http.MethodGet, cnID(v, "resolve", sm.Identifier))
		if !wantStatus(t, r, http.StatusSeeOther) {
			continue
		}
		want := c.URL + "/d1/mn/v2/object/cn-resolve-a%2Bb"
		if got := r.Header.Get("Location"); got != want {
			t.Errorf("v%d: Location %q, want %q", v, got, want)
		}
		if !strings.Contains(string(r.Body), "<url>"+want+"</url>") {
			t.Errorf("v%d: objectLocation url is not %q:\n%s", v, want, r.Body)
		}
	}
}

// A node configured with roles: [cn] (config REFERENCE: "mn, cn or both")
// stores the objects CNCore.create gives it and serves them at /cn/vN/object;
// resolve must point at a URL that serves the object ("Location ... SHOULD be
// the full get() URL").
func TestCNResolveOnCNOnlyNode(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(nil)
	cfg := config.Default()
	cfg.Roles = []string{config.RoleCN}
	cfg.DataDir = t.TempDir()
	cfg.Node.ID = "urn:node:CNONLY"
	cfg.Node.BaseURL = "http://" + srv.Listener.Addr().String() + "/d1"
	cfg.Node.CNSubjects = []string{"public"} // every caller is trusted: CNCore.create without credentials
	log := slog.New(slog.DiscardHandler)
	m := metrics.New(prometheus.NewRegistry(), "test")
	n, err := mappings.New(cfg, log, m)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	eng, err := newEngine(cfg, n, m, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = eng.api
	srv.Start()
	defer srv.Close()

	sm, data := cnObject("cn-only-object", true)
	body, ctype := multipartBody(false, createParts(sm, bytes.NewReader(data), false)...)
	resp, err := http.Post(srv.URL+"/d1/cn/v2/object", ctype, body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create: status %d", resp.StatusCode)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.Get(srv.URL + "/d1/cn/v2/resolve/" + sm.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || loc == "" {
		t.Fatalf("resolve: status %d Location %q", resp.StatusCode, loc)
	}
	resp, err = http.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		t.Errorf("GET %s (resolve's Location): status %d\n%s", loc, resp.StatusCode, got)
	}
}

// API.md §3.5 / §10 rule 15: on /v1/ a series id is an unknown PID (NotFound);
// isNodeAuthorized takes a PID (CNReplication.isNodeAuthorized, NotFound 4874).
func TestCNIsNodeAuthorizedV1SeriesID(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	yes := true
	sm, data := cnObject("cn-isnode-v1", true)
	sm.SeriesID = "cn-isnode-v1-series"
	sm.ReplicationPolicy = &adapter.ReplicationPolicy{ReplicationAllowed: &yes}
	c.create(t, sm, data)
	if !cnWantOK(t, c.form(t, cnAdmin, http.MethodPut, cnID(2, "replicaMetadata", sm.Identifier),
		docPart("replicaMetadata", &adapter.Replica{ReplicaMemberNode: cnMN2, ReplicationStatus: "requested", ReplicaVerified: adapter.Now()}), serial(1))) {
		t.FailNow()
	}
	q := "?targetNodeSubject=" + url.QueryEscape(cnMN2Subject)
	cnWantOK(t, c.get(t, cnID(1, "replicaAuthorizations", sm.Identifier)+q))
	cnWantError(t, c.get(t, cnID(1, "replicaAuthorizations", sm.SeriesID)+q), http.StatusNotFound, "NotFound", "4874")
}

// TestCNReservationHonouredByCreate: an identifier reserved through the CN
// "can not be used by any other sessions" (reserveIdentifier), as a PID or a
// series id; this node's MN shares the CN's catalog. Another subject could
// create under it, take it as a series id, or update to it.
func TestCNReservationHonouredByCreate(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	const pid, sid, next = "cn-held-pid", "cn-held-sid", "cn-held-next"
	for _, id := range []string{pid, sid, next} {
		if !wantIdentifier(t, c.form(t, cnAlice, http.MethodPost, cnp(2, "/reserve"), textPart("pid", id)), id) {
			t.FailNow()
		}
	}
	refused := func(t *testing.T, what string, r *response) {
		t.Helper()
		if r.Status != http.StatusConflict && r.Status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want IdentifierNotUnique (409) or NotAuthorized (401)\n%s", what, r.Status, r.Body)
		}
	}
	// Bob (a submitter) creates an object under Alice's reserved PID.
	sm, data := cnObject(pid, true)
	sm.RightsHolder = cnBob
	refused(t, "create with a PID reserved by another subject",
		c.form(t, cnBob, http.MethodPost, mnp(2, "/object"), createParts(sm, bytes.NewReader(data), false)...))
	// Bob takes Alice's reserved identifier as his series id.
	own, ownData := cnObject("cn-held-bobs", true)
	own.RightsHolder = cnBob
	own.SeriesID = sid
	refused(t, "create with a SID reserved by another subject",
		c.form(t, cnBob, http.MethodPost, mnp(2, "/object"), createParts(own, bytes.NewReader(ownData), false)...))
	// Bob updates his own object to a newPid Alice reserved.
	own.SeriesID = ""
	own.Identifier = "cn-held-bobs-2"
	create(t, c.server, own, ownData)
	nsm, ndata := cnObject(next, true)
	nsm.RightsHolder = cnBob
	refused(t, "update to a newPid reserved by another subject",
		c.form(t, cnBob, http.MethodPut, objectPath(2, own.Identifier),
			filePart("object", "content.bin", bytes.NewReader(ndata)), textPart("newPid", next), docPart("sysmeta", nsm)))

	// Alice creates under her reservation: the identifier is in use, no longer
	// reserved (hasReservation answered 200 for it), and stays so once deleted.
	mine, mineData := cnObject(pid, true)
	mine.RightsHolder = cnAlice
	if !wantIdentifier(t, c.form(t, cnAlice, http.MethodPost, mnp(2, "/object"), createParts(mine, bytes.NewReader(mineData), false)...), pid) {
		t.FailNow()
	}
	has := cnID(2, "reserve", pid) + "?subject=" + url.QueryEscape(cnAlice)
	cnWantError(t, c.call(t, cnAlice, http.MethodGet, has), http.StatusNotFound, "NotFound", "4923")
	cnWantOK(t, c.call(t, cnAdmin, http.MethodDelete, cnID(2, "object", pid)))
	cnWantError(t, c.call(t, cnAlice, http.MethodGet, has), http.StatusNotFound, "NotFound", "4923")
	cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(2, "/reserve"), textPart("pid", pid)), http.StatusConflict, "IdentifierNotUnique", "4210")
}

// TestCNSetReplicationStatusByTargetNode: the target member node reports its
// own replica (API.md §9 step 3; Metacat's CN allows the registered node's
// subject, and d1bridge's replicator sends the notice as the MN); it was
// refused unless made a CN subject. Another node may not report it.
func TestCNSetReplicationStatusByTargetNode(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	yes := true
	sm, data := cnObject("cn-replstatus-target", true)
	sm.ReplicationPolicy = &adapter.ReplicationPolicy{ReplicationAllowed: &yes}
	c.create(t, sm, data)
	if !cnWantOK(t, c.form(t, cnAdmin, http.MethodPut, cnID(2, "replicaMetadata", sm.Identifier),
		docPart("replicaMetadata", &adapter.Replica{ReplicaMemberNode: cnMN2, ReplicationStatus: "requested", ReplicaVerified: adapter.Now()}), serial(1))) {
		t.FailNow()
	}
	// Another node may not report MN2's replica.
	cnWantError(t, c.form(t, cnMN3Subject, http.MethodPut, cnID(2, "replicaNotifications", sm.Identifier),
		textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusUnauthorized, "NotAuthorized", "4720")
	// MN2, the target, reports its own replica complete.
	if !cnWantOK(t, c.form(t, cnMN2Subject, http.MethodPut, cnID(2, "replicaNotifications", sm.Identifier),
		textPart("nodeRef", cnMN2), textPart("status", "completed"))) {
		t.FailNow()
	}
	m := c.meta(t, sm.Identifier)
	if len(m.Replica) != 1 || m.Replica[0].ReplicaMemberNode != cnMN2 || m.Replica[0].ReplicationStatus != "completed" {
		t.Errorf("replicas after MN2's notice: %+v", m.Replica)
	}
}

// TestCNAuthoritativeNodeHoldsItsObjects: on the coordinating node the
// subjects of an object's authoritative member node hold every level on it
// (API.md §7 "Who holds what on an object" and the isAuthorized algorithm:
// rightsHolder? -> authoritative MN subject? -> allow rules). urn:node:MN2 is
// registered (nodes[]) with its subject; an object it is authoritative for,
// private to its owner, was refused to it.
func TestCNAuthoritativeNodeHoldsItsObjects(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	reg, _ := cnObject("cn-authoritative-private", false)
	reg.AuthoritativeMemberNode = cnMN2
	if !wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, "/d1/meta/"+reg.Identifier, docPart("sysmeta", reg)), reg.Identifier) {
		t.FailNow()
	}
	for _, action := range []string{"read", "write", "changePermission"} {
		r := c.call(t, cnMN2Subject, http.MethodGet, cnID(2, "isAuthorized", reg.Identifier)+"?action="+action)
		if r.Status != http.StatusOK {
			t.Errorf("isAuthorized action=%s for the authoritative member node's subject: status %d, want 200: %s", action, r.Status, r.Body)
		}
	}
	if r := c.call(t, cnMN2Subject, http.MethodGet, cnID(2, "meta", reg.Identifier)); r.Status != http.StatusOK {
		t.Errorf("getSystemMetadata for the authoritative member node's subject: status %d, want 200: %s", r.Status, r.Body)
	}
	// Another registered node is not authoritative for it: refused.
	if r := c.call(t, cnMN3Subject, http.MethodGet, cnID(2, "isAuthorized", reg.Identifier)+"?action=read"); r.Status != http.StatusUnauthorized {
		t.Errorf("isAuthorized for another node's subject: status %d, want 401", r.Status)
	}
}

// TestCNSynchronizeByAuthoritativeNode: CNRead.synchronize (v2) is the
// member node asking the CN to harvest its object now; API.md §4: "The caller
// must be the authoritative MN's subject". The route was trusted-only, and the
// registered authoritative node urn:node:MN2 was refused (NotAuthorized 4962).
func TestCNSynchronizeByAuthoritativeNode(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	reg, _ := cnObject("cn-sync-by-mn", true)
	reg.AuthoritativeMemberNode = cnMN2
	if !wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, "/d1/meta/"+reg.Identifier, docPart("sysmeta", reg)), reg.Identifier) {
		t.FailNow()
	}
	r := c.form(t, cnMN2Subject, http.MethodPost, cnp(2, "/synchronize"), textPart("pid", reg.Identifier))
	if r.Status != http.StatusOK {
		t.Errorf("synchronize by the object's authoritative member node: status %d, want 200: %s", r.Status, r.Body)
	}
	// Another registered node is not authoritative for it.
	cnWantError(t, c.form(t, cnMN3Subject, http.MethodPost, cnp(2, "/synchronize"), textPart("pid", reg.Identifier)),
		http.StatusUnauthorized, "NotAuthorized", "4962")
	// A signed-in caller that is no node learns nothing of the object.
	cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(2, "/synchronize"), textPart("pid", reg.Identifier)),
		http.StatusUnauthorized, "NotAuthorized", "4962")
	cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(2, "/synchronize"), textPart("pid", "cn-sync-no-such")),
		http.StatusUnauthorized, "NotAuthorized", "4962")
}
