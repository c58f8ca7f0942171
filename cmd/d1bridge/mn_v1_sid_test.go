package main

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// v1 has no series identifiers (API.md §3.5 "SID arguments: /v1/ no"; §10
// rule 15; v1 SystemMetadata has no seriesId). A create or update through
// /v1/ must not give the new object a series id, whichever namespace its
// sysmeta part uses: it is refused. A v2 sysmeta document posted to
// /v1/object (or PUT /v1/object/{pid}) kept its seriesId, and the series then
// resolved on v2.
func TestV1WritesTakeNoSeriesID(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(9201, 200)

	check := func(t *testing.T, r *response, pid, sid string) {
		t.Helper()
		wantError(t, r, http.StatusBadRequest, "InvalidSystemMetadata")
		wantNotFound(t, s, 2, pid)
		if r := s.get(t, metaPath(2, sid)); r.Status != http.StatusNotFound {
			t.Errorf("the series %q given through v1 resolves on v2: status %d", sid, r.Status)
		}
	}

	t.Run("create", func(t *testing.T) {
		sm := newSysmeta("rvv1-a", "text/plain", "MD5", d, all...)
		sm.SeriesID = "rvv1-series"
		r := s.send(t, http.MethodPost, mnp(1, "/object"), false,
			textPart("pid", sm.Identifier), filePart("object", "content.bin", bytes.NewReader(d)), docPart("sysmeta", sm, 2))
		check(t, r, "rvv1-a", "rvv1-series")
	})
	t.Run("update", func(t *testing.T) {
		create(t, s, newSysmeta("rvv1-b", "text/plain", "MD5", d, all...), d)
		sm := newSysmeta("rvv1-c", "text/plain", "MD5", d, all...)
		sm.SeriesID = "rvv1-series-2"
		r := s.send(t, http.MethodPut, objectPath(1, "rvv1-b"), false,
			textPart("newPid", sm.Identifier), filePart("object", "content.bin", bytes.NewReader(d)), docPart("sysmeta", sm, 2))
		check(t, r, "rvv1-c", "rvv1-series-2")
	})
}

// TestV1ListBySIDWithPrivateHead: v1 listObjects lists nothing for a series
// id, also when the caller cannot read the series' head: the public versions
// of a series whose head is private are listed on v2 (by SID) and not on v1,
// where the SID is no identifier at all. (Through the dataone mapping, where
// the upstream refuses the head: TestDataONEV1ListBySIDWithPrivateHead.)
func TestV1ListBySIDWithPrivateHead(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	d := genBytes(9202, 100)
	first := newSysmeta("v1p-1", "text/plain", "MD5", d, adapter.PermChangePermission)
	first.SeriesID = "v1p-series"
	create(t, s, first, d)
	head := newSysmeta("v1p-2", "text/plain", "MD5", d)
	head.SeriesID, head.Obsoletes, head.AccessPolicy = "v1p-series", "v1p-1", nil // the owner's alone
	r := s.send(t, http.MethodPut, objectPath(2, "v1p-1"), false,
		textPart("newPid", head.Identifier), filePart("object", "content.bin", bytes.NewReader(d)), docPart("sysmeta", head, 2))
	if !wantIdentifier(t, r, "v1p-2") {
		t.FailNow()
	}
	if l := listObjects(t, s, 2, "identifier=v1p-series"); l.Total != 1 || pids(l)[0] != "v1p-1" {
		t.Errorf("v2 listObjects by SID, anonymous: %v, want the public version", pids(l))
	}
	if l := listObjects(t, s, 1, "identifier=v1p-series"); l.Total != 0 || l.Count != 0 {
		t.Errorf("v1 listObjects by SID, anonymous, with a private head: %v, want none", pids(l))
	}
	if l := listObjects(t, s, 1, "identifier=v1p-1"); l.Total != 1 {
		t.Errorf("v1 listObjects by the public PID: %v", pids(l))
	}
}
