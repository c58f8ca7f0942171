package node

import (
	"context"
	"io"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// Blobs holds object bytes under keys the node chooses. Put is atomic: a key is
// either absent or holds every byte that was put, even across a crash.
type Blobs interface {
	// Put stores r under key, durably, and returns the number of bytes stored. On
	// any error nothing is left under key.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Get opens the bytes under key; the reader also implements io.Seeker when the
	// store can seek. A missing key is an adapter NotFound exception.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ReadChunk reads r into buf until buf is full or r ends, for a Put that
// writes in chunks. An end of r is io.EOF, with the bytes read before it;
// any other error is r's own. Unlike io.ReadFull, which turns an end mid-buffer
// into io.ErrUnexpectedEOF, it keeps that error of a reader (a body cut short)
// a failure, not the end of the object.
func ReadChunk(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Record is one object's catalog entry.
type Record struct {
	Meta *adapter.SystemMetadata
	// BlobKey is where the bytes are in Blobs; empty for system metadata registered
	// without an object.
	BlobKey string
	// Checksums holds checksums computed after creation, by algorithm name, besides
	// Meta.Checksum.
	Checksums map[string]string
	// Replica marks the copy of another node's object, stored with the system
	// metadata the coordinating node sent: Insert takes its chain as given.
	Replica bool
}

// RecordViewer is the catalog's optional Lookup without the copy: the record
// it returns is shared (with its cache, say) and must not be changed. The read
// operations, which only read it, use it (Node.view).
type RecordViewer interface {
	View(ctx context.Context, id string) (*Record, error)
}

// Catalog holds system metadata, obsolescence chains, series ids, access policies
// and the event log. A write whose ctx carries events (WithEvents) appends
// them in its transaction, only if it changes something. Errors that a client should see are adapter Exceptions with
// the right kind; anything else becomes a ServiceFailure.
//
// The list's order is the order of commits: a record written (inserted, or
// modified with a new dateSysMetadataModified) with a date before the newest
// the catalog holds takes that newest date, and a modified one a date after
// the one it had. A harvester that lists from the newest date it has seen
// (as the CN does) would otherwise never see a write dated before that date
// but committed after its look. Insert sets rec.Meta's date to the one
// stored. Replica records, and writes whose ctx says so (WithGivenDates),
// keep the dates they are given.
type Catalog interface {
	// Lookup finds a record by PID, or by SID, which names the head of its series:
	// the newest member that no other object obsoletes. Unknown: NotFound.
	Lookup(ctx context.Context, id string) (*Record, error)

	// HoldsBlob reports whether a record holds the bytes under key: a store
	// that lists its objects also lists those created through this node.
	HoldsBlob(ctx context.Context, key string) (bool, error)

	// Insert adds a record, in one transaction with its chain:
	//   - the PID must not be in use as a PID or a SID (IdentifierNotUnique);
	//   - a SID must not be in use as a PID, and may be in use as a SID only when
	//     the record obsoletes a member of that series (IdentifierNotUnique);
	//   - when Meta.Obsoletes is set, that object must exist (NotFound), must not
	//     be archived or already obsoleted (InvalidRequest); it gets ObsoletedBy =
	//     the new PID, the new record's DateSysMetadataModified and serialVersion+1.
	// A Replica record is stored as given: its obsoletes and obsoletedBy may name
	// objects this node does not hold, and other members of its series may be
	// here; its PID must be new and its SID must not be in use as a PID.
	Insert(ctx context.Context, rec *Record) error

	// Modify changes one record's system metadata in a transaction: fn receives the
	// stored copy (resolved from a PID or SID), changes it or returns an error that
	// aborts. The catalog stores what fn left, and returns it.
	Modify(ctx context.Context, id string, fn func(sm *adapter.SystemMetadata) error) (*adapter.SystemMetadata, error)

	// SetChecksum records a checksum computed later, for getChecksum.
	SetChecksum(ctx context.Context, pid, algorithm, value string) error

	// Delete removes the record and returns it (so its bytes can be removed). Its
	// events stay in the log.
	Delete(ctx context.Context, pid string) (*Record, error)

	// List answers listObjects: filtered, ordered by dateSysMetadataModified
	// ascending, ties in the order the records were written, with the full
	// matching total. Paging through the list in order
	// costs the same on page 10,000 as on page 1.
	List(ctx context.Context, q adapter.ListQuery) (*adapter.ObjectList, error)

	// AddEvent appends to the event log; EntryID and DateLogged are assigned when empty.
	AddEvent(ctx context.Context, e adapter.LogEntry) error

	// Apply writes a batch in one transaction, all or nothing: its
	// documents, its records (in order, each checked as Insert checks it),
	// its kept records (an unknown PID is NotFound), and then it archives
	// the heads of the series Archive names (archived ones and unknown
	// series are left as they are). It returns, for each entry of Archive,
	// the identifier it archived, or "" when it archived nothing.
	Apply(ctx context.Context, b *Batch) ([]string, error)

	// Document reads a document a batch stored; an unknown key is NotFound.
	Document(ctx context.Context, key string) ([]byte, error)

	// Events answers getLogRecords: filtered, ordered by dateLogged then entry id,
	// with the full matching total, paged as List is.
	Events(ctx context.Context, q adapter.LogQuery) (*adapter.Log, error)

	// Ping checks that the catalog answers.
	Ping(ctx context.Context) error
	Close() error
}

// Batch is what one harvested dataset version writes.
type Batch struct {
	// Documents are small documents the node wrote (resource maps, EML), by
	// key: kept in the catalog, not in Blobs, and written with the records
	// that name them. Keys begin with DocumentKeyPrefix.
	Documents map[string][]byte
	Records   []*Record
	// Kept are registered records the version keeps, changed only in where
	// their bytes are (the same bytes under a new key) or in their
	// bookkeeping: the catalog stores each one's BlobKey (when not empty)
	// and adds its Checksums to those it holds; their system metadata stays
	// as it is.
	Kept []*Record
	// Archive names series (or identifiers) whose heads are archived.
	Archive []string
}

// DocumentKeyPrefix begins the key of every document kept in the catalog.
const DocumentKeyPrefix = "doc-"

// Lister is a store whose objects appear on their own, not through create: a
// legacy repository's API. Harvesting pages through it and registers what it
// finds in the catalog; reindex asks it about one object again.
type Lister interface {
	// List returns one page of the store's objects, and the cursor of the next
	// page ("" after the last). When since is not zero and the store can filter
	// by modification date, only objects modified at or after since are listed;
	// a store that cannot filter lists everything.
	List(ctx context.Context, since time.Time, cursor string) (page []Found, next string, err error)
	// Stat describes the object under key again; a missing key is an adapter
	// NotFound exception.
	Stat(ctx context.Context, key string) (*Found, error)
}

// Found is what a store says about one of its objects. Zero fields are unknown:
// they come from the catalog, the harvest defaults, or (size and checksum) from
// reading the bytes once.
type Found struct {
	Key      string // Blobs key: Get(ctx, Key) opens the bytes
	PID      string // the identifier to register; Key when empty
	Size     int64  // -1 when unknown
	Checksum adapter.Checksum
	// Claim, when set, names who gave Checksum when the store did not (a
	// bag's manifest, a page's JSON-LD): a claim a person may let go stale,
	// checked against the bytes, never trusted.
	Claim        string
	FormatID     string
	RightsHolder string
	FileName     string
	Modified     time.Time // when the upstream last changed it
	Uploaded     time.Time
	// Dataset is the dataset the store says the object belongs to (a
	// record's parent in a repository's API); empty when it says none.
	// GroupRecords groups a store's objects by it.
	Dataset string
	// Problem, when set, says why the store's description of this object
	// could not be read (Key may then be empty): the harvest counts it failed,
	// logs it, and goes on with the next.
	Problem error
}

// walkList calls fn with each object q selects, in listing order. It pages by
// date, from the date of the last object seen and skipping those seen at it,
// so that an object changed meanwhile (which moves to the end of the list)
// does not shift the later pages and hide one; only a date with more objects
// than a page is stepped through by offset.
func walkList(ctx context.Context, cat Catalog, q adapter.ListQuery, page int, fn func(adapter.ObjectInfo) error) error {
	q.Start, q.Count = 0, page
	seen := map[string]bool{} // the objects of date last
	for {
		l, err := cat.List(ctx, q)
		if err != nil {
			return err
		}
		last := q.FromDate
		for _, oi := range l.ObjectInfo {
			if d := oi.DateSysMetadataModified; !d.Equal(last.Time) {
				last = d
				clear(seen)
			}
			if seen[oi.Identifier] {
				continue
			}
			seen[oi.Identifier] = true
			if err := fn(oi); err != nil {
				return err
			}
		}
		switch {
		case len(l.ObjectInfo) < page:
			return nil
		case last.Equal(q.FromDate.Time):
			q.Start += len(l.ObjectInfo)
		default:
			q.FromDate, q.Start = last, 0
		}
	}
}
