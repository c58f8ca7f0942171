package main

import (
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// updateSystemMetadata may not change the checksum (API.md §10 rules 3, 9;
// Metacat checkModifiedImmutableFields refuses a different checksum
// algorithm too). The immutability check compared only the value, so a
// sysmeta that relabelled the stored MD5 digest as SHA-1 was answered 200 OK
// and silently not applied.
func TestUpdateSystemMetadataChecksumAlgorithm(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(9301, 500)
	create(t, s, newSysmeta("rvusm-1", "text/plain", "MD5", d, all...), d)
	m := getMeta(t, s, 2, "rvusm-1")
	before := m.SerialVersion
	m.Checksum.Algorithm = "SHA-1" // the value stays the MD5 digest
	r := s.send(t, http.MethodPut, mnp(2, "/meta"), false, textPart("pid", "rvusm-1"), docPart("sysmeta", m))
	wantError(t, r, http.StatusBadRequest, "InvalidSystemMetadata")
	if got := getMeta(t, s, 2, "rvusm-1"); got.SerialVersion != before || got.Checksum.Algorithm != "MD5" {
		t.Errorf("after a refused change: serialVersion %d (was %d), checksum %s", got.SerialVersion, before, got.Checksum.Algorithm)
	}
	// An alias of the stored algorithm is the same checksum, and is fine.
	m = getMeta(t, s, 2, "rvusm-1")
	m.Checksum.Algorithm = "md5"
	wantStatus(t, s.send(t, http.MethodPut, mnp(2, "/meta"), false, textPart("pid", "rvusm-1"), docPart("sysmeta", m)), http.StatusOK)
}
