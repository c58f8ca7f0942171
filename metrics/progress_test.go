package metrics

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestProgress(t *testing.T) {
	m := New(prometheus.NewRegistry(), "dev")
	if p := m.Progress(); p.HarvestPasses != nil || p.ReindexRunning || !p.HarvestLastSuccess.IsZero() {
		t.Fatalf("progress before any work: %+v", p)
	}
	end := time.UnixMilli(1700000000500)
	m.ObserveHarvestPass(HarvestOK, 2*time.Second, end)
	m.ObserveHarvestPass(HarvestFailed, 3*time.Second, end.Add(time.Hour))
	m.ObserveHarvestRecord("registered")
	m.ObserveHarvestRecord("registered")
	m.ObserveReindexRecord("updated") // a single-PID reindex: no batch
	done := m.ReindexStarted()
	m.SetReindexSelected(5)
	m.ObserveReindexRecord("updated")
	m.ObserveReindexRecord("failed")
	p := m.Progress()
	if p.HarvestPasses[HarvestOK] != 1 || p.HarvestPasses[HarvestFailed] != 1 || p.HarvestRecords["registered"] != 2 ||
		!p.HarvestLastSuccess.Equal(end) || p.HarvestLastDuration != 3*time.Second {
		t.Errorf("harvest progress: %+v", p)
	}
	if !p.ReindexRunning || p.ReindexSelected != 5 || p.ReindexDone != 2 || p.ReindexRecords["updated"] != 2 || p.ReindexRecords["failed"] != 1 {
		t.Errorf("reindex progress: %+v", p)
	}
	p.HarvestPasses["ok"] = 99 // a copy
	done()
	if p := m.Progress(); p.ReindexRunning || p.ReindexDone != 2 || p.HarvestPasses["ok"] != 1 {
		t.Errorf("after the batch: %+v", p)
	}
	var nilM *Metrics
	nilM.SetReadiness(func() bool { return true })
	if p := nilM.Progress(); p.ReindexRunning {
		t.Error("a nil Metrics has progress")
	}
}

func TestReadyGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	value := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "d1bridge_ready" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("d1bridge_ready is not exported")
		return 0
	}
	if v := value(); !math.IsNaN(v) {
		t.Fatalf("d1bridge_ready before SetReadiness: %v, want NaN", v)
	}
	ready := true
	m.SetReadiness(func() bool { return ready })
	if v := value(); v != 1 {
		t.Fatalf("ready: %v", v)
	}
	ready = false
	if v := value(); v != 0 {
		t.Fatalf("not ready: %v", v)
	}
}
