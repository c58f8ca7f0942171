package datapackage

// Fuzz target of the reader of resource maps (Aggregated) behind getPackage, which reads
// what clients and harvested sources registered. Run it with
//
//	go test -run '^$' -fuzz '^FuzzAggregated$' -fuzztime 60s ./mappings/datapackage/

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// FuzzAggregated: any document gives identifiers or an error, never a panic,
// and never an empty identifier; a resource map written by
// ResourceMap reads back as its metadata and data identifiers, in
// order, when they are valid identifiers.
func FuzzAggregated(f *testing.F) {
	f.Add([]byte(ResourceMap("rm1", "meta1", []string{"d1", "d/2", "d 3"}, time.Time{})), "meta/1", "d%1", "d:2")
	f.Add([]byte(`<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ore="http://www.openarchives.org/ore/terms/">`+
		`<rdf:Description rdf:about="x#aggregation"><ore:aggregates rdf:resource="https://cn.dataone.org/cn/v2/object/a%2Fb"/>`+
		`<ore:aggregates rdf:resource="https://x/resolve/c"/><ore:aggregates rdf:resource="urn:x"/></rdf:Description></rdf:RDF>`), "m", "a", "b")
	if paths, _ := filepath.Glob("testdata/*.xml"); len(paths) > 0 {
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b, "m", "a", "b")
			}
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte, meta, d1, d2 string) {
		if pids, err := Aggregated(bytes.NewReader(doc)); err == nil {
			for _, p := range pids {
				if p == "" {
					t.Fatalf("an empty identifier among %q", pids)
				}
			}
		}
		for _, id := range []string{meta, d1, d2} {
			if adapter.CheckIdentifier(id) != nil {
				return
			}
		}
		if meta == "rm" || d1 == "rm" || d2 == "rm" {
			return
		}
		want := []string{meta}
		for _, d := range []string{d1, d2} {
			if !slices.Contains(want, d) {
				want = append(want, d)
			}
		}
		rm := ResourceMap("rm", meta, []string{d1, d2}, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
		got, err := Aggregated(bytes.NewReader(rm))
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("the resource map of %q reads back as %q, %v\n%s", want, got, err, strings.TrimSpace(string(rm)))
		}
	})
}
