package node

import (
	"context"
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
}

// Bookkeeping kept among a resource map's Checksums (never answered by
// getChecksum, which asks only for canonical algorithm labels).
const (
	// datasetSourceKey names the source a package came from.
	datasetSourceKey = "d1bridge:dataset-source"
	// datasetVersionKey is the source's version (or the harvest's
	// fingerprint) the package was registered from.
	datasetVersionKey = "d1bridge:dataset-version"
	// datasetSequenceKey is the source's version number, and
	// datasetOrdinalKey the harvest's: n in the identifiers' "@vn".
	datasetSequenceKey = "d1bridge:dataset-sequence"
	datasetOrdinalKey  = "d1bridge:dataset-ordinal"
	// datasetMembersKey is a digest of the package's members.
	datasetMembersKey = "d1bridge:dataset-members"
	// generatedKey marks science metadata d1bridge wrote (EML).
	generatedKey = "d1bridge:generated"
)

// datasetSource is one source's harvest state.
type datasetSource struct {
	src  DatasetSource
	opts DatasetOptions
	// pass is held for a whole pass; it guards mark and known.
	pass sync.Mutex
	mark time.Time
	// full is when the last walk of everything began.
	full time.Time
	// known are the dataset ids (with the prefix) registered from the source
	// and not archived: after a walk of everything, those it did not list
	// are archived. nil until the first such walk reads them from the
	// catalog.
	known map[string]bool
}

// StartDatasets harvests src under o.Name: when o.Interval is set, a pass now
// and then one Interval after each pass ends, until the node closes.
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
			n.HarvestDatasets(h.ctx, o.Name)
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
// mark of the last complete pass, less an overlap; the first pass after
// start, and then one every FullInterval, asks for everything, which costs
// one catalog lookup per unchanged dataset, and archives the datasets
// registered before that the source no longer holds. Each dataset is
// registered on its own: one that fails is counted and logged, and the mark
// stops before it, so the next pass retries it.
func (n *Node) HarvestDatasets(ctx context.Context, name string) (DatasetReport, error) {
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
	return n.datasetPass(ctx, ds, time.Since(ds.full) >= ds.opts.FullInterval)
}

// datasetPass is one pass; ds.pass is held. full walks everything.
func (n *Node) datasetPass(ctx context.Context, ds *datasetSource, full bool) (DatasetReport, error) {
	o := ds.opts
	start := time.Now()
	var rep DatasetReport
	if !ds.mark.IsZero() && !full {
		rep.Since = ds.mark.Add(-harvestOverlap)
	}
	var marks passMarks
	seen := map[string]bool{}
	account := func(d *Dataset, outcome string, objects int, err error) {
		rep.Objects += objects
		o.Metrics.ObserveHarvestRecord(outcome)
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
			n.log.Warn("harvest: a dataset failed; later passes retry it", "source", o.Name, "dataset", d.ID, "err", err)
		}
	}
	w := &groupWriter{n: n, ctx: ctx, account: account, ids: map[string]bool{}}
	err := ds.src.Walk(ctx, rep.Since, func(d *Dataset) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A dataset's next version reads what its last one wrote.
		if w.ids[d.ID] {
			w.flush()
			w.wait()
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
			seen[o.PIDPrefix+d.ID] = true
		}
		marks.listed(d.Modified)
		return ctx.Err()
	})
	w.flush()
	w.wait()
	if err == nil {
		err = ctx.Err()
	}
	// A dataset that failed may be one of those not listed under their id
	// (a page that could not be read says only its URL): nothing is
	// archived after a walk with failures.
	if x, ok := ds.src.(Exhaustive); err == nil && rep.Failed == 0 && (rep.Since.IsZero() || ok && x.Exhaustive()) {
		err = n.archiveUnlisted(ctx, ds, seen, &rep)
	}
	d := time.Since(start)
	if err != nil {
		o.Metrics.ObserveHarvestPass(metrics.HarvestFailed, d, time.Now())
		n.log.Error("dataset harvest pass failed; the next one lists again from the same mark", "source", o.Name,
			"since", rep.Since, "registered", rep.Registered, "updated", rep.Updated, "failed", rep.Failed, "err", err)
		return rep, err
	}
	if rep.Since.IsZero() {
		ds.full = start
	}
	if mark := marks.mark(start); mark.After(ds.mark) {
		ds.mark = mark
	}
	outcome := metrics.HarvestOK
	if rep.Failed > 0 {
		outcome = metrics.HarvestPartial
	}
	o.Metrics.ObserveHarvestPass(outcome, d, time.Now())
	level := n.log.Debug
	if rep.Registered+rep.Updated+rep.Archived+rep.Failed > 0 {
		level = n.log.Info
	}
	level("dataset harvest pass done", "source", o.Name, "since", rep.Since, "registered", rep.Registered,
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
	head, err := n.lookupHead(ctx, resourceMapPrefix+id)
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
func (n *Node) archiveUnlisted(ctx context.Context, ds *datasetSource, seen map[string]bool, rep *DatasetReport) error {
	if ds.known == nil {
		known, err := n.packagesFrom(ctx, ds.opts.Name)
		if err != nil {
			return err
		}
		ds.known = known
	}
	for _, id := range slices.Sorted(maps.Keys(ds.known)) {
		if seen[id] {
			continue
		}
		objects, err := n.archiveDataset(ctx, id)
		rep.Objects += objects
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.Failed++
			n.log.Warn("harvest: archiving a withdrawn dataset failed; the next full pass retries", "source", ds.opts.Name, "dataset", id, "err", err)
			seen[id] = true // kept known, so the next full pass tries again
			continue
		}
		rep.Archived++
	}
	ds.known = seen
	return nil
}

// packagesFrom are the dataset ids of the unarchived packages the source
// registered, read from the catalog's resource maps.
func (n *Node) packagesFrom(ctx context.Context, source string) (map[string]bool, error) {
	known := map[string]bool{}
	q := adapter.ListQuery{FormatID: datapackage.FormatORE, Count: 1000}
	for {
		page, err := n.cat.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, info := range page.ObjectInfo {
			rec, err := n.cat.Lookup(ctx, info.Identifier)
			if err != nil {
				if adapter.IsKind(err, adapter.NotFound) {
					continue
				}
				return nil, err
			}
			sm := rec.Meta
			if rec.Checksums[datasetSourceKey] != source || sm.ObsoletedBy != "" || sm.Archived {
				continue
			}
			if id, ok := strings.CutPrefix(sm.SeriesID, resourceMapPrefix); ok {
				known[id] = true
			}
		}
		q.Start += len(page.ObjectInfo)
		if len(page.ObjectInfo) == 0 || q.Start >= page.Total {
			return known, nil
		}
	}
}
