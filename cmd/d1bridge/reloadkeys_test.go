package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter/rest"
	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestReloadQueueKeysNeedRestart: replication.rescueAfter and
// replication.retryBackoff are the job queue's options, taken once when its
// workers start; a reload listed them as applied, and the operator was told a
// change took effect when it did not.
func TestReloadQueueKeysNeedRestart(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "d1bridge.yaml")
	getenv := func(k string) string {
		if k == "D1BRIDGE_DATADIR" {
			return filepath.Join(dir, "data")
		}
		return ""
	}
	if err := os.WriteFile(cfgPath, []byte("node:\n  id: urn:node:rv\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	started, err := loadConfig(cfgPath, getenv)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	m := metrics.New(prometheus.NewRegistry(), "test")
	n, err := mappings.New(started, log, m)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.Catalog.StartWork() // as serve does: the queue takes its options now

	if err := os.WriteFile(cfgPath, []byte("node:\n  id: urn:node:rv\nreplication:\n  rescueAfter: 10m\n  retryBackoff: 5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rl, err := reload(started, started, cfgPath, getenv, n, m, log, rest.NewUploads(4, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer rl.engine.close()
	for _, k := range []string{"replication.rescueAfter", "replication.retryBackoff"} {
		if slices.Contains(rl.applied, k) || !slices.Contains(rl.restart, k) {
			t.Errorf("%s: reload says applied=%v restart=%v; the queue keeps its start value until a restart", k, rl.applied, rl.restart)
		}
	}
}
