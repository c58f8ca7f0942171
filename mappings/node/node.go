// Package node is a DataONE member node over two small stores: Blobs for object
// bytes and a Catalog for system metadata, chains, access policies and the event
// log. It holds the contract's semantics (API.md §10); the stores hold data.
package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/google/uuid"
)

// Node is a member node over Blobs and a Catalog.
type Node struct {
	id     string
	blobs  Blobs
	cat    Catalog
	log    *slog.Logger
	events *eventLog
	repl   *replicator
	// ids mints and registers DOIs (publish); nil without an identifier service.
	ids Identifiers
	// harvest registers a Lister store's own objects in the catalog.
	harvest *harvester
	// sources read the objects of harvest sources that are not the store.
	sources sourceReaders
}

// ownKeyPrefix begins every store key the node chooses (NewStoreKey): a
// harvest of a store that lists them never registers such a key as an
// object of its own. The catalog names it once its write commits; until then,
// on whichever instance, and for good when the write failed and its bytes
// could not be removed, or a crash came between the bytes and the commit, it
// is not an object.
const ownKeyPrefix = "d1bridge-"

// NewStoreKey is a new store key for bytes the node (or a restore) writes.
func NewStoreKey() string { return ownKeyPrefix + uuid.NewString() }

// ownKey tells a key NewStoreKey made: the prefix and a UUID, so that a
// repository's own record "d1bridge-notes" is still an object of its own.
func ownKey(key string) bool {
	rest, ok := strings.CutPrefix(key, ownKeyPrefix)
	return ok && len(rest) == 36 && uuid.Validate(rest) == nil
}

// New builds a node with identifier nodeID.
func New(nodeID string, blobs Blobs, cat Catalog, log *slog.Logger) *Node {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Node{id: nodeID, blobs: blobs, cat: cat, log: log, events: newEventLog(cat, log), repl: newReplicator(),
		harvest: newHarvester()}
}

var (
	_ adapter.MemberNode      = (*Node)(nil)
	_ adapter.MNStorage       = (*Node)(nil)
	_ adapter.MNAuthorization = (*Node)(nil)
)

// Close stops the replication jobs (a job cut short keeps its file and
// resumes at the next start), writes the queued events, and closes the store
// (when it has anything to release) and the catalog.
func (n *Node) Close() error {
	n.stopHarvest()
	n.repl.close()
	n.events.close()
	if c, ok := n.blobs.(io.Closer); ok {
		c.Close()
	}
	return n.cat.Close()
}

// --- MNCore

func (n *Node) Ping(ctx context.Context) error {
	if err := n.cat.Ping(ctx); err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "the catalog does not answer")
	}
	return nil
}

func (n *Node) LogRecords(ctx context.Context, s *adapter.Session, q adapter.LogQuery) (*adapter.Log, error) {
	if err := n.events.flush(ctx); err != nil {
		return nil, err
	}
	return n.cat.Events(ctx, q)
}

// event records a read or a failure in the log, through the group-commit
// writer: the operation has happened and, unless the catalog is shared, does
// not wait for its record's commit. A write's event goes with the write
// instead (logging).
func (n *Node) event(ctx context.Context, s *adapter.Session, pid, event string) {
	n.events.add(ctx, n.entry(s, pid, event))
}

// logging returns ctx for the catalog write that the event records: the
// catalog appends it in the write's transaction, so that an acknowledged write
// is in the log even if the process dies right after. The reads queued before
// are written first, so that the log keeps the order of what one client did.
func (n *Node) logging(ctx context.Context, s *adapter.Session, pid, event string) context.Context {
	n.events.flush(ctx) // failing only as ctx ends, which fails the write too
	return WithEvents(ctx, n.entry(s, pid, event))
}

// entry is the log entry of event on pid by s. What the client sent (its
// User-Agent may hold any byte HTTP allows) is made valid UTF-8: the log is
// text, in XML answers, dumps and PostgreSQL alike.
func (n *Node) entry(s *adapter.Session, pid, event string) adapter.LogEntry {
	e := adapter.LogEntry{Identifier: pid, IPAddress: validText(s.Address), UserAgent: validText(s.UserAgent),
		Subject: validText(s.Subject), Event: event, NodeIdentifier: n.id}
	if e.UserAgent == "" {
		e.UserAgent = "unknown"
	}
	return e
}

