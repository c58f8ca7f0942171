package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/metrics"
)

// reindexPage is how many records a batch reads from the catalog at once (a
// variable for the tests).
var reindexPage = 500

// reindexLogEvery is how often, in records, a batch logs its progress.
const reindexLogEvery = 1000

// reindexRangePages is a range's size, in pages: a batch is cut into ranges
// of about that many records, each a job any instance may run.
const reindexRangePages = 4

// reindexBatch is the progress of a batch reindex this process plans, or of
// one of its ranges.
type reindexBatch struct {
	id                                  string
	done, selected                      atomic.Int64
	updated, unchanged, skipped, failed atomic.Int64
}

// reindexPlan is a batch's job: what it selects.
type reindexPlan struct {
	Batch    string   `json:"batch"`
	By       string   `json:"by"`
	PIDs     []string `json:"pids,omitempty"`
	FormatID string   `json:"formatId,omitempty"`
	From     int64    `json:"from,omitempty"` // milliseconds; 0: open
	To       int64    `json:"to,omitempty"`
	All      bool     `json:"all,omitempty"`
}

// reindexRange is a range's job: its PIDs, or the records of its window
// [From, To) (milliseconds, From 0: open) of format FormatID when set.
type reindexRange struct {
	Batch    string   `json:"batch"`
	PIDs     []string `json:"pids,omitempty"`
	FormatID string   `json:"formatId,omitempty"`
	From     int64    `json:"from,omitempty"`
	To       int64    `json:"to"`
}

func millisOf(t adapter.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func timeOf(ms int64) adapter.Time {
	if ms == 0 {
		return adapter.Time{}
	}
	return adapter.NewTime(time.UnixMilli(ms))
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
// PIDs, filters, all) is checked at once and queued as a batch job in the
// catalog, which any instance sharing it runs: it cuts the selection into
// ranges (chunks of PIDs, or windows of dateSysMetadataModified), queued as
// jobs that every instance works, and waits for them, logging its progress
// every reindexLogEvery records and a summary. One batch runs at a time, and
// another asked for meanwhile is refused (ServiceFailure, with the progress
// of the running one) rather than queued. A batch of all objects over a store
// that lists its objects first runs a full harvest pass (whatever the
// high-water mark), so objects only the store knows are registered.
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
	return n.startReindex(ctx, s, q)
}

// startReindex queues the batch q, unless one is queued or running.
func (n *Node) startReindex(ctx context.Context, s *adapter.Session, q adapter.AdminQuery) error {
	qu, err := n.queue()
	if err != nil {
		return err
	}
	if n.repl.ctx.Err() != nil {
		return adapter.Errorf(adapter.ServiceFailure, "the node is shutting down")
	}
	p := reindexPlan{Batch: uuid.NewString(), By: s.Subject, PIDs: q.PIDs, FormatID: q.FormatID,
		From: millisOf(q.FromDate), To: millisOf(q.ToDate), All: q.All}
	payload, err := json.Marshal(p)
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "encoding the reindex batch")
	}
	_, err = qu.Enqueue(ctx, NewJob{Kind: jobReindex, Key: "batch", Payload: payload, Weight: 1, MaxAttempts: 3}, nil)
	if errors.Is(err, ErrJobActive) {
		h := n.harvest
		h.mu.Lock()
		b := h.batch
		h.mu.Unlock()
		if b != nil {
			return adapter.Errorf(adapter.ServiceFailure, "a reindex is already running (%d of %d done)", b.done.Load(), b.selected.Load())
		}
		c, err := qu.Count(ctx, jobReindexRange, "")
		if err != nil {
			return adapter.Errorf(adapter.ServiceFailure, "a reindex is already running")
		}
		return adapter.Errorf(adapter.ServiceFailure, "a reindex is already running on another instance (%d of its ranges to do)", c.Active())
	}
	if err != nil {
		return adapter.Wrap(adapter.ServiceFailure, err, "queuing the reindex batch")
	}
	n.log.Info("reindex queued", append(selection(q), "by", s.Subject, "batch", p.Batch)...)
	n.workReindex()
	return nil
}

// workReindex makes this node work the reindex jobs: one batch and one range
// at a time.
func (n *Node) workReindex() {
	o := workOptions(n.repl.settings(), 1)
	n.work(jobReindex, o, reindexBatchWork{n})
	n.work(jobReindexRange, o, reindexRangeWork{n})
}

