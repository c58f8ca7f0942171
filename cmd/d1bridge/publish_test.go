package main

// publish, publishIdentifier, updateIdMetadata and generate-id's DOI scheme
// through the binary, with a datacite upstream at the fake DataCite
// (mappings/datacite/datacitetest) that runs in the test process.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datacite/datacitetest"
)

const (
	pubRepo     = "E2E.D1BRIDGE"
	pubPassword = "datacite-e2e-password"
	pubPrefix   = "10.5072"
	pubAlice    = "CN=Alice Publisher,O=d1bridge,DC=example,DC=org"
	pubBob      = "CN=Bob Bystander,O=d1bridge,DC=example,DC=org"
	pubAdmin    = "CN=Repository Admin,O=d1bridge,DC=example,DC=org"
)

// pubNode is an instance with a datacite upstream (unless dc is nil) and a
// token for each test subject.
type pubNode struct {
	*server
	dc     *datacitetest.Server
	tokens map[string]string
}

// pubStart starts a fake DataCite and the binary configured to use it, with
// extra lines appended to the upstream's options; withDataCite false starts
// the binary without an identifier service.
func pubStart(t *testing.T, withDataCite bool, options ...string) *pubNode {
	t.Helper()
	dir := t.TempDir()
	certPath, _, _, _ := authTokenKeyFiles(t)
	cfg := fmt.Sprintf(`# d1bridge configuration of the publish end-to-end tests
node:
  name: d1bridge e2e
  administrators: [%q]
auth:
  tokenKeys: [%q]
`, pubAdmin, certPath)
	p := &pubNode{tokens: map[string]string{}}
	if withDataCite {
		p.dc = datacitetest.Start(t, pubRepo, pubPassword, pubPrefix)
		pw := authWrite(t, dir, "datacite-password", []byte(pubPassword+"\n"))
		cfg += fmt.Sprintf(`upstreams:
  - name: datacite
    type: datacite
    baseURL: %s
    timeout: 5s
    breaker: {failures: 50, openFor: 1s}
    options:
      prefix: %q
      shoulder: e2e.
      username: %s
      passwordFile: %s
      publisher: d1bridge end-to-end tests
`, p.dc.URL, pubPrefix, pubRepo, pw)
		for _, o := range options {
			cfg += "      " + o + "\n"
		}
		cfg += "identifiers: datacite\n"
	}
	p.server = startServerConfig(t, "", authWrite(t, dir, "d1bridge.yaml", []byte(cfg)))
	for _, sub := range []string{pubAlice, pubBob, pubAdmin} {
		p.tokens[sub] = authToken(t, authCNKey(), sub)
	}
	return p
}

// call sends a request without a body as who ("" for anonymous).
func (p *pubNode) call(t testing.TB, who, method, path string) *response {
	t.Helper()
	return authDo(t, p.server, method, path, p.tokens[who])
}

// create stores data as pid, owned by pubAlice and readable by the public,
// with seriesId sid when given.
func (p *pubNode) create(t testing.TB, pid, sid, formatID string, data []byte) {
	t.Helper()
	sm := newSysmeta(pid, formatID, "SHA-256", data)
	sm.RightsHolder, sm.SeriesID, sm.FileName = pubAlice, sid, "table.csv"
	authCreate(t, p.server, p.tokens[pubAlice], sm, data)
}

// meta reads id's v2 (or v1) system metadata as pubAlice.
func (p *pubNode) meta(t testing.TB, v int, id string) *adapter.SystemMetadata {
	t.Helper()
	r := p.call(t, pubAlice, http.MethodGet, fmt.Sprintf("/d1/mn/v%d/meta/%s", v, url.PathEscape(id)))
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	sm := &adapter.SystemMetadata{}
	decode(t, r, sm)
	return sm
}

// identifierAnswer is the identifier of a 200 Identifier document.
func identifierAnswer(t testing.TB, r *response) string {
	t.Helper()
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	var id adapter.Identifier
	decode(t, r, &id)
	return id.Value
}

