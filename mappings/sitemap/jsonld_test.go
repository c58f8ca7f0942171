package sitemap

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
)

func TestSizeOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		`"1234"`: 1234, `"1234 B"`: 1234, `"1234B"`: 1234, `"15077 bytes"`: 15077, `"1 byte"`: 1,
		`0`: 0, `191`: 191, `["42 bytes"]`: 42, `{"@value": "7"}`: 7,
		`"1.2 MB"`: -1, `"12 KB"`: -1, `"-5"`: -1, `1.5`: -1, `""`: -1, `null`: -1, `"about 3 bytes"`: -1,
	} {
		if got := sizeOf(decode(t, in)); got != want {
			t.Errorf("contentSize %s: %d, want %d", in, got, want)
		}
	}
}

func TestChecksumOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]adapter.Checksum{
		`{"spdx:checksum": {"spdx:algorithm": {"@id": "spdx:checksumAlgorithm_sha256"}, "spdx:checksumValue": "AB"}}`:                              {Algorithm: "SHA-256", Value: "ab"},
		`{"spdx:checksum": {"spdx:checksumAlgorithm": {"@id": "spdx:checksumAlgorithm_md5"}, "spdx:checksumValue": "cd"}}`:                         {Algorithm: "MD5", Value: "cd"},
		`{"spdx:checksum": {"spdx:algorithm": "http://spdx.org/rdf/terms#checksumAlgorithm_sha512", "spdx:checksumValue": "ef"}}`:                  {Algorithm: "SHA-512", Value: "ef"},
		`{"http://spdx.org/rdf/terms#checksum": {"http://spdx.org/rdf/terms#algorithm": "SHA1", "http://spdx.org/rdf/terms#checksumValue": "01"}}`: {Algorithm: "SHA-1", Value: "01"},
		`{"checksum": [{"algorithm": "md6", "checksumValue": "x"}, {"algorithm": "sha384", "checksumValue": "02"}]}`:                               {Algorithm: "SHA-384", Value: "02"},
		`{"spdx:checksum": {"spdx:algorithm": "sha256"}}`:                                                                                          {},
		`{"identifier": "md5:abcd"}`: {},
	} {
		if got := checksumOf(decode(t, in).(map[string]any)); got != want {
			t.Errorf("%s: %+v, want %+v", in, got, want)
		}
	}
}

func TestParseDate(t *testing.T) {
	t.Parallel()
	since := time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]struct {
		start time.Time
		after bool // walked with since
	}{
		"2024-05-10T12:00:00Z":          {time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC), true},
		"2024-05-10T11:59:59Z":          {time.Date(2024, 5, 10, 11, 59, 59, 0, time.UTC), false},
		"2024-05-10T11:59:59.5Z":        {time.Date(2024, 5, 10, 11, 59, 59, 5e8, time.UTC), false},
		"2024-05-10T14:00:00+02:00":     {since, true},
		"2024-05-10T11:59Z":             {time.Date(2024, 5, 10, 11, 59, 0, 0, time.UTC), false},
		"2024-05-10T12:00Z":             {since, true},
		"2024-05-10":                    {time.Date(2024, 5, 10, 0, 0, 0, 0, time.UTC), true},
		"2024-05-09":                    {time.Date(2024, 5, 9, 0, 0, 0, 0, time.UTC), false},
		"2024-05":                       {time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), true},
		"2023":                          {time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), false},
		" 2024-06-01T00:00:00 ":         {time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), true},
		"2024-06-01T00:00:00.123+00:00": {time.Date(2024, 6, 1, 0, 0, 0, 123e6, time.UTC), true},
	} {
		start, end, ok := parseDate(in)
		if !ok || !start.Equal(want.start) || end.After(since) != want.after {
			t.Errorf("%q: %v to %v (%v); want %v, after since %v", in, start, end, ok, want.start, want.after)
		}
	}
	for _, in := range []string{"", "yesterday", "10/05/2024", "2024-13-01"} {
		if _, _, ok := parseDate(in); ok {
			t.Errorf("%q parsed", in)
		}
	}
}

