package node

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/metrics"
)

// reindexPage is how many records a batch reads from the catalog at once (a
// variable for the tests).
var reindexPage = 500

// reindexLogEvery is how often, in records, a batch logs its progress.
const reindexLogEvery = 1000

// reindexBatch is the batch reindex running.
type reindexBatch struct {
	q                                   adapter.AdminQuery
	done, selected                      atomic.Int64
	updated, unchanged, skipped, failed atomic.Int64
}

// SetReindexMetrics sets where reindex counts its records and shows a batch's
// progress; nil counts nothing.
func (n *Node) SetReindexMetrics(m *metrics.Metrics) {
	n.harvest.mu.Lock()
	defer n.harvest.mu.Unlock()
	n.harvest.metrics = m
}

func (n *Node) reindexMetrics() *metrics.Metrics {
	n.harvest.mu.Lock()
	defer n.harvest.mu.Unlock()
	return n.harvest.metrics
}

// Reindex recomputes catalog records from the store: the size and checksum of
// the bytes (read again, streaming), and, when the store lists its objects,
// what it says of the object now (its format and file name). A record is
// modified, with a new serialVersion and dateSysMetadataModified, only when
// something changed; a record registered without bytes is left as it is.
//
// One PID is done before Reindex returns; an unknown one is InvalidRequest,
// bytes missing from the store are ServiceFailure. Anything else (a list of
// PIDs, filters, all) is checked at once and then runs in the background,
// logging its progress every reindexLogEvery records and a summary; one batch
// runs at a time, and another asked for meanwhile is refused (ServiceFailure,
// with the progress of the running one) rather than queued. A batch of all
// objects over a store that lists its objects first runs a full harvest pass
// (whatever the high-water mark), so objects only the store knows are
// registered.
func (n *Node) Reindex(ctx context.Context, s *adapter.Session, q adapter.AdminQuery) error {
	filtered := q.FormatID != "" || !q.FromDate.IsZero() || !q.ToDate.IsZero()
	switch {
	case len(q.PIDs) > 0 && (filtered || q.All):
		return adapter.Errorf(adapter.InvalidRequest, "select objects by pid or by filters (formatId, fromDate, toDate, all), not both")
	case len(q.PIDs) == 0 && !filtered && !q.All:
		return adapter.Errorf(adapter.InvalidRequest, "nothing selected: give a pid, pid parameters, filters (formatId, fromDate, toDate) or all=true")
	case !q.FromDate.IsZero() && !q.ToDate.IsZero() && !q.FromDate.Before(q.ToDate.Time):
		return adapter.Errorf(adapter.InvalidRequest, "fromDate %s is not before toDate %s", q.FromDate.Format(), q.ToDate.Format())
	}
	if len(q.PIDs) == 1 {
		_, err := n.reindexRecord(ctx, q.PIDs[0], n.reindexMetrics())
		return err
	}
	var pids []string
	seen := map[string]bool{}
	for _, id := range q.PIDs {
		if err := adapter.CheckIdentifier(id); err != nil {
			return adapter.Errorf(adapter.InvalidRequest, "pid %q: %v", id, err).WithPID(id)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, err := n.cat.Lookup(ctx, id); adapter.IsKind(err, adapter.NotFound) {
			return adapter.Errorf(adapter.InvalidRequest, "no object %q on this node", id).WithPID(id)
		} else if err != nil {
			return err
		}
		pids = append(pids, id)
	}
	q.PIDs = pids
	return n.startReindex(s, q)
}

// startReindex runs the batch q in the background, unless one runs.
func (n *Node) startReindex(s *adapter.Session, q adapter.AdminQuery) error {
	h := n.harvest
	h.mu.Lock()
	if b := h.batch; b != nil {
		h.mu.Unlock()
		return adapter.Errorf(adapter.ServiceFailure, "a reindex is already running (%d of %d done)", b.done.Load(), b.selected.Load())
	}
	if h.ctx.Err() != nil {
		h.mu.Unlock()
		return adapter.Errorf(adapter.ServiceFailure, "the node is shutting down")
	}
	b := &reindexBatch{q: q}
	h.batch = b
	m := h.metrics
	h.jobs.Add(1)
	h.mu.Unlock()

	n.log.Info("reindex started", append(selection(q), "by", s.Subject)...)
	go func() {
		defer h.jobs.Done()
		defer func() {
			h.mu.Lock()
			h.batch = nil
			h.mu.Unlock()
		}()
		n.runReindex(h.ctx, b, m)
	}()
	return nil
}

// selection describes a batch for the log.
func selection(q adapter.AdminQuery) []any {
	var out []any
	if len(q.PIDs) > 0 {
		out = append(out, "pids", len(q.PIDs))
	}
	if q.FormatID != "" {
		out = append(out, "formatId", q.FormatID)
	}
	if !q.FromDate.IsZero() {
		out = append(out, "fromDate", q.FromDate.Format())
	}
	if !q.ToDate.IsZero() {
		out = append(out, "toDate", q.ToDate.Format())
	}
	if q.All {
		out = append(out, "all", true)
	}
	return out
}

func (n *Node) runReindex(ctx context.Context, b *reindexBatch, m *metrics.Metrics) {
	defer m.ReindexStarted()()
	start := time.Now()
	if b.q.All {
		if _, _, ok := n.harvestSource(); ok {
			if _, err := n.harvestOnce(ctx, true); err != nil && ctx.Err() == nil && !adapter.IsKind(err, adapter.NotImplemented) {
				n.log.Warn("reindex: the harvest pass before it failed; the catalog is reindexed as it is", "err", err)
			}
		}
	}
	// The window ends a millisecond (the dates' precision) after now, and the
	// batch starts once that moment has passed: a record written until now is
	// in it, one the batch changes gets a later date and leaves it.
	end := adapter.NewTime(time.Now().Add(time.Millisecond))
	time.Sleep(time.Until(end.Time))
	var err error
	if len(b.q.PIDs) > 0 {
		b.selected.Store(int64(len(b.q.PIDs)))
		m.SetReindexSelected(len(b.q.PIDs))
		for _, pid := range b.q.PIDs {
			if ctx.Err() != nil {
				break
			}
			n.reindexStep(ctx, b, pid, m)
		}
	} else {
		err = n.reindexWindow(ctx, b, end, m)
	}
	args := []any{"selected", b.selected.Load(), "done", b.done.Load(), "updated", b.updated.Load(),
		"unchanged", b.unchanged.Load(), "skipped", b.skipped.Load(), "failed", b.failed.Load(), "duration_seconds", time.Since(start).Seconds()}
	switch {
	case ctx.Err() != nil:
		n.log.Info("reindex stopped: the node is closing", args...)
	case err != nil:
		n.log.Error("reindex stopped", append(args, "err", err)...)
	default:
		n.log.Info("reindex done", args...)
	}
}

// reindexWindow reindexes the records the batch's filters select, modified
// before end, in listObjects order. A changed record leaves the window (its
// new dateSysMetadataModified is after end), so the pages are read by date: from
// the date of the last record handled, skipping the records of that date that
// were handled and stayed.
func (n *Node) reindexWindow(ctx context.Context, b *reindexBatch, end adapter.Time, m *metrics.Metrics) error {
	upper := end
	if !b.q.ToDate.IsZero() && b.q.ToDate.Before(end.Time) {
		upper = b.q.ToDate
	}
	from := b.q.FromDate
	kept := 0                 // records of date from, handled, still in the window
	seen := map[string]bool{} // the PIDs of date from, handled
	first := true
	for {
		l, err := n.cat.List(ctx, adapter.ListQuery{FromDate: from, ToDate: upper, FormatID: b.q.FormatID, Start: kept, Count: reindexPage})
		if err != nil {
			return err
		}
		if first {
			first = false
			b.selected.Store(int64(l.Total))
			m.SetReindexSelected(l.Total)
		}
		fresh := 0
		for _, oi := range l.ObjectInfo {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if d := oi.DateSysMetadataModified; !d.Equal(from.Time) {
				from, kept = d, 0
				clear(seen)
			}
			if seen[oi.Identifier] {
				continue
			}
			seen[oi.Identifier] = true
			fresh++
			// An updated record has left the window, and so has one deleted
			// meanwhile (no outcome); the others stay.
			if outcome := n.reindexStep(ctx, b, oi.Identifier, m); outcome != outcomeUpdated && outcome != "" {
				kept++
			}
		}
		if len(l.ObjectInfo) < reindexPage || fresh == 0 {
			return nil
		}
	}
}

// reindexStep reindexes one record of a batch, logging a failure and the
// progress.
func (n *Node) reindexStep(ctx context.Context, b *reindexBatch, pid string, m *metrics.Metrics) string {
	outcome, err := n.reindexRecord(ctx, pid, m)
	switch outcome {
	case outcomeUpdated:
		b.updated.Add(1)
	case outcomeUnchanged:
		b.unchanged.Add(1)
	case outcomeSkipped:
		b.skipped.Add(1)
	default:
		b.failed.Add(1)
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("reindex: a record failed", "pid", pid, "outcome", outcome, "err", err)
	}
	if done := b.done.Add(1); done%reindexLogEvery == 0 {
		n.log.Info("reindex progress", "done", done, "selected", b.selected.Load(), "updated", b.updated.Load(), "failed", b.failed.Load())
	}
	return outcome
}

// reindexRecord reindexes the record of id and counts its outcome.
func (n *Node) reindexRecord(ctx context.Context, id string, m *metrics.Metrics) (string, error) {
	outcome, err := n.reindex(ctx, id)
	if outcome != "" && (outcome != outcomeFailed || ctx.Err() == nil) { // a record cut short did not fail
		m.ObserveReindexRecord(outcome)
	}
	return outcome, err
}

// reindex is reindexRecord, uncounted; an unknown id has no outcome.
func (n *Node) reindex(ctx context.Context, id string) (string, error) {
	rec, err := n.cat.Lookup(ctx, id)
	if adapter.IsKind(err, adapter.NotFound) {
		return "", adapter.Errorf(adapter.InvalidRequest, "no object %q on this node", id).WithPID(id)
	}
	if err != nil {
		return outcomeFailed, err
	}
	pid := rec.Meta.Identifier
	if rec.BlobKey == "" {
		return outcomeSkipped, nil
	}
	missing := func(err error) error {
		return adapter.Wrap(adapter.ServiceFailure, err, "the bytes of %q are missing from the store", pid).WithPID(pid)
	}
	var f *Found
	if l, _, ok := n.harvestSource(); ok {
		// A store that describes no single object (NotImplemented) is only read.
		switch f, err = l.Stat(ctx, rec.BlobKey); {
		case adapter.IsKind(err, adapter.NotImplemented):
			f = nil
		case adapter.IsKind(err, adapter.NotFound):
			return outcomeFailed, missing(err)
		case err != nil:
			return outcomeFailed, adapter.Wrap(adapter.ServiceFailure, err, "asking the store about %q", pid).WithPID(pid)
		}
	}
	alg, ok := adapter.CanonicalAlgorithm(rec.Meta.Checksum.Algorithm)
	if !ok {
		alg = "SHA-256"
	}
	algs := append([]string{alg}, extraAlgorithms(rec)...)
	if f != nil {
		if galg, _, given := givenChecksum(f); given {
			algs = append(algs, galg)
		}
	}
	size, sums, err := n.measure(ctx, rec.BlobKey, algs)
	if adapter.IsKind(err, adapter.NotFound) {
		return outcomeFailed, missing(err)
	}
	if err != nil {
		return outcomeFailed, adapter.Wrap(adapter.ServiceFailure, err, "reading the bytes of %q", pid).WithPID(pid)
	}
	var formatID, fileName string
	if f != nil {
		formatID, fileName = f.FormatID, f.FileName
		galg, gval, given := givenChecksum(f)
		if (given && sums[galg] != gval) || (f.knownSize() && f.Size != size) {
			n.log.Warn("reindex: the store's listing disagrees with the bytes; the bytes are indexed", "pid", pid, "key", rec.BlobKey,
				"listedSize", f.Size, "size", size, "listedChecksum", f.Checksum.Algorithm+":"+f.Checksum.Value)
		}
	}
	sum := adapter.Checksum{Algorithm: alg, Value: sums[alg]}
	// As in harvestChanged: the other checksums, the system metadata, then the
	// store's modification time.
	if err := n.refreshChecksums(ctx, rec, alg, sums, nil); err != nil {
		return outcomeFailed, err
	}
	_, err = n.cat.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error {
		if sm.Size == uint64(size) && sm.Checksum.Algorithm == alg && strings.EqualFold(sm.Checksum.Value, sum.Value) &&
			(formatID == "" || formatID == sm.FormatID) && (fileName == "" || fileName == sm.FileName) {
			return errUnchanged
		}
		sm.Size, sm.Checksum = uint64(size), sum
		if formatID != "" {
			sm.FormatID = formatID
		}
		if fileName != "" {
			sm.FileName = fileName
		}
		touch(sm)
		return nil
	})
	changed := err == nil
	if err != nil && !errors.Is(err, errUnchanged) {
		return outcomeFailed, err
	}
	if changed {
		n.log.Info("reindex: record updated", "pid", pid, "size", size, "checksum", sum.Algorithm+":"+sum.Value)
	}
	if f != nil {
		if err := n.refreshChecksums(ctx, rec, alg, nil, f); err != nil {
			if changed { // it was updated, and has left a batch's window
				return outcomeUpdated, err
			}
			return outcomeFailed, err
		}
	}
	if changed {
		return outcomeUpdated, nil
	}
	return outcomeUnchanged, nil
}
