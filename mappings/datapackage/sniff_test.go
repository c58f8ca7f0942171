package datapackage

import (
	"os"
	"path/filepath"
	"testing"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSniffFixtures(t *testing.T) {
	cases := map[string]string{
		"datacite4.xml":          "http://datacite.org/schema/kernel-4",
		"datacite31.xml":         FormatDataCite31,
		"ro-crate-metadata.json": "ro-crate",
		"bag-info.txt":           "bagit-info",
		"schemaorg.jsonld":       FormatSchemaOrg,
		"oai_dc.xml":             FormatOAIDC,
		"eml211.xml":             "eml://ecoinformatics.org/eml-2.1.1",
		"iso19139.xml":           FormatISO19139,
		"fgdc.xml":               "FGDC-STD-001-1998",
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			body := readTestdata(t, name)
			if got := Sniff(name, body); got != want {
				t.Errorf("Sniff = %q, want %q", got, want)
			}
			// The name of the fixture plays no part but for the sidecars.
			if name != "ro-crate-metadata.json" && name != "bag-info.txt" {
				if got := Sniff("dir/metadata.any", body); got != want {
					t.Errorf("Sniff under another name = %q, want %q", got, want)
				}
			}
		})
	}
}

// TestSniffTruncated: a head cut anywhere after the root's start tag (and,
// for JSON-LD, after @type) still sniffs.
func TestSniffTruncated(t *testing.T) {
	cases := map[string]int{
		"datacite4.xml":    450,
		"datacite31.xml":   400,
		"oai_dc.xml":       420,
		"eml211.xml":       450,
		"iso19139.xml":     250,
		"fgdc.xml":         180,
		"schemaorg.jsonld": 330,
	}
	for name, cut := range cases {
		t.Run(name, func(t *testing.T) {
			body := readTestdata(t, name)
			want := Sniff(name, body)
			for n := cut; n < len(body); n += 7 {
				if got := Sniff(name, body[:n]); got != want {
					t.Fatalf("head of %d bytes: Sniff = %q, want %q", n, got, want)
				}
			}
		})
	}
}

func TestSniff(t *testing.T) {
	cases := []struct {
		name, head, want string
	}{
		{"a.xml", `<eml:eml xmlns:eml="eml://ecoinformatics.org/eml-2.0.1" packageId="x" system="y">`, "eml://ecoinformatics.org/eml-2.0.1"},
		{"a.xml", `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="x"`, ""}, // cut inside the root tag
		{"a.xml", "\ufeff<?xml version=\"1.0\"?>\n<!-- c --><eml:eml xmlns:eml=\"https://eml.ecoinformatics.org/eml-2.2.0\">", FormatEML220},
		{"a.xml", `<eml xmlns="eml://ecoinformatics.org/eml-9.9.9">`, ""},
		{"a.xml", `<gmi:MI_Metadata xmlns:gmi="http://www.isotc211.org/2005/gmi">`, FormatISO19139},
		{"a.xml", `<resource xmlns="http://datacite.org/schema/kernel-3" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://datacite.org/schema/kernel-3 http://schema.datacite.org/meta/kernel-3.0/metadata.xsd">`, "http://datacite.org/schema/kernel-3.0"},
		{"a.xml", `<resource xmlns="http://datacite.org/schema/kernel-3">`, FormatDataCite31},
		{"a.xml", `<resource xmlns="http://datacite.org/schema/kernel-2.2">`, ""},
		{"a.xml", `<onedcx:onedcx xmlns:onedcx="http://ns.dataone.org/metadata/schema/onedcx/v1.0">`, "http://ns.dataone.org/metadata/schema/onedcx/v1.0"},
		{"a.xml", `<metadata><idinfo>`, "FGDC-STD-001-1998"},
		{"a.xml", `<metadata><idinfo/><metainfo><metstdv>FGDC-STD-001.1-1999</metstdv></metainfo></metadata>`, "FGDC-STD-001.1-1999"},
		{"a.xml", `<metadata><title>not FGDC</title></metadata>`, ""},
		{"a.xml", `<metadata>`, ""},
		{"a.xml", `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">`, ""},
		{"a.xml", `<?xml version="1.0" encoding="ISO-8859-1"?><oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/">`, FormatOAIDC},
		{"a.xml", "<<<not xml", ""},
		{"a.json", `{"@context": "https://schema.org/", "@type": "Dataset", "name": "x"}`, FormatSchemaOrg},
		{"a.json", `{"@context": {"@vocab": "http://schema.org/"}, "@type": ["Dataset"], "name": "cut`, FormatSchemaOrg},
		{"a.json", `{"@type": "https://schema.org/Dataset"}`, FormatSchemaOrg},
		{"a.json", `{"@context": "https://schema.org", "@graph": [{"@type": "Person"}, {"@type": "schema:Dataset"}]}`, FormatSchemaOrg},
		{"a.json", `{"@context": "https://schema.org", "@graph": [{"@type": "Person"}], "@type": "Dataset"}`, FormatSchemaOrg},
		{"a.json", `{"@context": "https://schema.org/", "@type": "SoftwareSourceCode"}`, ""},
		{"a.json", `{"@type": "Dataset"}`, ""}, // no schema.org context
		{"a.json", `{"@context": "https://w3id.org/ro/crate/1.1/context", "@graph": [{"@id": "./", "@type": "Dataset"}]}`, ""},
		{"a.json", `[1, 2]`, ""},
		{"a.json", `{"a": `, ""},
		{"data/ro-crate-metadata.json", `{}`, "ro-crate"},
		{"bag-info.txt", `Bagging-Date: 2020-01-01`, "bagit-info"},
		{"a.csv", "a,b\n1,2\n", ""},
		{"a.bin", "", ""},
	}
	for _, c := range cases {
		if got := Sniff(c.name, []byte(c.head)); got != c.want {
			t.Errorf("Sniff(%q, %q) = %q, want %q", c.name, c.head, got, c.want)
		}
	}
}

