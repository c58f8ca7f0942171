package node

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/metrics"
)

// HarvestOptions are how a Lister store is harvested: config.Harvest, plus the
// metrics to report to.
type HarvestOptions struct {
	// Interval is the pause between the end of one background pass and the
	// start of the next; 0 runs no background pass (HarvestOnce and reindex
	// still harvest with these options).
	Interval time.Duration
	// FormatID and RightsHolder fill what the store does not say of an
	// object; Submitter is every harvested object's submitter. Empty:
	// application/octet-stream, the node id, the rights holder.
	FormatID, RightsHolder, Submitter string
	// Readers are granted read on harvested objects; none: only the rights
	// holder and trusted subjects read them.
	Readers []string
	// ChecksumAlgorithm is computed when the store gives no checksum; empty or
	// unknown: SHA-256.
	ChecksumAlgorithm string
	// Metrics records the passes and their records; may be nil.
	Metrics *metrics.Metrics
	// Name is the upstream's: when the catalog has Leases, passes run under
	// the lease "harvest:"+Name, one instance at a time. Empty: "store".
	Name string
	// Holder names this instance in the lease; empty: host, process id and
	// a random part, one per Node.
	Holder string
	// LeaseTTL is how long the lease holds without a renewal: an instance
	// that dies in a pass is replaced after about that long. 0: 30s.
	LeaseTTL time.Duration
}

// HarvestReport is what one pass did.
type HarvestReport struct {
	// Since is what the pass asked the store for: objects modified at or after
	// it; zero asked for everything.
	Since time.Time
	// Mark is the high-water mark after the pass: the next pass asks for
	// objects modified since Mark, less harvestOverlap.
	Mark                                   time.Time
	Registered, Updated, Unchanged, Failed int
	// Epoch is the harvest lease's epoch the pass ran under; 0 when the
	// catalog has no Leases.
	Epoch int64
	// Resumed tells that the pass went on from a checkpoint of a pass that
	// stopped before (on this instance or another), not from the first page.
	Resumed bool
}

// harvestOverlap is how far before the high-water mark a pass starts: the
// store's clock granularity, and objects it commits late with an earlier
// modification time. What the overlap lists again costs one Lookup each.
const harvestOverlap = time.Minute

// harvester runs the node's background work over its store: the harvest of a
// Lister store, and batch reindex (reindex.go).
type harvester struct {
	ctx    context.Context // the node's lifetime
	cancel context.CancelFunc
	jobs   sync.WaitGroup // the harvest loop and a batch reindex

	// pass is held for a whole harvest pass: one at a time, whether the loop,
	// HarvestOnce or a reindex runs it. It guards mark and failing.
	pass sync.Mutex
	// mark is the greatest modification time of the last complete pass (of
	// everything before the earliest record that failed); zero until one.
	mark time.Time
	// failing holds the records that failed, with their error, so that a
	// record failing pass after pass is logged once.
	failing map[string]string
	// holder names this Node in the harvest's lease (HarvestOptions.Holder).
	holder string

	mu       sync.Mutex
	lister   Lister
	opts     HarvestOptions
	stopLoop context.CancelFunc
	loopDone chan struct{}
	metrics  *metrics.Metrics // reindex's
	batch    *reindexBatch    // the batch reindex running, if any
	// datasets are the dataset sources StartDatasets registered, by name.
	datasets map[string]*datasetSource
}

func newHarvester() *harvester {
	ctx, cancel := context.WithCancel(context.Background())
	return &harvester{ctx: ctx, cancel: cancel, failing: map[string]string{}, holder: defaultHolder()}
}

// stopHarvest stops the background harvest and a batch reindex, and waits for
// them and for a pass HarvestOnce runs. Afterwards both refuse to run.
func (n *Node) stopHarvest() {
	h := n.harvest
	h.mu.Lock()
	h.cancel()
	h.mu.Unlock()
	h.jobs.Wait()
	h.pass.Lock() // waits for a pass HarvestOnce runs
	defer h.pass.Unlock()
}

