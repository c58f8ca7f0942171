package datapackage

import (
	"bytes"
	"encoding/xml"
	"net/url"
	"time"
)

// Resolve is the URI that names pid in resource maps: ResolveBase and the
// pid, path-escaped.
func Resolve(pid string) string { return ResolveBase + url.PathEscape(pid) }

// ResourceMap is the OAI-ORE resource map mapPID of a package: the science
// metadata metaPID documents every data object of dataPIDs. modified is the
// map's dcterms:modified (a zero time leaves it out); the document depends on
// nothing else, so the same arguments give the same bytes.
func ResourceMap(mapPID, metaPID string, dataPIDs []string, modified time.Time) []byte {
	dataPIDs = distinctData(mapPID, metaPID, dataPIDs)
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(`<rdf:RDF xmlns:cito="http://purl.org/spar/cito/" xmlns:dc="http://purl.org/dc/elements/1.1/"` +
		` xmlns:dcterms="http://purl.org/dc/terms/" xmlns:ore="http://www.openarchives.org/ore/terms/"` +
		` xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` + "\n")
	mapURI := Resolve(mapPID)
	aggURI := mapURI + "#aggregation"
	metaURI := Resolve(metaPID)

	open := func(about string) { b.WriteString(`  <rdf:Description rdf:about="` + esc(about) + `">` + "\n") }
	res := func(prop, uri string) { b.WriteString(`    <` + prop + ` rdf:resource="` + esc(uri) + `"/>` + "\n") }
	lit := func(prop, v string) { b.WriteString(`    <` + prop + `>` + esc(v) + `</` + prop + `>` + "\n") }
	closeDesc := func() { b.WriteString("  </rdf:Description>\n") }

	open(mapURI)
	res("rdf:type", "http://www.openarchives.org/ore/terms/ResourceMap")
	lit("dcterms:identifier", mapPID)
	lit("dc:format", "application/rdf+xml")
	if !modified.IsZero() {
		lit("dcterms:modified", modified.UTC().Format(time.RFC3339))
	}
	res("ore:describes", aggURI)
	closeDesc()

	open(aggURI)
	res("rdf:type", "http://www.openarchives.org/ore/terms/Aggregation")
	res("ore:isDescribedBy", mapURI)
	res("ore:aggregates", metaURI)
	for _, p := range dataPIDs {
		res("ore:aggregates", Resolve(p))
	}
	closeDesc()

	open(metaURI)
	lit("dcterms:identifier", metaPID)
	res("ore:isAggregatedBy", aggURI)
	for _, p := range dataPIDs {
		res("cito:documents", Resolve(p))
	}
	closeDesc()

	for _, p := range dataPIDs {
		open(Resolve(p))
		lit("dcterms:identifier", p)
		res("ore:isAggregatedBy", aggURI)
		res("cito:isDocumentedBy", metaURI)
		closeDesc()
	}
	b.WriteString("</rdf:RDF>\n")
	return b.Bytes()
}

// distinctData is dataPIDs, in order, without repeats and without the map or
// the metadata: a resource described twice would give it two
// rdf:Descriptions with conflicting relations.
func distinctData(mapPID, metaPID string, dataPIDs []string) []string {
	seen := map[string]bool{mapPID: true, metaPID: true}
	out := make([]string, 0, len(dataPIDs))
	for _, p := range dataPIDs {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
