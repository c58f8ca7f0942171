package sqlcatalog

import (
	"context"
	"maps"
	"sync"

	"github.com/VictoriaMetrics/fastcache"
	"github.com/d1bridge/d1bridge/mappings/node"
	lru "github.com/hashicorp/golang-lru/v2"
)

// records keeps the records read by PID, so that the lookups every request
// makes (authorization, then the operation) do not query the catalog each
// time. It has two tiers: the most recently read records decoded (lru), and
// many more in their compact form (compact, decodeRecord), kept by fastcache
// outside the Go heap, so that their number costs the garbage collector
// nothing and a random read over a large catalog skips SQLite (whose B-tree
// descents, driver and read transaction were a quarter of such a get). A
// write forgets the PIDs it touched; a lookup that raced a write does not
// store what it read (gen). Writes by other instances sharing a PostgreSQL
// catalog are forgotten when the change log tells of them (changes.go).
type records struct {
	lru     *lru.Cache[string, *node.Record]
	compact *fastcache.Cache // nil: none
	mu      sync.Mutex
	gen     uint64 // bumped by every forget
}

// newRecords keeps size records decoded and, behind them, compactBytes of
// compact ones (fastcache rounds it up to a multiple of 32 MiB); size 0: none.
func newRecords(size int, compactBytes int64) *records {
	if size <= 0 {
		return nil
	}
	r := &records{}
	r.lru, _ = lru.New[string, *node.Record](size)
	if compactBytes > 0 {
		r.compact = fastcache.New(int(min(compactBytes, maxCompactBytes)))
	}
	return r
}

// maxCompactBytes bounds the compact tier below fastcache's own limit.
const maxCompactBytes = 1 << 40

// get returns the record of pid, which the cache shares: not to be changed.
func (r *records) get(pid string) (*node.Record, bool) {
	if r == nil {
		return nil, false
	}
	if rec, ok := r.lru.Get(pid); ok {
		return rec, true
	}
	if r.compact == nil {
		return nil, false
	}
	mark := r.mark()
	b, ok := r.compact.HasGet(nil, []byte(pid))
	if !ok {
		return nil, false
	}
	rec, err := decodeRecord(string(b))
	if err != nil || rec.Meta.Identifier != pid {
		return nil, false // not what put stored: read the catalog
	}
	r.keepDecoded(rec, mark)
	return rec, true
}

// RecordMemory tells the bytes the record cache's compact tier holds, and how
// many lookups that the decoded tier missed it answered and not (those read
// the catalog).
func (c *Catalog) RecordMemory() (kept int64, hits, misses uint64) {
	if c.recs == nil || c.recs.compact == nil {
		return 0, 0, 0
	}
	var s fastcache.Stats
	c.recs.compact.UpdateStats(&s)
	return int64(s.BytesSize), s.GetCalls - s.Misses, s.Misses
}

// mark is taken before reading, for put.
func (r *records) mark() uint64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// put keeps rec, which nothing may change from then on, unless a write
// forgot anything since mark.
func (r *records) put(rec *node.Record, mark uint64) {
	if r == nil {
		return
	}
	var b []byte
	if r.compact != nil {
		b = encodeRecord(rec.BlobKey, encodeMeta(rec.Meta), rec.Checksums)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen == mark {
		r.lru.Add(rec.Meta.Identifier, rec)
		if b != nil {
			r.compact.Set([]byte(rec.Meta.Identifier), b) // one of 64 KiB or more is not kept
		}
	}
}

// keepCreated keeps the rows of new objects just committed in the compact
// tier. The caller holds the catalog's write lock, after forgetting what the
// commit changed.
func (r *records) keepCreated(rows []*stored) {
	if r == nil || r.compact == nil || len(rows) == 0 {
		return
	}
	vals := make([][]byte, len(rows))
	for i, s := range rows {
		vals[i] = s.compact()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range rows {
		r.compact.Set([]byte(s.meta.Identifier), vals[i])
	}
}

// keepDecoded keeps rec, read from the compact tier, in the decoded one.
func (r *records) keepDecoded(rec *node.Record, mark uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gen == mark {
		r.lru.Add(rec.Meta.Identifier, rec)
	}
}

func (r *records) forget(pids ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	for _, p := range pids {
		r.lru.Remove(p)
		if r.compact != nil {
			r.compact.Del([]byte(p))
		}
	}
}

// purge forgets every record.
func (r *records) purge() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.lru.Purge()
	if r.compact != nil {
		r.compact.Reset()
	}
}

// close gives back the compact tier's memory, which the garbage collector
// does not see.
func (r *records) close() {
	r.purge()
}

func clone(rec *node.Record) *node.Record {
	return &node.Record{Meta: rec.Meta.Clone(), BlobKey: rec.BlobKey, Checksums: maps.Clone(rec.Checksums)}
}

// lookupPID serves a PID's record from the cache, or reads and keeps it; the
// record is shared, not to be changed.
func (c *Catalog) lookupPID(ctx context.Context, pid string) (*node.Record, bool, error) {
	if rec, ok := c.recs.get(pid); ok {
		return rec, true, nil
	}
	mark := c.recs.mark()
	rec, err := c.loadRecord(ctx, pid)
	if err != nil || rec == nil {
		return nil, false, err
	}
	c.recs.put(rec, mark)
	return rec, true, nil
}

// loadRecord reads the record of pid, one row; nil when there is none.
func (c *Catalog) loadRecord(ctx context.Context, pid string) (*node.Record, error) {
	s, err := c.loadPID(ctx, c.db, pid, "")
	if err != nil || s == nil {
		return nil, err
	}
	return s.record(), nil
}
