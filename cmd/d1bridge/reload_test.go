package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestReloadOnSIGHUP: SIGHUP applies a changed configuration while requests
// keep being answered; a key that needs a restart keeps its running value.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "d1bridge.yaml")
	write := func(name, metricsPath string) {
		t.Helper()
		cfg := fmt.Sprintf("node:\n  name: %s\n", name)
		if metricsPath != "" {
			cfg += "metrics:\n  path: " + metricsPath + "\n"
		}
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("before reload", "")
	s := startServerConfig(t, t.TempDir(), cfgPath)
	nodeName := func() string {
		var n adapter.Node
		r := s.get(t, "/d1/mn/v2/node")
		if err := adapter.Decode(bytes.NewReader(r.Body), &n); err != nil {
			t.Fatalf("node document: %v", err)
		}
		return n.Name
	}
	if got := nodeName(); got != "before reload" {
		t.Fatalf("name %q", got)
	}

	// Requests run throughout the reload; none may fail.
	var stop atomic.Bool
	var failures, answered atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := http.Get(s.URL + "/d1/mn/v2/monitor/ping")
				if err != nil || resp.StatusCode != 200 {
					failures.Add(1)
				}
				if resp != nil {
					resp.Body.Close()
				}
				answered.Add(1)
			}
		}()
	}
	// The metrics endpoint cannot move without a restart: it must stay.
	write("after reload", "/moved-metrics")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for nodeName() != "after reload" {
		if time.Now().After(deadline) {
			t.Fatalf("the reloaded name never showed; log:\n%s", s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d of %d requests failed during the reload", failures.Load(), answered.Load())
	}
	log := s.log.String()
	if !strings.Contains(log, "configuration reloaded") || !strings.Contains(log, `"keys":["metrics.path"]`) {
		t.Fatalf("the log does not tell of the reload and of the key that waits for a restart:\n%s", log)
	}

	// A configuration that does not validate is refused, and the node goes on.
	if err := os.WriteFile(cfgPath, []byte("svc: a/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(s.log.String(), "configuration not reloaded") {
		if time.Now().After(deadline) {
			t.Fatal("a bad configuration was not reported")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := nodeName(); got != "after reload" {
		t.Fatalf("after a refused reload the name is %q", got)
	}
	if r := s.get(t, "/metrics"); r.Status != 200 {
		t.Fatalf("the metrics moved without a restart: %d", r.Status)
	}
}

// TestDeepPing: ping?deep=true asks the upstreams too, and names the one that
// does not answer; plain ping does not.
func TestDeepPing(t *testing.T) {
	s3 := servers.VersityGW(t)
	proxy := servers.NewFaultProxy(t, s3.Endpoint)
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	cfg := fmt.Sprintf("upstreams:\n  - name: bucket\n    type: s3\n    baseURL: %s\n    retry: {max: 0}\n    options: {bucket: %s, accessKey: %s, secretKey: %s}\nstore: bucket\n",
		proxy.URL, s3.Bucket, s3.AccessKey, s3.Secret)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, t.TempDir(), cfgPath)
	if r := s.get(t, "/d1/mn/v2/monitor/ping?deep=true"); r.Status != 200 {
		t.Fatalf("deep ping with the upstream up: %d %s", r.Status, r.Body)
	}
	proxy.Set(servers.Unavailable)
	r := s.get(t, "/d1/mn/v2/monitor/ping?deep=true")
	e := wantError(t, r, 500, "ServiceFailure")
	if !strings.Contains(e.Description, "bucket") {
		t.Fatalf("the deep ping does not name the upstream: %q", e.Description)
	}
	if r := s.get(t, "/d1/mn/v2/monitor/ping"); r.Status != 200 {
		t.Fatalf("plain ping depends on the upstream: %d", r.Status)
	}
	if r := s.get(t, "/readyz"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the store down: %d %s", r.Status, r.Body)
	}
}

// TestSIGHUPDuringStartup: a SIGHUP while the node opens its catalog (here
// waiting for a lock another process holds; a migration may take a minute)
// ended the process, SIGHUP's default; now it is a reload once the node
// serves (systemctl reload right after start).
func TestSIGHUPDuringStartup(t *testing.T) {
	dataDir := t.TempDir()
	path := filepath.Join(dataDir, "catalog.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "serve")
	cmd.Env = append(withoutD1Bridge(os.Environ()), "D1BRIDGE_DATADIR="+dataDir, "D1BRIDGE_LISTEN=127.0.0.1:0",
		"D1BRIDGE_NODE_ID="+testNodeID)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	time.Sleep(500 * time.Millisecond) // the node waits for the catalog's lock
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := conn.ExecContext(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(stderr.String(), `"msg":"listening"`); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the node ended on a SIGHUP during its start: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not start in 15 s:\n%s", stderr.String())
		}
	}
}
