package sqlcatalog

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// The system metadata and the checksums of a row are kept in a compact form
// that a lookup decodes several times faster than JSON (BenchmarkDecodeMeta):
// the fields in a fixed order, each a netstring (its length in decimal, ':',
// its bytes), numbers in decimal, dates in Unix milliseconds, a list or an
// optional part as its count followed by its items. It is text, so that
// PostgreSQL's TEXT columns hold it, and a decoded string shares the row's
// memory. The prefix tells it from the JSON (schema 6 to 11) and XML (before)
// of older rows, which still decode.
const compactPrefix = "c1|"

// encodeMeta writes sm in the compact form.
func encodeMeta(sm *adapter.SystemMetadata) string {
	w := compactWriter{b: make([]byte, 0, 512)}
	w.b = append(w.b, compactPrefix...)
	w.uint(sm.SerialVersion)
	w.str(sm.Identifier)
	w.str(sm.FormatID)
	w.uint(sm.Size)
	w.str(sm.Checksum.Algorithm)
	w.str(sm.Checksum.Value)
	w.str(sm.Submitter)
	w.str(sm.RightsHolder)
	if w.present(sm.AccessPolicy != nil) {
		w.count(len(sm.AccessPolicy.Allow))
		for _, r := range sm.AccessPolicy.Allow {
			w.strs(r.Subject)
			w.count(len(r.Permission))
			for _, p := range r.Permission {
				w.str(string(p))
			}
		}
	}
	if rp := sm.ReplicationPolicy; w.present(rp != nil) {
		if w.present(rp.ReplicationAllowed != nil) {
			w.bool(*rp.ReplicationAllowed)
		}
		if w.present(rp.NumberReplicas != nil) {
			w.int(int64(*rp.NumberReplicas))
		}
		w.strs(rp.PreferredMemberNode)
		w.strs(rp.BlockedMemberNode)
	}
	w.str(sm.Obsoletes)
	w.str(sm.ObsoletedBy)
	w.bool(sm.Archived)
	w.time(sm.DateUploaded)
	w.time(sm.DateSysMetadataModified)
	w.str(sm.OriginMemberNode)
	w.str(sm.AuthoritativeMemberNode)
	w.count(len(sm.Replica))
	for _, r := range sm.Replica {
		w.str(r.ReplicaMemberNode)
		w.str(r.ReplicationStatus)
		w.time(r.ReplicaVerified)
	}
	w.str(sm.SeriesID)
	if w.present(sm.MediaType != nil) {
		w.str(sm.MediaType.Name)
		w.count(len(sm.MediaType.Property))
		for _, p := range sm.MediaType.Property {
			w.str(p.Name)
			w.str(p.Value)
		}
	}
	w.str(sm.FileName)
	return string(w.b)
}

// decodeMeta reads what encodeMeta wrote (doc without its prefix).
func decodeMeta(doc string) (*adapter.SystemMetadata, error) {
	r := compactReader{s: doc}
	sm := new(adapter.SystemMetadata)
	sm.SerialVersion = r.uint()
	sm.Identifier = r.str()
	sm.FormatID = r.str()
	sm.Size = r.uint()
	sm.Checksum.Algorithm = r.str()
	sm.Checksum.Value = r.str()
	sm.Submitter = r.str()
	sm.RightsHolder = r.str()
	if r.present() {
		ap := &adapter.AccessPolicy{Allow: make([]adapter.AccessRule, r.count())}
		for i := range ap.Allow {
			ap.Allow[i].Subject = r.strs()
			ap.Allow[i].Permission = make([]adapter.Permission, r.count())
			for j := range ap.Allow[i].Permission {
				ap.Allow[i].Permission[j] = adapter.Permission(r.str())
			}
		}
		sm.AccessPolicy = ap
	}
	if r.present() {
		rp := new(adapter.ReplicationPolicy)
		if r.present() {
			v := r.bool()
			rp.ReplicationAllowed = &v
		}
		if r.present() {
			n := int(r.int())
			rp.NumberReplicas = &n
		}
		rp.PreferredMemberNode = r.strs()
		rp.BlockedMemberNode = r.strs()
		sm.ReplicationPolicy = rp
	}
	sm.Obsoletes = r.str()
	sm.ObsoletedBy = r.str()
	sm.Archived = r.bool()
	sm.DateUploaded = r.time()
	sm.DateSysMetadataModified = r.time()
	sm.OriginMemberNode = r.str()
	sm.AuthoritativeMemberNode = r.str()
	if n := r.count(); n > 0 {
		sm.Replica = make([]adapter.Replica, n)
		for i := range sm.Replica {
			sm.Replica[i] = adapter.Replica{ReplicaMemberNode: r.str(), ReplicationStatus: r.str(), ReplicaVerified: r.time()}
		}
	}
	sm.SeriesID = r.str()
	if r.present() {
		mt := &adapter.MediaType{Name: r.str()}
		if n := r.count(); n > 0 {
			mt.Property = make([]adapter.MediaTypeProperty, n)
			for i := range mt.Property {
				mt.Property[i] = adapter.MediaTypeProperty{Name: r.str(), Value: r.str()}
			}
		}
		sm.MediaType = mt
	}
	sm.FileName = r.str()
	return sm, r.end()
}

