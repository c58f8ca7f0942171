package node

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/metrics"
)

// DatasetReport is what one pass over a dataset source did.
type DatasetReport struct {
	// Since is what the pass asked the source for; zero: everything.
	Since time.Time
	// Registered datasets are new; Updated ones got a new version; Archived
	// ones were withdrawn; Unchanged ones cost one catalog lookup.
	Registered, Updated, Archived, Unchanged, Failed int
	// Objects is how many objects (data, science metadata, resource maps) the
	// pass registered.
	Objects int
	// Epoch is the epoch of the source's lease the pass ran under; 0 when
	// the catalog has no Leases.
	Epoch int64
}

// datasetLeasePrefix begins the name of a dataset source's lease.
const datasetLeasePrefix = "datasets:"

// Bookkeeping kept among a resource map's Checksums (never answered by
// getChecksum, which asks only for canonical algorithm labels).
const (
	// datasetSourceKey names the source a package came from.
	datasetSourceKey = "d1bridge:dataset-source"
	// datasetIDKey is the dataset's id with the prefix, whatever its
	// generation (D for D~2).
	datasetIDKey = "d1bridge:dataset-id"
	// datasetVersionKey is the source's version (or the harvest's
	// fingerprint) the package was registered from.
	datasetVersionKey = "d1bridge:dataset-version"
	// datasetSequenceKey is the source's version number, and
	// datasetOrdinalKey the harvest's: n in the identifiers' "@vn".
	datasetSequenceKey = "d1bridge:dataset-sequence"
	datasetOrdinalKey  = "d1bridge:dataset-ordinal"
	// datasetMembersKey is a digest of the package's members.
	datasetMembersKey = "d1bridge:dataset-members"
	// datasetKeysKey is a digest of where its files are (keysOf).
	datasetKeysKey = "d1bridge:dataset-keys"
	// datasetPageKey is where the source read the dataset (Dataset.Page).
	datasetPageKey = "d1bridge:dataset-page"
	// generatedKey marks science metadata d1bridge wrote (EML).
	generatedKey = "d1bridge:generated"
)

// datasetSource is one source's harvest state.
type datasetSource struct {
	src  DatasetSource
	opts DatasetOptions
	// pass is held for a whole pass; it guards st, epoch and known.
	pass sync.Mutex
	// st is the source's mark, and when its last pass ended and its last
	// walk of everything began, as this instance last knew them. With
	// Leases, the lease's state is the source's, and st follows it.
	st harvestState
	// epoch is the epoch of the source's lease this instance last took:
	// when the next is not the one after it, another instance held the
	// lease in between, and known may be stale.
	epoch int64
	// known are the dataset ids (with the prefix) registered from the source
	// and not archived, with their pages (Dataset.Page, or ""): after a walk
	// of everything, those it did not list are archived. nil until it is
	// first needed, when it is read from the catalog.
	known map[string]string
}

// StartDatasets harvests src under o.Name: when o.Interval is set, a pass now
// and then one Interval after each pass ends, until the node closes.
//
// When the catalog has Leases (instances share it), the instances take turns
// as they do for the store's harvest (StartHarvest): a pass runs under the
// source's lease, the next one is due one Interval after the last pass any
// of them completed, and an instance that finds the lease held tries again
// after its TTL (or Interval, when shorter).
func (n *Node) StartDatasets(src DatasetSource, o DatasetOptions) {
	h := n.harvest
	o = o.withDefaults(n.id)
	if o.Reader != nil {
		mark := sourceKeyMark + o.Name + "/"
		src = keyed{src, mark}
		n.sources.Lock()
		if n.sources.readers == nil {
			n.sources.readers = map[string]Reader{}
		}
		n.sources.readers[mark] = o.Reader
		n.sources.Unlock()
	}
	ds := &datasetSource{src: src, opts: o}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.datasets == nil {
		h.datasets = map[string]*datasetSource{}
	}
	h.datasets[o.Name] = ds
	if o.Interval <= 0 || h.ctx.Err() != nil {
		return
	}
	h.jobs.Add(1)
	go func() {
		defer h.jobs.Done()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
			// Errors are logged and counted by the pass; the next one retries.
			_, err := n.runDatasets(h.ctx, o.Name, o.Interval)
			var skipped *passSkipped
			if errors.As(err, &skipped) {
				n.log.Debug("dataset harvest pass skipped", "source", o.Name, "why", skipped.why, "retry", skipped.retry.String())
				t.Reset(skipped.retry)
				continue
			}
			t.Reset(o.Interval)
		}
	}()
	n.log.Info("dataset harvest started", "source", o.Name, "interval", o.Interval.String())
}

