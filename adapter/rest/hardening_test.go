package rest

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// formPart is one part of a multipart test body.
type formPart struct{ name, value string }

func serveForm(h http.Handler, method, path string, parts ...formPart) *httptest.ResponseRecorder {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		fw, _ := mw.CreateFormFile(p.name, p.name)
		io.WriteString(fw, p.value)
	}
	mw.Close()
	req := httptest.NewRequest(method, "http://x"+path, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// wantException checks status, kind, a valid <error> body and words of its description.
func wantException(t *testing.T, w *httptest.ResponseRecorder, status int, kind string, words ...string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d %s: %s", w.Code, status, kind, w.Body.String())
	}
	xsdtest.Validate(t, w.Body.Bytes())
	var doc struct {
		Name        string `xml:"name,attr"`
		Description string `xml:"description"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Name != kind {
		t.Fatalf("exception %s, want %s: %s", doc.Name, kind, doc.Description)
	}
	for _, s := range words {
		if !strings.Contains(doc.Description, s) {
			t.Errorf("description %q does not say %q", doc.Description, s)
		}
	}
}

// sysmetaXML is a valid v2 system metadata document for pid with extra inserted
// inside the root, after the rightsHolder; ap replaces the access policy.
func sysmetaXML(pid, extra, ap string) string {
	if ap == "" {
		ap = `<accessPolicy><allow><subject>public</subject><permission>read</permission></allow></accessPolicy>`
	}
	return `<?xml version="1.0"?><d2:systemMetadata xmlns:d2="http://ns.dataone.org/service/types/v2.0">` +
		`<serialVersion>1</serialVersion><identifier>` + pid + `</identifier><formatId>text/plain</formatId>` +
		`<size>5</size><checksum algorithm="MD5">5d41402abc4b2a76b9719d911017c592</checksum>` +
		`<rightsHolder>CN=a</rightsHolder>` + extra + ap + `</d2:systemMetadata>`
}

const (
	apOpen  = `<d1:accessPolicy xmlns:d1="http://ns.dataone.org/service/types/v1">`
	apClose = `</d1:accessPolicy>`
	rpOpen  = `<d1:replicationPolicy xmlns:d1="http://ns.dataone.org/service/types/v1" replicationAllowed="true" numberReplicas="2">`
	rpClose = `</d1:replicationPolicy>`
)

// TestSchemaStrictDocuments: every place a client sends system metadata or a
// policy, an element the schema does not define, an empty subject or node, and
// a control character in an identifier are refused with the kind the operation
// lists and a description naming what is wrong; nothing reaches the node.
func TestSchemaStrictDocuments(t *testing.T) {
	rule := `<allow><subject>public</subject><permission>read</permission></allow>`
	cases := []struct {
		name, method, path string
		parts              []formPart
		kind               string
		words              []string
	}{
		{"mn create unknown element", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<bogus>1</bogus>", "")}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"bogus"}},
		{"mn create unknown element in a rule", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "", `<accessPolicy><allow><subject>public</subject><permission>read</permission><deny>x</deny></allow></accessPolicy>`)}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"deny"}},
		{"mn create unknown element in a checksum", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", strings.Replace(sysmetaXML("p1", "", ""), "</checksum>", "<x/></checksum>", 1)}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"x"}},
		{"mn create repeated element", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<formatId>text/csv</formatId>", "")}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"formatId"}},
		{"mn create v2 element in a v1 document", http.MethodPost, "/d1/mn/v1/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", strings.ReplaceAll(sysmetaXML("p1", "<seriesId>s1</seriesId>", ""), "types/v2.0", "types/v1")}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"seriesId"}},
		{"mn create empty subject", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "", `<accessPolicy><allow><subject> </subject><permission>read</permission></allow></accessPolicy>`)}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"subject"}},
		{"mn create empty preferred node", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", `<replicationPolicy replicationAllowed="true"><preferredMemberNode></preferredMemberNode></replicationPolicy>`, "")}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"preferredMemberNode"}},
		{"mn create control character in obsoletes", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "", "") + ""}, {"object", "hello"}},
			"", nil}, // replaced below
		{"mn create control character in the pid part", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p\u00851x"}, {"sysmeta", sysmetaXML("p\u00851x", "", "")}, {"object", "hello"}},
			"InvalidRequest", nil},
		{"mn create DEL in the pid part", http.MethodPost, "/d1/mn/v2/object",
			[]formPart{{"pid", "p\u007f1"}, {"sysmeta", sysmetaXML("p\u007f1", "", "")}, {"object", "hello"}},
			"InvalidRequest", []string{"control character"}},
		{"mn update unknown element", http.MethodPut, "/d1/mn/v2/object/old",
			[]formPart{{"newPid", "p2"}, {"sysmeta", sysmetaXML("p2", "<extra/>", "")}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"extra"}},
		{"mn updateSystemMetadata unknown element", http.MethodPut, "/d1/mn/v2/meta",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<extra/>", "")}},
			"InvalidSystemMetadata", []string{"extra"}},
		{"mn updateSystemMetadata empty subject", http.MethodPut, "/d1/mn/v2/meta",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "", `<accessPolicy><allow><subject></subject><permission>read</permission></allow></accessPolicy>`)}},
			"InvalidSystemMetadata", []string{"subject"}},
		{"mn updateSystemMetadata C1 in seriesId", http.MethodPut, "/d1/mn/v2/meta",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<seriesId>s\u00811</seriesId>", "")}},
			"InvalidRequest", []string{"control character"}},
		{"mn setAccessPolicy unknown element", http.MethodPut, "/d1/mn/v2/accessRules/p1",
			[]formPart{{"accessPolicy", apOpen + rule + "<deny/>" + apClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"deny"}},
		{"mn setAccessPolicy empty subject", http.MethodPut, "/d1/mn/v2/accessRules/p1",
			[]formPart{{"accessPolicy", apOpen + `<allow><subject>  </subject><permission>read</permission></allow>` + apClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"subject"}},
		{"mn setAccessPolicy too many rules", http.MethodPut, "/d1/mn/v2/accessRules/p1",
			[]formPart{{"accessPolicy", apOpen + strings.Repeat(rule, adapter.MaxAccessRules+1) + apClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"rules"}},
		{"cn create unknown element", http.MethodPost, "/d1/cn/v2/object",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<bogus/>", "")}, {"object", "hello"}},
			"InvalidSystemMetadata", []string{"bogus"}},
		{"cn registerSystemMetadata unknown element", http.MethodPost, "/d1/cn/v2/meta",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<bogus/>", "")}},
			"InvalidSystemMetadata", []string{"bogus"}},
		{"cn updateSystemMetadata unknown element", http.MethodPut, "/d1/cn/v2/meta",
			[]formPart{{"pid", "p1"}, {"sysmeta", sysmetaXML("p1", "<bogus/>", "")}},
			"InvalidSystemMetadata", []string{"bogus"}},
		{"cn setAccessPolicy unknown element", http.MethodPut, "/d1/cn/v2/accessRules/p1",
			[]formPart{{"accessPolicy", apOpen + strings.Replace(rule, "<permission>", "<bogus/><permission>", 1) + apClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"bogus"}},
		{"cn setAccessPolicy empty subject", http.MethodPut, "/d1/cn/v2/accessRules/p1",
			[]formPart{{"accessPolicy", apOpen + `<allow><subject></subject><permission>read</permission></allow>` + apClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"subject"}},
		{"cn setReplicationPolicy unknown element", http.MethodPut, "/d1/cn/v2/replicaPolicies/p1",
			[]formPart{{"policy", rpOpen + `<preferredMemberNode>urn:node:A</preferredMemberNode><bogus/>` + rpClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"bogus"}},
		{"cn setReplicationPolicy empty blocked node", http.MethodPut, "/d1/cn/v2/replicaPolicies/p1",
			[]formPart{{"policy", rpOpen + `<blockedMemberNode> </blockedMemberNode>` + rpClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"blockedMemberNode"}},
		{"cn setReplicationPolicy too many nodes", http.MethodPut, "/d1/cn/v2/replicaPolicies/p1",
			[]formPart{{"policy", rpOpen + strings.Repeat(`<preferredMemberNode>urn:node:A</preferredMemberNode>`, adapter.MaxReplicationNodes+1) + rpClose}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"preferredMemberNode"}},
		{"cn updateReplicationMetadata unknown element", http.MethodPut, "/d1/cn/v2/replicaMetadata/p1",
			[]formPart{{"replicaMetadata", `<d1:replica xmlns:d1="http://ns.dataone.org/service/types/v1"><replicaMemberNode>urn:node:A</replicaMemberNode><replicationStatus>completed</replicationStatus><replicaVerified>2024-01-01T00:00:00Z</replicaVerified><bogus/></d1:replica>`}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"bogus"}},
		{"cn setRightsHolder empty subject", http.MethodPut, "/d1/cn/v2/owner/p1",
			[]formPart{{"userId", "  "}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"userId"}},
		{"cn setObsoletedBy control character", http.MethodPut, "/d1/cn/v2/obsoletedBy/p1",
			[]formPart{{"obsoletedByPid", "p\u00822"}, {"serialVersion", "1"}},
			"InvalidRequest", []string{"control character"}},
	}
	cases[7].parts[1].value = sysmetaXML("p1", "<obsoletes>p\u00800</obsoletes>", "")
	cases[7].kind, cases[7].words = "InvalidRequest", []string{"obsoletes", "control character"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			h, _ := testEngine(t, f, true)
			w := serveForm(h, c.method, c.path, c.parts...)
			status := http.StatusBadRequest
			wantException(t, w, status, c.kind, c.words...)
			switch f.last {
			case "Create", "Update", "UpdateSystemMetadata", "SetAccessPolicy", "RegisterSystemMetadata",
				"SetReplicationPolicy", "SetRightsHolder", "SetObsoletedBy", "UpdateReplicationMetadata":
				t.Errorf("the node was called (%s)", f.last)
			}
		})
	}
}

// TestControlCharactersInIdentifiers: C0, DEL and C1 characters in an identifier
// in the path or the query are InvalidRequest.
func TestControlCharactersInIdentifiers(t *testing.T) {
	for _, id := range []string{"a\x01b", "a\x7fb", "a\u0080b", "a\u009fb", "a\x00b"} {
		t.Run(url.PathEscape(id), func(t *testing.T) {
			h, _ := testEngine(t, newFake(), true)
			wantException(t, serve(h, http.MethodGet, "/d1/mn/v2/meta/"+url.PathEscape(id)), http.StatusBadRequest, "InvalidRequest", "control character")
			wantException(t, serve(h, http.MethodGet, "/d1/mn/v2/object?identifier="+url.QueryEscape(id)), http.StatusBadRequest, "InvalidRequest", "control character")
		})
	}
}

// TestClientGoneIsNeverWritten: when the client went away, nothing is written to
// the connection (not the non-standard 499), but the logs and the metrics record 499.
func TestClientGoneIsNeverWritten(t *testing.T) {
	f := newFake()
	f.err = context.Canceled
	h, reg := testEngine(t, f, true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, "http://x/d1/mn/v2/meta/p1", nil).WithContext(ctx)
	w := &headerSpy{ResponseRecorder: httptest.NewRecorder()}
	func() {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panic(p)
			}
		}()
		h.ServeHTTP(w, req)
	}()
	if len(w.written) > 0 {
		t.Fatalf("a gone client was sent status %v", w.written)
	}
	if w.Body.Len() > 0 {
		t.Fatalf("a gone client was sent a body: %q", w.Body.String())
	}
	if n := testutil.ToFloat64(requestsCounter(reg, "mn", "v2", "MNRead.getSystemMetadata", "499")); n != 1 {
		t.Fatalf("d1bridge_requests_total{code=499} is %v, want 1", n)
	}
}

// headerSpy records every status written.
type headerSpy struct {
	*httptest.ResponseRecorder
	written []int
}

func (s *headerSpy) WriteHeader(code int) {
	s.written = append(s.written, code)
	s.ResponseRecorder.WriteHeader(code)
}

func (s *headerSpy) Write(p []byte) (int, error) {
	if len(s.written) == 0 {
		s.written = append(s.written, http.StatusOK)
	}
	return s.ResponseRecorder.Write(p)
}

// TestRangesFollowRFC9110: one satisfiable range is a 206; an unsatisfiable one
// (bytes=-0, a start beyond the end, any range of an empty object) is a 416 with
// Content-Range bytes */size; a malformed Range header and several ranges are
// ignored (200 with the whole object).
func TestRangesFollowRFC9110(t *testing.T) {
	body := "0123456789"
	cases := []struct {
		name, body, rng string
		status          int
		contentRange    string
		want            string
	}{
		{"one range", body, "bytes=2-4", 206, "bytes 2-4/10", "234"},
		{"suffix", body, "bytes=-3", 206, "bytes 7-9/10", "789"},
		{"open end", body, "bytes=8-", 206, "bytes 8-9/10", "89"},
		{"end beyond the size", body, "bytes=8-100", 206, "bytes 8-9/10", "89"},
		{"suffix longer than the object", body, "bytes=-100", 206, "bytes 0-9/10", body},
		{"suffix of zero", body, "bytes=-0", 416, "bytes */10", ""},
		{"start at the size", body, "bytes=10-", 416, "bytes */10", ""},
		{"start beyond the size", body, "bytes=20-30", 416, "bytes */10", ""},
		{"every range unsatisfiable", body, "bytes=20-30, -0", 416, "bytes */10", ""},
		{"one of two satisfiable", body, "bytes=20-30, 1-2", 206, "bytes 1-2/10", "12"},
		{"several ranges", body, "bytes=0-1, 4-5", 200, "", body},
		{"empty list elements", body, "bytes=, 2-4 ,", 206, "bytes 2-4/10", "234"},
		{"malformed: last before first", body, "bytes=5-2", 200, "", body},
		{"malformed: not a number", body, "bytes=a-b", 200, "", body},
		{"malformed: no dash", body, "bytes=5", 200, "", body},
		{"malformed: double dash", body, "bytes=--5", 200, "", body},
		{"malformed: empty set", body, "bytes=", 200, "", body},
		{"other unit", body, "items=0-1", 200, "", body},
		{"empty object, open range", "", "bytes=0-", 416, "bytes */0", ""},
		{"empty object, suffix", "", "bytes=-5", 200, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			f.seekable, f.body = true, c.body
			f.meta.Size = uint64(len(c.body))
			h, _ := testEngine(t, f, true)
			req := httptest.NewRequest(http.MethodGet, "http://x/d1/mn/v2/object/p1", nil)
			req.Header.Set("Range", c.rng)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d (Content-Range %q, body %q)", w.Code, c.status, w.Header().Get("Content-Range"), w.Body.String())
			}
			if got := w.Header().Get("Content-Range"); got != c.contentRange {
				t.Errorf("Content-Range %q, want %q", got, c.contentRange)
			}
			if c.status == 416 {
				if ex := refusal(t, w); !strings.Contains(ex.Description, c.rng) {
					t.Errorf("416 says %q, want the range %q named", ex.Description, c.rng)
				}
			} else if w.Body.String() != c.want {
				t.Errorf("body %q, want %q", w.Body.String(), c.want)
			}
			if c.status == 200 && w.Header().Get("Accept-Ranges") != "bytes" {
				t.Errorf("Accept-Ranges %q", w.Header().Get("Accept-Ranges"))
			}
		})
	}
	// A failed precondition is a DataONE error whose length is its own, not
	// the object's (a Content-Length of the object with no body breaks the
	// connection), without the object's describe headers.
	for name, hd := range map[string][2]string{
		"If-Match":            {"If-Match", `"other"`},
		"If-Unmodified-Since": {"If-Unmodified-Since", "Mon, 01 Jan 2001 00:00:00 GMT"},
	} {
		t.Run("412 on "+name, func(t *testing.T) {
			f := newFake()
			f.seekable = true
			h, _ := testEngine(t, f, true)
			req := httptest.NewRequest(http.MethodGet, "http://x/d1/mn/v2/object/p1", nil)
			req.Header.Set(hd[0], hd[1])
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusPreconditionFailed {
				t.Fatalf("%d %q, want 412", w.Code, w.Body.String())
			}
			refusal(t, w)
			if cl := w.Header().Get("Content-Length"); cl != "" && cl != fmt.Sprint(w.Body.Len()) {
				t.Errorf("Content-Length %s for a body of %d bytes", cl, w.Body.Len())
			}
			for _, k := range []string{"Content-Disposition", "DataONE-Checksum", "DataONE-FormatId"} {
				if v := w.Header().Get(k); v != "" {
					t.Errorf("the error carries the object's %s: %q", k, v)
				}
			}
		})
	}
	t.Run("If-Range that does not match serves the whole object", func(t *testing.T) {
		f := newFake()
		f.seekable = true
		h, _ := testEngine(t, f, true)
		req := httptest.NewRequest(http.MethodGet, "http://x/d1/mn/v2/object/p1", nil)
		req.Header.Set("Range", "bytes=-0")
		req.Header.Set("If-Range", `"other"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 || w.Body.String() != f.body {
			t.Fatalf("%d %q", w.Code, w.Body.String())
		}
	})
}

