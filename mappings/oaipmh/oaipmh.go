// Package oaipmh is an OAI-PMH 2.0 endpoint (DSpace, EPrints, Dataverse,
// Invenio...) as a harvest source of datasets: it implements
// node.DatasetSource, each record a dataset version, and node.Reader, the
// bytes of the data files it finds. Every request goes through the upstream's
// client (metrics, breaker, retries of GET and HEAD). baseURL is the OAI-PMH
// endpoint (as https://repo.example.org/oai/request).
//
// Walk asks ListRecords (from = since, at the granularity Identify announces:
// a day or a second), following resumption tokens until one is empty; a token
// that repeats, or an OAI error other than noRecordsMatch (which means no
// records), fails the walk with a ServiceFailure naming the OAI code. Each page
// is parsed as it streams, up to 64 MiB; its records are handed on after the
// page is read, so that the connection is not held while the harvest works.
// A record is a Dataset: its ID is the record's identifier, its Version and
// Modified its datestamp, Deleted its header's status; its Metadata is the
// metadata element's child, the exact bytes of the page with the namespace
// declarations it inherits made explicit on its root, so that it parses alone.
//
// Data files are found by FAIR Signposting: the record's landing page (the
// first identifier in its metadata that is an http(s) URL, else its first
// DOI, at https://doi.org/) is asked with HEAD (GET when HEAD is refused), and
// each `Link: <url>; rel="item"` of its answer is a file. A HEAD of each item
// gives its size (Content-Length), date (Last-Modified) and, from a
// Content-Disposition, its file name (else the URL's last path segment); the
// link's type gives its format when it is a DataONE format, else the name's
// extension does. A file's key is its absolute URL, which Get reads (ranges
// and conditional reads served by reopening it at an offset).
//
// Options (upstreams[].options):
//
//	set:            harvest only this setSpec; every record when unset
//	metadataPrefix: the metadata format asked for; unset: the best the
//	                endpoint offers (ListMetadataFormats), in this order:
//	                oai_datacite, datacite, eml, iso19139, oai_dc
//	files:          how data files are found: signposting (default) or none
//	                (metadata-only packages)
package oaipmh

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// Options are the upstream's options for an OAI-PMH source.
type Options struct {
	Set            string `yaml:"set"`
	MetadataPrefix string `yaml:"metadataPrefix"`
	Files          string `yaml:"files"`
}

// How data files are found.
const (
	FilesSignposting = "signposting"
	FilesNone        = "none"
)

// preferred are the metadata prefixes chosen when metadataPrefix is unset,
// best first; oai_dc, which every endpoint offers, is the last resort.
var preferred = []string{"oai_datacite", "datacite", "eml", "iso19139", "oai_dc"}

// Source is an OAI-PMH endpoint as a node.DatasetSource and node.Reader. It
// is safe for concurrent use.
type Source struct {
	c      *upstream.Client
	base   *url.URL
	set    string
	prefix string // "": chosen by ListMetadataFormats on each walk
	files  string
}

var (
	_ node.DatasetSource = (*Source)(nil)
	_ node.Reader        = (*Source)(nil)
)

// New opens the endpoint u describes, sending every request through c. It
// does not contact the endpoint.
func New(u config.Upstream, c *upstream.Client) (*Source, error) {
	s, err := parse(u)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on.
func CheckOptions(u config.Upstream) error {
	_, err := parse(u)
	return err
}

func parse(u config.Upstream) (*Source, error) {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, fmt.Errorf("oaipmh: %w", err)
	}
	var errs []error
	base, err := url.Parse(u.BaseURL)
	switch {
	case err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "":
		errs = append(errs, fmt.Errorf("baseURL %q is not an http(s) URL", u.BaseURL))
	case base.Fragment != "" || base.User != nil:
		errs = append(errs, fmt.Errorf("baseURL %q must have no fragment or credentials", u.BaseURL))
	case base.Query().Has("verb"):
		errs = append(errs, fmt.Errorf("baseURL %q must not have a verb: it is the endpoint, without a request", u.BaseURL))
	}
	s := &Source{base: base, set: o.Set, prefix: o.MetadataPrefix, files: o.Files}
	if strings.TrimSpace(o.Set) != o.Set {
		errs = append(errs, fmt.Errorf("options.set: %q has spaces around it", o.Set))
	}
	if strings.ContainsAny(o.MetadataPrefix, " \t\r\n") {
		errs = append(errs, fmt.Errorf("options.metadataPrefix: %q is not a metadata prefix", o.MetadataPrefix))
	}
	switch o.Files {
	case "":
		s.files = FilesSignposting
	case FilesSignposting, FilesNone:
	default:
		errs = append(errs, fmt.Errorf("options.files: %q is not %s or %s", o.Files, FilesSignposting, FilesNone))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, upstream.OptionProblems("oaipmh", u, err)
	}
	return s, nil
}