// generate asks generate-id for scheme as who.
func (p *pubNode) generate(t testing.TB, who, scheme string) *response {
	t.Helper()
	body, ctype := multipartBody(false, textPart("scheme", scheme))
	h := []string{"Content-Type", ctype}
	if who != "" {
		h = append(h, "Authorization", "Bearer "+p.tokens[who])
	}
	return p.do(t, http.MethodPost, "/d1/mn/v2/generate", body, h...)
}

// TestPublishDOIVersions: publish on v2 and v1 makes a new version named by
// a findable DOI, with the same bytes and series, obsoleting the original.
func TestPublishDOIVersions(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true)
	for _, v := range []int{2, 1} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			pid, sid := fmt.Sprintf("pub-v%d", v), ""
			if v == 2 {
				sid = "series-pub"
			}
			data := []byte(fmt.Sprintf("site,depth\nA,%d\n", v))
			p.create(t, pid, sid, "text/csv", data)

			doi := identifierAnswer(t, p.call(t, pubAlice, http.MethodPut, fmt.Sprintf("/d1/mn/v%d/publish/%s", v, url.PathEscape(pid))))
			if !strings.HasPrefix(doi, "doi:10.5072/e2e.") {
				t.Fatalf("publish answered %q", doi)
			}
			sm := p.meta(t, v, doi)
			if sm.Obsoletes != pid || sm.ObsoletedBy != "" || sm.Size != uint64(len(data)) || sm.RightsHolder != pubAlice {
				t.Errorf("the DOI version: obsoletes %q, obsoletedBy %q, size %d, rightsHolder %q", sm.Obsoletes, sm.ObsoletedBy, sm.Size, sm.RightsHolder)
			}
			if v == 2 && sm.SeriesID != sid {
				t.Errorf("seriesId %q, want %q", sm.SeriesID, sid)
			}
			if old := p.meta(t, v, pid); old.ObsoletedBy != doi {
				t.Errorf("%s obsoletedBy %q, want %q", pid, old.ObsoletedBy, doi)
			}
			r := p.call(t, "", http.MethodGet, fmt.Sprintf("/d1/mn/v%d/object/%s", v, url.PathEscape(doi)))
			if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
				t.Errorf("the DOI version's bytes differ: %q", r.Body)
			}
			d, ok := p.dc.DOI(doi)
			if !ok {
				t.Fatalf("DataCite does not hold %s", doi)
			}
			for path, want := range map[string]string{
				"url":                               p.URL + "/d1/mn/v2/object/" + url.PathEscape(doi),
				"creators.0.name":                   "Alice Publisher",
				"titles.0.title":                    "table.csv",
				"publisher":                         "d1bridge end-to-end tests",
				"types.resourceTypeGeneral":         "Dataset",
				"formats.0":                         "text/csv",
				"relatedIdentifiers.0.relationType": "IsNewVersionOf",
			} {
				if got := d.String(path); got != want {
					t.Errorf("DataCite %s = %q, want %q", path, got, want)
				}
			}
			if d.State != datacitetest.Findable {
				t.Errorf("DataCite state %s, want findable (autoPublish)", d.State)
			}
		})
	}
	// The series' head is the DOI version.
	if head := p.meta(t, 2, "series-pub"); !strings.HasPrefix(head.Identifier, "doi:") {
		t.Errorf("the head of the series is %q", head.Identifier)
	}
}

