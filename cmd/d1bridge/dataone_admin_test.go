package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestDataONEForwardsAdmin: through the dataone mapping, reindex and
// updateIdMetadata reach the upstream's admin group as the caller, and
// publish and publishIdentifier its publishing; the upstream's answers and
// error kinds come back.
func TestDataONEForwardsAdmin(t *testing.T) {
	t.Parallel()
	const admin = "CN=admin,O=d1bridge,DC=example,DC=org"
	admins := `D1BRIDGE_NODE_ADMINISTRATORS=["` + admin + `"]`
	up := d1Upstream(t, admins)
	front, err := d1Front(t, up.URL, fmt.Sprintf("{forward: proxy, secret: %s}", d1UpSecret), admins)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("reindexed through the front")
	if r := d1CreateUp(t, up, d1Object("adm-1", data), bytes.NewReader(data)); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	put := func(path, who string) *response {
		return front.do(t, http.MethodPut, mnp(2, path), nil, d1As(who)...)
	}
	wantStatus(t, put("/index/adm-1", admin), http.StatusOK)
	wantStatus(t, put("/index?pid=adm-1&pid=adm-1", admin), http.StatusOK)
	if e := wantError(t, put("/index/adm-unknown", admin), http.StatusBadRequest, "InvalidRequest"); e != nil &&
		!strings.Contains(e.Description, "adm-unknown") {
		t.Errorf("unknown pid: %q", e.Description)
	}
	wantError(t, put("/index/adm-1", d1Submitter), http.StatusUnauthorized, "NotAuthorized")
	// The upstream has no identifier service: its NotImplemented comes back.
	for _, path := range []string{"/publish/adm-1", "/publishIdentifier/adm-1", "/identifiers/adm-1"} {
		if e := wantError(t, put(path, admin), http.StatusNotImplemented, "NotImplemented"); e != nil &&
			!strings.Contains(e.Description, "identifier service") {
			t.Errorf("PUT %s: %q, want the upstream's reason", path, e.Description)
		}
	}
}
