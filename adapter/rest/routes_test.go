package rest

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testEngine serves f as MN and CN; trusted callers pass every permission check.
func testEngine(t *testing.T, f *fakeNode, trusted bool) (http.Handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p := auth.Policy{Submitters: []string{adapter.SubjectPublic}}
	if trusted {
		p.Trusted = []string{adapter.SubjectPublic}
	}
	h := New(Options{
		Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST", Name: "t", Description: "d", BaseURL: "http://x/d1",
			ContactSubjects: []string{"CN=a"}},
		MN: f, CN: f, Authorizer: auth.NewAuthorizer(p), Metrics: metrics.New(reg, "test"), MaxUploadSize: 1 << 20,
	})
	return h, reg
}

func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://x"+path, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// readSeed reads one of the seed's tables (testdata, copied from shared/seed/CONTRACT.md).
func readSeed(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			rows = append(rows, strings.Split(line, "|"))
		}
	}
	return rows
}

// seedOpNames maps the seed's operation names to ours where DataONE's API names
// them differently (op labels follow the API documentation).
var seedOpNames = map[string]string{
	"MNCore.log":                   "MNCore.getLogRecords",
	"CNAuthorization.setOwner":     "CNAuthorization.setRightsHolder",
	"MNAuthorization.isAuthorized": "MNAuthorization.isAuthorized",
}

// seedPathFixes are seed paths that omit the identifier the operation takes (the
// seed's own convention writes {pid}); API.md gives the full path.
var seedPathFixes = map[string]string{
	"GET /svc/mn/replica":  "/svc/mn/replica/{pid}",
	"GET /svc/cn/checksum": "/svc/cn/checksum/{pid}",
}

// TestSeedRoutes sends a request to every row of the seed's MN and CN tables, at
// the seed's literal path, at the canonical v1/v2 paths, and checks which
// operation answered (by its metrics label), never a 404 or 405.
func TestSeedRoutes(t *testing.T) {
	f := newFake()
	h, reg := testEngine(t, f, true)
	count := func(role, version, op string) float64 {
		n := 0.0
		for _, code := range []string{"200", "303", "307", "400", "401", "404", "409", "500", "501"} {
			n += testutil.ToFloat64(requestsCounter(reg, role, version, op, code))
		}
		return n
	}
	check := func(t *testing.T, role, version, op, method, path string) {
		t.Helper()
		before := count(role, version, op)
		w := serve(h, method, path)
		if w.Code == http.StatusNotFound && f.err == nil && !strings.Contains(w.Body.String(), "detailCode") {
			t.Fatalf("%s %s: 404", method, path)
		}
		if w.Code == http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: 405", method, path)
		}
		if count(role, version, op) != before+1 {
			t.Fatalf("%s %s: not answered by %s (%s): %d %s", method, path, op, version, w.Code, w.Body.String())
		}
	}
	for _, table := range []struct {
		file, role, prefix string
		versions           []string
	}{
		{"seed_mn_v2.txt", "mn", "MN", []string{"v2", "v1"}},
		{"seed_cn.txt", "cn", "CN", []string{"v2", "v1"}},
	} {
		for _, row := range readSeed(t, table.file) {
			group, opName, method, path := row[0], row[1], row[2], row[3]
			op := table.prefix + group + "." + opName
			if o, ok := seedOpNames[op]; ok {
				op = o
			}
			t.Run(table.role+"/"+opName, func(t *testing.T) {
				if method == "none" { // the seed: not implemented, for good
					p := map[string]string{"listNodes": "/d1/cn/node", "search": "/d1/cn/search/solr/q=x"}[opName]
					w := serve(h, http.MethodGet, p)
					if w.Code != http.StatusNotImplemented {
						t.Fatalf("%s: %d, want 501", p, w.Code)
					}
					xsdtest.Validate(t, w.Body.Bytes())
					return
				}
				for _, p := range strings.Split(path, " and ") {
					if fix, ok := seedPathFixes[method+" "+p]; ok {
						p = fix
					}
					literal := strings.NewReplacer("/svc/", "/d1/", "{pid}", "a%2Fb", "{format_id}", "text%2Fcsv").Replace(p)
					check(t, table.role, "v2", op, method, literal)
					rolePath := "/d1/" + table.role + "/"
					if !strings.HasPrefix(literal, rolePath) {
						continue // a literal path outside the role's prefix: seedPaths
					}
					for _, v := range table.versions {
						if v == "v1" && slices.Contains([]string{"updateSystemMetadata", "reindex", "updateIdMetadata"}, opName) && table.role == "mn" {
							w := serve(h, method, rolePath+"v1/"+strings.TrimPrefix(literal, rolePath))
							if w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
								t.Fatalf("v1 %s answered %d; it is v2 only", opName, w.Code)
							}
							continue
						}
						check(t, table.role, v, op, method, rolePath+v+"/"+strings.TrimPrefix(literal, rolePath))
					}
				}
			})
		}
	}
}