// StartHarvest harvests l with o: when o.Interval is set, a pass now and then
// one Interval after each pass ends, until the node closes. Calling it again
// replaces the lister and the options (the pass running finishes first); the
// high-water mark is kept.
//
// When the catalog has Leases (instances share it), the instances take turns:
// a pass runs under the harvest's lease, and the next background pass is due
// one Interval after the last pass that any of them completed. An instance
// that finds the lease held tries again after the lease's TTL (or Interval,
// when shorter), so that it takes over within about that long when the holder
// dies; one that finds the pass not due waits until it is.
func (n *Node) StartHarvest(l Lister, o HarvestOptions) {
	h := n.harvest
	if _, ok := adapter.CanonicalAlgorithm(o.ChecksumAlgorithm); o.ChecksumAlgorithm != "" && !ok {
		n.log.Warn("harvest: unknown checksum algorithm, SHA-256 used", "checksumAlgorithm", o.ChecksumAlgorithm)
	}
	o = o.withDefaults(n.id)

	h.mu.Lock()
	stop, done := h.stopLoop, h.loopDone
	h.stopLoop, h.loopDone = nil, nil
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.lister, h.opts = l, o
	if o.Interval <= 0 || h.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done = make(chan struct{})
	h.stopLoop, h.loopDone = cancel, done
	h.jobs.Add(1)
	go func() {
		defer h.jobs.Done()
		defer close(done)
		n.harvestLoop(ctx, o.Interval)
	}()
	n.log.Info("harvest started", "interval", o.Interval.String())
}

func (o HarvestOptions) withDefaults(nodeID string) HarvestOptions {
	if o.FormatID == "" {
		o.FormatID = "application/octet-stream"
	}
	if alg, ok := adapter.CanonicalAlgorithm(o.ChecksumAlgorithm); ok {
		o.ChecksumAlgorithm = alg
	} else {
		o.ChecksumAlgorithm = "SHA-256"
	}
	if o.RightsHolder == "" {
		o.RightsHolder = nodeID
	}
	if o.Submitter == "" {
		o.Submitter = o.RightsHolder
	}
	o.Readers = slices.Clone(o.Readers)
	return o
}

func (n *Node) harvestLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Errors are logged and counted by the pass; the next one retries.
		_, err := n.runPass(ctx, false, interval)
		var skipped *passSkipped
		if errors.As(err, &skipped) {
			n.log.Debug("harvest pass skipped", "why", skipped.why, "retry", skipped.retry.String())
			t.Reset(skipped.retry)
			continue
		}
		t.Reset(interval)
	}
}

// harvestSource is the lister and options StartHarvest set, or else the store
// itself with the default options when it is a Lister that no dataset source
// harvests.
func (n *Node) harvestSource() (Lister, HarvestOptions, bool) {
	h := n.harvest
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lister != nil {
		return h.lister, h.opts, true
	}
	if l, ok := n.blobs.(Lister); ok && !h.storeHarvestedAsDatasets() {
		return l, HarvestOptions{}.withDefaults(n.id), true
	}
	return nil, HarvestOptions{}, false
}

// storeHarvestedAsDatasets tells whether a dataset source lists the store's
// own objects (its objects have no Reader of their own): then nothing of
// the store is registered alone. h.mu is held.
func (h *harvester) storeHarvestedAsDatasets() bool {
	for _, ds := range h.datasets {
		if ds.opts.Reader == nil {
			return true
		}
	}
	return false
}

