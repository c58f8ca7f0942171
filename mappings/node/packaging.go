package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// How one dataset version becomes a DataONE data package (the "mutable
// content member node" guidance). With D the dataset's id (the harvest's
// prefix and the source's ID) and n the harvest's version number:
//
//	science metadata  series D                       pid D@vn
//	resource map      series resource_map_D          pid resource_map_D@vn
//	data file p       series D/p                     pid D@vn/p
//
// (whitespace and control characters of D and p percent-encoded: pidSafe).
//
// A dataset its source lists again after its withdrawal is registered as a
// new dataset, D~2 (then D~3, ...): archived objects can be neither updated
// nor followed in their series, so the revived one cannot continue D.
//
// A version registers only what changed: a file whose bytes are the same
// keeps its pid (so it may still read D@v1/p in version 3); a changed one gets
// a new pid that obsoletes the old; the resource map and the science metadata
// get a new version when what they say changes. Nothing is ever deleted: a
// file the dataset no longer has, or a dataset the source withdrew, is
// archived. A version is written in one catalog transaction (Catalog.Apply):
// its records, the documents d1bridge wrote for it, the new keys (the same
// bytes moved) and bookkeeping of what it keeps, and what it archives, so
// a pass cut short leaves each dataset at one version or the next, never
// between.

const outcomeArchived = "archived"

// maxMetadataDocument bounds a metadata document read into memory.
const maxMetadataDocument = 16 << 20

// sniffBytes is how much of a candidate sidecar is read to tell its format.
const sniffBytes = 64 << 10

// maxManifest bounds a BagIt manifest read into memory (about 500,000 files).
const maxManifest = 64 << 20

// applyBatches writes the batches of several datasets in one transaction,
// and logs their events; it returns how many objects each registered or
// archived.
func (n *Node) applyBatches(ctx context.Context, bs []*Batch) ([]int, error) {
	var all Batch
	for _, b := range bs {
		if len(b.Documents) > 0 && all.Documents == nil {
			all.Documents = map[string][]byte{}
		}
		maps.Copy(all.Documents, b.Documents)
		all.Records = append(all.Records, b.Records...)
		all.Kept = append(all.Kept, b.Kept...)
		all.Archive = append(all.Archive, b.Archive...)
	}
	sess := n.harvestSession()
	var created []adapter.LogEntry
	for _, rec := range all.Records {
		created = append(created, n.entry(sess, rec.Meta.Identifier, adapter.EventCreate))
	}
	archived, err := n.cat.Apply(WithEvents(ctx, created...), &all)
	if err != nil {
		return nil, err
	}
	for _, pid := range archived {
		if pid != "" {
			n.event(ctx, sess, pid, adapter.EventUpdate)
		}
	}
	// Each batch's count: its records and the heads it archived (archived
	// holds an entry per Archive entry, in order).
	counts := make([]int, len(bs))
	at := 0
	for i, b := range bs {
		counts[i] = len(b.Records)
		for _, pid := range archived[at : at+len(b.Archive)] {
			if pid != "" {
				counts[i]++
			}
		}
		at += len(b.Archive)
	}
	return counts, nil
}

// packager registers one version of one dataset.
type packager struct {
	n       *Node
	o       DatasetOptions
	d       *Dataset
	id      string          // the dataset's id with the prefix: its metadata's series
	head    *Record         // the resource map's head; nil for a new dataset
	old     []*Record       // the members of head's package
	oldPIDs map[string]bool // and their pids
	ordinal int             // n of this version's "@vn"
	when    time.Time
	batch   Batch
}

func (p *packager) register(ctx context.Context, version string) error {
	p.ordinal = 1
	if p.head != nil {
		last, _ := strconv.Atoi(p.head.Checksums[datasetOrdinalKey])
		p.ordinal = last + 1
		old, err := p.n.packageMembers(ctx, p.head)
		if err != nil {
			return err
		}
		p.old, p.oldPIDs = old, map[string]bool{}
		for _, rec := range old {
			p.oldPIDs[rec.Meta.Identifier] = true
		}
	}
	p.when = p.d.Modified
	if p.when.IsZero() {
		p.when = time.Now()
	}
	data, meta, facts, err := p.classify(ctx)
	if err != nil {
		return err
	}
	// Data first, so that the metadata and the map name registered objects.
	slices.SortFunc(data, func(a, b Found) int { return strings.Compare(a.FileName, b.FileName) })
	members := make([]*Record, 0, len(data))
	for i := range data {
		rec, err := p.dataObject(ctx, &data[i])
		if err != nil {
			return err
		}
		members = append(members, rec)
	}
	metaRec, err := p.metadata(ctx, meta, facts, data, members)
	if err != nil {
		return err
	}
	if err := p.resourceMap(ctx, metaRec, members, version); err != nil {
		return err
	}
	return p.archiveRemoved(ctx, members)
}

