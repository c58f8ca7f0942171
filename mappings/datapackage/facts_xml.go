package datapackage

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Readers of the XML metadata formats: DataCite, Dublin Core (oai_dc and
// onedcx), EML and ISO 19139. Each reads what names and describes a dataset,
// not the whole document.

const (
	dcElementsNS = "http://purl.org/dc/elements/1.1/"
	dcTermsNS    = "http://purl.org/dc/terms/"
)

// newXMLDecoder reads body, in UTF-8 or ISO-8859-1, the encodings metadata
// documents come in.
func newXMLDecoder(body []byte) *xml.Decoder {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.CharsetReader = decodeCharset
	return d
}

func decodeCharset(label string, input io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "utf-8", "utf8", "us-ascii", "ascii":
		return input, nil
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1", "windows-1252", "cp1252":
		// Windows-1252 differs from Latin-1 only in 0x80-0x9F, which
		// metadata text rarely uses: read as Latin-1, they are still text.
		raw, err := io.ReadAll(input)
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, len(raw)+len(raw)/8)
		for _, c := range raw {
			out = utf8.AppendRune(out, rune(c))
		}
		return bytes.NewReader(out), nil
	}
	return nil, fmt.Errorf("unsupported encoding %q", label)
}

// unmarshalXML decodes body into v, naming the format in the error.
func unmarshalXML(format string, body []byte, v any) error {
	if err := newXMLDecoder(body).Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: the document is empty", format)
		}
		return fmt.Errorf("%s: not well-formed XML: %w", format, err)
	}
	return nil
}

func wrongRoot(format string, got xml.Name, want string) error {
	return fmt.Errorf("%s: the root element is <%s> in namespace %q, not %s", format, got.Local, got.Space, want)
}

// text is an element's character data.
type text struct {
	Value string `xml:",chardata"`
}

// ---- DataCite (kernel-3, kernel-4) ----

type dataciteResource struct {
	XMLName    xml.Name
	Identifier struct {
		Type  string `xml:"identifierType,attr"`
		Value string `xml:",chardata"`
	} `xml:"identifier"`
	Creators []dataciteParty `xml:"creators>creator"`
	Titles   []struct {
		Type  string `xml:"titleType,attr"`
		Value string `xml:",chardata"`
	} `xml:"titles>title"`
	Publisher       string          `xml:"publisher"`
	PublicationYear string          `xml:"publicationYear"`
	Subjects        []string        `xml:"subjects>subject"`
	Contributors    []dataciteParty `xml:"contributors>contributor"`
	Dates           []struct {
		Type  string `xml:"dateType,attr"`
		Value string `xml:",chardata"`
	} `xml:"dates>date"`
	Rights []struct {
		URI        string `xml:"rightsURI,attr"`
		Identifier string `xml:"rightsIdentifier,attr"`
		Value      string `xml:",chardata"`
	} `xml:"rightsList>rights"`
	Descriptions []struct {
		Type  string `xml:"descriptionType,attr"`
		Value string `xml:",chardata"`
	} `xml:"descriptions>description"`
}

// dataciteParty is a creator or a contributor.
type dataciteParty struct {
	Type     string       `xml:"contributorType,attr"`
	Name     dataciteName `xml:"creatorName"`
	ContName dataciteName `xml:"contributorName"`
	Given    string       `xml:"givenName"`
	Family   string       `xml:"familyName"`
	IDs      []struct {
		Scheme string `xml:"nameIdentifierScheme,attr"`
		Value  string `xml:",chardata"`
	} `xml:"nameIdentifier"`
	Affiliations []string `xml:"affiliation"`
}

// dataciteName is a creator's or contributor's name; kernel-4 says whether
// it is a person's ("Personal") or an organization's ("Organizational").
type dataciteName struct {
	Type  string `xml:"nameType,attr"`
	Value string `xml:",chardata"`
}

