package sitemap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// errNoDataset is a page without a Dataset in its JSON-LD (or without
// JSON-LD): not a dataset page, which the walk passes over.
var errNoDataset = errors.New("no schema.org Dataset in its JSON-LD")

// dataset reads the Dataset a page describes: its first JSON-LD block that
// holds one. body is the page (HTML, or JSON-LD itself when contentType says
// so); page is its URL. Version and Modified come from the Dataset's
// dateModified; the walk puts the lastmod in their place when there is one.
func dataset(page *url.URL, body []byte, contentType string) (*node.Dataset, error) {
	var blocks [][]byte
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/ld+json" || mt == "application/json" {
		blocks = [][]byte{bytes.TrimSpace(body)}
	} else {
		blocks = ldScripts(body)
	}
	if len(blocks) == 0 {
		return nil, errNoDataset
	}
	var bad error
	for _, b := range blocks {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			bad = fmt.Errorf("a JSON-LD block is not JSON: %w", err)
			continue
		}
		g := graph{}
		ds := g.find(doc)
		if ds == nil {
			continue
		}
		return g.convert(page, ds, b), nil
	}
	if bad != nil {
		return nil, fmt.Errorf("%w (%w)", errNoDataset, bad)
	}
	return nil, errNoDataset
}

// graph indexes a document's nodes by @id, so that a reference ({"@id": x})
// finds its node.
type graph map[string]map[string]any

// find returns the first Dataset node of doc: at its top, in a list, in
// @graph, or as a node's mainEntity; it indexes the nodes it passes.
func (g graph) find(doc any) map[string]any {
	var nodes []map[string]any
	for _, v := range values(doc) {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		nodes = append(nodes, m)
		for _, x := range values(m["@graph"]) {
			if n, ok := x.(map[string]any); ok {
				nodes = append(nodes, n)
			}
		}
	}
	for _, n := range nodes {
		if id := str(n["@id"]); id != "" && len(n) > 1 {
			g[id] = n
		}
	}
	for _, n := range nodes {
		if isType(n, "Dataset") {
			return n
		}
		for _, x := range values(prop(n, "mainEntity")) {
			if m := g.deref(x); m != nil && isType(m, "Dataset") {
				return m
			}
		}
	}
	return nil
}

// deref is v's node: v itself, or the node a bare reference names.
func (g graph) deref(v any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if id, ok := m["@id"]; ok && len(m) == 1 {
		if n := g[str(id)]; n != nil {
			return n
		}
	}
	return m
}

// convert makes the Dataset of node ds, found in the JSON-LD block body on
// page.
func (g graph) convert(page *url.URL, ds map[string]any, body []byte) *node.Dataset {
	body = bytes.TrimSpace(body)
	d := &node.Dataset{
		ID:       datasetID(ds, page.String()),
		Page:     page.String(),
		Version:  firstStr(prop(ds, "dateModified")),
		Metadata: &node.Document{FormatID: datapackage.FormatSchemaOrg, Body: body},
	}
	d.Modified, _, _ = parseDate(d.Version)
	d.Facts, _ = datapackage.ReadFacts(datapackage.FormatSchemaOrg, body)
	f := &d.Facts
	if f.Title == "" {
		f.Title = firstStr(prop(ds, "name"))
	}
	if f.Identifier == "" && d.ID != page.String() {
		f.Identifier = d.ID
	}
	if f.Landing == "" {
		f.Landing = page.String()
		if u, err := url.Parse(firstStr(prop(ds, "url"))); err == nil && httpURL(u) {
			f.Landing = u.String()
		}
	}
	seen, names := map[string]bool{}, map[string]bool{}
	for _, x := range values(prop(ds, "distribution")) {
		m := g.deref(x)
		if m == nil || (m["@type"] != nil && !isType(m, "DataDownload")) {
			continue
		}
		if fd, ok := file(page, m); ok && (fd.Key == "" || !seen[fd.Key]) {
			seen[fd.Key] = true
			// Files of different folders may share a name (a Dataverse's
			// readme.txt): one identifier each.
			fd.FileName = datapackage.UniqueName(names, fd.FileName)
			d.Files = append(d.Files, fd)
		}
	}
	return d
}

