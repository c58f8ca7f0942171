package rest

// Review of the REST layer's HTTP edge: what DataONE clients other than the
// Python one (the Java libclient, which the CN, Metacat and the MN WebTester
// use) and plain HTTP clients meet.

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// rawHead sends req (a raw HTTP/1.1 request) to srv and returns the response
// head as it came off the wire: status line and header lines, their names
// spelled as the server wrote them.
func rawHead(t *testing.T, srv *httptest.Server, req string) string {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the response head: %v (so far %q)", err, head.String())
		}
		if line == "\r\n" {
			return head.String()
		}
		head.WriteString(line)
	}
}

// TestDescribeHeaderNamesAsTheJavaClientReadsThem: the Java libclient (d1_libclient_java
// MultipartD1Node.describe, d1_common_java ExceptionHandler.deserializeHeadersAndThrowException)
// copies the response headers into a HashMap keyed by the name as received and looks up
// "DataONE-ObjectFormat", "DataONE-Checksum", "DataONE-SerialVersion" and, for a HEAD
// error, "DataONE-Exception-Name", "-DetailCode", "-Description", "-PID": exactly those
// spellings (API.md §5.2, §6.3; GMN and Metacat write them so). net/http writes a header
// name as it is stored in the map, and Header.Set stores Go's canonical form
// ("Dataone-Objectformat", "Dataone-Exception-Name"), so that client reads a describe as
// having no format, checksum or serial version, and every describe error as
// ServiceFailure "0000: NON-D1-EXCEPTION".
func TestDescribeHeaderNamesAsTheJavaClientReadsThem(t *testing.T) {
	f := newFake()
	h, _ := testEngine(t, f, true)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req := "HEAD /d1/mn/v2/object/p1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

	t.Run("describe", func(t *testing.T) {
		head := rawHead(t, srv, req)
		if !strings.HasPrefix(head, "HTTP/1.1 200") {
			t.Fatalf("describe answered %q", head)
		}
		for _, name := range []string{"DataONE-ObjectFormat", "DataONE-Checksum", "DataONE-SerialVersion", "Content-Length", "Last-Modified"} {
			if !strings.Contains(head, "\r\n"+name+": ") {
				t.Errorf("no %s header spelled so (the Java client's lookup is case-sensitive):\n%s", name, head)
			}
		}
	})
	t.Run("describe error", func(t *testing.T) {
		f.mu.Lock()
		f.err = adapter.Errorf(adapter.NotFound, "no such object")
		f.mu.Unlock()
		head := rawHead(t, srv, req)
		if !strings.HasPrefix(head, "HTTP/1.1 404") {
			t.Fatalf("describe of a missing object answered %q", head)
		}
		for _, name := range []string{"DataONE-Exception-Name", "DataONE-Exception-DetailCode", "DataONE-Exception-Description", "DataONE-Exception-PID"} {
			if !strings.Contains(head, "\r\n"+name+": ") {
				t.Errorf("no %s header spelled so (the Java client's lookup is case-sensitive):\n%s", name, head)
			}
		}
	})
}

// TestDescribeSendsWhatGetSends: a HEAD answer carries the header fields the GET
// would (RFC 9110 §9.3.2); GMN's describe sends the same Content-Disposition as its
// get (d1_gmn views/headers.py add_sciobj_properties_headers_to_response serves both).
// get sends Content-Disposition; describe did not.
func TestDescribeSendsWhatGetSends(t *testing.T) {
	f := newFake()
	h, _ := testEngine(t, f, true)
	// The fake's get answers the system metadata of "x/y" whatever it is asked.
	get := serve(h, http.MethodGet, "/d1/mn/v2/object/x%2Fy")
	head := serve(h, http.MethodHead, "/d1/mn/v2/object/x%2Fy")
	if get.Code != http.StatusOK || head.Code != http.StatusOK {
		t.Fatalf("GET %d, HEAD %d", get.Code, head.Code)
	}
	for _, k := range []string{"Content-Type", "Content-Length", "Last-Modified", "Content-Disposition",
		"DataONE-FormatId", "DataONE-ObjectFormat", "DataONE-Checksum", "DataONE-SerialVersion", "ETag"} {
		if g, hd := get.Header().Get(k), head.Header().Get(k); g != hd {
			t.Errorf("%s: GET sends %q, HEAD %q", k, g, hd)
		}
	}
}

