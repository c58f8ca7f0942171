package rest

// Fuzz targets of what a client sends the engine: identifiers in the path, the
// multipart forms of create, update and the setters, and the query parameters
// of the listings. Each goes through the real gin engine, with a fake node that
// never fails, so any 5xx is the engine's fault. Run one with
//
//	go test -run '^$' -fuzz '^FuzzObjectForm$' -fuzztime 60s ./adapter/rest/

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// recordingNode is the fake node, remembering what reached it: the system
// metadata of create, update, registerSystemMetadata and updateSystemMetadata,
// the identifiers of the calls, and the listing queries.
type recordingNode struct {
	*fakeNode
	mu    sync.Mutex
	metas []*adapter.SystemMetadata
	ids   []string
	list  *adapter.ListQuery
	log   *adapter.LogQuery
}

func (n *recordingNode) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.metas, n.ids, n.list, n.log = nil, nil, nil, nil
	n.fakeNode.last = ""
}

func (n *recordingNode) meta(sm *adapter.SystemMetadata, ids ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if sm != nil {
		n.metas = append(n.metas, sm.Clone())
	}
	n.ids = append(n.ids, ids...)
}

func (n *recordingNode) Create(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	n.meta(sm)
	return n.fakeNode.Create(ctx, s, sm, u)
}

func (n *recordingNode) Update(ctx context.Context, s *adapter.Session, id string, sm *adapter.SystemMetadata, u *adapter.Upload) (*adapter.SystemMetadata, error) {
	n.meta(sm, id)
	return n.fakeNode.Update(ctx, s, id, sm, u)
}

func (n *recordingNode) UpdateSystemMetadata(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata) error {
	n.meta(sm)
	return n.fakeNode.UpdateSystemMetadata(ctx, s, sm)
}

func (n *recordingNode) RegisterSystemMetadata(ctx context.Context, s *adapter.Session, sm *adapter.SystemMetadata) (string, error) {
	n.meta(sm)
	return n.fakeNode.RegisterSystemMetadata(ctx, s, sm)
}

func (n *recordingNode) SystemMetadata(ctx context.Context, s *adapter.Session, id string) (*adapter.SystemMetadata, error) {
	n.meta(nil, id)
	return n.fakeNode.SystemMetadata(ctx, s, id)
}

func (n *recordingNode) SetObsoletedBy(ctx context.Context, s *adapter.Session, pid, by string, v uint64) error {
	n.meta(nil, pid, by)
	return n.fakeNode.SetObsoletedBy(ctx, s, pid, by, v)
}

func (n *recordingNode) SetAccessPolicy(ctx context.Context, s *adapter.Session, pid string, p *adapter.AccessPolicy, v uint64) error {
	if err := adapter.CheckAccessPolicy(p); err != nil {
		panic("an access policy the checks refuse reached the node: " + err.Error())
	}
	n.meta(nil, pid)
	return n.fakeNode.SetAccessPolicy(ctx, s, pid, p, v)
}

func (n *recordingNode) SetReplicationPolicy(ctx context.Context, s *adapter.Session, pid string, p *adapter.ReplicationPolicy, v uint64) error {
	if err := adapter.CheckReplicationPolicy(p); err != nil {
		panic("a replication policy the checks refuse reached the node: " + err.Error())
	}
	n.meta(nil, pid)
	return n.fakeNode.SetReplicationPolicy(ctx, s, pid, p, v)
}

func (n *recordingNode) ListObjects(ctx context.Context, s *adapter.Session, q adapter.ListQuery) (*adapter.ObjectList, error) {
	n.mu.Lock()
	n.list = &q
	n.mu.Unlock()
	return n.fakeNode.ListObjects(ctx, s, q)
}

func (n *recordingNode) LogRecords(ctx context.Context, s *adapter.Session, q adapter.LogQuery) (*adapter.Log, error) {
	n.mu.Lock()
	n.log = &q
	n.mu.Unlock()
	return n.fakeNode.LogRecords(ctx, s, q)
}