func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// --- MNRead

func (n *Node) Get(ctx context.Context, s *adapter.Session, id string) (*adapter.Object, error) {
	rec, err := n.view(ctx, id)
	if err != nil {
		return nil, err
	}
	body, err := n.open(ctx, rec)
	if err != nil {
		return nil, err
	}
	n.event(ctx, s, rec.Meta.Identifier, adapter.EventRead)
	return &adapter.Object{Meta: rec.Meta, Body: body}, nil
}

// GetReplica is Get for a replicating node: the same bytes, a replicate event.
func (n *Node) GetReplica(ctx context.Context, s *adapter.Session, pid string) (*adapter.Object, error) {
	rec, err := n.view(ctx, pid)
	if err != nil {
		return nil, err
	}
	body, err := n.open(ctx, rec)
	if err != nil {
		return nil, err
	}
	n.event(ctx, s, rec.Meta.Identifier, adapter.EventReplicate)
	return &adapter.Object{Meta: rec.Meta, Body: body}, nil
}

var _ adapter.MNReplicaSource = (*Node)(nil)

// view finds a record the read operations only read: shared, not copied,
// when the catalog can (RecordViewer). Get, describe and getSystemMetadata
// returned a deep copy of the system metadata on every request before.
func (n *Node) view(ctx context.Context, id string) (*Record, error) {
	if v, ok := n.cat.(RecordViewer); ok {
		return v.View(ctx, id)
	}
	return n.cat.Lookup(ctx, id)
}

func (n *Node) open(ctx context.Context, rec *Record) (io.ReadCloser, error) {
	if rec.BlobKey == "" {
		return nil, adapter.Errorf(adapter.NotFound, "%q has system metadata but no object on this node", rec.Meta.Identifier).WithPID(rec.Meta.Identifier)
	}
	body, err := n.bytes(ctx, rec.BlobKey)
	if adapter.IsKind(err, adapter.NotFound) {
		// A delete that committed since rec was read removes the bytes
		// too: the object is gone, not the store damaged.
		if _, lerr := n.cat.Lookup(ctx, rec.Meta.Identifier); adapter.IsKind(lerr, adapter.NotFound) {
			return nil, adapter.Errorf(adapter.NotFound, "%q was deleted", rec.Meta.Identifier).WithPID(rec.Meta.Identifier)
		}
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "the bytes of %q are missing from the store", rec.Meta.Identifier)
	}
	return body, err
}

func (n *Node) SystemMetadata(ctx context.Context, s *adapter.Session, id string) (*adapter.SystemMetadata, error) {
	rec, err := n.view(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Meta, nil
}

func (n *Node) Checksum(ctx context.Context, s *adapter.Session, pid, algorithm string) (*adapter.Checksum, error) {
	rec, err := n.view(ctx, pid)
	if err != nil {
		return nil, err
	}
	stored := rec.Meta.Checksum
	if algorithm == "" {
		return &stored, nil
	}
	if canon, _ := adapter.CanonicalAlgorithm(stored.Algorithm); canon == algorithm {
		return &stored, nil
	}
	if v, ok := rec.Checksums[algorithm]; ok {
		return &adapter.Checksum{Algorithm: algorithm, Value: v}, nil
	}
	sums, err := n.hashStored(ctx, rec, algorithm)
	if err != nil {
		return nil, err
	}
	v := sums[algorithm]
	if err := n.cat.SetChecksum(ctx, rec.Meta.Identifier, algorithm, v); err != nil {
		n.log.Warn("caching a computed checksum", "pid", rec.Meta.Identifier, "err", err)
	}
	return &adapter.Checksum{Algorithm: algorithm, Value: v}, nil
}

// hashStored computes checksums by streaming stored bytes.
func (n *Node) hashStored(ctx context.Context, rec *Record, algorithms ...string) (map[string]string, error) {
	body, err := n.open(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	h := adapter.NewHasher(algorithms)
	defer h.Close()
	if _, err := io.Copy(h, body); err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "reading the bytes of %q", rec.Meta.Identifier)
	}
	return h.Sums(), nil
}

