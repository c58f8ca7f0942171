package node_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// startTree harvests the env's lister as a file tree of datasets one folder
// deep, under the source name "tree".
func (e *harvestEnv) startTree() {
	e.n.StartDatasets(node.GroupFiles(e.lister, 1), node.DatasetOptions{Name: "tree", RightsHolder: harvestOwner,
		Readers: []string{adapter.SubjectPublic}, Metrics: e.m, PIDPrefix: "t:",
		Facts: datapackage.Facts{Publisher: "Test Repository"}})
}

func (e *harvestEnv) datasets(name string) node.DatasetReport {
	e.t.Helper()
	rep, err := e.n.HarvestDatasets(context.Background(), name)
	if err != nil {
		e.t.Fatalf("dataset pass: %v", err)
	}
	return rep
}

// file puts a holding of the tree under path with data, modified at mod.
func (e *harvestEnv) file(path, data string, mod time.Time) {
	e.t.Helper()
	e.put(node.Found{Key: "/" + path, FileName: path, Modified: mod}, []byte(data))
	e.lister.mu.Lock()
	defer e.lister.mu.Unlock()
	slices.SortFunc(e.lister.objs, func(a, b node.Found) int { return strings.Compare(a.Key, b.Key) })
}

func (e *harvestEnv) remove(path string) {
	e.lister.mu.Lock()
	defer e.lister.mu.Unlock()
	e.lister.objs = slices.DeleteFunc(e.lister.objs, func(f node.Found) bool { return f.Key == "/"+path })
}

// members reads a resource map and returns the pids it aggregates.
func (e *harvestEnv) members(mapPID string) []string {
	e.t.Helper()
	obj, err := e.n.Get(context.Background(), adapter.PublicSession(), mapPID)
	if err != nil {
		e.t.Fatalf("get %q: %v", mapPID, err)
	}
	defer obj.Body.Close()
	b, _ := io.ReadAll(obj.Body)
	var pids []string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "<dcterms:identifier>"); ok {
			pids = append(pids, strings.TrimSuffix(v, "</dcterms:identifier>"))
		}
	}
	if len(pids) == 0 || pids[0] != mapPID {
		e.t.Fatalf("resource map %q names %v first", mapPID, pids)
	}
	return pids[1:]
}

func (e *harvestEnv) body(pid string) string {
	e.t.Helper()
	obj, err := e.n.Get(context.Background(), adapter.PublicSession(), pid)
	if err != nil {
		e.t.Fatalf("get %q: %v", pid, err)
	}
	defer obj.Body.Close()
	b, _ := io.ReadAll(obj.Body)
	return string(b)
}

// TestDatasetVersions follows one dataset through its life: registered as a
// package (data, generated EML, resource map), unchanged (nothing written),
// changed (new versions of what changed, the rest kept, a removed file
// archived), and withdrawn (archived, nothing deleted).
func TestDatasetVersions(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("README.txt", "above the datasets: ignored", t0)
	e.file("ds1/a.csv", "x,y\n1,2\n", t0)
	e.file("ds1/sub/b.csv", "b\n", t0)
	e.file("ds2/c.txt", "c", t0.Add(time.Hour))

	if rep := e.datasets("tree"); rep.Registered != 2 || rep.Objects != 2*2+3 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	if got := e.members("resource_map_t:ds1@v1"); !slices.Equal(got, []string{"t:ds1@v1", "t:ds1@v1/a.csv", "t:ds1@v1/sub/b.csv"}) {
		t.Fatalf("ds1 v1 members: %v", got)
	}
	a1 := e.meta("t:ds1@v1/a.csv")
	if a1.SeriesID != "t:ds1/a.csv" || a1.FormatID != "text/csv" || a1.Size != 8 || a1.Checksum.Algorithm != "SHA-256" || a1.FileName != "a.csv" {
		t.Fatalf("a.csv: %+v", a1)
	}
	eml := e.meta("t:ds1@v1")
	if eml.SeriesID != "t:ds1" || eml.FormatID != datapackage.FormatEML220 {
		t.Fatalf("science metadata: %+v", eml)
	}
	if body := e.body("t:ds1@v1"); !strings.Contains(body, `packageId="t:ds1@v1"`) || !strings.Contains(body, "Test Repository") || !strings.Contains(body, "sub/b.csv") {
		t.Fatalf("generated EML:\n%s", body)
	}
	rm := e.meta("resource_map_t:ds1@v1")
	if rm.FormatID != datapackage.FormatORE || rm.SeriesID != "resource_map_t:ds1" {
		t.Fatalf("resource map: %+v", rm)
	}

	// Nothing changed: one lookup per dataset, nothing read, nothing written.
	gets := e.blobs.gets.Load()
	if rep := e.datasets("tree"); rep.Unchanged != 2 || rep.Objects != 0 {
		t.Fatalf("unchanged pass: %+v", rep)
	}
	if e.blobs.gets.Load() != gets {
		t.Fatalf("an unchanged pass read bytes")
	}

	// a.csv changes, sub/b.csv goes, d.csv comes; ds2 is untouched.
	e.file("ds1/a.csv", "x,y\n1,3\n", t0.Add(2*time.Hour))
	e.remove("ds1/sub/b.csv")
	e.file("ds1/d.csv", "d\n", t0.Add(2*time.Hour))
	if rep := e.datasets("tree"); rep.Updated != 1 || rep.Unchanged != 1 || rep.Objects != 4+1 { // 4 new, 1 archived
		t.Fatalf("changed pass: %+v", rep)
	}
	if got := e.members("resource_map_t:ds1@v2"); !slices.Equal(got, []string{"t:ds1@v2", "t:ds1@v2/a.csv", "t:ds1@v2/d.csv"}) {
		t.Fatalf("ds1 v2 members: %v", got)
	}
	a2 := e.meta("t:ds1@v2/a.csv")
	if a2.Obsoletes != "t:ds1@v1/a.csv" || !a2.DateUploaded.After(a1.DateUploaded.Time) {
		t.Fatalf("a.csv v2: %+v", a2)
	}
	if a1 = e.meta("t:ds1@v1/a.csv"); a1.ObsoletedBy != "t:ds1@v2/a.csv" || a1.SerialVersion < 2 {
		t.Fatalf("a.csv v1 after: %+v", a1)
	}
	if b := e.meta("t:ds1@v1/sub/b.csv"); !b.Archived {
		t.Fatalf("the removed file is not archived: %+v", b)
	}
	if r := e.meta("resource_map_t:ds1@v1"); r.ObsoletedBy != "resource_map_t:ds1@v2" {
		t.Fatalf("resource map v1: %+v", r)
	}
	if m := e.meta("t:ds1"); m.Identifier != "t:ds1@v2" || m.Obsoletes != "t:ds1@v1" {
		t.Fatalf("the series t:ds1 resolves to %+v", m)
	}

	// An unchanged file keeps its pid in the next version.
	e.file("ds1/d.csv", "d2\n", t0.Add(3*time.Hour))
	e.datasets("tree")
	if got := e.members("resource_map_t:ds1@v3"); !slices.Equal(got, []string{"t:ds1@v3", "t:ds1@v2/a.csv", "t:ds1@v3/d.csv"}) {
		t.Fatalf("ds1 v3 members: %v", got)
	}

	// ds2 disappears from the store: archived, not deleted.
	e.remove("ds2/c.txt")
	if rep := e.datasets("tree"); rep.Archived != 1 {
		t.Fatalf("withdrawing pass: %+v", rep)
	}
	for _, pid := range []string{"t:ds2@v1/c.txt", "t:ds2@v1", "resource_map_t:ds2@v1"} {
		if sm := e.meta(pid); !sm.Archived {
			t.Errorf("%s is not archived after its dataset went", pid)
		}
	}
	if rep := e.datasets("tree"); rep.Archived != 0 || rep.Objects != 0 || rep.Unchanged != 1 {
		t.Fatalf("pass after withdrawing: %+v", rep)
	}
}

