package datapackage

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// emlSchema is the official EML 2.2.0 schema (NCEAS/eml, tag
// RELEASE_EML_2_2_0), kept in testdata so validation runs offline.
const emlSchema = "testdata/eml-2.2.0/eml.xsd"

// validateEML fails the test unless doc validates against the EML 2.2.0
// schema. A machine without xmllint fails the test: it is never skipped.
func validateEML(t *testing.T, doc []byte) {
	t.Helper()
	if err := emlSchemaError(t, doc); err != nil {
		t.Errorf("%v\ndocument:\n%s", err, doc)
	}
}

// emlSchemaError is xmllint's complaint about doc, nil when it validates.
func emlSchemaError(t *testing.T, doc []byte) error {
	t.Helper()
	bin, err := exec.LookPath("xmllint")
	if err != nil {
		t.Fatalf("xmllint is not on PATH (%v): install libxml2-utils (the project's .ci/test does)", err)
	}
	cmd := exec.Command(bin, "--nonet", "--noout", "--schema", emlSchema, "-")
	cmd.Stdin = bytes.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("running xmllint: %v", err)
		}
		if exit.ExitCode() == 5 {
			t.Fatalf("the schema %s does not compile:\n%s", emlSchema, stderr.String())
		}
		return fmt.Errorf("EML does not validate against %s (xmllint exit %d):\n%s", emlSchema, exit.ExitCode(), stderr.String())
	}
	return nil
}

// TestEMLSchemaRejects shows the validation can fail: the schema's element
// order is enforced.
func TestEMLSchemaRejects(t *testing.T) {
	doc := EML("p", Facts{Title: "t"}, nil)
	swapped := bytes.Replace(doc, []byte("<title>t</title>"), nil, 1)
	swapped = bytes.Replace(swapped, []byte("</dataset>"), []byte("<title>t</title></dataset>"), 1)
	if emlSchemaError(t, swapped) == nil {
		t.Errorf("a title after the contact validated:\n%s", swapped)
	}
}

func fullFacts() Facts {
	contact := Party{GivenName: "Ann", SurName: "Lee", Email: "ann.lee@example.org"}
	return Facts{
		Title:    "Soil respiration, Andes transect 2018–2020",
		Abstract: "First paragraph of the abstract.\n\nSecond paragraph,\nwrapped.",
		Creators: []Party{
			{GivenName: "María José", SurName: "García", Email: "mj@example.org", ORCID: "0000-0002-1825-0097", Organization: "Universidad de Chile"},
			{Organization: "LTER Network"},
			{Name: "Smith, John"},
			{Name: "Jane Q. Public", ORCID: "https://orcid.org/0000-0001-5109-3700"},
			{Name: "Some Institute"},
			{Email: "nobody-named@example.org"}, // nameless: left out
		},
		Contact:    &contact,
		Publisher:  "Dryad",
		Keywords:   []string{"soil", "  ", "carbon cycle"},
		License:    "CC0 1.0",
		LicenseURL: "https://creativecommons.org/publicdomain/zero/1.0/",
		Published:  time.Date(2021, 3, 15, 0, 0, 0, 0, time.UTC),
		Modified:   time.Date(2022, 1, 10, 8, 30, 0, 0, time.UTC),
		Identifier: "doi:10.5061/dryad.abc123",
		Landing:    "https://datadryad.org/stash/dataset/doi:10.5061/dryad.abc123",
	}
}

func sampleEntities(n int) []Entity {
	var es []Entity
	algs := []string{"SHA-256", "MD5", "SHA-1"}
	for i := range n {
		es = append(es, Entity{
			PID:      fmt.Sprintf("urn:uuid:0000-%04d", i),
			Name:     fmt.Sprintf("data/part-%04d.csv", i),
			Size:     int64(i * 1000),
			Checksum: adapter.Checksum{Algorithm: algs[i%len(algs)], Value: fmt.Sprintf("%032x", i)},
			FormatID: "text/csv",
			URL:      fmt.Sprintf("https://repo.example.org/files/%d?download=1&v=2", i),
		})
	}
	return es
}

