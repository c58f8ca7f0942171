package datapackage

import (
	"slices"
	"strings"
	"testing"
)

// TestAggregatedNestedDescription: RDF/XML lets a property's object be
// a nested rdf:Description (rdflib's "pretty-xml", Jena's RDF/XML-ABBREV
// write them). Aggregated kept one "about" for the element it was in, not a
// stack: after a nested Description closed, the outer resource's
// dcterms:identifier was taken for the inner one's. The metadata's
// identifier became "data#2": getPackage bagged data#2 twice and left the
// science metadata out, and the harvest's packageMembers missed it.
func TestAggregatedNestedDescription(t *testing.T) {
	t.Parallel()
	const doc = `<?xml version="1.0" encoding="utf-8"?>
<rdf:RDF xmlns:ore="http://www.openarchives.org/ore/terms/" xmlns:cito="http://purl.org/spar/cito/"
  xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:dcterms="http://purl.org/dc/terms/">
  <ore:ResourceMap rdf:about="https://cn.dataone.org/cn/v2/resolve/ore_pid">
    <dcterms:identifier>ore_pid</dcterms:identifier>
    <ore:describes>
      <ore:Aggregation rdf:about="https://cn.dataone.org/cn/v2/resolve/ore_pid#aggregation">
        <ore:aggregates rdf:resource="https://cn.dataone.org/cn/v2/resolve/meta_pid"/>
        <ore:aggregates rdf:resource="https://cn.dataone.org/cn/v2/resolve/data%232"/>
      </ore:Aggregation>
    </ore:describes>
  </ore:ResourceMap>
  <rdf:Description rdf:about="https://cn.dataone.org/cn/v2/resolve/data%232">
    <ore:isAggregatedBy rdf:resource="https://cn.dataone.org/cn/v2/resolve/ore_pid#aggregation"/>
    <cito:isDocumentedBy>
      <rdf:Description rdf:about="https://cn.dataone.org/cn/v2/resolve/meta_pid">
        <dcterms:identifier>meta_pid</dcterms:identifier>
        <cito:documents rdf:resource="https://cn.dataone.org/cn/v2/resolve/data%232"/>
      </rdf:Description>
    </cito:isDocumentedBy>
    <dcterms:identifier>data#2</dcterms:identifier>
  </rdf:Description>
</rdf:RDF>
`
	got, err := Aggregated(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"meta_pid", "data#2"}; !slices.Equal(got, want) {
		t.Fatalf("Aggregated = %q, want %q", got, want)
	}
}