// HarvestOnce runs one harvest pass, after the one running if any. It pages
// through the store's list of objects modified since the high-water mark of
// the last complete pass, less an overlap, and registers in the catalog what is
// new or changed.
//
// Without Leases in the catalog, the mark is kept in memory, so the first pass
// after start lists everything: it costs a catalog Lookup per object, and
// inserts or updates only what is new or changed (an unchanged object is never
// read). Each record is inserted or updated in its own transaction: a pass
// that fails (the store down, its breaker open, the node closing) leaves every
// record registered or not, keeps the old mark, and the next pass lists again
// from there.
//
// With Leases, the pass runs under the lease "harvest:"+Name, renewed while it
// runs, and the mark and the pass in progress are the lease's state: after
// each page, the cursor of the next page and the marks of the pages listed
// are checkpointed with the lease's epoch, so that a pass cut short (the
// store down, the node closing, the instance dying) is resumed from the page
// it stopped at by the next pass, on whichever instance takes the lease, and
// a restart keeps the mark. A checkpointed page whose listing fails
// maxListFailures times in a row, or a store whose paging goes wrong, makes
// the next pass start over from the mark. The pass stops at once, writing no
// further record, when the lease is lost (another instance took it: the
// checkpoint finds another epoch) or may have expired (not renewed within
// most of its TTL); the error's cause is then ErrLeaseLost. When another
// instance holds the lease, no pass runs and the error's cause is
// ErrHarvestBusy.
//
// A record that
// fails alone (its bytes unreadable, its identifier taken) is counted, and the
// mark stops before it, so later passes retry it. The mark is at most the
// time the pass started (d1bridge's clock): an object changed while the pass
// ran, or dated in the future, is listed again by the next pass. A store
// whose paging does not move (a page cursor listed before, or the same
// objects as the page before) fails the pass rather than looping.
//
// The error is the listing's; records that failed are in the report.
func (n *Node) HarvestOnce(ctx context.Context) (HarvestReport, error) {
	return n.harvestOnce(ctx, false)
}

// harvestOnce is HarvestOnce; a full pass lists everything, whatever the mark.
func (n *Node) harvestOnce(ctx context.Context, full bool) (HarvestReport, error) {
	return n.runPass(ctx, full, 0)
}

// runPass is harvestOnce; with due > 0 (the background loop's interval),
// a pass that is not due, or held by another instance, is skipped with a
// *passSkipped error.
func (n *Node) runPass(ctx context.Context, full bool, due time.Duration) (HarvestReport, error) {
	h := n.harvest
	l, o, ok := n.harvestSource()
	if !ok {
		return HarvestReport{}, adapter.Errorf(adapter.NotImplemented, "the store does not list its objects: there is nothing to harvest")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.ctx, cancel)()
	h.pass.Lock()
	defer h.pass.Unlock()
	if h.ctx.Err() != nil {
		return HarvestReport{}, adapter.Errorf(adapter.ServiceFailure, "the node is shutting down")
	}
	lease, st, err := n.takeHarvestLease(ctx, o)
	if err != nil {
		if due > 0 && errors.Is(err, ErrHarvestBusy) {
			return HarvestReport{Mark: h.mark}, &passSkipped{retry: min(due, cmp.Or(o.LeaseTTL, defaultLeaseTTL)), why: err.Error()}
		}
		return HarvestReport{Mark: h.mark}, err
	}
	defer lease.release()
	if due > 0 && !st.due(due) {
		return HarvestReport{Mark: h.mark}, &passSkipped{retry: max(due-time.Since(st.Ended), time.Millisecond), why: "the last pass of the instances sharing the catalog ended at " + st.Ended.Format(time.RFC3339)}
	}
	if lease != nil {
		ctx = lease.ctx
	}
	return n.harvestPass(ctx, l, o, full, lease, st)
}

