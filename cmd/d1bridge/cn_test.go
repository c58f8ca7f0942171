package main

// End-to-end tests of the coordinating node role (issue 8): the real binary
// (built by TestMain, helpers_test.go) driven over HTTP on the canonical CN
// paths /d1/cn/v1 and /d1/cn/v2, the unversioned /d1/cn the seed lists, and the
// seed's literal paths (/d1/meta/{pid}, /replicaNotifications/{pid},
// /replicaMetadata/{pid}, /replicaPolicies/{pid}, /replicaAuthorizations/{pid}).
// server.do validates every text/xml answer, errors included, against the
// DataONE schemas; wantError checks that the HTTP status is the kind's.
//
// Every instance runs with a configuration file (cnStart) that the helpers'
// environment cannot express: the node registry (nodes: a list) and the key
// that verifies the test's RS256 tokens (auth.tokenKeys, auth_test.go's
// authTokenKeyFiles and authToken). The callers are distinct subjects:
//
//   - cnAdmin is in node.cnSubjects: trusted (create, registerSystemMetadata,
//     the replica notices, delete, updateSystemMetadata, synchronize);
//   - cnAlice is the rights holder of the test objects (changePermission);
//   - cnBob holds nothing on them; a credential without a right: NotAuthorized;
//   - "" is the anonymous caller (the public subject, no credential): on an
//     operation that needs more than public, InvalidToken;
//   - cnMN2Subject and cnMN3Subject are the subjects of the registered member
//     nodes urn:node:MN2 and urn:node:MN3, which isNodeAuthorized knows.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	cnAdmin      = "CN=cn admin,DC=dataone,DC=org"
	cnAlice      = "CN=Alice Owner A1,O=d1bridge,DC=example,DC=org"
	cnBob        = "CN=Bob Stranger B2,O=d1bridge,DC=example,DC=org"
	cnMN2        = "urn:node:MN2"
	cnMN2Subject = "CN=urn:node:MN2,DC=dataone,DC=org"
	cnMN2Base    = "https://mn2.example.org/mn"
	cnMN3        = "urn:node:MN3"
	cnMN3Subject = "CN=urn:node:MN3,DC=dataone,DC=org"
	cnMN3Base    = "https://mn3.example.org/knb/d1/mn" // configured with a trailing slash
	// cnStranger is a node subject no registered node has.
	cnStranger = "CN=urn:node:UNKNOWN,DC=dataone,DC=org"
	// cnForged names a token for cnAdmin signed by a key the node does not know.
	cnForged = "forged"
)

// cnServer is an instance with the CN test configuration and a token for each
// test subject.
type cnServer struct {
	*server
	tokens map[string]string
}

// cnStart starts the binary with --config naming a file that registers MN2
// and MN3, trusts cnAdmin and verifies the test's tokens, on a new data
// directory; env as startServer.
func cnStart(t testing.TB, env ...string) *cnServer {
	t.Helper()
	return cnStartOn(t, t.TempDir(), env...)
}

// cnStartOn is cnStart on dataDir.
func cnStartOn(t testing.TB, dataDir string, env ...string) *cnServer {
	t.Helper()
	certPath, _, _, _ := authTokenKeyFiles(t)
	cfg := fmt.Sprintf(`# d1bridge configuration of the CN end-to-end tests
node:
  cnSubjects: [%q]
auth:
  tokenKeys: [%q]
nodes:
  - id: %s
    baseURL: %s
    subjects: [%q]
  - id: %s
    baseURL: %s/
    subjects: [%q]
`, cnAdmin, certPath, cnMN2, cnMN2Base, cnMN2Subject, cnMN3, cnMN3Base, cnMN3Subject)
	cfgPath := authWrite(t, t.TempDir(), "d1bridge.yaml", []byte(cfg))
	c := &cnServer{server: startServerConfig(t, dataDir, cfgPath, env...), tokens: map[string]string{}}
	for _, sub := range []string{cnAdmin, cnAlice, cnBob, cnMN2Subject, cnMN3Subject, cnStranger} {
		c.tokens[sub] = authToken(t, authCNKey(), sub)
	}
	c.tokens[cnForged] = authToken(t, authForgerKey(), cnAdmin)
	return c
}

