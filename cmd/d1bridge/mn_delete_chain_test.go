package main

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// Deleting the head of a chain must not leave its predecessor obsoleted by
// an object that no longer exists (GMN: revision.cut_from_chain clears the
// predecessor's obsoletedBy and moves the SID to it). The predecessor kept
// obsoletedBy = the deleted PID, so the chain could never be extended again
// ("already obsoleted ... a chain cannot branch"). A deleted middle object
// leaves its neighbours linked to each other.
func TestDeleteClosesTheChain(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", adminEnv)
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(9101, 300)
	update := func(target string, sm *adapter.SystemMetadata) *response {
		return s.send(t, http.MethodPut, objectPath(2, target), false,
			textPart("newPid", sm.Identifier), filePart("object", "content.bin", bytes.NewReader(d)), docPart("sysmeta", sm))
	}
	a := newSysmeta("rvdel-a", "text/plain", "MD5", d, all...)
	a.SeriesID = "rvdel-series"
	create(t, s, a, d)
	b := newSysmeta("rvdel-b", "text/plain", "MD5", d, all...)
	b.SeriesID = "rvdel-series"
	if !wantIdentifier(t, update("rvdel-a", b), "rvdel-b") {
		t.FailNow()
	}
	if !wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "rvdel-b"), nil), "rvdel-b") {
		t.FailNow()
	}
	wantNotFound(t, s, 2, "rvdel-b")

	// The series now names rvdel-a (this part works).
	if m := getMeta(t, s, 2, "rvdel-series"); m.Identifier != "rvdel-a" {
		t.Fatalf("the series resolves to %s after its head was deleted, want rvdel-a", m.Identifier)
	}
	// rvdel-a must not name the deleted object as its successor.
	if m := getMeta(t, s, 2, "rvdel-a"); m.ObsoletedBy != "" {
		t.Errorf("rvdel-a is obsoletedBy %q, an object deleted from this node", m.ObsoletedBy)
	}
	if h := s.head(t, objectPath(2, "rvdel-a")).Header.Get("DataONE-ObsoletedBy"); h != "" {
		t.Errorf("describe rvdel-a: DataONE-ObsoletedBy %q names a deleted object", h)
	}
	// The head of the series can be updated again, by PID and by SID.
	c := newSysmeta("rvdel-c", "text/plain", "MD5", d, all...)
	c.SeriesID = "rvdel-series"
	wantIdentifier(t, update("rvdel-series", c), "rvdel-c")

	// A -> X -> Y, X deleted: A is obsoleted by Y, Y obsoletes A.
	x := newSysmeta("rvdel-x", "text/plain", "MD5", d, all...)
	y := newSysmeta("rvdel-y", "text/plain", "MD5", d, all...)
	wantIdentifier(t, update("rvdel-c", x), "rvdel-x")
	wantIdentifier(t, update("rvdel-x", y), "rvdel-y")
	wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "rvdel-x"), nil), "rvdel-x")
	if m := getMeta(t, s, 2, "rvdel-c"); m.ObsoletedBy != "rvdel-y" {
		t.Errorf("rvdel-c is obsoletedBy %q after its successor's deletion, want rvdel-y", m.ObsoletedBy)
	}
	if m := getMeta(t, s, 2, "rvdel-y"); m.Obsoletes != "rvdel-c" {
		t.Errorf("rvdel-y obsoletes %q after its predecessor's deletion, want rvdel-c", m.Obsoletes)
	}
}
