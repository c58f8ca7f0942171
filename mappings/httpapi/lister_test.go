package httpapi

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"go.yaml.in/yaml/v3"
)

// jsonOptions describe the fake's JSON API, without list.
const jsonOptions = `
pid: "legacy:{key}"
checksumAlgorithm: MD5
fields: {key: id, size: size, checksum: md5, formatId: mime, rightsHolder: owner, fileName: file_name, modified: updated, uploaded: created}
get: {url: "/api/records/{key}/content"}
put: {url: "/api/records/{key}/content"}
delete: {url: "/api/records/{key}/content"}
stat: {url: "/api/records/{key}", item: record}
`

// xmlOptions describe the fake's XML API, without list.
const xmlOptions = `
format: xml
dateLayout: "2006-01-02 15:04:05"
fields: {key: "@id", size: file.@size, checksum: checksum, checksumAlgorithm: checksum.@algorithm,
  formatId: file.@type, rightsHolder: owner, fileName: file.@name, modified: updated}
get: {url: "/api/records/{key}/content"}
stat: {url: "/xml/records/{key}"}
`

// listings are the ways the fake can be listed.
var listings = []struct {
	name, options string
	pages         int // for 2,500 records
}{
	{"json page", jsonOptions + `list: {url: "/api/records?page={page}&per_page={pageSize}", paging: page, pageSize: 100,
  items: records, since: "modified_since={since}"}`, 26}, // the 26th is empty
	{"json cursor", jsonOptions + `list: {url: "/api/records?page={cursor}&per_page={pageSize}", paging: cursor, pageSize: 300,
  items: records, next: next, since: "modified_since={since}"}`, 9},
	{"json nextURL", jsonOptions + `list: {url: "/api/records?page=1&per_page=450", paging: nextURL,
  items: records, next: links.next, since: "modified_since={since}"}`, 6},
	{"xml offset", xmlOptions + `list: {url: "/xml/records?offset={offset}&limit={pageSize}", paging: offset, pageSize: 250,
  items: records.record}`, 11},
	{"xml cursor", xmlOptions + `list: {url: "/xml/records?limit=500&token={cursor}", paging: cursor,
  items: records.record, next: resumptionToken}`, 5},
}

// harvest lists everything from the start, page by page.
func harvest(t *testing.T, s *Store, since time.Time) (all []node.Found, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, next, err := s.List(t.Context(), since, cursor)
		if err != nil {
			t.Fatalf("List(%q) after %d pages: %v", cursor, pages, err)
		}
		pages++
		all = append(all, page...)
		if next == "" {
			return all, pages
		}
		if pages > 1000 {
			t.Fatal("the listing does not end")
		}
		cursor = next
	}
}

// wantFound is what the store must say of the fake's record id.
func wantFound(l *legacy, id string, inXML bool) node.Found {
	r := l.records[id]
	f := node.Found{Key: id, PID: id, Size: int64(len(r.content)), FormatID: r.mime, RightsHolder: r.owner,
		FileName: r.fileName, Modified: r.updated}
	if inXML {
		sum := sha256.Sum256(r.content)
		f.Checksum = adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])}
	} else {
		sum := md5.Sum(r.content)
		f.Checksum = adapter.Checksum{Algorithm: "MD5", Value: hex.EncodeToString(sum[:])}
		f.PID, f.Uploaded = "legacy:"+id, r.created
	}
	return f
}

func sameFound(a, b node.Found) bool {
	return a.Key == b.Key && a.PID == b.PID && a.Size == b.Size && a.Checksum == b.Checksum && a.FormatID == b.FormatID &&
		a.RightsHolder == b.RightsHolder && a.FileName == b.FileName && a.Modified.Equal(b.Modified) && a.Uploaded.Equal(b.Uploaded)
}

// TestListPages pages through 2,500 records in every way the fake allows:
// each record once, in order, with every field.
func TestListPages(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 2500)
	for _, tc := range listings {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, upstreamConfig(t, l.URL, tc.options), nil)
			all, pages := harvest(t, s, time.Time{})
			if len(all) != 2500 || pages != tc.pages {
				t.Fatalf("%d records in %d pages, want 2500 in %d", len(all), pages, tc.pages)
			}
			for i, f := range all {
				want := wantFound(l, fmt.Sprintf("r%05d", i), strings.HasPrefix(tc.name, "xml"))
				if !sameFound(f, want) {
					t.Fatalf("record %d:\n got %+v\nwant %+v", i, f, want)
				}
			}
		})
	}
}

