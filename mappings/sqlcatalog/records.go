package sqlcatalog

import (
	"context"
	"maps"
	"sync"

	"github.com/d1bridge/d1bridge/mappings/node"
	lru "github.com/hashicorp/golang-lru/v2"
)

// records keeps decoded records by PID, so that the lookups every request makes
// (authorization, then the operation) do not decode system metadata XML each
// time. A write forgets the PIDs it touched; a lookup that raced a write does
// not store what it read (gen). Writes by other instances sharing a PostgreSQL
// catalog are forgotten when the change log tells of them (changes.go).
type records struct {
	lru *lru.Cache[string, *node.Record]
	mu  sync.Mutex
	gen uint64 // bumped by every forget
}

func newRecords(size int) *records {
	if size <= 0 {
		return nil
	}
	c, _ := lru.New[string, *node.Record](size)
	return &records{lru: c}
}

// get returns the record of pid, which the cache shares: not to be changed.
func (r *records) get(pid string) (*node.Record, bool) {
	if r == nil {
		return nil, false
	}
	return r.lru.Get(pid)
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
