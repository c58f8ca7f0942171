package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	m.RequestStarted()
	if v := testutil.ToFloat64(m.inFlight); v != 1 {
		t.Fatalf("in flight %v, want 1", v)
	}
	m.RequestEnded()
	if v := testutil.ToFloat64(m.inFlight); v != 0 {
		t.Fatalf("in flight %v after the request ended, want 0", v)
	}
}

func TestNilMetricsObserveNothing(t *testing.T) {
	var m *Metrics
	m.ObserveRequest("mn", 2, "x", 200, 0, 0, 0)
	m.ObserveAuthDecision(true)
	m.ObserveLDAPSearch("ok", 0)
	m.ObserveUpstream("u", "get", "ok", 0)
	m.SetBreakerState("u", 2)
	m.RequestStarted()
	m.RequestEnded()
	if m.Operations() != nil {
		t.Fatal("a nil Metrics has operations")
	}
}

// TestDashboardQueriesExportedSeries: every d1bridge series the Grafana
// dashboard queries is one the node exports, every panel's expression is
// valid PromQL (promtool checks it as a recording rule), and the dashboard
// has panels for what an operator watches.
func TestDashboardQueriesExportedSeries(t *testing.T) {
	exported := exportedSeries(t)
	raw, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	queried := map[string]bool{}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for j, tg := range p.Targets {
			for _, n := range seriesNames.FindAllString(tg.Expr, -1) {
				queried[n] = true
				if !exported[n] {
					t.Errorf("panel %q queries %s, which is not exported", p.Title, n)
				}
			}
			// Grafana's variables, as Grafana would fill them in.
			expr := strings.NewReplacer("$__rate_interval", "1m", "$__range", "6h", "$job", ".*").Replace(tg.Expr)
			fmt.Fprintf(&rules, "      - record: panel_%d_%d\n        expr: %q\n", i, j, expr)
		}
	}
	for _, want := range []string{"d1bridge_objects_stored", "d1bridge_bytes_stored", "d1bridge_harvest_passes_total",
		"d1bridge_harvest_records_total", "d1bridge_harvest_last_success_timestamp_seconds", "d1bridge_reindex_records_total",
		"d1bridge_reindex_running", "d1bridge_upstream_breaker_state", "d1bridge_ready", "d1bridge_read_events_dropped_total"} {
		if !queried[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
	if !strings.Contains(string(raw), "Replication") {
		t.Error("no replication panel")
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", path)
}

// seriesNames finds the d1bridge series an expression names.
var seriesNames = regexp.MustCompile(`d1bridge_[a-z_]+`)

// exportedSeries are the names of the series d1bridge exports: those New
// registers (each observed once, so that vectors show), their histogram
// series, and those cmd/d1bridge registers with GaugeFunc and CounterFunc
// (read from its source, so that a renamed gauge fails here).
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := New(reg, "dev")
	m.ObserveRequest("mn", 2, "MNRead.get", 200, time.Millisecond, 1, 1)
	m.ObserveAuthDecision(true)
	m.ObserveLDAPSearch("ok", time.Millisecond)
	m.ObserveUpstream("s3", "get", "ok", time.Millisecond)
	m.SetBreakerState("s3", 0)
	m.RequestStarted()
	m.RequestEnded()
	m.ObserveHarvestPass(HarvestOK, time.Second, time.Now())
	m.ObserveHarvestRecord("registered")
	m.ObserveReindexRecord("updated")
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
	// The command's own gauges, registered where it serves.
	files, err := filepath.Glob(filepath.Join("..", "cmd", "d1bridge", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	registered := regexp.MustCompile(`metrics\.(?:GaugeFunc|CounterFunc)\(reg, "(d1bridge_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(registered) == 0 {
		t.Fatal("cmd/d1bridge registers no gauge: has the registration moved?")
	}
	for _, r := range registered {
		exported[r[1]] = true
	}
	return exported
}

// promtool runs Debian's promtool with args in this directory and fails the
// test unless it succeeds.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run .ci/test, which installs Debian's prometheus package")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