// TestListSince: with since, only records changed at or after it are listed
// where the options say how to ask; the XML API cannot filter and lists all.
func TestListSince(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 2500)
	since := epoch.Add(2000 * time.Minute) // records 2000..2499
	for _, tc := range listings {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, upstreamConfig(t, l.URL, tc.options), nil)
			all, _ := harvest(t, s, since)
			want, first := 500, 2000
			if strings.HasPrefix(tc.name, "xml") {
				want, first = 2500, 0
			}
			if len(all) != want || all[0].Key != fmt.Sprintf("r%05d", first) {
				t.Errorf("%d records from %s, want %d from r%05d", len(all), all[0].Key, want, first)
			}
		})
	}
	var asked bool
	for _, q := range l.listQueries() {
		asked = asked || strings.Contains(q, "modified_since=2021-03-05T14%3A26%3A07Z")
	}
	if !asked {
		t.Errorf("no list request asked for changes since %s: %q", since, l.listQueries())
	}
}

func TestStat(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 50)
	for _, tc := range []struct {
		name, options string
		inXML         bool
	}{{"json", jsonOptions, false}, {"xml", xmlOptions, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, upstreamConfig(t, l.URL, tc.options), nil)
			f, err := s.Stat(t.Context(), "r00042")
			if err != nil {
				t.Fatal(err)
			}
			if want := wantFound(l, "r00042", tc.inXML); !sameFound(*f, want) {
				t.Errorf("\n got %+v\nwant %+v", *f, want)
			}
			if _, err := s.Stat(t.Context(), "r99999"); !adapter.IsKind(err, adapter.NotFound) {
				t.Errorf("Stat of a missing record: %v", err)
			}
		})
	}
}

// TestGetPutDelete: bytes come from the content endpoint, and with put and
// delete in the options a new record appears in the list and goes again.
func TestGetPutDelete(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 3)
	s := open(t, upstreamConfig(t, l.URL, listings[0].options), nil)
	ctx := t.Context()
	r, err := s.Get(ctx, "r00001")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || string(b) != "content of r00001\n" {
		t.Errorf("Get: %q, %v", b, err)
	}
	r.Close()
	if _, err := s.Get(ctx, "r00009"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get of a missing record: %v", err)
	}
	if n, err := s.Put(ctx, "new/one", strings.NewReader("fresh bytes")); err != nil || n != 11 {
		t.Fatalf("Put: %d, %v", n, err)
	}
	all, _ := harvest(t, s, time.Time{})
	if len(all) != 4 || all[3].Key != "new/one" || all[3].Size != 11 || all[3].PID != "legacy:new/one" {
		t.Errorf("after Put the list has %+v", all)
	}
	if err := s.Delete(ctx, "new/one"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "new/one"); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	if _, err := s.Get(ctx, "new/one"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
}

// TestReadOnly: without put, delete, stat or list, those operations answer
// NotImplemented, naming the upstream.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	l := newLegacy(t, 1)
	s := open(t, upstreamConfig(t, l.URL, `get: {url: "/api/records/{key}/content"}`), nil)
	ctx := t.Context()
	_, err := s.Put(ctx, "k", strings.NewReader("x"))
	if e := adapter.AsException(err); e.Kind != adapter.NotImplemented || !strings.Contains(e.Description, `upstream "legacy" is a legacy repository that accepts no uploads`) {
		t.Errorf("Put: %v", err)
	}
	if err := s.Delete(ctx, "r00000"); !adapter.IsKind(err, adapter.NotImplemented) {
		t.Errorf("Delete: %v", err)
	}
	if _, err := s.Stat(ctx, "r00000"); !adapter.IsKind(err, adapter.NotImplemented) {
		t.Errorf("Stat: %v", err)
	}
	if _, _, err := s.List(ctx, time.Time{}, ""); !adapter.IsKind(err, adapter.NotImplemented) {
		t.Errorf("List: %v", err)
	}
	if r, err := s.Get(ctx, "r00000"); err != nil {
		t.Errorf("Get: %v", err)
	} else {
		r.Close()
	}
}