func (p dataciteParty) party() Party {
	whole := firstNonBlank(p.Name.Value, p.ContName.Value)
	nameType := firstNonBlank(p.Name.Type, p.ContName.Type)
	var out Party
	if strings.EqualFold(nameType, "Organizational") {
		out = Party{Organization: whole}
	} else {
		out = person(whole, p.Given, p.Family)
		if aff := nonBlank(p.Affiliations); len(aff) > 0 {
			out.Organization = aff[0]
		}
	}
	for _, id := range p.IDs {
		if strings.EqualFold(clean(id.Scheme), "ORCID") {
			out.ORCID = firstNonBlank(orcidURL(id.Value), id.Value)
			break
		}
	}
	return out
}

func readDataCite(body []byte) (Facts, error) {
	const format = "DataCite"
	var r dataciteResource
	if err := unmarshalXML(format, body, &r); err != nil {
		return Facts{}, err
	}
	if r.XMLName.Local != "resource" || !strings.HasPrefix(r.XMLName.Space, "http://datacite.org/schema/kernel-") {
		return Facts{}, wrongRoot(format, r.XMLName, "<resource> of a DataCite kernel")
	}

	var f Facts
	for _, t := range r.Titles {
		// The main title has no titleType; the others are subtitles,
		// translations and alternatives.
		if clean(t.Type) == "" && clean(t.Value) != "" {
			f.Title = clean(t.Value)
			break
		}
	}
	if f.Title == "" && len(r.Titles) > 0 {
		f.Title = clean(r.Titles[0].Value)
	}
	for _, c := range r.Creators {
		if p := c.party(); isNameable(p) {
			f.Creators = append(f.Creators, p)
		}
	}
	for _, c := range r.Contributors {
		if c.Type == "ContactPerson" {
			if p := c.party(); isNameable(p) {
				f.Contact = &p
				break
			}
		}
	}
	f.Publisher = clean(r.Publisher)
	f.Keywords = nonBlank(r.Subjects)
	for _, d := range r.Descriptions {
		if d.Type == "Abstract" && clean(d.Value) != "" {
			f.Abstract = clean(d.Value)
			break
		}
	}
	for _, rights := range r.Rights {
		// info:eu-repo rights say open or closed access, not a license.
		if strings.HasPrefix(clean(rights.URI), "info:eu-repo") {
			continue
		}
		if name := firstNonBlank(rights.Value, rights.Identifier, rights.URI); name != "" {
			f.License = name
			if isURL(clean(rights.URI)) {
				f.LicenseURL = clean(rights.URI)
			}
			break
		}
	}
	for _, d := range r.Dates {
		// A date may be a range "start/end": its start is the date.
		start, _, _ := strings.Cut(d.Value, "/")
		switch d.Type {
		case "Issued":
			if f.Published.IsZero() {
				f.Published = parseDate(start)
			}
		case "Updated":
			if f.Modified.IsZero() {
				f.Modified = parseDate(start)
			}
		}
	}
	if f.Published.IsZero() {
		f.Published = parseDate(r.PublicationYear)
	}
	id := clean(r.Identifier.Value)
	if doi := doiOf(id); strings.EqualFold(r.Identifier.Type, "DOI") && doi != "" {
		f.Identifier = "doi:" + doi
		f.Landing = "https://doi.org/" + doi
	} else {
		f.Identifier = id
		if isURL(id) {
			f.Landing = id
		}
	}
	return f, nil
}

// ---- Dublin Core: oai_dc and DataONE's onedcx ----