func TestIndexed(t *testing.T) {
	indexed := []string{
		"eml://ecoinformatics.org/eml-2.0.0", "eml://ecoinformatics.org/eml-2.0.1",
		"eml://ecoinformatics.org/eml-2.1.0", "eml://ecoinformatics.org/eml-2.1.1", FormatEML220,
		FormatISO19139, "http://www.isotc211.org/2005/gmd-noaa", "http://www.isotc211.org/2005/gmd-pangaea",
		"FGDC-STD-001-1998", "FGDC-STD-001.1-1999", "FGDC-STD-001.2-1999",
		"http://datacite.org/schema/kernel-3.0", FormatDataCite31,
		"http://ns.dataone.org/metadata/schema/onedcx/v1.0", FormatOAIDC, FormatSchemaOrg,
	}
	official := officialFormatIDs(t)
	for _, id := range indexed {
		if !Indexed(id) {
			t.Errorf("Indexed(%q) = false", id)
		}
		if !official[id] {
			t.Errorf("%q is not in objectFormatList.xml", id)
		}
	}
	for _, id := range []string{"", "http://datacite.org/schema/kernel-4", "ro-crate", "bagit-info", "text/csv", FormatORE} {
		if Indexed(id) {
			t.Errorf("Indexed(%q) = true", id)
		}
	}
}

func TestSidecar(t *testing.T) {
	cases := map[string]bool{
		"metadata.xml": true, "EML.XML": true, "datacite.json": true, "x.jsonld": true,
		"ro-crate-metadata.json": true, "./ro-crate-metadata.json": true,
		"bag-info.txt": true, "bagit.txt": true, "manifest-sha256.txt": true, "tagmanifest-md5.txt": true,
		"data/metadata.xml": false, "data/bag-info.txt": false, "a/b/c.json": false,
		"readme.txt": false, "data.csv": false, "manifest.txt": false, "": false, "manifest-md5.csv": false,
	}
	for path, want := range cases {
		if got := Sidecar(path); got != want {
			t.Errorf("Sidecar(%q) = %v, want %v", path, got, want)
		}
	}
}
