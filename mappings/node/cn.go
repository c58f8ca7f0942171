package node

import (
	"context"
	"errors"
	"slices"

	"github.com/d1bridge/d1bridge/adapter"
)

// Reservations is the catalog's optional record of reserved identifiers.
type Reservations interface {
	// Reserve records that subject reserved id; IdentifierNotUnique when another
	// subject holds it. Reserving again by the same subject succeeds.
	Reserve(ctx context.Context, id, subject string) error
	// Reservation is the subject holding id's reservation; NotFound when none.
	Reservation(ctx context.Context, id string) (string, error)
	// Hold gives id's reservation to subject, whoever held it.
	Hold(ctx context.Context, id, subject string) error
}

// CN is the coordinating node over the same stores as the member node: the MN's
// reads plus the CN's registry, reservation and replication operations.
type CN struct {
	*Node
	self  adapter.NodeRef   // this node, as an MN that holds objects
	nodes []adapter.NodeRef // the federation's other nodes (the node registry)
}

// NewCN serves n as a coordinating node; self is n's own MN entry, nodes the rest
// of the node registry.
func NewCN(n *Node, self adapter.NodeRef, nodes []adapter.NodeRef) *CN {
	return &CN{Node: n, self: self, nodes: nodes}
}

var (
	_ adapter.CNCore          = (*CN)(nil)
	_ adapter.CNRead          = (*CN)(nil)
	_ adapter.CNAuthorization = (*CN)(nil)
	_ adapter.CNReplication   = (*CN)(nil)
)

// Archive and UpdateSystemMetadata are the member node's, for every object
// the CN registered, whichever member node is authoritative for it.
func (c *CN) Archive(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return c.archive(ctx, id, anyNode)
}

func (c *CN) UpdateSystemMetadata(ctx context.Context, s *adapter.Session, next *adapter.SystemMetadata) error {
	return c.updateSystemMetadata(ctx, next, anyNode)
}

func anyNode(*adapter.SystemMetadata) error { return nil }

// deletedHolder holds the reservation of every identifier the CN deleted: no
// session holds it, so the identifier is never used again.
const deletedHolder = "urn:d1bridge:deleted"

// Delete is the member node's, and the deleted PID stays reserved forever
// (CNCore.delete: it "will continue to be shown as in use").
func (c *CN) Delete(ctx context.Context, s *adapter.Session, id string) (string, error) {
	pid, err := c.Node.Delete(ctx, s, id)
	if err != nil {
		return "", err
	}
	if res, ok := c.cat.(Reservations); ok {
		// Even from the subject that reserved it before the create, who could
		// otherwise create under it again.
		if err := res.Hold(context.WithoutCancel(ctx), pid, deletedHolder); err != nil {
			c.log.Error("reserving a deleted identifier; another object may take it", "pid", pid, "err", err)
		}
	}
	return pid, nil
}

func (c *CN) reservations() (Reservations, error) {
	r, ok := c.cat.(Reservations)
	if !ok {
		return nil, adapter.Errorf(adapter.NotImplemented, "this catalog does not keep identifier reservations")
	}
	return r, nil
}

func (c *CN) ReserveIdentifier(ctx context.Context, s *adapter.Session, id string) (string, error) {
	if err := adapter.CheckIdentifier(id); err != nil {
		return "", adapter.Errorf(adapter.InvalidRequest, "%v", err).WithPID(id)
	}
	res, err := c.reservations()
	if err != nil {
		return "", err
	}
	if _, err := c.cat.Lookup(ctx, id); err == nil {
		return "", adapter.Errorf(adapter.IdentifierNotUnique, "identifier %q is in use", id).WithPID(id)
	} else if !adapter.IsKind(err, adapter.NotFound) {
		return "", err
	}
	if err := res.Reserve(ctx, id, s.Subject); err != nil {
		return "", err
	}
	return id, nil
}

func (c *CN) HasReservation(ctx context.Context, s *adapter.Session, subject, id string) error {
	res, err := c.reservations()
	if err != nil {
		return err
	}
	// A reservation ends when an object takes the identifier (the spec's
	// hasReservation is false for an identifier in use), and no one holds
	// the identifier of a deleted object.
	if _, err := c.cat.Lookup(ctx, id); err == nil {
		return adapter.Errorf(adapter.NotFound, "identifier %q is in use by an object, not reserved", id).WithPID(id)
	} else if !adapter.IsKind(err, adapter.NotFound) {
		return err
	}
	holder, err := res.Reservation(ctx, id)
	if err != nil {
		return err
	}
	if holder == deletedHolder {
		return adapter.Errorf(adapter.NotFound, "identifier %q belonged to a deleted object: it is not reserved, and no object may take it", id).WithPID(id)
	}
	if holder != subject {
		return adapter.Errorf(adapter.NotAuthorized, "identifier %q is reserved by another subject", id).WithPID(id)
	}
	return nil
}

