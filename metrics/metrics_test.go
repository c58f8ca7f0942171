package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestObserveRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "1.2.3")
	m.ObserveRequest("mn", 2, "MNRead.get", 200, 3*time.Millisecond, 0, 1024)
	m.ObserveRequest("mn", 2, "MNRead.get", 404, time.Millisecond, 0, 200)
	m.ObserveRequest("cn", 1, "CNCore.ping", 200, time.Millisecond, 10, 2)
	want := `
# HELP d1bridge_requests_total DataONE requests answered, by role, API version, operation and HTTP status.
# TYPE d1bridge_requests_total counter
d1bridge_requests_total{code="200",operation="CNCore.ping",role="cn",version="v1"} 1
d1bridge_requests_total{code="200",operation="MNRead.get",role="mn",version="v2"} 1
d1bridge_requests_total{code="404",operation="MNRead.get",role="mn",version="v2"} 1
# HELP d1bridge_response_bytes_total Response body bytes written, by role and operation.
# TYPE d1bridge_response_bytes_total counter
d1bridge_response_bytes_total{operation="CNCore.ping",role="cn"} 2
d1bridge_response_bytes_total{operation="MNRead.get",role="mn"} 1224
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "d1bridge_requests_total", "d1bridge_response_bytes_total"); err != nil {
		t.Fatal(err)
	}
	ops := m.Operations()
	var get OpStat
	for _, o := range ops {
		if o.Operation == "MNRead.get" {
			get = o
		}
	}
	if get.Requests != 2 || get.Errors != 1 {
		t.Fatalf("operation stats for MNRead.get: %+v", get)
	}
	if v := testutil.ToFloat64(prometheus.Collector(m.inFlight)); v != 0 {
		t.Fatalf("in flight %v", v)
	}
	done := m.RequestStarted()
	if v := testutil.ToFloat64(m.inFlight); v != 1 {
		t.Fatalf("in flight %v, want 1", v)
	}
	done()
}

func TestNilMetricsObserveNothing(t *testing.T) {
	var m *Metrics
	m.ObserveRequest("mn", 2, "x", 200, 0, 0, 0)
	m.ObserveAuthDecision(true)
	m.ObserveLDAPSearch("ok", 0)
	m.ObserveUpstream("u", "get", "ok", 0)
	m.SetBreakerState("u", 2)
	m.RequestStarted()()
	if m.Operations() != nil {
		t.Fatal("a nil Metrics has operations")
	}
}

// TestDashboardQueriesExportedSeries: every d1bridge series the Grafana
// dashboard queries is one this package exports.
func TestDashboardQueriesExportedSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	m.ObserveRequest("mn", 2, "MNRead.get", 200, time.Millisecond, 1, 1)
	m.ObserveAuthDecision(true)
	m.ObserveLDAPSearch("ok", time.Millisecond)
	m.ObserveUpstream("s3", "get", "ok", time.Millisecond)
	m.SetBreakerState("s3", 0)
	m.RequestStarted()()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		exported[name] = true
		if mf.GetType().String() == "HISTOGRAM" {
			exported[name+"_bucket"], exported[name+"_sum"], exported[name+"_count"] = true, true, true
		}
	}
	raw, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	names := regexp.MustCompile(`d1bridge_[a-z_]+`)
	seen := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range names.FindAllString(tg.Expr, -1) {
				seen++
				if !exported[n] {
					t.Errorf("panel %q queries %s, which is not exported", p.Title, n)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("the dashboard queries no d1bridge series")
	}
}
