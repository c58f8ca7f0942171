package oaipmh

// Answers that must fail a walk rather than end it: a walk of everything that
// ends without an error lets the harvest archive every dataset it did not
// list (node's datasetPass).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// rawServer answers every request with body, unwrapped, HTTP 200.
func rawServer(t *testing.T, body string) *Source {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return mappingtest.Open(t, mappingtest.UpstreamConfig(t, config.UpstreamOAIPMH, "repo", srv.URL, "{metadataPrefix: oai_dc}"), nil, New)
}

// TestWalkNonOAIAnswerIsNotEmpty: a 200 answer to ListRecords that is not a
// ListRecords answer (a proxy's maintenance page, an OAI-PMH envelope with
// neither ListRecords nor error) was taken for an empty repository.
func TestWalkNonOAIAnswerIsNotEmpty(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"html maintenance page": `<html><head><title>Down</title></head><body><p>Back soon</p></body></html>`,
		"envelope without ListRecords": `<?xml version="1.0"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">` +
			`<responseDate>2024-01-01T00:00:00Z</responseDate><request>x</request></OAI-PMH>`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := 0
			err := rawServer(t, body).Walk(context.Background(), time.Time{}, func(*node.Dataset) error { n++; return nil })
			if err == nil || !strings.Contains(err.Error(), "not an OAI-PMH") {
				t.Fatalf("Walk over a non-ListRecords answer: %v after %d records, want it refused", err, n)
			}
		})
	}
}

// TestWalkNoRecordsMatchAfterToken: noRecordsMatch is no answer to a
// resumption token (OAI-PMH 2.0 §3.5 allows badResumptionToken): the server
// lost its cursor. It ended the walk as if the list were complete.
func TestWalkNoRecordsMatchAfterToken(t *testing.T) {
	t.Parallel()
	s := fake(t, map[string]string{
		"":   `<ListRecords>` + rec("1") + `<resumptionToken>t1</resumptionToken></ListRecords>`,
		"t1": `<error code="noRecordsMatch">no records</error>`,
	})
	var got []string
	err := s.Walk(context.Background(), time.Time{}, func(d *node.Dataset) error { got = append(got, d.ID); return nil })
	if err == nil {
		t.Fatalf("Walk listed %q then ended without error on a noRecordsMatch answer to resumptionToken t1", got)
	}
}

// TestWalkDeepNestingRefused: a record's metadata nested 100,000 deep (a
// 700 KB page, far under the size bound) took seconds per megabyte, each
// element searching every open one for namespace declarations; answers are
// refused past 256 levels, and a page of ordinary depth still reads.
func TestWalkDeepNestingRefused(t *testing.T) {
	t.Parallel()
	page := func(depth int) string {
		md := `<metadata><x xmlns="urn:x">` + strings.Repeat("<a>", depth) + strings.Repeat("</a>", depth) + `</x></metadata>`
		return `<ListRecords><record><header><identifier>1</identifier><datestamp>2024-01-01</datestamp></header>` + md + `</record></ListRecords>`
	}
	err := fake(t, map[string]string{"": page(100_000)}).Walk(context.Background(), time.Time{}, func(*node.Dataset) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "deeper than 256") {
		t.Errorf("Walk of a page nested 100,000 deep: %v, want it refused", err)
	}
	n := 0
	if err := fake(t, map[string]string{"": page(200)}).Walk(context.Background(), time.Time{}, func(*node.Dataset) error { n++; return nil }); err != nil || n != 1 {
		t.Errorf("Walk of a page nested 200 deep: %v, %d records", err, n)
	}
}