// refusal checks that w, a 412 or 416, is an InvalidRequest error document
// whose errorCode is the status, and returns it.
func refusal(t *testing.T, w *httptest.ResponseRecorder) *adapter.Exception {
	t.Helper()
	xsdtest.Validate(t, w.Body.Bytes())
	ex, err := adapter.DecodeException(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%d is not a DataONE error: %v", w.Code, err)
	}
	if ex.Kind != adapter.InvalidRequest || !strings.Contains(w.Body.String(), fmt.Sprintf(`errorCode="%d"`, w.Code)) {
		t.Errorf("%d answers %s: %s", w.Code, ex.Kind, w.Body.String())
	}
	return ex
}

// TestLargeGetOverTCP: an object of largeCopyFrom bytes or more, copied
// through the large buffers: over a real connection, the whole object and a
// range arrive intact, and the response bytes metric counts what was sent.
func TestLargeGetOverTCP(t *testing.T) {
	f := newFake()
	f.seekable = true
	f.body = strings.Repeat("0123456789abcdef", 3*largeCopyFrom/16+5)
	f.meta.Size = uint64(len(f.body))
	h, reg := testEngine(t, f, true)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(rng string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/d1/mn/v2/object/p1", nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, b := get(""); code != 200 || b != f.body {
		t.Fatalf("whole object: %d, %d bytes, want 200 and %d bytes", code, len(b), len(f.body))
	}
	first, last := largeCopyFrom-7, 2*largeCopyFrom+3
	if code, b := get(fmt.Sprintf("bytes=%d-%d", first, last)); code != 206 || b != f.body[first:last+1] {
		t.Fatalf("range: %d, %d bytes, want 206 and %d bytes", code, len(b), last+1-first)
	}
	// The client can read the last byte before the handler returns and the
	// metric is recorded; Close waits for the handlers.
	srv.Close()
	want := float64(len(f.body) + last + 1 - first)
	if got := testutil.ToFloat64(responseBytes(reg, "MNRead.get")); got != want {
		t.Errorf("response bytes counted %v, want %v", got, want)
	}
}

