package ocfl_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/ocfl"
)

const (
	id1 = "ark:/99999/fk4-dataset-1"
	id2 = "ark:/99999/fk4-dataset-2"
)

// dirFiles lists and reads a directory with "/"-keys ("/" + the path relative
// to dir), a few keys a page, in lexicographic order (or, with walkOrder, in
// the depth-first order of filepath.WalkDir, as a directory lister may).
type dirFiles struct {
	dir       string
	page      int
	walkOrder bool
}

func (d dirFiles) List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error) {
	var all []node.Found
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.dir, p)
		all = append(all, node.Found{Key: "/" + filepath.ToSlash(rel), Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if !d.walkOrder {
		sort.Slice(all, func(i, j int) bool { return all[i].Key < all[j].Key })
	}
	start := 0
	if cursor != "" {
		start, _ = strconv.Atoi(cursor)
	}
	end := min(start+d.page, len(all))
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

func (d dirFiles) path(key string) string {
	return filepath.Join(d.dir, filepath.FromSlash(strings.TrimPrefix(key, "/")))
}

func (d dirFiles) Stat(ctx context.Context, key string) (*node.Found, error) {
	info, err := os.Stat(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, adapter.Errorf(adapter.NotFound, "no %s", key)
	}
	if err != nil {
		return nil, err
	}
	return &node.Found{Key: key, Size: info.Size(), Modified: info.ModTime()}, nil
}

func (d dirFiles) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, adapter.Errorf(adapter.NotFound, "no %s", key)
	}
	return f, err
}

var fixture struct {
	once sync.Once
	dir  string // the storage root build_root.py made
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture.dir != "" {
		os.RemoveAll(filepath.Dir(fixture.dir))
	}
	os.Exit(code)
}

// buildRoot makes a copy of the OCFL storage root that ocfl-py builds and
// validates (testdata/build_root.py, run once per test binary) at root.
func buildRoot(t *testing.T, root string) {
	t.Helper()
	fixture.once.Do(func() { fixture.dir, fixture.err = runBuildRoot() })
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(root, os.DirFS(fixture.dir)); err != nil {
		t.Fatal(err)
	}
}

func runBuildRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
	python := filepath.Join(dir, ".ci", ".venv-fixtures", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		return "", fmt.Errorf("%s is missing: run .ci/test, which makes the fixture-builders virtualenv (ocfl-py)", python)
	}
	tmp, err := os.MkdirTemp("", "ocfl-fixture-")
	if err != nil {
		return "", err
	}
	root := filepath.Join(tmp, "root")
	cmd := exec.Command(python, filepath.Join("testdata", "build_root.py"), root)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("build_root.py: %v\n%s", err, out)
	}
	return root, nil
}

// objectDir is the folder of the object whose id is id under root.
func objectDir(t *testing.T, root, id string) string {
	t.Helper()
	enc := strings.NewReplacer(":", "%3a", "/", "%2f").Replace(id)
	dirs, err := filepath.Glob(filepath.Join(root, "*", "*", "*", enc))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("object %s under %s: %v %v", id, root, dirs, err)
	}
	return dirs[0]
}

