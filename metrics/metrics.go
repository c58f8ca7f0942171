// Package metrics holds every Prometheus collector of d1bridge in one struct, built
// from an injected registerer. Series are labelled by operation name, never by path.
package metrics

import (
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics is the set of collectors. A nil *Metrics observes nothing, so tests and
// tools can run without a registry.
type Metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	bytesIn       *prometheus.CounterVec
	bytesOut      *prometheus.CounterVec
	inFlight      prometheus.Gauge
	authDecisions *prometheus.CounterVec
	ldapSearches  *prometheus.CounterVec
	ldapDuration  prometheus.Histogram
	upstreamReqs  *prometheus.CounterVec
	upstreamDur   *prometheus.HistogramVec
	breakerState  *prometheus.GaugeVec
	harvestPasses *prometheus.CounterVec
	harvestRecs   *prometheus.CounterVec
	harvestDur    prometheus.Histogram
	harvestLast   prometheus.Gauge
	harvestEpoch  prometheus.Gauge
	harvestHeld   prometheus.Gauge
	datasetEpoch  *prometheus.GaugeVec
	datasetHeld   *prometheus.GaugeVec
	reindexRecs   *prometheus.CounterVec
	reindexRun    prometheus.Gauge
	reindexSel    prometheus.Gauge
	started       time.Time
	progress      progress  // the harvest and reindex counts, for the status page
	ready         readiness // behind d1bridge_ready

	mu  sync.Mutex
	ops map[opKey]*opMetrics // each operation's series and counts (ObserveRequest)
}

type opKey struct {
	role    string
	version int
	op      string
}

// opMetrics are an operation's series, looked up once rather than by their
// label values on every request, and its counts for the monitoring endpoints.
type opMetrics struct {
	stat              OpStat
	duration          prometheus.Observer
	bytesIn, bytesOut prometheus.Counter // nil until the operation first has a body
	byStatus          map[int]prometheus.Counter
}

// OpStat is what the monitoring endpoints report of one operation.
type OpStat struct {
	Role, Version, Operation string
	Requests, Errors         uint64
	Seconds                  float64
}

// New registers the collectors with reg; version is the build's version.
func New(reg prometheus.Registerer, version string) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_requests_total",
			Help: "DataONE requests answered, by role, API version, operation and HTTP status.",
		}, []string{"role", "version", "operation", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "d1bridge_request_duration_seconds",
			Help:    "Time to answer DataONE requests, by role, API version and operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"role", "version", "operation"}),
		bytesIn: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_request_bytes_total",
			Help: "Request body bytes read, by role and operation.",
		}, []string{"role", "operation"}),
		bytesOut: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_response_bytes_total",
			Help: "Response body bytes written, by role and operation.",
		}, []string{"role", "operation"}),
		inFlight: f.NewGauge(prometheus.GaugeOpts{
			Name: "d1bridge_requests_in_flight",
			Help: "DataONE requests being answered.",
		}),
		authDecisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_auth_decisions_total",
			Help: "Authorization decisions isAuthorized asked for, by whether the decision cache held them (hit, miss).",
		}, []string{"cache"}),
		ldapSearches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_ldap_searches_total",
			Help: "LDAP group lookups sent to the directory, by outcome (ok, not_found, error).",
		}, []string{"outcome"}),
		ldapDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "d1bridge_ldap_search_duration_seconds",
			Help:    "Time of LDAP group lookups sent to the directory.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}),
		upstreamReqs: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_upstream_requests_total",
			Help: "Requests to upstream stores, by upstream, operation and outcome (ok, not_found, client_error, server_error, error, breaker_open).",
		}, []string{"upstream", "operation", "outcome"}),
		upstreamDur: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "d1bridge_upstream_request_duration_seconds",
			Help:    "Time of requests to upstream stores, by upstream.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"upstream"}),
		breakerState: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "d1bridge_upstream_breaker_state",
			Help: "Circuit breaker state of each upstream: 0 closed, 1 half-open, 2 open.",
		}, []string{"upstream"}),
		harvestPasses: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_harvest_passes_total",
			Help: "Harvest passes over a listing store, by outcome (ok; partial: listed to the end, some records failed; failed: the listing stopped).",
		}, []string{"outcome"}),
		harvestRecs: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_harvest_records_total",
			Help: "Records a harvest handled, by outcome (registered, updated, unchanged, failed).",
		}, []string{"outcome"}),
		harvestDur: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "d1bridge_harvest_pass_duration_seconds",
			Help:    "Time of harvest passes, whatever their outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}),
		harvestLast: f.NewGauge(prometheus.GaugeOpts{
			Name: "d1bridge_harvest_last_success_timestamp_seconds",
			Help: "When the last harvest pass that listed the whole store (ok or partial) ended, in Unix seconds; 0 before the first.",
		}),
		harvestEpoch: f.NewGauge(prometheus.GaugeOpts{
			Name: "d1bridge_harvest_lease_epoch",
			Help: "The fencing epoch of the harvest lease when this instance last took it (it grows with every new holder); 0 before, or when the catalog has no leases.",
		}),
		harvestHeld: f.NewGauge(prometheus.GaugeOpts{
			Name: "d1bridge_harvest_lease_held",
			Help: "1 while this instance holds the harvest lease (runs a pass of the instances sharing the catalog), else 0.",
		}),
		datasetEpoch: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "d1bridge_dataset_lease_epoch",
			Help: "The fencing epoch of a dataset source's harvest lease when this instance last took it (it grows with every new holder), by source; absent before.",
		}, []string{"source"}),
		datasetHeld: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "d1bridge_dataset_lease_held",
			Help: "1 while this instance holds a dataset source's harvest lease (runs its pass for the instances sharing the catalog), else 0, by source.",
		}, []string{"source"}),
		reindexRecs: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_reindex_records_total",
			Help: "Records a reindex handled, by outcome (updated, unchanged, skipped: no bytes on this node, failed).",
		}, []string{"outcome"}),
		reindexRun: f.NewGauge(prometheus.GaugeOpts{
			Name: "d1bridge_reindex_running",
			Help: "1 while a batch reindex runs, else 0.",
		}),
		reindexSel: f.NewGauge(prometheus.GaugeOpts{
			Name: "d1bridge_reindex_batch_records",
			Help: "Records the running (or last) batch reindex selected.",
		}),
		started: time.Now(),
		ops:     map[opKey]*opMetrics{},
	}
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "d1bridge_build_info",
		Help:        "A constant 1, labelled with the build's version and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goVersion},
	}, func() float64 { return 1 })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "d1bridge_start_time_seconds",
		Help: "When the process started, in Unix seconds.",
	}, func() float64 { return float64(m.started.Unix()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "d1bridge_ready",
		Help: "1 when the node is ready (/readyz answers 200: the catalog and the store and mapping upstreams pass their checks), 0 when not; NaN until the process reports it.",
	}, m.ready.value)
	return m
}

