package datapackage

import (
	"bytes"
	"encoding/xml"
	"regexp"
	"strconv"
	"strings"
)

const (
	emlNamespace = "https://eml.ecoinformatics.org/eml-2.2.0"
	xsiNamespace = "http://www.w3.org/2001/XMLSchema-instance"
	// orcidDirectory is the userId directory DataONE's EML uses for ORCIDs.
	orcidDirectory = "https://orcid.org"
	// unknownParty names the creator and contact when nothing is known of
	// them: EML requires both.
	unknownParty = "Unknown"
	// unknownFormat is the formatName of an entity whose format is unknown:
	// EML requires one.
	unknownFormat = "application/octet-stream"
)

// EML is an EML 2.2.0 document packageId pid for a dataset with facts f and
// data objects entities, valid against the EML 2.2.0 schema. Deterministic:
// it writes the facts and entities in the caller's order and reads no clock.
func EML(pid string, f Facts, entities []Entity) []byte {
	w := &emlWriter{}
	w.b.WriteString(xml.Header)
	w.open("eml:eml",
		"xmlns:eml", emlNamespace,
		"xmlns:xsi", xsiNamespace,
		"xsi:schemaLocation", emlNamespace+" "+emlNamespace+"/eml.xsd",
		"packageId", pid,
		"system", "d1bridge")
	w.open("dataset")

	// The element order below is the XSD's sequence (ResourceGroup, then
	// DatasetType): any other order does not validate.
	w.leaf("alternateIdentifier", f.Identifier)
	w.leaf("title", firstNonBlank(f.Title, f.Identifier, pid, "Untitled dataset"))

	creators := nameable(f.Creators)
	if len(creators) == 0 {
		creators = []Party{fallbackParty(f)}
	}
	for _, c := range creators {
		w.party("creator", c)
	}
	if y := f.Published.Year(); !f.Published.IsZero() && y >= 1 && y <= 9999 {
		// The date as stated, in its own zone: converting to UTC could move
		// it to the day before.
		w.leaf("pubDate", f.Published.Format("2006-01-02"))
	}
	if paras := paragraphs(f.Abstract); len(paras) > 0 {
		w.open("abstract")
		for _, p := range paras {
			w.leaf("para", p)
		}
		w.close("abstract")
	}
	if kws := nonBlank(f.Keywords); len(kws) > 0 {
		w.open("keywordSet")
		for _, k := range kws {
			w.leaf("keyword", k)
		}
		w.close("keywordSet")
	}
	license, licenseURL := clean(f.License), clean(f.LicenseURL)
	if licenseURL == "" && isURL(license) {
		licenseURL = license
	}
	if rights := firstNonBlank(license, licenseURL); rights != "" {
		w.open("intellectualRights")
		w.leaf("para", rights)
		w.close("intellectualRights")
	}
	if licenseURL != "" {
		w.open("licensed")
		w.leaf("licenseName", firstNonBlank(license, licenseURL))
		w.leaf("url", licenseURL)
		w.close("licensed")
	}
	if landing := clean(f.Landing); landing != "" {
		w.open("distribution")
		w.open("online")
		w.leaf("url", landing, "function", "information")
		w.close("online")
		w.close("distribution")
	}

	contact := creators[0]
	if f.Contact != nil && isNameable(*f.Contact) {
		contact = *f.Contact
	}
	w.party("contact", contact)
	if publisher := clean(f.Publisher); publisher != "" {
		w.party("publisher", Party{Organization: publisher})
	}

	ids := map[string]bool{}
	for _, e := range entities {
		w.entity(e, ids)
	}

	w.close("dataset")
	w.close("eml:eml")
	return w.b.Bytes()
}

// entity writes e as an otherEntity. ids holds the entity ids written so far:
// EML requires them unique, so a repeated PID gets no id.
func (w *emlWriter) entity(e Entity, ids map[string]bool) {
	var attrs []string
	if pid := clean(e.PID); pid != "" && !ids[pid] {
		ids[pid] = true
		attrs = []string{"id", pid}
	}
	name := firstNonBlank(e.Name, e.PID, "data file")
	format := clean(e.FormatID)

	w.open("otherEntity", attrs...)
	w.leaf("entityName", name)
	w.open("physical")
	w.leaf("objectName", name)
	if e.Size >= 0 {
		w.leaf("size", strconv.FormatInt(e.Size, 10), "unit", "byte")
	}
	if v := clean(e.Checksum.Value); v != "" {
		if alg := clean(e.Checksum.Algorithm); alg != "" {
			w.leaf("authentication", v, "method", alg)
		} else {
			w.leaf("authentication", v)
		}
	}
	w.open("dataFormat")
	w.open("externallyDefinedFormat")
	w.leaf("formatName", firstNonBlank(format, unknownFormat))
	w.close("externallyDefinedFormat")
	w.close("dataFormat")
	if u := clean(e.URL); u != "" {
		w.open("distribution")
		w.open("online")
		w.leaf("url", u, "function", "download")
		w.close("online")
		w.close("distribution")
	}
	w.close("physical")
	w.leaf("entityType", firstNonBlank(format, "data file"))
	w.close("otherEntity")
}

