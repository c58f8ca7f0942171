package datapackage

import (
	"path"
	"regexp"
	"strings"
	"time"
)

// Formats of sidecar files, which DataONE's format list does not name.
const (
	formatDataCite30 = "http://datacite.org/schema/kernel-3.0"
	formatDataCite4  = "http://datacite.org/schema/kernel-4"
	formatOneDCX     = "http://ns.dataone.org/metadata/schema/onedcx/v1.0"
	formatROCrate    = "ro-crate"
	formatBagInfo    = "bagit-info"
	roCrateName      = "ro-crate-metadata.json"
	bagInfoName      = "bag-info.txt"
)

// ReadFacts reads the facts a metadata document of formatID (or a sidecar:
// "ro-crate-metadata.json", "bag-info.txt") states. Unknown formats give no
// facts and no error; a document that is not what its format says (not
// well-formed, another root element) gives an error naming what is wrong.
func ReadFacts(formatID string, body []byte) (Facts, error) {
	switch {
	case formatID == FormatDataCite31 || formatID == formatDataCite30 || strings.HasPrefix(formatID, formatDataCite4):
		return readDataCite(body)
	case formatID == formatROCrate || path.Base(formatID) == roCrateName:
		return readROCrate(body)
	case formatID == formatBagInfo || path.Base(formatID) == bagInfoName:
		return readBagInfo(body)
	case formatID == FormatSchemaOrg:
		return readSchemaOrg(body)
	case formatID == FormatOAIDC || formatID == formatOneDCX:
		return readDublinCore(formatID, body)
	case isEML(formatID):
		return readEML(body)
	case isISO19139(formatID):
		return readISO19139(body)
	}
	return Facts{}, nil
}

func isEML(formatID string) bool {
	return strings.HasPrefix(formatID, "eml://ecoinformatics.org/eml-2.") ||
		strings.HasPrefix(formatID, "https://eml.ecoinformatics.org/eml-2.")
}

func isISO19139(formatID string) bool {
	return formatID == FormatISO19139 || strings.HasPrefix(formatID, FormatISO19139+"-")
}

// clean trims s; the writers treat what is left empty as unknown.
func clean(s string) string { return strings.TrimSpace(s) }

// firstNonBlank is the first of values that is not blank, trimmed.
func firstNonBlank(values ...string) string {
	for _, v := range values {
		if v = clean(v); v != "" {
			return v
		}
	}
	return ""
}

// nonBlank is values trimmed, without the blank ones, in their order.
func nonBlank(values []string) []string {
	var out []string
	for _, v := range values {
		if v = clean(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

var orcidPattern = regexp.MustCompile(`\b(\d{4}-\d{4}-\d{4}-\d{3}[\dX])\b`)

// orcidURL is the https://orcid.org/ URI of the ORCID iD within s (a bare iD,
// an orcid.org URL, "orcid:…"), or "" when s holds none.
func orcidURL(s string) string {
	m := orcidPattern.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return orcidDirectory + "/" + m[1]
}

// splitPersonName splits a person's whole name: "Surname, Given" at the
// comma, "Given Middle Surname" at the last space.
func splitPersonName(name string) (given, sur string) {
	name = clean(name)
	if sur, given, ok := strings.Cut(name, ","); ok {
		return clean(given), clean(sur)
	}
	if i := strings.LastIndexAny(name, " \t"); i > 0 {
		return clean(name[:i]), clean(name[i+1:])
	}
	return "", name
}

// person is a Party for a person: the name split when the source gave only
// the whole of it.
func person(whole, given, family string) Party {
	p := Party{Name: clean(whole), GivenName: clean(given), SurName: clean(family)}
	if p.GivenName == "" && p.SurName == "" && p.Name != "" {
		p.GivenName, p.SurName = splitPersonName(p.Name)
	}
	if p.Name == "" {
		p.Name = strings.TrimSpace(p.GivenName + " " + p.SurName)
	}
	return p
}

// dateLayouts are the forms of dates the documents use: a year, a month, a
// day, RFC 3339, and a date-time without a zone (read as UTC).
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05",
	"2006-01-02",
	"2006-01",
	"2006",
}

// parseDate reads s in one of dateLayouts; zero when it is none of them, as
// a date nobody can read is unknown rather than a broken document.
func parseDate(s string) time.Time {
	s = clean(s)
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// splitKeywords splits a keywords string at commas (and semicolons, which
// some repositories use).
func splitKeywords(s string) []string {
	return nonBlank(strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }))
}

// doiOf is the DOI within an identifier ("doi:10…", "https://doi.org/10…",
// "10…"), or "".
func doiOf(id string) string {
	id = clean(id)
	lower := strings.ToLower(id)
	for _, prefix := range []string{"doi:", "https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/"} {
		if strings.HasPrefix(lower, prefix) {
			id = id[len(prefix):]
			break
		}
	}
	if strings.HasPrefix(id, "10.") && strings.Contains(id, "/") {
		return id
	}
	return ""
}