func TestLDScripts(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		page string
		want []string
	}{
		"plain":      {`<script type="application/ld+json">{"a":1}</script>`, []string{`{"a":1}`}},
		"upper case": {"<SCRIPT TYPE=APPLICATION/LD+JSON>\n {\"a\":1} \n</SCRIPT >", []string{`{"a":1}`}},
		"attributes": {`<script id='x' defer type = 'application/ld+json; charset=utf-8' data-x="a>b">[1]</script>`, []string{`[1]`}},
		"several":    {`<script type="application/ld+json">1</script><p></p><script type="application/ld+json">2</script>`, []string{"1", "2"}},
		"other types": {`<script>var a = '<script type="application/ld+json">';</script><script type="text/json">{}</script>` +
			`<scripts type="application/ld+json">no</scripts>`, nil},
		"unclosed":       {`<script type="application/ld+json">{"a":1}`, nil},
		"unclosed tag":   {`<script type="application/ld+json`, nil},
		"no type":        {`<script src="x.js"></script>`, nil},
		"self closing":   {`<script type="application/ld+json"/>{"a":1}</script>`, []string{`{"a":1}`}},
		"non-ASCII text": {`<p>İİİ</p><script type="application/ld+json">{"n":"İ"}</script>`, []string{`{"n":"İ"}`}},
	} {
		var got []string
		for _, b := range ldScripts([]byte(c.page)) {
			got = append(got, string(b))
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

func TestDataset(t *testing.T) {
	t.Parallel()
	page, _ := url.Parse("https://data.example.org/ds/7")
	for name, c := range map[string]struct {
		body, ctype string
		id, title   string
		files       []string // keys
		err         string
	}{
		"raw JSON-LD": {body: `{"@type": "schema:Dataset", "@id": "doi:10.1234/x", "schema:name": "X"}`, ctype: "application/ld+json",
			id: "doi:10.1234/x", title: "X"},
		"list": {body: `<script type="application/ld+json">[{"@type": "Organization"}, {"@type": ["Thing", "http://schema.org/Dataset"], "identifier": ["ark:/1/2", "other"], "name": "L"}]</script>`,
			id: "ark:/1/2", title: "L"},
		"mainEntity": {body: `<script type="application/ld+json">{"@type": "WebPage", "mainEntity": {"@type": "Dataset", "@id": "#ds", "identifier": {"@type": "PropertyValue", "url": "https://hdl.handle.net/1/2"},
			"distribution": [{"@type": "DataDownload", "contentUrl": "files/a.csv"}, {"@type": "DataDownload", "contentUrl": "files/a.csv"}, {"@type": "WebAPI", "contentUrl": "/api"}, {"contentUrl": "https://cdn.example.org/b.nc?x=1"}]}}</script>`,
			id: "https://hdl.handle.net/1/2", files: []string{"https://data.example.org/ds/files/a.csv", "https://cdn.example.org/b.nc?x=1"}},
		"page URL":      {body: `<script type="application/ld+json">{"@type": "Dataset", "@id": "_:b0"}</script>`, id: "https://data.example.org/ds/7"},
		"not JSON":      {body: `<script type="application/ld+json">{"@type": "Dataset",}</script>`, err: "not JSON"},
		"no Dataset":    {body: `<script type="application/ld+json">{"@type": "DataCatalog"}</script>`, err: "no schema.org Dataset"},
		"no JSON-LD":    {body: `<html><body>hello</body></html>`, err: "no schema.org Dataset"},
		"JSON, no node": {body: `"Dataset"`, ctype: "application/json", err: "no schema.org Dataset"},
	} {
		d, err := dataset(page, []byte(c.body), c.ctype)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var keys []string
		for _, f := range d.Files {
			keys = append(keys, f.Key)
		}
		if d.ID != c.id || (c.title != "" && d.Facts.Title != c.title) || strings.Join(keys, " ") != strings.Join(c.files, " ") {
			t.Errorf("%s: id %q title %q files %q; want %q %q %q", name, d.ID, d.Facts.Title, keys, c.id, c.title, c.files)
		}
	}
}

func TestFileProblem(t *testing.T) {
	t.Parallel()
	page, _ := url.Parse("https://data.example.org/ds/7")
	d, err := dataset(page, []byte(`{"@type": "Dataset", "distribution": {"contentUrl": "ftp://ftp.example.org/a.csv", "name": "a.csv"}}`), "application/ld+json")
	if err != nil || len(d.Files) != 1 || d.Files[0].Problem == nil || d.Files[0].Key != "" {
		t.Fatalf("%+v, %v", d, err)
	}
}

func TestFormatOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`"text/csv"`: "text/csv", `"text/csv; charset=utf-8"`: "text/csv", `"text/tab-separated-values"`: "text/tsv",
		`["application/xml", "http://www.isotc211.org/2005/gmd-noaa"]`: "http://www.isotc211.org/2005/gmd-noaa",
		`["application/x-netcdf", "netCDF-4"]`:                         "netCDF-4",
		`"application/x-unknown"`:                                      "",
		`null`:                                                         "",
	} {
		if got := formatOf(values(decode(t, in))); got != want {
			t.Errorf("encodingFormat %s: %q, want %q", in, got, want)
		}
	}
}

