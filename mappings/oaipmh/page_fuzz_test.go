package oaipmh

// Fuzz target of the OAI-PMH answer reader: a ListRecords page, served by a
// fake endpoint and read by the source's own listRecords. Run it with
//
//	go test -run '^$' -fuzz '^FuzzListRecords$' -fuzztime 60s ./mappings/oaipmh/

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

const fuzzPage = `<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<responseDate>2024-01-01T00:00:00Z</responseDate><request verb="ListRecords">http://x/oai</request>
<ListRecords>
<record><header><identifier>oai:x:1</identifier><datestamp>2024-01-01</datestamp></header>
<metadata><oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:title>T</dc:title><dc:identifier>https://doi.org/10.1/x</dc:identifier></oai_dc:dc></metadata></record>
<record><header status="deleted"><identifier>oai:x:2</identifier><datestamp>2024-01-02</datestamp></header></record>
<resumptionToken cursor="0">tok</resumptionToken>
</ListRecords></OAI-PMH>`

// FuzzListRecords: any answer gives records or an error, never a panic; an
// error is a ServiceFailure Exception; each record's metadata, cut out of
// the page, is a well-formed document of its own whose root is in the
// namespace the page gave it.
func FuzzListRecords(f *testing.F) {
	f.Add([]byte(fuzzPage))
	f.Add([]byte(`<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><error code="noRecordsMatch">none</error></OAI-PMH>`))
	f.Add([]byte(`<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"><error code="badResumptionToken">old</error><error code="x">y</error></OAI-PMH>`))
	f.Add([]byte(`<r xmlns="urn:outer" xmlns:a="urn:a"><ListRecords><record><metadata><a:x xml:lang="en"><a:identifier>i</a:identifier></a:x></metadata></record></ListRecords></r>`))
	var (
		mu   sync.Mutex
		page []byte
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		b := page
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		w.Write(b)
	}))
	f.Cleanup(srv.Close)
	u := mappingtest.UpstreamConfig(f, config.UpstreamOAIPMH, "repo", srv.URL, "{metadataPrefix: oai_dc}")
	c := upstream.New(u, nil)
	f.Cleanup(c.Close)
	src, err := New(u, c)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		mu.Lock()
		page = body
		mu.Unlock()
		records, _, err := src.listRecords(context.Background(), url.Values{"metadataPrefix": {"oai_dc"}})
		if err != nil {
			var e *adapter.Exception
			if !errors.As(err, &e) || e.Kind != adapter.ServiceFailure {
				t.Fatalf("error %v (%T) is not a ServiceFailure", err, err)
			}
			return
		}
		for _, r := range records {
			if r.metadata == nil {
				continue
			}
			d := xml.NewDecoder(bytes.NewReader(r.metadata.body))
			var root *xml.StartElement
			for {
				tok, err := d.Token()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("the metadata cut out of the page is not well-formed: %v\n%s", err, r.metadata.body)
				}
				if se, ok := tok.(xml.StartElement); ok && root == nil {
					root = &se
				}
			}
			if root == nil {
				t.Fatalf("the metadata has no root: %s", r.metadata.body)
			}
			if root.Name.Space != r.metadata.space {
				t.Fatalf("the metadata root is in %q alone, %q in the page\n%s", root.Name.Space, r.metadata.space, r.metadata.body)
			}
		}
	})
}
