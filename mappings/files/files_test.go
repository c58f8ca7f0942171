package files

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// tree makes a directory tree under a temporary directory: nested
// directories, dot files and directories, unicode names, symbolic links out
// of the root and within it, and a secret beside the root. It returns the
// root and the files List must give, in order, with their contents.
func tree(t *testing.T) (root string, want []string, contents map[string]string) {
	t.Helper()
	top := t.TempDir()
	root = filepath.Join(top, "root")
	contents = map[string]string{}
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		contents[rel] = data
	}
	for _, rel := range []string{"data/a.csv", "data/sub/b.txt", "data/sub/deeper/c.bin", "data-z.txt", "data.txt",
		"docs/ünïcødé 日本.txt", "docs/with space.txt", "a/b/c/d/e/deep.txt", "zz/last", "empty.dat"} {
		data := "bytes of " + rel
		if rel == "empty.dat" {
			data = ""
		}
		write(rel, data)
	}
	for _, rel := range []string{"many/f00/x", "many/f01/x", "many/f02/x", "many/f03/x", "many/f04/x", "many/f05/x"} {
		write(rel, "bytes of "+rel)
	}
	// Not listed: hidden files and directories, links.
	for _, rel := range []string{".hidden", "data/.DS_Store", ".git/config"} {
		write(rel, "hidden")
		delete(contents, rel)
	}
	os.MkdirAll(filepath.Join(root, "emptydir"), 0o755)
	if err := os.WriteFile(filepath.Join(top, "secret"), []byte("outside the root"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"out-file":     "../secret",
		"out-dir":      "..",
		"docs/inside":  "../data/a.csv",
		"docs/absfile": filepath.Join(top, "secret"),
	} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	for rel := range contents {
		want = append(want, rel)
	}
	slices.SortFunc(want, func(a, b string) int { return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/")) })
	return root, want, contents
}

func open(t *testing.T, root string) *Tree {
	t.Helper()
	tr, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func listAll(t *testing.T, tr *Tree) (found []node.Found, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, next, err := tr.List(t.Context(), time.Time{}, cursor)
		if err != nil {
			t.Fatalf("List(%q): %v", cursor, err)
		}
		pages++
		found = append(found, page...)
		if next == "" {
			return found, pages
		}
		if next == cursor || pages > 1000 {
			t.Fatalf("List(%q) gave the cursor %q", cursor, next)
		}
		cursor = next
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	root, want, contents := tree(t)
	tr := open(t, root)
	found, pages := listAll(t, tr)
	if pages != 1 {
		t.Errorf("%d pages", pages)
	}
	var keys []string
	for _, f := range found {
		keys = append(keys, f.FileName)
		if f.Problem != nil || f.Key != "/"+f.FileName || f.Size != int64(len(contents[f.FileName])) ||
			time.Since(f.Modified) > time.Hour || f.Checksum.Algorithm != "" {
			t.Errorf("%+v", f)
		}
	}
	if !slices.Equal(keys, want) {
		t.Errorf("listed\n%q\nwant\n%q", keys, want)
	}
	for _, size := range []int{1, 2, 3, 5, len(want) - 1, len(want), len(want) + 1} {
		tr := open(t, root)
		tr.pageSize = size
		paged, pages := listAll(t, tr)
		if !slices.EqualFunc(paged, found, func(a, b node.Found) bool { return a.Key == b.Key }) {
			t.Errorf("pages of %d: %d files, not those of one page", size, len(paged))
		}
		if w := (len(want) + size - 1) / size; pages != w {
			t.Errorf("pages of %d: %d pages", size, pages)
		}
	}
}

func TestRead(t *testing.T) {
	t.Parallel()
	root, _, contents := tree(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 100_000)
	os.WriteFile(filepath.Join(root, "big.bin"), big, 0o644)
	tr := open(t, root)
	ctx := t.Context()
	for rel, data := range contents {
		r, err := tr.Get(ctx, "/"+rel)
		if err != nil {
			t.Fatalf("Get(/%s): %v", rel, err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil || string(b) != data {
			t.Errorf("Get(/%s) = %q, %v", rel, b, err)
		}
		f, err := tr.Stat(ctx, "/"+rel)
		if err != nil || f.Key != "/"+rel || f.FileName != rel || f.Size != int64(len(data)) || f.Modified.IsZero() {
			t.Errorf("Stat(/%s) = %+v, %v", rel, f, err)
		}
	}
	r, err := tr.Get(ctx, "/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		t.Fatalf("Get returns a %T, which does not seek", r)
	}
	if n, err := rs.Seek(0, io.SeekEnd); err != nil || n != int64(len(big)) {
		t.Fatalf("Seek to the end: %d, %v", n, err)
	}
	if _, err := rs.Seek(654_321, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(rs); err != nil || !bytes.Equal(rest, big[654_321:]) {
		t.Errorf("after a seek: %d bytes, %v", len(rest), err)
	}

	for key, kind := range map[string]adapter.Kind{
		"/missing":              adapter.NotFound,
		"/data":                 adapter.NotFound, // a directory
		"/out-file":             adapter.NotFound, // links are not files of the source
		"/out-dir/secret":       adapter.NotFound,
		"/docs/absfile":         adapter.NotFound,
		"/docs/inside":          adapter.NotFound,
		"/.hidden":              adapter.NotFound,
		"/.git/config":          adapter.NotFound,
		"/data/.DS_Store":       adapter.NotFound,
		"/../secret":            adapter.InvalidRequest,
		"/data/../../secret":    adapter.InvalidRequest,
		"//etc/passwd":          adapter.InvalidRequest,
		"/data//a.csv":          adapter.InvalidRequest,
		"/./data/a.csv":         adapter.InvalidRequest,
		"/":                     adapter.InvalidRequest,
		"/data/":                adapter.InvalidRequest,
		"data/a.csv":            adapter.InvalidRequest, // not a "/"-key
		"8e0a4c1e-5f6b-4d2c-9a": adapter.InvalidRequest,
	} {
		if rc, err := tr.Get(ctx, key); !adapter.IsKind(err, kind) {
			if rc != nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				t.Errorf("Get(%q) read %q, want %v", key, b, kind)
				continue
			}
			t.Errorf("Get(%q): %v, want %v", key, err, kind)
		}
		if _, err := tr.Stat(ctx, key); !adapter.IsKind(err, kind) {
			t.Errorf("Stat(%q): %v, want %v", key, err, kind)
		}
	}
	if _, err := tr.Put(ctx, "/data/a.csv", strings.NewReader("x")); !adapter.IsKind(err, adapter.InvalidRequest) {
		t.Errorf("Put: %v", err)
	}
	if err := tr.Delete(ctx, "/data/a.csv"); !adapter.IsKind(err, adapter.InvalidRequest) {
		t.Errorf("Delete: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "data", "a.csv")); string(b) != contents["data/a.csv"] {
		t.Errorf("the file changed: %q", b)
	}
}

// TestEscapeThroughDirectoryLink: a directory link that leads out of the
// root does not open what it leads to, even when it is not the last
// segment.
func TestEscapeThroughDirectoryLink(t *testing.T) {
	t.Parallel()
	root, _, _ := tree(t)
	tr := open(t, root)
	if rc, err := tr.Get(t.Context(), "/out-dir/root/data/a.csv"); err == nil {
		rc.Close()
		t.Error("read a file through a link out of the root")
	} else if !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get: %v, want NotFound", err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct{ root, wantErr string }{
		{"", "the root is required"},
		{filepath.Join(dir, "missing"), "no such file or directory"},
		{file, "is not a directory"},
	} {
		if _, err := New(tc.root); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("New(%q): %v, want %q", tc.root, err, tc.wantErr)
		}
	}
	tr := open(t, dir)
	if err := tr.Ping(t.Context()); err != nil {
		t.Error(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := tr.Ping(t.Context()); err == nil {
		t.Error("Ping of a removed root succeeded")
	}
	if _, _, err := tr.List(t.Context(), time.Time{}, ""); !adapter.IsKind(err, adapter.ServiceFailure) {
		t.Errorf("List of a removed root: %v", err)
	}
}
