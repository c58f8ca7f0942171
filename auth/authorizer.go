package auth

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// Policy is who the node trusts, from the configuration.
type Policy struct {
	// Trusted subjects hold every right: the node's own subjects, its
	// administrators and the coordinating nodes.
	Trusted []string
	// Submitters may create objects.
	Submitters []string
	// Nodes are the subjects of the registered member nodes by node id: a
	// node holds every level on the objects it is authoritative for
	// (API.md §7).
	Nodes map[string][]string
	// CacheSize decisions are kept (authCacheSize; 0 disables the cache) for
	// CacheTTL at most: the last safety net for a change made by another
	// instance sharing the catalog that the change log did not bring.
	CacheSize int
	CacheTTL  time.Duration
}

// Authorizer decides whether a session may do what a route requires (API.md §7),
// and remembers its decisions.
type Authorizer struct {
	policy    Policy
	decisions *ttlCache[decisionKey, decision]

	mu      sync.Mutex
	gens    map[string]uint64 // per PID: the generation of the last change of its system metadata
	changes []change          // gens' entries in the order they were made, oldest first
	counter uint64
	all     uint64 // the counter at the last InvalidateAll
}

// change is a PID's generation and when it was made. Changes older than the
// cache TTL are pruned, oldest first (a write costs the same whatever the
// rate of writes): every decision they could invalidate has expired by then.
type change struct {
	pid string
	n   uint64
	at  time.Time
}

// NewAuthorizer builds an Authorizer over a policy.
func NewAuthorizer(p Policy) *Authorizer {
	if p.CacheTTL <= 0 {
		p.CacheTTL = time.Minute
	}
	return &Authorizer{policy: p, decisions: newTTLCache[decisionKey, decision](p.CacheSize, p.CacheTTL), gens: map[string]uint64{}}
}

type decisionKey struct {
	// role is the node that answered ("mn", "cn"): with a mapping the member
	// node is an upstream's and the coordinating node the local catalog, each
	// with its own system metadata for an identifier.
	role     string
	subjects string // the session's subjects, which alone decide
	id       string // as requested: a PID or a SID
	perm     Perm
}

type decision struct {
	pid     string // what id resolved to
	gen     uint64 // the PID's generation when decided
	mark    uint64 // the Mark taken before the read it was decided from
	allowed bool
}

// Cached returns a remembered decision for the session on id at the role's node
// (the one that answered: "mn" or "cn"): the PID id resolved to, and whether
// perm was allowed. A decision made before the object changed is not returned,
// nor one the other role's node made.
func (a *Authorizer) Cached(s *adapter.Session, role, id string, perm Perm) (pid string, allowed, ok bool) {
	d, ok := a.decisions.Get(decisionKey{role, strings.Join(s.Subjects, "\x00"), id, perm})
	if !ok {
		return "", false, false
	}
	a.mu.Lock()
	// A decision kept while InvalidateAll ran (between Remember's check and
	// its Add) is older than it: its mark says so.
	stale := d.gen != a.gens[d.pid] || d.mark < a.all
	a.mu.Unlock()
	if stale {
		return "", false, false
	}
	return d.pid, d.allowed, true
}

// Mark is taken before reading the system metadata a decision is made from, and
// given to Remember with that decision.
func (a *Authorizer) Mark() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counter
}

// Remember keeps the decision made for the session on id at the role's node,
// which resolved id to pid, from system metadata read after mark (see Mark).
// Invalidate ends it whichever node's it is. A decision on a PID
// invalidated since mark is not kept: it may rest on the rights before the
// change, and would otherwise outlive the invalidation meant to end it.
func (a *Authorizer) Remember(s *adapter.Session, role, id string, perm Perm, pid string, allowed bool, mark uint64) {
	// Added under the lock: an Invalidate between reading g and the Add
	// could otherwise be pruned while the decision it ended still lives.
	a.mu.Lock()
	defer a.mu.Unlock()
	g, all := a.gens[pid], a.all
	if g > mark || all > mark {
		return
	}
	a.decisions.Add(decisionKey{role, strings.Join(s.Subjects, "\x00"), id, perm}, decision{pid, g, mark, allowed})
}