// TestMalformedAnswers: answers the options do not describe are
// ServiceFailures that name the option, the path and the value; an item the
// options cannot read comes in its page with that problem, beside the others;
// never a panic.
func TestMalformedAnswers(t *testing.T) {
	t.Parallel()
	const list = `list: {url: "/list?c={cursor}", items: records, paging: cursor, next: next}` + "\n"
	for _, tc := range []struct {
		name, options, body, want string
	}{
		{"missing key", jsonOptions + list, `{"records": [{"id": "a"}, {"size": 3}]}`,
			`item 1: options.fields.key ("id"): absent`},
		{"bad date", jsonOptions + list, `{"records": [{"id": "a", "updated": "yesterday"}]}`,
			`item 0: options.fields.modified ("updated"): "yesterday" is not a date (RFC 3339 or an HTTP date)`},
		{"bad date with layout", xmlOptions + `list: {url: /list, items: r}`, `<x><r id="a"><updated>2021-13-45</updated></r></x>`,
			`options.fields.modified ("updated"): "2021-13-45" is not a date (RFC 3339, "2006-01-02 15:04:05" or an HTTP date)`},
		{"size not a number", jsonOptions + list, `{"records": [{"id": "a", "size": "big"}]}`,
			`options.fields.size ("size"): "big" is not a size in bytes`},
		{"negative size", jsonOptions + list, `{"records": [{"id": "a", "size": -4}]}`,
			`"-4" is not a size in bytes`},
		{"fractional size", jsonOptions + list, `{"records": [{"id": "a", "size": 1.5}]}`,
			`"1.5" is not a size in bytes`},
		{"object for a value", jsonOptions + list, `{"records": [{"id": {"value": "a"}}]}`,
			`options.fields.key ("id"): is an object, not a single value`},
		{"unknown algorithm", xmlOptions + `list: {url: /list, items: r}`, `<x><r id="a"><checksum algorithm="CRC32">1</checksum></r></x>`,
			`options.fields.checksumAlgorithm ("checksum.@algorithm"): "CRC32" is not one of MD5, SHA-1, SHA-256, SHA-384, SHA-512`},
		{"checksum without algorithm", xmlOptions + `list: {url: /list, items: r}`, `<x><r id="a"><checksum>1</checksum></r></x>`,
			`options.fields.checksumAlgorithm ("checksum.@algorithm"): absent, and options.checksumAlgorithm is not set`},
		{"no items", jsonOptions + list, `{"data": []}`, `options.list.items: the answer has no "records"`},
		{"items not a list", jsonOptions + list, `{"records": {"id": "a"}}`, `options.list.items: "records" is an object, not a list`},
		{"xml items parent missing", xmlOptions + `list: {url: /list, items: records.record}`, `<x><data/></x>`,
			`options.list.items: the answer has no records`},
		{"next is an object", jsonOptions + list, `{"records": [], "next": {"page": 2}}`,
			`options.list.next ("next"): is an object, not a single value`},
		{"next is this page", jsonOptions + list, `{"records": [], "next": "c1"}`, `the next page is this page again ("c1")`},
		{"not JSON", jsonOptions + list, `<html>maintenance</html>`, `not JSON: invalid character '<'`},
		{"truncated JSON", jsonOptions + list, `{"records": [{"id": "a"`, `not JSON: unexpected EOF`},
		{"not XML", xmlOptions + `list: {url: /list, items: r}`, `{"r": 1}`, `not XML: no root element`},
		{"broken XML", xmlOptions + `list: {url: /list, items: r}`, `<x><r id="a"></x>`, `not XML: XML syntax error`},
		{"next URL elsewhere", jsonOptions + `list: {url: /list, items: records, paging: nextURL, next: next}`,
			`{"records": [], "next": "http://elsewhere.example.org/list?page=2"}`, `the link to path "/list" is on another scheme or host than options.baseURL`},
		{"stat item missing", jsonOptions, `{"error": "gone"}`, `options.stat.item: the answer has no "record"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			s := open(t, upstreamConfig(t, srv.URL, tc.options), nil)
			var err error
			if s.list != nil {
				cursor := ""
				if tc.name == "next is this page" {
					cursor = "c1"
				}
				var page []node.Found
				page, _, err = s.List(t.Context(), time.Time{}, cursor)
				if err == nil {
					bad := slices.IndexFunc(page, func(f node.Found) bool { return f.Problem != nil })
					if bad < 0 || !strings.Contains(page[bad].Problem.Error(), tc.want) {
						t.Errorf("page %+v: want an item whose problem says %q", page, tc.want)
					}
					for i, f := range page {
						if i != bad && (f.Problem != nil || f.Key == "") {
							t.Errorf("item %d %+v: the other items should read", i, f)
						}
					}
					return
				}
			} else {
				_, err = s.Stat(t.Context(), "a")
			}
			if e := adapter.AsException(err); e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, tc.want) ||
				!strings.Contains(e.Description, `upstream "legacy" answered for`) {
				t.Errorf("got %v\nwant a ServiceFailure with %q", err, tc.want)
			}
		})
	}
}

// repeated reads as an endless run of one byte.
type repeated byte

func (r repeated) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestAnswerTooLarge: a list answer is read whole, up to a limit (64 MiB;
// 1 MiB here).
func TestAnswerTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"records": ["`)
		io.Copy(w, io.LimitReader(repeated('a'), limit-20))
		io.WriteString(w, `"]}`)
	}))
	t.Cleanup(srv.Close)
	s := open(t, upstreamConfig(t, srv.URL, `{get: {url: "/{key}"}, list: {url: /, items: records, fields: {key: .}}}`), nil)
	s.answerLimit = limit
	if page, _, err := s.List(t.Context(), time.Time{}, ""); err != nil || len(page) != 1 {
		t.Fatalf("an answer under the limit: %d, %v", len(page), err)
	}
	s.answerLimit = limit - 20
	_, _, err := s.List(t.Context(), time.Time{}, "")
	if e := adapter.AsException(err); !strings.Contains(e.Description, "the answer is larger than 1048556 bytes") {
		t.Errorf("List: %v", err)
	}
}