func TestParseSitemap(t *testing.T) {
	t.Parallel()
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.String()
	}
	urlset := `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc> https://a/1 </loc><lastmod>2024-01-01</lastmod><image:image xmlns:image="x"><image:loc>https://a/i.png</image:loc></image:image></url><url><loc></loc></url><url><loc>https://a/2</loc></url></urlset>`
	for name, c := range map[string]struct {
		in    string
		index bool
		locs  string
		err   string
	}{
		"urlset":      {in: urlset, locs: "https://a/1@2024-01-01 https://a/2@"},
		"gzip":        {in: gz(urlset), locs: "https://a/1@2024-01-01 https://a/2@"},
		"index":       {in: `<sitemapindex><sitemap><loc>https://a/s1.xml</loc></sitemap><sitemap><loc>https://a/s2.xml.gz</loc><lastmod>2024</lastmod></sitemap></sitemapindex>`, index: true, locs: "https://a/s1.xml@ https://a/s2.xml.gz@2024"},
		"HTML":        {in: `<html><body>Not found</body></html>`, err: "not <urlset> or <sitemapindex>"},
		"empty":       {in: ``, err: "no XML element"},
		"broken":      {in: `<urlset><url><loc>x</url></urlset>`, err: "syntax error"},
		"broken gzip": {in: gz(urlset)[:30], err: "EOF"},
	} {
		index, entries, err := parseSitemap(strings.NewReader(c.in), maxSitemap)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", name, err, c.err)
			}
			continue
		}
		var locs []string
		for _, e := range entries {
			locs = append(locs, e.Loc+"@"+e.Lastmod)
		}
		if err != nil || index != c.index || strings.Join(locs, " ") != c.locs {
			t.Errorf("%s: index %v %q %v; want %v %q", name, index, locs, err, c.index, c.locs)
		}
	}
}

func TestParseSitemapLimit(t *testing.T) {
	t.Parallel()
	doc := "<urlset>" + strings.Repeat("<url><loc>https://a/</loc></url>", 100) + "</urlset>"
	if _, entries, err := parseSitemap(strings.NewReader(doc), int64(len(doc))); err != nil || len(entries) != 100 {
		t.Fatalf("a sitemap at the limit: %d entries, %v", len(entries), err)
	}
	if _, _, err := parseSitemap(strings.NewReader(doc), int64(len(doc)-1)); !errors.Is(err, errTooLarge) {
		t.Fatalf("a sitemap over the limit: %v", err)
	}
	if _, _, err := parseSitemap(strings.NewReader(doc+"\n"), int64(len(doc))); !errors.Is(err, errTooLarge) {
		t.Fatalf("a sitemap over the limit by a blank: %v", err)
	}
}

func TestCheckOptions(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		baseURL, options, sitemap, err string
	}{
		"default":  {baseURL: "https://data.example.org/", sitemap: "https://data.example.org/sitemap.xml"},
		"relative": {baseURL: "https://data.example.org/portal", options: `{sitemap: /maps/index.xml, include: "^https://data\\.example\\.org/dataset/"}`, sitemap: "https://data.example.org/portal/maps/index.xml"},
		"absolute": {baseURL: "https://data.example.org", options: `{sitemap: "https://cdn.example.org/sitemap.xml.gz"}`, sitemap: "https://cdn.example.org/sitemap.xml.gz"},
		"unknown":  {baseURL: "https://data.example.org", options: `{sitemaps: x}`, err: "field sitemaps not found"},
		"regexp":   {baseURL: "https://data.example.org", options: `{include: "("}`, err: "options.include"},
		"base":     {baseURL: "ftp://data.example.org", err: "not an http(s) URL"},
		"sitemap":  {baseURL: "https://data.example.org", options: `{sitemap: "ftp://x/s.xml"}`, err: "options.sitemap"},
	} {
		u := mappingtest.UpstreamConfig(t, config.UpstreamSitemap, "site", c.baseURL, c.options)
		s, err := parse(u)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || CheckOptions(u) == nil {
				t.Errorf("%s: %v, want an error with %q", name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case s.sitemap.String() != c.sitemap:
			t.Errorf("%s: sitemap %s, want %s", name, s.sitemap, c.sitemap)
		}
	}
}

// decode reads JSON as dataset does: numbers as json.Number.
func decode(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
