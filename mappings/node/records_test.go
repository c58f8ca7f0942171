package node_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// walkAll collects what a source walks.
func walkAll(t *testing.T, src node.DatasetSource, since time.Time) []*node.Dataset {
	t.Helper()
	var out []*node.Dataset
	if err := src.Walk(context.Background(), since, func(d *node.Dataset) error {
		out = append(out, d)
		return nil
	}); err != nil {
		t.Fatalf("walk: %v", err)
	}
	return out
}

// fileNames are the names of a dataset's files, in order.
func fileNames(d *node.Dataset) []string {
	var out []string
	for _, f := range d.Files {
		out = append(out, f.FileName+"="+f.Key)
	}
	return out
}

// TestGroupRecords: records of three datasets, interleaved over several
// pages, come as three whole datasets sorted by id; a record without a
// dataset is left out; a walk of what changed lists everything anyway.
func TestGroupRecords(t *testing.T) {
	l := &fakeLister{pageSize: 2}
	for i, r := range []struct{ key, dataset, name string }{
		{"k1", "ds-b", "b1.csv"},
		{"k2", "ds-a", "a2.csv"},
		{"k3", "ds-c", ""}, // no file name: its key
		{"k4", "", "loose.txt"},
		{"k5", "ds-a", "a1.csv"},
		{"k6", "ds-b", "b2.csv"},
		{"k7", "ds-a", "data/a3.csv"},
	} {
		l.objs = append(l.objs, node.Found{Key: r.key, PID: "p:" + r.key, Dataset: r.dataset, FileName: r.name, Size: 1,
			Modified: t0.Add(time.Duration(i) * time.Hour)})
	}
	src := node.GroupRecords(l)
	if x, ok := src.(node.Exhaustive); !ok || !x.Exhaustive() {
		t.Fatal("GroupRecords is not Exhaustive")
	}
	got := walkAll(t, src, t0.Add(5*time.Hour))
	if !slices.Equal(l.sinces, []time.Time{{}}) {
		t.Errorf("the walk asked the store for since %v, want everything", l.sinces)
	}
	want := []struct {
		id       string
		files    []string
		modified time.Time
	}{
		{"ds-a", []string{"a1.csv=k5", "a2.csv=k2", "data/a3.csv=k7"}, t0.Add(6 * time.Hour)},
		{"ds-b", []string{"b1.csv=k1", "b2.csv=k6"}, t0.Add(5 * time.Hour)},
		{"ds-c", []string{"k3=k3"}, t0.Add(2 * time.Hour)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d datasets, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		d := got[i]
		if d.ID != w.id || !slices.Equal(fileNames(d), w.files) || !d.Modified.Equal(w.modified) || d.Problem != nil {
			t.Errorf("dataset %d: %s %v %v %v, want %s %v %v", i, d.ID, fileNames(d), d.Modified, d.Problem, w.id, w.files, w.modified)
		}
	}
}

// TestGroupRecordsProblems: a record that cannot be read fails its dataset,
// or, its dataset unknown, comes as a failed dataset without an id; two
// records with one file name fail their dataset; a listing that fails fails
// the walk.
func TestGroupRecordsProblems(t *testing.T) {
	bad := errors.New("unreadable size")
	l := &fakeLister{pageSize: 3, objs: []node.Found{
		{Key: "k1", Dataset: "ds-a", FileName: "a.csv", Size: 1},
		{Key: "k2", Dataset: "ds-a", Size: -1, Problem: bad},
		{Key: "k3", Dataset: "ds-b", FileName: "same.csv", Size: 1},
		{Key: "k4", Dataset: "ds-b", FileName: "same.csv", Size: 1},
		{Key: "k5", Dataset: "ds-c", FileName: "c.csv", Size: 1},
		{Size: -1, Problem: bad},
	}}
	got := walkAll(t, node.GroupRecords(l), time.Time{})
	if len(got) != 4 {
		t.Fatalf("%d datasets, want 4: %+v", len(got), got)
	}
	if d := got[0]; d.ID != "ds-a" || !errors.Is(d.Problem, bad) || len(d.Files) != 0 {
		t.Errorf("ds-a: %+v", d)
	}
	if d := got[1]; d.ID != "ds-b" || d.Problem == nil || !strings.Contains(d.Problem.Error(), "same.csv") {
		t.Errorf("ds-b: %+v", d)
	}
	if d := got[2]; d.ID != "ds-c" || d.Problem != nil || len(d.Files) != 1 {
		t.Errorf("ds-c: %+v", d)
	}
	if d := got[3]; d.ID != "" || !errors.Is(d.Problem, bad) {
		t.Errorf("the record without a dataset: %+v", d)
	}

	l.failPage = 2
	err := node.GroupRecords(l).Walk(context.Background(), time.Time{}, func(*node.Dataset) error {
		t.Error("a dataset came from a listing that failed")
		return nil
	})
	if !adapter.IsKind(err, adapter.ServiceFailure) {
		t.Errorf("a listing that fails: %v", err)
	}
}

// TestGroupRecordsHarvest harvests a store's records as datasets: packages
// of whole datasets under the store's own keys; a changed record makes a new
// version whose other members keep their identifiers; a record without a
// dataset is registered nowhere; a record that goes is archived.
func TestGroupRecordsHarvest(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.n.StartDatasets(node.GroupRecords(e.lister), node.DatasetOptions{Name: "api", RightsHolder: harvestOwner,
		Readers: []string{adapter.SubjectPublic}, Metrics: e.m, PIDPrefix: "api:"})
	e.put(node.Found{Key: "r1", Dataset: "d1", FileName: "table.csv", Modified: t0}, []byte("a,b\n1,2\n"))
	e.put(node.Found{Key: "r2", Dataset: "d2", FileName: "notes.txt", Modified: t0}, []byte("notes\n"))
	e.put(node.Found{Key: "r3", FileName: "loose.txt", Modified: t0}, []byte("loose\n"))
	e.put(node.Found{Key: "r4", Dataset: "d1", FileName: "readme.txt", Modified: t0}, []byte("read me\n"))
	e.put(node.Found{Key: "r5", Dataset: "d1", FileName: "extra.csv", Modified: t0}, []byte("e\n"))

	if rep := e.datasets("api"); rep.Registered != 2 || rep.Failed != 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	if got := e.members("resource_map_api:d1@v1"); !slices.Equal(got, []string{"api:d1@v1", "api:d1@v1/extra.csv", "api:d1@v1/readme.txt", "api:d1@v1/table.csv"}) {
		t.Fatalf("d1 members: %v", got)
	}
	if got := e.members("resource_map_api:d2@v1"); !slices.Equal(got, []string{"api:d2@v1", "api:d2@v1/notes.txt"}) {
		t.Fatalf("d2 members: %v", got)
	}
	if body := e.body("api:d1@v1/table.csv"); body != "a,b\n1,2\n" {
		t.Fatalf("table.csv reads %q", body)
	}
	l, err := e.n.ListObjects(context.Background(), adapter.PublicSession(), adapter.ListQuery{Count: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range l.ObjectInfo {
		if strings.Contains(o.Identifier, "loose") || strings.Contains(o.Identifier, "r3") {
			t.Errorf("the record without a dataset is registered: %s", o.Identifier)
		}
	}

	// r1 changes, r5 goes: a new version of d1; d2 is unchanged.
	e.put(node.Found{Key: "r1", Dataset: "d1", FileName: "table.csv", Modified: t0.Add(time.Hour)}, []byte("a,b\n1,2\n3,4\n"))
	e.lister.mu.Lock()
	e.lister.objs = slices.DeleteFunc(e.lister.objs, func(f node.Found) bool { return f.Key == "r5" })
	e.lister.mu.Unlock()
	if rep := e.datasets("api"); rep.Updated != 1 || rep.Unchanged != 1 || rep.Failed != 0 {
		t.Fatalf("changed pass: %+v", rep)
	}
	if got := e.members("resource_map_api:d1@v2"); !slices.Equal(got, []string{"api:d1@v2", "api:d1@v1/readme.txt", "api:d1@v2/table.csv"}) {
		t.Fatalf("d1 v2 members: %v", got)
	}
	if sm := e.meta("api:d1@v2/table.csv"); sm.Obsoletes != "api:d1@v1/table.csv" {
		t.Fatalf("table.csv v2: %+v", sm)
	}
	if sm := e.meta("api:d1@v1/extra.csv"); !sm.Archived {
		t.Fatalf("the record that went is not archived: %+v", sm)
	}

	// d2's only record goes: the dataset is archived.
	e.lister.mu.Lock()
	e.lister.objs = slices.DeleteFunc(e.lister.objs, func(f node.Found) bool { return f.Key == "r2" })
	e.lister.mu.Unlock()
	if rep := e.datasets("api"); rep.Archived != 1 {
		t.Fatalf("withdrawing pass: %+v", rep)
	}
	if sm := e.meta("resource_map_api:d2@v1"); !sm.Archived {
		t.Fatalf("d2 is not archived: %+v", sm)
	}
}
