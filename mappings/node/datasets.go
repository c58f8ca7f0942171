package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/metrics"
)

// DatasetSource is a repository whose holdings are datasets: a file tree
// grouped by folder (GroupFiles), an OAI-PMH endpoint, a sitemap of schema.org
// Datasets, an OCFL storage root. The harvest makes each dataset version a
// DataONE data package: its data objects, one science metadata object and one
// resource map, chained to the previous version.
type DatasetSource interface {
	// Walk calls fn with each dataset changed at or after since (zero: every
	// dataset the source holds, which lets the harvest archive the ones it no
	// longer lists), in the source's order, and stops at fn's first error,
	// which it returns. Versions of one dataset come oldest first. A source
	// that cannot filter by date walks everything.
	Walk(ctx context.Context, since time.Time, fn func(*Dataset) error) error
}

// Exhaustive is a DatasetSource that cannot filter by date (a file tree): its
// every walk lists everything, so every pass archives what it did not list.
type Exhaustive interface {
	Exhaustive() bool
}

// Reader opens bytes by key: what a harvest source that is not the node's
// store offers, for the objects it lists.
type Reader interface {
	Get(ctx context.Context, key string) (io.ReadCloser, error)
}

// Dataset is one version of a dataset, as its source describes it.
type Dataset struct {
	// ID is the dataset's stable identifier in the source (a folder's path,
	// an OAI identifier, a landing page URL, an OCFL object id). With the
	// harvest's pidPrefix before it, it is the series id of the dataset's
	// science metadata; its resource map's series is "resource_map_" + that.
	ID string
	// Sequence is the source's version number of this version (OCFL's v3 is
	// 3); 0 when the source has none. A version not newer than the one
	// registered is skipped.
	Sequence int
	// Version tells this version from the others (OCFL's "v3", an OAI
	// datestamp, a sitemap lastmod); empty: the harvest fingerprints the
	// files and metadata. A date without a time of day does not tell two
	// versions of that day apart: the harvest adds the fingerprint to it.
	Version string
	// Modified is when the source last changed the dataset: the harvest's
	// high-water mark, and the dateUploaded of what this version registers.
	Modified time.Time
	// Deleted says the source withdrew the dataset: what is registered of it
	// is archived, never deleted.
	Deleted bool
	// Files are the dataset's files; FileName is each one's path within the
	// dataset ("data/table.csv"). Sidecar metadata among them (EML,
	// DataCite, RO-Crate, BagIt tag files at the dataset's root) is found by
	// name and content. A file with a Problem fails a version to register;
	// the next pass retries it.
	Files []Found
	// Metadata is a science metadata document the source fetched itself (an
	// OAI record's metadata, a page's JSON-LD); nil when it has none.
	Metadata *Document
	// Facts are what the source's records say of the dataset; sidecars and
	// Metadata fill what they leave empty.
	Facts datapackage.Facts
	// Problem, when set, says why the source could not describe the dataset:
	// the harvest counts it failed and goes on.
	Problem error
	// Page is where the source read the dataset when that is not its ID (a
	// sitemap's page, which names a DOI): a page that no longer describes a
	// dataset (ErrNotADataset) is known by it.
	Page string
}

// ErrNotADataset is the Problem of a page that describes no dataset (Page;
// ID may be the page too): an "about" page, or the page of a dataset whose
// description is missing for a while. A dataset registered from that page
// stays as it is, counted failed; a page that never described one is passed
// over. Only a page gone from the source withdraws its dataset.
var ErrNotADataset = errors.New("the page describes no dataset")

// Document is a metadata document: its bytes, or the object holding them.
type Document struct {
	// FormatID is its DataONE format; empty: sniffed from the bytes.
	FormatID string
	// Body holds the bytes when the source read them; the harvest stores them
	// once. Otherwise Found is the object holding them, registered in place.
	Body  []byte
	Found *Found
}

