package auth

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	ownerDN   = "CN=Owner,O=Example,C=US,DC=cilogon,DC=org"
	readerDN  = "CN=Reader,O=Example,C=US,DC=cilogon,DC=org"
	writerDN  = "CN=Writer,O=Example,C=US,DC=cilogon,DC=org"
	managerDN = "CN=Manager,O=Example,C=US,DC=cilogon,DC=org"
	strangeDN = "CN=Stranger,O=Example,C=US,DC=cilogon,DC=org"
	groupDN   = "cn=researchers,ou=Groups,dc=example,dc=org"
	cnDN      = "CN=urn:node:CNTEST,DC=dataone,DC=org"
)

// session is a credentialed session of subjects (primary first), as
// Authenticator.Session makes it.
func session(subjects ...string) *adapter.Session {
	return &adapter.Session{Subject: subjects[0],
		Subjects: append(slices.Clone(subjects), adapter.SubjectAuthenticatedUser, adapter.SubjectPublic)}
}

func object(pid string, rules ...adapter.AccessRule) *adapter.SystemMetadata {
	sm := &adapter.SystemMetadata{Identifier: pid, RightsHolder: ownerDN}
	if len(rules) > 0 {
		sm.AccessPolicy = &adapter.AccessPolicy{Allow: rules}
	}
	return sm
}

func rule(perm adapter.Permission, subjects ...string) adapter.AccessRule {
	return adapter.AccessRule{Subject: subjects, Permission: []adapter.Permission{perm}}
}

// TestAuthorizerLevels: rightsHolder holds every level; a rule grants its level
// and those below (read < write < changePermission) to any of the session's
// subjects, groups and symbolic subjects included; trusted subjects hold all.
func TestAuthorizerLevels(t *testing.T) {
	t.Parallel()
	sm := object("pid-levels",
		rule(adapter.PermRead, readerDN),
		rule(adapter.PermWrite, writerDN),
		rule(adapter.PermChangePermission, managerDN),
		rule(adapter.PermWrite, groupDN))
	publicRead := object("pid-public", rule(adapter.PermRead, adapter.SubjectPublic))
	authRead := object("pid-auth", rule(adapter.PermRead, adapter.SubjectAuthenticatedUser))
	noPolicy := object("pid-none")
	failedToken := adapter.PublicSession()
	failedToken.CredentialError = "the bearer token is not valid: token is expired"

	a := NewAuthorizer(Policy{Trusted: []string{cnDN}, Submitters: []string{adapter.SubjectAuthenticatedUser}})
	tests := []struct {
		name    string
		s       *adapter.Session
		sm      *adapter.SystemMetadata
		allowed []Perm // of Read, Write, ChangePermission
	}{
		{"rightsHolder", session(ownerDN), noPolicy, []Perm{Read, Write, ChangePermission}},
		{"reader", session(readerDN), sm, []Perm{Read}},
		{"writer", session(writerDN), sm, []Perm{Read, Write}},
		{"manager", session(managerDN), sm, []Perm{Read, Write, ChangePermission}},
		{"group member", session(strangeDN, groupDN), sm, []Perm{Read, Write}},
		{"rightsHolder as equivalent identity", session(strangeDN, ownerDN), noPolicy, []Perm{Read, Write, ChangePermission}},
		{"stranger", session(strangeDN), sm, nil},
		{"public on a public object", adapter.PublicSession(), publicRead, []Perm{Read}},
		{"stranger on a public object", session(strangeDN), publicRead, []Perm{Read}},
		{"failed token on a public object", failedToken, publicRead, []Perm{Read}},
		{"public on an authenticatedUser object", adapter.PublicSession(), authRead, nil},
		{"stranger on an authenticatedUser object", session(strangeDN), authRead, []Perm{Read}},
		{"public on a private object", adapter.PublicSession(), sm, nil},
		{"trusted", session(cnDN), noPolicy, []Perm{Read, Write, ChangePermission}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []Perm{Read, Write, ChangePermission} {
				want := slices.Contains(tc.allowed, p)
				if got := a.Allowed(tc.s, p, tc.sm); got != want {
					t.Errorf("Allowed(%s) = %v, want %v", p, got, want)
				}
				err := a.Check(context.Background(), tc.s, p, tc.sm)
				if (err == nil) != want {
					t.Errorf("Check(%s) = %v, want allowed=%v", p, err, want)
				}
			}
			wantLevel := 0
			for _, p := range tc.allowed {
				wantLevel = max(wantLevel, p.Permission().Level())
			}
			if !a.IsTrusted(tc.s) {
				if got := Level(tc.s, tc.sm); got != wantLevel {
					t.Errorf("Level = %d, want %d", got, wantLevel)
				}
			}
		})
	}
	if a.Allowed(session(ownerDN), Read, nil) {
		t.Error("an object permission without the object was allowed")
	}
}

