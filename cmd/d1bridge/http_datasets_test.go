package main

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestDatasetsHTTP is TestDatasets for a legacy repository's REST API (the
// http mapping, the node's store) whose file records name their dataset:
// nginx serves the API's answers as JSON files (two pages, linked by a next
// URL) and the files' bytes. Two datasets, their records interleaved over the
// pages, and a record in no dataset (registered nowhere); then a file
// changes, one goes, and the second dataset is withdrawn.
func TestDatasetsHTTP(t *testing.T) {
	t.Parallel()
	runDatasets(t, datasetsHTTP(t))
}

// apiRecord is one file record of the fake repository's API.
type apiRecord struct {
	ID      string          `json:"id"`
	Dataset *apiDatasetLink `json:"dataset,omitempty"`
	Name    string          `json:"name"`
	Type    string          `json:"type"`
	Size    int             `json:"size"`
	MD5     string          `json:"md5"`
	Updated string          `json:"updated"`
	content string
}

type apiDatasetLink struct {
	ID string `json:"id"`
}

func datasetsHTTP(t *testing.T) datasetFixture {
	d := servers.NginxDAV(t, servers.DAVOptions{})
	// write puts b at rel under nginx's root, never half a file.
	write := func(t *testing.T, rel string, b []byte) {
		p := filepath.Join(d.Root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	const t1, t2 = "2024-01-02T03:04:05Z", "2024-02-01T00:00:00Z"
	rec := func(id, dataset, name, typ, content, updated string) apiRecord {
		sum := md5.Sum([]byte(content))
		r := apiRecord{ID: id, Name: name, Type: typ, Size: len(content), MD5: hex.EncodeToString(sum[:]), Updated: updated, content: content}
		if dataset != "" {
			r.Dataset = &apiDatasetLink{dataset}
		}
		return r
	}
	// publish writes the records' bytes, then the two list pages.
	publish := func(t *testing.T, pages [2][]apiRecord) {
		for _, p := range pages {
			for _, r := range p {
				write(t, "content/"+r.ID, []byte(r.content))
			}
		}
		for i, p := range pages {
			page := map[string]any{"records": p, "links": map[string]any{}}
			if i == 0 {
				page["links"] = map[string]any{"next": "/api/records-2.json"}
			}
			b, err := json.Marshal(page)
			if err != nil {
				t.Fatal(err)
			}
			write(t, []string{"api/records.json", "api/records-2.json"}[i], b)
		}
	}
	table := rec("rec-1", "ds-a", "table.csv", "text/csv", "a,b\n1,2\n", t1)
	counts := rec("rec-4", "ds-b", "counts.csv", "text/csv", "n\n7\n", t1)
	loose := rec("rec-5", "", "loose.txt", "text/plain", "in no dataset\n", t1)
	readme := rec("rec-2", "ds-a", "readme.txt", "text/plain", "read me\n", t1)
	extra := rec("rec-3", "ds-a", "extra.csv", "text/csv", "e\n1\n", t1)
	publish(t, [2][]apiRecord{{table, counts, loose}, {readme, extra}})

	const a, b = "http:ds-a", "http:ds-b"
	one := phaseWant{heads: map[string]pkgWant{
		"resource_map_" + a + "@v1": {a + "@v1", formatEML220, []string{a + "@v1/extra.csv", a + "@v1/readme.txt", a + "@v1/table.csv"}},
		"resource_map_" + b + "@v1": {b + "@v1", formatEML220, []string{b + "@v1/counts.csv"}},
	}}
	two := phaseWant{
		heads: map[string]pkgWant{
			"resource_map_" + a + "@v2": {a + "@v2", formatEML220, []string{a + "@v1/readme.txt", a + "@v2/table.csv"}},
		},
		archived: []string{a + "@v1/extra.csv", "resource_map_" + b + "@v1", b + "@v1", b + "@v1/counts.csv"},
		obsoletes: [][2]string{
			{"resource_map_" + a + "@v2", "resource_map_" + a + "@v1"},
			{a + "@v2", a + "@v1"},
			{a + "@v2/table.csv", a + "@v1/table.csv"},
		},
	}
	return datasetFixture{
		config: fmt.Sprintf(`upstreams:
  - name: legacy
    type: http
    baseURL: %s
    harvest: {interval: 1s, pidPrefix: "http:", readers: [public]}
    options:
      checksumAlgorithm: MD5
      fields: {key: id, dataset: dataset.id, fileName: name, formatId: type, size: size, checksum: md5, modified: updated}
      get: {url: "/content/{key}"}
      list: {url: "/api/records.json", paging: nextURL, items: records, next: links.next}
store: legacy
`, strings.TrimSuffix(d.URL, "/")),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			table := rec("rec-1", "ds-a", "table.csv", "text/csv", "a,b\n1,2\n3,4\n", t2)
			publish(t, [2][]apiRecord{{table, loose}, {readme}})
		},
	}
}