// TestFormPartsBounded: a body of more parts than any DataONE form has is
// refused once past the bound, on the MN's forms and the CN's (whose unknown
// parts are kept as text).
func TestFormPartsBounded(t *testing.T) {
	h, n := fuzzEngine()
	parts := []formPart{{"pid", "p1"}}
	for i := range maxParts {
		parts = append(parts, formPart{fmt.Sprintf("x%d", i), strings.Repeat("x", 1000)})
	}
	for _, path := range []string{"/d1/mn/v2/object", "/d1/cn/v2/meta", "/d1/cn/v2/reserve"} {
		t.Run(path, func(t *testing.T) {
			n.reset()
			wantException(t, serveForm(h, http.MethodPost, path, parts...), http.StatusBadRequest, "InvalidRequest", fmt.Sprintf("more than %d parts", maxParts))
			if len(n.ids) != 0 {
				t.Errorf("the node was asked for %v", n.ids)
			}
		})
	}
}

// TestDateOffsetUnescaped: a date's '+' offset left unescaped in the query
// (curl users' fromDate=...+01:00) reads as the offset, not as a space.
func TestDateOffsetUnescaped(t *testing.T) {
	h, _ := testEngine(t, newFake(), true)
	for _, q := range []string{"fromDate=2020-01-02T03:04:05+01:00", "fromDate=2020-01-02T03:04:05%2B01:00", "toDate=2020-01-02T03:04:05.123+0100"} {
		if w := serve(h, http.MethodGet, "/d1/mn/v2/log?"+q); w.Code != http.StatusOK {
			t.Errorf("%s: %d %s", q, w.Code, w.Body.String())
		}
	}
	wantException(t, serve(h, http.MethodGet, "/d1/mn/v2/log?fromDate=2020-01-02+03:04:05"), http.StatusBadRequest, "InvalidRequest", "fromDate")
}