// classify splits the dataset's files into data and sidecars: it picks the
// science metadata (the source's, else a sidecar the CN indexes) and gathers
// the facts every document states, the source's first. BagIt tag files are
// not data, and a bag's manifest gives its payload's checksums.
func (p *packager) classify(ctx context.Context) (data []Found, meta *Document, facts datapackage.Facts, err error) {
	facts = p.d.Facts
	if m := p.d.Metadata; m != nil {
		if m.FormatID == "" && m.Body != nil {
			m.FormatID = datapackage.Sniff("", m.Body)
		}
		if datapackage.Indexed(m.FormatID) {
			meta = m
		}
		if m.Body != nil {
			if f, err := datapackage.ReadFacts(m.FormatID, m.Body); err == nil {
				facts = mergeFacts(facts, f)
			}
		}
	}
	manifests := map[string]map[string]string{} // algorithm -> path -> digest
	bag := false
	for _, f := range p.d.Files {
		if f.Problem != nil {
			// Packaged as far as it is known (named by its URL), it would
			// take another series than the one it has.
			return nil, nil, facts, adapter.Wrap(adapter.ServiceFailure, f.Problem, "the source's description of the file %q cannot be read", cmp.Or(f.FileName, f.Key))
		}
		if !datapackage.Sidecar(f.FileName) {
			data = append(data, f)
			continue
		}
		name := path.Base(f.FileName)
		switch {
		case name == "bagit.txt":
			bag = true
			continue
		case strings.HasPrefix(name, "tagmanifest-"):
			continue
		case strings.HasPrefix(name, "manifest-"):
			body, err := p.read(ctx, f.Key, maxManifest)
			if err != nil {
				return nil, nil, facts, err
			}
			alg := strings.TrimSuffix(strings.TrimPrefix(name, "manifest-"), ".txt")
			if m, err := datapackage.BagManifest(alg, body); err == nil {
				manifests[alg] = m
			}
			continue
		}
		// Its first bytes tell a metadata document from data (a large JSON
		// or XML data file is read no further).
		head, err := p.readHead(ctx, f.Key, sniffBytes)
		if err != nil {
			return nil, nil, facts, err
		}
		format := datapackage.Sniff(name, head)
		if format == "" {
			data = append(data, f) // an XML or JSON file that is data
			continue
		}
		body, err := p.read(ctx, f.Key, maxMetadataDocument)
		if err != nil {
			return nil, nil, facts, err
		}
		if got, err := datapackage.ReadFacts(format, body); err == nil {
			facts = mergeFacts(facts, got)
		}
		if meta == nil && datapackage.Indexed(format) {
			found := f
			meta = &Document{FormatID: format, Found: &found}
		}
	}
	if bag {
		data = bagPayload(data, manifests)
	}
	facts = mergeFacts(facts, p.o.Facts)
	return data, meta, facts, nil
}

// bagPayload keeps a bag's payload (under data/), with the checksums its
// manifests give where the source gave none, to be checked against the bytes.
func bagPayload(files []Found, manifests map[string]map[string]string) []Found {
	var out []Found
	for _, f := range files {
		if !strings.HasPrefix(f.FileName, "data/") {
			continue
		}
		if _, _, ok := givenChecksum(&f); !ok {
			for _, alg := range []string{"sha512", "sha256", "sha1", "md5"} {
				if v, ok := manifests[alg][f.FileName]; ok {
					if label, ok := adapter.CanonicalAlgorithm(alg); ok {
						f.Checksum = adapter.Checksum{Algorithm: label, Value: v}
						f.Claim = "the bag's manifest-" + alg + ".txt gives"
						break
					}
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// mergeFacts fills what a leaves empty from b.
func mergeFacts(a, b datapackage.Facts) datapackage.Facts {
	a.Title = cmp.Or(a.Title, b.Title)
	a.Abstract = cmp.Or(a.Abstract, b.Abstract)
	if len(a.Creators) == 0 {
		a.Creators = b.Creators
	}
	if a.Contact == nil {
		a.Contact = b.Contact
	}
	a.Publisher = cmp.Or(a.Publisher, b.Publisher)
	if len(a.Keywords) == 0 {
		a.Keywords = b.Keywords
	}
	a.License = cmp.Or(a.License, b.License)
	a.LicenseURL = cmp.Or(a.LicenseURL, b.LicenseURL)
	if a.Published.IsZero() {
		a.Published = b.Published
	}
	if a.Modified.IsZero() {
		a.Modified = b.Modified
	}
	a.Identifier = cmp.Or(a.Identifier, b.Identifier)
	a.Landing = cmp.Or(a.Landing, b.Landing)
	return a
}

// read reads at most limit bytes under key.
func (p *packager) read(ctx context.Context, key string, limit int64) ([]byte, error) {
	body, err := p.n.bytes(ctx, key)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, body}, limit+1))
	if err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "reading %q", key)
	}
	if int64(len(b)) > limit {
		return nil, adapter.Errorf(adapter.ServiceFailure, "%q is larger than %d bytes, too large for a metadata document", key, limit)
	}
	return b, nil
}