// Started is when the metrics began: the process start, for uptime.
func (m *Metrics) Started() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.started
}

// RequestStarted marks a request in flight; RequestEnded when it is answered.
func (m *Metrics) RequestStarted() {
	if m != nil {
		m.inFlight.Inc()
	}
}

// RequestEnded marks the end of a request RequestStarted marked.
func (m *Metrics) RequestEnded() {
	if m != nil {
		m.inFlight.Dec()
	}
}

// ObserveRequest records one answered request and its body sizes.
func (m *Metrics) ObserveRequest(role string, version int, op string, code int, d time.Duration, in, out int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := opKey{role, version, op}
	o := m.ops[k]
	if o == nil {
		v := "v" + strconv.Itoa(version)
		o = &opMetrics{stat: OpStat{Role: role, Version: v, Operation: op},
			duration: m.duration.WithLabelValues(role, v, op), byStatus: map[int]prometheus.Counter{}}
		m.ops[k] = o
	}
	requests := o.byStatus[code]
	if requests == nil {
		requests = m.requests.WithLabelValues(role, o.stat.Version, op, strconv.Itoa(code))
		o.byStatus[code] = requests
	}
	requests.Inc()
	o.duration.Observe(d.Seconds())
	if in > 0 {
		if o.bytesIn == nil {
			o.bytesIn = m.bytesIn.WithLabelValues(role, op)
		}
		o.bytesIn.Add(float64(in))
	}
	if out > 0 {
		if o.bytesOut == nil {
			o.bytesOut = m.bytesOut.WithLabelValues(role, op)
		}
		o.bytesOut.Add(float64(out))
	}
	o.stat.Requests++
	if code >= 400 {
		o.stat.Errors++
	}
	o.stat.Seconds += d.Seconds()
}

// Operations returns the per-operation counts since start.
func (m *Metrics) Operations() []OpStat {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]OpStat, 0, len(m.ops))
	for _, o := range m.ops {
		out = append(out, o.stat)
	}
	return out
}

// ObserveAuthDecision records whether an authorization decision came from the cache.
func (m *Metrics) ObserveAuthDecision(hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.authDecisions.WithLabelValues("hit").Inc()
	} else {
		m.authDecisions.WithLabelValues("miss").Inc()
	}
}

// ObserveLDAPSearch records one lookup sent to the directory.
func (m *Metrics) ObserveLDAPSearch(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.ldapSearches.WithLabelValues(outcome).Inc()
	m.ldapDuration.Observe(d.Seconds())
}

