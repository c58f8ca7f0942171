package config

// Fuzz target of the configuration loader. Run it with
//
//	go test -run '^$' -fuzz '^FuzzLoad$' -fuzztime 60s ./config/

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad loads any YAML file: no panic, an error naming the file or a
// configuration (which Validate then checks, without panicking); loading is
// deterministic. Seeds: every file of testdata/ and examples/.
func FuzzLoad(f *testing.F) {
	for _, glob := range []string{"testdata/*.yaml", "examples/*.yaml"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("server: {listen: ':8080'}\n---\nserver: {}\n"))
	f.Add([]byte("upstreams: [{name: a, type: s3, options: {bucket: b}}]\n"))
	dir := f.TempDir()
	path := filepath.Join(dir, "d1bridge.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path, nil)
		if err != nil {
			if c != nil {
				t.Fatal("Load gave a configuration and an error")
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		_ = c.Validate()
		again, err := Load(path, nil)
		if err != nil {
			t.Fatalf("the second load fails: %v", err)
		}
		if e1, e2 := errString(c.Validate()), errString(again.Validate()); e1 != e2 {
			t.Fatalf("two loads validate differently:\n%s\n%s", e1, e2)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
