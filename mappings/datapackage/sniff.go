package datapackage

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"path"
	"strings"
)

// Root namespaces of the XML metadata formats Sniff knows.
const (
	gmiNamespace       = "http://www.isotc211.org/2005/gmi"
	dataciteNSPrefix   = "http://datacite.org/schema/kernel-"
	dataciteKernel3NS  = "http://datacite.org/schema/kernel-3"
	xsiSchemaLocation  = "schemaLocation"
	fgdcFormat1998     = "FGDC-STD-001-1998"
	fgdcBiologicalData = "FGDC-STD-001.1-1999"
	fgdcShoreline      = "FGDC-STD-001.2-1999"
)

// emlNamespaces are the EML root namespaces, each also the formatId.
var emlNamespaces = map[string]bool{
	"eml://ecoinformatics.org/eml-2.0.0": true,
	"eml://ecoinformatics.org/eml-2.0.1": true,
	"eml://ecoinformatics.org/eml-2.1.0": true,
	"eml://ecoinformatics.org/eml-2.1.1": true,
	FormatEML220:                         true,
}

// fgdcSections are the top-level sections of an FGDC CSDGM record.
var fgdcSections = map[string]bool{
	"idinfo": true, "dataqual": true, "spdoinfo": true, "spref": true,
	"eainfo": true, "distinfo": true, "metainfo": true,
}

// Sniff is the DataONE formatId of a metadata document, from its file name and
// first bytes (up to 64 KiB); "" when it is not a metadata document this
// package knows. A head cut anywhere after the root element's start tag
// still sniffs. RO-Crate and BagIt sidecars, which DataONE has no format
// for, give "ro-crate" and "bagit-info"; DataCite kernel-4, which the CN does
// not index, "http://datacite.org/schema/kernel-4".
func Sniff(name string, head []byte) string {
	switch path.Base(name) {
	case roCrateName, "ro-crate-metadata.jsonld":
		return formatROCrate
	case bagInfoName:
		return formatBagInfo
	}
	head = bytes.TrimPrefix(head, []byte("\ufeff"))
	start := bytes.TrimLeft(head, " \t\r\n")
	if len(start) == 0 {
		return ""
	}
	switch start[0] {
	case '<':
		return sniffXML(start)
	case '{':
		return sniffJSONLD(start)
	}
	return ""
}

func sniffXML(head []byte) string {
	d := xml.NewDecoder(bytes.NewReader(head))
	// Only the names of the root and its first children are read, which
	// are ASCII in every encoding a metadata document uses.
	d.CharsetReader = func(_ string, input io.Reader) (io.Reader, error) { return input, nil }
	var root xml.StartElement
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		if se, ok := tok.(xml.StartElement); ok {
			root = se
			break
		}
	}
	ns, local := root.Name.Space, root.Name.Local
	switch {
	case local == "eml" && emlNamespaces[ns]:
		return ns
	case local == "MD_Metadata" && ns == FormatISO19139,
		local == "MI_Metadata" && ns == gmiNamespace:
		return FormatISO19139
	case local == "resource" && strings.HasPrefix(ns, dataciteNSPrefix):
		return dataciteFormat(root)
	case ns == formatOneDCX:
		return formatOneDCX
	case local == "dc" && ns == FormatOAIDC:
		return FormatOAIDC
	case local == "metadata" && ns == "" && hasFGDCSection(d):
		// The profile is named in metainfo/metstdv, near the end: found
		// only when the head reaches it.
		switch {
		case bytes.Contains(head, []byte(fgdcBiologicalData)):
			return fgdcBiologicalData
		case bytes.Contains(head, []byte(fgdcShoreline)):
			return fgdcShoreline
		}
		return fgdcFormat1998
	}
	return ""
}

// dataciteFormat tells the DataCite kernel of a <resource> root: kernel-3
// documents share one namespace, and say 3.0 or 3.1 only in their
// schemaLocation.
func dataciteFormat(root xml.StartElement) string {
	switch ns := root.Name.Space; {
	case ns == dataciteKernel3NS:
		for _, a := range root.Attr {
			if a.Name.Local == xsiSchemaLocation && strings.Contains(a.Value, "kernel-3.0") {
				return formatDataCite30
			}
		}
		return FormatDataCite31
	case ns == formatDataCite4 || strings.HasPrefix(ns, formatDataCite4+"."):
		return formatDataCite4
	}
	return ""
}

// hasFGDCSection tells whether the root read last from d has an FGDC section
// among its children, as far as the head goes.
func hasFGDCSection(d *xml.Decoder) bool {
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 1 && fgdcSections[tok.Name.Local] {
				return true
			}
			depth++
		case xml.EndElement:
			depth--
		}
	}
	return false
}

// sniffJSONLD tells a schema.org Dataset in JSON-LD, reading the top-level
// object's members one at a time so that a cut head still gives the members
// before the cut: @context first, as documents write it.
func sniffJSONLD(head []byte) string {
	d := json.NewDecoder(bytes.NewReader(head))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	schemaOrg, dataset := false, false
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		if key == "@graph" {
			found, complete := graphHasDataset(d)
			dataset = dataset || found
			if !complete {
				break
			}
			continue
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			break // the head ends inside this member
		}
		switch key {
		case "@context":
			schemaOrg = schemaOrg || bytes.Contains(raw, []byte("schema.org"))
		case "@type":
			var t any
			if json.Unmarshal(raw, &t) == nil && hasType(jsonNode{"@type": t}, "Dataset") {
				dataset = true
				// A full schema.org IRI needs no @context to say so.
				schemaOrg = schemaOrg || bytes.Contains(raw, []byte("schema.org/"))
			}
		}
	}
	if schemaOrg && dataset {
		return FormatSchemaOrg
	}
	return ""
}

// graphHasDataset reads a @graph list from d, as far as the head goes, and
// tells whether one of its nodes is a Dataset; complete when it read the
// whole list without finding one, so the members after it can be read.
func graphHasDataset(d *json.Decoder) (found, complete bool) {
	if tok, err := d.Token(); err != nil || tok != json.Delim('[') {
		return false, false
	}
	for d.More() {
		var n jsonNode
		if err := d.Decode(&n); err != nil {
			return false, false
		}
		if hasType(n, "Dataset") {
			return true, false
		}
	}
	_, err := d.Token() // the closing ]
	return false, err == nil
}

// Sidecar tells whether a file at path (within its dataset) may be a metadata
// document rather than data: worth reading its first bytes to Sniff them.
// Only files at the dataset's root are: XML and JSON documents, and BagIt
// tag files (bagit.txt, bag-info.txt, manifest-*.txt, tagmanifest-*.txt).
func Sidecar(p string) bool {
	p = strings.TrimPrefix(p, "./")
	if p == "" || strings.Contains(p, "/") {
		return false
	}
	lower := strings.ToLower(p)
	switch path.Ext(lower) {
	case ".xml", ".json", ".jsonld":
		return true
	}
	if lower == bagInfoName || lower == "bagit.txt" {
		return true
	}
	return strings.HasSuffix(lower, ".txt") &&
		(strings.HasPrefix(lower, "manifest-") || strings.HasPrefix(lower, "tagmanifest-"))
}
