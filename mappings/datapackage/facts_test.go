package datapackage

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func TestReadFactsFixtures(t *testing.T) {
	cases := []struct {
		fixture, format string
		want            Facts
	}{
		{"datacite4.xml", "http://datacite.org/schema/kernel-4", Facts{
			Title:    "Soil respiration & temperature, Andes transect 2018–2020",
			Abstract: "Soil CO2 efflux measured monthly at 12 sites.",
			Creators: []Party{
				{Name: "García, María José", GivenName: "María José", SurName: "García", Organization: "Universidad de Chile", ORCID: "https://orcid.org/0000-0002-1825-0097"},
				{Organization: "Long Term Ecological Research Network"},
				{Name: "Smith, John", GivenName: "John", SurName: "Smith"},
			},
			Contact:    &Party{Name: "Lee, Ann", GivenName: "Ann", SurName: "Lee"},
			Publisher:  "Dryad",
			Keywords:   []string{"soil respiration", "Carbon cycle"},
			License:    "Creative Commons Zero v1.0 Universal",
			LicenseURL: "https://creativecommons.org/publicdomain/zero/1.0/",
			Published:  day(2021, 3, 15),
			Modified:   time.Date(2022, 1, 10, 8, 30, 0, 0, time.UTC),
			Identifier: "doi:10.5061/DRYAD.ABC123",
			Landing:    "https://doi.org/10.5061/DRYAD.ABC123",
		}},
		{"datacite31.xml", FormatDataCite31, Facts{
			Title:      "Ecological Metadata Language example dataset",
			Abstract:   "A small example.",
			Creators:   []Party{{Name: "Jones, Matthew", GivenName: "Matthew", SurName: "Jones", Organization: "NCEAS", ORCID: "https://orcid.org/0000-0003-0077-4738"}},
			Publisher:  "Knowledge Network for Biocomplexity",
			Keywords:   []string{"ecology"},
			License:    "CC-BY 4.0",
			LicenseURL: "http://creativecommons.org/licenses/by/4.0/",
			Published:  day(2015, 1, 1),
			Identifier: "doi:10.5063/F1QN64NZ",
			Landing:    "https://doi.org/10.5063/F1QN64NZ",
		}},
		{"ro-crate-metadata.json", "ro-crate", Facts{
			Title:    "Bird counts at Lake Tahoe, 2019",
			Abstract: "Point counts of breeding birds at 40 stations.",
			Creators: []Party{
				{Name: "Alice Wong", GivenName: "Alice", SurName: "Wong", Email: "alice@example.org", Organization: "Tahoe Environmental Research Center", ORCID: "https://orcid.org/0000-0001-2345-6789"},
				{Organization: "Tahoe Environmental Research Center"},
			},
			Publisher:  "Tahoe Environmental Research Center",
			Keywords:   []string{"birds", "point counts", "Sierra Nevada"},
			License:    "CC BY 4.0",
			LicenseURL: "https://creativecommons.org/licenses/by/4.0/",
			Published:  day(2020, 5, 1),
			Identifier: "doi:10.4225/59/59672c09f4a4b",
		}},
		{"bag-info.txt", "bagit-info", Facts{
			Title:      "Frost shrub metrics, Alaska 2016",
			Abstract:   "Shrub measurements from Toolik Field Station, Alaska, 2016.",
			Contact:    &Party{Name: "Bob Frost", GivenName: "Bob", SurName: "Frost", Email: "bob@example.edu"},
			Publisher:  "Arctic Data Center",
			Keywords:   []string{"shrubs", "tundra", "Alaska"},
			Modified:   day(2020, 11, 16),
			Identifier: "doi:10.18739/A2G15TB43",
		}},
		{"schemaorg.jsonld", FormatSchemaOrg, Facts{
			Title:    "Zooplankton abundance, Gulf of Maine, 2015-2017",
			Abstract: "Net tows at 20 stations, counts per cubic meter.",
			Creators: []Party{
				{Name: "Josiah Carberry", GivenName: "Josiah", SurName: "Carberry", Email: "jcarberry@example.edu", ORCID: "https://orcid.org/0000-0002-1825-0097"},
				{Name: "Dr Robin Ross", GivenName: "Dr Robin", SurName: "Ross", ORCID: "https://orcid.org/0000-0001-5109-3700"},
				{Organization: "Gulf of Maine Research Institute"},
			},
			Publisher:  "Example Data Repository",
			Keywords:   []string{"zooplankton", "Gulf of Maine", "net tows"},
			License:    "CC BY 4.0",
			LicenseURL: "https://creativecommons.org/licenses/by/4.0/",
			Published:  day(2018, 2, 3),
			Modified:   time.Date(2019, 7, 1, 12, 0, 0, 0, time.UTC),
			Identifier: "doi:10.1234/zoo.3301",
			Landing:    "https://data.example-repository.org/dataset/3301",
		}},
		{"oai_dc.xml", FormatOAIDC, Facts{
			Title:      "Stream chemistry of the Hubbard Brook Experimental Forest",
			Abstract:   "Weekly stream water samples since 1963.",
			Creators:   []Party{{Name: "Likens, Gene E.", GivenName: "Gene E.", SurName: "Likens"}, {Name: "Hubbard Brook Ecosystem Study"}},
			Publisher:  "Environmental Data Initiative",
			Keywords:   []string{"stream chemistry", "watersheds"},
			License:    "This data package is released under the Creative Commons license Attribution 4.0 International.",
			Published:  day(2016, 8, 24),
			Identifier: "doi:10.6073/pasta/0b8f9bbd2cb1d3d0e2bd4ef8d0b3cc63",
			Landing:    "https://portal.edirepository.org/nis/mapbrowse?packageid=knb-lter-hbr.208.9",
		}},
		{"eml211.xml", "eml://ecoinformatics.org/eml-2.1.1", Facts{
			Title:    "Small Mammal Mark-Recapture Population Dynamics at Core Research Sites at the Sevilleta National Wildlife Refuge",
			Abstract: "This dataset contains small mammal capture data.\n\nTrapping webs were sampled in spring and fall.",
			Creators: []Party{
				{Name: "Seth R. Newsome", GivenName: "Seth R.", SurName: "Newsome", Organization: "University of New Mexico", Email: "newsome@example.edu", ORCID: "https://orcid.org/0000-0002-4534-1242"},
				{Organization: "Sevilleta LTER"},
			},
			Contact:    &Party{Organization: "Sevilleta LTER", Email: "data@sevilleta.unm.edu"},
			Publisher:  "LTER Network",
			Keywords:   []string{"rodents", "population dynamics"},
			License:    "This information is released under the Creative Commons license - Attribution - CC BY.",
			Published:  day(2017, 1, 1),
			Identifier: "doi:10.6073/pasta/5a6b6a1d3d4e5f",
			Landing:    "https://sevilleta.unm.edu/data/106",
		}},
		{"iso19139.xml", FormatISO19139, Facts{
			Title:      "Sea surface temperature, Monterey Bay mooring M1",
			Abstract:   "Hourly sea surface temperature from the M1 mooring.",
			Creators:   []Party{{Name: "Chavez, Francisco", GivenName: "Francisco", SurName: "Chavez", Organization: "MBARI"}},
			Publisher:  "NOAA National Centers for Environmental Information",
			Keywords:   []string{"oceans", "sea surface temperature"},
			Published:  day(2019, 3, 30),
			Identifier: "doi:10.7289/V5ABC123",
		}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			got, err := ReadFacts(c.format, readTestdata(t, c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			compareFacts(t, got, c.want)
			// What Sniff calls the fixture is what ReadFacts reads.
			if sniffed := Sniff(c.fixture, readTestdata(t, c.fixture)); sniffed != c.format {
				t.Errorf("Sniff = %q, want %q", sniffed, c.format)
			}
			// Facts read make valid EML.
			validateEML(t, EML("pid", got, nil))
		})
	}
}

func compareFacts(t *testing.T, got, want Facts) {
	t.Helper()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if gt, ok := g.(time.Time); ok {
			if !gt.Equal(w.(time.Time)) {
				t.Errorf("%s = %v, want %v", name, gt, w)
			}
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %#v\nwant %#v", name, deref(g), deref(w))
		}
	}
}