func (n *Node) ListObjects(ctx context.Context, s *adapter.Session, q adapter.ListQuery) (*adapter.ObjectList, error) {
	return n.cat.List(ctx, q)
}

// SynchronizationFailed records the CN's report in the log (GMN does the same) and
// accepts it even for an identifier this node does not know.
func (n *Node) SynchronizationFailed(ctx context.Context, s *adapter.Session, report *adapter.Exception) error {
	n.log.Warn("synchronization failed", "pid", report.PID, "description", report.Description, "from", s.Subject)
	if adapter.CheckIdentifier(report.PID) == nil {
		n.event(ctx, s, report.PID, adapter.EventSynchronizationFailed)
	}
	return nil
}

// --- MNAuthorization

func (n *Node) SetAccessPolicy(ctx context.Context, s *adapter.Session, pid string, policy *adapter.AccessPolicy, serialVersion uint64) error {
	if err := checkAccessPolicy(policy); err != nil {
		return err
	}
	_, err := n.cat.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error {
		if err := n.authoritative(sm); err != nil {
			return err
		}
		if serialVersion != 0 && serialVersion != sm.SerialVersion {
			return adapter.Errorf(adapter.VersionMismatch, "serialVersion %d is not the current one (%d)", serialVersion, sm.SerialVersion).WithPID(sm.Identifier)
		}
		sm.AccessPolicy = policy
		touch(sm)
		return nil
	})
	return err
}

// checkAccessPolicy applies the schema's rules and the caps (adapter.CheckAccessPolicy).
func checkAccessPolicy(p *adapter.AccessPolicy) error {
	if err := adapter.CheckAccessPolicy(p); err != nil {
		return adapter.Errorf(adapter.InvalidRequest, "%v", err)
	}
	return nil
}

// SystemMetadataChanged accepts the CN's notice: for a replica whose
// serialVersion there is newer, the CN's copy is fetched (replicameta.go);
// this node's own objects change here first. An unknown identifier is refused.
func (n *Node) SystemMetadataChanged(ctx context.Context, s *adapter.Session, id string, serialVersion uint64, modified adapter.Time) error {
	rec, err := n.cat.Lookup(ctx, id)
	if err != nil {
		if adapter.IsKind(err, adapter.NotFound) {
			return adapter.Errorf(adapter.InvalidRequest, "no object %q on this node", id).WithPID(id)
		}
		return err
	}
	return n.refreshReplicaMeta(ctx, rec, serialVersion)
}

// touch marks a change of system metadata.
func touch(sm *adapter.SystemMetadata) {
	sm.SerialVersion++
	sm.DateSysMetadataModified = adapter.Now()
}

// --- MNStorage

func (n *Node) Stage(ctx context.Context, body io.Reader, algorithms []string) (*adapter.Upload, error) {
	key := NewStoreKey()
	h := adapter.NewHasher(algorithms)
	defer h.Close() // stops its goroutines when the upload fails
	size, err := n.blobs.Put(ctx, key, io.TeeReader(body, h))
	if err != nil {
		var ex *adapter.Exception
		if errors.As(err, &ex) {
			return nil, err
		}
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "storing the object's bytes")
	}
	return &adapter.Upload{Size: size, Checksums: h.Sums(), Ref: key}, nil
}

func (n *Node) Discard(ctx context.Context, u *adapter.Upload) error {
	if u == nil || u.Ref == "" {
		return nil
	}
	return n.blobs.Delete(context.WithoutCancel(ctx), u.Ref)
}

// verify checks the staged bytes against the size and checksum sm declares.
func (n *Node) verify(ctx context.Context, sm *adapter.SystemMetadata, u *adapter.Upload) error {
	if uint64(u.Size) != sm.Size {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the object has %d bytes, the system metadata says %d", u.Size, sm.Size).WithPID(sm.Identifier)
	}
	alg, ok := adapter.CanonicalAlgorithm(sm.Checksum.Algorithm)
	if !ok {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "checksum algorithm %q is not supported; supported: %s",
			sm.Checksum.Algorithm, strings.Join(adapter.ChecksumAlgorithms, ", ")).WithPID(sm.Identifier)
	}
	got, ok := u.Checksums[alg]
	if !ok {
		sums, err := n.hashStored(ctx, &Record{Meta: sm, BlobKey: u.Ref}, alg)
		if err != nil {
			return err
		}
		got = sums[alg]
		u.Checksums[alg] = got
	}
	if !strings.EqualFold(got, strings.TrimSpace(sm.Checksum.Value)) {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the object's %s checksum is %s, the system metadata says %s", alg, got, sm.Checksum.Value).WithPID(sm.Identifier)
	}
	return nil
}

