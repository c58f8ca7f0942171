package datacite

// The node's publish, publishIdentifier, updateIdMetadata and DOI scheme of
// generateIdentifier (mappings/node/publish.go) over an embedded store and
// catalog, with this package's client in front of the fake DataCite: what
// stays after each failure.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datacite/datacitetest"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

const testNode = "urn:node:test"

const (
	owner   = "CN=Jane Doe A123,O=Example U,C=US,DC=cilogon,DC=org"
	emlText = `<?xml version="1.0" encoding="UTF-8"?>
<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="p1" system="knb">
  <dataset>
    <alternateIdentifier>urn:x</alternateIdentifier>
    <title>
      Soil   cores of the
      North Slope, 2019
    </title>
    <creator><individualName><surName>Doe</surName></individualName></creator>
    <project><title>Not this one</title></project>
  </dataset>
</eml:eml>
`
	isoText = `<?xml version="1.0" encoding="UTF-8"?>
<gmd:MD_Metadata xmlns:gmd="http://www.isotc211.org/2005/gmd" xmlns:gco="http://www.isotc211.org/2005/gco">
  <gmd:contact><gmd:CI_ResponsibleParty><gmd:organisationName><gco:CharacterString>Org</gco:CharacterString></gmd:organisationName></gmd:CI_ResponsibleParty></gmd:contact>
  <gmd:identificationInfo>
    <gmd:MD_DataIdentification>
      <gmd:citation>
        <gmd:CI_Citation>
          <gmd:title><gco:CharacterString>Sea ice thickness, Beaufort Sea</gco:CharacterString></gmd:title>
        </gmd:CI_Citation>
      </gmd:citation>
    </gmd:MD_DataIdentification>
  </gmd:identificationInfo>
</gmd:MD_Metadata>
`
)

// testbed is a node over files and SQLite, with DataCite as its identifier
// service unless withoutService.
type testbed struct {
	n       *node.Node
	f       *datacitetest.Server
	s       *Service
	objects string // the store's directory
	sess    *adapter.Session
}

func newTestbed(t *testing.T, withService bool, extra ...string) *testbed {
	t.Helper()
	return newTestbedOver(t, nil, withService, extra...)
}

// newTestbedOver is newTestbed with the node's catalog wrap(the real one).
func newTestbedOver(t *testing.T, wrap func(*sqlcatalog.Catalog) node.Catalog, withService bool, extra ...string) *testbed {
	t.Helper()
	dir := t.TempDir()
	blobs, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"), sqlcatalog.WithNodeID(testNode))
	if err != nil {
		t.Fatal(err)
	}
	var nc node.Catalog = cat
	if wrap != nil {
		nc = wrap(cat)
	}
	n := node.New(testNode, blobs, nc, nil)
	t.Cleanup(func() { n.Close() })
	tb := &testbed{n: n, objects: filepath.Join(dir, "objects", "objects"),
		sess: &adapter.Session{Subject: owner, Subjects: []string{owner, adapter.SubjectPublic}, UserAgent: "test"}}
	if withService {
		tb.f, tb.s = start(t, extra...)
		n.SetIdentifiers(tb.s)
	}
	return tb
}

// create stores data as pid (format formatID, series sid), readable by its
// owner only.
func (tb *testbed) create(t *testing.T, pid, sid, formatID string, data []byte) *adapter.SystemMetadata {
	t.Helper()
	u, err := tb.n.Stage(t.Context(), bytes.NewReader(data), []string{"SHA-256"})
	if err != nil {
		t.Fatal(err)
	}
	sm := &adapter.SystemMetadata{Identifier: pid, SeriesID: sid, FormatID: formatID, Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: u.Checksums["SHA-256"]}, RightsHolder: owner, FileName: pid + ".dat"}
	got, err := tb.n.Create(t.Context(), tb.sess, sm, u)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (tb *testbed) meta(t *testing.T, id string) *adapter.SystemMetadata {
	t.Helper()
	sm, err := tb.n.SystemMetadata(t.Context(), tb.sess, id)
	if err != nil {
		t.Fatal(err)
	}
	return sm
}

