package main

// End-to-end tests of reindex (PUT /v2/index) and of harvesting a store whose
// objects appear on their own (an http upstream with harvest.interval).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	reindexSecret = "reindex-proxy-secret"
	reindexAdmin  = "CN=reindex admin,O=d1bridge,DC=example,DC=org"
	reindexUser   = "CN=reindex user,O=d1bridge,DC=example,DC=org"
)

// reindexEnv lets a front proxy vouch for subjects, and makes reindexAdmin an
// administrator (trusted).
var reindexEnv = []string{
	"D1BRIDGE_ENABLESESSIONFROMHEADER=true",
	"D1BRIDGE_AUTH_PROXY_SECRET=" + reindexSecret,
	`D1BRIDGE_NODE_ADMINISTRATORS=["` + reindexAdmin + `"]`,
}

// reindexAs are the headers of subject, vouched for by the proxy.
func reindexAs(subject string) []string {
	return []string{"Ssl-Client-Subject-Dn", subject, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", reindexSecret}
}

// reindexPut sends PUT /d1/mn/v{v}/index{rest} with header pairs.
func reindexPut(t testing.TB, s *server, v int, rest string, header ...string) *response {
	t.Helper()
	return s.do(t, http.MethodPut, mnp(v, "/index"+rest), nil, header...)
}

// reindexObjectFile is the file of the embedded store that holds data (the store
// names files by a hash of a key the API does not show, so it is found by its
// content, which the tests keep unique).
func reindexObjectFile(t testing.TB, dataDir string, data []byte) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(filepath.Join(dataDir, "objects"), func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, data) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d files of the object store hold the object's bytes, want 1", len(found))
	}
	return found[0]
}