// TestDateRFC1123: an RFC 1123 date (Metacat accepts it in queries) is made of
// spaces, which the unescaped '+' repair turned into '+': it was refused.
func TestDateRFC1123(t *testing.T) {
	h, _ := testEngine(t, newFake(), true)
	for _, path := range []string{
		"/d1/mn/v2/object?fromDate=Wed,%2031%20Jan%202024%2012:00:00%20GMT",
		"/d1/mn/v2/log?toDate=Wed,%2031%20Jan%202024%2012:00:00%20%2B0100",
	} {
		if w := serve(h, http.MethodGet, path); w.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, w.Code, w.Body.String())
		}
	}
}

// TestPagingBeyondXSInt: a Slice's start is an xs:int; a start beyond it was
// echoed into a list that does not validate. It is InvalidRequest.
func TestPagingBeyondXSInt(t *testing.T) {
	h, _ := testEngine(t, newFake(), true)
	for _, path := range []string{"/d1/mn/v2/object?start=2147483648", "/d1/mn/v1/log?start=3000000000", "/d1/cn/v2/object?count=99999999999"} {
		wantException(t, serve(h, http.MethodGet, path), http.StatusBadRequest, "InvalidRequest", "from 0 to 2147483647")
	}
	w := serve(h, http.MethodGet, "/d1/mn/v2/object?start=2147483647")
	if w.Code != http.StatusOK {
		t.Fatalf("start=2147483647: %d %s", w.Code, w.Body.String())
	}
	xsdtest.Validate(t, w.Body.Bytes())
}
