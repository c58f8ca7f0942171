package node

// The harvest of one record: what a pass does with each object the store
// lists (harvest.go runs the passes).

import (
	"cmp"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	// upstreamModifiedKey keeps, among a harvested record's Checksums, the
	// store's modification time of the object when it was last registered
	// (RFC 3339). A pass compares it with what the store says now to tell a
	// changed object without reading its bytes. getChecksum never answers it:
	// it asks only for canonical algorithm labels.
	upstreamModifiedKey = "d1bridge:upstream-modified"
	// harvestUserAgent is the user agent of the harvest's events.
	harvestUserAgent = "harvest"
)

// Outcomes of one record, the metrics' labels.
const (
	outcomeRegistered = "registered"
	outcomeUpdated    = "updated"
	outcomeUnchanged  = "unchanged"
	outcomeSkipped    = "skipped"
	outcomeFailed     = "failed"
)

// noteFailure logs a record's failure the first time it fails so, and forgets
// it once it succeeds; h.pass is held.
func (n *Node) noteFailure(f *Found, err error) {
	h := n.harvest
	if err == nil {
		delete(h.failing, f.Key)
		return
	}
	msg := err.Error()
	if h.failing[f.Key] == msg {
		n.log.Debug("harvest: a record still fails", "key", f.Key, "err", err)
		return
	}
	h.failing[f.Key] = msg
	n.log.Warn("harvest: a record failed; later passes retry it", "key", f.Key, "pid", f.PID, "err", err)
}

// harvestRecord registers one object the store listed, or updates it when it
// changed; it returns the outcome, and the error when it failed.
func (n *Node) harvestRecord(ctx context.Context, f *Found, o HarvestOptions) (string, error) {
	if f.Problem != nil {
		return outcomeFailed, adapter.Wrap(adapter.ServiceFailure, f.Problem, "the store's description of %q cannot be read", f.Key)
	}
	pid := f.PID
	if pid == "" {
		pid = f.Key
	}
	if f.Key == "" {
		return outcomeFailed, adapter.Errorf(adapter.InvalidRequest, "the store listed an object without a key (pid %q)", f.PID)
	}
	if err := adapter.CheckIdentifier(pid); err != nil {
		return outcomeFailed, err
	}
	rec, err := n.cat.Lookup(ctx, pid)
	if adapter.IsKind(err, adapter.NotFound) {
		// The store also lists the bytes the node wrote, under keys it chose:
		// registered already under their object's PID, or to be with their
		// write's commit, or never (see ownKeyPrefix). Keys it chose before
		// ownKeyPrefix (a bare UUID) are known by the catalog's records.
		if ownKey(f.Key) {
			return outcomeUnchanged, nil
		}
		held, err := n.cat.HoldsBlob(ctx, f.Key)
		switch {
		case err != nil:
			return outcomeFailed, err
		case held:
			return outcomeUnchanged, nil
		}
		return n.harvestNew(ctx, pid, f, o)
	}
	if err != nil {
		return outcomeFailed, err
	}
	switch {
	case rec.Meta.Identifier != pid:
		return outcomeFailed, adapter.Errorf(adapter.IdentifierNotUnique, "%q is a series id on this node (of %q)", pid, rec.Meta.Identifier).WithPID(pid)
	case rec.BlobKey != f.Key:
		return outcomeFailed, adapter.Errorf(adapter.IdentifierNotUnique, "%q is registered already, with other bytes than the store's %q", pid, f.Key).WithPID(pid)
	case !upstreamChanged(rec, f):
		return outcomeUnchanged, nil
	}
	return n.harvestChanged(ctx, rec, f, o)
}

// harvestSession is the session the harvest's events are logged with.
func (n *Node) harvestSession() *adapter.Session {
	return &adapter.Session{Subject: n.id, Subjects: []string{n.id}, UserAgent: harvestUserAgent}
}

