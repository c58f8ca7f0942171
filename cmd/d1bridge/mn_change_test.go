package main

// End-to-end tests of the member node's changes to objects (e2e_test.go says
// how they run): update, archive, delete, updateSystemMetadata, the CN's
// notifications, and concurrent or abandoned writes.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

// update: chains, series ids, errors.
func TestUpdate(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d1, d2, d3 := genBytes(41, 3000), genBytes(42, 4000), genBytes(43, 5000)
	sm1 := newSysmeta("upd-1", "text/plain", "MD5", d1, all...)
	sm1.SeriesID = "upd-series"
	create(t, s, sm1, d1)
	before := getMeta(t, s, 2, "upd-1")

	// update sends an update of target; the sysmeta part comes last.
	update := func(t *testing.T, v int, target string, sm *adapter.SystemMetadata, data []byte, mixed bool) *response {
		t.Helper()
		return s.send(t, http.MethodPut, objectPath(v, target), mixed,
			textPart("newPid", sm.Identifier), filePart("object", "content.bin", bytes.NewReader(data)), docPart("sysmeta", sm, v))
	}

	t.Run("update", func(t *testing.T) {
		sm2 := newSysmeta("upd-2", "text/csv", "SHA-1", d2, all...)
		sm2.SeriesID = "upd-series" // keeps the series
		if !wantIdentifier(t, update(t, 2, "upd-1", sm2, d2, false), "upd-2") {
			t.FailNow()
		}
		oldM, newM := getMeta(t, s, 2, "upd-1"), getMeta(t, s, 2, "upd-2")
		if oldM.ObsoletedBy != "upd-2" || newM.Obsoletes != "upd-1" {
			t.Errorf("upd-1 obsoletedBy %q, upd-2 obsoletes %q", oldM.ObsoletedBy, newM.Obsoletes)
		}
		if !oldM.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
			t.Errorf("the old object's dateSysMetadataModified did not move: %s then %s", before.DateSysMetadataModified.Format(), oldM.DateSysMetadataModified.Format())
		}
		if oldM.SerialVersion <= before.SerialVersion {
			t.Errorf("the old object's serialVersion %d did not grow from %d", oldM.SerialVersion, before.SerialVersion)
		}
		if newM.SeriesID != "upd-series" || newM.SerialVersion != 1 || newM.Submitter != "public" {
			t.Errorf("new object: %+v", newM)
		}
		l := listObjects(t, s, 2, "")
		dates := map[string]adapter.Time{}
		for _, oi := range l.ObjectInfo {
			dates[oi.Identifier] = oi.DateSysMetadataModified
		}
		if !dates["upd-1"].Equal(oldM.DateSysMetadataModified.Time) || !dates["upd-2"].Equal(newM.DateSysMetadataModified.Time) {
			t.Errorf("listObjects dates %v, want upd-1 %s and upd-2 %s", dates, oldM.DateSysMetadataModified.Format(), newM.DateSysMetadataModified.Format())
		}
		// The old object stays readable.
		if r := s.get(t, objectPath(2, "upd-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d1) {
			t.Error("the obsoleted object's bytes changed")
		}
		if h := s.head(t, objectPath(2, "upd-1")).Header; h.Get("DataONE-ObsoletedBy") != "upd-2" {
			t.Errorf("describe upd-1: DataONE-ObsoletedBy %q", h.Get("DataONE-ObsoletedBy"))
		}
		if h := s.head(t, objectPath(2, "upd-2")).Header; h.Get("DataONE-Obsoletes") != "upd-1" {
			t.Errorf("describe upd-2: DataONE-Obsoletes %q", h.Get("DataONE-Obsoletes"))
		}
		if got := events(logRecords(t, s, 2, "event=update")); !slices.Contains(got, "upd-1 update") {
			t.Errorf("update events %v: none on the obsoleted object upd-1", got)
		}
	})

	files := countFiles(t, s.DataDir)
	t.Run("errors", func(t *testing.T) {
		ro := genBytes(44, 100)
		create(t, s, newSysmeta("upd-readonly", "text/plain", "MD5", ro), ro)
		files++
		for _, c := range []struct {
			name   string
			target string
			sm     *adapter.SystemMetadata
			code   int
			kind   string
		}{
			{"obsoleted object", "upd-1", newSysmeta("upd-x1", "text/plain", "MD5", d3, all...), 400, "InvalidRequest"},
			{"missing object", "upd-missing", newSysmeta("upd-x2", "text/plain", "MD5", d3, all...), 404, "NotFound"},
			{"obsoletes another object", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x3", "text/plain", "MD5", d3, all...)
				m.Obsoletes = "upd-readonly"
				return m
			}(), 400, "InvalidSystemMetadata"},
			{"newPid in use", "upd-2", newSysmeta("upd-1", "text/plain", "MD5", d3, all...), 409, "IdentifierNotUnique"},
			{"wrong checksum", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x4", "text/plain", "MD5", d3, all...)
				m.Checksum.Value = checksum("MD5", d1)
				return m
			}(), 400, "InvalidSystemMetadata"},
			{"unknown format", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x5", "text/plain", "MD5", d3, all...)
				m.FormatID = "no/such-format"
				return m
			}(), 400, "UnsupportedType"},
			{"series id of another series", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x6", "text/plain", "MD5", d3, all...)
				m.SeriesID = "upd-1"
				return m
			}(), 409, "IdentifierNotUnique"},
			{"no write permission", "upd-readonly", newSysmeta("upd-x7", "text/plain", "MD5", d3, all...), 401, "InvalidToken"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, update(t, 2, c.target, c.sm, d3, false), c.code, c.kind)
				if c.sm.Identifier != "upd-1" {
					wantNotFound(t, s, 2, c.sm.Identifier)
				}
				if n := countFiles(t, s.DataDir); n != files {
					t.Errorf("%d files under the object store, want %d", n, files)
				}
			})
		}
		t.Run("missing newPid", func(t *testing.T) {
			r := s.send(t, http.MethodPut, objectPath(2, "upd-2"), false,
				filePart("object", "content.bin", bytes.NewReader(d3)), docPart("sysmeta", newSysmeta("upd-x8", "text/plain", "MD5", d3, all...)))
			wantError(t, r, http.StatusBadRequest, "InvalidRequest")
			wantNotFound(t, s, 2, "upd-x8")
		})
		if m := getMeta(t, s, 2, "upd-2"); m.ObsoletedBy != "" || m.SerialVersion != 1 {
			t.Errorf("failed updates changed upd-2: %+v", m)
		}
	})

	t.Run("by series id", func(t *testing.T) {
		sm3 := newSysmeta("upd-3", "text/plain", "SHA-256", d3, all...)
		sm3.SeriesID = "upd-series"
		sm3.Obsoletes = "upd-2" // may be given when it names the object updated
		if !wantIdentifier(t, update(t, 2, "upd-series", sm3, d3, true), "upd-3") {
			t.FailNow()
		}
		if m := getMeta(t, s, 2, "upd-2"); m.ObsoletedBy != "upd-3" {
			t.Errorf("upd-2 obsoletedBy %q, want upd-3", m.ObsoletedBy)
		}
		// v2 resolves the SID to the head, v1 does not know it.
		r := s.get(t, objectPath(2, "upd-series"))
		if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d3) {
			t.Error("v2 get by SID did not return the head's bytes")
		}
		if m := getMeta(t, s, 2, "upd-series"); m.Identifier != "upd-3" {
			t.Errorf("v2 getSystemMetadata by SID: %s, want upd-3", m.Identifier)
		}
		h := s.head(t, objectPath(2, "upd-series"))
		if wantStatus(t, h, http.StatusOK) && h.Header.Get("DataONE-Checksum") != "SHA-256,"+checksum("SHA-256", d3) {
			t.Errorf("v2 describe by SID: DataONE-Checksum %q", h.Header.Get("DataONE-Checksum"))
		}
		wantNotFound(t, s, 1, "upd-series")
		wantError(t, s.get(t, checksumPath(1, "upd-series")), http.StatusNotFound, "NotFound")
		d4 := genBytes(45, 10)
		wantError(t, update(t, 1, "upd-series", newSysmeta("upd-x9", "text/plain", "MD5", d4, all...), d4, false), http.StatusNotFound, "NotFound")

		l := listObjects(t, s, 2, "identifier=upd-series")
		if got := pids(l); l.Total != 3 || !slices.Equal(got, []string{"upd-1", "upd-2", "upd-3"}) {
			t.Errorf("v2 listObjects by SID: total %d %v, want the 3 members", l.Total, got)
		}
		if l := listObjects(t, s, 1, "identifier=upd-series"); l.Total != 0 || l.Count != 0 {
			t.Errorf("v1 listObjects by SID: total %d %v, want none", l.Total, pids(l))
		}
		got := events(logRecords(t, s, 2, "idFilter=upd-series"))
		for _, want := range []string{"upd-1 create", "upd-1 update", "upd-2 update"} {
			if !slices.Contains(got, want) {
				t.Errorf("v2 getLogRecords(idFilter=SID) %v lacks %q", got, want)
			}
		}
		if l := logRecords(t, s, 1, "pidFilter=upd-series"); l.Total != 0 {
			t.Errorf("v1 getLogRecords(pidFilter=SID) %v, want none: v1 has no series ids", events(l))
		}
		if l := listObjects(t, s, 1, "identifier=upd-2"); l.Total != 1 || pids(l)[0] != "upd-2" {
			t.Errorf("v1 listObjects by PID: %v", pids(l))
		}
	})

	t.Run("the head moves on an update by PID", func(t *testing.T) {
		// Read by SID first, so that any remembered resolution would be stale.
		for _, v := range []int{2} {
			if m := getMeta(t, s, v, "upd-series"); m.Identifier != "upd-3" {
				t.Fatalf("the head is %s", m.Identifier)
			}
			wantStatus(t, s.get(t, objectPath(v, "upd-series")), http.StatusOK)
			wantStatus(t, s.head(t, objectPath(v, "upd-series")), http.StatusOK)
		}
		d5 := genBytes(50, 321)
		sm5 := newSysmeta("upd-5", "text/plain", "MD5", d5, all...)
		sm5.SeriesID = "upd-series"
		if !wantIdentifier(t, update(t, 2, "upd-3", sm5, d5, false), "upd-5") {
			t.FailNow()
		}
		if m := getMeta(t, s, 2, "upd-series"); m.Identifier != "upd-5" {
			t.Errorf("getSystemMetadata by SID after the update: %s, want upd-5", m.Identifier)
		}
		if r := s.get(t, objectPath(2, "upd-series")); !bytes.Equal(r.Body, d5) {
			t.Error("get by SID after the update: not the new head's bytes")
		}
		if h := s.head(t, objectPath(2, "upd-series")); h.Header.Get("DataONE-Checksum") != "MD5,"+checksum("MD5", d5) {
			t.Errorf("describe by SID after the update: %q", h.Header.Get("DataONE-Checksum"))
		}
	})

	t.Run("a new series", func(t *testing.T) {
		a, b := genBytes(51, 100), genBytes(52, 200)
		create(t, s, newSysmeta("upd-nosid", "text/plain", "MD5", a, all...), a)
		sm := newSysmeta("upd-newsid", "text/plain", "MD5", b, all...)
		sm.SeriesID = "upd-fresh-series"
		if wantIdentifier(t, update(t, 2, "upd-nosid", sm, b, false), "upd-newsid") {
			if m := getMeta(t, s, 2, "upd-fresh-series"); m.Identifier != "upd-newsid" {
				t.Errorf("the new series resolves to %s", m.Identifier)
			}
		}
	})

	t.Run("v1", func(t *testing.T) {
		a, b := genBytes(48, 600), genBytes(49, 700)
		create(t, s, newSysmeta("upd-v1-b", "text/plain", "MD5", a, all...), a)
		if !wantIdentifier(t, update(t, 1, "upd-v1-b", newSysmeta("upd-v1-c", "text/plain", "SHA-1", b, all...), b, false), "upd-v1-c") {
			return
		}
		if m := getMeta(t, s, 1, "upd-v1-b"); m.ObsoletedBy != "upd-v1-c" {
			t.Errorf("v1: obsoletedBy %q", m.ObsoletedBy)
		}
		if m := getMeta(t, s, 1, "upd-v1-c"); m.Obsoletes != "upd-v1-b" {
			t.Errorf("v1: obsoletes %q", m.Obsoletes)
		}
	})
}