// file is the Found of a DataDownload m; false when it has no contentUrl.
func file(page *url.URL, m map[string]any) (node.Found, bool) {
	raw := firstStr(prop(m, "contentUrl"))
	if raw == "" {
		raw = firstStr(prop(m, "contentURL"))
	}
	if raw == "" {
		return node.Found{}, false
	}
	f := node.Found{Size: -1}
	u, err := page.Parse(raw)
	if err != nil || !httpURL(u) || u.User != nil {
		f.Problem = fmt.Errorf("distribution contentUrl %q is not an http(s) URL", raw)
		return f, true
	}
	f.Key = u.String()
	f.FileName = firstStr(prop(m, "name"))
	if f.FileName == "" {
		if f.FileName = path.Base(u.Path); f.FileName == "/" || f.FileName == "." {
			f.FileName = u.Host
		}
	}
	f.FormatID = formatOf(values(prop(m, "encodingFormat")), f.FileName, path.Base(u.Path))
	f.Size = sizeOf(prop(m, "contentSize"))
	if f.Checksum = checksumOf(m); f.Checksum.Value != "" {
		f.Claim = "the page's JSON-LD gives"
	}
	f.Modified, _, _ = parseDate(firstStr(prop(m, "dateModified")))
	return f, true
}

// datasetID is the Dataset's @id when it is an http(s) URL or a DOI, else its
// identifier, else the page's URL.
func datasetID(ds map[string]any, page string) string {
	if id := str(ds["@id"]); isURLOrDOI(id) {
		return id
	}
	for _, x := range values(prop(ds, "identifier")) {
		switch v := x.(type) {
		case string:
			if s := strings.TrimSpace(v); s != "" {
				return s
			}
		case map[string]any:
			for _, s := range []string{firstStr(prop(v, "value")), firstStr(prop(v, "url")), str(v["@id"])} {
				if s != "" {
					return s
				}
			}
		}
	}
	return page
}

var doiRE = regexp.MustCompile(`^(?i:doi:)?10\.\d{4,9}/\S+$`)

// isURLOrDOI tells whether id is an absolute http(s) URL or a DOI.
func isURLOrDOI(id string) bool {
	if u, err := url.Parse(id); err == nil && httpURL(u) {
		return true
	}
	return doiRE.MatchString(id)
}

// formats is the official DataONE format list, parsed once.
var formats = sync.OnceValue(adapter.OfficialFormats)

// mediaAliases are media types sites use for a format DataONE lists under
// another id.
var mediaAliases = map[string]string{
	"text/tab-separated-values":    "text/tsv",
	"application/gzip":             "application/x-gzip",
	"application/ld+json":          "application/json-ld",
	"application/x-zip-compressed": "application/zip",
	"application/vnd.geo+json":     "application/geo+json",
}

// formatOf is the DataONE format id among a DataDownload's encodingFormat
// values: a specific one (netCDF-4, an XML schema) before a media type; else
// the one its file name's extension says; "" when neither knows.
func formatOf(encodings []any, names ...string) string {
	media := ""
	for _, e := range encodings {
		s := str(e)
		if s == "" {
			continue
		}
		id := ""
		if _, ok := formats().Lookup(s); ok {
			id = s
		} else if mt, _, err := mime.ParseMediaType(s); err == nil {
			if a, ok := mediaAliases[mt]; ok {
				id = a
			} else if _, ok := formats().Lookup(mt); ok {
				id = mt
			}
		}
		switch {
		case id == "":
		case !isMediaType(id):
			return id
		case media == "":
			media = id
		}
	}
	if media != "" {
		return media
	}
	for _, n := range names {
		if id := datapackage.FormatForName(n); id != "" && id != "application/octet-stream" {
			return id
		}
	}
	return ""
}

