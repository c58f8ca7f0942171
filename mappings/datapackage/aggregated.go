package datapackage

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Namespaces of OAI-ORE resource maps (RDF/XML).
const (
	nsRDF     = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
	nsORE     = "http://www.openarchives.org/ore/terms/"
	nsDCTerms = "http://purl.org/dc/terms/"
)

// maxResourceMap bounds what Aggregated reads of a resource map.
const maxResourceMap = 64 << 20

// Aggregated reads the identifiers an ORE resource map aggregates: the
// dcterms:identifier of each aggregated resource, or, failing that, the identifier
// at the end of its resolve URL. It reads at most maxResourceMap bytes.
func Aggregated(r io.Reader) ([]string, error) {
	d := xml.NewDecoder(io.LimitReader(r, maxResourceMap))
	idOf := map[string]string{} // resource URI -> dcterms:identifier
	var aggregates []string
	var about string
	var inIdentifier bool
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			for _, a := range t.Attr {
				if a.Name.Space == nsRDF && a.Name.Local == "about" {
					about = a.Value
				}
				if a.Name.Space == nsRDF && a.Name.Local == "resource" && t.Name.Space == nsORE && t.Name.Local == "aggregates" {
					aggregates = append(aggregates, a.Value)
				}
			}
			if t.Name.Space == nsDCTerms && t.Name.Local == "identifier" {
				inIdentifier = true
				text.Reset()
			}
		case xml.CharData:
			if inIdentifier {
				text.Write(t)
			}
		case xml.EndElement:
			if inIdentifier && t.Name.Space == nsDCTerms && t.Name.Local == "identifier" {
				inIdentifier = false
				if about != "" {
					idOf[about] = strings.TrimSpace(text.String())
				}
			}
		}
	}
	if len(aggregates) == 0 {
		return nil, fmt.Errorf("it aggregates nothing (no ore:aggregates)")
	}
	var pids []string
	for _, uri := range aggregates {
		pid, ok := idOf[uri]
		if !ok {
			pid = pidFromURI(uri)
		}
		if pid != "" {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// pidFromURI is the identifier at the end of a DataONE resolve or object URL.
func pidFromURI(uri string) string {
	for _, marker := range []string{"/resolve/", "/object/"} {
		if i := strings.LastIndex(uri, marker); i >= 0 {
			if pid, err := url.PathUnescape(uri[i+len(marker):]); err == nil {
				return pid
			}
		}
	}
	return ""
}