// readHead reads at most limit bytes under key, however many it holds.
func (p *packager) readHead(ctx context.Context, key string, limit int64) ([]byte, error) {
	body, err := p.n.bytes(ctx, key)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(ctxReader{ctx, body}, limit))
	if err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "reading %q", key)
	}
	return b, nil
}

// dataObject registers a data file, or keeps its registered pid when its
// bytes are the same.
func (p *packager) dataObject(ctx context.Context, f *Found) (*Record, error) {
	base := p.id + "/" + pidSafe(f.FileName)
	if err := adapter.CheckIdentifier(base); err != nil {
		return nil, adapter.Errorf(adapter.InvalidRequest, "the file %q cannot be named in DataONE: %v", f.FileName, err)
	}
	_, g, head, err := p.n.currentGeneration(ctx, base)
	if err != nil {
		return nil, err
	}
	if err := p.owns(base, head); err != nil {
		return nil, err
	}
	if head != nil && !head.Meta.Archived && head.BlobKey == f.Key && described(f) && !upstreamChanged(head, f) {
		return head, nil
	}
	alg, _, _ := givenChecksum(f)
	size, sum, _, err := p.n.harvestFacts(ctx, f, cmp.Or(alg, p.o.ChecksumAlgorithm), nil)
	if err != nil {
		return nil, err
	}
	if head != nil && !head.Meta.Archived && head.Meta.Size == uint64(size) && sameChecksum(head, sum.Algorithm, sum.Value) {
		return p.keep(head, f), nil // moved, touched or undescribed, the same bytes: the same object
	}
	series, head := continued(base, g, head)
	sm := p.sysmeta(versionPID(p.id, p.ordinal)+"/"+pidSafe(f.FileName), series, cmp.Or(f.FormatID, datapackage.FormatForName(f.FileName)), uint64(size), sum, head)
	sm.FileName = path.Base(f.FileName)
	rec := &Record{Meta: sm, BlobKey: f.Key}
	if m := modifiedMark(f.Modified); m != "" {
		rec.Checksums = map[string]string{upstreamModifiedKey: m}
	}
	return rec, p.insert(ctx, rec)
}

// keep keeps head, whose bytes f holds, in the version: read from f's key
// from now on (the old one may be gone: a URL now https, a record uploaded
// again, a renamed upstream), and with f's modification time noted.
func (p *packager) keep(head *Record, f *Found) *Record {
	kept := &Record{Meta: head.Meta, BlobKey: f.Key, Checksums: map[string]string{}}
	if m := modifiedMark(f.Modified); m != head.Checksums[upstreamModifiedKey] {
		kept.Checksums[upstreamModifiedKey] = m
	}
	if kept.BlobKey != head.BlobKey || len(kept.Checksums) > 0 {
		p.batch.Kept = append(p.batch.Kept, kept)
	}
	return head
}

// described tells whether the source says anything of f that shows a change
// (a modification time, a size, a checksum): without any, only its bytes do,
// and they are read again when its dataset changes.
func described(f *Found) bool {
	_, _, given := givenChecksum(f)
	return !f.Modified.IsZero() || f.knownSize() || given
}

