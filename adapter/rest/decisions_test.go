package rest

import (
	"net/http"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// TestDecisionsKeptForIsAuthorizedOnly: reads, which look the object up
// whatever the decision, neither fill nor consult the decision cache; the
// decision isAuthorized answers is kept, one per role, and a second ask is a
// hit.
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
	if n := authz.CachedDecisions(); n != 2 {
		t.Errorf("isAuthorized kept %d decisions, want 2 (the MN's and the CN's: see TestDecisionsKeptPerRole)", n)
	}
	for _, role := range []string{"mn", "cn"} {
		if _, allowed, hit := authz.Cached(adapter.PublicSession(), role, "x/y", auth.Read); !hit || !allowed {
			t.Errorf("the decision isAuthorized kept for %s: hit %v allowed %v", role, hit, allowed)
		}
	}
}

// TestDecisionsKeptPerRole: with a mapping (config `mapping`) the member node
// is an upstream's pass-through and the coordinating node the local catalog
// (cmd/d1bridge newEngine), each with its own system metadata for an
// identifier. A decision isAuthorized kept for the MN's object does not answer
// isAuthorized on the CN's, whose access policy is another; a change notice
// still ends the decisions of both.
func TestDecisionsKeptPerRole(t *testing.T) {
	mn, cn := newFake(), newFake()
	mn.meta.RightsHolder, cn.meta.RightsHolder = "CN=owner,DC=org", "CN=owner,DC=org"
	mn.meta.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}}
	cn.meta.AccessPolicy = nil // private to its owner on the CN
	authz := auth.NewAuthorizer(auth.Policy{CacheSize: 100})
	h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST"}, MN: mn, CN: cn, Authorizer: authz})

	// Without a decision kept, the CN refuses.
	if w := serve(h, http.MethodGet, "/d1/cn/v2/isAuthorized/x%2Fy?action=read"); w.Code != http.StatusUnauthorized {
		t.Fatalf("CN isAuthorized on its private object, nothing cached: %d %s", w.Code, w.Body.String())
	}
	// The MN's object is public.
	if w := serve(h, http.MethodGet, "/d1/mn/v2/isAuthorized/x%2Fy?action=read"); w.Code != http.StatusOK {
		t.Fatalf("MN isAuthorized on its public object: %d %s", w.Code, w.Body.String())
	}
	// The CN's object has not changed: still refused.
	if w := serve(h, http.MethodGet, "/d1/cn/v2/isAuthorized/x%2Fy?action=read"); w.Code != http.StatusUnauthorized {
		t.Errorf("CN isAuthorized on its private object after the MN's decision on its own object of that id: %d, want 401 (the MN's decision was reused)", w.Code)
	}
	// Both roles' decisions are kept, and invalidating the PID ends both.
	for _, role := range []string{"mn", "cn"} {
		if _, _, hit := authz.Cached(adapter.PublicSession(), role, "x/y", auth.Read); !hit {
			t.Errorf("no decision kept for %s", role)
		}
	}
	authz.Invalidate("x/y")
	for _, role := range []string{"mn", "cn"} {
		if _, _, hit := authz.Cached(adapter.PublicSession(), role, "x/y", auth.Read); hit {
			t.Errorf("the %s's decision outlived the invalidation of x/y", role)
		}
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
	if _, _, hit := authz.Cached(adapter.PublicSession(), "mn", "x/y", auth.Read); !hit {
		t.Fatal("isAuthorized kept no decision")
	}
	w := serveForm(h, http.MethodPost, "/d1/mn/v2/dirtySystemMetadata",
		formPart{"pid", "x/y"}, formPart{"serialVersion", "2"}, formPart{"dateSysMetaLastModified", "2024-01-01T00:00:00Z"})
	if w.Code != http.StatusOK {
		t.Fatalf("systemMetadataChanged: %d %s", w.Code, w.Body.String())
	}
	if _, _, hit := authz.Cached(adapter.PublicSession(), "mn", "x/y", auth.Read); hit {
		t.Error("the decision on x/y outlived the notice that its system metadata changed")
	}
}
