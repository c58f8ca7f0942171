package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/rest"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
)

// readiness answers /readyz: 200 when the catalog, the node serving the MN
// role and the upstreams it needs (store and mapping) pass their own checks
// (mappings.Nodes.Status); 503 otherwise, saying which not and why. An answer
// is kept for readyCache, so that frequent probes cost one check.
type readiness struct {
	cfg *config.Config
	n   *mappings.Nodes

	mu     sync.Mutex
	at     time.Time
	status int
	report map[string]string
}

// readyCache is how long a readiness answer is kept.
const readyCache = 2 * time.Second

func (rd *readiness) serveHTTP(w http.ResponseWriter, r *http.Request) {
	status, report := rd.current(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(report)
}

// current is the last answer, or a new one when it is older than readyCache;
// /readyz and the d1bridge_ready gauge share it.
func (rd *readiness) current(ctx context.Context) (int, map[string]string) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if time.Since(rd.at) > readyCache {
		rd.status, rd.report = rd.check(ctx)
		rd.at = time.Now()
	}
	return rd.status, rd.report
}

func (rd *readiness) check(ctx context.Context) (int, map[string]string) {
	// The answer is shared: a caller that goes away does not cut it short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	report := map[string]string{"status": "ready", "catalog": "up"}
	status := http.StatusOK
	if err := rd.n.Ping(ctx); err != nil {
		report["catalog"], status = adapter.AsException(err).Description, http.StatusServiceUnavailable
	}
	for _, u := range rd.n.Status(ctx) {
		if u.Name != rd.cfg.Store && u.Name != rd.cfg.Mapping {
			continue
		}
		report["upstream "+u.Name] = "up"
		if !u.Up {
			report["upstream "+u.Name], status = u.Error, http.StatusServiceUnavailable
		}
	}
	if status != http.StatusOK {
		report["status"] = "not ready"
	}
	return status, report
}

// upstreamStatus feeds monitor/status.
func upstreamStatus(n *mappings.Nodes) func(ctx context.Context) []rest.Upstream {
	return func(ctx context.Context) []rest.Upstream {
		var out []rest.Upstream
		for _, u := range n.Status(ctx) {
			out = append(out, rest.Upstream{Name: u.Name, Type: u.Type, Breaker: u.Breaker, Up: u.Up, Error: u.Error})
		}
		return out
	}
}