// RegisterSystemMetadata records an object that lives on a member node: its
// system metadata is kept as the MN set it (origin and authoritative node
// included), with no bytes here.
func (c *CN) RegisterSystemMetadata(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata) (string, error) {
	if err := checkNew(sm); err != nil {
		return "", err
	}
	if sm.Obsoletes != "" {
		return "", adapter.Errorf(adapter.InvalidSystemMetadata, "registered system metadata cannot obsolete another object; use setObsoletedBy").WithPID(sm.Identifier)
	}
	rec := &Record{Meta: sm.Clone()}
	now := adapter.Now()
	if rec.Meta.SerialVersion == 0 {
		rec.Meta.SerialVersion = 1
	}
	if rec.Meta.DateUploaded.IsZero() {
		rec.Meta.DateUploaded = now
	}
	rec.Meta.DateSysMetadataModified = now
	if rec.Meta.Submitter == "" {
		rec.Meta.Submitter = s.Subject
	}
	if rec.Meta.AuthoritativeMemberNode == "" {
		return "", adapter.Errorf(adapter.InvalidSystemMetadata, "authoritativeMemberNode is required: it says which node holds the object").WithPID(sm.Identifier)
	}
	if rec.Meta.OriginMemberNode == "" {
		rec.Meta.OriginMemberNode = rec.Meta.AuthoritativeMemberNode
	}
	if err := c.cat.Insert(ctx, rec); err != nil {
		return "", err
	}
	return sm.Identifier, nil
}

// setter changes one object's system metadata after checking serialVersion, as
// every CN setter does (API.md §10 rule 8).
func (c *CN) setter(ctx context.Context, pid string, serialVersion uint64, fn func(sm *adapter.SystemMetadata) error) error {
	_, err := c.cat.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error {
		if serialVersion != sm.SerialVersion {
			return adapter.Errorf(adapter.VersionMismatch, "serialVersion %d is not the current one (%d)", serialVersion, sm.SerialVersion).WithPID(sm.Identifier)
		}
		if err := fn(sm); err != nil {
			return err
		}
		touch(sm)
		return nil
	})
	return err
}

func (c *CN) SetObsoletedBy(ctx context.Context, s *adapter.Session, pid, obsoletedBy string, serialVersion uint64) error {
	if err := adapter.CheckIdentifier(obsoletedBy); err != nil {
		return adapter.Errorf(adapter.InvalidRequest, "obsoletedByPid: %v", err).WithPID(pid)
	}
	// A series id would break the chain and the resolution of its series
	// (Metacat: InvalidRequest 4942).
	if rec, err := c.cat.Lookup(ctx, obsoletedBy); err == nil && rec.Meta.Identifier != obsoletedBy {
		return adapter.Errorf(adapter.InvalidRequest, "obsoletedByPid %q is a series id; a chain links PIDs", obsoletedBy).WithPID(pid)
	}
	return c.setter(ctx, pid, serialVersion, func(sm *adapter.SystemMetadata) error {
		switch {
		case obsoletedBy == sm.Identifier:
			return adapter.Errorf(adapter.InvalidRequest, "an object cannot obsolete itself").WithPID(pid)
		case sm.ObsoletedBy != "" && sm.ObsoletedBy != obsoletedBy:
			return adapter.Errorf(adapter.InvalidRequest, "%q is already obsoleted by %q; chains do not branch", pid, sm.ObsoletedBy).WithPID(pid)
		}
		sm.ObsoletedBy = obsoletedBy
		return nil
	})
}

// SetAccessPolicy is the CN's: serialVersion is required and must be current, as
// for every CN setter. (The member node's, which it overrides, takes 0 for "not
// given" and skips the check, so a CN caller sending 0 changed the policy
// unchecked.)
func (c *CN) SetAccessPolicy(ctx context.Context, s *adapter.Session, pid string, policy *adapter.AccessPolicy, serialVersion uint64) error {
	if err := checkAccessPolicy(policy); err != nil {
		return err
	}
	return c.setter(ctx, pid, serialVersion, func(sm *adapter.SystemMetadata) error {
		sm.AccessPolicy = policy
		return nil
	})
}