func TestEMLValidates(t *testing.T) {
	weird := "Tom & Jerry <script>\"quoted\" 'single' ]]> \u00e9\u4e2d\U0001F600 \x01 ctrl"
	cases := map[string]struct {
		pid      string
		facts    Facts
		entities []Entity
	}{
		"full facts":    {"doi:10.5061/dryad.abc123", fullFacts(), sampleEntities(3)},
		"nothing known": {"urn:uuid:empty", Facts{}, nil},
		"only blanks": {"p", Facts{Title: "  ", Creators: []Party{{}}, Keywords: []string{"", " "}, Contact: &Party{}},
			[]Entity{{}}},
		"publisher but no creator": {"p2", Facts{Publisher: "Arctic Data Center", License: "https://creativecommons.org/licenses/by/4.0/"}, nil},
		"special characters": {weird, Facts{
			Title:      weird,
			Abstract:   weird + "\n\n" + weird,
			Creators:   []Party{{GivenName: weird, SurName: weird, Email: weird, ORCID: weird}, {Organization: weird}},
			Contact:    &Party{Name: weird},
			Publisher:  weird,
			Keywords:   []string{weird},
			License:    weird,
			LicenseURL: "https://example.org/license?a=1&b=2",
			Identifier: weird,
			Landing:    "https://example.org/landing?a=1&b=<2>",
		}, []Entity{{PID: weird, Name: weird, Size: 1, Checksum: adapter.Checksum{Algorithm: weird, Value: weird}, FormatID: weird, URL: "https://example.org/x?a=1&b=2"}}},
		"many entities":           {"many", fullFacts(), sampleEntities(500)},
		"duplicate entity pids":   {"dup", Facts{Title: "t"}, append(sampleEntities(2), sampleEntities(2)...)},
		"year-only and far dates": {"dates", Facts{Title: "t", Published: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1)}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			doc := EML(c.pid, c.facts, c.entities)
			validateEML(t, doc)
			if again := EML(c.pid, c.facts, c.entities); !bytes.Equal(doc, again) {
				t.Errorf("two calls gave different documents")
			}
		})
	}
}

// emlOut is the part of the generated EML the tests look at.
type emlOut struct {
	XMLName   xml.Name
	PackageID string `xml:"packageId,attr"`
	System    string `xml:"system,attr"`
	Dataset   struct {
		AltID    []string `xml:"alternateIdentifier"`
		Title    string   `xml:"title"`
		Creators []struct {
			Given  string   `xml:"individualName>givenName"`
			Sur    string   `xml:"individualName>surName"`
			Org    []string `xml:"organizationName"`
			Email  string   `xml:"electronicMailAddress"`
			UserID struct {
				Directory string `xml:"directory,attr"`
				Value     string `xml:",chardata"`
			} `xml:"userId"`
		} `xml:"creator"`
		PubDate   string   `xml:"pubDate"`
		Paras     []string `xml:"abstract>para"`
		Keywords  []string `xml:"keywordSet>keyword"`
		Rights    string   `xml:"intellectualRights>para"`
		License   string   `xml:"licensed>licenseName"`
		LicURL    string   `xml:"licensed>url"`
		Landing   string   `xml:"distribution>online>url"`
		ContactSN string   `xml:"contact>individualName>surName"`
		ContactOr string   `xml:"contact>organizationName"`
		Publisher string   `xml:"publisher>organizationName"`
		Entities  []struct {
			ID     string `xml:"id,attr"`
			Name   string `xml:"entityName"`
			Object string `xml:"physical>objectName"`
			Size   string `xml:"physical>size"`
			Auth   struct {
				Method string `xml:"method,attr"`
				Value  string `xml:",chardata"`
			} `xml:"physical>authentication"`
			Format string `xml:"physical>dataFormat>externallyDefinedFormat>formatName"`
			URL    string `xml:"physical>distribution>online>url"`
			Type   string `xml:"entityType"`
		} `xml:"otherEntity"`
	} `xml:"dataset"`
}

func parseEML(t *testing.T, doc []byte) emlOut {
	t.Helper()
	var out emlOut
	if err := xml.Unmarshal(doc, &out); err != nil {
		t.Fatalf("generated EML does not parse: %v\n%s", err, doc)
	}
	return out
}

func TestEMLContent(t *testing.T) {
	f := fullFacts()
	es := sampleEntities(2)
	es[1].URL = ""
	es[1].FormatID = ""
	doc := parseEML(t, EML("pkg-1", f, es))
	ds := doc.Dataset

	if doc.XMLName.Space != emlNamespace || doc.PackageID != "pkg-1" || doc.System != "d1bridge" {
		t.Errorf("root %v packageId %q system %q", doc.XMLName, doc.PackageID, doc.System)
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %q, want %q", what, got, want)
		}
	}
	check("title", ds.Title, f.Title)
	check("alternateIdentifier", strings.Join(ds.AltID, ","), f.Identifier)
	check("pubDate", ds.PubDate, "2021-03-15")
	check("abstract", strings.Join(ds.Paras, "|"), "First paragraph of the abstract.|Second paragraph,\nwrapped.")
	check("keywords", strings.Join(ds.Keywords, "|"), "soil|carbon cycle")
	check("intellectualRights", ds.Rights, "CC0 1.0")
	check("licenseName", ds.License, "CC0 1.0")
	check("license url", ds.LicURL, f.LicenseURL)
	check("landing", ds.Landing, f.Landing)
	check("contact", ds.ContactSN, "Lee")
	check("publisher", ds.Publisher, "Dryad")

	if len(ds.Creators) != 5 {
		t.Fatalf("%d creators, want 5 (the nameless one left out)", len(ds.Creators))
	}
	c0 := ds.Creators[0]
	check("creator 0 given", c0.Given, "María José")
	check("creator 0 sur", c0.Sur, "García")
	check("creator 0 org", strings.Join(c0.Org, ","), "Universidad de Chile")
	check("creator 0 orcid", c0.UserID.Value, "https://orcid.org/0000-0002-1825-0097")
	check("creator 0 orcid directory", c0.UserID.Directory, "https://orcid.org")
	check("creator 1 org", strings.Join(ds.Creators[1].Org, ","), "LTER Network")
	check("creator 2 (Surname, Given)", ds.Creators[2].Given+"/"+ds.Creators[2].Sur, "John/Smith")
	check("creator 3 (person by ORCID)", ds.Creators[3].Given+"/"+ds.Creators[3].Sur, "Jane Q./Public")
	check("creator 4 (bare name)", strings.Join(ds.Creators[4].Org, ","), "Some Institute")

	if len(ds.Entities) != 2 {
		t.Fatalf("%d entities, want 2", len(ds.Entities))
	}
	e0, e1 := ds.Entities[0], ds.Entities[1]
	check("entity id", e0.ID, es[0].PID)
	check("entityName", e0.Name, es[0].Name)
	check("objectName", e0.Object, es[0].Name)
	check("size", e1.Size, "1000")
	check("authentication method", e0.Auth.Method, "SHA-256")
	check("authentication", e0.Auth.Value, es[0].Checksum.Value)
	check("formatName", e0.Format, "text/csv")
	check("entity url", e0.URL, es[0].URL)
	check("entityType", e0.Type, "text/csv")
	check("unknown format", e1.Format, "application/octet-stream")
	check("unknown entityType", e1.Type, "data file")
	check("no url", e1.URL, "")
}