// archive.
func TestArchive(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(51, 2500)
	create(t, s, newSysmeta("arch-1", "text/plain", "MD5", d, all...), d)
	create(t, s, newSysmeta("arch-2", "text/plain", "MD5", d, all...), d)
	create(t, s, newSysmeta("arch-readonly", "text/plain", "MD5", d), d)
	sidSM := newSysmeta("arch-sid-1", "text/plain", "MD5", d, all...)
	sidSM.SeriesID = "arch-series"
	create(t, s, sidSM, d)
	before := getMeta(t, s, 2, "arch-1")

	t.Run("archive", func(t *testing.T) {
		if !wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-1"), nil), "arch-1") {
			t.FailNow()
		}
		m := getMeta(t, s, 2, "arch-1")
		if !m.Archived || m.SerialVersion != before.SerialVersion+1 || !m.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
			t.Errorf("after archive: archived %t serialVersion %d dateSysMetadataModified %s (was %d, %s)",
				m.Archived, m.SerialVersion, m.DateSysMetadataModified.Format(), before.SerialVersion, before.DateSysMetadataModified.Format())
		}
		if r := s.get(t, objectPath(2, "arch-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d) {
			t.Error("an archived object's bytes changed")
		}
		wantStatus(t, s.head(t, objectPath(1, "arch-1")), http.StatusOK)
		if m := getMeta(t, s, 1, "arch-1"); !m.Archived {
			t.Error("v1 system metadata is not archived")
		}
		if h := s.head(t, objectPath(2, "arch-1")).Header; h.Get("DataONE-SerialVersion") != strconv.FormatUint(m.SerialVersion, 10) ||
			h.Get("Last-Modified") != m.DateSysMetadataModified.UTC().Format(http.TimeFormat) {
			t.Errorf("describe after archive: serial version %q, Last-Modified %q", h.Get("DataONE-SerialVersion"), h.Get("Last-Modified"))
		}
		l := listObjects(t, s, 2, "identifier=arch-1")
		if l.Total != 1 || !l.ObjectInfo[0].DateSysMetadataModified.Equal(m.DateSysMetadataModified.Time) {
			t.Errorf("listObjects of the archived object: %+v", l)
		}
	})
	t.Run("update of an archived object", func(t *testing.T) {
		n := genBytes(52, 10)
		r := s.send(t, http.MethodPut, objectPath(2, "arch-1"), false,
			textPart("newPid", "arch-1-next"), filePart("object", "o", bytes.NewReader(n)), docPart("sysmeta", newSysmeta("arch-1-next", "text/plain", "MD5", n, all...)))
		wantError(t, r, http.StatusBadRequest, "InvalidRequest")
		wantNotFound(t, s, 2, "arch-1-next")
	})
	t.Run("archive again", func(t *testing.T) {
		wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-1"), nil), "arch-1")
		if m := getMeta(t, s, 2, "arch-1"); !m.Archived || m.SerialVersion != before.SerialVersion+1 {
			t.Errorf("archiving again changed the object: %+v", m)
		}
	})
	t.Run("v1", func(t *testing.T) {
		wantIdentifier(t, s.do(t, http.MethodPut, mnp(1, "/archive/arch-2"), nil), "arch-2")
		if m := getMeta(t, s, 1, "arch-2"); !m.Archived {
			t.Error("not archived")
		}
	})
	t.Run("by series id", func(t *testing.T) {
		wantError(t, s.do(t, http.MethodPut, mnp(1, "/archive/arch-series"), nil), http.StatusNotFound, "NotFound")
		wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-series"), nil), "arch-sid-1")
		if m := getMeta(t, s, 2, "arch-sid-1"); !m.Archived {
			t.Error("not archived")
		}
	})
	t.Run("missing object", func(t *testing.T) {
		wantError(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-missing"), nil), http.StatusNotFound, "NotFound")
	})
	t.Run("no permission", func(t *testing.T) {
		wantError(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-readonly"), nil), http.StatusUnauthorized, "InvalidToken")
		if m := getMeta(t, s, 2, "arch-readonly"); m.Archived {
			t.Error("archived without the permission")
		}
	})
}

// delete. It needs a trusted caller: on an ordinary instance public gets
// 401 InvalidToken; the admin instance (D1BRIDGE_NODE_ADMINISTRATORS=public)
// deletes.
func TestDelete(t *testing.T) {
	t.Parallel()
	d := genBytes(61, 3000)

	t.Run("untrusted caller", func(t *testing.T) {
		s := startServer(t, "")
		create(t, s, newSysmeta("del-keep", "text/plain", "MD5", d), d)
		for _, v := range []int{1, 2} {
			wantError(t, s.do(t, http.MethodDelete, objectPath(v, "del-keep"), nil), http.StatusUnauthorized, "InvalidToken")
			wantError(t, s.do(t, http.MethodDelete, objectPath(v, "del-missing"), nil), http.StatusUnauthorized, "InvalidToken")
		}
		if r := s.get(t, objectPath(2, "del-keep")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d) {
			t.Error("the object changed")
		}
	})

	t.Run("administrator", func(t *testing.T) {
		s := startServer(t, "", adminEnv)
		for _, pid := range []string{"del-1", "del-2"} {
			create(t, s, newSysmeta(pid, "text/plain", "MD5", d), d)
		}
		sidSM := newSysmeta("del-sid-1", "text/plain", "MD5", d)
		sidSM.SeriesID = "del-series"
		create(t, s, sidSM, d)
		wantStatus(t, s.get(t, objectPath(2, "del-1")), http.StatusOK) // a read event
		files := countFiles(t, s.DataDir)

		if !wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "del-1"), nil), "del-1") {
			t.FailNow()
		}
		for _, v := range []int{1, 2} {
			wantError(t, s.get(t, objectPath(v, "del-1")), http.StatusNotFound, "NotFound")
			wantError(t, s.get(t, metaPath(v, "del-1")), http.StatusNotFound, "NotFound")
			wantError(t, s.get(t, checksumPath(v, "del-1")), http.StatusNotFound, "NotFound")
			r := s.head(t, objectPath(v, "del-1"))
			wantError(t, r, http.StatusNotFound, "NotFound")
			if len(r.Body) != 0 || r.Header.Get("DataONE-Exception-DetailCode") == "" {
				t.Errorf("describe after delete: body %q, headers %v", r.Body, r.Header)
			}
			if l := listObjects(t, s, v, "identifier=del-1"); l.Total != 0 {
				t.Errorf("v%d: the deleted object is listed", v)
			}
		}
		if n := countFiles(t, s.DataDir); n != files-1 {
			t.Errorf("%d files under the object store after delete, want %d", n, files-1)
		}
		got := events(logRecords(t, s, 2, "idFilter=del-1"))
		for _, want := range []string{"del-1 create", "del-1 read", "del-1 delete"} {
			if !slices.Contains(got, want) {
				t.Errorf("the log of del-1 %v lacks %q", got, want)
			}
		}
		if l := logRecords(t, s, 1, "event=delete"); l.Total != 1 || l.LogEntry[0].Identifier != "del-1" {
			t.Errorf("v1 delete events: %v", events(l))
		}

		t.Run("again", func(t *testing.T) {
			wantError(t, s.do(t, http.MethodDelete, objectPath(2, "del-1"), nil), http.StatusNotFound, "NotFound")
		})
		t.Run("v1", func(t *testing.T) {
			wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(1, "del-2"), nil), "del-2")
			wantNotFound(t, s, 1, "del-2")
		})
		t.Run("by series id", func(t *testing.T) {
			wantError(t, s.do(t, http.MethodDelete, objectPath(1, "del-series"), nil), http.StatusNotFound, "NotFound")
			wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "del-series"), nil), "del-sid-1")
			wantNotFound(t, s, 2, "del-sid-1")
			wantNotFound(t, s, 2, "del-series")
		})
		if n := countFiles(t, s.DataDir); n != 0 {
			t.Errorf("%d files left under the object store, want 0", n)
		}
	})
}