// harvestPass is one pass, under lease when not nil, from st; h.pass is held.
func (n *Node) harvestPass(ctx context.Context, l Lister, o HarvestOptions, full bool, lease *heldLease, st *harvestState) (HarvestReport, error) {
	h := n.harvest
	began := time.Now()
	p, resumed := st.pass(full)
	start := p.Start // of the whole pass, resumed or not: the mark stays before it
	rep := HarvestReport{Since: p.Since, Epoch: lease.epochOf(), Resumed: resumed}
	marks := p.marks()
	cursor := p.Cursor
	asked := map[string]bool{cursor: true} // the cursors of the pages listed
	var prev []pageEntry                   // the page before
	err := func() error {
		for {
			page, next, err := l.List(ctx, rep.Since, cursor)
			if err != nil {
				lease.listFailed(p)
				return err
			}
			entries := pageEntries(page)
			if len(entries) > 0 && slices.Equal(entries, prev) {
				lease.dropPass()
				return adapter.Errorf(adapter.ServiceFailure, "the store answered the page at cursor %q with the same objects as the page before: its paging does not move", cursor)
			}
			prev = entries
			for i := range page {
				if err := lease.check(ctx); err != nil {
					return err
				}
				f := &page[i]
				outcome, err := n.harvestRecord(ctx, f, o)
				if err != nil && ctx.Err() != nil {
					return ctx.Err() // cut short, not the record's failure
				}
				o.Metrics.ObserveHarvestRecord(outcome)
				switch outcome {
				case outcomeRegistered:
					rep.Registered++
				case outcomeUpdated:
					rep.Updated++
				case outcomeUnchanged:
					rep.Unchanged++
				case outcomeFailed:
					rep.Failed++
					marks.failed(f.Modified)
				}
				n.noteFailure(f, err)
				marks.listed(f.Modified)
			}
			if next == "" {
				return nil
			}
			if asked[next] {
				lease.dropPass()
				return adapter.Errorf(adapter.ServiceFailure, "the store answered the page cursor %q with %q, a page listed before: its paging goes round", cursor, next)
			}
			asked[next] = true
			cursor = next
			lease.pageDone(p, next, marks)
			if err := lease.check(ctx); err != nil {
				return err
			}
		}
	}()
	if lost := lease.lost(); lost != nil {
		err = adapter.Wrap(adapter.ServiceFailure, lost, "the harvest lease was lost: another instance may be harvesting")
	}
	d := time.Since(began) // this instance's share of the pass
	if err != nil {
		o.Metrics.ObserveHarvestPass(metrics.HarvestFailed, d, time.Now())
		rep.Mark = h.mark
		args := []any{"since", rep.Since, "registered", rep.Registered, "updated", rep.Updated, "failed", rep.Failed, "epoch", rep.Epoch, "err", err}
		switch {
		case errors.Is(err, ErrLeaseLost):
			n.log.Warn("harvest pass stopped: the lease was lost", args...)
		case ctx.Err() != nil:
			n.log.Info("harvest pass stopped", args...)
		case lease != nil:
			n.log.Error("harvest pass failed; the next one resumes from its last checkpoint", args...)
		default:
			n.log.Error("harvest pass failed; the next one lists again from the same mark", args...)
		}
		return rep, err
	}
	mark := marks.mark(start)
	if mark.After(h.mark) {
		h.mark = mark
	}
	rep.Mark = h.mark
	lease.passDone(h.mark)
	outcome := metrics.HarvestOK
	if rep.Failed > 0 {
		outcome = metrics.HarvestPartial
	}
	o.Metrics.ObserveHarvestPass(outcome, d, time.Now())
	level := n.log.Debug
	if rep.Registered+rep.Updated+rep.Failed > 0 {
		level = n.log.Info
	}
	level("harvest pass done", "since", rep.Since, "epoch", rep.Epoch, "resumed", rep.Resumed, "registered", rep.Registered, "updated", rep.Updated,
		"unchanged", rep.Unchanged, "failed", rep.Failed, "duration_seconds", d.Seconds())
	return rep, nil
}

// passMarks gathers a pass's modification times for its high-water mark.
type passMarks struct {
	high, lowFailed time.Time // the greatest listed, the earliest that failed
	undatedFailed   bool      // an undated one failed: no mark can pass it
}

func (m *passMarks) listed(t time.Time) {
	if t.After(m.high) {
		m.high = t
	}
}

func (m *passMarks) failed(t time.Time) {
	if t.IsZero() {
		m.undatedFailed = true
	} else if m.lowFailed.IsZero() || t.Before(m.lowFailed) {
		m.lowFailed = t
	}
}

// mark is the pass's high-water mark: everything listed before the earliest
// failure is registered. It never passes the start of the pass: an object
// changed during the pass after it was listed, or dated ahead of the clock,
// is listed again.
func (m *passMarks) mark(start time.Time) time.Time {
	mark := m.high
	if m.undatedFailed {
		mark = time.Time{}
	} else if !m.lowFailed.IsZero() && m.lowFailed.Before(mark) {
		mark = m.lowFailed
	}
	if began := start.Round(0); mark.After(began) {
		mark = began
	}
	return mark
}

// pageEntry is what tells a listed object from another on a page.
type pageEntry struct{ key, modified string }

// pageEntries are a page's objects, to tell a page that comes again.
func pageEntries(page []Found) []pageEntry {
	out := make([]pageEntry, len(page))
	for i, f := range page {
		out[i] = pageEntry{f.Key, modifiedMark(f.Modified)}
	}
	return out
}
