package rest

import (
	"context"
	"net/http"
	"runtime"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// The monitoring endpoints answer JSON: DataONE defines no schema for them. The
// README documents each document.

func (r *request) statsQuery() (adapter.StatsQuery, error) {
	var q adapter.StatsQuery
	var err error
	if q.FromDate, q.ToDate, err = r.dateRange(); err != nil {
		return q, err
	}
	q.FormatID, q.Event = r.Query("formatId"), r.Query("event")
	switch q.Period = r.DefaultQuery("period", "day"); q.Period {
	case "hour", "day", "month":
	default:
		return q, invalid("parameter period must be hour, day or month, got %q", q.Period)
	}
	return q, nil
}

// getObjectStatistics: GET /monitor/object → {"objects", "bytes", "formats": [...]}.
func (h *mnHandlers) getObjectStatistics(r *request) error {
	if h.monitor == nil {
		return tierMissing(r)
	}
	q, err := r.statsQuery()
	if err != nil {
		return err
	}
	st, err := h.monitor.ObjectStatistics(r, q)
	if err != nil {
		return err
	}
	r.JSON(http.StatusOK, st)
	return nil
}

// getOperationsStatistics: GET /monitor/event → logged events by event and
// period, and the requests this process answered by operation.
func (h *mnHandlers) getOperationsStatistics(r *request) error {
	if h.monitor == nil {
		return tierMissing(r)
	}
	q, err := r.statsQuery()
	if err != nil {
		return err
	}
	ev, err := h.monitor.EventStatistics(r, q)
	if err != nil {
		return err
	}
	r.JSON(http.StatusOK, struct {
		Events     *adapter.EventStats `json:"events"`
		Operations any                 `json:"operations"`
		Since      time.Time           `json:"operationsSince"`
	}{ev, h.e.opts.Metrics.Operations(), h.e.opts.Metrics.Started().UTC()})
	return nil
}

// getStatus: GET /monitor/status → node, version, uptime, catalog and caches.
func (h *mnHandlers) getStatus(r *request) error {
	catalog := "up"
	var catalogErr string
	if err := h.node.Ping(r); err != nil {
		catalog, catalogErr = "down", adapter.AsException(err).Description
	}
	started := h.e.opts.Metrics.Started()
	r.JSON(http.StatusOK, map[string]any{
		"nodeId":        h.e.opts.Node.ID,
		"version":       h.e.opts.Version,
		"goVersion":     runtime.Version(),
		"started":       started.UTC(),
		"uptimeSeconds": int64(time.Since(started).Seconds()),
		"catalog":       map[string]string{"state": catalog, "error": catalogErr},
		"authDecisions": h.e.opts.Authorizer.CachedDecisions(),
		"upstreams":     h.e.upstreams(r),
	})
	return nil
}

// Upstream is one upstream store as monitor/status and readiness report it.
type Upstream struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Breaker string `json:"breaker"` // closed, half-open or open
	Up      bool   `json:"up"`
	Error   string `json:"error,omitempty"`
}

func (e *engine) upstreams(ctx context.Context) []Upstream {
	if e.opts.Upstreams != nil {
		if us := e.opts.Upstreams(ctx); us != nil {
			return us
		}
	}
	return []Upstream{} // [] in JSON, not null
}