// fuzzEngine is the engine of testEngine (every caller trusted) over a
// recording fake, built once per fuzz target.
func fuzzEngine() (http.Handler, *recordingNode) {
	n := &recordingNode{fakeNode: newFake()}
	p := auth.Policy{Submitters: []string{adapter.SubjectPublic}, Trusted: []string{adapter.SubjectPublic}}
	h := New(Options{
		Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST", Name: "t", Description: "d", BaseURL: "http://x/d1",
			ContactSubjects: []string{"CN=a"}},
		MN: n, CN: n, Authorizer: auth.NewAuthorizer(p), Metrics: metrics.New(prometheus.NewRegistry(), "fuzz"),
		MaxUploadSize: 1 << 20,
	})
	return h, n
}

// checkAnswer is what every answer to client input must be: never a 5xx (the
// node does not fail), and an error is a DataONE <error> document (on HEAD, its
// headers) whose status is its kind's. It returns the exception, nil on success.
func checkAnswer(t *testing.T, method string, w *httptest.ResponseRecorder) *adapter.Exception {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("client input got %d: %s", w.Code, w.Body.String())
	}
	if w.Code < 400 {
		return nil
	}
	if method == http.MethodHead {
		name := wireHeader(w, "DataONE-Exception-Name")
		k, ok := adapter.KindByName(name)
		if !ok {
			t.Fatalf("HEAD %d without a known DataONE-Exception-Name (%q)", w.Code, name)
		}
		return &adapter.Exception{Kind: k}
	}
	e, err := adapter.DecodeException(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%d is not a DataONE error: %v\n%s", w.Code, err, w.Body.String())
	}
	if e.HTTPStatus() != w.Code {
		t.Fatalf("%s answered with status %d, its kind's is %d", e.Kind, w.Code, e.HTTPStatus())
	}
	return e
}

// checkIdentifiers: every identifier that reached the node is one.
func (n *recordingNode) checkIdentifiers(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, id := range n.ids {
		if err := adapter.CheckIdentifier(id); err != nil {
			t.Fatalf("identifier %q reached the node: %v", id, err)
		}
	}
	for _, sm := range n.metas {
		if err := adapter.CheckSystemMetadata(sm); err != nil {
			t.Fatalf("system metadata the checks refuse reached the node: %v", err)
		}
	}
}

// FuzzIdentifierPath sends a raw path segment as the :id of the object routes:
// a 4xx or a success, never a 5xx; the identifier the node is asked for is a
// valid identifier (no control character, no whitespace), and the same one the
// answer names.
func FuzzIdentifierPath(f *testing.F) {
	for _, s := range []string{"x%2Fy", "p1", "doi:10.5063%2FF1QN64NZ", "a%01b", "a%C2%85b", "a%20b", "%", "%zz",
		"a%2F..%2Fb", "%EF%BF%BE", "a+b", "..", "%00", "a;b=c", "a%C0%80"} {
		for op := range 6 {
			f.Add(s, uint8(op))
		}
	}
	h, n := fuzzEngine()
	routes := []struct{ method, prefix string }{
		{http.MethodGet, "/d1/mn/v2/meta/"}, {http.MethodGet, "/d1/mn/v1/object/"}, {http.MethodHead, "/d1/mn/v2/object/"},
		{http.MethodGet, "/d1/mn/v2/checksum/"}, {http.MethodGet, "/d1/cn/v2/resolve/"}, {http.MethodGet, "/d1/mn/v2/isAuthorized/"},
	}
	f.Fuzz(func(t *testing.T, seg string, op uint8) {
		rt := routes[int(op)%len(routes)]
		req, err := http.NewRequest(rt.method, "http://x"+rt.prefix+seg, nil)
		if err != nil || req.URL.Host != "x" {
			return // not a request line a client could send
		}
		n.reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkAnswer(t, rt.method, w)
		n.checkIdentifiers(t)
		if w.Code == http.StatusOK && rt.prefix == "/d1/mn/v2/meta/" {
			var sm adapter.SystemMetadata
			if err := adapter.Decode(w.Body, &sm); err != nil {
				t.Fatalf("the system metadata answer does not decode: %v", err)
			}
			if err := adapter.CheckIdentifier(sm.Identifier); err != nil {
				t.Fatalf("answer names identifier %q: %v", sm.Identifier, err)
			}
			if len(n.ids) != 1 || n.ids[0] != sm.Identifier {
				t.Fatalf("the node was asked for %q, the answer names %q", n.ids, sm.Identifier)
			}
		}
	})
}