func deref(v any) any {
	if p, ok := v.(*Party); ok && p != nil {
		return *p
	}
	return v
}

func TestReadFactsAcceptsSidecarNames(t *testing.T) {
	for name, fixture := range map[string]string{
		"ro-crate-metadata.json":                "ro-crate-metadata.json",
		"crate/ro-crate-metadata.json":          "ro-crate-metadata.json",
		"bag-info.txt":                          "bag-info.txt",
		"http://datacite.org/schema/kernel-4.4": "datacite4.xml",
		"http://datacite.org/schema/kernel-3.0": "datacite31.xml",
	} {
		f, err := ReadFacts(name, readTestdata(t, fixture))
		if err != nil || f.Title == "" {
			t.Errorf("ReadFacts(%q): %v, title %q", name, err, f.Title)
		}
	}
}

func TestReadFactsMalformed(t *testing.T) {
	cases := []struct {
		format, body, wantErr string
	}{
		{FormatDataCite31, `<resource xmlns="http://datacite.org/schema/kernel-3"><titles><title>x</titles>`, "DataCite: not well-formed"},
		{FormatDataCite31, ``, "DataCite: the document is empty"},
		{"http://datacite.org/schema/kernel-4", `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0"/>`, "not <resource>"},
		{FormatOAIDC, `<oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/"><dc:title xmlns:dc="http://purl.org/dc/elements/1.1/">x</dc:title>`, "oai_dc: not well-formed"},
		{FormatOAIDC, `<record/>`, "oai_dc: the root element is <record>"},
		{FormatOAIDC, ``, "oai_dc: the document has no root element"},
		{"http://ns.dataone.org/metadata/schema/onedcx/v1.0", `<x/>`, "onedcx: the root element"},
		{FormatEML220, `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0"><dataset>`, "EML: not well-formed"},
		{"eml://ecoinformatics.org/eml-2.1.1", `<resource/>`, "not <eml>"},
		{FormatISO19139, `<gmd:MD_Metadata xmlns:gmd="http://www.isotc211.org/2005/gmd"><gmd:identificationInfo>`, "ISO 19139: not well-formed"},
		{FormatISO19139, `<metadata/>`, "ISO 19139: the root element is <metadata>"},
		{FormatISO19139, ``, "ISO 19139: the document has no root element"},
		{FormatSchemaOrg, `{"@type": "Dataset", "name": `, "schema.org JSON-LD: not valid JSON"},
		{FormatSchemaOrg, `{"@type": "Person", "name": "x"}`, "no node of @type Dataset"},
		{FormatSchemaOrg, `"Dataset"`, "not an object"},
		{FormatSchemaOrg, `{"@graph": {"@type": "Dataset"}}`, "@graph is not a list"},
		{"ro-crate", `{"@graph": [`, "RO-Crate: not valid JSON"},
		{"ro-crate", `{"@graph": [{"@id": "ro-crate-metadata.json", "about": {"@id": "./"}}]}`, `no root data entity "./"`},
		{"bag-info.txt", "  starts with a continuation\nTitle: x\n", "line 1: a continuation line"},
		{"bag-info.txt", "Title: x\nno colon here\n", "line 2"},
		{"bag-info.txt", "Title: \xff\xfe\n", "not UTF-8"},
		{FormatEML220, `<?xml version="1.0" encoding="EBCDIC"?><eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0"/>`, "EBCDIC"},
	}
	for _, c := range cases {
		f, err := ReadFacts(c.format, []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("ReadFacts(%q, %q) = %+v, %v; want an error with %q", c.format, c.body, f, err, c.wantErr)
		}
	}
}

