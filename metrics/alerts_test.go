package metrics

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlertRules checks alerts.yml with Debian's promtool: the rules are
// valid (check rules), and alerts_test.yml's cases pass (test rules): each
// alert fires on the series it is about, after its for:, and not on the
// neighbouring series that should not fire it. Every alert has a for:, a
// severity, a summary and a description, and queries only exported series.
func TestAlertRules(t *testing.T) {
	out := promtool(t, "check", "rules", "alerts.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}
	out = promtool(t, "test", "rules", "alerts_test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}

	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("alerts_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedSeries(t)
	var names []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.For == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a for:, a severity, a summary or a description", r.Alert)
			}
			for _, n := range seriesNames.FindAllString(r.Expr, -1) {
				if !exported[n] {
					t.Errorf("alert %s queries %s, which is not exported", r.Alert, n)
				}
			}
			if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
				t.Errorf("alerts_test.yml does not test %s", r.Alert)
			}
		}
	}
	slices.Sort(names)
	want := []string{"D1BridgeHarvestStalled", "D1BridgeHighErrorRatio", "D1BridgeNotReady", "D1BridgeUpstreamBreakerOpen"}
	if !slices.Equal(names, want) {
		t.Errorf("alerts %q, want %q", names, want)
	}
}
