package auth

import (
	"context"
	"slices"

	"github.com/d1bridge/d1bridge/adapter"
)

// Policy is who the node trusts, from the configuration.
type Policy struct {
	// Trusted subjects hold every right: the node's own subjects, its
	// administrators and the coordinating nodes.
	Trusted []string
	// Submitters may create objects.
	Submitters []string
}

// Authorizer decides whether a session may do what a route requires (API.md §7).
type Authorizer struct {
	policy Policy
}

// NewAuthorizer builds an Authorizer over a policy.
func NewAuthorizer(p Policy) *Authorizer { return &Authorizer{policy: p} }

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
	return sm != nil && Level(s, sm) >= perm.Permission().Level()
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
	if a.Allowed(s, perm, sm) {
		return nil
	}
	what := "this operation needs " + perm.String() + " permission"
	if sm != nil && perm.OnObject() {
		what = "this operation needs " + perm.String() + " permission on " + sm.Identifier
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