func (o DatasetOptions) withDefaults(nodeID string) DatasetOptions {
	h := HarvestOptions{RightsHolder: o.RightsHolder, Submitter: o.Submitter, ChecksumAlgorithm: o.ChecksumAlgorithm}.withDefaults(nodeID)
	o.RightsHolder, o.Submitter, o.ChecksumAlgorithm = h.RightsHolder, h.Submitter, h.ChecksumAlgorithm
	o.Readers = slices.Clone(o.Readers)
	if o.FullInterval <= 0 {
		o.FullInterval = 24 * time.Hour
	}
	return o
}

// HarvestDatasets runs one pass over the source named name, after the one
// running if any. A pass asks for the datasets changed since the high-water
// mark of the last complete pass, less an overlap; the first pass, and then
// one every FullInterval, asks for everything, which costs one catalog
// lookup per unchanged dataset, and archives the datasets registered before
// that the source no longer holds. Each dataset is registered on its own:
// one that fails is counted and logged, and the mark stops before it, so the
// next pass retries it; its later versions wait for it, counted failed too.
//
// Without Leases in the catalog, the mark and the time of the last walk of
// everything are kept in memory: the first pass after start walks
// everything. With Leases, the pass runs under the lease "datasets:"+Name,
// renewed while it runs, and they are the lease's state, so that a restart,
// or another instance sharing the catalog, goes on from them. A source's walk
// has no cursor to resume from (DatasetSource.Walk takes none), so the
// state is checkpointed once per pass, when it completes: a pass cut short
// (the source down, the node closing, the instance dying) is walked again
// from the same mark by the next pass, on whichever instance takes the
// lease, and what it registered costs that pass one lookup per dataset. The
// pass stops at once, writing nothing more (a catalog write in flight is
// cancelled), when the lease is lost (another instance took it) or may have
// expired (not renewed within most of its TTL); the error's cause is then
// ErrLeaseLost. When another instance holds the lease, no pass runs and the
// error's cause is ErrHarvestBusy.
func (n *Node) HarvestDatasets(ctx context.Context, name string) (DatasetReport, error) {
	return n.runDatasets(ctx, name, 0)
}

// runDatasets is HarvestDatasets; with due > 0 (the background loop's
// interval), a pass that is not due, or whose lease another instance holds,
// is skipped with a *passSkipped error.
func (n *Node) runDatasets(ctx context.Context, name string, due time.Duration) (DatasetReport, error) {
	h := n.harvest
	h.mu.Lock()
	ds := h.datasets[name]
	h.mu.Unlock()
	if ds == nil {
		return DatasetReport{}, adapter.Errorf(adapter.NotFound, "no dataset source is named %q", name)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.ctx, cancel)()
	ds.pass.Lock()
	defer ds.pass.Unlock()
	if h.ctx.Err() != nil {
		return DatasetReport{}, adapter.Errorf(adapter.ServiceFailure, "the node is shutting down")
	}
	lease, st, err := n.takeDatasetLease(ctx, ds)
	if err != nil {
		if due > 0 && errors.Is(err, ErrHarvestBusy) {
			return DatasetReport{}, &passSkipped{retry: min(due, cmp.Or(ds.opts.LeaseTTL, defaultLeaseTTL)), why: err.Error()}
		}
		return DatasetReport{}, err
	}
	defer lease.release()
	if due > 0 && !st.due(due) {
		return DatasetReport{Epoch: lease.epochOf()}, &passSkipped{retry: max(due-time.Since(st.Ended), time.Millisecond),
			why: "the last pass of the instances sharing the catalog ended at " + st.Ended.Format(time.RFC3339)}
	}
	if lease != nil {
		ctx = lease.ctx
	}
	rep, err := n.datasetPass(ctx, ds, lease, st)
	ds.st = *st
	return rep, err
}