// auth is the Authorization header of who ("" for none).
func (c *cnServer) auth(who string) []string {
	if who == "" {
		return nil
	}
	tok, ok := c.tokens[who]
	if !ok {
		panic("no token for " + who)
	}
	return []string{"Authorization", "Bearer " + tok}
}

// call sends a request without a body as who.
func (c *cnServer) call(t testing.TB, who, method, path string) *response {
	t.Helper()
	return c.do(t, method, path, nil, c.auth(who)...)
}

// form sends a multipart/form-data body of parts as who.
func (c *cnServer) form(t testing.TB, who, method, path string, parts ...part) *response {
	t.Helper()
	body, ctype := multipartBody(false, parts...)
	return c.do(t, method, path, body, append(c.auth(who), "Content-Type", ctype)...)
}

// cnNoFollow does not follow redirects, so that resolve's 303 and 307 are seen.
var cnNoFollow = &http.Client{
	Timeout:       time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// noFollow is call without following a redirect; the answer is validated as do's.
func (c *cnServer) noFollow(t testing.TB, who, method, path string) *response {
	t.Helper()
	req, err := http.NewRequest(method, c.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.auth(who)
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	resp, err := cnNoFollow.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if method == http.MethodHead && len(b) > 0 {
		t.Errorf("%s %s: HEAD answer has a body", method, path)
	}
	checkXML(t, method+" "+path, r)
	return r
}

// cnp is a path under the CN interface of version v (0: the unversioned /d1/cn,
// which serves v2).
func cnp(v int, rest string) string {
	if v == 0 {
		return "/d1/cn" + rest
	}
	return fmt.Sprintf("/d1/cn/v%d%s", v, rest)
}

// cnID is a path under the CN interface with id as the last segment.
func cnID(v int, resource, id string) string { return cnp(v, "/"+resource+"/"+segment(id)) }

// cnVersions are the CN interfaces: v1, v2 and the unversioned (v2) one.
var cnVersions = []int{1, 2, 0}

// cnNS is the namespace of the v2-only types on version v.
func cnNS(v int) string {
	if v == 1 {
		return adapter.NSv1
	}
	return adapter.NSv2
}

// cnWantError is wantError and, when detail is not "", the detail code.
func cnWantError(t testing.TB, r *response, code int, name, detail string) *errorDoc {
	t.Helper()
	e := wantError(t, r, code, name)
	got := e.DetailCode
	if len(r.Body) == 0 {
		got = r.Header.Get("DataONE-Exception-DetailCode")
	}
	if detail != "" && got != detail {
		t.Errorf("%s detailCode %q, want %q", name, got, detail)
	}
	return e
}

// cnWantOK checks a boolean answer (200).
func cnWantOK(t testing.TB, r *response) bool {
	t.Helper()
	return wantStatus(t, r, http.StatusOK)
}

// cnObject is a small text object owned by cnAlice: readable by public when
// public, else by its owner alone.
func cnObject(pid string, public bool) (*adapter.SystemMetadata, []byte) {
	data := []byte("coordinating node test object " + pid + "\n")
	sm := newSysmeta(pid, "text/plain", "SHA-256", data)
	sm.RightsHolder = cnAlice
	if !public {
		sm.AccessPolicy = nil
	}
	return sm, data
}

// create creates sm on the CN (v2, as cnAdmin) and fails the test unless it
// answers the identifier.
func (c *cnServer) create(t testing.TB, sm *adapter.SystemMetadata, data []byte) {
	t.Helper()
	r := c.form(t, cnAdmin, http.MethodPost, cnp(2, "/object"), createParts(sm, bytes.NewReader(data), false)...)
	if !wantIdentifier(t, r, sm.Identifier) {
		t.FailNow()
	}
}

// meta reads id's system metadata on the CN, v2, as cnAdmin.
func (c *cnServer) meta(t testing.TB, id string) *adapter.SystemMetadata {
	t.Helper()
	r := c.call(t, cnAdmin, http.MethodGet, cnID(2, "meta", id))
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	sm := &adapter.SystemMetadata{}
	decode(t, r, sm)
	return sm
}

// serial is the serialVersion part for version n.
func serial(n uint64) part { return textPart("serialVersion", strconv.FormatUint(n, 10)) }

// --- CNCore: ping, getCapabilities, formats, checksum algorithms, and the
// operations the seed leaves unimplemented.

func TestCNCore(t *testing.T) {
	t.Parallel()
	c := cnStart(t)

	t.Run("ping", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.get(t, cnp(v, "/monitor/ping"))
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			d, err := http.ParseTime(r.Header.Get("Date"))
			if err != nil || time.Since(d).Abs() > time.Minute {
				t.Errorf("%s: Date %q (%v)", cnp(v, "/monitor/ping"), r.Header.Get("Date"), err)
			}
			wantStatus(t, c.head(t, cnp(v, "/monitor/ping")), http.StatusOK)
		}
	})

	t.Run("getCapabilities", func(t *testing.T) {
		for _, p := range []struct {
			path string
			v    int
		}{
			{"/d1/cn/v2/", 2}, {"/d1/cn/v2", 2}, {"/d1/cn/v1/", 1}, {"/d1/cn/v1", 1}, {"/d1/cn/", 2}, {"/d1/cn", 2},
		} {
			r := c.get(t, p.path)
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			if n := rootName(t, r.Body); n.Space != cnNS(p.v) || n.Local != "node" {
				t.Errorf("%s: root {%s}%s", p.path, n.Space, n.Local)
			}
			var n adapter.Node
			decode(t, r, &n)
			if n.Type != adapter.NodeTypeCN || n.Identifier != testNodeID || n.State != adapter.NodeUp {
				t.Errorf("%s: node %s type %s state %s, want %s cn up", p.path, n.Identifier, n.Type, n.State, testNodeID)
			}
			if want := c.URL + "/d1/cn"; n.BaseURL != want {
				t.Errorf("%s: baseURL %q, want %q", p.path, n.BaseURL, want)
			}
			have := map[string]bool{}
			if n.Services != nil {
				for _, sv := range n.Services.Service {
					have[sv.Name+" "+sv.Version] = sv.Available != nil && *sv.Available
				}
			}
			for _, name := range []string{"CNCore", "CNRead", "CNAuthorization", "CNReplication"} {
				for _, ver := range []string{"v1", "v2"} {
					if !have[name+" "+ver] {
						t.Errorf("%s: service %s %s is not listed as available", p.path, name, ver)
					}
				}
			}
			for k := range have {
				if strings.HasPrefix(k, "MN") {
					t.Errorf("%s: the CN document lists %s", p.path, k)
				}
			}
		}
	})

	var v2Formats adapter.ObjectFormatList
	t.Run("listFormats", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.get(t, cnp(v, "/formats"))
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			if n := rootName(t, r.Body); n.Space != cnNS(v) || n.Local != "objectFormatList" {
				t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
			}
			var l adapter.ObjectFormatList
			decode(t, r, &l)
			if len(l.ObjectFormat) != 160 || l.Count != 160 || l.Total != 160 || l.Start != 0 {
				t.Errorf("v%d: %d formats, count %d start %d total %d; want the official 160", v, len(l.ObjectFormat), l.Count, l.Start, l.Total)
			}
			seen := map[string]bool{}
			types := map[string]int{}
			for _, f := range l.ObjectFormat {
				if seen[f.FormatID] || f.FormatName == "" {
					t.Errorf("v%d: format %q is listed twice or has no name", v, f.FormatID)
				}
				seen[f.FormatID] = true
				types[f.FormatType]++
				if v == 1 && (f.MediaType != nil || f.Extension != "") {
					t.Errorf("v1: format %q has v2 fields", f.FormatID)
				}
			}
			if types["DATA"] == 0 || types["METADATA"] == 0 || types["RESOURCE"] == 0 {
				t.Errorf("v%d: format types %v", v, types)
			}
			for _, id := range []string{"text/csv", "eml://ecoinformatics.org/eml-2.1.1", "application/octet-stream", "http://www.openarchives.org/ore/terms"} {
				if !seen[id] {
					t.Errorf("v%d: %s is not listed", v, id)
				}
			}
			if v == 2 {
				v2Formats = l
			}
		}
	})

	t.Run("getFormat", func(t *testing.T) {
		listed := map[string]adapter.ObjectFormat{}
		for _, f := range v2Formats.ObjectFormat {
			listed[f.FormatID] = f
		}
		for _, id := range []string{"text/csv", "eml://ecoinformatics.org/eml-2.1.1", "application/octet-stream", "image/jpeg"} {
			for _, v := range cnVersions {
				r := c.get(t, cnID(v, "formats", id))
				if !wantStatus(t, r, http.StatusOK) {
					continue
				}
				if n := rootName(t, r.Body); n.Space != cnNS(v) || n.Local != "objectFormat" {
					t.Errorf("v%d %s: root {%s}%s", v, id, n.Space, n.Local)
				}
				var f adapter.ObjectFormat
				decode(t, r, &f)
				want := listed[id]
				if v == 1 {
					want.MediaType, want.Extension = nil, ""
				}
				if f.FormatID != id || f.FormatName != want.FormatName || f.FormatType != want.FormatType || f.Extension != want.Extension ||
					(f.MediaType == nil) != (want.MediaType == nil) {
					t.Errorf("v%d %s: got %+v, listFormats has %+v", v, id, f, want)
				}
			}
		}
		if f := listed["text/csv"]; f.MediaType == nil || f.MediaType.Name != "text/csv" || f.FormatType != "DATA" {
			t.Errorf("text/csv is %+v", f)
		}
		for _, v := range cnVersions {
			cnWantError(t, c.get(t, cnID(v, "formats", "no/such-format")), http.StatusNotFound, "NotFound", "4848")
			cnWantError(t, c.head(t, cnID(v, "formats", "no/such-format")), http.StatusNotFound, "NotFound", "4848")
		}
	})

	t.Run("listChecksumAlgorithms", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.get(t, cnp(v, "/checksum"))
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "checksumAlgorithmList" {
				t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
			}
			var l adapter.ChecksumAlgorithmList
			decode(t, r, &l)
			for _, alg := range []string{"MD5", "SHA-1"} {
				if !slices.Contains(l.Algorithm, alg) {
					t.Errorf("v%d: %s is not listed: %v", v, alg, l.Algorithm)
				}
			}
		}
	})

	// listNodes, search, CNIdentity and CNRegister: NotImplemented (501) with a
	// valid error document, to anyone, on every version.
	t.Run("not implemented", func(t *testing.T) {
		const subj = "CN%3DSome%20One%2CDC%3Dexample%2CDC%3Dorg"
		for _, v := range cnVersions {
			for _, op := range []struct {
				method, path, detail string
			}{
				{http.MethodGet, "/node", "4800"},                       // listNodes
				{http.MethodGet, "/search/solr/q=id:x%2A", "4281"},      // search
				{http.MethodGet, "/search/solr/", "4281"},               // search, empty query
				{http.MethodGet, "/search/solr?q=*:*", "4281"},          // search, the query as parameters
				{http.MethodPost, "/accounts", ""},                      // registerAccount
				{http.MethodGet, "/accounts", ""},                       // listSubjects
				{http.MethodGet, "/accounts/" + subj, ""},               // getSubjectInfo
				{http.MethodPut, "/accounts/" + subj, ""},               // updateAccount
				{http.MethodPut, "/accounts/verification/" + subj, ""},  // verifyAccount
				{http.MethodPost, "/accounts/map", ""},                  // mapIdentity
				{http.MethodDelete, "/accounts/map/" + subj, ""},        // removeMapIdentity
				{http.MethodPost, "/accounts/pendingmap", ""},           // requestMapIdentity
				{http.MethodGet, "/accounts/pendingmap/" + subj, ""},    // getPendingMapIdentity
				{http.MethodPut, "/accounts/pendingmap/" + subj, ""},    // confirmMapIdentity
				{http.MethodDelete, "/accounts/pendingmap/" + subj, ""}, // denyMapIdentity
				{http.MethodPost, "/groups", ""},                        // createGroup
				{http.MethodPut, "/groups", ""},                         // updateGroup
				{http.MethodPost, "/node", ""},                          // register
				{http.MethodGet, "/node/urn:node:MN2", ""},              // getNodeCapabilities
				{http.MethodPut, "/node/urn:node:MN2", ""},              // updateNodeCapabilities
			} {
				for _, who := range []string{"", cnAdmin} {
					r := c.call(t, who, op.method, cnp(v, op.path))
					if r.Status != http.StatusNotImplemented {
						t.Errorf("%s %s as %q: status %d", op.method, cnp(v, op.path), who, r.Status)
					}
					cnWantError(t, r, http.StatusNotImplemented, "NotImplemented", op.detail)
				}
			}
		}
		// HEAD of an unimplemented GET: the headers carry the exception.
		cnWantError(t, c.head(t, cnp(2, "/node")), http.StatusNotImplemented, "NotImplemented", "4800")
	})

	// An identifier in the path is checked before anything else: one with
	// whitespace is an InvalidRequest for every operation that takes one.
	t.Run("identifiers in the path", func(t *testing.T) {
		const bad = "has%20space"
		ops := []struct{ method, path string }{
			{http.MethodGet, "/object/" + bad}, {http.MethodHead, "/object/" + bad}, {http.MethodGet, "/meta/" + bad},
			{http.MethodGet, "/checksum/" + bad}, {http.MethodGet, "/resolve/" + bad}, {http.MethodGet, "/assertRelation/" + bad},
			{http.MethodGet, "/isAuthorized/" + bad + "?action=read"}, {http.MethodGet, "/reserve/" + bad}, {http.MethodPost, "/reserve/" + bad},
			{http.MethodGet, "/reserve/" + bad + "/public"},
			{http.MethodPost, "/object/" + bad}, {http.MethodDelete, "/object/" + bad}, {http.MethodPut, "/archive/" + bad},
			{http.MethodPut, "/obsoletedBy/" + bad}, {http.MethodPut, "/owner/" + bad}, {http.MethodPut, "/accessRules/" + bad},
			{http.MethodPut, "/replicaNotifications/" + bad}, {http.MethodPut, "/replicaMetadata/" + bad},
			{http.MethodPut, "/replicaPolicies/" + bad}, {http.MethodGet, "/replicaAuthorizations/" + bad + "?targetNodeSubject=x"},
			{http.MethodPut, "/removeReplicaMetadata/" + bad},
		}
		for _, v := range cnVersions {
			for _, op := range ops {
				for _, who := range []string{"", cnAdmin} {
					wantError(t, c.call(t, who, op.method, cnp(v, op.path)), http.StatusBadRequest, "InvalidRequest")
				}
			}
		}
		for _, op := range []struct{ method, path string }{
			{http.MethodPost, "/d1/meta/" + bad}, {http.MethodPut, "/replicaNotifications/" + bad}, {http.MethodPut, "/replicaMetadata/" + bad},
			{http.MethodPut, "/replicaPolicies/" + bad}, {http.MethodGet, "/replicaAuthorizations/" + bad + "?targetNodeSubject=x"},
		} {
			wantError(t, c.call(t, cnAdmin, op.method, op.path), http.StatusBadRequest, "InvalidRequest")
		}
	})

	t.Run("unknown path", func(t *testing.T) {
		for _, p := range []string{"/d1/cn/v3/node", "/d1/cn/v2/nothing", "/d1/cn/v2/object/a/b", "/replicaStuff/x"} {
			wantError(t, c.get(t, p), http.StatusNotFound, "NotFound")
		}
		// Operations v1 does not have.
		r := c.form(t, cnAdmin, http.MethodPut, cnp(1, "/meta"), textPart("pid", "x"))
		if r.Status != http.StatusMethodNotAllowed && r.Status != http.StatusNotFound {
			t.Errorf("v1 PUT /meta (updateSystemMetadata is v2 only): status %d\n%s", r.Status, r.Body)
		}
		wantError(t, c.form(t, cnAdmin, http.MethodPost, cnp(1, "/synchronize"), textPart("pid", "x")), http.StatusNotFound, "NotFound")
	})
}

// --- create and the reads: get, describe, getSystemMetadata, getChecksum,
// listObjects.