func requestsCounter(reg *prometheus.Registry, role, version, op, code string) prometheus.Collector {
	return &labelled{reg, "d1bridge_requests_total", map[string]string{"role": role, "version": version, "operation": op, "code": code}}
}

// responseBytes is the MN's d1bridge_response_bytes_total of op.
func responseBytes(reg *prometheus.Registry, op string) prometheus.Collector {
	return &labelled{reg, "d1bridge_response_bytes_total", map[string]string{"role": "mn", "operation": op}}
}

// labelled reads one series of a counter from a registry.
type labelled struct {
	reg    *prometheus.Registry
	name   string
	labels map[string]string
}

func (l *labelled) Describe(chan<- *prometheus.Desc) {}
func (l *labelled) Collect(ch chan<- prometheus.Metric) {
	mfs, _ := l.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != l.name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if l.labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("x", "x", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("x", "x", nil, nil), prometheus.CounterValue, 0)
}

// TestRouteTables checks the tables themselves: every operation has an error
// table with ServiceFailure, no (method, path) repeats within an interface.
func TestRouteTables(t *testing.T) {
	e := &engine{}
	e.mn = &mnHandlers{e: e}
	e.cn = &cnHandlers{mnHandlers: e.mn}
	for _, in := range e.interfaces() {
		seen := map[string]bool{}
		for _, r := range in.routes {
			key := in.prefix + " " + r.method + " " + r.path
			if seen[key] {
				t.Errorf("%s is routed twice", key)
			}
			seen[key] = true
			codes, ok := opErrors[r.op]
			if !ok {
				t.Errorf("%s: no error table", r.op)
				continue
			}
			if _, ok := codes[adapter.ServiceFailure]; !ok {
				t.Errorf("%s: the error table lacks ServiceFailure", r.op)
			}
		}
	}
}

