package httpapi

// Fuzz targets of the http mapping's readers of upstream answers (the field
// walker) and of its configured templates. Run one with
//
//	go test -run '^$' -fuzz '^FuzzExtract$' -fuzztime 60s ./mappings/httpapi/

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzExtract decodes an upstream answer (JSON or XML) and walks it with a
// list path and a field path, as a listing does: no panic, no error that is
// not reported; a parsed path keeps its text; every field found is trimmed
// and non-empty.
func FuzzExtract(f *testing.F) {
	for _, s := range []struct {
		xml              bool
		doc, list, field string
	}{
		{false, `{"items":[{"id":"a","size":12,"ok":true},{"id":" b "}],"next":"x"}`, "items", "id"},
		{false, `{"data":{"files":[{"meta":{"name":"x.csv"}}]}}`, "data.files", "meta.name"},
		{false, `[{"id":1},{"id":null},[1,2]]`, ".", "0"},
		{false, `{"items":null}`, "items", "id"},
		{true, `<list><item id="a"><name>x</name></item><item id="b"/></list>`, "list.item", "@id"},
		{true, `<?xml version="1.0" encoding="ISO-8859-1"?><r><e><n>caf` + "\xe9" + `</n></e></r>`, "r.e", "n"},
		{true, `<a:r xmlns:a="urn:a"><a:e><a:k>1</a:k><a:k>2</a:k></a:e></a:r>`, "r.e", "k.1"},
		{false, `{"a":1}`, "header:X-Next", "header:Content-Length"},
	} {
		f.Add(s.xml, []byte(s.doc), s.list, s.field)
	}
	f.Fuzz(func(t *testing.T, isXML bool, doc []byte, listPath, fieldPath string) {
		format := formatJSON
		if isXML {
			format = formatXML
		}
		lp, lerr := parsePath(listPath)
		fp, ferr := parsePath(fieldPath)
		for _, p := range []struct {
			p   path
			err error
			s   string
		}{{lp, lerr, listPath}, {fp, ferr, fieldPath}} {
			if p.err == nil && p.p.header == "" && p.s != "." && strings.Join(p.p.segs, ".") != p.s {
				t.Fatalf("path %q parses to %q", p.s, p.p.segs)
			}
		}
		v, err := decode(format, bytes.NewReader(doc))
		if err != nil {
			return
		}
		h := http.Header{"X-Next": {" n "}}
		if ferr == nil {
			checkField(t, v, h, fp)
		}
		if lerr != nil || lp.header != "" {
			return
		}
		list, err := items(v, lp)
		if err != nil {
			return
		}
		for _, it := range list {
			if ferr == nil {
				checkField(t, it, h, fp)
			}
		}
	})
}

func checkField(t *testing.T, item any, h http.Header, p path) {
	t.Helper()
	s, ok, err := field(item, h, p)
	if err != nil {
		return
	}
	if ok != (s != "") || s != strings.TrimSpace(s) {
		t.Fatalf("field %q = %q, %v", p.raw, s, ok)
	}
}

// FuzzTemplate parses a URL template: one that parses expands back to its text
// when each placeholder gives its own name in braces, and placeholders are only
// the allowed ones; a {key} in a URL's path reads back as the key.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"http://h/files/{key}", "http://h/api?id={key.query}&x=1", "http://h/blob/{key.blob}",
		"{key}", "}", "{", "{nope}", "http://h/{key}?q={key.query}", "http://h/list?page={page}&n={pageSize}", "{{key}}", ""} {
		f.Add(s, "a/b c%2F+&é?#")
	}
	f.Fuzz(func(t *testing.T, s, key string) {
		allowed := append(append([]string{}, keyPlaceholders...), listPlaceholders...)
		tpl, err := parseTemplate(s, allowed)
		if err != nil {
			return
		}
		for _, p := range tpl {
			if p.name != "" && !strings.Contains(strings.Join(allowed, " "), p.name) {
				t.Fatalf("placeholder {%s} passed", p.name)
			}
		}
		if back := tpl.expand(func(name string) string { return "{" + name + "}" }); back != s {
			t.Fatalf("%q expands back to %q", s, back)
		}
		_ = tpl.misplaced()
		v := vars{key: key, cursor: key, pageSize: 10}
		_ = tpl.expand(v.escaped)
		// A path template holding only a literal prefix and {key}: the key reads back.
		pathTpl, err := parseTemplate("http://h/files/{key}", keyPlaceholders)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(pathTpl.expand(v.escaped))
		if err != nil {
			t.Fatalf("key %q expands to no URL: %v", key, err)
		}
		if got := strings.TrimPrefix(u.Path, "/files/"); got != key {
			t.Fatalf("key %q reads back from the URL as %q", key, got)
		}
	})
}