// TestDatasetRevived: a dataset its source lists again after its withdrawal
// comes back as a new dataset, D~2 (archived objects can be neither updated
// nor followed in their series), and the source's other withdrawals go on.
// It used to fail every pass (its new objects reused the archived series),
// and since nothing is archived after a pass with failures, the source
// archived nothing more.
func TestDatasetRevived(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds1/a.csv", "a\n", t0)
	e.file("ds2/c.txt", "c", t0)
	e.datasets("tree")
	e.remove("ds2/c.txt")
	if rep := e.datasets("tree"); rep.Archived != 1 {
		t.Fatalf("withdrawing pass: %+v", rep)
	}

	e.file("ds2/c.txt", "c", t0)
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Failed != 0 || rep.Objects != 3 {
		t.Fatalf("pass after the dataset came back: %+v", rep)
	}
	if got := e.members("resource_map_t:ds2~2@v1"); !slices.Equal(got, []string{"t:ds2~2@v1", "t:ds2~2@v1/c.txt"}) {
		t.Fatalf("the revived package's members: %v", got)
	}
	if sm := e.meta("t:ds2~2/c.txt"); sm.Identifier != "t:ds2~2@v1/c.txt" || sm.Obsoletes != "" || sm.Archived {
		t.Fatalf("the revived data file: %+v", sm)
	}
	if sm := e.meta("t:ds2"); sm.Identifier != "t:ds2@v1" || !sm.Archived || sm.ObsoletedBy != "" {
		t.Fatalf("the first generation's series resolves to %+v, want its archived head", sm)
	}
	if rep := e.datasets("tree"); rep.Unchanged != 2 || rep.Objects != 0 {
		t.Fatalf("unchanged pass after the revival: %+v", rep)
	}

	// The source goes on: a change reaches the second generation, a
	// withdrawal is archived, and a second revival is a third generation.
	e.file("ds2/c.txt", "c2", t0.Add(time.Hour))
	if rep := e.datasets("tree"); rep.Updated != 1 || rep.Failed != 0 {
		t.Fatalf("pass with the revived dataset changed: %+v", rep)
	}
	if sm := e.meta("t:ds2~2@v2/c.txt"); sm.Obsoletes != "t:ds2~2@v1/c.txt" {
		t.Fatalf("the revived file's next version: %+v", sm)
	}
	e.remove("ds1/a.csv")
	e.remove("ds2/c.txt")
	e.file("ds3/e.txt", "e", t0.Add(time.Hour)) // the source lists something (TestDatasetEmptyListing)
	if rep := e.datasets("tree"); rep.Archived != 2 || rep.Failed != 0 {
		t.Fatalf("pass withdrawing both: %+v", rep)
	}
	if sm := e.meta("t:ds2~2"); !sm.Archived {
		t.Fatalf("the second generation is not archived: %+v", sm)
	}
	e.file("ds2/c.txt", "c3", t0.Add(2*time.Hour))
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass after the second revival: %+v", rep)
	}
	if sm := e.meta("t:ds2~3/c.txt"); sm.Identifier != "t:ds2~3@v1/c.txt" {
		t.Fatalf("the third generation: %+v", sm)
	}
}

// TestDatasetEmptyListing: a full walk that lists no dataset (an unmounted
// directory, an API answering an empty page) archived every dataset the
// source had registered, for good; it fails the pass and archives nothing,
// and a listing with the datasets again finds them unchanged.
func TestDatasetEmptyListing(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds1/a.csv", "a\n", t0)
	e.file("ds2/c.txt", "c", t0)
	e.datasets("tree")
	e.remove("ds1/a.csv")
	e.remove("ds2/c.txt")
	rep, err := e.n.HarvestDatasets(context.Background(), "tree")
	if err == nil || !strings.Contains(err.Error(), "listed no dataset") || rep.Archived != 0 {
		t.Fatalf("pass over an empty listing: %+v, %v; want it failed, nothing archived", rep, err)
	}
	for _, pid := range []string{"t:ds1@v1", "t:ds2@v1/c.txt"} {
		if sm := e.meta(pid); sm.Archived {
			t.Errorf("%s archived after an empty listing", pid)
		}
	}
	e.file("ds1/a.csv", "a\n", t0)
	e.file("ds2/c.txt", "c", t0)
	if rep := e.datasets("tree"); rep.Unchanged != 2 || rep.Archived+rep.Failed != 0 {
		t.Fatalf("pass once the source lists again: %+v", rep)
	}
}

