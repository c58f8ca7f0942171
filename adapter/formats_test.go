package adapter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

func TestOfficialFormatsEncode(t *testing.T) {
	t.Parallel()
	f := adapter.OfficialFormats()
	list := f.List()
	if n := len(list.ObjectFormat); n != 160 || list.Count != n || list.Total != n || list.Start != 0 {
		t.Fatalf("official list: %d formats, slice %+v; want 160", n, list.Slice)
	}
	for _, c := range []struct {
		version int
		ns      string
	}{{1, adapter.NSv1}, {2, adapter.NSv2}} {
		t.Run(fmt.Sprintf("v%d", c.version), func(t *testing.T) {
			t.Parallel()
			out := encode(t, list, c.version)
			xsdtest.Validate(t, out)
			if got := rootName(t, out); got.Space != c.ns || got.Local != "objectFormatList" {
				t.Errorf("root %v, want objectFormatList in %q", got, c.ns)
			}
			var back adapter.ObjectFormatList
			decode(t, out, &back)
			want := any(list)
			if c.version == 1 {
				want = adapter.ViewV1(list)
				if strings.Contains(string(out), "<mediaType") || strings.Contains(string(out), "<extension>") {
					t.Error("the v1 rendering carries v2 fields")
				}
			}
			assertEqual(t, &back, want)
		})
	}
}

func TestFormatsLookup(t *testing.T) {
	t.Parallel()
	f := adapter.OfficialFormats()
	cases := []struct {
		id         string
		found      bool
		formatType string
		mediaType  string
	}{
		{"eml://ecoinformatics.org/eml-2.1.1", true, "METADATA", "text/xml"},
		{"text/csv", true, "DATA", "text/csv"},
		{"application/pdf", true, "DATA", "application/pdf"},
		{"application/bagit-097", true, "DATA", "application/octet-stream"}, // listed without a media type
		{"no/such-format", false, "", "application/octet-stream"},
		{"", false, "", "application/octet-stream"},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			o, ok := f.Lookup(c.id)
			if ok != c.found {
				t.Fatalf("Lookup(%q) found=%v, want %v", c.id, ok, c.found)
			}
			if ok && (o.FormatID != c.id || o.FormatType != c.formatType || o.FormatName == "") {
				t.Errorf("Lookup(%q) = %+v", c.id, o)
			}
			if got := f.MediaType(c.id); got != c.mediaType {
				t.Errorf("MediaType(%q) = %q, want %q", c.id, got, c.mediaType)
			}
		})
	}
}

func TestParseFormatsRefuses(t *testing.T) {
	t.Parallel()
	const dup = `<d2:objectFormatList xmlns:d2="` + adapter.NSv2 + `" count="2" start="0" total="2">` +
		`<objectFormat><formatId>a</formatId><formatName>A</formatName><formatType>DATA</formatType></objectFormat>` +
		`<objectFormat><formatId>a</formatId><formatName>A</formatName><formatType>DATA</formatType></objectFormat>` +
		`</d2:objectFormatList>`
	cases := map[string]struct{ doc, want string }{
		"duplicate id": {dup, `"a" is listed twice`},
		"wrong root":   {`<d2:nodeList xmlns:d2="` + adapter.NSv2 + `"/>`, "got <nodeList>"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := adapter.ParseFormats(strings.NewReader(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ParseFormats: %v; want an error containing %q", err, c.want)
			}
		})
	}
}