func TestReadFactsUnknownFormat(t *testing.T) {
	for _, format := range []string{"", "text/csv", "http://www.loc.gov/METS/", "FGDC-STD-001-1998"} {
		f, err := ReadFacts(format, []byte("<<< anything"))
		if err != nil || !reflect.DeepEqual(f, Facts{}) {
			t.Errorf("ReadFacts(%q) = %+v, %v; want no facts, no error", format, f, err)
		}
	}
}

func TestReadFactsVariants(t *testing.T) {
	t.Run("schema.org in a @graph, keyword list, string license and identifier list", func(t *testing.T) {
		body := `{"@context": {"schema": "http://schema.org/"}, "@graph": [
			{"@id": "#p", "@type": "schema:Person", "schema:name": "ignored"},
			{"@type": "schema:Dataset", "name": "G", "keywords": ["a", {"@type": "DefinedTerm", "name": "b"}],
			 "license": "https://spdx.org/licenses/CC0-1.0", "identifier": ["https://hdl.handle.net/1/2", "x"],
			 "creator": {"@id": "#p2"}, "datePublished": "2001"},
			{"@id": "#p2", "@type": "Person", "givenName": "Ada", "familyName": "Lovelace", "sameAs": ["https://orcid.org/0000-0001-2345-678X"]}]}`
		f, err := ReadFacts(FormatSchemaOrg, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		compareFacts(t, f, Facts{
			Title:      "G",
			Keywords:   []string{"a", "b"},
			License:    "https://spdx.org/licenses/CC0-1.0",
			LicenseURL: "https://spdx.org/licenses/CC0-1.0",
			Identifier: "https://hdl.handle.net/1/2",
			Creators:   []Party{{Name: "Ada Lovelace", GivenName: "Ada", SurName: "Lovelace", ORCID: "https://orcid.org/0000-0001-2345-678X"}},
			Published:  day(2001, 1, 1),
		})
	})
	t.Run("dates", func(t *testing.T) {
		for in, want := range map[string]time.Time{
			"2020":                      day(2020, 1, 1),
			"2020-06":                   day(2020, 6, 1),
			"2020-06-07":                day(2020, 6, 7),
			"2020-06-07T08:09:10Z":      time.Date(2020, 6, 7, 8, 9, 10, 0, time.UTC),
			"2020-06-07T08:09:10+02:00": time.Date(2020, 6, 7, 6, 9, 10, 0, time.UTC),
			"2020-06-07T08:09:10.5Z":    time.Date(2020, 6, 7, 8, 9, 10, 5e8, time.UTC),
			" 2020-06-07 ":              day(2020, 6, 7),
			"June 2020":                 {},
			"":                          {},
		} {
			if got := parseDate(in); !got.Equal(want) {
				t.Errorf("parseDate(%q) = %v, want %v", in, got, want)
			}
		}
	})
	t.Run("latin-1 EML", func(t *testing.T) {
		body := "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><eml:eml xmlns:eml=\"eml://ecoinformatics.org/eml-2.1.0\"><dataset><title>Caf\xe9</title></dataset></eml:eml>"
		f, err := ReadFacts("eml://ecoinformatics.org/eml-2.1.0", []byte(body))
		if err != nil || f.Title != "Café" {
			t.Errorf("title %q, %v", f.Title, err)
		}
	})
	t.Run("onedcx", func(t *testing.T) {
		body := `<onedcx:onedcx xmlns:onedcx="http://ns.dataone.org/metadata/schema/onedcx/v1.0" xmlns:dcterms="http://purl.org/dc/terms/">
			<onedcx:simpleDc><dcterms:title>T</dcterms:title><dcterms:creator>Doe, Jane</dcterms:creator></onedcx:simpleDc>
			<onedcx:dcTerms><dcterms:abstract>A</dcterms:abstract><dcterms:issued>2012-03-04</dcterms:issued></onedcx:dcTerms></onedcx:onedcx>`
		f, err := ReadFacts("http://ns.dataone.org/metadata/schema/onedcx/v1.0", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		compareFacts(t, f, Facts{Title: "T", Abstract: "A", Published: day(2012, 3, 4),
			Creators: []Party{{Name: "Doe, Jane", GivenName: "Jane", SurName: "Doe"}}})
	})
}

func TestBagManifest(t *testing.T) {
	body := "\ufeffD41D8CD98F00B204E9800998ECF8427E  data/empty.txt\r\n" +
		"0cc175b9c0f1b6a831c399e269772661 data/file with spaces.csv\n" +
		"\n" +
		"92eb5ffee6ae2fec3ad71c777531578f\tdata/tab.txt\n" +
		"4a8a08f09d37b73795649038408b5f33  data/line%0Abreak%0D%25.txt\n" +
		"8277e0910d750195b448797616e091ad  ./data/dot.txt\n"
	got, err := BagManifest("md5", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"data/empty.txt":            "d41d8cd98f00b204e9800998ecf8427e",
		"data/file with spaces.csv": "0cc175b9c0f1b6a831c399e269772661",
		"data/tab.txt":              "92eb5ffee6ae2fec3ad71c777531578f",
		"data/line\nbreak\r%.txt":   "4a8a08f09d37b73795649038408b5f33",
		"data/dot.txt":              "8277e0910d750195b448797616e091ad",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BagManifest =\n%q\nwant\n%q", got, want)
	}
	for _, bad := range []string{
		"d41d8cd98f00b204e9800998ecf8427e\n",
		"not-hex  data/x\n",
		"aa  data/x\nbb  data/x\n",
	} {
		if _, err := BagManifest("md5", []byte(bad)); err == nil || !strings.Contains(err.Error(), "manifest-md5.txt line") {
			t.Errorf("BagManifest(%q) error %v, want one naming the line", bad, err)
		}
	}
}