// takeDatasetLease takes the source's lease when the catalog has Leases, and
// returns it with the source's state: the lease's, moved on to what this
// instance knows when that is later (its last checkpoint failed). A catalog
// without them gives a nil lease and the state in memory. ds.pass is held;
// the error's cause is ErrHarvestBusy when another instance holds the lease.
func (n *Node) takeDatasetLease(ctx context.Context, ds *datasetSource) (*heldLease, *harvestState, error) {
	ls, ok := n.cat.(Leases)
	if !ok {
		return nil, &ds.st, nil
	}
	o := ds.opts
	hl, err := n.takeLease(ctx, ls, leaseTerms{name: datasetLeasePrefix + o.Name, holder: cmp.Or(o.Holder, n.harvest.holder),
		ttl:       cmp.Or(o.LeaseTTL, defaultLeaseTTL),
		held:      func(held bool, epoch int64) { o.Metrics.SetDatasetLease(o.Name, held, epoch) },
		elsewhere: o.Metrics.ObserveHarvestElsewhere})
	if err != nil {
		return nil, nil, err
	}
	st := &hl.st
	st.Pass = nil // a walk has no cursor: there is no pass to resume
	if ds.st.Mark.After(st.Mark) {
		st.Mark = ds.st.Mark
	}
	if ds.st.Full.After(st.Full) {
		st.Full = ds.st.Full
	}
	if hl.epoch != ds.epoch+1 {
		// Another instance held the lease since this one's last pass: it
		// may have registered or archived datasets, so the next walk of
		// everything reads from the catalog which ones came from the source.
		ds.known = nil
	}
	ds.epoch = hl.epoch
	return hl, st, nil
}

// datasetPass is one pass from st, under lease when not nil; ds.pass is
// held. It walks everything when the last walk of everything began
// FullInterval ago or more (or never did).
func (n *Node) datasetPass(ctx context.Context, ds *datasetSource, lease *heldLease, st *harvestState) (DatasetReport, error) {
	o := ds.opts
	start := time.Now()
	rep := DatasetReport{Epoch: lease.epochOf()}
	if full := time.Since(st.Full) >= o.FullInterval; !st.Mark.IsZero() && !full {
		rep.Since = st.Mark.Add(-harvestOverlap)
	}
	var marks passMarks
	seen := map[string]string{} // dataset id → page, as known
	// Datasets a version of which failed: their later versions wait for the
	// next pass. Registered now, one would follow the version before the
	// failed one, which would then be passed over as older.
	failed := map[string]bool{}
	account := func(d *Dataset, outcome string, objects int, err error) {
		if outcome == outcomeFailed && ctx.Err() != nil {
			return // cut short (the lease lost, the node closing), not the dataset's failure
		}
		rep.Objects += objects
		o.Metrics.ObserveHarvestRecord(outcome)
		if ds.known != nil && (outcome == outcomeRegistered || outcome == outcomeUpdated) {
			ds.known[datasetPID(o, d.ID)] = d.Page // a walk of only what changed keeps it known too
		}
		switch outcome {
		case outcomeRegistered:
			rep.Registered++
		case outcomeUpdated:
			rep.Updated++
		case outcomeArchived:
			rep.Archived++
		case outcomeUnchanged, outcomeSkipped:
			rep.Unchanged++
		case outcomeFailed:
			rep.Failed++
			marks.failed(d.Modified)
			if d.ID != "" {
				failed[d.ID] = true
			}
			n.log.Warn("harvest: a dataset failed; later passes retry it", "source", o.Name, "dataset", d.ID, "err", err)
		}
	}
	w := &groupWriter{n: n, ctx: ctx, account: account, ids: map[string]bool{}}
	err := ds.src.Walk(ctx, rep.Since, func(d *Dataset) error {
		if err := lease.check(ctx); err != nil {
			return err
		}
		if errors.Is(d.Problem, ErrNotADataset) {
			id, err := n.describedAt(ctx, ds, d.Page)
			switch {
			case err != nil:
				account(d, outcomeFailed, 0, err)
			case id != "":
				seen[id] = d.Page
				account(d, outcomeFailed, 0, adapter.Errorf(adapter.ServiceFailure,
					"the page %q no longer describes the dataset %q, which stays as it was registered", d.Page, id))
			}
			return ctx.Err()
		}
		// A dataset's next version reads what its last one wrote.
		if w.ids[d.ID] {
			w.flush()
			w.wait()
		}
		if failed[d.ID] {
			account(d, outcomeFailed, 0, adapter.Errorf(adapter.ServiceFailure, "an earlier version of dataset %q failed in this pass", d.ID))
			return ctx.Err()
		}
		outcome, b, err := n.prepareDataset(ctx, d, o)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if b != nil {
			w.add(prepared{d, outcome, b})
		} else {
			account(d, outcome, 0, err)
		}
		if d.ID != "" && !d.Deleted {
			seen[datasetPID(o, d.ID)] = d.Page
		}
		marks.listed(d.Modified)
		return ctx.Err()
	})
	w.flush()
	w.wait()
	if err == nil {
		err = lease.check(ctx)
	}
	// A dataset that failed may be one of those not listed under their id
	// (a page that could not be read says only its URL): nothing is
	// archived after a walk with failures.
	if x, ok := ds.src.(Exhaustive); err == nil && rep.Failed == 0 && (rep.Since.IsZero() || ok && x.Exhaustive()) {
		err = n.archiveUnlisted(ctx, ds, lease, seen, &rep)
	}
	if lost := lease.lost(); lost != nil {
		err = adapter.Wrap(adapter.ServiceFailure, lost, "the harvest lease of the dataset source %q was lost: another instance may be harvesting it", o.Name)
	}
	d := time.Since(start)
	if err != nil {
		o.Metrics.ObserveHarvestPass(metrics.HarvestFailed, d, time.Now())
		args := []any{"source", o.Name, "since", rep.Since, "registered", rep.Registered, "updated", rep.Updated, "failed", rep.Failed,
			"epoch", rep.Epoch, "err", err}
		switch {
		case errors.Is(err, ErrLeaseLost):
			n.log.Warn("dataset harvest pass stopped: the lease was lost", args...)
		case ctx.Err() != nil:
			n.log.Info("dataset harvest pass stopped", args...)
		default:
			n.log.Error("dataset harvest pass failed; the next one lists again from the same mark", args...)
		}
		return rep, err
	}
	if rep.Since.IsZero() {
		st.Full = start
	}
	if mark := marks.mark(start); mark.After(st.Mark) {
		st.Mark = mark
	}
	st.Ended = time.Now()
	lease.passDone(st.Mark) // the source's one checkpoint
	outcome := metrics.HarvestOK
	if rep.Failed > 0 {
		outcome = metrics.HarvestPartial
	}
	o.Metrics.ObserveHarvestPass(outcome, d, time.Now())
	level := n.log.Debug
	if rep.Registered+rep.Updated+rep.Archived+rep.Failed > 0 {
		level = n.log.Info
	}
	level("dataset harvest pass done", "source", o.Name, "since", rep.Since, "epoch", rep.Epoch, "registered", rep.Registered,
		"updated", rep.Updated, "archived", rep.Archived, "unchanged", rep.Unchanged, "failed", rep.Failed,
		"objects", rep.Objects, "duration_seconds", d.Seconds())
	return rep, nil
}