// formOps are the operations that read a multipart form.
var formOps = []struct{ method, path string }{
	{http.MethodPost, "/d1/mn/v2/object"},
	{http.MethodPut, "/d1/mn/v2/object/old"},
	{http.MethodPut, "/d1/mn/v2/meta"},
	{http.MethodPut, "/d1/mn/v2/accessRules/p1"},
	{http.MethodPost, "/d1/cn/v2/meta"},
	{http.MethodPut, "/d1/cn/v2/accessRules/p1"},
	{http.MethodPut, "/d1/cn/v2/replicaPolicies/p1"},
	{http.MethodPut, "/d1/cn/v2/replicaMetadata/p1"},
	{http.MethodPut, "/d1/cn/v2/owner/p1"},
	{http.MethodPut, "/d1/cn/v2/obsoletedBy/p1"},
	{http.MethodPut, "/d1/cn/v2/replicaNotifications/p1"},
	{http.MethodPost, "/d1/mn/v2/error"},
	{http.MethodPost, "/d1/mn/v1/object"},
	{http.MethodPost, "/d1/cn/v2/object"},
	{http.MethodPost, "/d1/mn/v2/dirtySystemMetadata"},
}

const fuzzBoundary = "d1fuzzboundary"

// form is a multipart body of parts with fuzzBoundary.
func form(parts ...formPart) []byte {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.SetBoundary(fuzzBoundary)
	for _, p := range parts {
		fw, _ := mw.CreateFormFile(p.name, p.name)
		io.WriteString(fw, p.value)
	}
	mw.Close()
	return buf.Bytes()
}