func TestEMLFallbacks(t *testing.T) {
	t.Run("nothing known", func(t *testing.T) {
		ds := parseEML(t, EML("urn:uuid:1", Facts{}, nil)).Dataset
		if ds.Title != "urn:uuid:1" {
			t.Errorf("title %q, want the pid", ds.Title)
		}
		if len(ds.Creators) != 1 || strings.Join(ds.Creators[0].Org, "") != "Unknown" || ds.ContactOr != "Unknown" {
			t.Errorf("creator %+v contact %q, want organization Unknown", ds.Creators, ds.ContactOr)
		}
		if ds.PubDate != "" || ds.Publisher != "" || ds.License != "" || len(ds.AltID) != 0 {
			t.Errorf("unknown facts written: %+v", ds)
		}
	})
	t.Run("identifier titles, publisher creates", func(t *testing.T) {
		ds := parseEML(t, EML("p", Facts{Identifier: "doi:10.1/x", Publisher: "Arctic Data Center"}, nil)).Dataset
		if ds.Title != "doi:10.1/x" {
			t.Errorf("title %q, want the identifier", ds.Title)
		}
		if strings.Join(ds.Creators[0].Org, "") != "Arctic Data Center" || ds.ContactOr != "Arctic Data Center" {
			t.Errorf("creator %+v contact %q, want the publisher", ds.Creators, ds.ContactOr)
		}
	})
	t.Run("first creator contacts", func(t *testing.T) {
		ds := parseEML(t, EML("p", Facts{Creators: []Party{{GivenName: "A", SurName: "B"}}}, nil)).Dataset
		if ds.ContactSN != "B" {
			t.Errorf("contact %q, want the first creator", ds.ContactSN)
		}
	})
	t.Run("license URL alone", func(t *testing.T) {
		ds := parseEML(t, EML("p", Facts{License: "https://creativecommons.org/licenses/by/4.0/"}, nil)).Dataset
		if ds.LicURL != "https://creativecommons.org/licenses/by/4.0/" || ds.Rights == "" {
			t.Errorf("licensed url %q rights %q", ds.LicURL, ds.Rights)
		}
	})
}

// TestEMLKeepsCallerOrder: nothing the caller ordered is sorted.
func TestEMLKeepsCallerOrder(t *testing.T) {
	f := Facts{Title: "t", Keywords: []string{"zeta", "alpha", "mu"},
		Creators: []Party{{Organization: "Zed"}, {Organization: "Alpha"}}}
	es := []Entity{{PID: "z", Name: "z.csv"}, {PID: "a", Name: "a.csv"}}
	ds := parseEML(t, EML("p", f, es)).Dataset
	if got := strings.Join(ds.Keywords, ","); got != "zeta,alpha,mu" {
		t.Errorf("keywords %s", got)
	}
	if ds.Creators[0].Org[0] != "Zed" || ds.Entities[0].Name != "z.csv" {
		t.Errorf("order changed: %+v %+v", ds.Creators, ds.Entities)
	}
}

// TestEMLSchemaIsThere guards the test data: a missing schema file would show
// as every document failing.
func TestEMLSchemaIsThere(t *testing.T) {
	for _, f := range []string{"eml.xsd", "eml-dataset.xsd", "xml.xsd", "LICENSE"} {
		if _, err := os.Stat(filepath.Join("testdata", "eml-2.2.0", f)); err != nil {
			t.Error(err)
		}
	}
}