// TestPublishIdentifierDraftDOI: with autoPublish false the DOI stays a
// draft until publishIdentifier, which only takes this service's DOIs.
func TestPublishIdentifierDraftDOI(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true, "autoPublish: false")
	p.create(t, "draft-1", "", "text/csv", []byte("a,b\n"))
	doi := identifierAnswer(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publish/draft-1"))
	if d, _ := p.dc.DOI(doi); d.State != datacitetest.Draft || d.String("titles.0.title") != "table.csv" {
		t.Fatalf("after publish: state %s, title %q", d.State, d.String("titles.0.title"))
	}
	path := "/d1/mn/v2/publishIdentifier/" + url.PathEscape(doi)
	wantError(t, p.call(t, pubBob, http.MethodPut, path), http.StatusUnauthorized, "NotAuthorized")
	if got := identifierAnswer(t, p.call(t, pubAlice, http.MethodPut, path)); got != doi {
		t.Errorf("publishIdentifier answered %q", got)
	}
	if d, _ := p.dc.DOI(doi); d.State != datacitetest.Findable {
		t.Errorf("after publishIdentifier: state %s", d.State)
	}
	e := wantError(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publishIdentifier/draft-1"), http.StatusBadRequest, "InvalidRequest")
	if !strings.Contains(e.Description, "is not an identifier of this node's identifier service") {
		t.Errorf("description %q", e.Description)
	}
	wantError(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publishIdentifier/doi:10.5072%2Fe2e.none"), http.StatusNotFound, "NotFound")
}

// TestGenerateDOI: generate-id with scheme DOI mints a draft DOI at DataCite.
func TestGenerateDOI(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true)
	doi := identifierAnswer(t, p.generate(t, pubAlice, "DOI"))
	if !strings.HasPrefix(doi, "doi:10.5072/e2e.") {
		t.Fatalf("generate DOI answered %q", doi)
	}
	if d, ok := p.dc.DOI(doi); !ok || d.State != datacitetest.Draft {
		t.Errorf("DataCite holds %+v (%v)", d, ok)
	}
	if id := identifierAnswer(t, p.generate(t, pubAlice, "UUID")); !strings.HasPrefix(id, "urn:uuid:") {
		t.Errorf("generate UUID answered %q", id)
	}
}

// TestUpdateIdMetadataDOIs: one pid, then a batch by formatId, send the
// current metadata; only trusted subjects may, and unknown pids are refused.
func TestUpdateIdMetadataDOIs(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true)
	var dois []string
	for i, format := range []string{"text/csv", "text/csv", "text/plain"} {
		doi := identifierAnswer(t, p.generate(t, pubAlice, "DOI"))
		p.create(t, doi, "", format, []byte(fmt.Sprintf("object %d\n", i)))
		dois = append(dois, doi)
	}
	p.create(t, "not-a-doi", "", "text/csv", []byte("plain\n"))
	title := func(doi string) string { d, _ := p.dc.DOI(doi); return d.String("titles.0.title") }

	one := "/d1/mn/v2/identifiers/" + url.PathEscape(dois[0])
	wantError(t, p.call(t, pubAlice, http.MethodPut, one), http.StatusUnauthorized, "NotAuthorized")
	if r := p.call(t, pubAdmin, http.MethodPut, one); wantStatus(t, r, http.StatusOK) && title(dois[0]) != "table.csv" {
		t.Errorf("after one pid: title %q", title(dois[0]))
	}
	if title(dois[1]) != "" {
		t.Errorf("a DOI not selected was sent: %q", title(dois[1]))
	}
	wantStatus(t, p.call(t, pubAdmin, http.MethodPut, "/d1/mn/v2/identifiers?formatId=text%2Fcsv"), http.StatusOK)
	if title(dois[1]) != "table.csv" || title(dois[2]) != "" {
		t.Errorf("after formatId text/csv: titles %q, %q", title(dois[1]), title(dois[2]))
	}
	wantStatus(t, p.call(t, pubAdmin, http.MethodPut, "/d1/mn/v2/identifiers?pid="+url.QueryEscape(dois[2])+"&pid=not-a-doi"), http.StatusOK)
	if title(dois[2]) != "table.csv" {
		t.Errorf("after pid parameters: title %q", title(dois[2]))
	}
	for _, d := range p.dc.DOIs() {
		if d.State != datacitetest.Draft {
			t.Errorf("%s is %s: updateIdMetadata changed its state", d.DOI, d.State)
		}
	}
	e := wantError(t, p.call(t, pubAdmin, http.MethodPut, "/d1/mn/v2/identifiers/no-such-object"), http.StatusBadRequest, "InvalidRequest")
	if !strings.Contains(e.Description, `no object "no-such-object"`) {
		t.Errorf("description %q", e.Description)
	}
	// DataCite failing: a ServiceFailure naming it.
	p.dc.Fault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return true
	})
	e = wantError(t, p.call(t, pubAdmin, http.MethodPut, one), http.StatusInternalServerError, "ServiceFailure")
	if !strings.Contains(e.Description, `DataCite (upstream "datacite") failed (HTTP 503)`) {
		t.Errorf("description %q", e.Description)
	}
}

