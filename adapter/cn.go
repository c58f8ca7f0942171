package adapter

import "context"

// The coordinating node, by API group. The CN serves the same catalog as the
// member node, so reads (get, system metadata, checksum, listObjects, the log)
// are MNRead's and MNCore's methods; these are the CN's own.

type CNCore interface {
	// ReserveIdentifier reserves id for the session's subject (IdentifierNotUnique
	// when it is in use or reserved by another subject).
	ReserveIdentifier(ctx context.Context, s *Session, id string) (string, error)
	// HasReservation answers nil when subject holds the reservation of id, NotFound
	// when there is none, NotAuthorized when another subject holds it.
	HasReservation(ctx context.Context, s *Session, subject, id string) error
	// RegisterSystemMetadata records system metadata of an object held elsewhere.
	RegisterSystemMetadata(ctx context.Context, s *Session, sm *SystemMetadata) (string, error)
	// SetObsoletedBy links pid to its successor; serialVersion must be current.
	SetObsoletedBy(ctx context.Context, s *Session, pid, obsoletedBy string, serialVersion uint64) error
}

type CNRead interface {
	// Resolve lists the nodes that hold the object, the authoritative one first.
	Resolve(ctx context.Context, s *Session, id string) (*ObjectLocationList, error)
}

type CNAuthorization interface {
	SetRightsHolder(ctx context.Context, s *Session, pid, subject string, serialVersion uint64) error
}

type CNReplication interface {
	SetReplicationStatus(ctx context.Context, s *Session, pid, nodeID, status string, failure *Exception) error
	UpdateReplicationMetadata(ctx context.Context, s *Session, pid string, replica *Replica, serialVersion uint64) error
	SetReplicationPolicy(ctx context.Context, s *Session, pid string, policy *ReplicationPolicy, serialVersion uint64) error
	// IsNodeAuthorized answers nil when the node whose subject is targetNodeSubject
	// may replicate pid, NotAuthorized otherwise.
	IsNodeAuthorized(ctx context.Context, s *Session, targetNodeSubject, pid string) error
	DeleteReplicationMetadata(ctx context.Context, s *Session, pid, nodeID string, serialVersion uint64) error
}

// NodeRef is a node of the federation as this CN knows it (its node registry).
type NodeRef struct {
	ID       string
	BaseURL  string // e.g. https://mn.example.org/d1/mn
	Subjects []string
}
