package node

// Which registered package a source's dataset is, whether a version of it is new,
// and the identifiers its objects get (the table in packaging.go).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/d1bridge/d1bridge/adapter"
)

// resourceMapPrefix begins a resource map's series id, as Metacat names them.
const resourceMapPrefix = "resource_map_"

// notePage writes d's page on the resource map head when it lacks it: a
// package registered before pages were kept (ErrNotADataset) gets it at its
// next pass. Bookkeeping: a failure is logged, the dataset is unchanged.
func (n *Node) notePage(ctx context.Context, head *Record, d *Dataset) {
	if d.Page == "" || head.Checksums[datasetPageKey] == d.Page {
		return
	}
	if err := n.cat.SetChecksum(ctx, head.Meta.Identifier, datasetPageKey, d.Page); err != nil {
		n.log.Warn("harvest: noting a dataset's page", "pid", head.Meta.Identifier, "page", d.Page, "err", err)
	}
}

// versionPID is the pid of version n in a series.
func versionPID(series string, n int) string { return series + "@v" + strconv.Itoa(n) }

// prepareDataset reads what one dataset version needs and prepares its
// batch, without writing it: the outcome it will have, and the batch (nil
// when there is nothing to write).
func (n *Node) prepareDataset(ctx context.Context, d *Dataset, o DatasetOptions) (string, *Batch, error) {
	if d.Problem != nil {
		return outcomeFailed, nil, adapter.Wrap(adapter.ServiceFailure, d.Problem, "the source's description of dataset %q cannot be read", d.ID)
	}
	if d.ID == "" {
		return outcomeFailed, nil, adapter.Errorf(adapter.InvalidRequest, "the source listed a dataset without an id")
	}
	id, g, head, err := n.datasetHead(ctx, datasetPID(o, d.ID))
	if err != nil {
		return outcomeFailed, nil, err
	}
	if d.Deleted {
		if head == nil || head.Meta.Archived {
			return outcomeUnchanged, nil, nil
		}
		b, err := n.withdrawal(ctx, head)
		if err != nil {
			return outcomeFailed, nil, err
		}
		return outcomeArchived, b, nil
	}
	id, head = continued(datasetPID(o, d.ID), g, head) // back after its withdrawal: the next generation
	if err := adapter.CheckIdentifier(id); err != nil {
		return outcomeFailed, nil, err
	}
	version := d.Version
	if version == "" || coarseDate(version) {
		// A day tells the versions of different days apart, not two of one
		// day: what the dataset holds does.
		version = strings.TrimSpace(version + " " + fingerprint(d))
	}
	if head != nil {
		seq, _ := strconv.Atoi(head.Checksums[datasetSequenceKey])
		same := head.Checksums[datasetVersionKey] == version || d.Sequence > 0 && seq == d.Sequence
		// The same version whose files moved (a renamed upstream, a moved
		// storage root) is looked at again, for their keys. A package
		// registered before the keys were noted is not: it learns them at
		// its next version.
		moved := head.Checksums[datasetKeysKey] != "" && head.Checksums[datasetKeysKey] != keysOf(d)
		if same && !moved || d.Sequence > 0 && seq > d.Sequence { // or an older version
			n.notePage(ctx, head, d)
			return outcomeUnchanged, nil, nil
		}
	}
	p := &packager{n: n, o: o, d: d, id: id, head: head}
	if err := p.register(ctx, version); err != nil {
		return outcomeFailed, nil, err
	}
	if len(p.batch.Records)+len(p.batch.Archive) == 0 {
		if len(p.batch.Kept) > 0 {
			return outcomeUnchanged, &p.batch, nil // moved or touched, not changed
		}
		return outcomeUnchanged, nil, nil
	}
	if head == nil {
		return outcomeRegistered, &p.batch, nil
	}
	return outcomeUpdated, &p.batch, nil
}

// generation is the g-th generation of a series (or of a dataset's id): s,
// then s~2, s~3, ... An archived object can be neither updated nor followed
// in its series, so what comes back after its series ended archived (a file
// put back, a dataset listed again) starts the next generation.
func generation(s string, g int) string {
	if g <= 1 {
		return s
	}
	return s + "~" + strconv.Itoa(g)
}

// currentGeneration finds the last generation of series: its name, its
// number, and its head (nil for a series that never had an object). Every
// generation before it ends archived.
func (n *Node) currentGeneration(ctx context.Context, series string) (string, int, *Record, error) {
	g := 1
	head, err := n.lookupHead(ctx, series)
	for err == nil && head != nil && head.Meta.Archived {
		next, err := n.lookupHead(ctx, generation(series, g+1))
		if err != nil {
			return "", 0, nil, err
		}
		if next == nil {
			break
		}
		g, head = g+1, next
	}
	return generation(series, g), g, head, err
}