func walk(t *testing.T, src *ocfl.Source, since time.Time) []*node.Dataset {
	t.Helper()
	var ds []*node.Dataset
	if err := src.Walk(context.Background(), since, func(d *node.Dataset) error {
		ds = append(ds, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ds
}

func byID(ds []*node.Dataset, id string) []*node.Dataset {
	var out []*node.Dataset
	for _, d := range ds {
		if d.ID == id {
			out = append(out, d)
		}
	}
	return out
}

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func names(d *node.Dataset) string {
	var ns []string
	for _, f := range d.Files {
		ns = append(ns, f.FileName)
	}
	return strings.Join(ns, " ")
}

func file(t *testing.T, d *node.Dataset, name string) node.Found {
	t.Helper()
	for _, f := range d.Files {
		if f.FileName == name {
			return f
		}
	}
	t.Fatalf("%s %s has no %s: %s", d.ID, d.Version, name, names(d))
	return node.Found{}
}

// checkFiles reads every file through the source's Reader and compares its
// bytes with the checksum and size the walk gave.
func checkFiles(t *testing.T, files dirFiles, d *node.Dataset, prefix string) {
	t.Helper()
	for _, f := range d.Files {
		if !strings.HasPrefix(f.Key, prefix) {
			t.Errorf("%s %s: key %s not under %s", d.ID, f.FileName, f.Key, prefix)
		}
		rc, err := files.Get(context.Background(), f.Key)
		if err != nil {
			t.Fatalf("%s %s: %v", d.ID, f.FileName, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		var h hash.Hash
		switch f.Checksum.Algorithm {
		case "SHA-512":
			h = sha512.New()
		case "SHA-256":
			h = sha256.New()
		default:
			t.Fatalf("%s %s: algorithm %q", d.ID, f.FileName, f.Checksum.Algorithm)
		}
		h.Write(b)
		if got := hex.EncodeToString(h.Sum(nil)); got != f.Checksum.Value {
			t.Errorf("%s %s %s: checksum %s, bytes hash to %s", d.ID, d.Version, f.FileName, f.Checksum.Value, got)
		}
		if f.Size != int64(len(b)) {
			t.Errorf("%s %s %s: size %d, %d bytes", d.ID, d.Version, f.FileName, f.Size, len(b))
		}
		if !f.Modified.Equal(d.Modified) || !f.Uploaded.Equal(d.Modified) {
			t.Errorf("%s %s %s: modified %v uploaded %v, version created %v", d.ID, d.Version, f.FileName, f.Modified, f.Uploaded, d.Modified)
		}
	}
}

// checkRoot asserts what a full walk of the fixture root yields.
func checkRoot(t *testing.T, files dirFiles, ds []*node.Dataset, prefix string) {
	t.Helper()
	if len(ds) != 4 {
		t.Fatalf("%d datasets, want 4", len(ds))
	}
	for _, d := range ds {
		if d.Problem != nil {
			t.Fatalf("%s %s: %v", d.ID, d.Version, d.Problem)
		}
		if d.Facts.Title != "" {
			t.Errorf("%s %s: title %q from the version message", d.ID, d.Version, d.Facts.Title)
		}
		checkFiles(t, files, d, prefix)
	}

	v := byID(ds, id1)
	if len(v) != 3 {
		t.Fatalf("%s: %d versions", id1, len(v))
	}
	want := []struct {
		seq     int
		name    string
		created string
		files   string
	}{
		{1, "v1", "2020-01-01T00:00:00Z", "data/a.csv data/b.csv eml.xml"},
		{2, "v2", "2021-01-01T00:00:00Z", "data/a.csv data/b.csv eml.xml"},
		{3, "v3", "2022-01-01T00:00:00Z", "data/a.csv data/c.csv eml.xml"},
	}
	for i, w := range want {
		d := v[i]
		if d.Sequence != w.seq || d.Version != w.name || !d.Modified.Equal(date(w.created)) || names(d) != w.files {
			t.Errorf("%s version %d: %d %s %v [%s], want %d %s %s [%s]", id1, i, d.Sequence, d.Version, d.Modified, names(d), w.seq, w.name, w.created, w.files)
		}
	}
	for _, f := range v[0].Files {
		if f.Checksum.Algorithm != "SHA-512" || len(f.Checksum.Value) != 128 {
			t.Errorf("%s %s: checksum %+v", id1, f.FileName, f.Checksum)
		}
	}
	b1, b2 := file(t, v[0], "data/b.csv"), file(t, v[1], "data/b.csv")
	if b1.Key != b2.Key || !strings.HasSuffix(b1.Key, "/v1/content/data/b.csv") {
		t.Errorf("unchanged data/b.csv: v1 key %s, v2 key %s", b1.Key, b2.Key)
	}
	a1, a2, a3 := file(t, v[0], "data/a.csv"), file(t, v[1], "data/a.csv"), file(t, v[2], "data/a.csv")
	if a1.Key == a2.Key || a1.Checksum == a2.Checksum || a2.Key != a3.Key || !strings.HasSuffix(a2.Key, "/v2/content/data/a.csv") {
		t.Errorf("data/a.csv keys v1 %s, v2 %s, v3 %s", a1.Key, a2.Key, a3.Key)
	}
	if c := file(t, v[2], "data/c.csv"); !strings.HasSuffix(c.Key, "/v3/content/data/c.csv") {
		t.Errorf("data/c.csv key %s", c.Key)
	}

	o2 := byID(ds, id2)
	if len(o2) != 1 {
		t.Fatalf("%s: %d versions", id2, len(o2))
	}
	d := o2[0]
	if d.Sequence != 1 || d.Version != "v1" || !d.Modified.Equal(date("2021-06-01T12:30:00Z")) || names(d) != "measurements.tsv ro-crate-metadata.json" {
		t.Errorf("%s: %d %s %v [%s]", id2, d.Sequence, d.Version, d.Modified, names(d))
	}
	for _, f := range d.Files {
		if f.Checksum.Algorithm != "SHA-256" || !strings.Contains(f.Key, "/v1/files/") {
			t.Errorf("%s %s: key %s checksum %+v", id2, f.FileName, f.Key, f.Checksum)
		}
	}
}

func TestWalk(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	buildRoot(t, root)
	for _, files := range []dirFiles{{dir: root, page: 3}, {dir: root, page: 3, walkOrder: true}} {
		checkRoot(t, files, walk(t, ocfl.New(files, "/"), time.Time{}), "/")
	}
}

func TestWalkSubPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	buildRoot(t, filepath.Join(dir, "repo", "ocfl-root"))
	// An object beside the storage root is not the root's.
	obj := objectDir(t, filepath.Join(dir, "repo", "ocfl-root"), id1)
	if err := os.CopyFS(filepath.Join(dir, "repo", "aside"), os.DirFS(obj)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := dirFiles{dir: dir, page: 4}
	for _, root := range []string{"/repo/ocfl-root/", "repo/ocfl-root"} {
		t.Run(root, func(t *testing.T) {
			checkRoot(t, files, walk(t, ocfl.New(files, root), time.Time{}), "/repo/ocfl-root/")
		})
	}
}

func TestWalkSince(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	buildRoot(t, root)
	files := dirFiles{dir: root, page: 100}
	for _, c := range []struct {
		name  string
		since time.Time
		want  []string
	}{
		{"zero", time.Time{}, []string{id2 + " v1", id1 + " v1", id1 + " v2", id1 + " v3"}},
		// An object with a version since is yielded whole.
		{"between", date("2021-03-01T00:00:00Z"), []string{id2 + " v1", id1 + " v1", id1 + " v2", id1 + " v3"}},
		{"after one object", date("2021-07-01T00:00:00Z"), []string{id1 + " v1", id1 + " v2", id1 + " v3"}},
		{"at its last version", date("2022-01-01T00:00:00Z"), []string{id1 + " v1", id1 + " v2", id1 + " v3"}},
		{"after all", date("2023-01-01T00:00:00Z"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, d := range walk(t, ocfl.New(files, "/"), c.since) {
				got = append(got, d.ID+" "+d.Version)
			}
			if strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// writeObject writes an OCFL object by hand under root/dir (OCFL is files: a
// declaration, an inventory, its sidecar, content), one version per date in
// created, version k adding the file k.txt.
func writeObject(t *testing.T, root, dir, id string, created ...string) {
	t.Helper()
	obj := filepath.Join(root, dir)
	put := func(name, body string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(obj, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(obj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type version struct {
		Created string              `json:"created"`
		State   map[string][]string `json:"state"`
	}
	manifest, versions, state := map[string][]string{}, map[string]version{}, map[string][]string{}
	for i, c := range created {
		v, body := fmt.Sprintf("v%d", i+1), fmt.Sprintf("version %d\n", i+1)
		sum := sha512.Sum512([]byte(body))
		digest := hex.EncodeToString(sum[:])
		put(v+"/content/"+v+".txt", body)
		manifest[digest] = []string{v + "/content/" + v + ".txt"}
		state[digest] = []string{v + ".txt"}
		versions[v] = version{c, maps.Clone(state)}
	}
	inv, err := json.Marshal(map[string]any{"id": id, "type": "https://ocfl.io/1.1/spec/#inventory",
		"digestAlgorithm": "sha512", "head": fmt.Sprintf("v%d", len(created)), "manifest": manifest, "versions": versions})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(inv)
	put("0=ocfl_object_1.1", "ocfl_object_1.1\n")
	put("inventory.json", string(inv))
	put("inventory.json.sha512", hex.EncodeToString(sum[:])+" inventory.json\n")
}

// TestWalkSinceMigrated: an object copied into the root keeps its versions'
// dates. A walk since a date after its v1 and before its v2 yields v1 too,
// else the pass would register v2 first and pass v1 over for good as older.
func TestWalkSinceMigrated(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeObject(t, root, "migrated", "migrated-1", "2015-01-01T00:00:00Z", "2024-06-01T00:00:00Z")
	writeObject(t, root, "old", "old-1", "2015-01-01T00:00:00Z")
	var got []string
	for _, d := range walk(t, ocfl.New(dirFiles{dir: root, page: 100}, "/"), date("2024-01-01T00:00:00Z")) {
		if d.Problem != nil {
			t.Fatalf("%s %s: %v", d.ID, d.Version, d.Problem)
		}
		got = append(got, fmt.Sprintf("%s %s %d [%s]", d.ID, d.Version, d.Sequence, names(d)))
	}
	want := "migrated-1 v1 1 [v1.txt], migrated-1 v2 2 [v1.txt v2.txt]"
	if strings.Join(got, ", ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestWalkBadInventory(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, obj string)
		id     string // of the dataset with the problem
		want   string // in the problem
	}{
		{"a byte changed", func(t *testing.T, obj string) {
			edit(t, filepath.Join(obj, "inventory.json"), func(b []byte) []byte {
				return bytes.Replace(b, []byte("version 2"), []byte("version X"), 1)
			})
		}, id1, "sidecar says"},
		{"malformed JSON with a matching sidecar", func(t *testing.T, obj string) {
			edit(t, filepath.Join(obj, "inventory.json"), func(b []byte) []byte { return b[:len(b)/2] })
			b, _ := os.ReadFile(filepath.Join(obj, "inventory.json"))
			sum := sha512.Sum512(b)
			if err := os.WriteFile(filepath.Join(obj, "inventory.json.sha512"), []byte(hex.EncodeToString(sum[:])+" inventory.json\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "", "inventory.json"},
		{"no sidecar", func(t *testing.T, obj string) {
			if err := os.Remove(filepath.Join(obj, "inventory.json.sha512")); err != nil {
				t.Fatal(err)
			}
		}, id1, "sidecar"},
		{"missing content file", func(t *testing.T, obj string) {
			if err := os.Remove(filepath.Join(obj, "v3", "content", "data", "c.csv")); err != nil {
				t.Fatal(err)
			}
		}, id1, "c.csv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "root")
			buildRoot(t, root)
			obj := objectDir(t, root, id1)
			c.break_(t, obj)
			files := dirFiles{dir: root, page: 5}
			ds := walk(t, ocfl.New(files, "/"), time.Time{})
			var problems []*node.Dataset
			for _, d := range ds {
				if d.Problem != nil {
					problems = append(problems, d)
				}
			}
			if len(problems) != 1 || !strings.Contains(problems[0].Problem.Error(), c.want) {
				for _, p := range problems {
					t.Logf("%s %s: %v", p.ID, p.Version, p.Problem)
				}
				t.Fatalf("%d problems, want one saying %q", len(problems), c.want)
			}
			p := problems[0]
			id := c.id
			if id == "" {
				id = strings.TrimPrefix(filepath.ToSlash(obj), filepath.ToSlash(root)+"/")
			}
			if p.ID != id {
				t.Errorf("problem dataset id %q, want %q", p.ID, id)
			}
			if o2 := byID(ds, id2); len(o2) != 1 || o2[0].Problem != nil || len(o2[0].Files) != 2 {
				t.Errorf("%s did not come through: %+v", id2, o2)
			}
			if c.name == "missing content file" {
				// The versions that do not need the missing file still come.
				if v := byID(ds, id1); len(v) != 3 || v[0].Problem != nil || v[1].Problem != nil || v[2].Version != "v3" {
					t.Errorf("%s: %d datasets", id1, len(v))
				}
			}
		})
	}
}

// unreadableDir lists what files lists, and on its first page a folder it
// could not read, as the files store does.
type unreadableDir struct{ dirFiles }

func (u unreadableDir) List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error) {
	page, next, err := u.dirFiles.List(ctx, since, cursor)
	if cursor == "" && err == nil {
		page = append(page, node.Found{Size: -1, FileName: "ab/cd", Problem: errors.New("permission denied")})
	}
	return page, next, err
}

// TestWalkUnreadableFolder: a folder the store cannot read may hold objects:
// it is a failed dataset without an id (which keeps the pass from archiving
// them), and the objects that were read come through.
func TestWalkUnreadableFolder(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	buildRoot(t, root)
	ds := walk(t, ocfl.New(unreadableDir{dirFiles{dir: root, page: 5}}, "/"), time.Time{})
	var failed []*node.Dataset
	for _, d := range ds {
		if d.Problem != nil {
			failed = append(failed, d)
		}
	}
	if len(failed) != 1 || failed[0].ID != "" || !strings.Contains(failed[0].Problem.Error(), "ab/cd") {
		t.Fatalf("failed datasets %+v, want one without an id naming the folder", failed)
	}
	if o2 := byID(ds, id2); len(o2) != 1 || o2[0].Problem != nil {
		t.Errorf("%s did not come through: %+v", id2, o2)
	}
}

func edit(t *testing.T, name string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	nb := f(b)
	if bytes.Equal(b, nb) {
		t.Fatalf("%s unchanged", name)
	}
	if err := os.WriteFile(name, nb, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWalkStopsAtFnError(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "root")
	buildRoot(t, root)
	stop := errors.New("stop")
	n := 0
	err := ocfl.New(dirFiles{dir: root, page: 2}, "/").Walk(context.Background(), time.Time{}, func(d *node.Dataset) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Walk returned %v after %d datasets", err, n)
	}
}