// TestPublishErrors: the error kinds of publish and its siblings.
func TestPublishErrors(t *testing.T) {
	t.Parallel()
	t.Run("no identifier service", func(t *testing.T) {
		t.Parallel()
		p := pubStart(t, false)
		p.create(t, "obj", "", "text/csv", []byte("x\n"))
		for _, path := range []string{"/d1/mn/v2/publish/obj", "/d1/mn/v1/publish/obj", "/d1/mn/v2/publishIdentifier/obj"} {
			wantError(t, p.call(t, pubAlice, http.MethodPut, path), http.StatusNotImplemented, "NotImplemented")
		}
		wantError(t, p.call(t, pubAdmin, http.MethodPut, "/d1/mn/v2/identifiers/obj"), http.StatusNotImplemented, "NotImplemented")
		e := wantError(t, p.generate(t, pubAlice, "DOI"), http.StatusBadRequest, "InvalidRequest")
		if !strings.Contains(e.Description, "the DOI scheme needs an identifier service (config identifiers)") {
			t.Errorf("description %q", e.Description)
		}
	})
	t.Run("with DataCite", func(t *testing.T) {
		t.Parallel()
		p := pubStart(t, true)
		p.create(t, "obj", "", "text/csv", []byte("x\n"))
		wantError(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publish/no-such-object"), http.StatusNotFound, "NotFound")
		// publish needs changePermission on the object; bob may only read it.
		wantError(t, p.call(t, pubBob, http.MethodPut, "/d1/mn/v2/publish/obj"), http.StatusUnauthorized, "NotAuthorized")
		wantError(t, p.call(t, "", http.MethodPut, "/d1/mn/v1/publish/obj"), http.StatusUnauthorized, "InvalidToken")

		// DataCite down: nothing is published, and the error names it.
		p.dc.Close()
		e := wantError(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publish/obj"), http.StatusInternalServerError, "ServiceFailure")
		if !strings.Contains(e.Description, `DataCite: upstream "datacite" is unreachable (minting a DOI)`) {
			t.Errorf("description %q", e.Description)
		}
		if sm := p.meta(t, 2, "obj"); sm.ObsoletedBy != "" {
			t.Errorf("obj is obsoleted by %q after a failed publish", sm.ObsoletedBy)
		}
		e = wantError(t, p.generate(t, pubAlice, "DOI"), http.StatusInternalServerError, "ServiceFailure")
		if !strings.Contains(e.Description, "DataCite") {
			t.Errorf("description %q", e.Description)
		}
	})
	t.Run("DataCite fails after the commit", func(t *testing.T) {
		t.Parallel()
		p := pubStart(t, true)
		p.create(t, "obj", "", "text/csv", []byte("x\n"))
		// Only making the DOI findable fails: the version stays, the DOI is a
		// draft with its metadata, and the error says how to finish.
		p.dc.Fault(func(w http.ResponseWriter, r *http.Request) bool {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if r.Method != http.MethodPut || !strings.Contains(string(b), `"event":"publish"`) {
				return false
			}
			http.Error(w, "Bad Gateway", http.StatusBadGateway)
			return true
		})
		e := wantError(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publish/obj"), http.StatusInternalServerError, "ServiceFailure")
		doi := e.Identifier
		if !strings.HasPrefix(doi, "doi:10.5072/e2e.") || !strings.Contains(e.Description, "is stored as a new version of \"obj\"") ||
			!strings.Contains(e.Description, "publishIdentifier "+doi) || !strings.Contains(e.Description, "HTTP 502") {
			t.Fatalf("identifier %q, description %q", doi, e.Description)
		}
		if sm := p.meta(t, 2, "obj"); sm.ObsoletedBy != doi {
			t.Errorf("obj obsoletedBy %q, want %q", sm.ObsoletedBy, doi)
		}
		if d, _ := p.dc.DOI(doi); d.State != datacitetest.Draft || d.String("titles.0.title") != "table.csv" {
			t.Errorf("DataCite holds state %s, title %q", d.State, d.String("titles.0.title"))
		}
		p.dc.Fault(nil)
		identifierAnswer(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publishIdentifier/"+url.PathEscape(doi)))
		if d, _ := p.dc.DOI(doi); d.State != datacitetest.Findable {
			t.Errorf("state %s after publishIdentifier", d.State)
		}
	})
}

// TestAdminSelectionErrors: a pid parameter that is not an identifier is the
// caller's mistake (InvalidRequest), on updateIdMetadata as on reindex.
func TestAdminSelectionErrors(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true)
	for _, path := range []string{"/d1/mn/v2/identifiers?pid=a%20b", "/d1/mn/v2/identifiers?pid=", "/d1/mn/v2/index?pid=a%20b"} {
		e := wantError(t, p.call(t, pubAdmin, http.MethodPut, path), http.StatusBadRequest, "InvalidRequest")
		if !strings.Contains(e.Description, "identifier") {
			t.Errorf("%s: description %q", path, e.Description)
		}
	}
}

// TestPublishIdentifierOtherSpelling: bob's object named by the upper-case
// spelling of alice's published DOI cannot be sent to DataCite, where it would
// replace the DOI's landing page and metadata.
func TestPublishIdentifierOtherSpelling(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true)
	p.create(t, "alice-obj", "", "text/csv", []byte("alice\n"))
	doi := identifierAnswer(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publish/alice-obj"))
	before, _ := p.dc.DOI(doi)

	other := "DOI:" + strings.ToUpper(strings.TrimPrefix(doi, "doi:"))
	sm := newSysmeta(other, "text/csv", "SHA-256", []byte("bob\n"))
	sm.RightsHolder = pubBob
	authCreate(t, p.server, p.tokens[pubBob], sm, []byte("bob\n"))
	wantError(t, p.call(t, pubBob, http.MethodPut, "/d1/mn/v2/publishIdentifier/"+url.PathEscape(other)), http.StatusBadRequest, "InvalidRequest")
	wantStatus(t, p.call(t, pubAdmin, http.MethodPut, "/d1/mn/v2/identifiers?all=true"), http.StatusOK)
	if after, _ := p.dc.DOI(doi); after.String("url") != before.String("url") || after.String("creators.0.name") != "Alice Publisher" {
		t.Errorf("%s now points at %q, created by %q", doi, after.String("url"), after.String("creators.0.name"))
	}
}

// TestPublishFailedLastStepSeriesHead: when only making the DOI findable
// fails, the new version is stored and heads the series, so a series id read
// right after names it, not the version it obsoletes (the node's remembered
// decisions on the series resolved it to the old version).
func TestPublishFailedLastStepSeriesHead(t *testing.T) {
	t.Parallel()
	p := pubStart(t, true)
	p.create(t, "head-1", "series-head", "text/csv", []byte("x\n"))
	if sm := p.meta(t, 2, "series-head"); sm.Identifier != "head-1" {
		t.Fatalf("the series' head is %q", sm.Identifier)
	}
	p.dc.Fault(func(w http.ResponseWriter, r *http.Request) bool {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if r.Method != http.MethodPut || !strings.Contains(string(b), `"event":"publish"`) {
			return false
		}
		http.Error(w, "Bad Gateway", http.StatusBadGateway)
		return true
	})
	e := wantError(t, p.call(t, pubAlice, http.MethodPut, "/d1/mn/v2/publish/series-head"), http.StatusInternalServerError, "ServiceFailure")
	if sm := p.meta(t, 2, "series-head"); sm.Identifier != e.Identifier || sm.ObsoletedBy != "" {
		t.Errorf("the series' head is %q (obsoletedBy %q), want the DOI version %q", sm.Identifier, sm.ObsoletedBy, e.Identifier)
	}
}
