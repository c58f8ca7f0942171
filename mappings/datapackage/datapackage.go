// Package datapackage makes the documents that turn a repository's holdings
// into DataONE data packages, and reads the ones repositories already have:
//
//   - ResourceMap writes the OAI-ORE resource map (RDF/XML) of a package, as
//     DataONE's data package design says: the map, its aggregation, the
//     science metadata that cito:documents each data object, and each data
//     object cito:isDocumentedBy it, every resource named by its CN resolve
//     URI and its dcterms:identifier.
//   - EML writes an EML 2.2.0 document from the Facts known of a dataset, with
//     one otherEntity per data object, when the repository has no science
//     metadata the CN indexes.
//   - Sniff tells the DataONE format of a metadata document from its first
//     bytes, and Indexed whether the CN indexes that format.
//   - ReadFacts reads what a repository's own documents say of a dataset
//     (DataCite, RO-Crate, BagIt bag-info.txt, schema.org JSON-LD, oai_dc,
//     EML, ISO 19115), to name it and to generate EML from it.
//
// Every writer is deterministic: the same input gives the same bytes, so a
// document stored once is the one a later harvest would make again.
//
// It imports no other package of the project but adapter.
package datapackage

import (
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// Formats of the documents this package makes or reads.
const (
	FormatORE        = "http://www.openarchives.org/ore/terms"
	FormatEML220     = "https://eml.ecoinformatics.org/eml-2.2.0"
	FormatSchemaOrg  = "science-on-schema.org/Dataset;ld+json"
	FormatOAIDC      = "http://www.openarchives.org/OAI/2.0/oai_dc/"
	FormatDataCite31 = "http://datacite.org/schema/kernel-3.1"
	FormatISO19139   = "http://www.isotc211.org/2005/gmd"
)

// Facts are what is known of a dataset, from the repository's records or its
// sidecar files. Zero fields are unknown.
type Facts struct {
	Title      string
	Abstract   string
	Creators   []Party
	Contact    *Party // nil: the first creator
	Publisher  string
	Keywords   []string
	License    string // a name, or the license's URL
	LicenseURL string
	Published  time.Time
	Modified   time.Time
	// Identifier is the dataset's own identifier (a DOI, a handle, a URL).
	Identifier string
	// Landing is the dataset's landing page.
	Landing string
}

// Party is a person or an organization.
type Party struct {
	GivenName, SurName string
	Name               string // a person's whole name when not split, or an organization's
	Organization       string
	Email, ORCID       string
}

// Entity is one data object of a package, as the EML lists it.
type Entity struct {
	PID      string
	Name     string // its file name (path within the dataset)
	Size     int64
	Checksum adapter.Checksum
	FormatID string
	URL      string // where it resolves
}

// ResolveBase is the prefix of the URIs that name a package's resources: the
// coordinating node's resolve service, as in DataONE's resource maps.
const ResolveBase = "https://cn.dataone.org/cn/v2/resolve/"