// checkNew refuses system metadata a new object may not carry (API.md §10 rule 2).
func checkNew(sm *adapter.SystemMetadata) error {
	switch {
	case sm.ObsoletedBy != "":
		return adapter.Errorf(adapter.InvalidSystemMetadata, "a new object cannot be obsoleted already (obsoletedBy %q)", sm.ObsoletedBy).WithPID(sm.Identifier)
	case sm.Archived:
		return adapter.Errorf(adapter.InvalidSystemMetadata, "a new object cannot be archived").WithPID(sm.Identifier)
	case strings.TrimSpace(sm.RightsHolder) == "":
		return adapter.Errorf(adapter.InvalidSystemMetadata, "rightsHolder is empty").WithPID(sm.Identifier)
	case sm.SeriesID != "" && sm.SeriesID == sm.Identifier:
		return adapter.Errorf(adapter.InvalidSystemMetadata, "the seriesId must differ from the identifier").WithPID(sm.Identifier)
	}
	return sysmetaPolicy(sm)
}

// sysmetaPolicy checks the access policy inside system metadata: a bad rule
// there makes the system metadata invalid (InvalidSystemMetadata), where the
// same rule in setAccessPolicy's own document is an InvalidRequest.
func sysmetaPolicy(sm *adapter.SystemMetadata) error {
	if err := checkAccessPolicy(sm.AccessPolicy); err != nil {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "accessPolicy: %s", adapter.AsException(err).Description).WithPID(sm.Identifier)
	}
	return nil
}

// settle sets the node-controlled fields of a new object (API.md §10 rule 4).
func (n *Node) settle(s *adapter.Session, sm *adapter.SystemMetadata, u *adapter.Upload) *Record {
	c := sm.Clone()
	now := adapter.Now()
	c.Submitter = s.Subject
	c.DateUploaded, c.DateSysMetadataModified = now, now
	c.SerialVersion = 1
	c.OriginMemberNode, c.AuthoritativeMemberNode = n.id, n.id
	c.Replica = nil
	// Store the Library of Congress label (API.md §10 rule 10), not the alias a
	// peer may have sent (SHA1, sha-256): listObjects, describe and getChecksum
	// answer with what is stored. verify has accepted the algorithm.
	alg, _ := adapter.CanonicalAlgorithm(c.Checksum.Algorithm)
	c.Checksum = adapter.Checksum{Algorithm: alg, Value: strings.ToLower(strings.TrimSpace(c.Checksum.Value))}
	extra := map[string]string{}
	for a, v := range u.Checksums {
		if a != alg {
			extra[a] = v
		}
	}
	return &Record{Meta: c, BlobKey: u.Ref, Checksums: extra}
}

func (n *Node) Create(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	if sm.Obsoletes != "" {
		return nil, n.fail(ctx, u, adapter.Errorf(adapter.InvalidSystemMetadata, "a new object cannot obsolete another (obsoletes %q); use update", sm.Obsoletes).WithPID(sm.Identifier))
	}
	return n.commit(ctx, s, sm, u, adapter.EventCreate, sm.Identifier)
}

func (n *Node) Update(ctx context.Context, s *adapter.Session, id string, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	old, err := n.cat.Lookup(ctx, id)
	if err != nil {
		return nil, n.fail(ctx, u, err)
	}
	if err := n.versionable(old); err != nil {
		return nil, n.fail(ctx, u, err)
	}
	if sm.Obsoletes != "" && sm.Obsoletes != old.Meta.Identifier {
		return nil, n.fail(ctx, u, adapter.Errorf(adapter.InvalidSystemMetadata, "obsoletes is %q, but the object being updated is %q", sm.Obsoletes, old.Meta.Identifier))
	}
	sm = sm.Clone()
	sm.Obsoletes = old.Meta.Identifier
	return n.commit(ctx, s, sm, u, adapter.EventUpdate, old.Meta.Identifier)
}