// sysmeta is the system metadata of a new object of the package; it obsoletes
// head when there is one.
func (p *packager) sysmeta(pid, series, format string, size uint64, sum adapter.Checksum, head *Record) *adapter.SystemMetadata {
	uploaded := p.when
	if head != nil && !uploaded.After(head.Meta.DateUploaded.Time) {
		uploaded = head.Meta.DateUploaded.Time.Add(time.Millisecond)
	}
	sm := &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: pid, SeriesID: series, FormatID: format, Size: size, Checksum: sum,
		Submitter: p.o.Submitter, RightsHolder: p.o.RightsHolder, AccessPolicy: readPolicy(p.o.Readers),
		DateUploaded: adapter.NewTime(uploaded), DateSysMetadataModified: adapter.Now(),
		OriginMemberNode: p.n.id, AuthoritativeMemberNode: p.n.id,
	}
	if head != nil && !head.Meta.Archived && head.Meta.ObsoletedBy == "" {
		sm.Obsoletes = head.Meta.Identifier
	}
	return sm
}

// insert adds rec to the version's batch.
// owns refuses to go on with a series whose head is not in this dataset's
// package: the ids of two datasets that nest ("a" and "a/b") name the file
// b/c.csv of one and c.csv of the other alike, and going on would make one
// package's object obsolete the other's.
func (p *packager) owns(series string, head *Record) error {
	if head == nil || head.Meta.Archived || p.oldPIDs[head.Meta.Identifier] {
		return nil
	}
	return adapter.Errorf(adapter.InvalidRequest, "the series %q is another dataset's (its object %q is not in the package of %q): "+
		"the ids of two datasets nest, and only the first registered can be", series, head.Meta.Identifier, p.d.ID)
}

func (p *packager) insert(_ context.Context, rec *Record) error {
	p.batch.Records = append(p.batch.Records, rec)
	return nil
}

// metadata registers the package's science metadata: the repository's own
// document in place, or one stored once, or EML written from the facts.
func (p *packager) metadata(ctx context.Context, doc *Document, facts datapackage.Facts, data []Found, members []*Record) (*Record, error) {
	_, g, head, err := p.n.currentGeneration(ctx, p.id)
	if err != nil {
		return nil, err
	}
	if err := p.owns(p.id, head); err != nil {
		return nil, err
	}
	if doc != nil && doc.Found != nil {
		f := doc.Found
		if head != nil && !head.Meta.Archived && head.BlobKey == f.Key && described(f) && !upstreamChanged(head, f) {
			return head, nil
		}
		alg, _, _ := givenChecksum(f)
		size, sum, _, err := p.n.harvestFacts(ctx, f, cmp.Or(alg, p.o.ChecksumAlgorithm), nil)
		if err != nil {
			return nil, err
		}
		if head != nil && !head.Meta.Archived && head.Meta.Size == uint64(size) && sameChecksum(head, sum.Algorithm, sum.Value) {
			return p.keep(head, f), nil
		}
		series, head := continued(p.id, g, head)
		sm := p.sysmeta(versionPID(p.id, p.ordinal), series, doc.FormatID, uint64(size), sum, head)
		sm.FileName = path.Base(f.FileName)
		rec := &Record{Meta: sm, BlobKey: f.Key}
		if m := modifiedMark(f.Modified); m != "" {
			rec.Checksums = map[string]string{upstreamModifiedKey: m}
		}
		return rec, p.insert(ctx, rec)
	}
	write := func(pid string) []byte { return doc.Body }
	format, name := "", "metadata.xml"
	if doc != nil {
		format = doc.FormatID
		if format == datapackage.FormatSchemaOrg {
			name = "metadata.jsonld"
		}
	} else {
		format, name = datapackage.FormatEML220, "eml.xml"
		entities := make([]datapackage.Entity, len(members))
		for i, m := range members {
			e := datapackage.Entity{PID: m.Meta.Identifier, Name: data[i].FileName,
				Size: int64(m.Meta.Size), Checksum: m.Meta.Checksum, FormatID: m.Meta.FormatID}
			if p.o.ObjectURL != nil {
				e.URL = p.o.ObjectURL(m.Meta.Identifier)
			}
			entities[i] = e
		}
		write = func(pid string) []byte { return datapackage.EML(pid, facts, entities) }
	}
	// A document the same as the head's, written for the head's pid, is the
	// head: documents are deterministic.
	if head != nil && !head.Meta.Archived && head.Meta.FormatID == format {
		if sumOf(write(head.Meta.Identifier)) == head.Meta.Checksum.Value && head.Meta.Checksum.Algorithm == "SHA-256" {
			return head, nil
		}
	}
	pid := versionPID(p.id, p.ordinal)
	body := write(pid)
	series, head := continued(p.id, g, head)
	rec := p.stored(pid, series, format, body, head)
	rec.Meta.FileName = name
	if doc == nil {
		rec.Checksums[generatedKey] = "eml"
	}
	return rec, p.insert(ctx, rec)
}

