package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestPrometheusScrapesTheNode runs Debian's Prometheus server scraping a running
// d1bridge, drives traffic, and reads the request series back through
// Prometheus's query API.
func TestPrometheusScrapesTheNode(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: run .ci/test, which installs Debian's prometheus package")
	}
	// The node keeps its object bytes in a real S3 server, so that upstream
	// series exist too.
	s3 := servers.VersityGW(t)
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	cfg := fmt.Sprintf("upstreams:\n  - name: bucket\n    type: s3\n    baseURL: %s\n    options: {bucket: %s, accessKey: %s, secretKey: %s}\nstore: bucket\n",
		s3.Endpoint, s3.Bucket, s3.AccessKey, s3.Secret)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, t.TempDir(), cfgPath)
	target := strings.TrimPrefix(s.URL, "http://")

	dir := t.TempDir()
	cfg = fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: d1bridge\n    static_configs: [{targets: ['%s']}]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	promURL := "http://127.0.0.1:" + port
	var log bytes.Buffer
	cmd := exec.Command(promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address=127.0.0.1:"+port)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})

	// A known workload: one create, three reads, two misses.
	data := []byte("scraped")
	sm := newSysmeta("prom-1", "text/plain", "MD5", data)
	if r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, bytes.NewReader(data), false)...); r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	for range 3 {
		if r := s.get(t, "/d1/mn/v2/object/prom-1"); r.Status != 200 {
			t.Fatalf("get: %d", r.Status)
		}
	}
	for range 2 {
		s.get(t, "/d1/mn/v2/object/missing")
	}

	query := func(q string) (float64, bool) {
		resp, err := http.Get(promURL + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var out struct {
			Status string
			Data   struct {
				Result []struct {
					Value [2]any
				}
			}
		}
		if json.NewDecoder(resp.Body).Decode(&out) != nil || out.Status != "success" || len(out.Data.Result) == 0 {
			return 0, false
		}
		var v float64
		fmt.Sscan(out.Data.Result[0].Value[1].(string), &v)
		return v, true
	}
	// The first scrape lands some seconds after Prometheus starts (target
	// discovery is throttled to 5 s); poll, bounded.
	want := map[string]float64{
		`sum(d1bridge_requests_total{operation="MNRead.get",code="200"})`:           3,
		`sum(d1bridge_requests_total{operation="MNRead.get",code="404"})`:           2,
		`sum(d1bridge_requests_total{operation="MNStorage.create",code="200"})`:     1,
		`sum(d1bridge_response_bytes_total{operation="MNRead.get"}) > 0`:            1,
		`count(d1bridge_build_info)`:                                                1,
		`sum(d1bridge_upstream_requests_total{upstream="bucket",outcome="ok"}) > 0`: 1,
		`max(d1bridge_upstream_breaker_state{upstream="bucket"})`:                   0,
		`max(d1bridge_ready)`: 1,
	}
	// The upstream as the node itself reports it.
	var st struct {
		Upstreams []struct {
			Name, Type, Breaker string
			Up                  bool
		}
	}
	getJSON(t, s, "/d1/mn/v2/monitor/status", &st)
	if len(st.Upstreams) != 1 || st.Upstreams[0].Name != "bucket" || !st.Upstreams[0].Up || st.Upstreams[0].Breaker != "closed" {
		t.Fatalf("monitor/status upstreams: %+v", st.Upstreams)
	}
	if r := s.get(t, "/readyz"); r.Status != 200 || !strings.Contains(string(r.Body), `"upstream bucket":"up"`) {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(40 * time.Second)
	for q, w := range want {
		for {
			v, ok := query(q)
			if ok && (v == w || (strings.HasSuffix(q, "> 0") && v > 0)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus never answered %s = %v (last %v, %v)", q, w, v, ok)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}