// commit checks and stores a new object; the event is logged on eventPID (update
// is logged on the object it obsoletes, API.md §10 rule 16).
func (n *Node) commit(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, u *adapter.Upload, event, eventPID string) (*adapter.SystemMetadata, error) {
	if err := checkNew(sm); err != nil {
		return nil, n.fail(ctx, u, err)
	}
	if err := n.verify(ctx, sm, u); err != nil {
		return nil, n.fail(ctx, u, err)
	}
	if err := n.reservedFor(ctx, s, sm.Identifier, sm.SeriesID); err != nil {
		return nil, n.fail(ctx, u, err)
	}
	rec := n.settle(s, sm, u)
	if err := n.insert(n.logging(ctx, s, eventPID, event), rec, u); err != nil {
		return nil, err
	}
	return rec.Meta, nil
}

// insert adds rec, whose bytes u staged, to the catalog; when that fails the
// bytes go, once the catalog is known not to hold them: a commit whose answer
// was lost (the database's connection broke) may have happened, and then
// insert returns nil.
func (n *Node) insert(ctx context.Context, rec *Record, u *adapter.Upload) error {
	err := n.cat.Insert(ctx, rec)
	if err == nil {
		return nil
	}
	var refused *adapter.Exception
	if errors.As(err, &refused) {
		return n.fail(ctx, u, err)
	}
	held, herr := n.cat.HoldsBlob(context.WithoutCancel(ctx), u.Ref)
	switch {
	case herr != nil:
		n.log.Error("keeping the bytes of a create whose commit is uncertain", "pid", rec.Meta.Identifier, "ref", u.Ref, "err", err, "check", herr)
		return err
	case held:
		n.log.Warn("a create's commit answered an error but happened", "pid", rec.Meta.Identifier, "err", err)
		return nil
	}
	return n.fail(ctx, u, err)
}

// reservedFor refuses identifiers (a PID or a series id) that a subject
// other than s's reserved through the CN (reserveIdentifier: "can not be used
// by any other sessions"); the MN and the CN share the catalog.
func (n *Node) reservedFor(ctx context.Context, s *adapter.Session, ids ...string) error {
	res, ok := n.cat.(Reservations)
	if !ok {
		return nil
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		holder, err := res.Reservation(ctx, id)
		switch {
		case adapter.IsKind(err, adapter.NotFound):
		case err != nil:
			return err
		case !s.Has(holder):
			return adapter.Errorf(adapter.IdentifierNotUnique, "the identifier %q is reserved by another subject", id).WithPID(id)
		}
	}
	return nil
}

// fail discards the staged bytes of a failed create, so that it leaves no trace.
func (n *Node) fail(ctx context.Context, u *adapter.Upload, err error) error {
	if derr := n.Discard(ctx, u); derr != nil {
		n.log.Error("discarding the bytes of a failed create", "ref", u.Ref, "err", derr)
	}
	return err
}

func (n *Node) Delete(ctx context.Context, s *adapter.Session, id string) (string, error) {
	rec, err := n.cat.Lookup(ctx, id)
	if err != nil {
		return "", err
	}
	pid := rec.Meta.Identifier
	if rec, err = n.cat.Delete(n.logging(ctx, s, pid, adapter.EventDelete), pid); err != nil {
		return "", err
	}
	// Bytes a source or the catalog holds stay: only the store's are the node's.
	if rec.BlobKey != "" && inStore(rec.BlobKey) {
		if err := n.blobs.Delete(context.WithoutCancel(ctx), rec.BlobKey); err != nil {
			// The catalog no longer names the bytes; they are unreachable, not wrong.
			n.log.Error("removing the bytes of a deleted object", "pid", pid, "err", err)
		}
	}
	return pid, nil
}

