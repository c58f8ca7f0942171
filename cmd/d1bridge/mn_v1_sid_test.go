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