func (c *CN) SetRightsHolder(ctx context.Context, s *adapter.Session, pid, subject string, serialVersion uint64) error {
	if subject == "" {
		return adapter.Errorf(adapter.InvalidRequest, "the userId part, the new rights holder, is empty").WithPID(pid)
	}
	return c.setter(ctx, pid, serialVersion, func(sm *adapter.SystemMetadata) error {
		sm.RightsHolder = subject
		return nil
	})
}

func (c *CN) SetReplicationPolicy(ctx context.Context, s *adapter.Session, pid string, p *adapter.ReplicationPolicy, serialVersion uint64) error {
	return c.setter(ctx, pid, serialVersion, func(sm *adapter.SystemMetadata) error {
		sm.ReplicationPolicy = p
		return nil
	})
}

func (c *CN) UpdateReplicationMetadata(ctx context.Context, s *adapter.Session, pid string, r *adapter.Replica, serialVersion uint64) error {
	if err := checkReplica(r.ReplicaMemberNode, r.ReplicationStatus); err != nil {
		return err
	}
	return c.setter(ctx, pid, serialVersion, func(sm *adapter.SystemMetadata) error {
		return setReplica(sm, *r)
	})
}

func (c *CN) DeleteReplicationMetadata(ctx context.Context, s *adapter.Session, pid, nodeID string, serialVersion uint64) error {
	return c.setter(ctx, pid, serialVersion, func(sm *adapter.SystemMetadata) error {
		i := slices.IndexFunc(sm.Replica, func(r adapter.Replica) bool { return r.ReplicaMemberNode == nodeID })
		if i < 0 {
			return adapter.Errorf(adapter.NotFound, "%q has no replica on %q", pid, nodeID).WithPID(pid)
		}
		sm.Replica = slices.Delete(sm.Replica, i, i+1)
		return nil
	})
}