func readDublinCore(formatID string, body []byte) (Facts, error) {
	format, wantSpace, wantLocal := "oai_dc", FormatOAIDC, "dc"
	if formatID == formatOneDCX {
		format, wantSpace, wantLocal = "onedcx", formatOneDCX, ""
	}
	d := newXMLDecoder(body)
	var f Facts
	var identifiers []string
	sawRoot := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Facts{}, fmt.Errorf("%s: not well-formed XML: %w", format, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if !sawRoot {
			sawRoot = true
			if se.Name.Space != wantSpace || (wantLocal != "" && se.Name.Local != wantLocal) {
				return Facts{}, wrongRoot(format, se.Name, "the "+format+" root in "+wantSpace)
			}
			continue
		}
		if se.Name.Space != dcElementsNS && se.Name.Space != dcTermsNS {
			continue
		}
		var t text
		if err := d.DecodeElement(&t, &se); err != nil {
			return Facts{}, fmt.Errorf("%s: not well-formed XML: %w", format, err)
		}
		v := clean(t.Value)
		if v == "" {
			continue
		}
		switch se.Name.Local {
		case "title":
			if f.Title == "" {
				f.Title = v
			}
		case "creator":
			if strings.Contains(v, ",") {
				f.Creators = append(f.Creators, person(v, "", ""))
			} else {
				// Without "Surname, Given" nothing tells a person from an
				// organization: the writers decide on the whole name.
				f.Creators = append(f.Creators, Party{Name: v})
			}
		case "subject":
			f.Keywords = append(f.Keywords, v)
		case "description", "abstract":
			if f.Abstract == "" {
				f.Abstract = v
			}
		case "rights", "license":
			if f.License == "" {
				f.License = v
				if isURL(v) {
					f.LicenseURL = v
				}
			}
		case "date", "issued":
			if f.Published.IsZero() {
				f.Published = parseDate(v)
			}
		case "modified":
			if f.Modified.IsZero() {
				f.Modified = parseDate(v)
			}
		case "identifier":
			identifiers = append(identifiers, v)
		case "publisher":
			if f.Publisher == "" {
				f.Publisher = v
			}
		}
	}
	if !sawRoot {
		return Facts{}, fmt.Errorf("%s: the document has no root element", format)
	}
	f.Identifier, f.Landing = pickIdentifiers(identifiers)
	return f, nil
}

// pickIdentifiers chooses, of a record's identifiers, the dataset's own (a
// DOI first, as "doi:…") and its landing page (the first other URL).
func pickIdentifiers(ids []string) (identifier, landing string) {
	for _, id := range ids {
		if doi := doiOf(id); doi != "" {
			identifier = "doi:" + doi
			break
		}
	}
	for _, id := range ids {
		if isURL(id) && doiOf(id) == "" {
			landing = id
			break
		}
	}
	if identifier == "" && len(ids) > 0 {
		identifier = ids[0]
	}
	return identifier, landing
}

// ---- EML 2.x ----

type emlDocument struct {
	XMLName xml.Name
	Dataset struct {
		AlternateIdentifiers []string   `xml:"alternateIdentifier"`
		Titles               []string   `xml:"title"`
		Creators             []emlParty `xml:"creator"`
		PubDate              string     `xml:"pubDate"`
		Abstract             emlText    `xml:"abstract"`
		KeywordSets          []struct {
			Keywords []string `xml:"keyword"`
		} `xml:"keywordSet"`
		Rights   emlText `xml:"intellectualRights"`
		Licensed []struct {
			Name string `xml:"licenseName"`
			URL  string `xml:"url"`
		} `xml:"licensed"`
		Distributions []struct {
			URL string `xml:"online>url"`
		} `xml:"distribution"`
		Contacts   []emlParty `xml:"contact"`
		Publishers []emlParty `xml:"publisher"`
	} `xml:"dataset"`
}

type emlParty struct {
	Individuals []struct {
		Given []string `xml:"givenName"`
		Sur   string   `xml:"surName"`
	} `xml:"individualName"`
	Organizations []string `xml:"organizationName"`
	Emails        []string `xml:"electronicMailAddress"`
	UserIDs       []struct {
		Directory string `xml:"directory,attr"`
		Value     string `xml:",chardata"`
	} `xml:"userId"`
}