// FuzzObjectForm sends a multipart body and boundary to every operation that
// reads a form (MN create, update, updateSystemMetadata, setAccessPolicy,
// synchronizationFailed, systemMetadataChanged; CN create,
// registerSystemMetadata and the setters): a 4xx or a success, never a 5xx;
// an error is a DataONE document of its kind's status; system metadata,
// policies and identifiers that reach the node pass the schema's checks.
func FuzzObjectForm(f *testing.F) {
	rule := `<allow><subject>public</subject><permission>read</permission></allow>`
	sm := sysmetaXML("p1", "", "")
	seeds := map[int][][]formPart{
		0:  {{{"pid", "p1"}, {"sysmeta", sm}, {"object", "hello"}}, {{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<bogus/>", "")}, {"object", "hello"}}},
		1:  {{{"newPid", "p2"}, {"sysmeta", sysmetaXML("p2", "<obsoletes>old</obsoletes>", "")}, {"object", "hello"}}},
		2:  {{{"pid", "p1"}, {"sysmeta", sm}}},
		3:  {{{"accessPolicy", apOpen + rule + apClose}, {"serialVersion", "1"}}},
		4:  {{{"pid", "p1"}, {"sysmeta", sm}}},
		5:  {{{"accessPolicy", apOpen + rule + apClose}, {"serialVersion", "1"}}},
		6:  {{{"policy", rpOpen + `<preferredMemberNode>urn:node:A</preferredMemberNode>` + rpClose}, {"serialVersion", "1"}}},
		7:  {{{"replicaMetadata", `<d1:replica xmlns:d1="http://ns.dataone.org/service/types/v1"><replicaMemberNode>urn:node:A</replicaMemberNode><replicationStatus>completed</replicationStatus><replicaVerified>2024-01-01T00:00:00Z</replicaVerified></d1:replica>`}, {"serialVersion", "1"}}},
		8:  {{{"userId", "CN=b"}, {"serialVersion", "1"}}},
		9:  {{{"obsoletedByPid", "p2"}, {"serialVersion", "1"}}},
		10: {{{"nodeRef", "urn:node:A"}, {"status", "completed"}}},
		11: {{{"message", `<error name="SynchronizationFailed" errorCode="500" detailCode="0" identifier="p1"><description>x</description></error>`}}},
		12: {{{"pid", "p1"}, {"sysmeta", strings.ReplaceAll(sm, "types/v2.0", "types/v1")}, {"object", "hello"}}},
		13: {{{"pid", "p1"}, {"sysmeta", sm}, {"object", "hello"}}},
		14: {{{"pid", "p1"}, {"serialVersion", "1"}, {"dateSysMetaLastModified", "2024-01-01T00:00:00Z"}}},
	}
	for op, forms := range seeds {
		for _, parts := range forms {
			f.Add(form(parts...), fuzzBoundary, uint8(op))
		}
	}
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"pid\"\r\n\r\np1\r\n--b--\r\n"), "b", uint8(0))
	h, n := fuzzEngine()
	f.Fuzz(func(t *testing.T, body []byte, boundary string, op uint8) {
		o := formOps[int(op)%len(formOps)]
		req := httptest.NewRequest(o.method, "http://x"+o.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		n.reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkAnswer(t, o.method, w)
		n.checkIdentifiers(t)
	})
}

// FuzzListingQuery sends a raw query string to listObjects and getLogRecords
// (MN and CN, v1 and v2): a 200 with the list, or InvalidRequest, nothing
// else; the query the node receives has a count within the maximum, a
// non-negative start, and an identifier that is one.
func FuzzListingQuery(f *testing.F) {
	for _, q := range []string{"", "start=0&count=10", "count=100000", "start=-1", "count=x", "fromDate=2024-01-01T00:00:00Z&toDate=2024-02-01",
		"fromDate=yesterday", "formatId=text/csv&replicaStatus=false", "replicaStatus=maybe", "identifier=a%01b", "identifier=x%2Fy",
		"event=read&idFilter=p", "event=bogus", "pidFilter=p&start=5", "nodeId=urn:node:A", "%zz", "a=%", "count=9223372036854775808",
		"fromDate=Mon, 02 Jan 2006 15:04:05 MST", "identifier=&count="} {
		for op := range 6 {
			f.Add(q, uint8(op))
		}
	}
	h, n := fuzzEngine()
	paths := []string{"/d1/mn/v2/object", "/d1/mn/v1/object", "/d1/mn/v2/log", "/d1/mn/v1/log", "/d1/cn/v2/object", "/d1/cn/v2/log"}
	f.Fuzz(func(t *testing.T, rawQuery string, op uint8) {
		p := paths[int(op)%len(paths)]
		req, err := http.NewRequest(http.MethodGet, "http://x"+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.RawQuery = rawQuery
		n.reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if e := checkAnswer(t, http.MethodGet, w); e != nil {
			if e.Kind != adapter.InvalidRequest {
				t.Fatalf("query %q: %s (%d), want a list or InvalidRequest", rawQuery, e.Kind, w.Code)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("query %q: %d", rawQuery, w.Code)
		}
		if err := xml.NewDecoder(w.Body).Decode(new(struct{})); err != nil {
			t.Fatalf("the list is not XML: %v", err)
		}
		var start, count int
		switch {
		case n.list != nil:
			start, count = n.list.Start, n.list.Count
			if id := n.list.Identifier; id != "" {
				if err := adapter.CheckIdentifier(id); err != nil {
					t.Fatalf("identifier %q reached the node: %v", id, err)
				}
			}
		case n.log != nil:
			start, count = n.log.Start, n.log.Count
		default:
			t.Fatalf("query %q: 200 without asking the node", rawQuery)
		}
		if start < 0 || count < 0 || count > maxCount {
			t.Fatalf("query %q reached the node as start %d count %d", rawQuery, start, count)
		}
	})
}
