package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckReportsEveryProblem: config check reports every problem at
// once; one bad environment variable stopped it, and the file's problems
// waited until the variable was fixed.
func TestConfigCheckReportsEveryProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d1bridge.yaml")
	if err := os.WriteFile(path, []byte("listen: nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "D1BRIDGE_MAXUPLOADSIZE" {
			return "1GB"
		}
		return ""
	}
	err := checkConfig(path, getenv, io.Discard)
	if err == nil {
		t.Fatal("config check passed")
	}
	for _, want := range []string{"D1BRIDGE_MAXUPLOADSIZE", `listen: "nowhere" is not a host:port address`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("config check does not report %q; it said:\n%v", want, err)
		}
	}
}