func (n *Node) harvestNew(ctx context.Context, pid string, f *Found, o HarvestOptions) (string, error) {
	alg, _, _ := givenChecksum(f)
	size, sum, _, err := n.harvestFacts(ctx, f, cmp.Or(alg, o.ChecksumAlgorithm), nil)
	if err != nil {
		return outcomeFailed, err
	}
	now := adapter.Now()
	uploaded := now
	switch {
	case !f.Uploaded.IsZero():
		uploaded = adapter.NewTime(f.Uploaded)
	case !f.Modified.IsZero():
		uploaded = adapter.NewTime(f.Modified)
	}
	sm := &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: pid, FormatID: cmp.Or(f.FormatID, o.FormatID), Size: uint64(size), Checksum: sum,
		Submitter: o.Submitter, RightsHolder: cmp.Or(f.RightsHolder, o.RightsHolder), AccessPolicy: readPolicy(o.Readers),
		DateUploaded: uploaded, DateSysMetadataModified: now,
		OriginMemberNode: n.id, AuthoritativeMemberNode: n.id, FileName: f.FileName,
	}
	rec := &Record{Meta: sm, BlobKey: f.Key}
	if m := modifiedMark(f.Modified); m != "" {
		rec.Checksums = map[string]string{upstreamModifiedKey: m}
	}
	if err := n.cat.Insert(n.logging(ctx, n.harvestSession(), pid, adapter.EventCreate), rec); err != nil {
		// Another instance sharing the catalog may have registered it first.
		if adapter.IsKind(err, adapter.IdentifierNotUnique) {
			if got, lerr := n.cat.Lookup(ctx, pid); lerr == nil && got.Meta.Identifier == pid && got.BlobKey == f.Key {
				return outcomeUnchanged, nil
			}
		}
		return outcomeFailed, err
	}
	return outcomeRegistered, nil
}

// harvestChanged updates a record whose object the store says has changed:
// size and checksum (read again when the store does not give them), format and
// file name when the store gives them, and then the store's modification time.
// The system metadata's serialVersion and dateSysMetadataModified move only
// when it changes: an object touched without a change is refreshed silently.
func (n *Node) harvestChanged(ctx context.Context, rec *Record, f *Found, o HarvestOptions) (string, error) {
	pid := rec.Meta.Identifier
	mainAlg, ok := adapter.CanonicalAlgorithm(rec.Meta.Checksum.Algorithm)
	if !ok {
		mainAlg = o.ChecksumAlgorithm
	}
	// When the store gives the same size and checksum, the bytes are the same;
	// otherwise they are read again, and the checksums computed later (which
	// describe the old bytes) are computed again in the same read.
	size, sum := int64(rec.Meta.Size), rec.Meta.Checksum
	var sums map[string]string
	if galg, gval, given := givenChecksum(f); !given || !f.knownSize() || uint64(f.Size) != rec.Meta.Size || !sameChecksum(rec, galg, gval) {
		var err error
		if size, sum, sums, err = n.harvestFacts(ctx, f, mainAlg, extraAlgorithms(rec)); err != nil {
			return outcomeFailed, err
		}
	}
	// The other checksums first: a record cut short after them still has its
	// old size and checksum, so the next pass reads the bytes again.
	if err := n.refreshChecksums(ctx, rec, sum.Algorithm, sums, nil); err != nil {
		return outcomeFailed, err
	}
	_, err := n.cat.Modify(n.logging(ctx, n.harvestSession(), pid, adapter.EventUpdate), pid, func(sm *adapter.SystemMetadata) error {
		if sm.Size == uint64(size) && sm.Checksum.Algorithm == sum.Algorithm && strings.EqualFold(sm.Checksum.Value, sum.Value) && (f.FormatID == "" || f.FormatID == sm.FormatID) &&
			(f.FileName == "" || f.FileName == sm.FileName) {
			return errUnchanged
		}
		sm.Size, sm.Checksum = uint64(size), sum
		if f.FormatID != "" {
			sm.FormatID = f.FormatID
		}
		if f.FileName != "" {
			sm.FileName = f.FileName
		}
		touch(sm)
		return nil
	})
	changed := err == nil
	if err != nil && !errors.Is(err, errUnchanged) {
		return outcomeFailed, err
	}
	if err := n.refreshChecksums(ctx, rec, sum.Algorithm, nil, f); err != nil {
		return outcomeFailed, err // the next pass finds it changed again, and unchanged
	}
	if !changed {
		return outcomeUnchanged, nil
	}
	return outcomeUpdated, nil
}

// refreshChecksums stores the checksums besides the main one that changed, and
// then, when f is given, the store's modification time. Callers store the
// checksums before the system metadata and the modification time after it, so
// that a record cut short is found changed again, and read again, by the next
// pass.
func (n *Node) refreshChecksums(ctx context.Context, rec *Record, mainAlg string, sums map[string]string, f *Found) error {
	pid := rec.Meta.Identifier
	for _, alg := range slices.Sorted(maps.Keys(sums)) {
		if alg == mainAlg || rec.Checksums[alg] == sums[alg] {
			continue
		}
		if err := n.cat.SetChecksum(ctx, pid, alg, sums[alg]); err != nil {
			return err
		}
	}
	if f == nil {
		return nil
	}
	if m := modifiedMark(f.Modified); m != rec.Checksums[upstreamModifiedKey] {
		return n.cat.SetChecksum(ctx, pid, upstreamModifiedKey, m)
	}
	return nil
}