// TestHeadAnswersConditionsAndRangesAsGet: a HEAD with preconditions or a
// Range gets the status and validators the GET from a seekable store gets
// (RFC 9110 §9.3.2, §13.2.2): 304 for a matching If-None-Match or an
// If-Modified-Since not before the last change, 412 (a DataONE error in
// headers) for a failed If-Match, 206 with the Content-Range for one range,
// 416 for none satisfiable. describe sent neither ETag nor Accept-Ranges,
// and answered 200 to all of them.
func TestHeadAnswersConditionsAndRangesAsGet(t *testing.T) {
	f := newFake()
	f.seekable = true
	f.body = "hello, world"
	f.meta.Size = uint64(len(f.body))
	f.meta.DateSysMetadataModified = adapter.NewTime(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	h, _ := testEngine(t, f, true)
	etag := `"` + f.meta.Checksum.Value + `"`
	send := func(method string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://x/d1/mn/v2/object/x%2Fy", nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	lastModified := f.meta.DateSysMetadataModified.UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		name   string
		header []string
		status int
		range_ string // Content-Range, when one is due
		length string // Content-Length, when one is due
	}{
		{"plain", nil, http.StatusOK, "", "12"},
		{"If-None-Match matching", []string{"If-None-Match", etag}, http.StatusNotModified, "", ""},
		{"If-None-Match weak and listed", []string{"If-None-Match", `"other", W/` + etag}, http.StatusNotModified, "", ""},
		{"If-None-Match other", []string{"If-None-Match", `"other"`}, http.StatusOK, "", "12"},
		{"If-Modified-Since the last change", []string{"If-Modified-Since", lastModified}, http.StatusNotModified, "", ""},
		{"If-Modified-Since before it", []string{"If-Modified-Since", "Tue, 30 Apr 2024 12:00:00 GMT"}, http.StatusOK, "", "12"},
		{"If-Match other", []string{"If-Match", `"other"`}, http.StatusPreconditionFailed, "", ""},
		{"Range", []string{"Range", "bytes=7-"}, http.StatusPartialContent, "bytes 7-11/12", "5"},
		{"Range unsatisfiable", []string{"Range", "bytes=12-"}, http.StatusRequestedRangeNotSatisfiable, "bytes */12", ""},
		{"Range malformed", []string{"Range", "lines=1-2"}, http.StatusOK, "", "12"},
	} {
		t.Run(c.name, func(t *testing.T) {
			get, head := send(http.MethodGet, c.header...), send(http.MethodHead, c.header...)
			if get.Code != c.status || head.Code != c.status {
				t.Fatalf("GET %d, HEAD %d, want %d (HEAD's exception: %s)", get.Code, head.Code, c.status,
					wireHeader(head, "DataONE-Exception-Description"))
			}
			if head.Body.Len() != 0 {
				t.Errorf("HEAD answered a body of %d bytes", head.Body.Len())
			}
			for k, want := range map[string]string{"Content-Range": c.range_, "Content-Length": c.length} {
				if g, hd := get.Header().Get(k), head.Header().Get(k); g != want || hd != want {
					t.Errorf("%s: GET %q, HEAD %q, want %q", k, g, hd, want)
				}
			}
			for _, k := range []string{"ETag", "Accept-Ranges", "Last-Modified"} {
				if g, hd := get.Header().Get(k), head.Header().Get(k); g != hd {
					t.Errorf("%s: GET %q, HEAD %q", k, g, hd)
				}
			}
			if c.status < 300 && head.Header().Get("ETag") != etag {
				t.Errorf("ETag %q, want %q", head.Header().Get("ETag"), etag)
			}
			if c.status >= 400 && wireHeader(head, "DataONE-Exception-Name") == "" {
				t.Errorf("a %d HEAD without DataONE-Exception headers: %v", c.status, head.Header())
			}
		})
	}
}

// countingBody counts the bytes a handler reads of an object.
type countingBody struct {
	r *strings.Reader
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	return n, err
}
func (countingBody) Close() error { return nil }

// bigObjectNode serves one large object (get, view and getReplica) and counts
// the bytes read of it.
type bigObjectNode struct {
	*fakeNode
	read atomic.Int64
}

func (n *bigObjectNode) Get(ctx context.Context, s *adapter.Session, id string) (*adapter.Object, error) {
	return &adapter.Object{Meta: n.meta, Body: countingBody{strings.NewReader(n.body), &n.read}}, n.call("Get")
}

func (n *bigObjectNode) GetReplica(ctx context.Context, s *adapter.Session, id string) (*adapter.Object, error) {
	return &adapter.Object{Meta: n.meta, Body: countingBody{strings.NewReader(n.body), &n.read}}, n.call("GetReplica")
}

// TestHeadDoesNotReadTheObject: HEAD is served on every GET route, and a HEAD of
// view (v1 /views/{theme}/{id}, public objects: any client) or of getReplica ran the
// GET handler, which copies the whole object into a writer net/http discards for
// HEAD: each bodiless HEAD made the node read the object from its store to the end
// (gigabytes for a large one, none of them sent), and a getReplica HEAD recorded a
// replicate event. getPackage already stops before the body on HEAD; describe never
// opens it.
func TestHeadDoesNotReadTheObject(t *testing.T) {
	n := &bigObjectNode{fakeNode: newFake()}
	n.body = strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	n.meta.Size = uint64(len(n.body))
	p := auth.Policy{Submitters: []string{adapter.SubjectPublic}, Trusted: []string{adapter.SubjectPublic}}
	h := New(Options{
		Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST", Name: "t", Description: "d", BaseURL: "http://x/d1", ContactSubjects: []string{"CN=a"}},
		MN: n, Authorizer: auth.NewAuthorizer(p), Metrics: metrics.New(prometheus.NewRegistry(), "test"), MaxUploadSize: 1 << 20,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{"/d1/mn/v1/views/default/p1", "/d1/mn/v2/replica/p1"} {
		t.Run(path, func(t *testing.T) {
			n.read.Store(0)
			req, _ := http.NewRequest(http.MethodHead, srv.URL+path, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("HEAD %s: %d", path, resp.StatusCode)
			}
			if resp.ContentLength != int64(len(n.body)) {
				t.Errorf("HEAD %s: Content-Length %d, want the object's %d", path, resp.ContentLength, len(n.body))
			}
			if got := n.read.Load(); got != 0 {
				t.Errorf("HEAD %s read %d bytes of the object from the store (of %d), none of them sent", path, got, len(n.body))
			}
		})
	}
}

// TestQuerySemicolonKeepsTheParameter: a ';' in a query value (real DOIs hold one:
// 10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0) sent unescaped made
// Go's query parser drop the whole pair ("invalid semicolon separator"), which gin
// ignores: listObjects?identifier=a;b answered the unfiltered list of everything, and
// getLogRecords?idFilter=a;b every record. GMN (Django since CVE-2021-23336) and
// Metacat (Tomcat) split a query on '&' only and filter on "a;b". A parameter must
// either arrive whole or the request be refused; never be silently dropped.
func TestQuerySemicolonKeepsTheParameter(t *testing.T) {
	h, n := fuzzEngine()
	t.Run("listObjects identifier", func(t *testing.T) {
		n.reset()
		w := serve(h, http.MethodGet, "/d1/mn/v2/object?identifier=doi:10.1002/x;2-0")
		if w.Code == http.StatusBadRequest {
			return
		}
		if w.Code != http.StatusOK || n.list == nil {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
		if n.list.Identifier != "doi:10.1002/x;2-0" {
			t.Errorf("the node was asked for identifier %q, want %q", n.list.Identifier, "doi:10.1002/x;2-0")
		}
	})
	t.Run("getLogRecords idFilter", func(t *testing.T) {
		n.reset()
		w := serve(h, http.MethodGet, "/d1/mn/v2/log?idFilter=a;b")
		if w.Code == http.StatusBadRequest {
			return
		}
		if w.Code != http.StatusOK || n.log == nil {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
		if n.log.IDFilter != "a;b" {
			t.Errorf("the node was asked for idFilter %q, want %q", n.log.IDFilter, "a;b")
		}
	})
}

// TestPingMalformedDeepIsNotAFailure: ?deep= is d1bridge's own parameter of ping, and
// a value that is not a boolean was answered 500 ServiceFailure "internal error:
// InvalidRequest is not a kind MNCore.ping may raise": ping may not raise
// InvalidRequest (API.md §3.1: 2041, 2042, 2045), so the writer turned the client's
// mistake into the node's failure, which a monitor reads as the node being down.
// Client input never makes a 5xx (the engine's own rule, checkAnswer).
func TestPingMalformedDeepIsNotAFailure(t *testing.T) {
	h, _ := testEngine(t, newFake(), true)
	for _, path := range []string{"/d1/mn/v2/monitor/ping?deep=maybe", "/d1/cn/v2/monitor/ping?deep=2", "/d1/mn/v2/monitor/ping?deep=%FF%00", "/d1/mn/v2/node?x=%00"} {
		w := serve(h, http.MethodGet, path)
		if w.Code >= 500 {
			t.Errorf("%s: %d %s", path, w.Code, w.Body.String())
		}
	}
}

// TestCORSVaryOnEveryAnswer: with CORS on, whether an answer carries
// Access-Control-Allow-Origin depends on the request's Origin, so every answer
// must say Vary: Origin, those to requests without an Origin included (Fetch
// standard, "CORS protocol and HTTP caches"). GET /object answers carry
// Last-Modified and an ETag and are heuristically cacheable: a browser or a shared
// cache that stored the answer to a plain download (no Origin, no CORS headers)
// served it to a page's CORS fetch of the same URL, which the browser refused.
func TestCORSVaryOnEveryAnswer(t *testing.T) {
	f := newFake()
	f.seekable = true
	for name, cors := range map[string]*CORS{
		"named origin": {AllowedOrigins: []string{"https://search.example.org"}, AllowedMethods: []string{"GET"}},
		"any origin":   {AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := New(Options{Svc: "d1", Node: NodeInfo{ID: "urn:node:C"}, MN: f, CORS: cors})
			withOrigin := httptest.NewRequest(http.MethodGet, "/d1/mn/v2/object/p1", nil)
			withOrigin.Header.Set("Origin", "https://search.example.org")
			w1 := httptest.NewRecorder()
			h.ServeHTTP(w1, withOrigin)
			w2 := serve(h, http.MethodGet, "/d1/mn/v2/object/p1")
			if w1.Code != http.StatusOK || w2.Code != http.StatusOK {
				t.Fatalf("%d, %d", w1.Code, w2.Code)
			}
			a1, a2 := w1.Header().Get("Access-Control-Allow-Origin"), w2.Header().Get("Access-Control-Allow-Origin")
			if a1 == a2 {
				return // the answer does not depend on Origin
			}
			if !strings.Contains(strings.Join(w2.Header().Values("Vary"), ","), "Origin") {
				t.Errorf("with Origin: Access-Control-Allow-Origin %q; without: %q and Vary %q (want Origin named)",
					a1, a2, w2.Header().Values("Vary"))
			}
		})
	}
}

// TestDescribeSendsIdentifiersAsGMNDoes: the DataONE-SeriesId, -Obsoletes and
// -ObsoletedBy headers carry a printable ASCII identifier as it is, as GMN
// does: a DOI's slash came percent-encoded ("doi:10.5063%2FF1"), which no
// client compares equal to the identifier. Others are percent-encoded.
func TestDescribeSendsIdentifiersAsGMNDoes(t *testing.T) {
	f := newFake()
	f.meta.SeriesID = "urn:séries:1"
	f.meta.Obsoletes = "doi:10.5063/F1ABC"
	f.meta.ObsoletedBy = "ark:/13030/m5?y#z%41"
	h, _ := testEngine(t, f, true)
	head := serve(h, http.MethodHead, "/d1/mn/v2/object/x%2Fy")
	for name, want := range map[string]string{
		"DataONE-SeriesId":    "urn:s%C3%A9ries:1",
		"DataONE-Obsoletes":   "doi:10.5063/F1ABC",
		"DataONE-ObsoletedBy": "ark:/13030/m5?y#z%41",
	} {
		if got := wireHeader(head, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