// isMediaType tells a type/subtype from other format ids (URIs, names).
func isMediaType(id string) bool {
	return !strings.Contains(id, ":") && strings.Count(id, "/") == 1
}

// sizeOf is a contentSize in whole bytes ("1234", "1234 B", "1234 bytes",
// or a JSON number); -1 when it says anything else ("1.2 MB").
func sizeOf(v any) int64 {
	s := firstStr(v)
	if s == "" {
		return -1
	}
	lower := strings.ToLower(s)
	for _, unit := range []string{"bytes", "byte", "b"} {
		if strings.HasSuffix(lower, unit) {
			lower = strings.TrimSpace(strings.TrimSuffix(lower, unit))
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// checksumOf is a DataDownload's first spdx:checksum whose algorithm DataONE
// knows; zero when it has none.
func checksumOf(m map[string]any) adapter.Checksum {
	for _, x := range values(spdxProp(m, "checksum")) {
		c, ok := x.(map[string]any)
		if !ok {
			continue
		}
		value := firstStr(spdxProp(c, "checksumValue"))
		alg := spdxProp(c, "algorithm")
		if alg == nil {
			alg = spdxProp(c, "checksumAlgorithm")
		}
		name := firstStr(alg)
		if name == "" {
			if a, ok := alg.(map[string]any); ok {
				name = str(a["@id"])
			}
		}
		if a, ok := algorithm(name); ok && value != "" {
			return adapter.Checksum{Algorithm: a, Value: strings.ToLower(value)}
		}
	}
	return adapter.Checksum{}
}

// algorithm is the label of an SPDX checksum algorithm ("sha256", "SHA256",
// "spdx:checksumAlgorithm_sha256", its full URI).
func algorithm(name string) (string, bool) {
	if i := strings.LastIndexAny(name, "#/:"); i >= 0 {
		name = name[i+1:]
	}
	if len(name) > len("checksumAlgorithm_") && strings.EqualFold(name[:len("checksumAlgorithm_")], "checksumAlgorithm_") {
		name = name[len("checksumAlgorithm_"):]
	}
	return adapter.CanonicalAlgorithm(name)
}

// schemaPrefixes are how a schema.org property's key may be written.
var schemaPrefixes = []string{"", "schema:", "sdo:", "http://schema.org/", "https://schema.org/"}

// prop is the value of schema.org property name in node m.
func prop(m map[string]any, name string) any {
	for _, p := range schemaPrefixes {
		if v, ok := m[p+name]; ok {
			return v
		}
	}
	return nil
}

// spdxPrefixes are how an SPDX property's key may be written.
var spdxPrefixes = []string{"spdx:", "http://spdx.org/rdf/terms#", "https://spdx.org/rdf/terms#", ""}

// spdxProp is the value of SPDX property name in node m.
func spdxProp(m map[string]any, name string) any {
	for _, p := range spdxPrefixes {
		if v, ok := m[p+name]; ok {
			return v
		}
	}
	return nil
}

// isType tells whether node m's @type includes t, with or without a prefix.
func isType(m map[string]any, t string) bool {
	for _, x := range values(m["@type"]) {
		s := str(x)
		if i := strings.LastIndexAny(s, "/#:"); i >= 0 {
			s = s[i+1:]
		}
		if s == t {
			return true
		}
	}
	return false
}

// values is v as a list: its items when it is a list (or an @list or @set
// object), else v alone; none for nil.
func values(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		var out []any
		for _, y := range x {
			out = append(out, values(y)...)
		}
		return out
	case map[string]any:
		if l, ok := x["@list"]; ok {
			return values(l)
		}
		if l, ok := x["@set"]; ok {
			return values(l)
		}
	}
	return []any{v}
}

// str is a literal's text: a string, a number, or an object's @value.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case json.Number:
		return x.String()
	case map[string]any:
		return str(x["@value"])
	}
	return ""
}

// firstStr is the first literal among v's values.
func firstStr(v any) string {
	for _, x := range values(v) {
		if s := str(x); s != "" {
			return s
		}
	}
	return ""
}

