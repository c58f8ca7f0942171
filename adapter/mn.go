package adapter

import (
	"context"
	"io"
	"time"
)

// Session is the caller of one request, as authentication established it.
type Session struct {
	Subject   string   // primary subject; SubjectPublic when there is no credential
	Subjects  []string // every subject the caller acts as: primary, equivalents, groups, symbolic
	Address   string   // remote address, for the event log
	UserAgent string
	// CredentialError says why a presented credential was refused; the session is
	// then public, and operations that need more answer InvalidToken with it.
	CredentialError string
	// Token is the bearer token the caller presented, when it was valid: a
	// pass-through mapping may forward it to an upstream node that trusts the
	// same keys.
	Token string
	// Expires is when the credential the session came from expires (a token's
	// exp, a certificate's NotAfter); zero when unknown (a proxy's subject).
	Expires time.Time
}

// PublicSession is the session of a caller without credentials.
func PublicSession() *Session {
	return &Session{Subject: SubjectPublic, Subjects: []string{SubjectPublic}}
}

// Has reports whether the session acts as subject.
func (s *Session) Has(subject string) bool {
	for _, x := range s.Subjects {
		if x == subject {
			return true
		}
	}
	return false
}

// Object is an object's bytes with its system metadata. When Body also implements
// io.Seeker, ranges and conditional requests are served from it.
type Object struct {
	Meta *SystemMetadata
	Body io.ReadCloser
}

// ListQuery selects objects for listObjects (MN and CN).
type ListQuery struct {
	FromDate, ToDate Time   // fromDate <= dateSysMetadataModified < toDate; zero: open
	FormatID         string // exact
	Identifier       string // a PID gives that object, a SID every PID of its series
	ExcludeReplicas  bool   // replicaStatus=false: only objects this node is authoritative for
	NodeID           string // CN: authoritative member node
	Start, Count     int
	ReadableBy       []string // when set, only objects one of these subjects may read
}

// LogQuery selects event log records.
type LogQuery struct {
	FromDate, ToDate Time
	Event            string
	IDFilter         string // a PID prefix; unless PIDsOnly, a SID also selects every PID of its series
	PIDsOnly         bool   // v1: IDFilter is a PID prefix only (v1 has no series ids)
	Start, Count     int
	ReadableBy       []string // when set, only records of objects one of these subjects may read
}

// The member node, by API group. Every method takes ctx first and the caller's
// session; identifiers may be SIDs where API.md §10 rule 15 allows, and are resolved
// to the head PID. Authorization is checked before these are called.

type MNCore interface {
	Ping(ctx context.Context) error
	LogRecords(ctx context.Context, s *Session, q LogQuery) (*Log, error)
}

type MNRead interface {
	// Get streams the object; it records a read event.
	Get(ctx context.Context, s *Session, id string) (*Object, error)
	// SystemMetadata, like Get's Object.Meta, may be shared with the node's
	// caches: callers read it and never change it (ViewV1 copies).
	SystemMetadata(ctx context.Context, s *Session, id string) (*SystemMetadata, error)
	// Checksum answers the stored checksum when its algorithm is asked for, and
	// otherwise computes one by streaming the object.
	Checksum(ctx context.Context, s *Session, pid, algorithm string) (*Checksum, error)
	ListObjects(ctx context.Context, s *Session, q ListQuery) (*ObjectList, error)
	SynchronizationFailed(ctx context.Context, s *Session, report *Exception) error
}

// MemberNode is the required tier; the optional tiers below are asserted once when
// the engine is built, and the node document lists only the tiers present.
type MemberNode interface {
	MNCore
	MNRead
}

type MNAuthorization interface {
	// SetAccessPolicy replaces the access policy; serialVersion, when not zero, must
	// be the current one (VersionMismatch otherwise).
	SetAccessPolicy(ctx context.Context, s *Session, pid string, policy *AccessPolicy, serialVersion uint64) error
	SystemMetadataChanged(ctx context.Context, s *Session, id string, serialVersion uint64, modified Time) error
}

// Upload is an object's bytes, staged in the store while they streamed: counted
// and hashed on the way, invisible until Create or Update commits them.
type Upload struct {
	Size      int64
	Checksums map[string]string // lower-case hex digest by algorithm name (e.g. "SHA-1")
	Ref       string            // the store's reference to the staged bytes
}