// TestDatasetArchivedMembersComeBack: a file the dataset had dropped (and
// that was archived) comes back as a new object in the series D/p~2, and so
// does a file or a metadata document a client archived, once the source
// changes it: archived objects can be neither updated nor followed in their
// series. The dataset failed every pass from then on, and the source's
// withdrawals were never archived again.
func TestDatasetArchivedMembersComeBack(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds1/a.csv", "a\n", t0)
	e.file("ds1/b.csv", "b\n", t0)
	e.datasets("tree")
	e.remove("ds1/b.csv")
	e.datasets("tree") // v2 without b.csv, t:ds1@v1/b.csv archived
	e.file("ds1/b.csv", "b\n", t0.Add(time.Hour))
	if rep := e.datasets("tree"); rep.Updated != 1 || rep.Failed != 0 {
		t.Fatalf("pass after b.csv came back: %+v", rep)
	}
	if got := e.members("resource_map_t:ds1@v3"); !slices.Equal(got, []string{"t:ds1@v3", "t:ds1@v1/a.csv", "t:ds1@v3/b.csv"}) {
		t.Fatalf("v3 members: %v", got)
	}
	if sm := e.meta("t:ds1@v3/b.csv"); sm.SeriesID != "t:ds1/b.csv~2" || sm.Obsoletes != "" || sm.Archived {
		t.Fatalf("the file that came back: %+v", sm)
	}

	// A client archives a file and the metadata; the source then changes both.
	ctx, owner := context.Background(), &adapter.Session{Subject: harvestOwner}
	for _, pid := range []string{"t:ds1@v1/a.csv", "t:ds1@v3"} {
		if _, err := e.n.Archive(ctx, owner, pid); err != nil {
			t.Fatal(err)
		}
	}
	e.file("ds1/a.csv", "a2\n", t0.Add(2*time.Hour))
	if rep := e.datasets("tree"); rep.Updated != 1 || rep.Failed != 0 {
		t.Fatalf("pass after archived members changed: %+v", rep)
	}
	if got := e.members("resource_map_t:ds1@v4"); !slices.Equal(got, []string{"t:ds1@v4", "t:ds1@v4/a.csv", "t:ds1@v3/b.csv"}) {
		t.Fatalf("v4 members: %v", got)
	}
	if sm := e.meta("t:ds1/a.csv~2"); sm.Identifier != "t:ds1@v4/a.csv" || sm.Obsoletes != "" {
		t.Fatalf("the changed file a client had archived: %+v", sm)
	}
	if sm := e.meta("t:ds1~2"); sm.Identifier != "t:ds1@v4" {
		t.Fatalf("the metadata a client had archived: %+v", sm)
	}
	e.file("ds1/a.csv", "a3\n", t0.Add(3*time.Hour))
	e.datasets("tree")
	if sm := e.meta("t:ds1@v5/a.csv"); sm.SeriesID != "t:ds1/a.csv~2" || sm.Obsoletes != "t:ds1@v4/a.csv" {
		t.Fatalf("the next version continues the new series: %+v", sm)
	}
}

// unreadable lists the folder path as one the store could not read, where a
// directory walk lists it (in path order), as the files store does.
func (e *harvestEnv) unreadable(path string) {
	e.lister.mu.Lock()
	defer e.lister.mu.Unlock()
	i, _ := slices.BinarySearchFunc(e.lister.objs, "/"+path, func(f node.Found, k string) int { return strings.Compare(f.Key, k) })
	e.lister.objs = slices.Insert(e.lister.objs, i, node.Found{Size: -1, FileName: path, Problem: errors.New("permission denied")})
}

// TestDatasetUnreadableFolder: a folder the store cannot read fails its
// dataset, or the pass when it is above the datasets' level; what it holds
// is not archived as removed.
func TestDatasetUnreadableFolder(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds1/a.csv", "a\n", t0)
	e.file("ds1/raw/b.csv", "b\n", t0)
	e.file("ds2/c.txt", "c", t0)
	if rep := e.datasets("tree"); rep.Registered != 2 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	e.remove("ds1/raw/b.csv")
	e.unreadable("ds1/raw")
	e.remove("ds2/c.txt")
	e.unreadable("ds2")
	if rep := e.datasets("tree"); rep.Failed != 2 || rep.Archived != 0 || rep.Objects != 0 {
		t.Fatalf("pass with unreadable folders: %+v, want 2 failed and nothing archived", rep)
	}
	for _, pid := range []string{"t:ds1@v1/raw/b.csv", "t:ds2@v1/c.txt", "resource_map_t:ds2@v1"} {
		if sm := e.meta(pid); sm.Archived {
			t.Errorf("%s was archived though its folder could not be read", pid)
		}
	}
	e.lister.mu.Lock()
	e.lister.objs = slices.DeleteFunc(e.lister.objs, func(f node.Found) bool { return f.Problem != nil })
	e.lister.mu.Unlock()
	e.unreadable("") // the root: every dataset is unknown
	if rep := e.datasets("tree"); rep.Failed != 1 || rep.Archived != 0 {
		t.Fatalf("pass with the root unreadable: %+v, want 1 failed and nothing archived", rep)
	}
	if sm := e.meta("t:ds2@v1/c.txt"); sm.Archived {
		t.Errorf("ds2 was archived though the tree above it could not be read")
	}
}

// TestDatasetNamesWithSpaces: folders and files whose names hold whitespace
// become identifiers with it percent-encoded; the objects keep their names.
func TestDatasetNamesWithSpaces(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("Lake survey/raw data.csv", "a\n", t0)
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass: %+v", rep)
	}
	if got := e.members("resource_map_t:Lake%20survey@v1"); !slices.Equal(got, []string{"t:Lake%20survey@v1", "t:Lake%20survey@v1/raw%20data.csv"}) {
		t.Fatalf("members: %v", got)
	}
	if sm := e.meta("t:Lake%20survey@v1/raw%20data.csv"); sm.FileName != "raw data.csv" || sm.SeriesID != "t:Lake%20survey/raw%20data.csv" {
		t.Fatalf("data file: %+v", sm)
	}
	if rep := e.datasets("tree"); rep.Unchanged != 1 || rep.Archived != 0 {
		t.Fatalf("second pass: %+v", rep)
	}
}

