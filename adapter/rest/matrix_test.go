package rest

import (
	"encoding/xml"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestExceptionMatrix injects every kind into getSystemMetadata (GET) and describe
// (HEAD) and compares status, headers and body with golden files; every body
// validates against dataoneErrors.xsd.
func TestExceptionMatrix(t *testing.T) {
	for _, c := range []struct{ name, method, path string }{
		{"get_meta_v2", http.MethodGet, "/d1/mn/v2/meta/a%2Fb"},
		{"describe_v2", http.MethodHead, "/d1/mn/v2/object/a%2Fb"},
		{"get_v1", http.MethodGet, "/d1/mn/v1/object/a%2Fb"},
	} {
		for _, k := range adapter.Kinds() {
			t.Run(c.name+"/"+k.String(), func(t *testing.T) {
				f := newFake()
				f.err = adapter.Errorf(k, "injected %s <&>", k)
				h, _ := testEngine(t, f, true)
				w := serve(h, c.method, c.path)
				got := dump(w)
				golden := filepath.Join("testdata", "golden", c.name+"_"+k.String()+".txt")
				if *update {
					os.MkdirAll(filepath.Dir(golden), 0o755)
					if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("response differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
				}
				if c.method == http.MethodHead {
					if w.Body.Len() != 0 {
						t.Errorf("HEAD answered a body")
					}
					if wireHeader(w, "DataONE-Exception-Name") == "" {
						t.Errorf("HEAD error without DataONE-Exception-Name")
					}
					return
				}
				xsdtest.Validate(t, w.Body.Bytes())
				var doc struct {
					Name      string `xml:"name,attr"`
					ErrorCode int    `xml:"errorCode,attr"`
				}
				if err := xml.Unmarshal(w.Body.Bytes(), &doc); err != nil {
					t.Fatal(err)
				}
				if doc.ErrorCode != w.Code {
					t.Errorf("errorCode %d, HTTP status %d", doc.ErrorCode, w.Code)
				}
			})
		}
	}
}

// dump renders a response for a golden file: status, the headers a client reads,
// and the body.
// wireHeader is the header name of w as spelled on the wire (net/http
// writes a name as the map holds it): "" when w has no header so spelled.
func wireHeader(w *httptest.ResponseRecorder, name string) string {
	if v := w.Header()[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func dump(w *httptest.ResponseRecorder) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", w.Code)
	var keys []string
	for k := range w.Header() {
		if strings.HasPrefix(strings.ToLower(k), "dataone-") || k == "Content-Type" || k == "Allow" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys { // as spelled on the wire
		fmt.Fprintf(&b, "%s: %s\n", k, w.Header()[k][0])
	}
	b.WriteString("\n")
	b.WriteString(w.Body.String())
	return b.String()
}

// TestIdentifiersArriveIntact: identifiers travel percent-encoded in one path
// segment and arrive decoded exactly once.
func TestIdentifiersArriveIntact(t *testing.T) {
	ids := []string{"a/b", "a?b", "a#b", "a+b", "a%2Fb", "100%", "é-ü-日本", "doi:10.1000/182", strings.Repeat("x", 800),
		"a:b@c$d!e(f)g'h,i~j*k&l=m"}
	for _, id := range ids {
		t.Run(id[:min(len(id), 20)], func(t *testing.T) {
			f := newFake()
			h, _ := testEngine(t, f, true)
			for _, v := range []string{"v1", "v2"} {
				w := serve(h, http.MethodGet, "/d1/mn/"+v+"/meta/"+url.PathEscape(id))
				if w.Code != http.StatusOK {
					t.Fatalf("%s: %d %s", v, w.Code, w.Body.String())
				}
				var sm adapter.SystemMetadata
				if err := adapter.Decode(w.Body, &sm); err != nil {
					t.Fatal(err)
				}
				if sm.Identifier != id {
					t.Fatalf("%s: identifier arrived as %q", v, sm.Identifier)
				}
			}
		})
	}
	// Clients leave some bytes unescaped; a %2F beside them is still a '/'
	// inside the identifier, not a path separator (API.md §1.2).
	for seg, id := range map[string]string{
		"doi:10.1%2Fa{1}":            "doi:10.1/a{1}",
		"doi:10.1%2Fcafé":            "doi:10.1/café",
		"10.1002%2F(SICI)<693::AID>": "10.1002/(SICI)<693::AID>",
		"a%2Fb|c^d`e\"f%7Bg":         "a/b|c^d`e\"f{g",
		"%E6%97%A5%2F本":              "日/本",
	} {
		t.Run("raw/"+seg, func(t *testing.T) {
			h, _ := testEngine(t, newFake(), true)
			w := serve(h, http.MethodGet, "/d1/mn/v2/meta/"+seg)
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body.String())
			}
			var sm adapter.SystemMetadata
			if err := adapter.Decode(w.Body, &sm); err != nil {
				t.Fatal(err)
			}
			if sm.Identifier != id {
				t.Fatalf("identifier arrived as %q, want %q", sm.Identifier, id)
			}
		})
	}
	for _, id := range []string{"a b", "a\tb", "a\nb", strings.Repeat("x", 801)} {
		t.Run("refused/"+id[:min(len(id), 10)], func(t *testing.T) {
			h, _ := testEngine(t, newFake(), true)
			for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodDelete} {
				w := serve(h, m, "/d1/mn/v2/object/"+url.PathEscape(id))
				if w.Code != http.StatusBadRequest {
					t.Fatalf("%s: %d, want 400 InvalidRequest", m, w.Code)
				}
				if m == http.MethodHead {
					if got := wireHeader(w, "DataONE-Exception-Name"); got != "InvalidRequest" {
						t.Fatalf("HEAD: exception %q", got)
					}
					continue
				}
				xsdtest.Validate(t, w.Body.Bytes())
				if !strings.Contains(w.Body.String(), "InvalidRequest") {
					t.Fatalf("%s: %s", m, w.Body.String())
				}
			}
		})
	}
}

func TestUnknownPathAndWrongMethod(t *testing.T) {
	h, _ := testEngine(t, newFake(), true)
	w := serve(h, http.MethodGet, "/d1/mn/v2/nosuch")
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `name="NotFound"`) {
		t.Fatalf("unknown path: %d %s", w.Code, w.Body.String())
	}
	xsdtest.Validate(t, w.Body.Bytes())
	w = serve(h, http.MethodPatch, "/d1/mn/v2/object/x")
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("wrong method: %d", w.Code)
	}
	allow := w.Header().Get("Allow")
	for _, m := range []string{"GET", "HEAD", "PUT", "DELETE", "POST"} {
		if !strings.Contains(allow, m) {
			t.Errorf("Allow %q lacks %s", allow, m)
		}
	}
	xsdtest.Validate(t, w.Body.Bytes())
}

// TestUnbuiltOperationsAnswerNotImplemented: every route without a handler answers
// 501 with a valid error document, never 404 or 500.
func TestUnbuiltOperationsAnswerNotImplemented(t *testing.T) {
	h, _ := testEngine(t, newFake(), true)
	e := &engine{}
	e.mn = &mnHandlers{e: e}
	e.cn = &cnHandlers{mnHandlers: e.mn}
	for _, in := range e.interfaces() {
		for _, r := range in.routes {
			if r.h != nil {
				continue
			}
			path := "/d1" + in.prefix + strings.NewReplacer(":id", "p1", ":type", "t", ":theme", "default").Replace(r.path)
			w := serve(h, r.method, path)
			if w.Code != http.StatusNotImplemented {
				t.Errorf("%s %s (%s): %d, want 501", r.method, path, r.op, w.Code)
				continue
			}
			if r.method != http.MethodHead {
				xsdtest.Validate(t, w.Body.Bytes())
			}
		}
	}
}