func (p emlParty) party() Party {
	var out Party
	if len(p.Individuals) > 0 {
		i := p.Individuals[0]
		out = person("", strings.Join(nonBlank(i.Given), " "), i.Sur)
	}
	if orgs := nonBlank(p.Organizations); len(orgs) > 0 {
		out.Organization = orgs[0]
	}
	if emails := nonBlank(p.Emails); len(emails) > 0 {
		out.Email = emails[0]
	}
	for _, id := range p.UserIDs {
		if o := orcidURL(id.Value); o != "" && (strings.Contains(id.Directory, "orcid") || strings.Contains(id.Value, "orcid")) {
			out.ORCID = o
			break
		}
	}
	return out
}

// emlText is an EML TextType: paragraphs (para, markdown, section titles),
// each with its whitespace collapsed, separated by blank lines.
type emlText struct{ Text string }

func (t *emlText) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	var paras []string
	var cur strings.Builder
	flush := func() {
		if p := strings.Join(strings.Fields(cur.String()), " "); p != "" {
			paras = append(paras, p)
		}
		cur.Reset()
	}
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			if tok.Name.Local == "para" || tok.Name.Local == "markdown" || tok.Name.Local == "title" {
				flush()
			}
		case xml.EndElement:
			depth--
			if tok.Name.Local == "para" || tok.Name.Local == "markdown" || tok.Name.Local == "title" {
				flush()
			}
		case xml.CharData:
			cur.Write(tok)
		}
	}
	flush()
	t.Text = strings.Join(paras, "\n\n")
	return nil
}

func readEML(body []byte) (Facts, error) {
	const format = "EML"
	var doc emlDocument
	if err := unmarshalXML(format, body, &doc); err != nil {
		return Facts{}, err
	}
	if doc.XMLName.Local != "eml" || !isEML(doc.XMLName.Space) {
		return Facts{}, wrongRoot(format, doc.XMLName, "<eml> of EML 2.x")
	}
	ds := doc.Dataset
	f := Facts{
		Abstract:  ds.Abstract.Text,
		Published: parseDate(ds.PubDate),
		License:   ds.Rights.Text,
	}
	if titles := nonBlank(ds.Titles); len(titles) > 0 {
		f.Title = strings.Join(strings.Fields(titles[0]), " ")
	}
	for _, c := range ds.Creators {
		if p := c.party(); isNameable(p) {
			f.Creators = append(f.Creators, p)
		}
	}
	for _, c := range ds.Contacts {
		if p := c.party(); isNameable(p) {
			f.Contact = &p
			break
		}
	}
	for _, p := range ds.Publishers {
		if party := p.party(); isNameable(party) {
			f.Publisher = firstNonBlank(party.Organization, party.Name)
			break
		}
	}
	for _, set := range ds.KeywordSets {
		f.Keywords = append(f.Keywords, nonBlank(set.Keywords)...)
	}
	for _, l := range ds.Licensed {
		if u := clean(l.URL); u != "" {
			f.LicenseURL = u
			f.License = firstNonBlank(l.Name, f.License)
			break
		}
	}
	if f.License == "" && len(ds.Licensed) > 0 {
		f.License = clean(ds.Licensed[0].Name)
	}
	f.Identifier, _ = pickIdentifiers(nonBlank(ds.AlternateIdentifiers))
	for _, d := range ds.Distributions {
		if u := clean(d.URL); u != "" {
			f.Landing = u
			break
		}
	}
	return f, nil
}

// ---- ISO 19115 as ISO 19139 XML (gmd) ----

// isoParty is a CI_ResponsibleParty being read.
type isoParty struct {
	individual, organisation, email, role string
}

func (p isoParty) party() Party {
	var out Party
	if p.individual != "" {
		out = person(p.individual, "", "")
	}
	out.Organization = p.organisation
	out.Email = p.email
	return out
}

// creatorRoles are the CI_RoleCode values of a dataset's creators.
var creatorRoles = map[string]bool{"author": true, "originator": true, "principalInvestigator": true, "coAuthor": true}

