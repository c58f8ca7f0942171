package mappings

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// TestOpenSourcesHTTP: an http upstream whose list's fields name dataset is
// a dataset source, and not harvested object by object: as the node's store
// under the store's own keys, otherwise read through its marked keys; without
// dataset it is no dataset source.
func TestOpenSourcesHTTP(t *testing.T) {
	t.Parallel()
	const options = `
    options:
      fields: {key: id%s}
      get: {url: "/c/{key}"}
      list: {url: "/records", items: records}
`
	for _, tc := range []struct {
		name, dataset, store string
		source, reader, flat bool
	}{
		{"store", ", dataset: set", "store: legacy\n", true, false, false},
		{"not the store", ", dataset: set", "", true, true, false},
		{"no dataset", "", "store: legacy\n", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "node: {id: urn:node:T, baseURL: \"https://node.example.org/d1\"}\nupstreams:\n" +
				"  - name: legacy\n    type: http\n    baseURL: https://archive.example.org\n    harvest: {interval: 1h}" +
				fmt.Sprintf(options, tc.dataset) + tc.store
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = t.TempDir()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			clients := map[string]*upstream.Client{}
			for _, u := range cfg.Upstreams {
				clients[u.Name] = upstream.New(u, nil)
				t.Cleanup(func() { clients[u.Name].Close() })
			}
			store, err := openBlobs(cfg, clients)
			if err != nil {
				t.Fatal(err)
			}
			srcs, err := openSources(cfg, clients, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(srcs) == 1; got != tc.source {
				t.Fatalf("%d sources, want a source: %v", len(srcs), tc.source)
			}
			if got := groupsRecords(upstreamNamed(cfg, "legacy")); got == tc.flat {
				t.Errorf("groupsRecords: %v", got)
			}
			if !tc.source {
				return
			}
			if x, ok := srcs[0].src.(node.Exhaustive); !ok || !x.Exhaustive() {
				t.Error("the source is not Exhaustive")
			}
			if got := srcs[0].opts.Reader != nil; got != tc.reader {
				t.Errorf("the source has a reader: %v, want %v", got, tc.reader)
			}
		})
	}
}