// DatasetOptions are how a DatasetSource is harvested.
type DatasetOptions struct {
	// Name is the source's name, for logs and metrics. When the catalog has
	// Leases, passes run under the lease "datasets:"+Name, one instance at a
	// time.
	Name string
	// Interval is the pause between passes; 0 runs no background pass. With
	// Leases, it is the pause between the passes of all the instances
	// sharing the catalog.
	Interval time.Duration
	// FullInterval is how often a pass walks everything the source holds,
	// whatever changed, so that what the source no longer lists is
	// archived (a walk of what changed cannot show it); 0: every 24 hours.
	// Sources that always walk everything (Exhaustive) need none.
	FullInterval time.Duration
	// PIDPrefix is put before every dataset's ID to make its identifiers.
	PIDPrefix string
	// RightsHolder, Submitter and Readers are every harvested object's; empty
	// rights holder: the node; no readers: only the rights holder reads.
	RightsHolder, Submitter string
	Readers                 []string
	// ChecksumAlgorithm is computed when the source gives no checksum.
	ChecksumAlgorithm string
	// Facts fill what neither the source nor its documents say of a dataset
	// (a publisher, a contact) in generated EML.
	Facts datapackage.Facts
	// ObjectURL is the URL of an object by pid, for generated EML; nil: none.
	ObjectURL func(pid string) string
	// Reader reads the bytes of the objects the source lists, when the
	// node's store does not hold them: their keys are kept behind
	// "@<Name>/", and reads of those go to Reader.
	Reader  Reader
	Metrics *metrics.Metrics
	// Holder names this instance in the lease; empty: the node's (host,
	// process id and a random part).
	Holder string
	// LeaseTTL is how long the lease holds without a renewal: an instance
	// that dies in a pass is replaced after about that long. 0: 30s.
	LeaseTTL time.Duration
}

// sourceKeyMark begins the keys of objects a source holds (not the node's
// store): "@<source>/<the source's key>". The node's own keys (UUIDs,
// doc-<digest>) never begin with it.
const sourceKeyMark = "@"

// sourceReaders are the readers of sources that hold their objects' bytes.
type sourceReaders struct {
	sync.RWMutex
	readers map[string]Reader // by "@<name>/"
}

// bytes opens the bytes under key: a document from the catalog, from the
// source whose mark begins it, or from the node's store.
func (n *Node) bytes(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, DocumentKeyPrefix) {
		b, err := n.cat.Document(ctx, key)
		if err != nil {
			return nil, err
		}
		return document{bytes.NewReader(b)}, nil
	}
	if strings.HasPrefix(key, sourceKeyMark) {
		if i := strings.IndexByte(key, '/'); i > 0 {
			n.sources.RLock()
			r, ok := n.sources.readers[key[:i+1]]
			n.sources.RUnlock()
			if ok {
				return r.Get(ctx, key[i+1:])
			}
		}
	}
	return n.blobs.Get(ctx, key)
}

// inStore tells whether key names bytes of the node's store, rather than a
// document of the catalog or a file a dataset source holds.
func inStore(key string) bool {
	return !strings.HasPrefix(key, DocumentKeyPrefix) && !strings.HasPrefix(key, sourceKeyMark)
}

// document reads a document from memory; it seeks, so Range works.
type document struct{ *bytes.Reader }

func (document) Close() error { return nil }

// keyed puts a source's mark before the keys it lists.
type keyed struct {
	DatasetSource
	mark string
}

func (k keyed) Walk(ctx context.Context, since time.Time, fn func(*Dataset) error) error {
	return k.DatasetSource.Walk(ctx, since, func(d *Dataset) error {
		for i := range d.Files {
			d.Files[i].Key = k.mark + d.Files[i].Key
		}
		if d.Metadata != nil && d.Metadata.Found != nil {
			f := *d.Metadata.Found
			f.Key = k.mark + f.Key
			d.Metadata.Found = &f
		}
		return fn(d)
	})
}

func (k keyed) Exhaustive() bool {
	x, ok := k.DatasetSource.(Exhaustive)
	return ok && x.Exhaustive()
}