// TestAuthorizerNodePerms: Public, Authenticated, Submit and Trusted, the
// permissions on the node rather than an object.
func TestAuthorizerNodePerms(t *testing.T) {
	t.Parallel()
	failedToken := adapter.PublicSession()
	failedToken.CredentialError = "the bearer token is not valid"
	tests := []struct {
		name       string
		submitters []string
		s          *adapter.Session
		allowed    []Perm
	}{
		{"public", []string{adapter.SubjectAuthenticatedUser}, adapter.PublicSession(), []Perm{Public}},
		{"failed token", []string{adapter.SubjectAuthenticatedUser}, failedToken, []Perm{Public}},
		{"authenticated submitter", []string{adapter.SubjectAuthenticatedUser}, session(strangeDN), []Perm{Public, Authenticated, Submit}},
		{"listed submitter", []string{readerDN}, session(readerDN), []Perm{Public, Authenticated, Submit}},
		{"submitter by group", []string{groupDN}, session(strangeDN, groupDN), []Perm{Public, Authenticated, Submit}},
		{"not a submitter", []string{readerDN}, session(strangeDN), []Perm{Public, Authenticated}},
		{"public submitters", []string{adapter.SubjectPublic}, adapter.PublicSession(), []Perm{Public, Submit}},
		{"trusted", nil, session(cnDN), []Perm{Public, Authenticated, Submit, Trusted}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthorizer(Policy{Trusted: []string{cnDN}, Submitters: tc.submitters})
			for _, p := range []Perm{Public, Authenticated, Submit, Trusted} {
				if got, want := a.Allowed(tc.s, p, nil), slices.Contains(tc.allowed, p); got != want {
					t.Errorf("Allowed(%s) = %v, want %v", p, got, want)
				}
			}
		})
	}
}

