package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHarvestAndReindex(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	end := time.UnixMilli(1700000000500)
	m.ObserveHarvestPass(HarvestOK, time.Second, end)
	m.ObserveHarvestPass(HarvestFailed, time.Second, end.Add(time.Hour)) // does not move the last success
	m.ObserveHarvestPass(HarvestPartial, time.Second, end.Add(time.Minute))
	for _, o := range []string{"registered", "registered", "unchanged", "failed"} {
		m.ObserveHarvestRecord(o)
	}
	done := m.ReindexStarted()
	m.SetReindexSelected(7)
	m.ObserveReindexRecord("updated")
	m.ObserveReindexRecord("skipped")
	want := `
# HELP d1bridge_harvest_passes_total Harvest passes over a listing store, by outcome (ok; partial: listed to the end, some records failed; failed: the listing stopped).
# TYPE d1bridge_harvest_passes_total counter
d1bridge_harvest_passes_total{outcome="failed"} 1
d1bridge_harvest_passes_total{outcome="ok"} 1
d1bridge_harvest_passes_total{outcome="partial"} 1
# HELP d1bridge_harvest_records_total Records a harvest handled, by outcome (registered, updated, unchanged, failed).
# TYPE d1bridge_harvest_records_total counter
d1bridge_harvest_records_total{outcome="failed"} 1
d1bridge_harvest_records_total{outcome="registered"} 2
d1bridge_harvest_records_total{outcome="unchanged"} 1
# HELP d1bridge_harvest_last_success_timestamp_seconds When the last harvest pass that listed the whole store (ok or partial) ended, in Unix seconds; 0 before the first.
# TYPE d1bridge_harvest_last_success_timestamp_seconds gauge
d1bridge_harvest_last_success_timestamp_seconds 1.7000000605e+09
# HELP d1bridge_reindex_records_total Records a reindex handled, by outcome (updated, unchanged, skipped: no bytes on this node, failed).
# TYPE d1bridge_reindex_records_total counter
d1bridge_reindex_records_total{outcome="skipped"} 1
d1bridge_reindex_records_total{outcome="updated"} 1
# HELP d1bridge_reindex_running 1 while a batch reindex runs, else 0.
# TYPE d1bridge_reindex_running gauge
d1bridge_reindex_running 1
# HELP d1bridge_reindex_batch_records Records the running (or last) batch reindex selected.
# TYPE d1bridge_reindex_batch_records gauge
d1bridge_reindex_batch_records 7
`
	names := []string{"d1bridge_harvest_passes_total", "d1bridge_harvest_records_total", "d1bridge_harvest_last_success_timestamp_seconds",
		"d1bridge_reindex_records_total", "d1bridge_reindex_running", "d1bridge_reindex_batch_records"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.harvestDur); n != 1 {
		t.Errorf("pass duration series: %d", n)
	}
	done()
	if v := testutil.ToFloat64(m.reindexRun); v != 0 {
		t.Errorf("reindex running %v after it ended", v)
	}
}

func TestNilMetricsHarvest(t *testing.T) {
	var m *Metrics
	m.ObserveHarvestPass(HarvestOK, 0, time.Now())
	m.ObserveHarvestRecord("registered")
	m.ObserveReindexRecord("updated")
	m.SetReindexSelected(1)
	m.ReindexStarted()()
}

func TestHarvestLease(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	m.SetHarvestLease(true, 7)
	want := `
# HELP d1bridge_harvest_lease_epoch The fencing epoch of the harvest lease when this instance last took it (it grows with every new holder); 0 before, or when the catalog has no leases.
# TYPE d1bridge_harvest_lease_epoch gauge
d1bridge_harvest_lease_epoch 7
# HELP d1bridge_harvest_lease_held 1 while this instance holds the harvest lease (runs a pass of the instances sharing the catalog), else 0.
# TYPE d1bridge_harvest_lease_held gauge
d1bridge_harvest_lease_held 1
`
	names := []string{"d1bridge_harvest_lease_epoch", "d1bridge_harvest_lease_held"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	m.SetHarvestLease(false, 7)
	if v := testutil.ToFloat64(m.harvestHeld); v != 0 {
		t.Errorf("held %v after the lease was let go", v)
	}
	if v := testutil.ToFloat64(m.harvestEpoch); v != 7 {
		t.Errorf("epoch %v after the lease was let go, want the last one, 7", v)
	}
	var nilM *Metrics
	nilM.SetHarvestLease(true, 1)
	nilM.ObserveHarvestElsewhere(time.Now())

	// Another instance's passes move the last success forward, never back.
	end := time.UnixMilli(1700000000500)
	m.ObserveHarvestElsewhere(end)
	m.ObserveHarvestElsewhere(end.Add(-time.Hour))
	if v := testutil.ToFloat64(m.harvestLast); v != 1700000000.5 {
		t.Errorf("last success %v after passes elsewhere, want 1700000000.5", v)
	}
	if got := m.Progress().HarvestLastSuccess; !got.Equal(end) {
		t.Errorf("the status page's last success %v, want %v", got, end)
	}
}