// TestDatasetNamesLikeGenerations: a folder or file whose name ends like a
// generation ("~2") or a version ("@v1") keeps its own identifiers, apart
// from the generation or version it reads as; and '%' is encoded, so that a
// name holding "%20" is not the name with a space. The dataset "ds~2" took
// the series of "ds" revived, and "ds@v1" that of ds's first version.
func TestDatasetNamesLikeGenerations(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds/a.csv", "a\n", t0)
	e.file("ds/a.csv~2", "not a generation\n", t0)
	e.file("ds~2/b.csv", "b\n", t0)
	e.file("ds@v1/c.csv", "c\n", t0)
	e.file("x y/d.csv", "d\n", t0)
	e.file("x%20y/e.csv", "e\n", t0)
	if rep := e.datasets("tree"); rep.Registered != 5 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	e.remove("ds/a.csv")
	e.remove("ds/a.csv~2")
	if rep := e.datasets("tree"); rep.Archived != 1 || rep.Failed != 0 {
		t.Fatalf("withdrawing pass: %+v", rep)
	}
	e.file("ds/a.csv", "a again\n", t0.Add(time.Hour))
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass after ds came back: %+v", rep)
	}
	for pid, name := range map[string]string{
		"t:ds%7E2@v1/b.csv":  "b.csv",
		"t:ds~2@v1/a.csv":    "a.csv",
		"t:ds@v1/a.csv%7E2":  "a.csv~2",
		"t:ds%40v1@v1/c.csv": "c.csv",
		"t:x%20y@v1/d.csv":   "d.csv",
		"t:x%2520y@v1/e.csv": "e.csv",
	} {
		if sm := e.meta(pid); sm.FileName != name {
			t.Errorf("%s: file name %q, want %q", pid, sm.FileName, name)
		}
	}
}

// TestDatasetNestedIDs: a source whose dataset ids nest ("a" and "a/b":
// OAI identifiers, landing URLs, OCFL ids) names the file b/c.csv of one and
// c.csv of the other alike. The second registered went on with the first's
// series, and its object obsoleted a member of the other package. The first
// registered keeps its series; the other fails, every pass, and changes
// nothing.
func TestDatasetNestedIDs(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "recs", Readers: []string{adapter.SubjectPublic}})
	e.put(node.Found{Key: "k1"}, []byte("first dataset's file"))
	e.put(node.Found{Key: "k2"}, []byte("second dataset's file"))
	src.list = []*node.Dataset{{ID: "a", Version: "1", Modified: t0, Files: []node.Found{{Key: "k1", FileName: "b/c.csv", Size: -1}}}}
	if rep := e.datasets("recs"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	src.list = append(src.list, &node.Dataset{ID: "a/b", Version: "1", Modified: t0, Files: []node.Found{{Key: "k2", FileName: "c.csv", Size: -1}}})
	for range 2 {
		if rep := e.datasets("recs"); rep.Failed != 1 || rep.Registered != 0 {
			t.Fatalf("pass with the nested dataset: %+v, want it failed", rep)
		}
	}
	for _, pid := range e.members("resource_map_a@v1") {
		if sm := e.meta(pid); sm.ObsoletedBy != "" || sm.Archived {
			t.Errorf("%q, a member of dataset a, is obsoleted by %q (archived %v)", pid, sm.ObsoletedBy, sm.Archived)
		}
	}
	if sm := e.meta("a/b/c.csv"); sm.Identifier != "a@v1/b/c.csv" {
		t.Errorf("the series a/b/c.csv resolves to %q, want dataset a's file", sm.Identifier)
	}
}

// TestDatasetStaleBagManifest: a bag's manifest is a claim a person may let
// go stale (a payload file edited after bagging): its checksum is checked
// against the bytes. It was registered as given, and the node served bytes
// that did not have their system metadata's checksum. The dataset fails,
// saying so, until the bag is right.
func TestDatasetStaleBagManifest(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	sized := func(path, data string) {
		e.file(path, data, t0)
		e.lister.mu.Lock()
		for i := range e.lister.objs {
			if e.lister.objs[i].FileName == path || strings.HasSuffix(e.lister.objs[i].Key, "/"+path) {
				e.lister.objs[i].Size = int64(len(data))
			}
		}
		e.lister.mu.Unlock()
	}
	want := md5Hex([]byte("core\n"))
	sized("bag/bagit.txt", "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n")
	sized("bag/manifest-md5.txt", want+"  data/core.txt\n")
	sized("bag/data/core.txt", "cord\n") // edited after bagging, same size
	if rep := e.datasets("tree"); rep.Failed != 1 || rep.Registered != 0 {
		t.Fatalf("pass over a bag whose manifest is stale: %+v, want it failed", rep)
	}
	sized("bag/data/core.txt", "core\n")
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass once the bag is right: %+v", rep)
	}
	if sm := e.meta("t:bag@v1/data/core.txt"); sm.Checksum.Value != want {
		t.Errorf("registered %+v, want the bytes' MD5", sm.Checksum)
	}
}