// stored keeps a document the harvest wrote (or read from the source's
// records) in the catalog, once: under a key made of its digest, so writing
// it again changes nothing. It returns the record to insert.
func (p *packager) stored(pid, series, format string, body []byte, head *Record) *Record {
	sum := sumOf(body)
	key := DocumentKeyPrefix + sum[:40]
	if p.batch.Documents == nil {
		p.batch.Documents = map[string][]byte{}
	}
	p.batch.Documents[key] = body
	sm := p.sysmeta(pid, series, format, uint64(len(body)), adapter.Checksum{Algorithm: "SHA-256", Value: sum}, head)
	return &Record{Meta: sm, BlobKey: key, Checksums: map[string]string{}}
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// resourceMap registers the package's resource map, with this version's
// bookkeeping; when its members are those of the head, the head stays and
// takes the bookkeeping.
func (p *packager) resourceMap(ctx context.Context, meta *Record, members []*Record, version string) error {
	pids := make([]string, len(members))
	for i, m := range members {
		pids[i] = m.Meta.Identifier
	}
	digest := sumOf([]byte(meta.Meta.Identifier + "\n" + strings.Join(pids, "\n")))
	books := map[string]string{
		datasetSourceKey: p.o.Name, datasetIDKey: datasetPID(p.o, p.d.ID), datasetVersionKey: version, datasetMembersKey: digest,
		datasetOrdinalKey: strconv.Itoa(p.ordinal), datasetSequenceKey: strconv.Itoa(p.d.Sequence), datasetKeysKey: keysOf(p.d),
	}
	if p.d.Page != "" {
		books[datasetPageKey] = p.d.Page
	}
	if h := p.head; h != nil && !h.Meta.Archived && h.Checksums[datasetMembersKey] == digest {
		books[datasetOrdinalKey] = h.Checksums[datasetOrdinalKey] // no new version was made
		maps.DeleteFunc(books, func(k, v string) bool { return h.Checksums[k] == v })
		if len(books) > 0 {
			p.batch.Kept = append(p.batch.Kept, &Record{Meta: h.Meta, BlobKey: h.BlobKey, Checksums: books})
		}
		return nil
	}
	pid := versionPID(resourceMapPrefix+p.id, p.ordinal)
	body := datapackage.ResourceMap(pid, meta.Meta.Identifier, pids, p.when)
	rec := p.stored(pid, resourceMapPrefix+p.id, datapackage.FormatORE, body, p.head)
	rec.Meta.FileName = "resource_map.rdf.xml"
	maps.Copy(rec.Checksums, books)
	return p.insert(ctx, rec)
}

// archiveRemoved archives the data objects of the previous version whose
// files this version no longer has.
func (p *packager) archiveRemoved(ctx context.Context, members []*Record) error {
	keep := map[string]bool{}
	for _, m := range members {
		keep[m.Meta.SeriesID] = true
	}
	for _, rec := range p.old {
		if rec.Meta.SeriesID == "" || rec.Meta.SeriesID == p.id || keep[rec.Meta.SeriesID] || rec.Meta.Archived {
			continue
		}
		p.batch.Archive = append(p.batch.Archive, rec.Meta.SeriesID)
	}
	return nil
}

// packageMembers are the records a resource map aggregates, less the ones
// this node does not hold.
func (n *Node) packageMembers(ctx context.Context, mapRec *Record) ([]*Record, error) {
	body, err := n.open(ctx, mapRec)
	if err != nil {
		return nil, err
	}
	pids, err := datapackage.Aggregated(body)
	body.Close()
	if err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "reading the resource map %q", mapRec.Meta.Identifier)
	}
	var out []*Record
	for _, pid := range pids {
		rec, err := n.cat.Lookup(ctx, pid)
		if adapter.IsKind(err, adapter.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// withdrawal is the batch that archives a withdrawn dataset whose resource
// map's head is head: the heads of its data objects and science metadata,
// and then the map's.
func (n *Node) withdrawal(ctx context.Context, head *Record) (*Batch, error) {
	members, err := n.packageMembers(ctx, head)
	if err != nil {
		return nil, err
	}
	var b Batch
	for _, rec := range members {
		if rec.Meta.SeriesID != "" && !rec.Meta.Archived {
			b.Archive = append(b.Archive, rec.Meta.SeriesID)
		}
	}
	b.Archive = append(b.Archive, head.Meta.SeriesID)
	return &b, nil
}