// harvestFacts are the size and checksum by alg of f's object: the store's
// when it gives both by alg (and no extras are asked for), else read once from
// Blobs, hashing with alg, the store's algorithm and extras (all in the map).
// When the store gives a size or checksum that the bytes contradict, the
// record fails: the store's listing is wrong, and is not registered.
func (n *Node) harvestFacts(ctx context.Context, f *Found, alg string, extras []string) (int64, adapter.Checksum, map[string]string, error) {
	galg, gval, given := givenChecksum(f)
	if given && galg == alg && f.knownSize() && len(extras) == 0 && f.Claim == "" {
		return f.Size, adapter.Checksum{Algorithm: alg, Value: gval}, nil, nil
	}
	algs := []string{alg}
	if given {
		algs = append(algs, galg)
	}
	size, sums, err := n.measure(ctx, f.Key, append(algs, extras...))
	if err != nil {
		return 0, adapter.Checksum{}, nil, err
	}
	switch {
	case given && sums[galg] != gval:
		return 0, adapter.Checksum{}, nil, adapter.Errorf(adapter.InvalidSystemMetadata,
			"%s the %s checksum of %q as %s, its bytes have %s", cmp.Or(f.Claim, "the store lists"), galg, f.Key, gval, sums[galg])
	case f.knownSize() && size != f.Size:
		return 0, adapter.Checksum{}, nil, adapter.Errorf(adapter.InvalidSystemMetadata,
			"the store lists %q with %d bytes, it has %d", f.Key, f.Size, size)
	}
	return size, adapter.Checksum{Algorithm: alg, Value: sums[alg]}, sums, nil
}

// measure streams the bytes under key once, counting and hashing them.
func (n *Node) measure(ctx context.Context, key string, algorithms []string) (int64, map[string]string, error) {
	body, err := n.bytes(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	defer body.Close()
	h := adapter.NewHasher(algorithms)
	defer h.Close()
	size, err := io.Copy(h, ctxReader{ctx, body})
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, adapter.Wrap(adapter.ServiceFailure, err, "reading the bytes under %q", key)
	}
	return size, h.Sums(), nil
}

// ctxReader stops a long read when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// upstreamChanged tells, without reading bytes, whether the store's object
// differs from its record: another modification time, or a size or checksum
// the store gives that the record does not have.
func upstreamChanged(rec *Record, f *Found) bool {
	if modifiedMark(f.Modified) != rec.Checksums[upstreamModifiedKey] {
		return true
	}
	if f.knownSize() && uint64(f.Size) != rec.Meta.Size {
		return true
	}
	if alg, v, ok := givenChecksum(f); ok && !sameChecksum(rec, alg, v) {
		return true
	}
	return false
}

// knownSize tells whether the store gave the size. Size is -1 when unknown; a
// zero Size without a checksum counts as unknown too, so that a Found built
// without a size is read once, not taken for an empty object.
func (f *Found) knownSize() bool {
	return f.Size > 0 || (f.Size == 0 && f.Checksum.Value != "")
}

// givenChecksum is the checksum the store gives, by its canonical algorithm;
// ok is false when it gives none, or one this node does not compute.
func givenChecksum(f *Found) (alg, value string, ok bool) {
	v := strings.ToLower(strings.TrimSpace(f.Checksum.Value))
	if v == "" {
		return "", "", false
	}
	alg, ok = adapter.CanonicalAlgorithm(f.Checksum.Algorithm)
	return alg, v, ok
}

// sameChecksum tells whether the record holds value as its checksum by alg.
func sameChecksum(rec *Record, alg, value string) bool {
	if a, _ := adapter.CanonicalAlgorithm(rec.Meta.Checksum.Algorithm); a == alg {
		return strings.EqualFold(rec.Meta.Checksum.Value, value)
	}
	v, ok := rec.Checksums[alg]
	return ok && strings.EqualFold(v, value)
}

// extraAlgorithms are the algorithms of the checksums computed later, without
// the record's own algorithm and the harvest's bookkeeping.
func extraAlgorithms(rec *Record) []string {
	var out []string
	for k := range rec.Checksums {
		if alg, ok := adapter.CanonicalAlgorithm(k); ok && alg == k {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func modifiedMark(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func readPolicy(readers []string) *adapter.AccessPolicy {
	if len(readers) == 0 {
		return nil
	}
	return &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: slices.Clone(readers), Permission: []adapter.Permission{adapter.PermRead}}}}
}