// TestListOfNames: an API that lists bare identifiers (key: .), with a
// where condition, page numbers from 0, and the cursor the harvester hands back.
func TestListOfNames(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("p") {
		case "0":
			io.WriteString(w, `{"ids": ["a", "b", "c"]}`)
		case "1":
			io.WriteString(w, `{"ids": ["d"]}`)
		default:
			http.Error(w, "no such page", http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	s := open(t, upstreamConfig(t, srv.URL, `{get: {url: "/{key}"}, list: {url: "/ids?p={page}&n={pageSize}", paging: page,
  firstPage: 0, pageSize: 3, items: ids, where: {".": "a"}, fields: {key: .}}}`), nil)
	page, next, err := s.List(t.Context(), time.Time{}, "")
	if err != nil || len(page) != 1 || page[0].Key != "a" || page[0].PID != "a" || page[0].Size != -1 || next != "1" {
		t.Fatalf("page 0: %+v, next %q, %v", page, next, err)
	}
	if page, next, err = s.List(t.Context(), time.Time{}, next); err != nil || len(page) != 0 || next != "" {
		t.Fatalf("page 1: %+v, next %q, %v", page, next, err)
	}
	if _, _, err := s.List(t.Context(), time.Time{}, "not-a-page"); !adapter.IsKind(err, adapter.InvalidRequest) {
		t.Errorf("a foreign cursor: %v", err)
	}
	if _, _, err := s.List(t.Context(), time.Time{}, "7"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("a page past the end that the upstream refuses: %v", err)
	}
}

// TestHeaders: the store's headers, header files and each operation's
// headers (with placeholders) reach the upstream; the answer format sets Accept.
func TestHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		io.WriteString(w, `{"id": "k"}`)
	}))
	t.Cleanup(srv.Close)
	tokenFile := t.TempDir() + "/token"
	if err := os.WriteFile(tokenFile, []byte("Bearer s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, upstreamConfig(t, srv.URL, `
headers: {X-Api-Version: "2"}
headerFiles: {Authorization: `+tokenFile+`}
get: {url: "/{key}"}
stat: {url: "/{key}", headers: {X-Record: "{key}", X-Api-Version: "3"}, fields: {key: id}}`), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.Stat(ctx, "a b/c"); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for name, want := range map[string]string{"Authorization": "Bearer s3cret", "X-Api-Version": "3",
		"X-Record": "a%20b%2Fc", "Accept": "application/json"} {
		if h.Get(name) != want {
			t.Errorf("%s: %q, want %q", name, h.Get(name), want)
		}
	}
}

// TestExampleConfig: the example configuration describes the fake's JSON API
// (with the fake's address and a token file of the test's own): it opens and
// harvests.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../../config/examples/http.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	l := newLegacy(t, 450)
	u := cfg.Upstreams[0]
	u.BaseURL = l.URL
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("Bearer x\n"), 0o600)
	if !replaceScalar(&u.Options, "/run/secrets/archive-token", tokenFile) {
		t.Fatal("the example reads no /run/secrets/archive-token")
	}
	s := open(t, u, nil)
	all, pages := harvest(t, s, time.Time{})
	if len(all) != 450 || pages != 3 || all[449].PID != "archive:r00449" || all[449].Checksum.Algorithm != "MD5" {
		t.Errorf("%d records in %d pages, the last %+v", len(all), pages, all[len(all)-1])
	}
	if _, err := s.Put(t.Context(), "k", strings.NewReader("x")); !adapter.IsKind(err, adapter.NotImplemented) {
		t.Errorf("Put on the read-only example: %v", err)
	}
}

// replaceScalar replaces the scalar old under n with new.
func replaceScalar(n *yaml.Node, old, new string) bool {
	if n.Kind == yaml.ScalarNode && n.Value == old {
		n.Value = new
		return true
	}
	found := false
	for _, c := range n.Content {
		found = replaceScalar(c, old, new) || found
	}
	return found
}
