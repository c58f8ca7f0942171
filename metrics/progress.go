package metrics

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Progress is what the node's background work has done since the process
// started, as the status page shows it: the same counts the harvest and
// reindex series export, kept beside them so that reading them needs no
// registry.
type Progress struct {
	// HarvestPasses and HarvestRecords count passes and records by outcome.
	HarvestPasses, HarvestRecords map[string]int64
	// HarvestLastSuccess is when the last pass that listed the whole store
	// ended; zero before the first.
	HarvestLastSuccess time.Time
	// HarvestLastDuration is how long the last pass (any outcome) took.
	HarvestLastDuration time.Duration
	// ReindexRunning is whether a batch reindex runs; ReindexSelected and
	// ReindexDone are the records the running (or last) batch selected and
	// has handled (records of single-PID reindexes during a batch count too).
	ReindexRunning               bool
	ReindexSelected, ReindexDone int64
	// ReindexRecords counts reindexed records by outcome.
	ReindexRecords map[string]int64
}

// progress is the state behind Progress.
type progress struct {
	mu                  sync.Mutex
	harvestPasses       map[string]int64
	harvestRecords      map[string]int64
	harvestLast         time.Time
	harvestLastDuration time.Duration
	reindexRecords      map[string]int64
	reindexRunning      bool
	reindexSelected     int64
	reindexDone         int64
}

func (p *progress) count(m *map[string]int64, outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[outcome]++
}

// Progress returns the harvest and reindex counts; a nil Metrics has none.
func (m *Metrics) Progress() Progress {
	if m == nil {
		return Progress{}
	}
	p := &m.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	return Progress{
		HarvestPasses: maps.Clone(p.harvestPasses), HarvestRecords: maps.Clone(p.harvestRecords),
		HarvestLastSuccess: p.harvestLast, HarvestLastDuration: p.harvestLastDuration,
		ReindexRunning: p.reindexRunning, ReindexSelected: p.reindexSelected, ReindexDone: p.reindexDone,
		ReindexRecords: maps.Clone(p.reindexRecords),
	}
}

// readiness is the function behind d1bridge_ready.
type readiness struct{ f atomic.Pointer[func() bool] }

func (r *readiness) value() float64 {
	f := r.f.Load()
	if f == nil {
		return math.NaN() // not wired: unknown, which no alert takes for not ready
	}
	if (*f)() {
		return 1
	}
	return 0
}

// SetReadiness sets what d1bridge_ready reports at each scrape: 1 when ready
// returns true (the node would answer /readyz with 200), else 0. Until it is
// set the gauge is NaN. ready is called at every scrape, so it should keep
// its answer for a moment (as /readyz does).
func (m *Metrics) SetReadiness(ready func() bool) {
	if m == nil {
		return
	}
	m.ready.f.Store(&ready)
}