// GaugeFunc registers a gauge read at scrape time (cache sizes, stored objects).
func GaugeFunc(reg prometheus.Registerer, name, help string, f func() float64) {
	promauto.With(reg).NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// CounterFunc registers a counter read at scrape time (events dropped).
func CounterFunc(reg prometheus.Registerer, name, help string, f func() float64) {
	promauto.With(reg).NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
}

// ObserveUpstream records one request to an upstream store.
func (m *Metrics) ObserveUpstream(upstream, op, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.upstreamReqs.WithLabelValues(upstream, op, outcome).Inc()
	m.upstreamDur.WithLabelValues(upstream).Observe(d.Seconds())
}

// SetBreakerState records an upstream breaker's state: 0 closed, 1 half-open, 2 open.
func (m *Metrics) SetBreakerState(upstream string, state int) {
	if m == nil {
		return
	}
	m.breakerState.WithLabelValues(upstream).Set(float64(state))
}

// Outcomes of a harvest pass.
const (
	HarvestOK      = "ok"
	HarvestPartial = "partial"
	HarvestFailed  = "failed"
)

// ObserveHarvestPass records one harvest pass: ok and partial passes listed
// the whole store and set the last-success time to end.
func (m *Metrics) ObserveHarvestPass(outcome string, d time.Duration, end time.Time) {
	if m == nil {
		return
	}
	m.harvestPasses.WithLabelValues(outcome).Inc()
	m.harvestDur.Observe(d.Seconds())
	if outcome != HarvestFailed {
		m.harvestLast.Set(float64(end.UnixMilli()) / 1000)
	}
	p := &m.progress
	p.count(&p.harvestPasses, outcome)
	p.mu.Lock()
	p.harvestLastDuration = d
	if outcome != HarvestFailed {
		p.harvestLast = end
	}
	p.mu.Unlock()
}

// ObserveHarvestElsewhere records that another instance sharing the catalog
// completed a harvest pass (of the store or of a dataset source) that ended
// at end: the last-success time moves there when it is later, so that an
// instance whose turn it was not does not look stalled.
func (m *Metrics) ObserveHarvestElsewhere(end time.Time) {
	if m == nil || end.IsZero() {
		return
	}
	p := &m.progress
	p.mu.Lock()
	defer p.mu.Unlock()
	if end.After(p.harvestLast) {
		p.harvestLast = end
		m.harvestLast.Set(float64(end.UnixMilli()) / 1000)
	}
}

// SetHarvestLease records that this instance took (held, at epoch) or let go
// of the harvest lease.
func (m *Metrics) SetHarvestLease(held bool, epoch int64) {
	if m == nil {
		return
	}
	if held {
		m.harvestHeld.Set(1)
		m.harvestEpoch.Set(float64(epoch))
		return
	}
	m.harvestHeld.Set(0)
}

// SetDatasetLease records that this instance took (held, at epoch) or let go
// of the harvest lease of the dataset source. Dataset passes count as
// harvest passes (ObserveHarvestPass); their leases are apart, since several
// sources may be harvested at once.
func (m *Metrics) SetDatasetLease(source string, held bool, epoch int64) {
	if m == nil {
		return
	}
	if held {
		m.datasetHeld.WithLabelValues(source).Set(1)
		m.datasetEpoch.WithLabelValues(source).Set(float64(epoch))
		return
	}
	m.datasetHeld.WithLabelValues(source).Set(0)
}

// ObserveHarvestRecord records one record a harvest handled: registered,
// updated, unchanged or failed.
func (m *Metrics) ObserveHarvestRecord(outcome string) {
	if m == nil {
		return
	}
	m.harvestRecs.WithLabelValues(outcome).Inc()
	m.progress.count(&m.progress.harvestRecords, outcome)
}

// ObserveReindexRecord records one record a reindex handled: updated,
// unchanged, skipped or failed.
func (m *Metrics) ObserveReindexRecord(outcome string) {
	if m == nil {
		return
	}
	m.reindexRecs.WithLabelValues(outcome).Inc()
	p := &m.progress
	p.count(&p.reindexRecords, outcome)
	p.mu.Lock()
	if p.reindexRunning {
		p.reindexDone++
	}
	p.mu.Unlock()
}

// ReindexStarted marks a batch reindex as running, with no records selected
// yet (SetReindexSelected); call the returned func when it ends.
func (m *Metrics) ReindexStarted() func() {
	if m == nil {
		return func() {}
	}
	m.reindexSel.Set(0)
	m.reindexRun.Set(1)
	p := &m.progress
	p.mu.Lock()
	p.reindexRunning, p.reindexSelected, p.reindexDone = true, 0, 0
	p.mu.Unlock()
	return func() {
		m.reindexRun.Set(0)
		p.mu.Lock()
		p.reindexRunning = false
		p.mu.Unlock()
	}
}

// SetReindexSelected records how many records the running batch selects.
func (m *Metrics) SetReindexSelected(selected int) {
	if m == nil {
		return
	}
	m.reindexSel.Set(float64(selected))
	m.progress.mu.Lock()
	m.progress.reindexSelected = int64(selected)
	m.progress.mu.Unlock()
}
