package adapter

import (
	"fmt"
	"strings"
	"unicode"
)

// Caps on the policies a client may send. The schema sets no bound, but every
// authorization check reads the whole access policy, the catalog keeps one row
// per subject, and a DataONE policy in use has a handful of rules: these bounds
// are far above any real policy and keep one object from costing the node
// unbounded storage and time (about 16,400 rules used to fail with a SQL error).
const (
	// MaxAccessRules is the most allow rules an access policy may hold.
	MaxAccessRules = 1000
	// MaxAccessSubjects is the most subjects an access policy may name, over all
	// its rules together (one rule may hold them all).
	MaxAccessSubjects = 20000
	// MaxReplicationNodes is the most preferredMemberNode, and separately the most
	// blockedMemberNode, entries of a replication policy (DataONE has about 100
	// member nodes).
	MaxReplicationNodes = 1000
)

// CheckSubject applies the schema's rule for a subject (NonEmptyString): not
// empty, not only whitespace; control characters are refused too.
func CheckSubject(s string) error {
	if strings.TrimFunc(s, unicode.IsSpace) == "" {
		return fmt.Errorf("is empty")
	}
	if i := strings.IndexFunc(s, IsControl); i >= 0 {
		return fmt.Errorf("%q contains a control character", s)
	}
	return nil
}

// CheckAccessPolicy checks an access policy as the schema says (every rule names
// at least one non-empty subject and one permission of the enumeration) and
// within the caps. The error describes the fault; the caller gives it its kind.
func CheckAccessPolicy(p *AccessPolicy) error {
	if p == nil {
		return nil
	}
	if len(p.Allow) > MaxAccessRules {
		return fmt.Errorf("the access policy has %d rules; at most %d are allowed", len(p.Allow), MaxAccessRules)
	}
	subjects := 0
	for i, rule := range p.Allow {
		if len(rule.Subject) == 0 || len(rule.Permission) == 0 {
			return fmt.Errorf("access rule %d needs at least one subject and one permission", i+1)
		}
		for j, s := range rule.Subject {
			if err := CheckSubject(s); err != nil {
				return fmt.Errorf("access rule %d: subject %d %v", i+1, j+1, err)
			}
		}
		for _, perm := range rule.Permission {
			if perm.Level() == 0 {
				return fmt.Errorf("access rule %d: %q is not a permission (read, write, changePermission)", i+1, perm)
			}
		}
		if subjects += len(rule.Subject); subjects > MaxAccessSubjects {
			return fmt.Errorf("the access policy names more than %d subjects, the most allowed", MaxAccessSubjects)
		}
	}
	return nil
}

// CheckReplicationPolicy checks a replication policy as the schema says (every
// preferred and blocked node a non-empty NodeReference) and within the cap.
func CheckReplicationPolicy(p *ReplicationPolicy) error {
	if p == nil {
		return nil
	}
	if p.NumberReplicas != nil && *p.NumberReplicas < 0 {
		return fmt.Errorf("numberReplicas is %d; it may not be negative", *p.NumberReplicas)
	}
	for _, l := range []struct {
		name  string
		nodes []string
	}{{"preferredMemberNode", p.PreferredMemberNode}, {"blockedMemberNode", p.BlockedMemberNode}} {
		if len(l.nodes) > MaxReplicationNodes {
			return fmt.Errorf("the replication policy has %d %s entries; at most %d are allowed", len(l.nodes), l.name, MaxReplicationNodes)
		}
		for i, n := range l.nodes {
			if err := CheckSubject(n); err != nil {
				return fmt.Errorf("%s %d %v", l.name, i+1, err)
			}
		}
	}
	return nil
}

// CheckSystemMetadata checks what the schema says of system metadata beyond its
// elements: identifiers (identifier, seriesId, obsoletes, obsoletedBy) are
// identifiers, subjects and node references are not empty, and the policies
// pass CheckAccessPolicy and CheckReplicationPolicy. A control character in an
// identifier is InvalidRequest; any other fault is InvalidSystemMetadata.
func CheckSystemMetadata(sm *SystemMetadata) error {
	for _, id := range []struct{ name, v string }{
		{"identifier", sm.Identifier}, {"seriesId", sm.SeriesID}, {"obsoletes", sm.Obsoletes}, {"obsoletedBy", sm.ObsoletedBy},
	} {
		if id.v == "" && id.name != "identifier" {
			continue
		}
		if err := CheckIdentifier(id.v); err != nil {
			k := InvalidSystemMetadata
			if strings.IndexFunc(id.v, IsControl) >= 0 {
				k = InvalidRequest
			}
			return Errorf(k, "%s: %v", id.name, err).WithPID(sm.Identifier)
		}
	}
	for _, s := range []struct{ name, v string }{
		{"rightsHolder", sm.RightsHolder}, {"submitter", sm.Submitter},
		{"originMemberNode", sm.OriginMemberNode}, {"authoritativeMemberNode", sm.AuthoritativeMemberNode},
	} {
		if s.v == "" && s.name != "rightsHolder" {
			continue // optional, and absent
		}
		if err := CheckSubject(s.v); err != nil {
			return Errorf(InvalidSystemMetadata, "%s %v", s.name, err).WithPID(sm.Identifier)
		}
	}
	if err := CheckAccessPolicy(sm.AccessPolicy); err != nil {
		return Errorf(InvalidSystemMetadata, "accessPolicy: %v", err).WithPID(sm.Identifier)
	}
	if err := CheckReplicationPolicy(sm.ReplicationPolicy); err != nil {
		return Errorf(InvalidSystemMetadata, "replicationPolicy: %v", err).WithPID(sm.Identifier)
	}
	for i, r := range sm.Replica {
		if err := CheckSubject(r.ReplicaMemberNode); err != nil {
			return Errorf(InvalidSystemMetadata, "replica %d: replicaMemberNode %v", i+1, err).WithPID(sm.Identifier)
		}
	}
	return nil
}
