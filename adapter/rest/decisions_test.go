package rest

import (
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// TestDecisionsKeptForIsAuthorizedOnly: reads, which look the object up
// whatever the decision, neither fill nor consult the decision cache; the
// decision isAuthorized answers is kept, and a second ask is a hit.
func TestDecisionsKeptForIsAuthorizedOnly(t *testing.T) {
	f := newFake()
	f.meta.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
	authz := auth.NewAuthorizer(auth.Policy{CacheSize: 100})
	h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST"}, MN: f, CN: f, Authorizer: authz})
	for _, path := range []string{"/d1/mn/v2/object/x%2Fy", "/d1/mn/v2/meta/x%2Fy", "/d1/cn/v2/meta/x%2Fy"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if method == http.MethodHead && path != "/d1/mn/v2/object/x%2Fy" {
				continue
			}
			if w := serve(h, method, path); w.Code != http.StatusOK {
				t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
			}
		}
	}
	if n := authz.CachedDecisions(); n != 0 {
		t.Errorf("reads left %d decisions in the cache, want none", n)
	}
	for _, role := range []string{"mn", "cn"} {
		if w := serve(h, http.MethodGet, "/d1/"+role+"/v2/isAuthorized/x%2Fy?action=read"); w.Code != http.StatusOK {
			t.Fatalf("%s isAuthorized: %d %s", role, w.Code, w.Body.String())
		}
	}
	if n := authz.CachedDecisions(); n != 1 {
		t.Errorf("isAuthorized kept %d decisions, want 1 (the MN's and the CN's are the same)", n)
	}
	if _, allowed, hit := authz.Cached(adapter.PublicSession(), "x/y", auth.Read); !hit || !allowed {
		t.Errorf("the decision isAuthorized kept: hit %v allowed %v", hit, allowed)
	}
}

// TestChangeNoticeForgetsDecisions: the CN's notice that an object's system
// metadata changed (POST /dirtySystemMetadata, the pid in the body) forgets
// the decisions kept on that object: in front of another node it is the only
// sign that its access changed.
func TestChangeNoticeForgetsDecisions(t *testing.T) {
	f := newFake()
	f.meta.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
	authz := auth.NewAuthorizer(auth.Policy{CacheSize: 100, Trusted: []string{adapter.SubjectPublic}})
	h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST"}, MN: f, CN: f, Authorizer: authz})
	if w := serve(h, http.MethodGet, "/d1/mn/v2/isAuthorized/x%2Fy?action=read"); w.Code != http.StatusOK {
		t.Fatalf("isAuthorized: %d %s", w.Code, w.Body.String())
	}
	if _, _, hit := authz.Cached(adapter.PublicSession(), "x/y", auth.Read); !hit {
		t.Fatal("isAuthorized kept no decision")
	}
	w := serveForm(h, http.MethodPost, "/d1/mn/v2/dirtySystemMetadata",
		formPart{"pid", "x/y"}, formPart{"serialVersion", "2"}, formPart{"dateSysMetaLastModified", "2024-01-01T00:00:00Z"})
	if w.Code != http.StatusOK {
		t.Fatalf("systemMetadataChanged: %d %s", w.Code, w.Body.String())
	}
	if _, _, hit := authz.Cached(adapter.PublicSession(), "x/y", auth.Read); hit {
		t.Error("the decision on x/y outlived the notice that its system metadata changed")
	}
}