// encodeSums writes checksums (algorithm to value) in the compact form, in
// the algorithms' order.
func encodeSums(sums map[string]string) string {
	w := compactWriter{b: make([]byte, 0, 128)}
	w.b = append(w.b, compactPrefix...)
	w.count(len(sums))
	for _, alg := range slices.Sorted(maps.Keys(sums)) {
		w.str(alg)
		w.str(sums[alg])
	}
	return string(w.b)
}

// decodeSums reads what encodeSums wrote (doc without its prefix).
func decodeSums(doc string) (map[string]string, error) {
	r := compactReader{s: doc}
	n := r.count()
	sums := make(map[string]string, n)
	for range n {
		alg := r.str()
		sums[alg] = r.str()
	}
	return sums, r.end()
}

// encodeRecord writes a record in the compact form (the record cache's second
// tier): its blob key, its system metadata (meta, as encodeMeta wrote it) and
// its checksums (nil: none).
func encodeRecord(blobKey, meta string, sums map[string]string) []byte {
	w := compactWriter{b: make([]byte, 0, 640)}
	w.str(blobKey)
	w.str(strings.TrimPrefix(meta, compactPrefix))
	if w.present(sums != nil) {
		w.str(encodeSums(sums)[len(compactPrefix):])
	}
	return w.b
}

// decodeRecord reads what encodeRecord wrote.
func decodeRecord(doc string) (*node.Record, error) {
	r := compactReader{s: doc}
	rec := &node.Record{BlobKey: r.str()}
	meta := r.str()
	var sums string
	hasSums := r.present()
	if hasSums {
		sums = r.str()
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	var err error
	if rec.Meta, err = decodeMeta(meta); err != nil {
		return nil, err
	}
	if hasSums {
		if rec.Checksums, err = decodeSums(sums); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

type compactWriter struct{ b []byte }

func (w *compactWriter) str(s string) {
	w.b = strconv.AppendInt(w.b, int64(len(s)), 10)
	w.b = append(w.b, ':')
	w.b = append(w.b, s...)
}

func (w *compactWriter) strs(ss []string) {
	w.count(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

func (w *compactWriter) uint(u uint64) { w.str(strconv.FormatUint(u, 10)) }
func (w *compactWriter) int(i int64)   { w.str(strconv.FormatInt(i, 10)) }
func (w *compactWriter) count(n int)   { w.int(int64(n)) }

func (w *compactWriter) bool(b bool) {
	if b {
		w.str("1")
	} else {
		w.str("0")
	}
}

// present writes whether an optional part follows, and returns it.
func (w *compactWriter) present(ok bool) bool {
	w.bool(ok)
	return ok
}

// time writes t in Unix milliseconds (DataONE's precision), or "" when zero.
func (w *compactWriter) time(t adapter.Time) {
	if t.IsZero() {
		w.str("")
		return
	}
	w.int(t.UnixMilli())
}

// compactReader reads fields until the first error, which end reports; the
// reads after it give zero values.
type compactReader struct {
	s   string
	err error
}

var errCompact = errors.New("not a valid compact document")

func (r *compactReader) str() string {
	if r.err != nil {
		return ""
	}
	colon := strings.IndexByte(r.s, ':')
	n, err := strconv.Atoi(r.s[:max(colon, 0)])
	if colon < 0 || err != nil || n < 0 || n > len(r.s)-colon-1 {
		r.err = errCompact
		return ""
	}
	s := r.s[colon+1 : colon+1+n]
	r.s = r.s[colon+1+n:]
	return s
}

func (r *compactReader) strs() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.str()
	}
	return ss
}

func (r *compactReader) uint() uint64 { return number(r, strconv.ParseUint) }
func (r *compactReader) int() int64   { return number(r, strconv.ParseInt) }

// number reads a decimal field with parse (strconv.ParseInt or ParseUint).
func number[T int64 | uint64](r *compactReader, parse func(string, int, int) (T, error)) T {
	n, err := parse(r.str(), 10, 64)
	if err != nil && r.err == nil {
		r.err = errCompact
	}
	return n
}

// count reads a list's length, bounded by what is left to read (each item
// takes at least a byte), so that a damaged one allocates nothing large.
func (r *compactReader) count() int {
	n := r.int()
	if n < 0 || n > int64(len(r.s)) {
		if r.err == nil {
			r.err = errCompact
		}
		return 0
	}
	return int(n)
}

func (r *compactReader) bool() bool {
	s := r.str()
	if s != "0" && s != "1" && r.err == nil {
		r.err = errCompact
	}
	return s == "1"
}

func (r *compactReader) present() bool { return r.bool() }

func (r *compactReader) time() adapter.Time {
	if r.err != nil || strings.HasPrefix(r.s, "0:") {
		r.str()
		return adapter.Time{}
	}
	return adapter.Time{Time: time.UnixMilli(r.int()).UTC()}
}

// end reports the first error, or bytes left over.
func (r *compactReader) end() error {
	if r.err == nil && r.s != "" {
		r.err = errCompact
	}
	return r.err
}