func (tb *testbed) bytes(t *testing.T, id string) []byte {
	t.Helper()
	o, err := tb.n.Get(t.Context(), tb.sess, id)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// files counts the object files in the store.
func (tb *testbed) files(t *testing.T) int {
	t.Helper()
	n := 0
	filepath.WalkDir(tb.objects, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func wantKind(t *testing.T, err error, k adapter.Kind, desc ...string) {
	t.Helper()
	e := adapter.AsException(err)
	if err == nil || e.Kind != k {
		t.Fatalf("got %v, want %s", err, k)
	}
	for _, d := range desc {
		if !strings.Contains(e.Description, d) {
			t.Errorf("description %q does not say %q", e.Description, d)
		}
	}
}

// failPUT answers the PUTs match selects 503, as a DataCite outage would.
func failPUT(f *datacitetest.Server, match func(r *http.Request, body string) bool) {
	f.Fault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPut {
			return false
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if !match(r, string(b)) {
			return false
		}
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return true
	})
}

func isPublish(_ *http.Request, body string) bool { return strings.Contains(body, `"event":"publish"`) }

func TestPublish(t *testing.T) {
	t.Parallel()
	tb := newTestbed(t, true)
	ctx := t.Context()
	data := []byte(emlText)
	tb.create(t, "urn:uuid:eml-1", "urn:series:eml", "https://eml.ecoinformatics.org/eml-2.2.0", data)

	doi, err := tb.n.Publish(ctx, tb.sess, "urn:series:eml") // a SID names its head
	if err != nil {
		t.Fatal(err)
	}
	if !tb.s.Owns(doi) {
		t.Fatalf("published as %q", doi)
	}
	sm := tb.meta(t, doi)
	if sm.Obsoletes != "urn:uuid:eml-1" || sm.SeriesID != "urn:series:eml" || sm.ObsoletedBy != "" || sm.SerialVersion != 1 ||
		sm.Submitter != owner || sm.FormatID != "https://eml.ecoinformatics.org/eml-2.2.0" {
		t.Errorf("the DOI version: %+v", sm)
	}
	if !strings.Contains(fmtPolicy(sm.AccessPolicy), "public:read") {
		t.Errorf("the DOI version is not public: %s", fmtPolicy(sm.AccessPolicy))
	}
	if old := tb.meta(t, "urn:uuid:eml-1"); old.ObsoletedBy != doi || fmtPolicy(old.AccessPolicy) != "" {
		t.Errorf("the old version: obsoletedBy %q, policy %s", old.ObsoletedBy, fmtPolicy(old.AccessPolicy))
	}
	if head := tb.meta(t, "urn:series:eml"); head.Identifier != doi {
		t.Errorf("the series' head is %q", head.Identifier)
	}
	if !bytes.Equal(tb.bytes(t, doi), data) {
		t.Error("the DOI version's bytes differ")
	}
	if n := tb.files(t); n != 2 {
		t.Errorf("%d object files, want 2 (each version its own)", n)
	}
	d, ok := tb.f.DOI(doi)
	if !ok || d.State != datacitetest.Findable {
		t.Fatalf("DataCite holds %+v", d)
	}
	if got := d.String("titles.0.title"); got != "Soil cores of the North Slope, 2019" {
		t.Errorf("title %q", got)
	}
	if got := d.String("relatedIdentifiers.0.relatedIdentifier"); got != testMNBase+"/v2/object/urn:uuid:eml-1" {
		t.Errorf("related %q", got)
	}
	// Publishing the obsoleted version again is refused.
	_, err = tb.n.Publish(ctx, tb.sess, "urn:uuid:eml-1")
	wantKind(t, err, adapter.InvalidRequest, "is obsoleted by")
}

func TestPublishISOTitleAndDraft(t *testing.T) {
	t.Parallel()
	tb := newTestbed(t, true, "autoPublish: false")
	ctx := t.Context()
	tb.create(t, "iso-1", "", "http://www.isotc211.org/2005/gmd", []byte(isoText))
	doi, err := tb.n.Publish(ctx, tb.sess, "iso-1")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tb.f.DOI(doi)
	if d.State != datacitetest.Draft || d.String("titles.0.title") != "Sea ice thickness, Beaufort Sea" || d.String("types.resourceType") != "Metadata" {
		t.Errorf("DataCite holds state %s, title %q, type %q", d.State, d.String("titles.0.title"), d.String("types.resourceType"))
	}
	got, err := tb.n.PublishIdentifier(ctx, tb.sess, doi)
	if err != nil || got != doi {
		t.Fatalf("PublishIdentifier: %q %v", got, err)
	}
	if d, _ := tb.f.DOI(doi); d.State != datacitetest.Findable {
		t.Errorf("state %s after publishIdentifier", d.State)
	}
}

// TestPublishFailures: before the commit, nothing stays (no version, no
// bytes, no draft); after it, the version stays and the error says how to
// finish.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	t.Run("no service", func(t *testing.T) {
		tb := newTestbed(t, false)
		tb.create(t, "a", "", "text/plain", []byte("a"))
		_, err := tb.n.Publish(t.Context(), tb.sess, "a")
		wantKind(t, err, adapter.NotImplemented, "no identifier service")
		_, err = tb.n.PublishIdentifier(t.Context(), tb.sess, "a")
		wantKind(t, err, adapter.NotImplemented)
		wantKind(t, tb.n.UpdateIDMetadata(t.Context(), tb.sess, adapter.AdminQuery{All: true}), adapter.NotImplemented)
		_, err = tb.n.GenerateIdentifier(t.Context(), tb.sess, "DOI", "")
		wantKind(t, err, adapter.InvalidRequest, "the DOI scheme needs an identifier service (config identifiers)")
	})
	t.Run("unknown", func(t *testing.T) {
		tb := newTestbed(t, true)
		_, err := tb.n.Publish(t.Context(), tb.sess, "nothing")
		wantKind(t, err, adapter.NotFound)
		if len(tb.f.Requests()) != 0 {
			t.Error("DataCite was called")
		}
	})
	t.Run("DataCite down at mint", func(t *testing.T) {
		tb := newTestbed(t, true)
		tb.create(t, "a", "", "text/plain", []byte("a"))
		tb.f.Close()
		_, err := tb.n.Publish(t.Context(), tb.sess, "a")
		wantKind(t, err, adapter.ServiceFailure, `DataCite: upstream "doi" is unreachable (minting a DOI)`)
		if sm := tb.meta(t, "a"); sm.ObsoletedBy != "" || tb.files(t) != 1 {
			t.Errorf("obsoletedBy %q, %d files", sm.ObsoletedBy, tb.files(t))
		}
	})
	t.Run("metadata refused before the commit", func(t *testing.T) {
		tb := newTestbed(t, true)
		tb.create(t, "a", "", "text/plain", []byte("a"))
		failPUT(tb.f, func(*http.Request, string) bool { return true })
		_, err := tb.n.Publish(t.Context(), tb.sess, "a")
		wantKind(t, err, adapter.ServiceFailure, "nothing was published: ", `DataCite (upstream "doi") failed (HTTP 503) when registering the metadata of doi:10.5072/d1b.`)
		if sm := tb.meta(t, "a"); sm.ObsoletedBy != "" || tb.files(t) != 1 {
			t.Errorf("obsoletedBy %q, %d files", sm.ObsoletedBy, tb.files(t))
		}
		if ds := tb.f.DOIs(); len(ds) != 0 {
			t.Errorf("drafts left at DataCite: %+v", ds)
		}
		l, _ := tb.n.ListObjects(t.Context(), tb.sess, adapter.ListQuery{Count: 10})
		if l.Total != 1 {
			t.Errorf("%d objects listed", l.Total)
		}
	})
	t.Run("commit answer lost, and not checkable", func(t *testing.T) {
		var lost uncertainCommit
		tb := newTestbedOver(t, func(c *sqlcatalog.Catalog) node.Catalog { lost.Catalog = c; return &lost }, true)
		tb.create(t, "a", "", "text/plain", []byte("a"))
		lost.armed.Store(true)
		if _, err := tb.n.Publish(t.Context(), tb.sess, "a"); err == nil {
			t.Fatal("publish answered nil")
		}
		// The version is stored, and so stay its bytes and its draft DOI.
		doi := tb.meta(t, "a").ObsoletedBy
		if doi == "" || tb.files(t) != 2 {
			t.Fatalf("obsoletedBy %q, %d files", doi, tb.files(t))
		}
		if d, ok := tb.f.DOI(doi); !ok || d.State != datacitetest.Draft {
			t.Errorf("the DOI naming the stored version: %+v at DataCite (found %v), want a draft", d, ok)
		}
	})
	t.Run("publish event fails after the commit", func(t *testing.T) {
		tb := newTestbed(t, true)
		tb.create(t, "a", "", "text/plain", []byte("a"))
		failPUT(tb.f, isPublish)
		_, err := tb.n.Publish(t.Context(), tb.sess, "a")
		wantKind(t, err, adapter.ServiceFailure, "is stored as a new version of \"a\", but its DOI is still a draft", "HTTP 503", "publishIdentifier doi:10.5072/d1b.")
		doi := adapter.AsException(err).PID
		if sm := tb.meta(t, "a"); sm.ObsoletedBy != doi || tb.meta(t, doi).Obsoletes != "a" {
			t.Fatalf("the version is not there: %q obsoletedBy %q", doi, sm.ObsoletedBy)
		}
		d, _ := tb.f.DOI(doi)
		if d.State != datacitetest.Draft || d.String("titles.0.title") != "a.dat" {
			t.Errorf("DataCite holds state %s, title %q", d.State, d.String("titles.0.title"))
		}
		tb.f.Fault(nil)
		if _, err := tb.n.PublishIdentifier(t.Context(), tb.sess, doi); err != nil {
			t.Fatal(err)
		}
		if d, _ := tb.f.DOI(doi); d.State != datacitetest.Findable {
			t.Errorf("state %s after publishIdentifier", d.State)
		}
	})
}

