package datapackage

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// rdfDoc is the part of a resource map the tests read.
type rdfDoc struct {
	XMLName      xml.Name
	Descriptions []struct {
		About      string   `xml:"about,attr"`
		Identifier []string `xml:"http://purl.org/dc/terms/ identifier"`
		Aggregates []struct {
			Resource string `xml:"resource,attr"`
		} `xml:"http://www.openarchives.org/ore/terms/ aggregates"`
		Documents []struct {
			Resource string `xml:"resource,attr"`
		} `xml:"http://purl.org/spar/cito/ documents"`
		DocumentedBy []struct {
			Resource string `xml:"resource,attr"`
		} `xml:"http://purl.org/spar/cito/ isDocumentedBy"`
	} `xml:"http://www.w3.org/1999/02/22-rdf-syntax-ns# Description"`
}

func TestResourceMap(t *testing.T) {
	modified := time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 3600))
	cases := map[string]struct {
		meta string
		data []string
		want []string // the data pids described, in order
	}{
		"plain":      {"meta", []string{"d1", "d2", "d3"}, []string{"d1", "d2", "d3"}},
		"no data":    {"meta", nil, nil},
		"odd pids":   {"doi:10.5063/F1 & <x>", []string{"a/b?c#d", "ü space", `q"uote'`}, []string{"a/b?c#d", "ü space", `q"uote'`}},
		"duplicates": {"meta", []string{"d1", "d2", "d1", "meta", "map"}, []string{"d1", "d2"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out := ResourceMap("map", c.meta, c.data, modified)
			if again := ResourceMap("map", c.meta, c.data, modified); !bytes.Equal(out, again) {
				t.Errorf("two calls gave different documents")
			}
			var doc rdfDoc
			if err := xml.Unmarshal(out, &doc); err != nil {
				t.Fatalf("resource map does not parse: %v\n%s", err, out)
			}
			if doc.XMLName.Local != "RDF" {
				t.Fatalf("root %v", doc.XMLName)
			}
			// Every pid is named once by dcterms:identifier.
			count := map[string]int{}
			for _, d := range doc.Descriptions {
				for _, id := range d.Identifier {
					count[id]++
				}
			}
			for _, pid := range append([]string{"map", c.meta}, c.want...) {
				if count[pid] != 1 {
					t.Errorf("pid %q named by %d dcterms:identifier, want 1", pid, count[pid])
				}
				delete(count, pid)
			}
			if len(count) > 0 {
				t.Errorf("unexpected identifiers %v", count)
			}
			for _, d := range doc.Descriptions {
				if d.About == Resolve(c.meta) {
					if len(d.Documents) != len(c.want) {
						t.Errorf("metadata documents %d objects, want %d", len(d.Documents), len(c.want))
					}
					for i, r := range d.Documents {
						if r.Resource != Resolve(c.want[i]) {
							t.Errorf("documents[%d] = %q, want %q", i, r.Resource, Resolve(c.want[i]))
						}
					}
				}
				if strings.HasSuffix(d.About, "#aggregation") && len(d.Aggregates) != len(c.want)+1 {
					t.Errorf("aggregation aggregates %d, want %d", len(d.Aggregates), len(c.want)+1)
				}
			}
			if !bytes.Contains(out, []byte("2024-05-06T06:08:09Z")) {
				t.Errorf("dcterms:modified is not the UTC time")
			}
		})
	}
	if bytes.Contains(ResourceMap("m", "s", nil, time.Time{}), []byte("modified")) {
		t.Errorf("a zero time wrote dcterms:modified")
	}
}
