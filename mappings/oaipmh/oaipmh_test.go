package oaipmh

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/node"
)

func open(t *testing.T, baseURL, options string) *Source {
	t.Helper()
	u := mappingtest.UpstreamConfig(t, config.UpstreamOAIPMH, "repo", baseURL, options)
	return mappingtest.Open(t, u, nil, New)
}

func walk(t *testing.T, s *Source, since time.Time) []*node.Dataset {
	t.Helper()
	var out []*node.Dataset
	if err := s.Walk(context.Background(), since, func(d *node.Dataset) error {
		out = append(out, d)
		return nil
	}); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return out
}

func ids(ds []*node.Dataset) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.ID)
	}
	return strings.Join(s, " ")
}

// dc is an oai_dc document as parsed on its own.
type dc struct {
	XMLName     xml.Name `xml:"http://www.openarchives.org/OAI/2.0/oai_dc/ dc"`
	Title       []string `xml:"http://purl.org/dc/elements/1.1/ title"`
	Creator     []string `xml:"http://purl.org/dc/elements/1.1/ creator"`
	Subject     []string `xml:"http://purl.org/dc/elements/1.1/ subject"`
	Description []string `xml:"http://purl.org/dc/elements/1.1/ description"`
	Identifier  []string `xml:"http://purl.org/dc/elements/1.1/ identifier"`
	Schema      string   `xml:"http://www.w3.org/2001/XMLSchema-instance schemaLocation,attr"`
}

func parseDC(t *testing.T, d *node.Dataset) dc {
	t.Helper()
	if d.Metadata == nil {
		t.Fatalf("%s: no metadata", d.ID)
	}
	var v dc
	if err := xml.Unmarshal(d.Metadata.Body, &v); err != nil {
		t.Fatalf("%s: the metadata does not parse alone: %v\n%s", d.ID, err, d.Metadata.Body)
	}
	return v
}

func no() *bool { b := false; return &b }

// repository is the fixture's first state: five records, one deleted, in
// two sets, three of them with Signposting landing pages.
func repository(origin string) fixture {
	landing := func(n string) string { return origin + "/landing/" + n }
	return fixture{
		Sets: []string{"a", "b"},
		Records: []fixtureRecord{
			{ID: "oai:fixture:1", Datestamp: "2024-01-01T10:00:00Z", Sets: []string{"a"}, DC: map[string][]string{
				"title": {"Lake temperatures"}, "creator": {"Doe, Jane", "Roe, Richard"}, "subject": {"limnology"},
				"description": {"Hourly temperatures of a lake."}, "identifier": {"hdl:123/1", landing("1")}}},
			{ID: "oai:fixture:2", Datestamp: "2024-01-02T10:00:00Z", Sets: []string{"b"}, Deleted: true},
			{ID: "oai:fixture:3", Datestamp: "2024-01-03T10:00:00Z", Sets: []string{"a"}, DC: map[string][]string{
				"title": {"Soils & <roots>"}, "identifier": {landing("3")}}},
			{ID: "oai:fixture:4", Datestamp: "2024-01-04T10:00:00Z", Sets: []string{"b"}, DC: map[string][]string{
				"title": {"No files"}}},
			{ID: "oai:fixture:5", Datestamp: "2024-01-05T10:00:00Z", Sets: []string{"a"}, DC: map[string][]string{
				"title": {"Birds"}, "identifier": {landing("5")}}},
		},
		Landing: map[string]fixturePage{
			"1": {Files: []fixtureFile{
				{Name: "table.csv", Type: "text/csv", Content: "t,temp\n1,4.5\n2,4.7\n", Modified: "2024-01-01T09:00:00Z"},
				{Name: "r1.txt", Type: "application/octet-stream", Content: "read me", Relative: true, Disposition: "README.txt"},
			}},
			"3": {Head: no(), Files: []fixtureFile{{Name: "soil.csv", Type: "text/csv; header=present", Content: "a\n1\n"}}},
			"5": {Files: []fixtureFile{{Name: "birds.json", Type: "application/json", Content: `{"birds":3}`}}},
		},
	}
}