// continued is the series, and the head to obsolete, of a new object after
// head in base's generation g: the same, unless head is archived, when it is
// the next generation and nothing.
func continued(base string, g int, head *Record) (string, *Record) {
	if head != nil && head.Meta.Archived {
		return generation(base, g+1), nil
	}
	return generation(base, g), head
}

// datasetHead finds the current generation of the dataset id (with the
// harvest's prefix) by its resource map's series: the generation's id, its
// number, and the map's head (nil for a dataset never registered).
func (n *Node) datasetHead(ctx context.Context, id string) (string, int, *Record, error) {
	_, g, head, err := n.currentGeneration(ctx, resourceMapPrefix+id)
	return generation(id, g), g, head, err
}

// lookupHead is the head of a series, or nil when there is none.
func (n *Node) lookupHead(ctx context.Context, series string) (*Record, error) {
	rec, err := n.cat.Lookup(ctx, series)
	if adapter.IsKind(err, adapter.NotFound) {
		return nil, nil
	}
	return rec, err
}

// coarseDate tells whether v is a date without a time of day: a year, a
// month or a day (W3C datetime, as sitemaps and OAI-PMH write them).
func coarseDate(v string) bool {
	for _, layout := range []string{time.DateOnly, "2006-01", "2006"} {
		if _, err := time.Parse(layout, v); err == nil {
			return true
		}
	}
	return false
}

// fingerprint tells a dataset version from another when the source gives no
// version: its files' paths, sizes, checksums and modification times, and its
// metadata.
func fingerprint(d *Dataset) string {
	h := sha256.New()
	files := slices.Clone(d.Files)
	slices.SortFunc(files, func(a, b Found) int { return strings.Compare(a.FileName, b.FileName) })
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s:%s\x00%s\n", f.FileName, f.Key, f.Size, f.Checksum.Algorithm, f.Checksum.Value, modifiedMark(f.Modified))
	}
	if m := d.Metadata; m != nil {
		fmt.Fprintf(h, "metadata\x00%s\x00", m.FormatID)
		h.Write(m.Body)
		if m.Found != nil {
			fmt.Fprintf(h, "\x00%s\x00%d\x00%s", m.Found.Key, m.Found.Size, modifiedMark(m.Found.Modified))
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// keysOf is a digest of where d's files are: the keys its objects are read
// from.
func keysOf(d *Dataset) string {
	h := sha256.New()
	files := slices.Clone(d.Files)
	slices.SortFunc(files, func(a, b Found) int { return strings.Compare(a.FileName, b.FileName) })
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\n", f.FileName, f.Key)
	}
	if m := d.Metadata; m != nil && m.Found != nil {
		fmt.Fprintf(h, "metadata\x00%s\n", m.Found.Key)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// datasetPID is the identifier (and series) of a dataset's science
// metadata, which its objects' identifiers begin with.
func datasetPID(o DatasetOptions, id string) string { return o.PIDPrefix + pidSafe(id) }

// pidSafe is a source's name (a folder, a file's path) as part of an
// identifier: whitespace and control characters, which identifiers may not
// hold, are percent-encoded (the folder "Lake survey" is "Lake%20survey"),
// and so are '%' itself and the first character of a name's ending that
// reads as a generation or a version ("x~2" is "x%7E2", "x@v2" is "x%40v2"),
// so that no two names, and no name and another's generation or version,
// share an identifier. Any other name is kept as it is.
func pidSafe(name string) string {
	unsafe := func(r rune) bool { return r == '%' || unicode.IsSpace(r) || adapter.IsControl(r) }
	marker := markerAt(name)
	if marker < 0 && !strings.ContainsFunc(name, unsafe) {
		return name
	}
	var b strings.Builder
	for i, r := range name {
		if !unsafe(r) && i != marker {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// markerAt is the index of the '~' of a trailing "~N" or the '@' of a
// trailing "@vN" (N digits) in name, as generation and versionPID write
// them; -1 when it has none.
func markerAt(name string) int {
	digits := strings.TrimRightFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
	if len(digits) == len(name) {
		return -1
	}
	switch {
	case strings.HasSuffix(digits, "~"):
		return len(digits) - 1
	case strings.HasSuffix(digits, "@v"):
		return len(digits) - 2
	}
	return -1
}
