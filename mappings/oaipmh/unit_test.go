package oaipmh

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/node"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, baseURL, options, wantErr string }{
		{"defaults", "http://h/oai", "", ""},
		{"everything", "https://h/oai?x=1", "{set: 'a:b', metadataPrefix: eml, files: none}", ""},
		{"unknown option", "http://h/oai", "{sets: a}", "field sets not found"},
		{"bad", "ftp://h/oai", "{files: ore, metadataPrefix: 'a b'}",
			`oaipmh: upstream "repo": baseURL "ftp://h/oai" is not an http(s) URL` + "\n" +
				`oaipmh: upstream "repo": options.metadataPrefix: "a b" is not a metadata prefix` + "\n" +
				`oaipmh: upstream "repo": options.files: "ore" is not signposting or none`},
		{"verb", "http://h/oai?verb=Identify", "", "must not have a verb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := mappingtest.UpstreamConfig(t, config.UpstreamOAIPMH, "repo", tc.baseURL, tc.options)
			mappingtest.CheckNew(t, u, New, tc.wantErr)
			if err := CheckOptions(u); (err == nil) != (tc.wantErr == "") {
				t.Errorf("CheckOptions: %v", err)
			}
		})
	}
}

func TestParseLinks(t *testing.T) {
	t.Parallel()
	got := parseLinks([]string{
		`<https://x/a.csv>; rel="item"; type="text/csv", <https://x/meta.xml> ; rel=describedby ; type="application/xml"`,
		`<https://x/b,c.csv>; rel="item cite-as"; title="a, \"quoted\"; title"; type=text/plain, bad, <https://x/d>;rel=ITEM;rel=other`,
	})
	want := []link{
		{"https://x/a.csv", map[string]string{"rel": "item", "type": "text/csv"}},
		{"https://x/meta.xml", map[string]string{"rel": "describedby", "type": "application/xml"}},
		{"https://x/b,c.csv", map[string]string{"rel": "item cite-as", "title": `a, "quoted"; title`, "type": "text/plain"}},
		{"https://x/d", map[string]string{"rel": "item"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("links\n%q\nwant\n%q", got, want)
	}
	if !got[2].has("item") || got[1].has("item") {
		t.Error("has")
	}
}

// TestCut: an element cut out of a page declares what it inherits, and only
// that, and parses alone to the same names.
func TestCut(t *testing.T) {
	t.Parallel()
	doc := `<r xmlns="urn:outer" xmlns:a="urn:a" xmlns:b="urn:b" xmlns:unused="urn:u"><m>` +
		`<a:x b:at="1" xml:lang="en"><y/><a:z xmlns:a="urn:a2"><a:w/></a:z></a:x></m></r>`
	p := newPage(strings.NewReader(doc))
	for {
		tok, off, err := p.next()
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := tok.(xml.StartElement); ok && s.Name.Local == "x" {
			el, err := p.cut(s, off)
			if err != nil {
				t.Fatal(err)
			}
			want := xml.Header + `<a:x xmlns="urn:outer" xmlns:a="urn:a" xmlns:b="urn:b" b:at="1" xml:lang="en"><y/><a:z xmlns:a="urn:a2"><a:w/></a:z></a:x>`
			if string(el.body) != want || el.space != "urn:a" {
				t.Fatalf("cut %s (%s)\nwant %s", el.body, el.space, want)
			}
			var v struct {
				XMLName xml.Name
				Y       struct{ XMLName xml.Name } `xml:"urn:outer y"`
				Z       struct {
					W struct{ XMLName xml.Name } `xml:"urn:a2 w"`
				} `xml:"urn:a2 z"`
			}
			if err := xml.Unmarshal(el.body, &v); err != nil || v.XMLName.Space != "urn:a" || v.Y.XMLName.Space != "urn:outer" || v.Z.W.XMLName.Space != "urn:a2" {
				t.Errorf("parsed %+v, %v", v, err)
			}
			return
		}
	}
}

// fake is an OAI-PMH endpoint that answers ListRecords with pages[token].
func fake(t *testing.T, pages map[string]string) *Source {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Query().Get("resumptionToken")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><responseDate>2024-01-01T00:00:00Z</responseDate><request>x</request>%s</OAI-PMH>`, body)
	}))
	t.Cleanup(srv.Close)
	return mappingtest.Open(t, mappingtest.UpstreamConfig(t, config.UpstreamOAIPMH, "repo", srv.URL, "{metadataPrefix: oai_dc}"), nil, New)
}

func rec(id string) string {
	return `<record><header><identifier>` + id + `</identifier><datestamp>2024-01-01</datestamp></header></record>`
}

func TestWalkErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pages   map[string]string
		ids     string
		wantErr string
	}{
		{"noRecordsMatch", map[string]string{"": `<error code="noRecordsMatch">none</error>`}, "", ""},
		{"empty token ends", map[string]string{"": `<ListRecords>` + rec("1") + `<resumptionToken cursor="0"/></ListRecords>`}, "1", ""},
		{"token repeats", map[string]string{
			"":   `<ListRecords>` + rec("1") + `<resumptionToken>t1</resumptionToken></ListRecords>`,
			"t1": `<ListRecords>` + rec("2") + `<resumptionToken>t1</resumptionToken></ListRecords>`,
		}, "1 2", `ListRecords gave the resumption token "t1" twice`},
		{"badResumptionToken", map[string]string{
			"":   `<ListRecords>` + rec("1") + `<resumptionToken>t1</resumptionToken></ListRecords>`,
			"t1": `<error code="badResumptionToken">expired</error>`,
		}, "1", `upstream "repo" refused its own resumption token (badResumptionToken: expired)`},
		{"cannotDisseminateFormat", map[string]string{"": `<error code="cannotDisseminateFormat">no oai_dc</error>`}, "",
			`upstream "repo" answered ListRecords with the OAI-PMH error cannotDisseminateFormat: no oai_dc`},
		{"truncated", map[string]string{"": `<ListRecords>` + rec("1") + `<record><header>`}, "",
			`the answer to OAI-PMH ListRecords is not well-formed XML`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			err := fake(t, tc.pages).Walk(context.Background(), time.Time{}, func(d *node.Dataset) error {
				if d.Problem != nil || d.Version != "2024-01-01" || !d.Modified.Equal(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) {
					t.Errorf("%+v", d)
				}
				got = append(got, d.ID)
				return nil
			})
			if strings.Join(got, " ") != tc.ids {
				t.Errorf("walked %q, want %q", got, tc.ids)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Walk: %v", err)
			case tc.wantErr != "" && (!adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Walk: %v, want a ServiceFailure with %q", err, tc.wantErr)
			}
		})
	}
}

func TestLandingPage(t *testing.T) {
	t.Parallel()
	for ids, want := range map[string]string{
		"hdl:1/2 http://x/l doi:10.1/a": "http://x/l",
		"hdl:1/2 doi:10.5072/AB":        "https://doi.org/10.5072/AB",
		"info:doi/10.1/b":               "https://doi.org/10.1/b",
		"10.1/c":                        "https://doi.org/10.1/c",
		"urn:x ftp://y/z":               "",
	} {
		if got := landingPage(strings.Fields(ids)); got != want {
			t.Errorf("landingPage(%s) = %q, want %q", ids, got, want)
		}
	}
}