// TestProvider walks pyoai's OAI-PMH server over a fixture repository.
func TestProvider(t *testing.T) {
	p := startProvider(t, fixture{})
	f := repository(p.origin)
	p.write(t, f)
	endpoint := p.origin + "/oai"
	s := open(t, endpoint, "")
	ctx := context.Background()

	t.Run("walk", func(t *testing.T) {
		ds := walk(t, s, time.Time{})
		if got, want := ids(ds), "oai:fixture:1 oai:fixture:2 oai:fixture:3 oai:fixture:4 oai:fixture:5"; got != want {
			t.Fatalf("walked %s, want %s (2 records a page: resumption tokens)", got, want)
		}
		for i, d := range ds {
			r := f.Records[i]
			if d.Problem != nil {
				t.Errorf("%s: %v", d.ID, d.Problem)
			}
			if d.Version != r.Datestamp || !d.Modified.Equal(mustTime(t, r.Datestamp)) || d.Deleted != r.Deleted {
				t.Errorf("%s: version %q modified %v deleted %v", d.ID, d.Version, d.Modified, d.Deleted)
			}
			if r.Deleted {
				if d.Metadata != nil || d.Files != nil {
					t.Errorf("%s: a deleted record has metadata or files", d.ID)
				}
				continue
			}
			if d.Metadata.FormatID != datapackage.FormatOAIDC {
				t.Errorf("%s: format %q", d.ID, d.Metadata.FormatID)
			}
			v := parseDC(t, d)
			if strings.Join(v.Title, "|") != strings.Join(r.DC["title"], "|") || strings.Join(v.Creator, "|") != strings.Join(r.DC["creator"], "|") ||
				strings.Join(v.Identifier, "|") != strings.Join(r.DC["identifier"], "|") {
				t.Errorf("%s: metadata %+v, want %v", d.ID, v, r.DC)
			}
			if !strings.HasPrefix(v.Schema, "http://purl.org/dc/elements/1.1/ ") {
				t.Errorf("%s: xsi:schemaLocation %q: the inherited xsi namespace is not declared", d.ID, v.Schema)
			}
		}
		d1 := ds[0]
		if d1.Facts.Landing != p.origin+"/landing/1" {
			t.Errorf("landing page %q", d1.Facts.Landing)
		}
		want := []node.Found{
			{Key: p.origin + "/files/1/table.csv", Size: int64(len(f.Landing["1"].Files[0].Content)), FormatID: "text/csv", FileName: "table.csv", Modified: mustTime(t, "2024-01-01T09:00:00Z")},
			{Key: p.origin + "/files/1/r1.txt", Size: 7, FormatID: datapackage.FormatForName("README.txt"), FileName: "README.txt"},
		}
		checkFiles(t, d1, want)
		checkFiles(t, ds[2], []node.Found{{Key: p.origin + "/files/3/soil.csv", Size: 4, FormatID: "text/csv", FileName: "soil.csv"}})
		checkFiles(t, ds[3], nil)
		checkFiles(t, ds[4], []node.Found{{Key: p.origin + "/files/5/birds.json", Size: 11, FormatID: "application/json", FileName: "birds.json"}})
	})

	t.Run("exact bytes", func(t *testing.T) {
		// The metadata is the page's own bytes, with the xsi declaration it
		// inherits from the envelope added to its root.
		ds := walk(t, open(t, endpoint, "{metadataPrefix: oai_dc}"), time.Time{})
		resp, err := http.Get(endpoint + "?verb=ListRecords&metadataPrefix=oai_dc")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(ds[0].Metadata.Body)
		decl := ` xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"`
		if !strings.HasPrefix(body, xml.Header+"<oai_dc:dc"+decl+" ") {
			t.Fatalf("metadata starts %.200q", body)
		}
		inPage := "<oai_dc:dc" + strings.TrimPrefix(body, xml.Header+"<oai_dc:dc"+decl)
		if !bytes.Contains(page, []byte(inPage)) || !strings.HasSuffix(inPage, "</oai_dc:dc>") {
			t.Errorf("metadata is not the page's bytes:\n%s\npage:\n%s", inPage, page)
		}
	})

	t.Run("from", func(t *testing.T) {
		ds := walk(t, s, mustTime(t, "2024-01-03T10:00:00Z").Add(500*time.Millisecond))
		if got, want := ids(ds), "oai:fixture:3 oai:fixture:4 oai:fixture:5"; got != want {
			t.Errorf("walked %s from the 3rd, want %s", got, want)
		}
		if ds := walk(t, s, mustTime(t, "2025-01-01T00:00:00Z")); len(ds) != 0 {
			t.Errorf("walked %s after the last change (noRecordsMatch), want none", ids(ds))
		}
	})

	t.Run("set", func(t *testing.T) {
		ds := walk(t, open(t, endpoint, "{set: a, files: none}"), time.Time{})
		if got, want := ids(ds), "oai:fixture:1 oai:fixture:3 oai:fixture:5"; got != want {
			t.Errorf("walked %s in set a, want %s", got, want)
		}
		for _, d := range ds {
			if d.Files != nil {
				t.Errorf("%s: files %v with files: none", d.ID, d.Files)
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		key := p.origin + "/files/1/table.csv"
		r, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		sk, ok := r.(io.ReadSeeker)
		if !ok {
			t.Fatalf("Get gives a %T, which does not seek", r)
		}
		if _, err := sk.Seek(7, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(sk)
		if err != nil || string(b) != "1,4.5\n2,4.7\n" {
			t.Errorf("from byte 7: %q, %v", b, err)
		}
		if _, err := sk.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(sk); err != nil || string(b) != f.Landing["1"].Files[0].Content {
			t.Errorf("whole: %q, %v", b, err)
		}
		for _, key := range []string{p.origin + "/files/1/gone.csv", "ftp://x/y", "oai:fixture:1"} {
			if _, err := s.Get(ctx, key); !adapter.IsKind(err, adapter.NotFound) {
				t.Errorf("Get(%q): %v, want NotFound", key, err)
			}
		}
	})

	t.Run("bad set", func(t *testing.T) {
		err := open(t, endpoint, "{set: nosuchset}").Walk(ctx, time.Time{}, func(*node.Dataset) error { return nil })
		if !adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), `upstream "repo" answered ListRecords with the OAI-PMH error badArgument: There is no set 'nosuchset'`) {
			t.Errorf("Walk: %v", err)
		}
	})

	t.Run("fn error", func(t *testing.T) {
		stop := fmt.Errorf("stop")
		n := 0
		err := s.Walk(ctx, time.Time{}, func(*node.Dataset) error { n++; return stop })
		if err != stop || n != 1 {
			t.Errorf("Walk: %v after %d", err, n)
		}
	})

	t.Run("datacite preferred", func(t *testing.T) {
		g := repository(p.origin)
		g.Formats = []string{"oai_dc", "oai_datacite"}
		p.write(t, g)
		defer p.write(t, f)
		ds := walk(t, s, time.Time{})
		d := ds[0]
		type resource struct {
			XMLName    xml.Name `xml:"http://datacite.org/schema/kernel-4 resource"`
			Identifier []string `xml:"identifier"`
			Title      string   `xml:"titles>title"`
		}
		var v resource
		if err := xml.Unmarshal(d.Metadata.Body, &v); err != nil || v.Title != "Lake temperatures" {
			t.Fatalf("metadata %+v, %v:\n%s", v, err, d.Metadata.Body)
		}
		if len(d.Files) != 2 || d.Facts.Landing != p.origin+"/landing/1" {
			t.Errorf("landing %q, files %v", d.Facts.Landing, d.Files)
		}
	})

	t.Run("changes", func(t *testing.T) {
		g := repository(p.origin)
		g.Records[0].Datestamp = "2024-02-01T08:00:00Z"
		g.Records[0].DC["title"] = []string{"Lake temperatures, corrected"}
		g.Landing["1"].Files[0].Content = "t,temp\n1,4.4\n2,4.7\n3,4.9\n"
		g.Records[2] = fixtureRecord{ID: "oai:fixture:3", Datestamp: "2024-02-02T08:00:00Z", Sets: []string{"a"}, Deleted: true}
		p.write(t, g)
		ds := walk(t, s, mustTime(t, "2024-01-05T10:00:01Z"))
		if got, want := ids(ds), "oai:fixture:1 oai:fixture:3"; got != want {
			t.Fatalf("walked %s after the change, want %s", got, want)
		}
		if d := ds[0]; d.Version != "2024-02-01T08:00:00Z" || parseDC(t, d).Title[0] != "Lake temperatures, corrected" || len(d.Files) != 2 || d.Files[0].Size != int64(len(g.Landing["1"].Files[0].Content)) {
			t.Errorf("new version %q, files %+v", d.Version, d.Files)
		}
		if d := ds[1]; !d.Deleted || d.Version != "2024-02-02T08:00:00Z" {
			t.Errorf("deletion: %+v", d)
		}
		if ds := walk(t, s, time.Time{}); len(ds) != 5 || !ds[2].Deleted {
			t.Errorf("a whole walk: %s", ids(ds))
		}
	})

	t.Run("down", func(t *testing.T) {
		down := open(t, "http://127.0.0.1:"+freePort(t)+"/oai", "")
		start := time.Now()
		err := down.Walk(ctx, time.Time{}, func(*node.Dataset) error { return nil })
		if !adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), `upstream "repo" is unreachable`) {
			t.Errorf("Walk: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("an endpoint that is down took %v to fail", d)
		}
	})
}

func checkFiles(t *testing.T, d *node.Dataset, want []node.Found) {
	t.Helper()
	if len(d.Files) != len(want) {
		t.Fatalf("%s: files %+v, want %+v", d.ID, d.Files, want)
	}
	for i, got := range d.Files {
		w := want[i]
		if w.Modified.IsZero() {
			w.Modified = got.Modified // the provider's file dates are whatever they are
		}
		if got.Key != w.Key || got.Size != w.Size || got.FormatID != w.FormatID || got.FileName != w.FileName || !got.Modified.Equal(w.Modified) || got.Problem != nil {
			t.Errorf("%s: file %d %+v, want %+v", d.ID, i, got, w)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
