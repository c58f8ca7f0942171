// Package metrics holds every Prometheus collector of d1bridge in one struct, built
// from an injected registerer. Series are labelled by operation name, never by path.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics is the set of collectors. A nil *Metrics observes nothing, so tests and
// tools can run without a registry.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// New registers the collectors with reg.
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "d1bridge_requests_total",
			Help: "DataONE requests answered, by role, API version, operation and HTTP status.",
		}, []string{"role", "version", "operation", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "d1bridge_request_duration_seconds",
			Help:    "Time to answer DataONE requests, by role, API version and operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"role", "version", "operation"}),
	}
}

// ObserveRequest records one answered request.
func (m *Metrics) ObserveRequest(role string, version int, op string, code int, d time.Duration) {
	if m == nil {
		return
	}
	v := "v" + strconv.Itoa(version)
	m.requests.WithLabelValues(role, v, op, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(role, v, op).Observe(d.Seconds())
}