// reindexMetric is the value of the sample series (name and labels, as the
// exposition format writes them) on s's /metrics; 0 when absent.
func reindexMetric(t testing.TB, s *server, series string) float64 {
	t.Helper()
	resp, err := client.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

// reindexEventually polls cond every 20ms for up to 30s.
func reindexEventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReindex(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", reindexEnv...)
	admin := reindexAs(reindexAdmin)
	old, changed := []byte("reindex: the bytes as created"), []byte("reindex: the bytes changed behind the node's back")
	create(t, s, newSysmeta("ri-1", "text/plain", "MD5", old), old)
	before := getMeta(t, s, 2, "ri-1")

	t.Run("one pid", func(t *testing.T) {
		if err := os.WriteFile(reindexObjectFile(t, s.DataDir, old), changed, 0o600); err != nil {
			t.Fatal(err)
		}
		r := reindexPut(t, s, 2, "/ri-1", admin...)
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		sm := getMeta(t, s, 2, "ri-1")
		if sm.Size != uint64(len(changed)) || sm.Checksum != (adapter.Checksum{Algorithm: "MD5", Value: checksum("MD5", changed)}) ||
			sm.SerialVersion != before.SerialVersion+1 || !sm.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
			t.Errorf("after reindex: size %d checksum %+v serialVersion %d", sm.Size, sm.Checksum, sm.SerialVersion)
		}
		var c adapter.Checksum
		decode(t, s.get(t, checksumPath(2, "ri-1")), &c)
		if c.Value != checksum("MD5", changed) {
			t.Errorf("getChecksum after reindex: %+v", c)
		}
		// Again: nothing changed, nothing moves.
		wantStatus(t, reindexPut(t, s, 2, "?pid=ri-1", admin...), http.StatusOK)
		if sm2 := getMeta(t, s, 2, "ri-1"); sm2.SerialVersion != sm.SerialVersion {
			t.Errorf("a reindex without a change moved serialVersion to %d", sm2.SerialVersion)
		}
	})

	t.Run("errors", func(t *testing.T) {
		e := wantError(t, reindexPut(t, s, 2, "/ri-unknown", admin...), http.StatusBadRequest, "InvalidRequest")
		if e.Identifier != "ri-unknown" {
			t.Errorf("unknown pid: the error names %q", e.Identifier)
		}
		wantError(t, reindexPut(t, s, 2, "", admin...), http.StatusBadRequest, "InvalidRequest")
		wantError(t, reindexPut(t, s, 2, "?pid=ri-1&pid=ri-unknown", admin...), http.StatusBadRequest, "InvalidRequest")
		wantError(t, reindexPut(t, s, 2, "?formatId=text/plain&pid=ri-1", admin...), http.StatusBadRequest, "InvalidRequest")
		wantError(t, reindexPut(t, s, 2, "/ri-1"), http.StatusUnauthorized, "NotAuthorized")
		wantError(t, reindexPut(t, s, 2, "/ri-1", reindexAs(reindexUser)...), http.StatusUnauthorized, "NotAuthorized")
		wantError(t, reindexPut(t, s, 2, "?all=true", reindexAs(reindexUser)...), http.StatusUnauthorized, "NotAuthorized")
		wantError(t, reindexPut(t, s, 1, "/ri-1", admin...), http.StatusNotFound, "NotFound")

		gone := []byte("reindex: bytes that will be lost")
		create(t, s, newSysmeta("ri-gone", "text/plain", "SHA-256", gone), gone)
		if err := os.Remove(reindexObjectFile(t, s.DataDir, gone)); err != nil {
			t.Fatal(err)
		}
		e = wantError(t, reindexPut(t, s, 2, "/ri-gone", admin...), http.StatusInternalServerError, "ServiceFailure")
		if !strings.Contains(e.Description, "ri-gone") {
			t.Errorf("missing bytes: %q does not name the pid", e.Description)
		}
	})

	t.Run("batch by format", func(t *testing.T) {
		const n = 12
		var want []string
		for i := range n {
			pid, data := fmt.Sprintf("ri-csv-%02d", i), []byte(fmt.Sprintf("a,b\n%d,%d\n", i, i*i))
			create(t, s, newSysmeta(pid, "text/csv", "SHA-1", data), data)
			if i%3 == 0 {
				data = append(data, "more,rows\n"...)
				if err := os.WriteFile(reindexObjectFile(t, s.DataDir, data[:len(data)-10]), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want = append(want, checksum("SHA-1", data))
		}
		updated := reindexMetric(t, s, `d1bridge_reindex_records_total{outcome="updated"}`)
		wantStatus(t, reindexPut(t, s, 2, "?formatId=text/csv", admin...), http.StatusOK)
		reindexEventually(t, "the batch reindex", func() bool {
			return reindexMetric(t, s, `d1bridge_reindex_records_total{outcome="updated"}`) == updated+4 &&
				reindexMetric(t, s, "d1bridge_reindex_running") == 0
		})
		if got := reindexMetric(t, s, "d1bridge_reindex_batch_records"); got != n {
			t.Errorf("the batch selected %v records, want %d", got, n)
		}
		for i, sum := range want {
			if sm := getMeta(t, s, 2, fmt.Sprintf("ri-csv-%02d", i)); sm.Checksum.Value != sum {
				t.Errorf("ri-csv-%02d: checksum %s, want %s", i, sm.Checksum.Value, sum)
			}
		}
		if sm := getMeta(t, s, 2, "ri-1"); sm.SerialVersion != before.SerialVersion+1 {
			t.Errorf("a batch of text/csv reindexed ri-1 (text/plain)")
		}
	})
}

// harvestUpstream is a small legacy repository: a JSON list of items (paged, with
// an optional since filter) and their bytes.
type harvestUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	items  []harvestItem
	sinces []string // the since parameter of every list request
}

type harvestItem struct {
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	Modified time.Time `json:"modified"`
	data     []byte
}

func newHarvestUpstream(t *testing.T) *harvestUpstream {
	l := &harvestUpstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		defer l.mu.Unlock()
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		since, _ := time.Parse(time.RFC3339, r.URL.Query().Get("since"))
		l.sinces = append(l.sinces, r.URL.Query().Get("since"))
		var match []harvestItem
		for _, it := range l.items {
			if !it.Modified.Before(since) {
				match = append(match, it)
			}
		}
		from, to := min((page-1)*per, len(match)), min(page*per, len(match))
		json.NewEncoder(w).Encode(map[string]any{"items": match[from:to]})
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		if it, ok := l.item(r.PathValue("id")); ok {
			json.NewEncoder(w).Encode(it)
			return
		}
		http.NotFound(w, r)
	})
	mux.HandleFunc("GET /files/{id}", func(w http.ResponseWriter, r *http.Request) {
		if it, ok := l.item(r.PathValue("id")); ok {
			w.Write(it.data)
			return
		}
		http.NotFound(w, r)
	})
	l.Server = httptest.NewServer(mux)
	t.Cleanup(l.Close)
	return l
}

func (l *harvestUpstream) item(id string) (harvestItem, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range l.items {
		if it.ID == id {
			return it, true
		}
	}
	return harvestItem{}, false
}

// set adds or replaces an item.
func (l *harvestUpstream) set(it harvestItem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.items {
		if l.items[i].ID == it.ID {
			l.items[i] = it
			return
		}
	}
	l.items = append(l.items, it)
}