func readISO19139(body []byte) (Facts, error) {
	const format = "ISO 19139"
	d := newXMLDecoder(body)
	var (
		f        Facts
		stack    []string // local names of the open elements
		parties  []*isoParty
		date     string // the CI_Date being read
		dateType string
		created  string
		sawRoot  bool
	)
	within := func(name string) bool {
		for _, s := range stack {
			if s == name {
				return true
			}
		}
		return false
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Facts{}, fmt.Errorf("%s: not well-formed XML: %w", format, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 && (tok.Name.Local != "MD_Metadata" && tok.Name.Local != "MI_Metadata" ||
				!strings.HasPrefix(tok.Name.Space, "http://www.isotc211.org/2005/")) {
				return Facts{}, wrongRoot(format, tok.Name, "<gmd:MD_Metadata>")
			}
			sawRoot = true
			stack = append(stack, tok.Name.Local)
			switch tok.Name.Local {
			case "CI_ResponsibleParty":
				parties = append(parties, &isoParty{})
			case "CI_RoleCode":
				if len(parties) > 0 {
					parties[len(parties)-1].role = attr(tok, "codeListValue")
				}
			case "CI_DateTypeCode":
				dateType = attr(tok, "codeListValue")
			case "CI_Date":
				date, dateType = "", ""
			}
		case xml.EndElement:
			if len(stack) == 0 {
				continue
			}
			stack = stack[:len(stack)-1]
			switch tok.Name.Local {
			case "CI_ResponsibleParty":
				p := parties[len(parties)-1]
				parties = parties[:len(parties)-1]
				if within("identificationInfo") {
					applyISOParty(&f, *p, within("citation"))
				}
			case "CI_Date":
				if within("identificationInfo") && within("citation") && !within("thesaurusName") {
					switch dateType {
					case "publication":
						if f.Published.IsZero() {
							f.Published = parseDate(date)
						}
					case "revision":
						if f.Modified.IsZero() {
							f.Modified = parseDate(date)
						}
					case "creation":
						if created == "" {
							created = date
						}
					}
				}
			}
		case xml.CharData:
			if len(stack) < 2 || !within("identificationInfo") {
				continue
			}
			v := clean(string(tok))
			if v == "" {
				continue
			}
			leaf, property := stack[len(stack)-1], stack[len(stack)-2]
			if leaf == "Date" || leaf == "DateTime" {
				date = v
				continue
			}
			if leaf != "CharacterString" && leaf != "Anchor" {
				continue
			}
			inCitation := within("citation") && !within("thesaurusName")
			switch {
			case property == "title" && inCitation && f.Title == "":
				f.Title = v
			case property == "abstract" && f.Abstract == "":
				f.Abstract = v
			case property == "keyword":
				f.Keywords = append(f.Keywords, v)
			case property == "code" && inCitation && within("identifier") && f.Identifier == "":
				f.Identifier = v
			case len(parties) > 0:
				p := parties[len(parties)-1]
				switch property {
				case "individualName":
					p.individual = v
				case "organisationName":
					p.organisation = v
				case "electronicMailAddress":
					if p.email == "" {
						p.email = v
					}
				}
			}
		}
	}
	if !sawRoot {
		return Facts{}, fmt.Errorf("%s: the document has no root element", format)
	}
	if len(stack) > 0 {
		return Facts{}, fmt.Errorf("%s: the document ends inside <%s>", format, strings.Join(stack, "/"))
	}
	if f.Published.IsZero() {
		f.Published = parseDate(created)
	}
	if doi := doiOf(f.Identifier); doi != "" {
		f.Identifier = "doi:" + doi
	}
	return f, nil
}

// applyISOParty files a responsible party of the identification by its role.
func applyISOParty(f *Facts, p isoParty, cited bool) {
	party := p.party()
	if !isNameable(party) {
		return
	}
	switch {
	case cited && creatorRoles[p.role]:
		f.Creators = append(f.Creators, party)
	case p.role == "publisher" && f.Publisher == "":
		f.Publisher = firstNonBlank(party.Organization, party.Name)
	case p.role == "pointOfContact" && f.Contact == nil:
		f.Contact = &party
	}
}

func attr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return clean(a.Value)
		}
	}
	return ""
}
