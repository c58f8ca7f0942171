package durable

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAndRemove(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "job.json")
	for _, content := range []string{"first", "second"} {
		// Not 0600, the temporary file's own mode: the mode must be set.
		if err := WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read back %q %v, want %q", got, err, content)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v %v, want 0640", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the file alone (no temporary left)", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
	for range 2 { // a missing file is not an error
		if err := Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v", err)
	}
}
