package datacite

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// attributes are a DOI's attributes in DataCite's REST API (Metadata Schema
// 4); empty ones are not sent, and a PUT leaves what it does not send as it
// was.
type attributes struct {
	DOI                string              `json:"doi,omitempty"`
	Event              string              `json:"event,omitempty"`
	URL                string              `json:"url,omitempty"`
	Creators           []creator           `json:"creators,omitempty"`
	Titles             []title             `json:"titles,omitempty"`
	Publisher          string              `json:"publisher,omitempty"`
	PublicationYear    int                 `json:"publicationYear,omitempty"`
	Types              *types              `json:"types,omitempty"`
	Identifiers        []identifier        `json:"identifiers,omitempty"`
	Formats            []string            `json:"formats,omitempty"`
	Sizes              []string            `json:"sizes,omitempty"`
	Dates              []date              `json:"dates,omitempty"`
	RelatedIdentifiers []relatedIdentifier `json:"relatedIdentifiers,omitempty"`
	SchemaVersion      string              `json:"schemaVersion,omitempty"`
}

type creator struct {
	Name            string           `json:"name"`
	NameType        string           `json:"nameType,omitempty"`
	NameIdentifiers []nameIdentifier `json:"nameIdentifiers,omitempty"`
}

type nameIdentifier struct {
	NameIdentifier       string `json:"nameIdentifier"`
	NameIdentifierScheme string `json:"nameIdentifierScheme"`
	SchemeURI            string `json:"schemeUri,omitempty"`
}

type title struct {
	Title string `json:"title"`
}

type types struct {
	ResourceTypeGeneral string `json:"resourceTypeGeneral"`
	ResourceType        string `json:"resourceType,omitempty"`
}

type identifier struct {
	Identifier     string `json:"identifier"`
	IdentifierType string `json:"identifierType"`
}

type date struct {
	Date     string `json:"date"`
	DateType string `json:"dateType"`
}

type relatedIdentifier struct {
	RelatedIdentifier     string `json:"relatedIdentifier"`
	RelatedIdentifierType string `json:"relatedIdentifierType"`
	RelationType          string `json:"relationType"`
}

// schemaVersion is the DataCite Metadata Schema the attributes follow.
const schemaVersion = "http://datacite.org/schema/kernel-4"

// attributes describe id (doi without its scheme) from md.
func (s *Service) attributes(id, doi string, md node.IDMetadata) attributes {
	sm := md.Meta
	year := sm.DateUploaded.Year()
	if sm.DateUploaded.IsZero() {
		year = time.Now().Year()
	}
	t := md.Title
	if t == "" {
		t = strings.TrimSpace(sm.FileName)
	}
	if t == "" {
		t = id
	}
	a := attributes{
		DOI:             doi,
		URL:             s.landingPage(id),
		Creators:        []creator{creatorOf(sm.RightsHolder)},
		Titles:          []title{{Title: t}},
		Publisher:       s.publisher,
		PublicationYear: year,
		Types:           typesOf(sm.FormatID),
		Identifiers:     []identifier{{Identifier: "https://doi.org/" + doi, IdentifierType: "DOI"}},
		Formats:         []string{sm.FormatID},
		Sizes:           []string{fmt.Sprintf("%d bytes", sm.Size)},
		SchemaVersion:   schemaVersion,
	}
	switch {
	case sm.SeriesID != "" && sm.SeriesID != id:
		a.Identifiers = append(a.Identifiers, identifier{Identifier: sm.SeriesID, IdentifierType: "DataONE series id"})
	case sm.SeriesID == id:
		a.Identifiers = append(a.Identifiers, identifier{Identifier: sm.Identifier, IdentifierType: "DataONE identifier"})
	}
	if !sm.DateUploaded.IsZero() {
		a.Dates = []date{{Date: sm.DateUploaded.UTC().Format("2006-01-02"), DateType: "Issued"}}
	}
	if sm.Obsoletes != "" {
		a.RelatedIdentifiers = append(a.RelatedIdentifiers, s.related(sm.Obsoletes, "IsNewVersionOf"))
	}
	if sm.ObsoletedBy != "" {
		a.RelatedIdentifiers = append(a.RelatedIdentifiers, s.related(sm.ObsoletedBy, "IsPreviousVersionOf"))
	}
	return a
}

// landingPage is the DOI's URL: the template with id percent-encoded.
func (s *Service) landingPage(id string) string {
	return strings.ReplaceAll(s.landing, "{pid}", url.PathEscape(id))
}

// related points at another version: by DOI when it is one, else by its
// landing page on this node.
func (s *Service) related(id, relation string) relatedIdentifier {
	if len(id) > 4 && strings.EqualFold(id[:4], "doi:") {
		return relatedIdentifier{RelatedIdentifier: id[4:], RelatedIdentifierType: "DOI", RelationType: relation}
	}
	return relatedIdentifier{RelatedIdentifier: s.landingPage(id), RelatedIdentifierType: "URL", RelationType: relation}
}

var orcidRE = regexp.MustCompile(`^https?://orcid\.org/([0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X])/?$`)

// creatorOf names the rights holder: an ORCID becomes a name identifier; a
// DN's common name is its name; anything else is used as it is.
func creatorOf(rightsHolder string) creator {
	rh := strings.TrimSpace(rightsHolder)
	if m := orcidRE.FindStringSubmatch(rh); m != nil {
		return creator{Name: m[1], NameType: "Personal", NameIdentifiers: []nameIdentifier{{
			NameIdentifier: "https://orcid.org/" + m[1], NameIdentifierScheme: "ORCID", SchemeURI: "https://orcid.org"}}}
	}
	if cn := commonName(rh); cn != "" {
		return creator{Name: cn}
	}
	return creator{Name: rh}
}

// commonName is the value of the first CN attribute of a DN (RFC 4514), with
// its escapes removed; "" when there is none.
func commonName(dn string) string {
	var rdn strings.Builder
	flush := func() string {
		s := strings.TrimSpace(rdn.String())
		rdn.Reset()
		if k, v, ok := strings.Cut(s, "="); ok && strings.EqualFold(strings.TrimSpace(k), "CN") {
			return strings.TrimSpace(v)
		}
		return ""
	}
	for i := 0; i < len(dn); i++ {
		switch c := dn[i]; {
		case c == '\\' && i+1 < len(dn):
			i++
			rdn.WriteByte(dn[i])
		case c == ',' || c == ';' || c == '+':
			if cn := flush(); cn != "" {
				return cn
			}
		default:
			rdn.WriteByte(c)
		}
	}
	return flush()
}

// formats is the official format list, for format types.
var formats = sync.OnceValue(adapter.OfficialFormats)

// typesOf is Dataset, or Collection for a resource map, with the DataONE
// format type as the resource type.
func typesOf(formatID string) *types {
	t := &types{ResourceTypeGeneral: "Dataset"}
	if f, ok := formats().Lookup(formatID); ok {
		switch f.FormatType {
		case "DATA":
			t.ResourceType = "Data"
		case "METADATA":
			t.ResourceType = "Metadata"
		case "RESOURCE":
			t.ResourceTypeGeneral, t.ResourceType = "Collection", "Resource map"
		}
	}
	return t
}
