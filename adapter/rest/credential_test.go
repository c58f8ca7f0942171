package rest

import (
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRefusedCredentialIsNeverPublic: a credential that was presented and
// failed verification is never served as the public session. Every route of
// every table whose operation may raise InvalidToken answers it (401, the
// operation's detail code) with the reason; the others (ping, capabilities,
// formats, ...) answer as for a caller without credentials. The policy makes
// public trusted, so that a downgrade to public would pass every check.
func TestRefusedCredentialIsNeverPublic(t *testing.T) {
	const reason = "the bearer token expired at 2024-01-02T03:04:05Z"
	f := newFake()
	e := &engine{}
	h := New(Options{
		Svc: "d1", Node: NodeInfo{ID: "urn:node:TEST", Name: "t", Description: "d", BaseURL: "http://x/d1",
			ContactSubjects: []string{"CN=a"}},
		MN: f, CN: f, MaxUploadSize: 1 << 20, Metrics: metrics.New(prometheus.NewRegistry(), "test"),
		Authorizer: auth.NewAuthorizer(auth.Policy{Trusted: []string{adapter.SubjectPublic}, Submitters: []string{adapter.SubjectPublic}}),
		Sessions: func(r *http.Request) (*adapter.Session, error) {
			s := adapter.PublicSession()
			if r.Header.Get("Authorization") != "" {
				s.CredentialError = reason
			}
			return s, nil
		},
	})
	e.mn, e.cn = newMNHandlers(e, f), newCNHandlers(e, f)
	seen := 0
	for _, in := range e.interfaces() {
		for _, rt := range in.routes {
			path := "/d1" + in.prefix + strings.ReplaceAll(strings.ReplaceAll(rt.path, ":id", "pid-1"), "*query", "q=x")
			path = strings.NewReplacer(":engine", "solr", ":subject", "CN%3Dx", ":nodeId", "urn:node:X", ":formatId", "text%2Fcsv").Replace(path)
			t.Run(rt.method+" "+in.prefix+rt.path, func(t *testing.T) {
				req := httptest.NewRequest(rt.method, "http://x"+path, nil)
				req.Header.Set("Authorization", "Bearer expired")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if !raises(rt.op, in.version, adapter.InvalidToken) {
					if w.Code == http.StatusUnauthorized {
						t.Errorf("%s cannot raise InvalidToken, yet answered 401: %s", rt.op, w.Body.String())
					}
					return
				}
				seen++
				if w.Code != http.StatusUnauthorized {
					t.Fatalf("%s with a refused credential: %d, want 401 InvalidToken\n%s", rt.op, w.Code, w.Body.String())
				}
				wantDetail := opErrors[rt.op][adapter.InvalidToken]
				if rt.method == http.MethodHead {
					if got := wireHeader(w, "DataONE-Exception-Name"); got != "InvalidToken" {
						t.Errorf("HEAD: exception %q, want InvalidToken", got)
					}
					if got := wireHeader(w, "DataONE-Exception-DetailCode"); got != wantDetail {
						t.Errorf("HEAD: detail code %q, want %q", got, wantDetail)
					}
					return
				}
				xsdtest.Validate(t, w.Body.Bytes())
				var doc struct {
					Name        string `xml:"name,attr"`
					DetailCode  string `xml:"detailCode,attr"`
					Description string `xml:"description"`
				}
				if err := xml.Unmarshal(w.Body.Bytes(), &doc); err != nil {
					t.Fatal(err)
				}
				if doc.Name != "InvalidToken" || doc.DetailCode != wantDetail || !strings.Contains(doc.Description, reason) {
					t.Errorf("got %s %s %q, want InvalidToken %s with the reason %q", doc.Name, doc.DetailCode, doc.Description, wantDetail, reason)
				}
			})
		}
	}
	if seen < 40 {
		t.Errorf("only %d routes may raise InvalidToken: the tables were not walked", seen)
	}
	// A caller without any credential is public, as before.
	for _, p := range []string{"/d1/mn/v2/monitor/ping", "/d1/mn/v2/object", "/d1/cn/v2/object", "/d1/mn/v2/object/pid-1"} {
		if w := serve(h, http.MethodGet, p); w.Code != http.StatusOK {
			t.Errorf("GET %s without a credential: %d, want 200\n%s", p, w.Code, w.Body.String())
		}
	}
}