// TestDatasetSidecarMetadata: an EML file in the dataset is its science
// metadata, registered in place (its own bytes, not copied); a BagIt bag's
// payload is the data, with its manifest's checksums.
func TestDatasetSidecarMetadata(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	eml := `<?xml version="1.0"?><eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="x" system="s"><dataset><title>Lake temperatures</title></dataset></eml:eml>`
	e.file("lake/eml.xml", eml, t0)
	e.file("lake/t.csv", "t\n1\n", t0)
	// A JSON file larger than any metadata document is data, read no further
	// than its first bytes.
	e.file("lake/values.json", "["+strings.Repeat("1,", 9<<20)+"1]", t0)
	e.file("bag/bagit.txt", "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n", t0)
	e.file("bag/bag-info.txt", "Source-Organization: Bag Makers\nExternal-Description: Soil cores\n", t0)
	e.file("bag/manifest-md5.txt", md5Hex([]byte("core\n"))+"  data/core.txt\n", t0)
	e.file("bag/data/core.txt", "core\n", t0)
	if rep := e.datasets("tree"); rep.Registered != 2 || rep.Failed != 0 {
		t.Fatalf("pass: %+v", rep)
	}
	sm := e.meta("t:lake@v1")
	if sm.FormatID != datapackage.FormatEML220 || sm.FileName != "eml.xml" || e.body("t:lake@v1") != eml {
		t.Fatalf("sidecar EML: %+v", sm)
	}
	if got := e.members("resource_map_t:lake@v1"); !slices.Equal(got, []string{"t:lake@v1", "t:lake@v1/t.csv", "t:lake@v1/values.json"}) {
		t.Fatalf("lake members: %v", got)
	}
	if got := e.members("resource_map_t:bag@v1"); !slices.Equal(got, []string{"t:bag@v1", "t:bag@v1/data/core.txt"}) {
		t.Fatalf("bag members: %v", got)
	}
	if c := e.meta("t:bag@v1/data/core.txt"); c.Checksum.Algorithm != "MD5" || c.Checksum.Value != md5Hex([]byte("core\n")) {
		t.Fatalf("bag payload checksum: %+v", c.Checksum)
	}
	if body := e.body("t:bag@v1"); !strings.Contains(body, "Soil cores") || !strings.Contains(body, "Bag Makers") {
		t.Fatalf("EML from bag-info:\n%s", body)
	}
}

// versions is a dataset source that replays a list of datasets, whatever
// since asks for.
type versions struct {
	mu   sync.Mutex
	list []*node.Dataset
	fail error
}

func (v *versions) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	v.mu.Lock()
	list, fail := slices.Clone(v.list), v.fail
	v.mu.Unlock()
	for _, d := range list {
		c := *d
		if err := fn(&c); err != nil {
			return err
		}
	}
	return fail
}

// TestDatasetSourceVersions: versions a source numbers come in order, an
// older one is skipped, a version with the source's own metadata document
// stores it once, and a deleted record archives the package.
func TestDatasetSourceVersions(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "oai", Readers: []string{adapter.SubjectPublic}})
	dc := func(title string) *node.Document {
		return &node.Document{Body: []byte(`<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` + title + `</dc:title></oai_dc:dc>`)}
	}
	e.put(node.Found{Key: "f1"}, []byte("one"))
	src.list = []*node.Dataset{
		{ID: "oai:x:1", Sequence: 1, Version: "2024-01-01", Modified: t0, Metadata: dc("First"), Files: []node.Found{{Key: "f1", FileName: "one.txt", Size: -1}}},
		{ID: "oai:x:1", Sequence: 2, Version: "2024-02-01", Modified: t0.Add(time.Hour), Metadata: dc("Second"), Files: []node.Found{{Key: "f1", FileName: "one.txt", Size: -1}}},
	}
	if rep := e.datasets("oai"); rep.Registered != 1 || rep.Updated != 1 || rep.Failed != 0 {
		t.Fatalf("pass: %+v", rep)
	}
	if sm := e.meta("oai:x:1@v2"); sm.FormatID != datapackage.FormatOAIDC || sm.Obsoletes != "oai:x:1@v1" || !strings.Contains(e.body("oai:x:1@v2"), "Second") {
		t.Fatalf("v2 metadata: %+v", sm)
	}
	if got := e.members("resource_map_oai:x:1@v2"); !slices.Equal(got, []string{"oai:x:1@v2", "oai:x:1@v1/one.txt"}) {
		t.Fatalf("v2 members: %v", got)
	}
	// Replayed from the start: the older version is skipped.
	if rep := e.datasets("oai"); rep.Unchanged != 2 || rep.Objects != 0 {
		t.Fatalf("replayed pass: %+v", rep)
	}
	src.mu.Lock()
	src.list = append(src.list, &node.Dataset{ID: "oai:x:1", Deleted: true, Modified: t0.Add(2 * time.Hour)})
	src.mu.Unlock()
	if rep := e.datasets("oai"); rep.Archived != 1 {
		t.Fatalf("deleting pass: %+v", rep)
	}
	for _, pid := range []string{"oai:x:1@v2", "oai:x:1@v1/one.txt", "resource_map_oai:x:1@v2"} {
		if !e.meta(pid).Archived {
			t.Errorf("%s not archived", pid)
		}
	}
	// A failing walk keeps everything and reports the error.
	src.mu.Lock()
	src.fail = adapter.Errorf(adapter.ServiceFailure, "endpoint down")
	src.mu.Unlock()
	if _, err := e.n.HarvestDatasets(context.Background(), "oai"); err == nil || !strings.Contains(err.Error(), "endpoint down") {
		t.Fatalf("failing walk: %v", err)
	}
}

// TestDatasetFailedVersionWaits: a version that fails holds back the later
// versions of its dataset until a pass registers it. v3 was registered after
// v1, and v2, older than the head, was then passed over for good.
func TestDatasetFailedVersionWaits(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "ocfl", Readers: []string{adapter.SubjectPublic}})
	e.put(node.Found{Key: "f1"}, []byte("one"))
	version := func(seq int, title string) *node.Dataset {
		return &node.Dataset{ID: "obj", Sequence: seq, Version: "v" + strconv.Itoa(seq), Modified: t0.Add(time.Duration(seq) * time.Hour),
			Metadata: &node.Document{Body: []byte(`<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` + title + `</dc:title></oai_dc:dc>`)},
			Files:    []node.Found{{Key: "f1", FileName: "one.txt", Size: -1}}}
	}
	v2 := version(2, "Second")
	v2.Problem = errors.New("a sidecar cannot be read")
	src.list = []*node.Dataset{version(1, "First"), v2, version(3, "Third")}
	if rep := e.datasets("ocfl"); rep.Registered != 1 || rep.Updated != 0 || rep.Failed != 2 {
		t.Fatalf("pass with v2 failing: %+v, want v1 registered, v2 and v3 failed", rep)
	}
	src.mu.Lock()
	src.list[1] = version(2, "Second")
	src.mu.Unlock()
	if rep := e.datasets("ocfl"); rep.Updated != 2 || rep.Unchanged != 1 || rep.Failed != 0 {
		t.Fatalf("pass once v2 is right: %+v", rep)
	}
	for i, title := range []string{"First", "Second", "Third"} {
		pid := "obj@v" + strconv.Itoa(i+1)
		if !strings.Contains(e.body(pid), title) {
			t.Errorf("%s is not the %s version:\n%s", pid, title, e.body(pid))
		}
		if sm, want := e.meta(pid), "obj@v"+strconv.Itoa(i); i > 0 && sm.Obsoletes != want {
			t.Errorf("%s obsoletes %q, want %q", pid, sm.Obsoletes, want)
		}
	}
}