// groupDatasets is how many datasets' batches are written in one catalog
// transaction: one commit (one fsync) for all of them.
const groupDatasets = 64

// prepared is a dataset whose batch is ready to write.
type prepared struct {
	d       *Dataset
	outcome string
	b       *Batch
}

// groupWriter writes the batches a pass prepares, groupDatasets datasets
// in one transaction (one commit, one fsync, for all of them), each group
// while the pass prepares the next. Only the pass's goroutine calls it.
type groupWriter struct {
	n       *Node
	ctx     context.Context
	account func(d *Dataset, outcome string, objects int, err error)
	group   []prepared
	// ids are the datasets of the group gathered and of the one being
	// written: another version of one of them waits until it is written.
	ids     map[string]bool
	writing chan []written // the group being written, if any
}

// written is what became of one dataset of a group.
type written struct {
	d       *Dataset
	outcome string
	objects int
	err     error
}

func (w *groupWriter) add(p prepared) {
	w.group = append(w.group, p)
	w.ids[p.d.ID] = true
	if len(w.group) >= groupDatasets {
		w.flush()
	}
}

// flush starts writing the group gathered, after the one being written.
func (w *groupWriter) flush() {
	w.wait()
	if len(w.group) == 0 {
		return
	}
	group := w.group
	w.group = nil
	w.writing = make(chan []written, 1)
	go func(out chan<- []written) { out <- w.n.applyGroup(w.ctx, group) }(w.writing)
}

// wait waits for the group being written and accounts for its datasets.
func (w *groupWriter) wait() {
	if w.writing == nil {
		return
	}
	for _, r := range <-w.writing {
		w.account(r.d, r.outcome, r.objects, r.err)
		delete(w.ids, r.d.ID)
	}
	w.writing = nil
	for _, p := range w.group {
		w.ids[p.d.ID] = true
	}
}