type MNStorage interface {
	// Stage streams body into the store, computing the named checksums on the way.
	// The multipart parts of a create may come in any order, so the bytes can
	// arrive before the system metadata that says what to expect of them.
	Stage(ctx context.Context, body io.Reader, algorithms []string) (*Upload, error)
	// Discard removes staged bytes that will not be committed. It is safe to call
	// on an upload that Create or Update already committed or discarded.
	Discard(ctx context.Context, u *Upload) error
	// Create commits u under sm, after checking u's size and checksum against sm
	// (InvalidSystemMetadata otherwise); on any error nothing is kept. It returns
	// the system metadata as stored.
	Create(ctx context.Context, s *Session, sm *SystemMetadata, u *Upload) (*SystemMetadata, error)
	// Update creates sm from u, obsoleting the object id names; like Create, it
	// keeps nothing when it fails.
	Update(ctx context.Context, s *Session, id string, sm *SystemMetadata, u *Upload) (*SystemMetadata, error)
	Delete(ctx context.Context, s *Session, id string) (pid string, err error)
	Archive(ctx context.Context, s *Session, id string) (pid string, err error)
	// UpdateSystemMetadata replaces system metadata; sm.DateSysMetadataModified must
	// equal the stored value.
	UpdateSystemMetadata(ctx context.Context, s *Session, sm *SystemMetadata) error
	GenerateIdentifier(ctx context.Context, s *Session, scheme, fragment string) (string, error)
}

type MNReplication interface {
	Replicate(ctx context.Context, s *Session, sm *SystemMetadata, sourceNode string) error
	// GetReplica streams the object for a replicating node; it records a replicate event.
	GetReplica(ctx context.Context, s *Session, pid string) (*Object, error)
}

// MNPackage serves data packages as BagIt zips.
type MNPackage interface {
	// Package resolves the resource map id names and checks, before any byte is
	// sent, that every member exists and that canRead allows it; the package then
	// streams with Write.
	Package(ctx context.Context, s *Session, packageType, id string, canRead func(*SystemMetadata) bool) (*Package, error)
}

// Package is a data package ready to stream.
type Package struct {
	Name        string // the download's file name (…zip)
	ContentType string
	Members     int
	// Write streams the package; an error after the first byte leaves a
	// truncated stream, which the caller must abort rather than end cleanly.
	Write func(ctx context.Context, w io.Writer) error
	// Close, when set, releases what the package holds; callers call it
	// whether or not they called Write.
	Close func() error
}

// Package types served: BagIt 0.97 and 1.0, both as zip.
const (
	PackageBagIt097 = "application/bagit-097"
	PackageBagIt10  = "application/bagit-1.0"
)

// MNReplicaSource serves replicas to replicating nodes (MNRead.getReplica in
// the spec's grouping); a node can be a source without accepting replicas.
type MNReplicaSource interface {
	// GetReplica streams the object for a replicating node; it records a
	// replicate event, not a read.
	GetReplica(ctx context.Context, s *Session, pid string) (*Object, error)
}

// MNPublish mints identifiers at a third-party identifier service (DataCite)
// and registers them there.
type MNPublish interface {
	// Publish makes a new version of id whose identifier is a newly minted DOI,
	// registered at the service, and returns that identifier.
	Publish(ctx context.Context, s *Session, id string) (string, error)
	// PublishIdentifier makes the identifier id (a DOI this node registered)
	// public at the service, and returns it.
	PublishIdentifier(ctx context.Context, s *Session, id string) (string, error)
}

// AdminQuery selects the objects of a batch admin operation: the PIDs listed,
// or every object matching the filters (all of them when All is set).
type AdminQuery struct {
	PIDs             []string
	FormatID         string
	FromDate, ToDate Time // on dateSysMetadataModified, as listObjects
	All              bool
}

// MNAdmin is the v2 admin group.
type MNAdmin interface {
	// Reindex recomputes the catalog records q selects from the store (and the
	// upstream that lists it). One PID is done before it returns; a batch runs
	// in the background, reporting progress in the log and the metrics.
	Reindex(ctx context.Context, s *Session, q AdminQuery) error
	// UpdateIDMetadata sends the current metadata of the identifiers q selects
	// to the identifier service; identifiers it did not register are skipped.
	UpdateIDMetadata(ctx context.Context, s *Session, q AdminQuery) error
}