// reindexRunning marks a reindex job running here in the metrics, until the
// function it returns is called; the metrics show one batch running while any
// job of one runs.
func (n *Node) reindexRunning(m *metrics.Metrics) func() {
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reindexing == 0 {
		r.endReindex = m.ReindexStarted()
	}
	r.reindexing++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.reindexing--; r.reindexing == 0 {
			r.endReindex()
		}
	}
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

// reindexBatchWork runs the batch jobs.
type reindexBatchWork struct{ n *Node }

// Run plans the batch (after a harvest pass for all), unless an earlier
// attempt did, and waits for its ranges to end.
func (w reindexBatchWork) Run(ctx context.Context, j *Job) error {
	n := w.n
	var p reindexPlan
	if err := json.Unmarshal(j.Payload, &p); err != nil {
		return Permanent(fmt.Errorf("the reindex batch cannot be read: %w", err))
	}
	qu, err := n.queue()
	if err != nil {
		return Permanent(err)
	}
	b := &reindexBatch{id: p.Batch}
	h := n.harvest
	h.mu.Lock()
	h.batch = b
	m := h.metrics
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.batch = nil
		h.mu.Unlock()
	}()
	defer n.reindexRunning(m)()
	start := time.Now()
	q := adapter.AdminQuery{PIDs: p.PIDs, FormatID: p.FormatID, FromDate: timeOf(p.From), ToDate: timeOf(p.To), All: p.All}
	n.log.Info("reindex started", append(selection(q), "by", p.By, "batch", p.Batch, "attempt", j.Attempt)...)
	planned, err := qu.Count(ctx, jobReindexRange, p.Batch+"/")
	if err != nil {
		return err
	}
	ranges := planned.Active() + planned.Done + planned.Failed
	if ranges == 0 {
		if ranges, err = n.planReindex(ctx, qu, b, p, m); err != nil {
			if ctx.Err() == nil {
				n.log.Error("reindex: planning the batch failed", "batch", p.Batch, "err", err)
			}
			return err
		}
	}
	var c JobCounts
	for {
		if c, err = qu.Count(ctx, jobReindexRange, p.Batch+"/"); err == nil && c.Active() == 0 {
			break
		}
		select {
		case <-ctx.Done():
			n.log.Info("reindex stopped: the node is closing; it goes on here or on another instance", "batch", p.Batch,
				"done", b.done.Load(), "selected", b.selected.Load())
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	args := []any{"batch", p.Batch, "ranges", ranges, "rangesFailed", c.Failed, "selected", b.selected.Load(), "done", b.done.Load(),
		"updated", b.updated.Load(), "unchanged", b.unchanged.Load(), "skipped", b.skipped.Load(), "failed", b.failed.Load(),
		"duration_seconds", time.Since(start).Seconds()}
	if c.Failed > 0 {
		n.log.Error("reindex done; some ranges failed", args...)
	} else {
		n.log.Info("reindex done", args...)
	}
	return nil
}

func (w reindexBatchWork) Failed(ctx context.Context, j *Job, err error) {
	w.n.log.Error("reindex batch failed", "job", j.ID, "attempts", j.Attempt, "err", err)
}

// planReindex cuts the batch into ranges of about reindexRangePages pages
// and queues them; it returns how many. A window's ranges split it at the
// dates of every so many records, so records of one date stay in one range.
func (n *Node) planReindex(ctx context.Context, qu Queue, b *reindexBatch, p reindexPlan, m *metrics.Metrics) (int, error) {
	if p.All {
		if _, _, ok := n.harvestSource(); ok {
			if _, err := n.harvestOnce(ctx, true); err != nil && ctx.Err() == nil && !adapter.IsKind(err, adapter.NotImplemented) {
				n.log.Warn("reindex: the harvest pass before it failed; the catalog is reindexed as it is", "err", err)
			}
		}
	}
	// The window ends a millisecond (the dates' precision) after now, and the
	// batch starts once that moment has passed: a record written until now is
	// in it, one the batch changes gets a later date and leaves it.
	end := time.Now().Add(time.Millisecond)
	time.Sleep(time.Until(end))
	size := max(reindexPage*reindexRangePages, 1)
	var ranges []reindexRange
	if len(p.PIDs) > 0 {
		for pids := range slices.Chunk(p.PIDs, size) {
			ranges = append(ranges, reindexRange{Batch: p.Batch, PIDs: pids})
		}
		b.selected.Store(int64(len(p.PIDs)))
		m.SetReindexSelected(len(p.PIDs))
	} else {
		upper := end.UnixMilli()
		if p.To != 0 && p.To < upper {
			upper = p.To
		}
		lq := adapter.ListQuery{FromDate: timeOf(p.From), ToDate: timeOf(upper), FormatID: p.FormatID, Count: 1}
		l, err := n.cat.List(ctx, lq)
		if err != nil {
			return 0, err
		}
		b.selected.Store(int64(l.Total))
		m.SetReindexSelected(l.Total)
		from := p.From
		for at := size; at < l.Total; at += size {
			lq.Start = at
			l, err := n.cat.List(ctx, lq)
			if err != nil {
				return 0, err
			}
			if len(l.ObjectInfo) == 0 {
				break
			}
			if d := l.ObjectInfo[0].DateSysMetadataModified.UnixMilli(); d > from {
				ranges = append(ranges, reindexRange{Batch: p.Batch, FormatID: p.FormatID, From: from, To: d})
				from = d
			}
		}
		ranges = append(ranges, reindexRange{Batch: p.Batch, FormatID: p.FormatID, From: from, To: upper})
	}
	// All ranges or none: a batch that finds some planned does not plan
	// again, so a plan cut short would leave records out.
	jobs := make([]NewJob, len(ranges))
	for i, r := range ranges {
		payload, err := json.Marshal(r)
		if err != nil {
			return 0, err
		}
		jobs[i] = NewJob{Kind: jobReindexRange, Key: fmt.Sprintf("%s/%06d", p.Batch, i), Payload: payload, MaxAttempts: 3}
	}
	if err := qu.EnqueueAll(ctx, jobs); err != nil {
		return 0, err
	}
	n.log.Info("reindex planned", "batch", p.Batch, "selected", b.selected.Load(), "ranges", len(ranges))
	return len(ranges), nil
}

// reindexRangeWork runs the range jobs.
type reindexRangeWork struct{ n *Node }

func (w reindexRangeWork) Run(ctx context.Context, j *Job) error {
	n := w.n
	var r reindexRange
	if err := json.Unmarshal(j.Payload, &r); err != nil {
		return Permanent(fmt.Errorf("the reindex range cannot be read: %w", err))
	}
	h := n.harvest
	h.mu.Lock()
	b, m := h.batch, h.metrics
	h.mu.Unlock()
	if b == nil || b.id != r.Batch { // planned by another instance: counted here alone
		b = &reindexBatch{id: r.Batch}
	}
	defer n.reindexRunning(m)()
	before := b.done.Load()
	if len(r.PIDs) > 0 {
		for _, pid := range r.PIDs {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			n.reindexStep(ctx, b, pid, m)
		}
	} else if err := n.reindexWindow(ctx, b, timeOf(r.From), timeOf(r.To), r.FormatID, m); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("reindex: a range stopped; it is tried again", "batch", r.Batch, "range", j.Key, "attempt", j.Attempt, "err", err)
		}
		return err
	}
	n.log.Debug("reindex range done", "batch", r.Batch, "range", j.Key, "records", b.done.Load()-before)
	return nil
}

func (w reindexRangeWork) Failed(ctx context.Context, j *Job, err error) {
	w.n.log.Error("reindex range failed", "range", j.Key, "attempts", j.Attempt, "err", err)
}

// reindexWindow reindexes the records of format formatID (any when empty)
// modified in [from, to), in listObjects order. A changed record leaves the window (its
// new dateSysMetadataModified is after end), so the pages are read by date: from
// the date of the last record handled, skipping the records of that date that
// were handled and stayed.
func (n *Node) reindexWindow(ctx context.Context, b *reindexBatch, from, to adapter.Time, formatID string, m *metrics.Metrics) error {
	kept := 0                 // records of date from, handled, still in the window
	seen := map[string]bool{} // the PIDs of date from, handled
	for {
		l, err := n.cat.List(ctx, adapter.ListQuery{FromDate: from, ToDate: to, FormatID: formatID, Start: kept, Count: reindexPage})
		if err != nil {
			return err
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
	if l, _, ok := n.harvestSource(); ok && inStore(rec.BlobKey) {
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