// authoritative refuses a member node's write to an object another member
// node is authoritative for (a replica, or a record the CN role registered):
// it changes there, and reaches this node through the CN (GMN: InvalidRequest).
func (n *Node) authoritative(sm *adapter.SystemMetadata) error {
	if sm.AuthoritativeMemberNode != "" && sm.AuthoritativeMemberNode != n.id {
		return adapter.Errorf(adapter.InvalidRequest, "%q is held for %s, its authoritative member node: change it there", sm.Identifier, sm.AuthoritativeMemberNode).WithPID(sm.Identifier)
	}
	return nil
}

// versionable refuses a new version of old made here: of a replica (its
// authoritative node's to make), or of a dataset source's object (the source's
// next version comes with its next pass, and one made here would leave the
// dataset's package a head that is not its own, which no pass could follow).
func (n *Node) versionable(old *Record) error {
	if err := n.authoritative(old.Meta); err != nil {
		return err
	}
	if old.BlobKey != "" && !inStore(old.BlobKey) {
		return adapter.Errorf(adapter.InvalidRequest, "%q is a dataset source's object: its new versions come from the source, with the next harvest", old.Meta.Identifier).WithPID(old.Meta.Identifier)
	}
	return nil
}

// Archive is idempotent: archiving an archived object succeeds and changes
// nothing. A member node archives only what it is authoritative for.
func (n *Node) Archive(ctx context.Context, s *adapter.Session, id string) (string, error) {
	return n.archive(ctx, id, n.authoritative)
}

// archive archives id once check accepts its system metadata.
func (n *Node) archive(ctx context.Context, id string, check func(*adapter.SystemMetadata) error) (string, error) {
	sm, err := n.cat.Modify(ctx, id, func(sm *adapter.SystemMetadata) error {
		if err := check(sm); err != nil {
			return err
		}
		if sm.Archived {
			return errUnchanged
		}
		sm.Archived = true
		touch(sm)
		return nil
	})
	if errors.Is(err, errUnchanged) {
		rec, err := n.cat.Lookup(ctx, id)
		if err != nil {
			return "", err
		}
		return rec.Meta.Identifier, nil
	}
	if err != nil {
		return "", err
	}
	return sm.Identifier, nil
}

var errUnchanged = errors.New("unchanged")

// UpdateSystemMetadata applies a v2 system metadata update (API.md §10 rule 9):
// optimistic locking on dateSysMetadataModified; the bytes' facts and the
// node-controlled fields cannot change.
func (n *Node) UpdateSystemMetadata(ctx context.Context, s *adapter.Session, next *adapter.SystemMetadata) error {
	return n.updateSystemMetadata(ctx, next, n.authoritative)
}

// updateSystemMetadata applies next once check accepts the stored system
// metadata.
func (n *Node) updateSystemMetadata(ctx context.Context, next *adapter.SystemMetadata, check func(*adapter.SystemMetadata) error) error {
	if err := sysmetaPolicy(next); err != nil {
		return err
	}
	if strings.TrimSpace(next.RightsHolder) == "" {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "rightsHolder is empty").WithPID(next.Identifier)
	}
	_, err := n.cat.Modify(ctx, next.Identifier, func(sm *adapter.SystemMetadata) error {
		if err := check(sm); err != nil {
			return err
		}
		if next.DateSysMetadataModified.IsZero() || !next.DateSysMetadataModified.Equal(sm.DateSysMetadataModified.Time) {
			return adapter.Errorf(adapter.InvalidRequest, "dateSysMetadataModified %s is not the stored %s: the system metadata changed since it was read",
				next.DateSysMetadataModified.Format(), sm.DateSysMetadataModified.Format()).WithPID(sm.Identifier)
		}
		if err := immutable(sm, next); err != nil {
			return err
		}
		if sm.Archived && !next.Archived {
			return adapter.Errorf(adapter.InvalidRequest, "an archived object cannot be unarchived").WithPID(sm.Identifier)
		}
		if sm.SeriesID != "" && next.SeriesID != sm.SeriesID {
			return adapter.Errorf(adapter.InvalidSystemMetadata, "the seriesId %q cannot be changed or removed", sm.SeriesID).WithPID(sm.Identifier)
		}
		if next.SeriesID != "" && next.SeriesID != sm.SeriesID {
			return adapter.Errorf(adapter.InvalidSystemMetadata, "a seriesId cannot be added by updateSystemMetadata").WithPID(sm.Identifier)
		}
		sm.FormatID = next.FormatID
		sm.RightsHolder = next.RightsHolder
		sm.AccessPolicy = next.AccessPolicy
		sm.ReplicationPolicy = next.ReplicationPolicy
		sm.Archived = next.Archived
		sm.MediaType = next.MediaType
		sm.FileName = next.FileName
		touch(sm)
		return nil
	})
	return err
}

