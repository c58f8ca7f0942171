package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// TestServeRefusesStrayArguments: `d1bridge serve d1bridge.yaml` (the file
// without --config) is refused, as token, register, probe and backup refuse a
// stray argument; serve ignored it and started on the defaults, another data
// directory, node id and listen address than the file's, with no warning.
func TestServeRefusesStrayArguments(t *testing.T) {
	dir := t.TempDir()
	getenv := func(k string) string {
		switch k {
		case "D1BRIDGE_LISTEN":
			return "127.0.0.1:0"
		case "D1BRIDGE_DATADIR":
			return filepath.Join(dir, "data")
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := run(ctx, []string{"serve", filepath.Join(dir, "d1bridge.yaml")}, getenv, io.Discard)
	if err == nil {
		t.Fatalf("serve with a stray argument ran for %s on the defaults and exited cleanly; want a usage error", time.Since(start).Round(time.Millisecond))
	}
}