func TestPublishIdentifier(t *testing.T) {
	t.Parallel()
	tb := newTestbed(t, true)
	ctx := t.Context()
	_, err := tb.n.PublishIdentifier(ctx, tb.sess, "urn:uuid:x")
	wantKind(t, err, adapter.InvalidRequest, "is not an identifier of this node's identifier service")
	_, err = tb.n.PublishIdentifier(ctx, tb.sess, "doi:10.5072/d1b.none")
	wantKind(t, err, adapter.NotFound)

	// A DOI from generateIdentifier, used by create: publishIdentifier sends
	// its metadata, makes it findable, and makes the object public.
	doi, err := tb.n.GenerateIdentifier(ctx, tb.sess, "doi", "ignored-")
	if err != nil || !tb.s.Owns(doi) {
		t.Fatalf("GenerateIdentifier DOI: %q %v", doi, err)
	}
	if d, ok := tb.f.DOI(doi); !ok || d.State != datacitetest.Draft {
		t.Fatalf("the minted DOI at DataCite: %+v %v", d, ok)
	}
	tb.create(t, doi, "", "text/csv", []byte("x,y\n1,2\n"))
	if _, err := tb.n.PublishIdentifier(ctx, tb.sess, doi); err != nil {
		t.Fatal(err)
	}
	d, _ := tb.f.DOI(doi)
	if d.State != datacitetest.Findable || d.String("creators.0.name") != "Jane Doe A123" {
		t.Errorf("DataCite holds state %s, creator %q", d.State, d.String("creators.0.name"))
	}
	if sm := tb.meta(t, doi); fmtPolicy(sm.AccessPolicy) != "public:read" || sm.SerialVersion != 2 {
		t.Errorf("policy %s, serialVersion %d", fmtPolicy(sm.AccessPolicy), sm.SerialVersion)
	}
	// DataCite down: a ServiceFailure naming it.
	tb.f.Fault(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
		return true
	})
	_, err = tb.n.PublishIdentifier(ctx, tb.sess, doi)
	wantKind(t, err, adapter.ServiceFailure, `DataCite (upstream "doi") failed (HTTP 504) when publishing `+doi)
}

