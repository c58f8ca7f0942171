package sitemap

// Fuzz targets of what a sitemap source reads from the web: sitemaps (plain
// or gzip'd) and the JSON-LD of dataset pages. Seeds: testdata/site. Run one with
//
//	go test -run '^$' -fuzz '^FuzzParseSitemap$' -fuzztime 60s ./mappings/sitemap/

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// siteFiles are the files of testdata/site matching glob.
func siteFiles(f *testing.F, glob string) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("testdata/site", glob))
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzParseSitemap: any bytes give entries or an error, never a panic; never
// more than the limit is read; every entry has a trimmed, non-empty loc; the
// same sitemap gzip'd gives the same answer.
func FuzzParseSitemap(f *testing.F) {
	for _, b := range append(siteFiles(f, "sitemap.xml"), siteFiles(f, "sitemaps/*")...) {
		f.Add(b)
	}
	f.Add([]byte(`<sitemapindex><sitemap><loc> a </loc><lastmod>2024</lastmod></sitemap><other><x/></other></sitemapindex>`))
	f.Add([]byte(`<urlset><url><loc></loc></url><url><loc>u</loc></url></urlset>`))
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		index, entries, err := parseSitemap(bytes.NewReader(data), limit)
		if err != nil {
			if index || entries != nil {
				t.Fatalf("an error (%v) with entries %v", err, entries)
			}
			return
		}
		for _, e := range entries {
			if e.Loc == "" || e.Loc != strings.TrimSpace(e.Loc) || e.Lastmod != strings.TrimSpace(e.Lastmod) {
				t.Fatalf("entry %+v", e)
			}
		}
		if len(data) > 1 && data[0] == 0x1f && data[1] == 0x8b {
			return
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(data)
		zw.Close()
		zindex, zentries, zerr := parseSitemap(&gz, limit)
		if zerr != nil || zindex != index || len(zentries) != len(entries) {
			t.Fatalf("gzip'd: %v %d entries %v; plain: %v %d entries", zindex, len(zentries), zerr, index, len(entries))
		}
	})
}

// FuzzDataset reads a page (HTML with JSON-LD scripts, or JSON-LD itself):
// no panic; no Dataset is an error wrapping errNoDataset; a Dataset has an id,
// and each file an absolute http(s) URL as its key, listed once, or a
// problem and no key.
func FuzzDataset(f *testing.F) {
	for _, b := range siteFiles(f, "datasets/*.html") {
		f.Add(b, "text/html")
	}
	f.Add([]byte(`{"@type": "schema:Dataset", "@id": "doi:10.1234/x", "schema:name": "X", "distribution": {"contentUrl": "a.csv", "contentSize": "1 KB"}}`), "application/ld+json")
	f.Add([]byte(`<script type="application/ld+json">{"@graph": [{"@id": "#d", "@type": "Dataset", "hasPart": {"@id": "#d"}, "mainEntity": {"@id": "#d"}}]}</script>`), "")
	page, _ := url.Parse("https://data.example.org/ds/7")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		d, err := dataset(page, body, contentType)
		if err != nil {
			if d != nil || !errors.Is(err, errNoDataset) {
				t.Fatalf("%v (%v)", err, d)
			}
			return
		}
		if d.ID == "" {
			t.Fatal("a Dataset without an id")
		}
		seen := map[string]bool{}
		for _, fl := range d.Files {
			if fl.Problem != nil {
				if fl.Key != "" {
					t.Fatalf("file %q with a problem (%v)", fl.Key, fl.Problem)
				}
				continue
			}
			u, err := url.Parse(fl.Key)
			if err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") {
				t.Fatalf("file key %q is not an http(s) URL", fl.Key)
			}
			if seen[fl.Key] {
				t.Fatalf("file %q twice", fl.Key)
			}
			seen[fl.Key] = true
		}
	})
}