// TestDatasetFileProblem: a file the source could not describe (a HEAD that
// failed) fails its dataset's version, changing nothing, until it can. It was
// registered as far as it was known, under the name the source falls back
// to, and the file's series was archived, and made again at the next pass.
func TestDatasetFileProblem(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "oai", Readers: []string{adapter.SubjectPublic}})
	e.put(node.Found{Key: "https://repo.example.org/file/7"}, []byte("a,b\n"))
	described := node.Found{Key: "https://repo.example.org/file/7", FileName: "table.csv", Size: 4, Modified: t0}
	set := func(f node.Found) {
		src.mu.Lock()
		defer src.mu.Unlock()
		src.list = []*node.Dataset{{ID: "oai:x:7", Modified: t0, Files: []node.Found{f}}}
	}
	set(described)
	if rep := e.datasets("oai"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	set(node.Found{Key: described.Key, FileName: "7", Size: -1, Problem: adapter.Errorf(adapter.ServiceFailure, "503 Service Unavailable")})
	if rep := e.datasets("oai"); rep.Failed != 1 || rep.Updated+rep.Archived+rep.Objects != 0 {
		t.Fatalf("pass with the file's HEAD failing: %+v, want the dataset failed", rep)
	}
	if sm := e.meta("oai:x:7/table.csv"); sm.Archived || sm.Identifier != "oai:x:7@v1/table.csv" {
		t.Fatalf("the file's series resolves to %s (archived %v)", sm.Identifier, sm.Archived)
	}
	set(described)
	if rep := e.datasets("oai"); rep.Unchanged != 1 || rep.Failed != 0 {
		t.Fatalf("pass once the HEAD answers: %+v", rep)
	}
}

// TestDatasetObjectsVersionedBySourceOnly: update and publish of a dataset
// source's objects (a data file, the resource map) are refused: a version made
// here became the head of the file's series outside the package, and every
// later pass of the dataset failed (and with it archiving for the source).
func TestDatasetObjectsVersionedBySourceOnly(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "oai", Readers: []string{adapter.SubjectPublic},
		Reader: sourceBytes{"https://repo.example.org/file/8": "a,b\n", "https://repo.example.org/file/9": "notes\n"}})
	set := func(modified time.Time, files ...string) {
		src.mu.Lock()
		defer src.mu.Unlock()
		d := &node.Dataset{ID: "oai:x:8", Modified: modified}
		for _, f := range files {
			d.Files = append(d.Files, node.Found{Key: "https://repo.example.org/file/" + f, FileName: "file" + f, Size: -1, Modified: modified})
		}
		src.list = []*node.Dataset{d}
	}
	set(t0, "8")
	if rep := e.datasets("oai"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	owner := &adapter.Session{Subject: harvestOwner, Subjects: []string{harvestOwner}}
	data := []byte("c,d\n")
	for _, pid := range []string{"oai:x:8@v1/file8", e.meta("resource_map_oai:x:8").Identifier} {
		u, err := e.n.Stage(t.Context(), bytes.NewReader(data), []string{"MD5"})
		if err != nil {
			t.Fatal(err)
		}
		sum := md5.Sum(data)
		sm := &adapter.SystemMetadata{Identifier: "local-" + strings.ReplaceAll(pid, "/", "-"), FormatID: "text/csv", Size: uint64(len(data)),
			Checksum: adapter.Checksum{Algorithm: "MD5", Value: hex.EncodeToString(sum[:])}, RightsHolder: harvestOwner}
		_, err = e.n.Update(t.Context(), owner, pid, sm, u)
		wantKind(t, "update of "+pid, err, adapter.InvalidRequest, pid)
	}
	// The source's next version (a file added) is the package's.
	set(t0.Add(time.Hour), "8", "9")
	if rep := e.datasets("oai"); rep.Updated != 1 || rep.Failed != 0 {
		t.Fatalf("the pass after: %+v", rep)
	}
}

// TestDatasetSameDayEdits: a version that is a day (an OAI datestamp of an
// endpoint whose granularity is the day, a sitemap lastmod without a time)
// does not tell two versions of that day apart: a second edit the same day
// is registered, told by what the record holds. It was taken for the version
// already registered.
func TestDatasetSameDayEdits(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "oai", Readers: []string{adapter.SubjectPublic}})
	dc := func(title string) *node.Document {
		return &node.Document{Body: []byte(`<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` + title + `</dc:title></oai_dc:dc>`)}
	}
	set := func(version, title string) {
		src.mu.Lock()
		defer src.mu.Unlock()
		src.list = []*node.Dataset{{ID: "oai:x:2", Version: version, Modified: t0, Metadata: dc(title)}}
	}
	for _, day := range []string{"2024-03-01", "2024-03", "2024"} {
		t.Run(day, func(t *testing.T) {
			set(day, "Morning "+day)
			e.datasets("oai")
			set(day, "Afternoon "+day)
			if rep := e.datasets("oai"); rep.Updated != 1 || rep.Failed != 0 {
				t.Fatalf("pass after the same-day edit: %+v", rep)
			}
			if body := e.body("oai:x:2"); !strings.Contains(body, "Afternoon "+day) {
				t.Fatalf("the series resolves to:\n%s", body)
			}
			if rep := e.datasets("oai"); rep.Unchanged != 1 || rep.Objects != 0 {
				t.Fatalf("replayed pass: %+v", rep)
			}
		})
	}
	// A version with a time is the source's word: the same, nothing read.
	set("2024-03-02T10:00:00Z", "Noon")
	e.datasets("oai")
	set("2024-03-02T10:00:00Z", "Noon, edited without a new datestamp")
	if rep := e.datasets("oai"); rep.Unchanged != 1 {
		t.Fatalf("same precise version: %+v", rep)
	}
}

