package config

import (
	"path/filepath"
	"testing"
)

// TestExamplesAreValid: every example configuration in examples/ loads and
// validates, as `d1bridge config check` would see it.
func TestExamplesAreValid(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
