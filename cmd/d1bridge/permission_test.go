package main

// End-to-end tests of what a permission lets a caller do beyond the route's
// own check: the parts of an operation that need more than its route, and the
// error a refused caller gets.

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestUpdateSystemMetadataNeedsChangePermission: a caller holding only write
// on an object must not be able to take it over through updateSystemMetadata
// (PUT /v2/meta) by rewriting its rightsHolder and accessPolicy:
// setAccessPolicy needs changePermission (and archive too), so a write-only
// caller who can replace the policy and the owner through /meta holds
// changePermission in all but name.
func TestUpdateSystemMetadataNeedsChangePermission(t *testing.T) {
	c := cnStart(t)
	// Alice owns it; Bob may write; the public may read.
	data := []byte("review: usm escalation\n")
	sm := newSysmeta("rv-usm-escalate", "text/plain", "SHA-256", data)
	sm.RightsHolder = cnAlice
	sm.AccessPolicy.Allow = append(sm.AccessPolicy.Allow, adapter.AccessRule{Subject: []string{cnBob}, Permission: []adapter.Permission{adapter.PermWrite}})
	r := c.form(t, cnAlice, http.MethodPost, "/d1/mn/v2/object", createParts(sm, bytes.NewReader(data), false)...)
	if !wantIdentifier(t, r, sm.Identifier) {
		t.FailNow()
	}
	// Bob cannot change the access policy the direct way.
	policy := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{cnBob}, Permission: []adapter.Permission{adapter.PermChangePermission}}}}
	cnWantError(t, c.form(t, cnBob, http.MethodPut, "/d1/mn/v2/accessRules/"+segment(sm.Identifier), docPart("accessPolicy", policy)),
		http.StatusUnauthorized, "NotAuthorized", "")

	cur := c.meta(t, sm.Identifier)
	next := cur.Clone()
	next.RightsHolder = cnBob
	next.AccessPolicy = policy
	r = c.form(t, cnBob, http.MethodPut, "/d1/mn/v2/meta", textPart("pid", sm.Identifier), docPart("sysmeta", next))
	if r.Status == http.StatusOK {
		got := c.meta(t, sm.Identifier)
		t.Fatalf("a caller with write only made itself rights holder (now %q) and replaced the access policy through updateSystemMetadata", got.RightsHolder)
	}
	e := cnWantError(t, r, http.StatusUnauthorized, "NotAuthorized", "4867")
	if !strings.Contains(e.Description, "changePermission") || !strings.Contains(e.Description, "rightsHolder") || !strings.Contains(e.Description, "accessPolicy") {
		t.Errorf("the refusal does not say what needed which permission: %q", e.Description)
	}
	// Archiving needs changePermission as archive does.
	next = cur.Clone()
	next.Archived = true
	cnWantError(t, c.form(t, cnBob, http.MethodPut, "/d1/mn/v2/meta", textPart("pid", sm.Identifier), docPart("sysmeta", next)),
		http.StatusUnauthorized, "NotAuthorized", "4867")
	if got := c.meta(t, sm.Identifier); got.RightsHolder != cnAlice || got.Archived || got.DateSysMetadataModified != cur.DateSysMetadataModified {
		t.Fatalf("a refused update changed the system metadata: %+v", got)
	}

	// Write is enough for the other fields, and the same grants in another
	// order are no change of the access policy.
	next = cur.Clone()
	next.FileName = "renamed.txt"
	slices.Reverse(next.AccessPolicy.Allow)
	if !wantStatus(t, c.form(t, cnBob, http.MethodPut, "/d1/mn/v2/meta", textPart("pid", sm.Identifier), docPart("sysmeta", next)), http.StatusOK) {
		t.FailNow()
	}
	// The rights holder, and a trusted subject, change the rest.
	cur = c.meta(t, sm.Identifier)
	next = cur.Clone()
	next.AccessPolicy = policy
	if !wantStatus(t, c.form(t, cnAlice, http.MethodPut, "/d1/mn/v2/meta", textPart("pid", sm.Identifier), docPart("sysmeta", next)), http.StatusOK) {
		t.FailNow()
	}
	cur = c.meta(t, sm.Identifier)
	next = cur.Clone()
	next.RightsHolder = cnBob
	next.Archived = true
	if !wantStatus(t, c.form(t, cnAdmin, http.MethodPut, "/d1/mn/v2/meta", textPart("pid", sm.Identifier), docPart("sysmeta", next)), http.StatusOK) {
		t.FailNow()
	}
	if got := c.meta(t, sm.Identifier); got.FileName != "renamed.txt" || got.RightsHolder != cnBob || !got.Archived || len(got.AccessPolicy.Allow) != 1 {
		t.Errorf("after the allowed updates: fileName %q, rightsHolder %q, archived %v, accessPolicy %+v", got.FileName, got.RightsHolder, got.Archived, got.AccessPolicy)
	}
}

// TestPackageWithoutCredentialIsInvalidToken: a caller without any credential
// asking for a package it may not read gets InvalidToken, as on every other
// read (get, getSystemMetadata, view): "A missing or refused credential where
// more than public access is needed answers InvalidToken" (README). A
// signed-in caller refused gets NotAuthorized.
func TestPackageWithoutCredentialIsInvalidToken(t *testing.T) {
	c := cnStart(t)
	data := []byte("a,b\n1,2\n")
	member := newSysmeta("rv-pkg-member", "text/csv", "MD5", data)
	ore := resourceMap("rv-pkg-private-ore", "rv-pkg-member")
	sm := newSysmeta("rv-pkg-private-ore", "http://www.openarchives.org/ore/terms", "MD5", ore)
	sm.RightsHolder, sm.AccessPolicy = cnAlice, nil
	for _, o := range []struct {
		sm   *adapter.SystemMetadata
		data []byte
	}{{member, data}, {sm, ore}} {
		if !wantIdentifier(t, c.form(t, cnAlice, http.MethodPost, "/d1/mn/v2/object", createParts(o.sm, bytes.NewReader(o.data), false)...), o.sm.Identifier) {
			t.FailNow()
		}
	}
	// The same anonymous caller reading the map itself: InvalidToken.
	wantError(t, c.call(t, "", http.MethodGet, "/d1/mn/v2/meta/rv-pkg-private-ore"), http.StatusUnauthorized, "InvalidToken")
	pkg := "/d1/mn/v2/packages/application%2Fbagit-097/rv-pkg-private-ore"
	cnWantError(t, c.call(t, "", http.MethodGet, pkg), http.StatusUnauthorized, "InvalidToken", "2870")
	// Signed in, the caller is refused: NotAuthorized.
	cnWantError(t, c.call(t, cnBob, http.MethodGet, pkg), http.StatusUnauthorized, "NotAuthorized", "2872")
	if r := c.call(t, cnAlice, http.MethodGet, pkg); !wantStatus(t, r, http.StatusOK) {
		t.Logf("%s", r.Body)
	}
}