// updateSystemMetadata (v2 only).
func TestUpdateSystemMetadata(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(71, 1234)
	create(t, s, newSysmeta("usm-1", "text/plain", "SHA-1", d, all...), d)
	create(t, s, newSysmeta("usm-readonly", "text/plain", "SHA-1", d), d)
	create(t, s, newSysmeta("usm-archived", "text/plain", "SHA-1", d, all...), d)
	sidSM := newSysmeta("usm-sid-1", "text/plain", "SHA-1", d, all...)
	sidSM.SeriesID = "usm-series"
	create(t, s, sidSM, d)
	wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/usm-archived"), nil), "usm-archived")

	put := func(t *testing.T, v int, pid string, sm *adapter.SystemMetadata) *response {
		t.Helper()
		parts := []part{docPart("sysmeta", sm)}
		if pid != "" {
			parts = append([]part{textPart("pid", pid)}, parts...)
		}
		return s.send(t, http.MethodPut, mnp(v, "/meta"), false, parts...)
	}
	old := getMeta(t, s, 2, "usm-1")

	t.Run("change", func(t *testing.T) {
		next := old.Clone()
		next.RightsHolder = "CN=new owner,O=d1bridge,DC=example,DC=org"
		next.AccessPolicy.Allow = append(next.AccessPolicy.Allow, adapter.AccessRule{Subject: []string{"CN=reader,DC=example,DC=org"}, Permission: []adapter.Permission{adapter.PermRead}})
		next.FileName = "renamed.txt"
		next.FormatID = "text/csv"
		r := put(t, 2, "usm-1", next)
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		m := getMeta(t, s, 2, "usm-1")
		if m.RightsHolder != next.RightsHolder || len(m.AccessPolicy.Allow) != 2 || m.FileName != "renamed.txt" || m.FormatID != "text/csv" {
			t.Errorf("the change did not take: %+v", m)
		}
		if m.SerialVersion != old.SerialVersion+1 || !m.DateSysMetadataModified.After(old.DateSysMetadataModified.Time) {
			t.Errorf("serialVersion %d dateSysMetadataModified %s, was %d %s", m.SerialVersion, m.DateSysMetadataModified.Format(), old.SerialVersion, old.DateSysMetadataModified.Format())
		}
		if m.Size != old.Size || m.Checksum != old.Checksum || !m.DateUploaded.Equal(old.DateUploaded.Time) || m.Submitter != old.Submitter {
			t.Errorf("fields that may not change changed: %+v", m)
		}
		g := s.get(t, objectPath(2, "usm-1"))
		if cd := g.Header.Get("Content-Disposition"); !strings.Contains(cd, "renamed.txt") {
			t.Errorf("Content-Disposition %q does not use the new fileName", cd)
		}
		if l := listObjects(t, s, 2, "identifier=usm-1"); l.Total != 1 || !l.ObjectInfo[0].DateSysMetadataModified.Equal(m.DateSysMetadataModified.Time) || l.ObjectInfo[0].FormatID != "text/csv" {
			t.Errorf("listObjects does not show the change: %+v", l.ObjectInfo)
		}
		t.Run("stale dateSysMetadataModified", func(t *testing.T) {
			stale := next.Clone()
			stale.FileName = "stale.txt"
			wantError(t, put(t, 2, "usm-1", stale), http.StatusBadRequest, "InvalidRequest")
			if got := getMeta(t, s, 2, "usm-1"); got.FileName != "renamed.txt" || got.SerialVersion != m.SerialVersion {
				t.Errorf("a stale update changed the object: %+v", got)
			}
		})
		t.Run("without the pid part", func(t *testing.T) {
			n := m.Clone()
			n.FileName = "again.txt"
			wantStatus(t, put(t, 2, "", n), http.StatusOK)
		})
	})

	fresh := func() *adapter.SystemMetadata { return getMeta(t, s, 2, "usm-1") }
	for _, c := range []struct {
		name   string
		pid    string
		change func(m *adapter.SystemMetadata)
		code   int
		kind   string
	}{
		{"size", "usm-1", func(m *adapter.SystemMetadata) { m.Size++ }, 400, "InvalidSystemMetadata"},
		{"checksum", "usm-1", func(m *adapter.SystemMetadata) { m.Checksum.Value = checksum("SHA-1", []byte("other")) }, 400, "InvalidSystemMetadata"},
		{"obsoletedBy", "usm-1", func(m *adapter.SystemMetadata) { m.ObsoletedBy = "usm-readonly" }, 400, "InvalidSystemMetadata"},
		{"unknown format", "usm-1", func(m *adapter.SystemMetadata) { m.FormatID = "no/such-format" }, 400, "InvalidSystemMetadata"},
		{"empty rightsHolder", "usm-1", func(m *adapter.SystemMetadata) { m.RightsHolder = "" }, 400, "InvalidSystemMetadata"},
		{"unknown permission", "usm-1", func(m *adapter.SystemMetadata) {
			m.AccessPolicy.Allow[0].Permission = []adapter.Permission{"owner"}
		}, 400, "InvalidSystemMetadata"},
		{"series id given for a pid", "usm-series", func(m *adapter.SystemMetadata) { m.Identifier = "usm-series" }, 400, "InvalidRequest"},
		{"pid part differs", "usm-readonly", nil, 400, "InvalidSystemMetadata"},
		{"unknown pid", "usm-missing", func(m *adapter.SystemMetadata) { m.Identifier = "usm-missing" }, 400, "InvalidRequest"},
		{"whitespace pid", "usm missing", func(m *adapter.SystemMetadata) { m.Identifier = "usm missing" }, 400, "InvalidRequest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := fresh()
			if c.change != nil {
				c.change(m)
			}
			wantError(t, put(t, 2, c.pid, m), c.code, c.kind)
			if got := fresh(); got.SerialVersion != m.SerialVersion && c.change != nil && m.Identifier == "usm-1" {
				t.Errorf("a refused update changed the object: serialVersion %d", got.SerialVersion)
			}
		})
	}
	t.Run("node-controlled fields", func(t *testing.T) {
		m := fresh()
		n := m.Clone()
		n.Submitter, n.OriginMemberNode, n.AuthoritativeMemberNode = "CN=other,DC=example,DC=org", "urn:node:other", "urn:node:other"
		n.DateUploaded = adapter.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		n.SerialVersion = 99
		n.Replica = []adapter.Replica{{ReplicaMemberNode: "urn:node:other", ReplicationStatus: "completed", ReplicaVerified: adapter.Now()}}
		if wantStatus(t, put(t, 2, "usm-1", n), http.StatusOK) {
			got := fresh()
			if got.Submitter != m.Submitter || got.OriginMemberNode != testNodeID || got.AuthoritativeMemberNode != testNodeID ||
				!got.DateUploaded.Equal(m.DateUploaded.Time) || got.SerialVersion != m.SerialVersion+1 || len(got.Replica) != 0 {
				t.Errorf("updateSystemMetadata took node-controlled fields: %+v", got)
			}
		}
	})
	t.Run("series id", func(t *testing.T) {
		m := fresh()
		m.SeriesID = "usm-new-series"
		wantError(t, put(t, 2, "usm-1", m), http.StatusBadRequest, "InvalidSystemMetadata")
		wantError(t, s.get(t, metaPath(2, "usm-new-series")), http.StatusNotFound, "NotFound")
	})
	t.Run("archive through it", func(t *testing.T) {
		create(t, s, newSysmeta("usm-to-archive", "text/plain", "SHA-1", d, all...), d)
		m := getMeta(t, s, 2, "usm-to-archive")
		m.Archived = true
		if wantStatus(t, put(t, 2, "usm-to-archive", m), http.StatusOK) && !getMeta(t, s, 2, "usm-to-archive").Archived {
			t.Error("not archived")
		}
	})
	t.Run("rights taken away", func(t *testing.T) {
		create(t, s, newSysmeta("usm-revoke", "text/plain", "SHA-1", d, all...), d)
		m := getMeta(t, s, 2, "usm-revoke")
		m.AccessPolicy.Allow[0].Permission = []adapter.Permission{adapter.PermRead}
		if !wantStatus(t, put(t, 2, "usm-revoke", m), http.StatusOK) {
			return
		}
		m = getMeta(t, s, 2, "usm-revoke")
		m.FileName = "not-allowed.txt"
		wantError(t, put(t, 2, "usm-revoke", m), http.StatusUnauthorized, "InvalidToken")
		wantStatus(t, s.get(t, objectPath(2, "usm-revoke")), http.StatusOK)
	})
	t.Run("unarchive", func(t *testing.T) {
		m := getMeta(t, s, 2, "usm-archived")
		m.Archived = false
		wantError(t, put(t, 2, "usm-archived", m), http.StatusBadRequest, "InvalidRequest")
		if !getMeta(t, s, 2, "usm-archived").Archived {
			t.Error("unarchived")
		}
	})
	t.Run("no write permission", func(t *testing.T) {
		m := getMeta(t, s, 2, "usm-readonly")
		m.FileName = "x.txt"
		wantError(t, put(t, 2, "usm-readonly", m), http.StatusUnauthorized, "InvalidToken")
	})
	t.Run("missing sysmeta", func(t *testing.T) {
		wantError(t, s.send(t, http.MethodPut, mnp(2, "/meta"), false, textPart("pid", "usm-1")), http.StatusBadRequest, "InvalidRequest")
	})
	t.Run("not on v1", func(t *testing.T) {
		r := put(t, 1, "usm-1", fresh())
		if r.Status != http.StatusNotFound && r.Status != http.StatusMethodNotAllowed {
			t.Errorf("v1 PUT /meta: status %d, want 404 or 405", r.Status)
		}
		var e errorDoc
		if err := xml.Unmarshal(r.Body, &e); err != nil || e.Name == "" {
			t.Errorf("v1 PUT /meta: not a DataONE error: %s", r.Body)
		}
	})
}