// failApply makes the catalog refuse dataset batches; tests that set it do
// not run in parallel.
var failApply atomic.Bool

func (c *hookedCatalog) Apply(ctx context.Context, b *node.Batch) ([]string, error) {
	if failApply.Load() {
		return nil, errors.New("the disk is full")
	}
	return c.Catalog.Apply(ctx, b)
}

// TestDatasetAllOrNothing: a version whose batch cannot be written leaves
// nothing of itself (no data object without its package), and the next pass
// registers it whole, with the same identifiers.
func TestDatasetAllOrNothing(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds/a.csv", "a\n", t0)
	e.file("ds/b.csv", "b\n", t0)
	failApply.Store(true)
	rep := e.datasets("tree")
	failApply.Store(false)
	if rep.Failed != 1 || rep.Objects != 0 {
		t.Fatalf("failed pass: %+v", rep)
	}
	if list, err := e.n.ListObjects(context.Background(), adapter.PublicSession(), adapter.ListQuery{Count: 100}); err != nil || list.Total != 0 {
		t.Fatalf("after a failed batch: %v %+v", err, list)
	}
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Objects != 4 || rep.Failed != 0 {
		t.Fatalf("next pass: %+v", rep)
	}
	if got := e.members("resource_map_t:ds@v1"); !slices.Equal(got, []string{"t:ds@v1", "t:ds@v1/a.csv", "t:ds@v1/b.csv"}) {
		t.Fatalf("members: %v", got)
	}
}

// TestDatasetFullInterval: a source that walks only what changed shows a
// withdrawn dataset to a walk of everything alone: the first pass, then one
// every FullInterval.
func TestDatasetFullInterval(t *testing.T) {
	for _, tc := range []struct {
		full     time.Duration
		archives bool
	}{{0, false}, {time.Nanosecond, true}} {
		e := newHarvestEnv(t, "")
		src := &versions{}
		e.put(node.Found{Key: "f"}, []byte("bytes"))
		for _, id := range []string{"a", "b"} {
			src.list = append(src.list, &node.Dataset{ID: id, Version: "1", Modified: t0, Files: []node.Found{{Key: "f", FileName: "f.txt", Size: -1}}})
		}
		e.n.StartDatasets(src, node.DatasetOptions{Name: "s", FullInterval: tc.full})
		if rep := e.datasets("s"); rep.Registered != 2 {
			t.Fatalf("first pass: %+v", rep)
		}
		src.mu.Lock()
		src.list = src.list[:1]
		src.mu.Unlock()
		rep := e.datasets("s")
		if archived := rep.Archived == 1; archived != tc.archives {
			t.Errorf("fullInterval %v: second pass %+v, want archived %v", tc.full, rep, tc.archives)
		}
		if got := e.meta("resource_map_b@v1").Archived; got != tc.archives {
			t.Errorf("fullInterval %v: b archived %v", tc.full, got)
		}
	}
}

// listingStore is a store that lists its objects (as s3 and webdav do).
type listingStore struct {
	*countingBlobs
	*fakeLister
}

// TestDatasetStoreIsNotHarvestedAlone: when a dataset source lists the
// store's own holdings, nothing of the store is registered alone (a reindex
// of all objects would otherwise register each file by itself).
func TestDatasetStoreIsNotHarvestedAlone(t *testing.T) {
	e := newHarvestEnv(t, "")
	store := listingStore{e.blobs, e.lister}
	n := node.New("urn:node:t", store, e.hooked, nil)
	defer n.Close()
	e.file("ds/a.csv", "a", t0)
	if _, err := n.HarvestOnce(context.Background()); err != nil {
		t.Fatalf("a listing store with no dataset source is harvested object by object: %v", err)
	}
	n2 := node.New("urn:node:t2", store, e.hooked, nil)
	defer n2.Close()
	n2.StartDatasets(node.GroupFiles(store, 1), node.DatasetOptions{Name: "store"})
	if _, err := n2.HarvestOnce(context.Background()); !adapter.IsKind(err, adapter.NotImplemented) {
		t.Fatalf("a store harvested as datasets was harvested object by object: %v", err)
	}
}

// TestDatasetPageWithoutDescription: a page that no longer describes its
// dataset (its JSON-LD missing for a while) keeps the dataset registered from
// it, counted failed, where the dataset was archived as withdrawn at the
// next walk of everything; a page that never described one (an "about"
// page) is passed over; a page gone from the source withdraws its dataset.
func TestDatasetPageWithoutDescription(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.put(node.Found{Key: "f"}, []byte("bytes"))
	page := func(id string) string { return "https://repo.example.org/" + id + ".html" }
	described := func(id string) *node.Dataset {
		return &node.Dataset{ID: "doi:10.5072/" + id, Page: page(id), Version: "1", Modified: t0,
			Files: []node.Found{{Key: "f", FileName: "f.txt", Size: -1}}}
	}
	notDescribed := func(id string) *node.Dataset {
		return &node.Dataset{ID: page(id), Page: page(id), Problem: node.ErrNotADataset}
	}
	set := func(ds ...*node.Dataset) {
		src.mu.Lock()
		src.list = ds
		src.mu.Unlock()
	}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "s", FullInterval: time.Nanosecond}) // every walk is of everything
	set(described("a"), described("b"), notDescribed("about"))
	if rep := e.datasets("s"); rep.Registered != 2 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	set(described("a"), notDescribed("b"), notDescribed("about"))
	if rep := e.datasets("s"); rep.Archived != 0 || rep.Failed != 1 {
		t.Errorf("the pass where b's page describes nothing: %+v, want b failed and nothing archived", rep)
	}
	if e.meta("resource_map_doi:10.5072/b@v1").Archived {
		t.Fatalf("b was archived while its page was still listed")
	}
	set(described("a"), notDescribed("about"))
	if rep := e.datasets("s"); rep.Archived != 1 || rep.Failed != 0 {
		t.Errorf("the pass without b's page: %+v, want b archived", rep)
	}
	if !e.meta("resource_map_doi:10.5072/b@v1").Archived {
		t.Errorf("b is not archived once its page is gone")
	}
}