func TestUpdateIDMetadata(t *testing.T) {
	t.Parallel()
	tb := newTestbed(t, true)
	ctx := t.Context()
	var dois []string
	for i := range 3 {
		doi, err := tb.n.GenerateIdentifier(ctx, tb.sess, "DOI", "")
		if err != nil {
			t.Fatal(err)
		}
		format := "text/csv"
		if i == 2 {
			format = "text/plain"
		}
		tb.create(t, doi, "", format, []byte{byte(i)})
		dois = append(dois, doi)
	}
	tb.create(t, "plain", "", "text/csv", []byte("p"))
	title := func(doi string) string { d, _ := tb.f.DOI(doi); return d.String("titles.0.title") }

	if err := tb.n.UpdateIDMetadata(ctx, tb.sess, adapter.AdminQuery{PIDs: []string{dois[0], "plain"}}); err != nil {
		t.Fatal(err)
	}
	if title(dois[0]) != dois[0]+".dat" || title(dois[1]) != "" {
		t.Errorf("after one pid: titles %q %q", title(dois[0]), title(dois[1]))
	}
	err := tb.n.UpdateIDMetadata(ctx, tb.sess, adapter.AdminQuery{PIDs: []string{dois[1], "nothing"}})
	wantKind(t, err, adapter.InvalidRequest, `no object "nothing"`)
	if title(dois[1]) != "" {
		t.Error("a pid was sent before the unknown one was refused")
	}
	if err := tb.n.UpdateIDMetadata(ctx, tb.sess, adapter.AdminQuery{FormatID: "text/csv"}); err != nil {
		t.Fatal(err)
	}
	if title(dois[1]) == "" || title(dois[2]) != "" {
		t.Errorf("after formatId text/csv: titles %q %q", title(dois[1]), title(dois[2]))
	}
	for _, d := range tb.f.DOIs() {
		if d.State != datacitetest.Draft {
			t.Errorf("%s is %s: updateIdMetadata changed its state", d.DOI, d.State)
		}
	}
	// Failures at DataCite do not stop the others and are counted.
	failPUT(tb.f, func(r *http.Request, _ string) bool {
		return strings.EqualFold(r.URL.Path, "/dois/"+strings.TrimPrefix(dois[0], "doi:"))
	})
	err = tb.n.UpdateIDMetadata(ctx, tb.sess, adapter.AdminQuery{All: true})
	wantKind(t, err, adapter.ServiceFailure, "1 of 3 identifiers were not updated ("+dois[0]+")", "HTTP 503")
	if title(dois[2]) == "" {
		t.Error("the other identifiers were not sent")
	}
}