// syncFailed is a SynchronizationFailed report of a CN about pid.
func syncFailed(pid string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<error name="SynchronizationFailed" errorCode="0" detailCode="6001" identifier="` + pid + `" nodeId="urn:node:CN">
  <description>The CN could not harvest ` + pid + `</description>
</error>
`)
}

// systemMetadataChanged and synchronizationFailed: trusted callers only.
func TestNotifications(t *testing.T) {
	t.Parallel()
	d := genBytes(1000, 64)
	changed := func(pid string, m *adapter.SystemMetadata) []part {
		return []part{textPart("pid", pid), textPart("serialVersion", strconv.FormatUint(m.SerialVersion, 10)),
			textPart("dateSysMetaLastModified", m.DateSysMetadataModified.Format())}
	}
	report := func(pid string) part {
		doc := syncFailed(pid)
		return part{name: "message", filename: "message.xml", ctype: "text/xml", body: bytes.NewReader(doc)}
	}
	if err := xsdtest.Check(syncFailed("x")); err != nil {
		t.Fatalf("the test's SynchronizationFailed document is invalid: %v", err)
	}

	t.Run("untrusted caller", func(t *testing.T) {
		s := startServer(t, "")
		create(t, s, newSysmeta("note-1", "text/plain", "MD5", d), d)
		m := getMeta(t, s, 2, "note-1")
		for _, v := range []int{1, 2} {
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/dirtySystemMetadata"), false, changed("note-1", m)...), http.StatusUnauthorized, "InvalidToken")
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/error"), false, report("note-1")), http.StatusUnauthorized, "InvalidToken")
		}
		wantError(t, s.send(t, http.MethodPost, "/dirtySystemMetadata/note-1", false, changed("note-1", m)[1:]...), http.StatusUnauthorized, "InvalidToken")
		if l := logRecords(t, s, 2, "event=synchronization_failed"); l.Total != 0 {
			t.Errorf("refused reports were logged: %v", events(l))
		}
	})

	t.Run("administrator", func(t *testing.T) {
		s := startServer(t, "", adminEnv)
		create(t, s, newSysmeta("note-1", "text/plain", "MD5", d), d)
		m := getMeta(t, s, 2, "note-1")
		t.Run("systemMetadataChanged", func(t *testing.T) {
			for _, v := range []int{1, 2} {
				wantStatus(t, s.send(t, http.MethodPost, mnp(v, "/dirtySystemMetadata"), false, changed("note-1", m)...), http.StatusOK)
				wantStatus(t, s.send(t, http.MethodPost, mnp(v, "/dirtySystemMetadata"), true, changed("note-1", m)...), http.StatusOK)
			}
			// The seed's literal path, with the identifier in it.
			wantStatus(t, s.send(t, http.MethodPost, "/dirtySystemMetadata/note-1", false, changed("note-1", m)[1:]...), http.StatusOK)
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false, changed("note-missing", m)...), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false, changed("note-1", m)[1:]...), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false,
				textPart("pid", "note-1"), textPart("serialVersion", "one"), textPart("dateSysMetaLastModified", m.DateSysMetadataModified.Format())), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false,
				textPart("pid", "note-1"), textPart("serialVersion", "1"), textPart("dateSysMetaLastModified", "yesterday")), http.StatusBadRequest, "InvalidRequest")
			// A notice without a serialVersion or a date could never be newer
			// than the copy here: refused, not answered OK and dropped.
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false,
				textPart("pid", "note-1"), textPart("dateSysMetaLastModified", m.DateSysMetadataModified.Format())), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false,
				textPart("pid", "note-1"), textPart("serialVersion", "1")), http.StatusBadRequest, "InvalidRequest")
			if got := getMeta(t, s, 2, "note-1"); got.SerialVersion != m.SerialVersion {
				t.Errorf("a notice changed the object: %+v", got)
			}
		})
		t.Run("synchronizationFailed", func(t *testing.T) {
			for _, v := range []int{1, 2} {
				r := s.send(t, http.MethodPost, mnp(v, "/error"), false, report("note-1"))
				wantStatus(t, r, http.StatusOK)
			}
			// A report on an identifier this node does not hold is accepted too.
			wantStatus(t, s.send(t, http.MethodPost, mnp(2, "/error"), true, report("note-unknown")), http.StatusOK)
			got := events(logRecords(t, s, 2, "event=synchronization_failed"))
			if n := strings.Count(strings.Join(got, "\n"), "note-1 synchronization_failed"); n != 2 {
				t.Errorf("synchronization_failed events %v, want 2 on note-1", got)
			}
			if l := logRecords(t, s, 1, "event=synchronization_failed&pidFilter=note-1"); l.Total != 2 {
				t.Errorf("v1: %v", events(l))
			}
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/error"), false, textPart("pid", "note-1")), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/error"), false,
				part{name: "message", filename: "m.xml", body: strings.NewReader("not xml")}), http.StatusBadRequest, "InvalidRequest")
		})
	})
}

// Races and interrupted requests: concurrent creates of one identifier and
// concurrent updates of one object have one winner and leave nothing of the
// losers; an upload the client abandons leaves nothing.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 8
	all := []adapter.Permission{adapter.PermChangePermission}

	t.Run("creates of one pid", func(t *testing.T) {
		datas := make([][]byte, n)
		rs := make([]*response, n)
		var wg sync.WaitGroup
		for i := range n {
			datas[i] = genBytes(uint64(1600+i), 200_000+i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				sm := newSysmeta("race-create", "application/octet-stream", "SHA-1", datas[i], all...)
				rs[i] = s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(datas[i]), i%2 == 0)...)
			}()
		}
		wg.Wait()
		winner := -1
		for i, r := range rs {
			if r == nil {
				t.Errorf("create %d got no answer", i)
				continue
			}
			switch r.Status {
			case http.StatusOK:
				if winner >= 0 {
					t.Errorf("creates %d and %d both succeeded", winner, i)
				}
				winner = i
			default:
				wantError(t, r, http.StatusConflict, "IdentifierNotUnique")
			}
		}
		if winner < 0 {
			t.Fatal("no create succeeded")
		}
		if r := s.get(t, objectPath(2, "race-create")); !bytes.Equal(r.Body, datas[winner]) {
			t.Error("the stored bytes are not the winner's")
		}
		if f := countFiles(t, s.DataDir); f != 1 {
			t.Errorf("%d files under the object store, want 1", f)
		}
	})

	t.Run("updates of one object", func(t *testing.T) {
		base := genBytes(1700, 1000)
		create(t, s, newSysmeta("race-base", "text/plain", "MD5", base, all...), base)
		files := countFiles(t, s.DataDir)
		rs := make([]*response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := genBytes(uint64(1710+i), 50_000)
				sm := newSysmeta(fmt.Sprintf("race-next-%d", i), "text/plain", "MD5", d, all...)
				rs[i] = s.send(t, http.MethodPut, objectPath(2, "race-base"), false,
					textPart("newPid", sm.Identifier), filePart("object", "o", bytes.NewReader(d)), docPart("sysmeta", sm))
			}()
		}
		wg.Wait()
		winner := ""
		for i, r := range rs {
			id := fmt.Sprintf("race-next-%d", i)
			if r == nil {
				t.Errorf("update %d got no answer", i)
				continue
			}
			if r.Status == http.StatusOK {
				if winner != "" {
					t.Errorf("updates to %s and %s both succeeded: the chain branched", winner, id)
				}
				winner = id
				continue
			}
			wantError(t, r, http.StatusBadRequest, "InvalidRequest")
			wantNotFound(t, s, 2, id)
		}
		if m := getMeta(t, s, 2, "race-base"); winner == "" || m.ObsoletedBy != winner {
			t.Errorf("race-base obsoletedBy %q, winner %q", m.ObsoletedBy, winner)
		}
		if f := countFiles(t, s.DataDir); f != files+1 {
			t.Errorf("%d files under the object store, want %d", f, files+1)
		}
	})

	t.Run("abandoned upload", func(t *testing.T) {
		files := countFiles(t, s.DataDir)
		const malformed = "the multipart body is malformed"
		answered := strings.Count(s.log.String(), malformed)
		size := int64(4 << 20)
		sm := sysmetaFor("race-abandoned", "application/octet-stream", "MD5", uint64(size), genChecksum("MD5", 1800, size))
		body := io.MultiReader(io.LimitReader(newGenReader(1800, size), 1<<20), errReader{io.ErrUnexpectedEOF})
		for _, sysmetaFirst := range []bool{false, true} {
			mb, ctype := multipartBody(false, createParts(sm, body, sysmetaFirst)...)
			req, _ := http.NewRequest(http.MethodPost, s.URL+mnp(2, "/object"), mb)
			req.Header.Set("Content-Type", ctype)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("an abandoned upload was answered %d", resp.StatusCode)
			}
		}
		// The server notices the abandoned connections on its own time, and
		// logs each one once it has discarded what it staged.
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(s.log.String(), malformed) < answered+2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		// The client's fault (InvalidRequest), not the store's (a cut body
		// once failed the store's Put: ServiceFailure).
		if n := strings.Count(s.log.String(), malformed) - answered; n != 2 {
			t.Errorf("%d of the 2 abandoned uploads logged as %q", n, malformed)
		}
		if f := countFiles(t, s.DataDir); f != files {
			t.Errorf("%d files under the object store, want %d", f, files)
		}
		wantNotFound(t, s, 2, "race-abandoned")
		wantStatus(t, s.get(t, "/d1/mn/v2/monitor/ping"), http.StatusOK)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