// TestAuthorizerCheckErrors: a caller with no credential, or a refused one, gets
// InvalidToken (with the refusal's reason); a credentialed caller lacking the
// right gets NotAuthorized naming the subject and the object.
func TestAuthorizerCheckErrors(t *testing.T) {
	t.Parallel()
	a := NewAuthorizer(Policy{})
	sm := object("pid-private", rule(adapter.PermRead, readerDN))
	failed := adapter.PublicSession()
	failed.CredentialError = "the bearer token is not valid: token is expired"
	tests := []struct {
		name  string
		s     *adapter.Session
		perm  Perm
		sm    *adapter.SystemMetadata
		kind  adapter.Kind
		words []string
	}{
		{"no credential", adapter.PublicSession(), Read, sm, adapter.InvalidToken, []string{"no credential", "read", "pid-private"}},
		{"refused credential", failed, Read, sm, adapter.InvalidToken, []string{"token is expired", "pid-private"}},
		{"refused credential, node permission", failed, Authenticated, nil, adapter.InvalidToken, []string{"token is expired", "authenticated"}},
		{"no credential, trusted operation", adapter.PublicSession(), Trusted, nil, adapter.InvalidToken, []string{"trusted"}},
		{"lacks the level", session(readerDN), Write, sm, adapter.NotAuthorized, []string{readerDN, "write", "pid-private"}},
		{"lacks any right", session(strangeDN), Read, sm, adapter.NotAuthorized, []string{strangeDN, "read"}},
		{"not trusted", session(strangeDN), Trusted, nil, adapter.NotAuthorized, []string{strangeDN, "trusted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Check(context.Background(), tc.s, tc.perm, tc.sm)
			if !adapter.IsKind(err, tc.kind) {
				t.Fatalf("Check = %v, want %v", err, tc.kind)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not mention %q", err.Error(), w)
				}
			}
		})
	}
	if err := a.Check(context.Background(), session(readerDN), Read, sm); err != nil {
		t.Errorf("allowed Check = %v", err)
	}
	// CheckFor names the part of the operation that needs the permission.
	err := a.CheckFor(context.Background(), session(readerDN), ChangePermission, sm, "changing the rightsHolder")
	if !adapter.IsKind(err, adapter.NotAuthorized) || !strings.Contains(err.Error(), "changing the rightsHolder needs changePermission permission on pid-private") {
		t.Errorf("CheckFor = %v", err)
	}
}

func TestAuthorizerReadableBy(t *testing.T) {
	t.Parallel()
	a := NewAuthorizer(Policy{Trusted: []string{cnDN}})
	if got := a.ReadableBy(session(cnDN)); got != nil {
		t.Errorf("trusted: %q, want nil (everything)", got)
	}
	s := session(readerDN, groupDN)
	got := a.ReadableBy(s)
	want := []string{readerDN, groupDN, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}
	if !slices.Equal(got, want) {
		t.Errorf("ReadableBy = %q, want %q", got, want)
	}
	got[0] = "changed"
	if s.Subjects[0] != readerDN {
		t.Error("ReadableBy returned the session's own slice")
	}
	if got := a.ReadableBy(adapter.PublicSession()); !slices.Equal(got, []string{adapter.SubjectPublic}) {
		t.Errorf("public: %q", got)
	}
}