// TestPermittedKinds: whatever a handler returns, the writer sends a kind the
// operation may raise.
func TestPermittedKinds(t *testing.T) {
	for op := range opErrors {
		for _, v := range []int{1, 2} {
			for _, k := range adapter.Kinds() {
				got := permitted(op, v, adapter.Errorf(k, "x"))
				_, ok := opErrors[op][got.Kind]
				if v == 1 {
					if _, ok1 := v1Errors[op][got.Kind]; ok1 {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s v%d: %s became %s, which %s may not raise", op, v, k, got.Kind, op)
				}
				if got.DetailCode == "" {
					t.Errorf("%s v%d %s: no detail code", op, v, k)
				}
			}
		}
	}
	if got := permitted("MNRead.get", 1, adapter.Errorf(adapter.InsufficientResources, "x")); got.Kind != adapter.InsufficientResources || got.DetailCode != "1002" {
		t.Errorf("v1 get InsufficientResources: %v %s", got.Kind, got.DetailCode)
	}
	if got := permitted("MNRead.get", 2, adapter.Errorf(adapter.InsufficientResources, "x")); got.Kind != adapter.ServiceFailure {
		t.Errorf("v2 get may not raise InsufficientResources, got %v", got.Kind)
	}
	if got := permitted("MNAdmin.reindex", 2, adapter.Errorf(adapter.InvalidToken, "x")); got.Kind != adapter.NotAuthorized {
		t.Errorf("reindex InvalidToken should become NotAuthorized, got %v", got.Kind)
	}
}

// TestSeedKinds compares the error tables with the seed's kinds per operation.
func TestSeedKinds(t *testing.T) {
	ops := map[string][]string{
		// MN
		"mn:get (v2)": {"MNRead.get"}, "mn:getSystemMetadata": {"MNRead.getSystemMetadata"},
		"mn:create, update": {"MNStorage.create", "MNStorage.update"}, "mn:package retrieval": {"MNPackage.getPackage"},
		"mn:publish": {"MNStorage.publish"}, "mn:updateSystemMetadata (v2)": {"MNStorage.updateSystemMetadata"},
		"mn:reindex (v2)": {"MNAdmin.reindex"}, "mn:updateIdMetadata (v2)": {"MNAdmin.updateIdMetadata"},
		// CN
		"cn:get, getSystemMetadata": {"CNRead.get", "CNRead.getSystemMetadata"}, "cn:create": {"CNCore.create"},
		"cn:registerSystemMetadata": {"CNCore.registerSystemMetadata"}, "cn:setAccessPolicy": {"CNAuthorization.setAccessPolicy"},
		"cn:isNodeAuthorized": {"CNReplication.isNodeAuthorized"},
		"cn:setReplicationPolicy, setObsoletedBy, deleteReplica": {"CNReplication.setReplicationPolicy", "CNCore.setObsoletedBy", "CNReplication.deleteReplicationMetadata"},
		"cn:setReplicationStatus":                                {"CNReplication.setReplicationStatus"}, "cn:updateReplicationMetadata": {"CNReplication.updateReplicationMetadata"},
		"cn:updateSystemMetadata": {"CNCore.updateSystemMetadata"},
	}
	// Rows whose seed list is a subset: "reading the report" names only the parse
	// step; the v1 get row and publishIdentifier are phrased relative to others.
	subset := map[string]bool{"mn:synchronizationFailed (reading the report)": true}
	for _, f := range []string{"mn", "cn"} {
		for _, row := range readSeed(t, "seed_kinds_"+f+".txt") {
			key := f + ":" + row[0]
			targets, ok := ops[key]
			if !ok && !subset[key] {
				switch key {
				case "mn:get (v1)", "mn:publishIdentifier":
					continue // checked below
				}
				t.Errorf("seed row %q is not mapped to an operation", key)
				continue
			}
			if subset[key] {
				targets = []string{"MNRead.synchronizationFailed"}
			}
			var want []string
			for _, k := range strings.Split(row[1], ", ") {
				want = append(want, strings.TrimSpace(k))
			}
			slices.Sort(want)
			for _, op := range targets {
				var got []string
				for k := range opErrors[op] {
					got = append(got, k.String())
				}
				slices.Sort(got)
				if subset[key] {
					for _, w := range want {
						if !slices.Contains(got, w) {
							t.Errorf("%s: may not raise %s, which the seed lists", op, w)
						}
					}
					continue
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: kinds %v, the seed says %v", op, got, want)
				}
			}
		}
	}
	if fmt.Sprint(opErrors["MNStorage.publishIdentifier"]) != fmt.Sprint(opErrors["MNStorage.publish"]) {
		t.Error("publishIdentifier raises the kinds of publish")
	}
	if _, ok := v1Errors["MNRead.get"][adapter.InsufficientResources]; !ok {
		t.Error("v1 get may raise InsufficientResources")
	}
}