// TestHarvestHTTPStore: a node over an http store with harvest.interval
// registers the store's objects, serves them, logs their creation, registers
// a change, and asks the store only for what changed since its last pass;
// reindex asks the store again.
func TestHarvestHTTPStore(t *testing.T) {
	t.Parallel()
	legacy := newHarvestUpstream(t)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for i := range 5 {
		legacy.set(harvestItem{ID: fmt.Sprintf("item-%d", i), Type: "text/plain", Modified: t0.Add(time.Duration(i) * time.Second),
			data: []byte(fmt.Sprintf("legacy item %d", i))})
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`upstreams:
  - name: legacy
    type: http
    baseURL: %s
    timeout: 5s
    harvest:
      interval: 100ms
      readers: [public]
      rightsHolder: "CN=legacy owner,DC=example,DC=org"
    options:
      pid: "legacy:{key}"
      fields: {key: id, formatId: type, modified: modified}
      get: {url: "/files/{key}"}
      stat: {url: "/items/{key}"}
      list: {url: "/items?page={page}&per_page={pageSize}", paging: page, pageSize: 2, items: items, since: "since={since}"}
store: legacy
`, legacy.URL)
	path := filepath.Join(dir, "harvest.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, filepath.Join(dir, "data"), path, reindexEnv...)

	reindexEventually(t, "the first harvest", func() bool { return listObjects(t, s, 2, "").Total == 5 })
	sm := getMeta(t, s, 2, "legacy:item-3")
	if sm.Checksum != (adapter.Checksum{Algorithm: "SHA-256", Value: checksum("SHA-256", []byte("legacy item 3"))}) ||
		sm.Size != 13 || sm.FormatID != "text/plain" || sm.RightsHolder != "CN=legacy owner,DC=example,DC=org" ||
		sm.AuthoritativeMemberNode != testNodeID || !sm.DateUploaded.Equal(t0.Add(3*time.Second)) {
		t.Errorf("harvested system metadata: %+v", sm)
	}
	if r := s.get(t, objectPath(2, "legacy:item-3")); wantStatus(t, r, http.StatusOK) && string(r.Body) != "legacy item 3" {
		t.Errorf("get: %q", r.Body)
	}
	if got := events(logRecords(t, s, 2, "event=create")); len(got) != 5 || !slices.Contains(got, "legacy:item-0 create") {
		t.Errorf("create events: %v", got)
	}

	legacy.set(harvestItem{ID: "item-1", Type: "text/csv", Modified: time.Now().UTC(), data: []byte("a,b\n1,2\n")})
	reindexEventually(t, "the harvest of a change", func() bool { return getMeta(t, s, 2, "legacy:item-1").SerialVersion == 2 })
	sm = getMeta(t, s, 2, "legacy:item-1")
	if sm.FormatID != "text/csv" || sm.Checksum.Value != checksum("SHA-256", []byte("a,b\n1,2\n")) || sm.Size != 8 {
		t.Errorf("after a change: %+v", sm)
	}
	if got := events(logRecords(t, s, 2, "event=update")); !slices.Equal(got, []string{"legacy:item-1 update"}) {
		t.Errorf("update events: %v", got)
	}
	legacy.mu.Lock()
	incremental := legacy.sinces[0] == "" && legacy.sinces[len(legacy.sinces)-1] != ""
	legacy.mu.Unlock()
	if !incremental {
		t.Errorf("the passes asked for since %v: want the first full, the later ones incremental", legacy.sinces)
	}
	if got := reindexMetric(t, s, `d1bridge_harvest_records_total{outcome="registered"}`); got != 5 {
		t.Errorf("registered records counted %v, want 5", got)
	}
	if reindexMetric(t, s, `d1bridge_harvest_passes_total{outcome="ok"}`) < 2 || reindexMetric(t, s, "d1bridge_harvest_last_success_timestamp_seconds") == 0 {
		t.Error("the harvest passes are not counted")
	}

	// Changed without a new modification time: the harvest cannot tell, reindex can.
	it, _ := legacy.item("item-4")
	it.data = []byte("legacy item 4, silently longer")
	legacy.set(it)
	wantStatus(t, reindexPut(t, s, 2, "/"+segment("legacy:item-4"), reindexAs(reindexAdmin)...), http.StatusOK)
	if sm := getMeta(t, s, 2, "legacy:item-4"); sm.Size != uint64(len(it.data)) || sm.Checksum.Value != checksum("SHA-256", it.data) {
		t.Errorf("after reindex: %+v", sm)
	}
}