// Invalidate forgets the decisions on these PIDs (and on the SIDs that resolved
// to them): their access policy, owner or system metadata changed.
func (a *Authorizer) Invalidate(pids ...string) {
	if a.decisions == nil {
		return // no decision is kept: none to end
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	old := 0
	for ; old < len(a.changes) && now.Sub(a.changes[old].at) > a.policy.CacheTTL; old++ {
		if c := a.changes[old]; a.gens[c.pid] == c.n {
			delete(a.gens, c.pid)
		}
	}
	clear(a.changes[:old])
	a.changes = a.changes[old:]
	if c := cap(a.changes); c > 1024 && len(a.changes) < c/4 {
		a.changes = slices.Clone(a.changes) // a burst's array is not kept for the quiet that follows
	}
	for _, p := range pids {
		if p != "" {
			a.counter++
			a.gens[p] = a.counter
			a.changes = append(a.changes, change{p, a.counter, now})
		}
	}
}

// InvalidateAll forgets every decision: anything may have changed (another
// instance's changes could not be followed for a while).
func (a *Authorizer) InvalidateAll() {
	a.mu.Lock()
	a.counter++
	a.all = a.counter
	a.mu.Unlock()
	a.decisions.Purge()
}

// CachedDecisions is the number of decisions held.
func (a *Authorizer) CachedDecisions() int { return a.decisions.Len() }

// IsTrusted reports whether the session holds any trusted subject.
func (a *Authorizer) IsTrusted(s *adapter.Session) bool { return anyOf(s, a.policy.Trusted) }

// Allowed reports whether s holds perm; sm is the object for object permissions.
func (a *Authorizer) Allowed(s *adapter.Session, perm Perm, sm *adapter.SystemMetadata) bool {
	if a.IsTrusted(s) {
		return true
	}
	switch perm {
	case Public:
		return true
	case Authenticated:
		return s.Has(adapter.SubjectAuthenticatedUser)
	case Submit:
		return anyOf(s, a.policy.Submitters)
	case Trusted:
		return false
	}
	if sm == nil {
		return false
	}
	return anyOf(s, a.policy.Nodes[sm.AuthoritativeMemberNode]) || Level(s, sm) >= perm.Permission().Level()
}

// Level is the highest access level the session holds on an object: the rights
// holder holds every level, access rules grant theirs (to any of the session's
// subjects, public and the symbolic ones included).
func Level(s *adapter.Session, sm *adapter.SystemMetadata) int {
	if s.Has(sm.RightsHolder) {
		return adapter.PermChangePermission.Level()
	}
	best := 0
	if sm.AccessPolicy != nil {
		for _, rule := range sm.AccessPolicy.Allow {
			if !anyOf(s, rule.Subject) {
				continue
			}
			for _, p := range rule.Permission {
				best = max(best, p.Level())
			}
		}
	}
	return best
}

// Check is Allowed as an error: InvalidToken when the caller presented no
// credential (the seed: a missing credential is InvalidToken), NotAuthorized when
// a credentialed caller lacks the right.
func (a *Authorizer) Check(ctx context.Context, s *adapter.Session, perm Perm, sm *adapter.SystemMetadata) error {
	return a.CheckFor(ctx, s, perm, sm, "this operation")
}

// CheckFor is Check for a part of an operation that needs more than its route
// does; the error says that doing names it ("changing the rightsHolder through
// updateSystemMetadata").
func (a *Authorizer) CheckFor(ctx context.Context, s *adapter.Session, perm Perm, sm *adapter.SystemMetadata, doing string) error {
	if a.Allowed(s, perm, sm) {
		return nil
	}
	what := doing + " needs " + perm.String() + " permission"
	if sm != nil && perm.OnObject() {
		what = doing + " needs " + perm.String() + " permission on " + sm.Identifier
	}
	if s.CredentialError != "" {
		return adapter.Errorf(adapter.InvalidToken, "%s; %s", s.CredentialError, what)
	}
	if s.Subject == adapter.SubjectPublic {
		return adapter.Errorf(adapter.InvalidToken, "no credential was presented; %s", what)
	}
	return adapter.Errorf(adapter.NotAuthorized, "%s does not hold the right: %s", s.Subject, what)
}

// ReadableBy is the listObjects and log filter for s: nil (everything) for trusted
// sessions, otherwise the session's subjects.
func (a *Authorizer) ReadableBy(s *adapter.Session) []string {
	if a.IsTrusted(s) {
		return nil
	}
	return slices.Clone(s.Subjects)
}

func anyOf(s *adapter.Session, subjects []string) bool {
	for _, x := range subjects {
		if s.Has(x) {
			return true
		}
	}
	return false
}