// immutable refuses changes to what describes the bytes or the chain.
func immutable(cur, next *adapter.SystemMetadata) error {
	bad := func(field string, a, b any) error {
		return adapter.Errorf(adapter.InvalidSystemMetadata, "%s cannot change (stored %v, got %v)", field, a, b).WithPID(cur.Identifier)
	}
	switch {
	case next.Size != cur.Size:
		return bad("size", cur.Size, next.Size)
	case !strings.EqualFold(strings.TrimSpace(next.Checksum.Value), cur.Checksum.Value):
		return bad("checksum", cur.Checksum.Value, next.Checksum.Value)
	case !sameAlgorithm(next.Checksum.Algorithm, cur.Checksum.Algorithm):
		return bad("the checksum's algorithm", cur.Checksum.Algorithm, next.Checksum.Algorithm)
	case next.Obsoletes != cur.Obsoletes:
		return bad("obsoletes", cur.Obsoletes, next.Obsoletes)
	case next.ObsoletedBy != cur.ObsoletedBy:
		return bad("obsoletedBy", cur.ObsoletedBy, next.ObsoletedBy)
	}
	return nil
}

// sameAlgorithm tells whether a and b name one checksum algorithm (md5 is MD5).
func sameAlgorithm(a, b string) bool {
	ca, okA := adapter.CanonicalAlgorithm(a)
	cb, okB := adapter.CanonicalAlgorithm(b)
	if !okA || !okB {
		return strings.EqualFold(a, b)
	}
	return ca == cb
}

// GenerateIdentifier makes a unique identifier: scheme UUID gives urn:uuid:…, after
// the fragment when one is given; scheme DOI mints a DOI at the identifier
// service (publish.go), ignoring the fragment as Metacat does.
func (n *Node) GenerateIdentifier(ctx context.Context, s *adapter.Session, scheme, fragment string) (string, error) {
	if strings.EqualFold(scheme, "DOI") {
		if n.ids == nil {
			return "", adapter.Errorf(adapter.InvalidRequest, "the DOI scheme needs an identifier service (config identifiers)")
		}
		return n.ids.Mint(ctx)
	}
	if !strings.EqualFold(scheme, "UUID") {
		return "", adapter.Errorf(adapter.InvalidRequest, "identifier scheme %q is not supported; supported: UUID, DOI", scheme)
	}
	id := "urn:uuid:" + uuid.NewString()
	if fragment != "" {
		id = fragment + uuid.NewString()
	}
	if err := adapter.CheckIdentifier(id); err != nil {
		return "", adapter.Errorf(adapter.InvalidRequest, "fragment: %v", err)
	}
	return id, nil
}

// Statistics is the catalog's optional counting behind the monitoring endpoints.
type Statistics interface {
	ObjectStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.ObjectStats, error)
	EventStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.EventStats, error)
}

func (n *Node) statistics() (Statistics, error) {
	st, ok := n.cat.(Statistics)
	if !ok {
		return nil, adapter.Errorf(adapter.NotImplemented, "this catalog keeps no statistics")
	}
	return st, nil
}

func (n *Node) ObjectStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.ObjectStats, error) {
	st, err := n.statistics()
	if err != nil {
		return nil, err
	}
	return st.ObjectStatistics(ctx, q)
}

func (n *Node) EventStatistics(ctx context.Context, q adapter.StatsQuery) (*adapter.EventStats, error) {
	st, err := n.statistics()
	if err != nil {
		return nil, err
	}
	if err := n.events.flush(ctx); err != nil {
		return nil, err
	}
	return st.EventStatistics(ctx, q)
}

var _ adapter.MNMonitor = (*Node)(nil)