// SetReplicationStatus is the target node's notice; it takes no serialVersion.
func (c *CN) SetReplicationStatus(ctx context.Context, s *adapter.Session, pid, nodeID, status string, failure *adapter.Exception) error {
	if err := checkReplica(nodeID, status); err != nil {
		return err
	}
	if failure != nil {
		c.log.Warn("replication failed", "pid", pid, "node", nodeID, "description", failure.Description)
	}
	_, err := c.cat.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error {
		if i := slices.IndexFunc(sm.Replica, func(r adapter.Replica) bool { return r.ReplicaMemberNode == nodeID }); i >= 0 &&
			sm.Replica[i].ReplicationStatus == status {
			return errUnchanged // a repeated notice
		}
		if err := setReplica(sm, adapter.Replica{ReplicaMemberNode: nodeID, ReplicationStatus: status, ReplicaVerified: adapter.Now()}); err != nil {
			return err
		}
		touch(sm)
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

func checkReplica(nodeID, status string) error {
	if nodeID == "" {
		return adapter.Errorf(adapter.InvalidRequest, "the replica's node is missing")
	}
	switch status {
	case adapter.ReplicaQueued, adapter.ReplicaRequested, adapter.ReplicaCompleted, adapter.ReplicaFailed, adapter.ReplicaInvalidated:
		return nil
	}
	return adapter.Errorf(adapter.InvalidRequest, "%q is not a replication status (queued, requested, completed, failed, invalidated)", status)
}

// setReplica adds or replaces r in sm's replicas. A completed replica becomes
// only invalidated: a late or repeated notice (a retried job, a stale failure)
// must not erase a replica that exists (Metacat: InvalidRequest).
func setReplica(sm *adapter.SystemMetadata, r adapter.Replica) error {
	if r.ReplicaVerified.IsZero() {
		r.ReplicaVerified = adapter.Now()
	}
	for i := range sm.Replica {
		if sm.Replica[i].ReplicaMemberNode != r.ReplicaMemberNode {
			continue
		}
		if was := sm.Replica[i].ReplicationStatus; was == adapter.ReplicaCompleted &&
			r.ReplicationStatus != adapter.ReplicaCompleted && r.ReplicationStatus != adapter.ReplicaInvalidated {
			return adapter.Errorf(adapter.InvalidRequest, "the replica of %q on %s is completed: it can only be invalidated, not made %s",
				sm.Identifier, r.ReplicaMemberNode, r.ReplicationStatus).WithPID(sm.Identifier)
		}
		sm.Replica[i] = r
		return nil
	}
	sm.Replica = append(sm.Replica, r)
	return nil
}

// IsNodeAuthorized: the target node is a registered node whose subject asks, the
// object's replication policy allows replication and does not block the node, and
// the CN asked that node for a replica (its replica entry is queued or requested).
func (c *CN) IsNodeAuthorized(ctx context.Context, s *adapter.Session, targetNodeSubject, pid string) error {
	rec, err := c.cat.Lookup(ctx, pid)
	if err != nil {
		return err
	}
	if rec.Meta.Identifier != pid {
		// The operation takes the PID of a replica; a series id is not one.
		return adapter.Errorf(adapter.NotFound, "no object has the identifier %q (%q is a series id; replicas are authorized by PID)", pid, pid).WithPID(pid)
	}
	sm := rec.Meta
	node, ok := c.nodeBySubject(targetNodeSubject)
	deny := func(why string) error {
		return adapter.Errorf(adapter.NotAuthorized, "%s may not replicate %q: %s", targetNodeSubject, pid, why).WithPID(pid)
	}
	switch {
	case !ok:
		return deny("no registered node has that subject")
	case sm.ReplicationPolicy == nil || sm.ReplicationPolicy.ReplicationAllowed == nil || !*sm.ReplicationPolicy.ReplicationAllowed:
		return deny("its replication policy does not allow replication")
	case slices.Contains(sm.ReplicationPolicy.BlockedMemberNode, node.ID):
		return deny("its replication policy blocks " + node.ID)
	}
	for _, r := range sm.Replica {
		if r.ReplicaMemberNode == node.ID && (r.ReplicationStatus == adapter.ReplicaQueued || r.ReplicationStatus == adapter.ReplicaRequested) {
			return nil
		}
	}
	return deny("no replica was requested from " + node.ID)
}

func (c *CN) nodeBySubject(subject string) (adapter.NodeRef, bool) {
	for _, n := range append([]adapter.NodeRef{c.self}, c.nodes...) {
		if slices.Contains(n.Subjects, subject) {
			return n, true
		}
	}
	return adapter.NodeRef{}, false
}

// NodeSubjects are the subjects of the registered node id (none when unknown).
func (c *CN) NodeSubjects(id string) []string {
	n, _ := c.nodeByID(id)
	return n.Subjects
}

func (c *CN) nodeByID(id string) (adapter.NodeRef, bool) {
	for _, n := range append([]adapter.NodeRef{c.self}, c.nodes...) {
		if n.ID == id {
			return n, true
		}
	}
	return adapter.NodeRef{}, false
}

// Resolve lists where the object can be read: the authoritative member node, then
// the nodes holding completed replicas, each with a direct URL.
func (c *CN) Resolve(ctx context.Context, s *adapter.Session, id string) (*adapter.ObjectLocationList, error) {
	rec, err := c.cat.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	sm := rec.Meta
	l := &adapter.ObjectLocationList{Identifier: sm.Identifier}
	add := func(nodeID string, pref int) {
		n, ok := c.nodeByID(nodeID)
		if !ok || slices.ContainsFunc(l.ObjectLocation, func(o adapter.ObjectLocation) bool { return o.NodeIdentifier == nodeID }) {
			return
		}
		if nodeID == c.self.ID && rec.BlobKey == "" {
			return // registered here, held elsewhere
		}
		p := pref
		l.ObjectLocation = append(l.ObjectLocation, adapter.ObjectLocation{
			NodeIdentifier: n.ID, BaseURL: n.BaseURL, Version: []string{"v1", "v2"},
			URL: n.BaseURL + "/v2/object/" + adapter.EscapeIdentifier(sm.Identifier), Preference: &p,
		})
	}
	add(sm.AuthoritativeMemberNode, 1)
	for _, r := range sm.Replica {
		if r.ReplicationStatus == adapter.ReplicaCompleted {
			add(r.ReplicaMemberNode, 2)
		}
	}
	if rec.BlobKey != "" {
		add(c.self.ID, 1)
	}
	if len(l.ObjectLocation) == 0 {
		return nil, adapter.Errorf(adapter.NotFound, "no registered node is known to hold %q", sm.Identifier).WithPID(sm.Identifier)
	}
	return l, nil
}
