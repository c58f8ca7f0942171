package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreFileReplacesOnlyOtherFiles: restoreFile links src where dst is
// absent or another file (damaged bytes), leaves dst alone when it already is
// src's file, and counts each as linked; no temporary name is left behind.
// capture, for backups, keeps an existing dst and reports it linked only when
// it is src's file: it used to call every existing dst a link.
func TestRestoreFileReplacesOnlyOtherFiles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "backup", "blob")
	if err := writeFile(src, strings.NewReader("the good bytes")); err != nil {
		t.Fatal(err)
	}
	for name, prepare := range map[string]func(dst string) error{
		"absent":    func(string) error { return nil },
		"damaged":   func(dst string) error { return writeFile(dst, strings.NewReader("damaged")) },
		"same file": func(dst string) error { return os.Link(src, dst) },
	} {
		t.Run(name, func(t *testing.T) {
			dst := filepath.Join(dir, "store", name, "blob")
			if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := prepare(dst); err != nil {
				t.Fatal(err)
			}
			linked, err := restoreFile(src, dst)
			if err != nil || !linked {
				t.Fatalf("restoreFile: linked %v, %v", linked, err)
			}
			if !sameFile(src, mustStat(t, dst)) {
				t.Errorf("dst is not src's file")
			}
			if es, _ := os.ReadDir(filepath.Dir(dst)); len(es) != 1 {
				t.Errorf("the directory holds %d names, want dst alone", len(es))
			}
		})
	}
	copied := filepath.Join(dir, "copy", "blob")
	if err := writeFile(copied, strings.NewReader("the good bytes")); err != nil {
		t.Fatal(err)
	}
	if linked, err := capture(src, copied); err != nil || linked {
		t.Errorf("capture over a copy: linked %v, %v; want kept, not linked", linked, err)
	}
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