// TestAuthorizerDecisionCache: remembered decisions are found for the same
// subjects, id and permission only; Invalidate of a PID forgets them, including
// those asked by a SID that resolved to it; they expire after the TTL; and a
// decision made from metadata read before a change is not remembered after it.
func TestAuthorizerDecisionCache(t *testing.T) {
	t.Parallel()
	reader := session(readerDN)
	newA := func(ttl time.Duration) *Authorizer { return NewAuthorizer(Policy{CacheSize: 100, CacheTTL: ttl}) }

	t.Run("hit and keys", func(t *testing.T) {
		a := newA(time.Minute)
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, a.Mark())
		if pid, allowed, ok := a.Cached(reader, "mn", "pid-1", Read); !ok || !allowed || pid != "pid-1" {
			t.Errorf("Cached = %q %v %v, want pid-1 allowed hit", pid, allowed, ok)
		}
		if _, _, ok := a.Cached(session(readerDN), "mn", "pid-1", Read); !ok {
			t.Error("an equal session (same subjects) missed")
		}
		for name, miss := range map[string]func() bool{
			"other perm":     func() bool { _, _, ok := a.Cached(reader, "mn", "pid-1", Write); return ok },
			"other id":       func() bool { _, _, ok := a.Cached(reader, "mn", "pid-2", Read); return ok },
			"other role":     func() bool { _, _, ok := a.Cached(reader, "cn", "pid-1", Read); return ok },
			"other subjects": func() bool { _, _, ok := a.Cached(session(readerDN, groupDN), "mn", "pid-1", Read); return ok },
			"public":         func() bool { _, _, ok := a.Cached(adapter.PublicSession(), "mn", "pid-1", Read); return ok },
		} {
			if miss() {
				t.Errorf("%s: hit a decision made for another key", name)
			}
		}
		a.Remember(reader, "mn", "pid-1", Write, "pid-1", false, a.Mark())
		if _, allowed, ok := a.Cached(reader, "mn", "pid-1", Write); !ok || allowed {
			t.Errorf("a remembered refusal: allowed=%v hit=%v", allowed, ok)
		}
		if n := a.CachedDecisions(); n != 2 {
			t.Errorf("CachedDecisions = %d, want 2", n)
		}
	})

	t.Run("invalidate", func(t *testing.T) {
		a := newA(time.Minute)
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, a.Mark())
		a.Remember(reader, "mn", "pid-2", Read, "pid-2", true, a.Mark())
		a.Invalidate("pid-1", "")
		if _, _, ok := a.Cached(reader, "mn", "pid-1", Read); ok {
			t.Error("a decision on an invalidated PID was returned")
		}
		if _, _, ok := a.Cached(reader, "mn", "pid-2", Read); !ok {
			t.Error("invalidating pid-1 lost the decision on pid-2")
		}
		// Decided again after the change: kept.
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", false, a.Mark())
		if _, allowed, ok := a.Cached(reader, "mn", "pid-1", Read); !ok || allowed {
			t.Errorf("the decision made after the change: allowed=%v hit=%v", allowed, ok)
		}
	})

	t.Run("SID invalidated through its PID", func(t *testing.T) {
		a := newA(time.Minute)
		a.Remember(reader, "mn", "sid-1", Read, "pid-1", true, a.Mark())
		if pid, _, ok := a.Cached(reader, "mn", "sid-1", Read); !ok || pid != "pid-1" {
			t.Fatalf("Cached(sid-1) = %q %v, want pid-1", pid, ok)
		}
		a.Invalidate("pid-1")
		if _, _, ok := a.Cached(reader, "mn", "sid-1", Read); ok {
			t.Error("a decision asked by SID survived the invalidation of the PID it resolved to")
		}
	})

	t.Run("TTL", func(t *testing.T) {
		const ttl = 200 * time.Millisecond
		a := newA(ttl)
		start := time.Now()
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, a.Mark())
		_, _, ok := a.Cached(reader, "mn", "pid-1", Read)
		if time.Since(start) < ttl && !ok {
			t.Error("missed before the TTL")
		}
		time.Sleep(ttl + 50*time.Millisecond)
		if _, _, ok := a.Cached(reader, "mn", "pid-1", Read); ok {
			t.Error("hit after the TTL")
		}
	})

	t.Run("change during the decision", func(t *testing.T) {
		a := newA(time.Minute)
		mark := a.Mark() // the request starts reading pid-1's rights
		a.Invalidate("pid-1")
		a.Invalidate("pid-2") // another object's change is no reason to forget
		// ... and decides from what it read, possibly before the change.
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, mark)
		if _, _, ok := a.Cached(reader, "mn", "pid-1", Read); ok {
			t.Error("a decision read before a change was remembered after its invalidation")
		}
		a.Remember(reader, "mn", "pid-3", Read, "pid-3", true, mark)
		if _, _, ok := a.Cached(reader, "mn", "pid-3", Read); !ok {
			t.Error("a decision on an unchanged object was not remembered")
		}
	})

	t.Run("invalidate all", func(t *testing.T) {
		a := newA(time.Minute)
		mark := a.Mark() // a request starts reading pid-2's rights
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, a.Mark())
		a.InvalidateAll() // another instance's changes could not be followed
		if _, _, ok := a.Cached(reader, "mn", "pid-1", Read); ok || a.CachedDecisions() != 0 {
			t.Error("a decision survived InvalidateAll")
		}
		a.Remember(reader, "mn", "pid-2", Read, "pid-2", true, mark)
		if _, _, ok := a.Cached(reader, "mn", "pid-2", Read); ok {
			t.Error("a decision read before InvalidateAll was remembered after it")
		}
		a.Remember(reader, "mn", "pid-2", Read, "pid-2", true, a.Mark())
		if _, _, ok := a.Cached(reader, "mn", "pid-2", Read); !ok {
			t.Error("a decision made after InvalidateAll was not remembered")
		}
	})

	t.Run("disabled", func(t *testing.T) {
		a := NewAuthorizer(Policy{})
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, a.Mark())
		if _, _, ok := a.Cached(reader, "mn", "pid-1", Read); ok || a.CachedDecisions() != 0 {
			t.Error("authCacheSize 0 cached a decision")
		}
	})

	t.Run("changes pruned oldest first", func(t *testing.T) {
		a := newA(time.Hour)
		for i := range 1000 {
			a.Invalidate(fmt.Sprint("old-", i))
		}
		a.Invalidate("pid-1")
		mark := a.Mark()
		a.Invalidate("pid-1") // changed again: the first change's pruning must keep this one
		for i := range a.changes {
			a.changes[i].at = a.changes[i].at.Add(-2 * time.Hour) // all past the TTL ...
		}
		a.changes[len(a.changes)-1].at = time.Now() // ... but pid-1's last change
		a.Invalidate("pid-2")
		if len(a.gens) != 2 || len(a.changes) != 2 {
			t.Fatalf("after pruning: %d generations and %d changes, want pid-1's last and pid-2's", len(a.gens), len(a.changes))
		}
		a.Remember(reader, "mn", "pid-1", Read, "pid-1", true, mark)
		if _, _, ok := a.Cached(reader, "mn", "pid-1", Read); ok {
			t.Error("a decision read before pid-1's last change was remembered once its first change was pruned")
		}
	})

	t.Run("disabled keeps no changes", func(t *testing.T) {
		a := NewAuthorizer(Policy{})
		a.Invalidate("pid-1")
		if len(a.gens) != 0 || len(a.changes) != 0 {
			t.Errorf("authCacheSize 0 kept %d generations", len(a.gens))
		}
	})

	t.Run("bounded", func(t *testing.T) {
		a := NewAuthorizer(Policy{CacheSize: 3, CacheTTL: time.Minute})
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			a.Remember(reader, "mn", id, Read, id, true, a.Mark())
		}
		if n := a.CachedDecisions(); n != 3 {
			t.Errorf("CachedDecisions = %d, want the size 3", n)
		}
		if _, _, ok := a.Cached(reader, "mn", "e", Read); !ok {
			t.Error("the newest decision was evicted")
		}
	})
}