// TestDatasetRegisteredBetweenFullWalks: a dataset registered by a walk of
// only what changed, and withdrawn before the next walk of everything, is
// archived by it; it was not known to it.
func TestDatasetRegisteredBetweenFullWalks(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.put(node.Found{Key: "f"}, []byte("bytes"))
	ds := func(id string) *node.Dataset {
		return &node.Dataset{ID: id, Version: "1", Modified: t0, Files: []node.Found{{Key: "f", FileName: "f.txt", Size: -1}}}
	}
	const full = 2 * time.Second // from the first walk's start: the second must come before, on a loaded machine too
	e.n.StartDatasets(src, node.DatasetOptions{Name: "s", FullInterval: full})
	src.list = []*node.Dataset{ds("a"), ds("b")}
	if rep := e.datasets("s"); rep.Registered != 2 || !rep.Since.IsZero() {
		t.Fatalf("first pass (everything): %+v", rep)
	}
	src.mu.Lock()
	src.list = append(src.list, ds("c"))
	src.mu.Unlock()
	if rep := e.datasets("s"); rep.Registered != 1 || rep.Since.IsZero() {
		t.Fatalf("second pass (what changed): %+v", rep)
	}
	time.Sleep(full)
	src.mu.Lock()
	src.list = src.list[:1]
	src.mu.Unlock()
	if rep := e.datasets("s"); rep.Since.IsZero() && rep.Archived != 2 {
		t.Errorf("third pass (everything): %+v, want b and c archived", rep)
	}
	for _, id := range []string{"b", "c"} {
		if !e.meta("resource_map_" + id + "@v1").Archived {
			t.Errorf("%s is not archived", id)
		}
	}
}

// TestDatasetPageNotedLater: a package registered before its page was kept
// gets it at its next pass, unchanged otherwise, so that a node started
// later knows which dataset the page described.
func TestDatasetPageNotedLater(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.put(node.Found{Key: "f"}, []byte("bytes"))
	d := &node.Dataset{ID: "doi:10.5072/old", Version: "1", Modified: t0, Files: []node.Found{{Key: "f", FileName: "f.txt", Size: -1}}}
	src.list = []*node.Dataset{d}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "s"})
	if rep := e.datasets("s"); rep.Registered != 1 {
		t.Fatalf("first pass: %+v", rep)
	}
	src.mu.Lock()
	d.Page = "https://repo.example.org/old.html"
	src.mu.Unlock()
	if rep := e.datasets("s"); rep.Unchanged != 1 {
		t.Fatalf("second pass: %+v", rep)
	}
	rec, err := e.cat.Lookup(t.Context(), "resource_map_doi:10.5072/old@v1")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Checksums["d1bridge:dataset-page"]; got != d.Page {
		t.Errorf("the package's page is %q, want %q", got, d.Page)
	}
}

// TestDatasetFilesMoved: the same bytes listed under another key (a URL now
// https, a record uploaded again, a renamed OCFL upstream) stay the same
// objects, read from their new key, with or without a new version of the
// dataset. The records kept the old key: every read failed NotFound once it
// was gone, and each later version read the bytes again.
func TestDatasetFilesMoved(t *testing.T) {
	e := newHarvestEnv(t, "")
	src := &versions{}
	e.n.StartDatasets(src, node.DatasetOptions{Name: "ocfl", Readers: []string{adapter.SubjectPublic}})
	const eml = `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="x"/>`
	at := func(seq int, version, key string) {
		e.put(node.Found{Key: "k" + key}, []byte("one"))
		e.put(node.Found{Key: "m" + key}, []byte(eml))
		src.mu.Lock()
		defer src.mu.Unlock()
		src.list = []*node.Dataset{{ID: "x", Sequence: seq, Version: version, Modified: t0,
			Metadata: &node.Document{FormatID: datapackage.FormatEML220, Found: &node.Found{Key: "m" + key, FileName: "eml.xml", Size: -1, Modified: t0}},
			Files:    []node.Found{{Key: "k" + key, FileName: "one.txt", Size: -1, Modified: t0}}}}
	}
	gone := func(key string) {
		for _, k := range []string{"k" + key, "m" + key} {
			if err := e.blobs.Delete(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	at(1, "v1", "1")
	if rep := e.datasets("ocfl"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	for _, step := range []struct {
		name         string
		seq          int
		version, key string
	}{{"a new version", 2, "v2", "2"}, {"the same version", 2, "v2", "3"}} {
		at(step.seq, step.version, step.key)
		gone(map[string]string{"2": "1", "3": "2"}[step.key])
		if rep := e.datasets("ocfl"); rep.Failed != 0 || rep.Objects != 0 {
			t.Fatalf("%s under new keys: %+v, want no new object", step.name, rep)
		}
		if got := e.body("x/one.txt"); got != "one" || e.meta("x/one.txt").Identifier != "x@v1/one.txt" {
			t.Fatalf("%s: the file reads %q", step.name, got)
		}
		if got := e.body("x"); got != eml || e.meta("x").Identifier != "x@v1" {
			t.Fatalf("%s: the metadata reads %q", step.name, got)
		}
	}
	gets := e.blobs.gets.Load()
	at(3, "v3", "3")
	if rep := e.datasets("ocfl"); rep.Failed != 0 || e.blobs.gets.Load() != gets {
		t.Fatalf("the next version: %+v, %d reads of bytes, want none", rep, e.blobs.gets.Load()-gets)
	}
}
