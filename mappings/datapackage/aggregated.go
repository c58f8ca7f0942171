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

// MaxForeignResourceMap bounds what is read of a resource map another node
// serves; a node's own were bounded when they were stored, and a harvest's
// grow with their datasets (about 700 bytes a member).
const MaxForeignResourceMap = 64 << 20

// Aggregated reads the identifiers an ORE resource map aggregates: the
// dcterms:identifier of each aggregated resource, or, failing that, the
// identifier at the end of its resolve URL. Node elements may nest (a
// property's object written in place, as rdflib's pretty-xml and Jena's
// RDF/XML-ABBREV do): each statement is its own node's.
func Aggregated(r io.Reader) ([]string, error) {
	d := xml.NewDecoder(r)
	idOf := map[string]string{} // resource URI -> dcterms:identifier
	var aggregates []string
	// frames are the open elements: each one's name and the resource its
	// statements are about (a node element's rdf:about, else its parent's).
	type frame struct {
		name    xml.Name
		subject string
	}
	var frames []frame
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
			var parent frame
			if len(frames) > 0 {
				parent = frames[len(frames)-1]
			}
			subject := parent.subject
			for _, a := range t.Attr {
				if a.Name.Space != nsRDF {
					continue
				}
				switch {
				case a.Name.Local == "about":
					subject = a.Value
					if parent.name.Space == nsORE && parent.name.Local == "aggregates" { // aggregates a node written in place
						aggregates = append(aggregates, a.Value)
					}
				case a.Name.Local == "resource" && t.Name.Space == nsORE && t.Name.Local == "aggregates":
					aggregates = append(aggregates, a.Value)
				}
			}
			frames = append(frames, frame{t.Name, subject})
			if t.Name.Space == nsDCTerms && t.Name.Local == "identifier" {
				inIdentifier = true
				text.Reset()
			}
		case xml.CharData:
			if inIdentifier {
				text.Write(t)
			}
		case xml.EndElement:
			top := frames[len(frames)-1]
			frames = frames[:len(frames)-1]
			if inIdentifier && t.Name.Space == nsDCTerms && t.Name.Local == "identifier" {
				inIdentifier = false
				if top.subject != "" {
					idOf[top.subject] = strings.TrimSpace(text.String())
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