func fmtPolicy(p *adapter.AccessPolicy) string {
	if p == nil {
		return ""
	}
	var out []string
	for _, r := range p.Allow {
		for _, s := range r.Subject {
			for _, perm := range r.Permission {
				out = append(out, s+":"+string(perm))
			}
		}
	}
	return strings.Join(out, ",")
}

var _ node.Identifiers = (*Service)(nil)

// TestPublishIdentifierSpellings: DataCite compares DOIs without case, the
// catalog compares PIDs exactly. Another caller's object named by another
// spelling of a published DOI (upper case, a DOI: scheme) must not reach
// DataCite through publishIdentifier or updateIdMetadata, or its metadata and
// landing page would replace those of the published DOI. Nor may a path
// segment "." or ".." in a PID reach DataCite's URL.
func TestPublishIdentifierSpellings(t *testing.T) {
	t.Parallel()
	tb := newTestbed(t, true)
	ctx := t.Context()
	tb.create(t, "alice-1", "", "text/csv", []byte("alice's data\n"))
	doi, err := tb.n.Publish(ctx, tb.sess, "alice-1")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := tb.f.DOI(doi)
	url := d.String("url")

	const mallory = "CN=Mallory,O=Example U,C=US,DC=cilogon,DC=org"
	ms := &adapter.Session{Subject: mallory, Subjects: []string{mallory, adapter.SubjectPublic}, UserAgent: "test"}
	create := func(pid string) {
		t.Helper()
		data := []byte("mallory's data for " + pid)
		u, err := tb.n.Stage(ctx, bytes.NewReader(data), []string{"SHA-256"})
		if err != nil {
			t.Fatal(err)
		}
		sm := &adapter.SystemMetadata{Identifier: pid, FormatID: "text/csv", Size: uint64(len(data)),
			Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: u.Checksums["SHA-256"]}, RightsHolder: mallory, FileName: "mallory.csv"}
		if _, err := tb.n.Create(ctx, ms, sm, u); err != nil {
			t.Fatalf("create %q: %v", pid, err)
		}
	}
	for _, pid := range []string{
		"doi:" + strings.ToUpper(strings.TrimPrefix(doi, "doi:")),
		"DOI:" + strings.TrimPrefix(doi, "doi:"),
		"doi:10.5072/d1b./../../clients/x",
		"doi:10.5072/d1b.x/./y",
	} {
		create(pid)
		_, err := tb.n.PublishIdentifier(ctx, ms, pid)
		wantKind(t, err, adapter.InvalidRequest, "is not an identifier of this node's identifier service")
	}
	if err := tb.n.UpdateIDMetadata(ctx, tb.sess, adapter.AdminQuery{All: true}); err != nil {
		t.Fatal(err)
	}
	if d, _ := tb.f.DOI(doi); d.String("url") != url || d.String("creators.0.name") != "Jane Doe A123" {
		t.Errorf("the published DOI now points at %q, created by %q", d.String("url"), d.String("creators.0.name"))
	}
	for _, r := range tb.f.Requests() {
		if strings.Contains(r.Path, "/./") || strings.Contains(r.Path, "/../") || strings.Contains(r.Path, "D1B") || r.Method == http.MethodGet {
			t.Errorf("DataCite was sent %s %s", r.Method, r.Path)
		}
	}
}

// uncertainCommit is a catalog whose inserts, once armed, commit and then
// answer an error, and whose HoldsBlob fails: a commit whose answer was lost
// while the database stays out of reach.
type uncertainCommit struct {
	*sqlcatalog.Catalog
	armed atomic.Bool
}

func (c *uncertainCommit) Insert(ctx context.Context, rec *node.Record) error {
	if err := c.Catalog.Insert(ctx, rec); err != nil || !c.armed.Load() {
		return err
	}
	return errors.New("sqlcatalog: commit: driver: bad connection")
}

func (c *uncertainCommit) HoldsBlob(ctx context.Context, key string) (bool, error) {
	if c.armed.Load() {
		return false, errors.New("sqlcatalog: driver: bad connection")
	}
	return c.Catalog.HoldsBlob(ctx, key)
}