// party writes p as an EML ResponsibleParty element tag. p must be nameable.
func (w *emlWriter) party(tag string, p Party) {
	given, sur := clean(p.GivenName), clean(p.SurName)
	name, org := clean(p.Name), clean(p.Organization)
	if given == "" && sur == "" && name != "" {
		switch {
		case org != "":
			// Name beside an organization is the person's.
			sur = name
		case looksLikePerson(p):
			given, sur = splitPersonName(name)
		default:
			org = name
		}
	}
	if sur == "" {
		// EML requires a surName: a lone given name stands in for it.
		given, sur = "", given
	}

	w.open(tag)
	if sur != "" {
		w.open("individualName")
		w.leaf("givenName", given)
		w.leaf("surName", sur)
		w.close("individualName")
	}
	w.leaf("organizationName", org)
	w.leaf("electronicMailAddress", p.Email)
	if orcid := clean(p.ORCID); orcid != "" {
		w.leaf("userId", firstNonBlank(orcidURL(orcid), orcid), "directory", orcidDirectory)
	}
	w.close(tag)
}

// looksLikePerson tells whether a party known only by a whole name is a
// person: only people have ORCIDs, and "Surname, Given" is a person's name.
func looksLikePerson(p Party) bool {
	return clean(p.ORCID) != "" || strings.Contains(p.Name, ",")
}

// fallbackParty stands for the creator and contact when the facts name none.
func fallbackParty(f Facts) Party {
	return Party{Organization: firstNonBlank(f.Publisher, unknownParty)}
}

// isNameable tells whether EML can name p: a ResponsibleParty needs a person's
// or an organization's name.
func isNameable(p Party) bool {
	return clean(p.GivenName) != "" || clean(p.SurName) != "" || clean(p.Name) != "" || clean(p.Organization) != ""
}

func nameable(parties []Party) []Party {
	var out []Party
	for _, p := range parties {
		if isNameable(p) {
			out = append(out, p)
		}
	}
	return out
}

var blankLines = regexp.MustCompile(`\n[ \t\r]*\n`)

// paragraphs splits text at blank lines into the paragraphs of an EML text.
func paragraphs(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	return nonBlank(blankLines.Split(text, -1))
}

// emlWriter writes indented XML. Every text goes through xml.EscapeText,
// which also replaces characters XML cannot hold.
type emlWriter struct {
	b     bytes.Buffer
	depth int
}

func (w *emlWriter) indent() {
	for range w.depth {
		w.b.WriteString("  ")
	}
}

// startTag writes <tag attrs...> (attrs are name, value pairs).
func (w *emlWriter) startTag(tag string, attrs []string) {
	w.indent()
	w.b.WriteString("<" + tag)
	for i := 0; i+1 < len(attrs); i += 2 {
		w.b.WriteString(" " + attrs[i] + `="`)
		xml.EscapeText(&w.b, []byte(attrs[i+1]))
		w.b.WriteString(`"`)
	}
	w.b.WriteString(">")
}

func (w *emlWriter) open(tag string, attrs ...string) {
	w.startTag(tag, attrs)
	w.b.WriteString("\n")
	w.depth++
}

func (w *emlWriter) close(tag string) {
	w.depth--
	w.indent()
	w.b.WriteString("</" + tag + ">\n")
}

// leaf writes <tag attrs...>text</tag>, or nothing when text is blank: EML's
// strings must not be empty.
func (w *emlWriter) leaf(tag, text string, attrs ...string) {
	text = clean(text)
	if text == "" {
		return
	}
	w.startTag(tag, attrs)
	xml.EscapeText(&w.b, []byte(text))
	w.b.WriteString("</" + tag + ">\n")
}
