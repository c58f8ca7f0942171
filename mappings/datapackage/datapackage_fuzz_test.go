package datapackage

// Fuzz targets of the readers of harvested metadata: Sniff, ReadFacts (every
// format) and BagManifest. Seeds: the fixtures in testdata/. Run one with
//
//	go test -run '^$' -fuzz '^FuzzReadFacts$' -fuzztime 60s ./mappings/datapackage/

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// fixtures are the metadata documents of testdata/, by file name.
func fixtures(f *testing.F) map[string][]byte {
	out := map[string][]byte{}
	paths, _ := filepath.Glob("testdata/*")
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// sniffed are every value Sniff may give.
var sniffed = map[string]bool{
	"": true, formatROCrate: true, formatBagInfo: true, FormatSchemaOrg: true, FormatOAIDC: true, formatOneDCX: true,
	FormatDataCite31: true, formatDataCite30: true, formatDataCite4: true, FormatISO19139: true, "http://www.isotc211.org/2005/gmi": true,
	fgdcFormat1998: true, fgdcBiologicalData: true, fgdcShoreline: true,
}

// FuzzSniff: Sniff never panics, gives a format it knows (or ""), ignores a
// byte order mark and leading blanks, and for a file name that is no sidecar
// gives the same answer for the same bytes under any other such name.
func FuzzSniff(f *testing.F) {
	for name, b := range fixtures(f) {
		f.Add(name, b)
		f.Add("x.xml", b)
		if len(b) > 200 {
			f.Add("cut.xml", b[:200])
		}
	}
	f.Fuzz(func(t *testing.T, name string, head []byte) {
		got := Sniff(name, head)
		if !sniffed[got] && !emlNamespaces[got] && !strings.HasPrefix(got, dataciteNSPrefix) {
			t.Fatalf("Sniff(%q) = %q, a format it does not know", name, got)
		}
		if Sidecar(name) || bytes.HasPrefix(head, []byte("\ufeff")) || filepath.Base(name) != filepath.Base(filepath.ToSlash(name)) {
			return
		}
		switch filepath.Base(name) {
		case roCrateName, "ro-crate-metadata.jsonld", bagInfoName:
			return
		}
		if other := Sniff("other.dat", head); other != got {
			t.Fatalf("Sniff of the same bytes: %q under %q, %q under other.dat", got, name, other)
		}
		if b := Sniff("other.dat", append([]byte("\ufeff \n\t"), head...)); b != got {
			t.Fatalf("a BOM and blanks change Sniff from %q to %q", got, b)
		}
	})
}

// factFormats are the formats ReadFacts reads.
var factFormats = []string{
	"http://datacite.org/schema/kernel-4", FormatDataCite31, formatDataCite30, formatROCrate, formatBagInfo, FormatSchemaOrg,
	FormatOAIDC, formatOneDCX, FormatEML220, "eml://ecoinformatics.org/eml-2.1.1", FormatISO19139, "http://www.isotc211.org/2005/gmi",
}

// FuzzReadFacts reads any document as each format: no panic; the same bytes
// give the same facts every time (a harvest that read them differently would
// register a new version of an unchanged dataset); an error gives no facts;
// creators and keywords are never blank.
func FuzzReadFacts(f *testing.F) {
	for name, b := range fixtures(f) {
		for i, format := range factFormats {
			if s := Sniff(name, b); s == format || i == 0 {
				f.Add(uint8(i), b)
			}
		}
		f.Add(uint8(len(factFormats)), b)
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		format := factFormats[int(which)%len(factFormats)]
		facts, err := ReadFacts(format, body)
		again, err2 := ReadFacts(format, body)
		if fmt.Sprint(err) != fmt.Sprint(err2) || !reflect.DeepEqual(facts, again) {
			t.Fatalf("ReadFacts(%s) differs between two reads:\n%+v %v\n%+v %v", format, facts, err, again, err2)
		}
		if err != nil {
			if !reflect.DeepEqual(facts, Facts{}) {
				t.Fatalf("an error (%v) with facts %+v", err, facts)
			}
			return
		}
		for _, k := range facts.Keywords {
			if strings.TrimSpace(k) == "" {
				t.Fatalf("blank keyword in %q", facts.Keywords)
			}
		}
		for _, p := range facts.Creators {
			if p == (Party{}) {
				t.Fatalf("an empty creator in %+v", facts.Creators)
			}
		}
	})
}

// FuzzBagManifest reads any manifest without panicking, giving lowercase hex
// checksums for non-empty paths; and a manifest written with BagIt 1.0's
// encoding of its paths reads back as what was written.
func FuzzBagManifest(f *testing.F) {
	f.Add([]byte("49f68a5c8493ec2c0bf489821c21fc3b  data/a.txt\r\nABCDEF  data/with space.csv\n\n0a  data/100%25%0Aline\n"), "data/x%y", "data/a\nb", "AB01")
	f.Add([]byte("\ufeffzz data/a\n"), "./data/a", "b", "0")
	f.Add([]byte("0\tdata/tab\n00 data/dup\n01 data/dup\n"), "%0A", "%25", "ff")
	f.Fuzz(func(t *testing.T, body []byte, p1, p2, sum string) {
		if sums, err := BagManifest("md5", body); err == nil {
			for p, s := range sums {
				if p == "" || s == "" || s != strings.ToLower(s) || !hexDigest.MatchString(s) {
					t.Fatalf("entry %q: %q", p, s)
				}
			}
		}
		want := map[string]string{}
		for _, p := range []string{p1, p2} {
			if p == "" || strings.TrimLeft(p, " \t") != p || strings.HasPrefix(p, "./") || !hexDigest.MatchString(sum) || want[p] != "" {
				return
			}
			want[p] = strings.ToLower(sum)
		}
		var b strings.Builder
		paths := slices.Collect(func(yield func(string) bool) {
			for p := range want {
				if !yield(p) {
					return
				}
			}
		})
		sort.Strings(paths)
		for _, p := range paths {
			enc := strings.NewReplacer("%", "%25", "\n", "%0A", "\r", "%0D").Replace(p)
			fmt.Fprintf(&b, "%s  %s\n", sum, enc)
		}
		got, err := BagManifest("md5", []byte(b.String()))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("manifest\n%s\nreads back as %q, %v; want %q", b.String(), got, err, want)
		}
	})
}