// applyGroup writes the group's batches in one transaction. When that
// fails, it writes each batch alone, so that one dataset the catalog refuses
// does not hold back the others.
func (n *Node) applyGroup(ctx context.Context, group []prepared) []written {
	out := make([]written, len(group))
	bs := make([]*Batch, len(group))
	for i, g := range group {
		bs[i] = g.b
		out[i] = written{d: g.d, outcome: g.outcome}
	}
	if err := ctx.Err(); err != nil { // the pass was cut short: nothing more is written
		for i := range out {
			out[i].outcome, out[i].err = outcomeFailed, err
		}
		return out
	}
	counts, err := n.applyBatches(ctx, bs)
	if err == nil {
		for i := range out {
			out[i].objects = counts[i]
		}
		return out
	}
	for i, g := range group {
		if err := ctx.Err(); err != nil {
			out[i].outcome, out[i].err = outcomeFailed, err
			continue
		}
		counts, err := n.applyBatches(ctx, []*Batch{g.b})
		if err != nil {
			out[i].outcome, out[i].err = outcomeFailed, err
			continue
		}
		out[i].objects = counts[0]
	}
	return out
}

// archiveDataset archives a withdrawn dataset that a walk of everything no
// longer lists; it returns how many objects it archived.
func (n *Node) archiveDataset(ctx context.Context, id string) (int, error) {
	_, _, head, err := n.datasetHead(ctx, id)
	if err != nil || head == nil || head.Meta.Archived {
		return 0, err
	}
	b, err := n.withdrawal(ctx, head)
	if err != nil {
		return 0, err
	}
	counts, err := n.applyBatches(ctx, []*Batch{b})
	if err != nil {
		return 0, err
	}
	return counts[0], nil
}

// archiveUnlisted archives the datasets of the source that a walk of
// everything did not list. The first time, the catalog says which datasets
// came from the source: every resource map's head that names it.
func (n *Node) archiveUnlisted(ctx context.Context, ds *datasetSource, lease *heldLease, seen map[string]string, rep *DatasetReport) error {
	if err := n.loadKnown(ctx, ds); err != nil {
		return err
	}
	// A walk of everything that found nothing is a source out of sight (an
	// unmounted directory, an API answering an empty page) far more often
	// than every dataset withdrawn at once, and archiving cannot be undone.
	if len(seen) == 0 && len(ds.known) > 0 {
		return adapter.Errorf(adapter.ServiceFailure, "the dataset source %q listed no dataset, and %d are registered from it: "+
			"nothing is archived (if they are all withdrawn, archive them through the API)", ds.opts.Name, len(ds.known))
	}
	for _, id := range slices.Sorted(maps.Keys(ds.known)) {
		if _, ok := seen[id]; ok {
			continue
		}
		if err := lease.check(ctx); err != nil {
			return err
		}
		objects, err := n.archiveDataset(ctx, id)
		rep.Objects += objects
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.Failed++
			n.log.Warn("harvest: archiving a withdrawn dataset failed; the next full pass retries", "source", ds.opts.Name, "dataset", id, "err", err)
			seen[id] = ds.known[id] // kept known, so the next full pass tries again
			continue
		}
		rep.Archived++
	}
	ds.known = seen
	return nil
}

// loadKnown reads ds.known from the catalog when it is not in memory.
func (n *Node) loadKnown(ctx context.Context, ds *datasetSource) error {
	if ds.known != nil {
		return nil
	}
	known, err := n.packagesFrom(ctx, ds.opts.Name)
	if err != nil {
		return err
	}
	ds.known = known
	return nil
}

// describedAt is the id of the registered dataset the source read at page,
// or "" for none.
func (n *Node) describedAt(ctx context.Context, ds *datasetSource, page string) (string, error) {
	if page == "" {
		return "", nil
	}
	if err := n.loadKnown(ctx, ds); err != nil {
		return "", err
	}
	for id, p := range ds.known {
		if p == page {
			return id, nil
		}
	}
	return "", nil
}

// packagesFrom are the dataset ids of the unarchived packages the source
// registered, with their pages, read from the catalog's resource maps.
func (n *Node) packagesFrom(ctx context.Context, source string) (map[string]string, error) {
	known := map[string]string{}
	err := walkList(ctx, n.cat, adapter.ListQuery{FormatID: datapackage.FormatORE}, 1000, func(info adapter.ObjectInfo) error {
		rec, err := n.cat.Lookup(ctx, info.Identifier)
		if err != nil {
			if adapter.IsKind(err, adapter.NotFound) {
				return nil
			}
			return err
		}
		sm := rec.Meta
		if rec.Checksums[datasetSourceKey] != source || sm.ObsoletedBy != "" || sm.Archived {
			return nil
		}
		if id := rec.Checksums[datasetIDKey]; id != "" {
			known[id] = rec.Checksums[datasetPageKey]
		} else if id, ok := strings.CutPrefix(sm.SeriesID, resourceMapPrefix); ok {
			known[id] = "" // registered before datasetIDKey: the first generation
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return known, nil
}