// ldScripts are the texts of the page's <script type="application/ld+json">
// elements, trimmed: a tolerant scan of the HTML, not a parse.
func ldScripts(page []byte) [][]byte {
	lower := asciiLower(page)
	var out [][]byte
	for at := 0; ; {
		i := bytes.Index(lower[at:], []byte("<script"))
		if i < 0 {
			return out
		}
		at += i + len("<script")
		if at < len(page) && !isSpace(page[at]) && page[at] != '>' && page[at] != '/' {
			continue // <scripts...>, not a script element
		}
		typ, end := scriptType(page, at)
		if end < 0 {
			return out
		}
		at = end
		stop := bytes.Index(lower[at:], []byte("</script"))
		if stop < 0 {
			return out
		}
		if mt, _, _ := mime.ParseMediaType(typ); mt == "application/ld+json" {
			out = append(out, bytes.TrimSpace(page[at:at+stop]))
		}
		at += stop
	}
}

// scriptType reads the attributes of a tag from page[at:] up to its '>': the
// value of its type attribute, and where its content starts (-1 when the tag
// does not end).
func scriptType(page []byte, at int) (typ string, end int) {
	for at < len(page) {
		for at < len(page) && (isSpace(page[at]) || page[at] == '/') {
			at++
		}
		if at >= len(page) {
			break
		}
		if page[at] == '>' {
			return typ, at + 1
		}
		start := at
		for at < len(page) && !isSpace(page[at]) && page[at] != '=' && page[at] != '>' && page[at] != '/' {
			at++
		}
		name := strings.ToLower(string(page[start:at]))
		for at < len(page) && isSpace(page[at]) {
			at++
		}
		if at >= len(page) || page[at] != '=' {
			continue // an attribute without a value
		}
		at++
		for at < len(page) && isSpace(page[at]) {
			at++
		}
		var value []byte
		if at < len(page) && (page[at] == '"' || page[at] == '\'') {
			q := page[at]
			j := bytes.IndexByte(page[at+1:], q)
			if j < 0 {
				return "", -1
			}
			value, at = page[at+1:at+1+j], at+2+j
		} else {
			start := at
			for at < len(page) && !isSpace(page[at]) && page[at] != '>' {
				at++
			}
			value = page[start:at]
		}
		if name == "type" {
			typ = strings.TrimSpace(string(value))
		}
	}
	return "", -1
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' }

// asciiLower is b with ASCII letters lowered, of the same length.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// dateLayouts are the W3C datetime forms of a sitemap's lastmod (and of
// schema.org dates), with how long a period each names.
var dateLayouts = []struct {
	layout string
	period func(time.Time) time.Time // the end of the period
}{
	{"2006-01-02T15:04:05Z07:00", nil},
	{"2006-01-02T15:04Z07:00", func(t time.Time) time.Time { return t.Add(time.Minute) }},
	{"2006-01-02T15:04:05", nil},
	{"2006-01-02 15:04:05", nil},
	{"2006-01-02", func(t time.Time) time.Time { return t.AddDate(0, 0, 1) }},
	{"2006-01", func(t time.Time) time.Time { return t.AddDate(0, 1, 0) }},
	{"2006", func(t time.Time) time.Time { return t.AddDate(1, 0, 0) }},
}

// parseDate reads a W3C datetime: when it starts, and when the period it
// names ends (a day's lastmod covers the whole day); false when s is not one.
// Times without a zone are UTC.
func parseDate(s string) (start, end time.Time, ok bool) {
	s = strings.TrimSpace(s)
	for _, l := range dateLayouts {
		t, err := time.Parse(l.layout, s)
		if err != nil {
			continue
		}
		switch {
		case l.period != nil:
			end = l.period(t)
		case strings.Contains(s, "."): // fractional seconds
			end = t.Add(time.Nanosecond)
		default:
			end = t.Add(time.Second)
		}
		return t, end, true
	}
	return time.Time{}, time.Time{}, false
}
