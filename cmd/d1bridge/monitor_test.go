package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestMonitoringAgreesWithWorkload drives a known workload, then checks that
// monitor/object, monitor/event and monitor/status agree with it, with the
// catalog (listObjects) and with the Prometheus metrics.
func TestMonitoringAgreesWithWorkload(t *testing.T) {
	s := startServer(t, "")
	objects := []struct {
		pid, format string
		data        string
	}{{"mon-1", "text/csv", "a,b\n1,2\n"}, {"mon-2", "text/csv", "x\n"}, {"mon-3", "text/plain", "hello monitor"}}
	var csvBytes, allBytes int
	for _, o := range objects {
		sm := newSysmeta(o.pid, o.format, "MD5", []byte(o.data))
		if r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, strings.NewReader(o.data), false)...); r.Status != 200 {
			t.Fatalf("create %s: %d %s", o.pid, r.Status, r.Body)
		}
		allBytes += len(o.data)
		if o.format == "text/csv" {
			csvBytes += len(o.data)
		}
	}
	for range 4 {
		if r := s.get(t, "/d1/mn/v2/object/mon-1"); r.Status != 200 {
			t.Fatalf("get: %d", r.Status)
		}
	}

	var objs adapter.ObjectStats
	getJSON(t, s, "/d1/mn/v2/monitor/object", &objs)
	if objs.Objects != 3 || objs.Bytes != int64(allBytes) || len(objs.Formats) != 2 {
		t.Fatalf("monitor/object: %+v, want 3 objects, %d bytes, 2 formats", objs, allBytes)
	}
	list := s.get(t, "/d1/mn/v2/object?count=0")
	var ol adapter.ObjectList
	if err := adapter.Decode(bytes.NewReader(list.Body), &ol); err != nil || int64(ol.Total) != objs.Objects {
		t.Fatalf("listObjects total %d, monitor/object %d (%v)", ol.Total, objs.Objects, err)
	}
	var csv adapter.ObjectStats
	getJSON(t, s, "/d1/mn/v2/monitor/object?formatId=text%2Fcsv", &csv)
	if csv.Objects != 2 || csv.Bytes != int64(csvBytes) {
		t.Fatalf("monitor/object?formatId=text/csv: %+v", csv)
	}

	var ev struct {
		Events     adapter.EventStats
		Operations []struct {
			Role, Version, Operation string
			Requests, Errors         uint64
		}
	}
	getJSON(t, s, "/d1/mn/v2/monitor/event", &ev)
	count := map[string]int64{}
	for _, c := range ev.Events.Counts {
		count[c.Event] += c.Count
	}
	if count["create"] != 3 || count["read"] != 4 {
		t.Fatalf("monitor/event counts %v, want 3 create and 4 read", count)
	}
	var gets, creates uint64
	for _, o := range ev.Operations {
		switch o.Operation {
		case "MNRead.get":
			gets += o.Requests
		case "MNStorage.create":
			creates += o.Requests
		}
	}
	if gets != 4 || creates != 3 {
		t.Fatalf("monitor/event operations: %d gets, %d creates, want 4 and 3", gets, creates)
	}
	// The same counts through the metrics endpoint.
	metrics := string(s.get(t, "/metrics").Body)
	for _, line := range []string{
		`d1bridge_requests_total{code="200",operation="MNRead.get",role="mn",version="v2"} 4`,
		`d1bridge_requests_total{code="200",operation="MNStorage.create",role="mn",version="v2"} 3`,
		`d1bridge_objects_stored 3`,
		fmt.Sprintf("d1bridge_bytes_stored %d", allBytes),
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	// The creates kept their records, and the first get found mon-1's there.
	if kept, hits := reindexMetric(t, s, "d1bridge_record_memory_bytes"), reindexMetric(t, s, "d1bridge_record_memory_hits_total"); kept <= 0 || hits < 1 {
		t.Errorf("record memory: %v bytes kept, %v hits; want some of each", kept, hits)
	}

	var st map[string]any
	getJSON(t, s, "/d1/mn/v2/monitor/status", &st)
	if st["nodeId"] != testNodeID || st["catalog"].(map[string]any)["state"] != "up" {
		t.Fatalf("monitor/status: %v", st)
	}
	if us, ok := st["upstreams"].([]any); !ok || len(us) != 0 { // a list, empty: it was null
		t.Errorf("monitor/status upstreams of a node without any: %#v, want []", st["upstreams"])
	}
	if r := s.get(t, "/d1/mn/v2/monitor/event?period=week"); r.Status != http.StatusBadRequest {
		t.Fatalf("an unknown period: %d", r.Status)
	}
	if r := s.get(t, "/healthz"); r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	if r := s.get(t, "/readyz"); r.Status != 200 || !strings.Contains(string(r.Body), "ready") {
		t.Fatalf("readyz %d %s", r.Status, r.Body)
	}
	if r := s.head(t, "/healthz"); r.Status != 200 {
		t.Fatalf("HEAD healthz %d", r.Status)
	}
	// A path with dot segments or doubled slashes is not redirected to its
	// cleaned form (which would name another object): the API finds no
	// operation there.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/d1/mn/v2/object/mon-1/../mon-2", "/d1/mn//v2/monitor/ping", "/d1/mn/v2/./monitor/ping"} {
		resp, err := noRedirect.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `name="NotFound"`) {
			t.Errorf("GET %s: %d %s (Location %q); want a DataONE NotFound", path, resp.StatusCode, body, resp.Header.Get("Location"))
		}
	}
}

func getJSON(t *testing.T, s *server, path string, v any) {
	t.Helper()
	r := s.get(t, path)
	if r.Status != 200 {
		t.Fatalf("%s: %d %s", path, r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, r.Body)
	}
}