// TestTTLCacheExpiresWithoutGoroutines: entries expire at their TTL, however
// short, and a cache runs no goroutine: a reload builds new caches, and the
// expiring LRU this replaced leaked a sweeper per cache (and panicked below a
// 100ns TTL).
func TestTTLCacheExpiresWithoutGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 50 {
		NewAuthorizer(Policy{CacheSize: 10, CacheTTL: time.Minute})
	}
	if n := runtime.NumGoroutine(); n > before+10 { // slack for other tests' stragglers
		t.Errorf("50 authorizers left %d goroutines running", n-before)
	}
	for _, ttl := range []time.Duration{time.Nanosecond, 99 * time.Nanosecond, 5 * time.Millisecond} {
		c := newTTLCache[string, int](10, ttl)
		c.Add("k", 1)
		time.Sleep(ttl + time.Millisecond)
		if _, ok := c.Get("k"); ok {
			t.Errorf("ttl %s: still cached after it", ttl)
		}
	}
	c := newTTLCache[string, int](10, time.Minute)
	c.Add("k", 1)
	if v, ok := c.Get("k"); !ok || v != 1 {
		t.Errorf("ttl 1m: Get = %d, %t, want 1, true", v, ok)
	}
	if newTTLCache[string, int](0, time.Minute) != nil {
		t.Error("size 0 did not disable the cache")
	}
}
