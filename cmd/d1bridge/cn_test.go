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
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

func TestCNCreateAndRead(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	pub, pubData := cnObject("cn-read-public", true)
	pub.SeriesID = "cn-read-series"
	priv, privData := cnObject("cn-read-private", false)
	other, otherData := cnObject("cn-read-other", true)
	other.FormatID = "text/csv"

	t.Run("create refused", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			post := func(who, path string, parts []part) *response {
				return c.form(t, who, http.MethodPost, cnp(v, path), parts...)
			}
			parts := func() []part { return createParts(pub, bytes.NewReader(pubData), false) }
			// Trusted subjects only.
			cnWantError(t, post("", "/object", parts()), http.StatusUnauthorized, "InvalidToken", "4894")
			cnWantError(t, post(cnAlice, "/object", parts()), http.StatusUnauthorized, "NotAuthorized", "1100")
			cnWantError(t, post(cnMN2Subject, "/object/"+pub.Identifier, parts()), http.StatusUnauthorized, "NotAuthorized", "1100")
			cnWantError(t, post(cnForged, "/object", parts()), http.StatusUnauthorized, "InvalidToken", "4894")
			// Bad bodies.
			cnWantError(t, post(cnAdmin, "/object", []part{textPart("pid", pub.Identifier), filePart("object", "content.bin", bytes.NewReader(pubData))}),
				http.StatusBadRequest, "InvalidRequest", "4891")
			cnWantError(t, post(cnAdmin, "/object", []part{textPart("pid", pub.Identifier), docPart("sysmeta", pub)}),
				http.StatusBadRequest, "InvalidRequest", "4891")
			cnWantError(t, post(cnAdmin, "/object/cn-read-elsewhere", parts()), http.StatusBadRequest, "InvalidRequest", "4891")
			r := c.do(t, http.MethodPost, cnp(v, "/object"), strings.NewReader("pid=x"), append(c.auth(cnAdmin), "Content-Type", "application/x-www-form-urlencoded")...)
			cnWantError(t, r, http.StatusBadRequest, "InvalidRequest", "4891")
			// Bad system metadata.
			bad := *pub
			bad.Identifier = "cn-read-mismatch"
			cnWantError(t, post(cnAdmin, "/object", append([]part{textPart("pid", pub.Identifier)}, createParts(&bad, bytes.NewReader(pubData), false)[1:]...)),
				http.StatusBadRequest, "InvalidSystemMetadata", "4896")
			bad = *pub
			bad.Checksum.Value = strings.Repeat("0", 64)
			cnWantError(t, post(cnAdmin, "/object", createParts(&bad, bytes.NewReader(pubData), false)), http.StatusBadRequest, "InvalidSystemMetadata", "4896")
			bad = *pub
			bad.Size++
			cnWantError(t, post(cnAdmin, "/object", createParts(&bad, bytes.NewReader(pubData), true)), http.StatusBadRequest, "InvalidSystemMetadata", "4896")
			cnWantError(t, post(cnAdmin, "/object", []part{textPart("pid", pub.Identifier), filePart("object", "content.bin", bytes.NewReader(pubData)),
				filePart("sysmeta", "sysmeta.xml", strings.NewReader("<systemMetadata>not DataONE"))}), http.StatusBadRequest, "InvalidSystemMetadata", "4896")
			bad = *pub
			bad.FormatID = "no/such-format"
			cnWantError(t, post(cnAdmin, "/object", createParts(&bad, bytes.NewReader(pubData), false)), http.StatusBadRequest, "UnsupportedType", "4895")
			bad = *pub
			bad.Obsoletes = "cn-read-older"
			cnWantError(t, post(cnAdmin, "/object", createParts(&bad, bytes.NewReader(pubData), false)), http.StatusBadRequest, "InvalidSystemMetadata", "4896")
			cnWantError(t, post(cnAdmin, "/object/has%20space", createParts(pub, bytes.NewReader(pubData), false)[1:]), http.StatusBadRequest, "InvalidRequest", "4891")
		}
		for _, id := range []string{pub.Identifier, "cn-read-mismatch"} {
			cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnID(2, "meta", id)), http.StatusNotFound, "NotFound", "1060")
		}
		if n := countFiles(t, c.DataDir); n != 0 {
			t.Errorf("refused creates left %d files", n)
		}
	})

	t.Run("create", func(t *testing.T) {
		before := time.Now().Add(-time.Second)
		// v2, form-data, the pid in a part.
		c.create(t, pub, pubData)
		// v1, multipart/mixed, the pid in the path.
		body, ctype := multipartBody(true, createParts(priv, bytes.NewReader(privData), true)[1:]...)
		r := c.do(t, http.MethodPost, cnID(1, "object", priv.Identifier), body, append(c.auth(cnAdmin), "Content-Type", ctype)...)
		if !wantIdentifier(t, r, priv.Identifier) {
			t.FailNow()
		}
		// Unversioned, the pid in both.
		r = c.form(t, cnAdmin, http.MethodPost, cnID(0, "object", other.Identifier), createParts(other, bytes.NewReader(otherData), false)...)
		if !wantIdentifier(t, r, other.Identifier) {
			t.FailNow()
		}
		for _, sm := range []*adapter.SystemMetadata{pub, priv, other} {
			m := c.meta(t, sm.Identifier)
			if m.Submitter != cnAdmin || m.RightsHolder != cnAlice || m.SerialVersion != 1 ||
				m.AuthoritativeMemberNode != testNodeID || m.OriginMemberNode != testNodeID ||
				m.Checksum != sm.Checksum || m.Size != sm.Size || m.DateUploaded.Before(before) {
				t.Errorf("%s: created system metadata %+v", sm.Identifier, m)
			}
		}
		for _, v := range []int{1, 2} {
			for _, who := range []string{cnAdmin, cnAlice, "", cnBob} {
				code, name := http.StatusConflict, "IdentifierNotUnique"
				if who != cnAdmin {
					code, name = http.StatusUnauthorized, "NotAuthorized"
					if who == "" {
						name = "InvalidToken"
					}
				}
				cnWantError(t, c.form(t, who, http.MethodPost, cnp(v, "/object"), createParts(pub, bytes.NewReader(pubData), false)...), code, name, "")
			}
			// The series id is taken too.
			dup, dupData := cnObject("cn-read-sid-taken", true)
			dup.SeriesID = pub.SeriesID
			cnWantError(t, c.form(t, cnAdmin, http.MethodPost, cnp(v, "/object"), createParts(dup, bytes.NewReader(dupData), false)...),
				http.StatusConflict, "IdentifierNotUnique", "1120")
		}
	})

	t.Run("getSystemMetadata", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.get(t, cnID(v, "meta", pub.Identifier))
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			if n := rootName(t, r.Body); n.Space != cnNS(v) || n.Local != "systemMetadata" {
				t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
			}
			var m adapter.SystemMetadata
			decode(t, r, &m)
			if m.Identifier != pub.Identifier || (v == 1) != (m.SeriesID == "") {
				t.Errorf("v%d: identifier %q seriesId %q", v, m.Identifier, m.SeriesID)
			}
			// The private object: its owner and the trusted subject only.
			cnWantError(t, c.get(t, cnID(v, "meta", priv.Identifier)), http.StatusUnauthorized, "InvalidToken", "1050")
			cnWantError(t, c.call(t, cnBob, http.MethodGet, cnID(v, "meta", priv.Identifier)), http.StatusUnauthorized, "NotAuthorized", "1040")
			wantStatus(t, c.call(t, cnAlice, http.MethodGet, cnID(v, "meta", priv.Identifier)), http.StatusOK)
			wantStatus(t, c.call(t, cnAdmin, http.MethodGet, cnID(v, "meta", priv.Identifier)), http.StatusOK)
			cnWantError(t, c.get(t, cnID(v, "meta", "cn-read-missing")), http.StatusNotFound, "NotFound", "1060")
			// A series id names the head on v2 only.
			r = c.get(t, cnID(v, "meta", pub.SeriesID))
			if v == 1 {
				cnWantError(t, r, http.StatusNotFound, "NotFound", "1060")
			} else if wantStatus(t, r, http.StatusOK) {
				decode(t, r, &m)
				if m.Identifier != pub.Identifier {
					t.Errorf("v%d: the series id names %q", v, m.Identifier)
				}
			}
		}
	})

	t.Run("get", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.get(t, cnID(v, "object", pub.Identifier))
			if wantStatus(t, r, http.StatusOK) {
				if !bytes.Equal(r.Body, pubData) {
					t.Errorf("v%d: %d bytes, want the object's %d", v, len(r.Body), len(pubData))
				}
				if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") ||
					r.Header.Get("DataONE-Checksum") != "SHA-256,"+pub.Checksum.Value || r.Header.Get("DataONE-FormatId") != "text/plain" {
					t.Errorf("v%d: headers %v", v, r.Header)
				}
			}
			cnWantError(t, c.get(t, cnID(v, "object", priv.Identifier)), http.StatusUnauthorized, "InvalidToken", "1010")
			cnWantError(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", priv.Identifier)), http.StatusUnauthorized, "NotAuthorized", "1000")
			if r := c.call(t, cnAlice, http.MethodGet, cnID(v, "object", priv.Identifier)); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, privData) {
				t.Errorf("v%d: the owner read other bytes", v)
			}
			cnWantError(t, c.get(t, cnID(v, "object", "cn-read-missing")), http.StatusNotFound, "NotFound", "1020")
			if v == 1 {
				cnWantError(t, c.get(t, cnID(v, "object", pub.SeriesID)), http.StatusNotFound, "NotFound", "1020")
			} else if r := c.get(t, cnID(v, "object", pub.SeriesID)); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, pubData) {
				t.Errorf("v%d: get by series id read other bytes", v)
			}
		}
	})

	t.Run("describe", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.head(t, cnID(v, "object", pub.Identifier))
			if wantStatus(t, r, http.StatusOK) {
				h := r.Header
				if h.Get("Content-Length") != strconv.Itoa(len(pubData)) || h.Get("DataONE-FormatId") != "text/plain" ||
					h.Get("DataONE-Checksum") != "SHA-256,"+pub.Checksum.Value || h.Get("DataONE-SerialVersion") != "1" || h.Get("Last-Modified") == "" {
					t.Errorf("v%d: describe headers %v", v, h)
				}
			}
			cnWantError(t, c.head(t, cnID(v, "object", priv.Identifier)), http.StatusUnauthorized, "InvalidToken", "4932")
			cnWantError(t, c.call(t, cnBob, http.MethodHead, cnID(v, "object", priv.Identifier)), http.StatusUnauthorized, "NotAuthorized", "4934")
			wantStatus(t, c.call(t, cnAlice, http.MethodHead, cnID(v, "object", priv.Identifier)), http.StatusOK)
			r = c.head(t, cnID(v, "object", "cn-read-missing"))
			cnWantError(t, r, http.StatusNotFound, "NotFound", "4933")
			if r.Header.Get("DataONE-Exception-Identifier") != "cn-read-missing" {
				t.Errorf("v%d: HEAD NotFound headers %v", v, r.Header)
			}
		}
	})

	t.Run("getChecksum", func(t *testing.T) {
		sum := md5.Sum(pubData)
		for _, v := range cnVersions {
			for _, c2 := range []struct{ query, alg, value string }{
				{"", "SHA-256", pub.Checksum.Value},
				{"?checksumAlgorithm=MD5", "MD5", hex.EncodeToString(sum[:])},
				{"?checksumAlgorithm=SHA-256", "SHA-256", pub.Checksum.Value},
			} {
				r := c.get(t, cnID(v, "checksum", pub.Identifier)+c2.query)
				if !wantStatus(t, r, http.StatusOK) {
					continue
				}
				if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "checksum" {
					t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
				}
				var got adapter.Checksum
				decode(t, r, &got)
				if got.Algorithm != c2.alg || got.Value != c2.value {
					t.Errorf("v%d %s: checksum %+v, want %s %s", v, c2.query, got, c2.alg, c2.value)
				}
			}
			cnWantError(t, c.get(t, cnID(v, "checksum", pub.Identifier)+"?checksumAlgorithm=CRC32"), http.StatusBadRequest, "InvalidRequest", "1402")
			cnWantError(t, c.get(t, cnID(v, "checksum", priv.Identifier)), http.StatusUnauthorized, "InvalidToken", "1430")
			cnWantError(t, c.call(t, cnBob, http.MethodGet, cnID(v, "checksum", priv.Identifier)), http.StatusUnauthorized, "NotAuthorized", "1400")
			wantStatus(t, c.call(t, cnAlice, http.MethodGet, cnID(v, "checksum", priv.Identifier)), http.StatusOK)
			cnWantError(t, c.get(t, cnID(v, "checksum", "cn-read-missing")), http.StatusNotFound, "NotFound", "1420")
		}
	})

	t.Run("listObjects", func(t *testing.T) {
		list := func(t *testing.T, who string, v int, q string) *adapter.ObjectList {
			t.Helper()
			r := c.call(t, who, http.MethodGet, cnp(v, "/object")+"?"+q)
			if !wantStatus(t, r, http.StatusOK) {
				t.FailNow()
			}
			if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "objectList" {
				t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
			}
			l := &adapter.ObjectList{}
			decode(t, r, l)
			if l.Count != len(l.ObjectInfo) {
				t.Errorf("count %d with %d entries", l.Count, len(l.ObjectInfo))
			}
			return l
		}
		all := []string{pub.Identifier, priv.Identifier, other.Identifier}
		for _, v := range cnVersions {
			if got := pids(list(t, cnAdmin, v, "")); !slices.Equal(got, all) {
				t.Errorf("v%d trusted: %v, want %v", v, got, all)
			}
			if got := pids(list(t, cnAlice, v, "")); !slices.Equal(got, all) {
				t.Errorf("v%d owner: %v, want %v", v, got, all)
			}
			want := []string{pub.Identifier, other.Identifier}
			if got := pids(list(t, "", v, "")); !slices.Equal(got, want) {
				t.Errorf("v%d anonymous: %v, want %v", v, got, want)
			}
			if got := pids(list(t, cnBob, v, "")); !slices.Equal(got, want) {
				t.Errorf("v%d bob: %v, want %v", v, got, want)
			}
			l := list(t, cnAdmin, v, "start=1&count=1")
			if l.Start != 1 || l.Total != 3 || !slices.Equal(pids(l), all[1:2]) {
				t.Errorf("v%d start=1 count=1: start %d total %d %v", v, l.Start, l.Total, pids(l))
			}
			if l := list(t, cnAdmin, v, "count=0"); l.Total != 3 || l.Count != 0 {
				t.Errorf("v%d count=0: count %d total %d", v, l.Count, l.Total)
			}
			if got := pids(list(t, cnAdmin, v, "formatId=text%2Fcsv")); !slices.Equal(got, []string{other.Identifier}) {
				t.Errorf("v%d formatId: %v", v, got)
			}
			if got := pids(list(t, cnAdmin, v, "identifier="+priv.Identifier)); !slices.Equal(got, []string{priv.Identifier}) {
				t.Errorf("v%d identifier: %v", v, got)
			}
			if got := pids(list(t, cnAdmin, v, "nodeId="+url.QueryEscape(testNodeID))); !slices.Equal(got, all) {
				t.Errorf("v%d nodeId: %v", v, got)
			}
			if got := pids(list(t, cnAdmin, v, "nodeId="+url.QueryEscape(cnMN2))); len(got) != 0 {
				t.Errorf("v%d nodeId=%s: %v", v, cnMN2, got)
			}
			if got := pids(list(t, cnAdmin, v, "fromDate=2999-01-01T00:00:00Z")); len(got) != 0 {
				t.Errorf("v%d fromDate in the future: %v", v, got)
			}
			for _, q := range []string{"start=-1", "count=x", "fromDate=yesterday", "toDate=2020-13-45", "identifier=has%20space"} {
				cnWantError(t, c.get(t, cnp(v, "/object")+"?"+q), http.StatusBadRequest, "InvalidRequest", "1540")
			}
		}
	})
}

// --- getLogRecords: the CN's log is the catalog's, so it aggregates the events
// of every interface of this node.

func TestCNLogRecords(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	pub, pubData := cnObject("cn-log-public", true)
	priv, privData := cnObject("cn-log-private", false)
	mn, mnData := cnObject("cn-log-mn", true)
	c.create(t, pub, pubData)
	c.create(t, priv, privData)
	wantStatus(t, c.get(t, cnID(2, "object", pub.Identifier)), http.StatusOK)                            // read by public, on the CN
	wantStatus(t, c.call(t, cnAlice, http.MethodGet, cnID(1, "object", priv.Identifier)), http.StatusOK) // read by alice, CN v1
	// created through the member node interface, by public (a submitter here)
	create(t, c.server, mn, mnData)

	logOf := func(t *testing.T, who, path string) *adapter.Log {
		t.Helper()
		r := c.call(t, who, http.MethodGet, path)
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		l := &adapter.Log{}
		decode(t, r, l)
		if l.Count != len(l.LogEntry) {
			t.Errorf("count %d with %d entries", l.Count, len(l.LogEntry))
		}
		return l
	}
	wantEvents := []string{
		pub.Identifier + " create", priv.Identifier + " create", pub.Identifier + " read",
		priv.Identifier + " read", mn.Identifier + " create",
	}
	all := logOf(t, cnAdmin, cnp(2, "/log"))

	t.Run("aggregated", func(t *testing.T) {
		if got := events(all); !slices.Equal(got, wantEvents) {
			t.Fatalf("log %v, want %v", got, wantEvents)
		}
		subjects := []string{cnAdmin, cnAdmin, "public", cnAlice, "public"}
		for i, e := range all.LogEntry {
			if e.NodeIdentifier != testNodeID || e.Subject != subjects[i] || e.EntryID == "" || e.IPAddress == "" || e.DateLogged.IsZero() {
				t.Errorf("entry %d: %+v", i, e)
			}
			if i > 0 && e.DateLogged.Before(all.LogEntry[i-1].DateLogged.Time) {
				t.Errorf("entry %d is logged before entry %d", i, i-1)
			}
		}
		// The member node's log is the same log.
		r := c.call(t, cnAdmin, http.MethodGet, mnp(2, "/log"))
		var ml adapter.Log
		if wantStatus(t, r, http.StatusOK) {
			decode(t, r, &ml)
			if !slices.Equal(events(&ml), wantEvents) {
				t.Errorf("the MN log is %v", events(&ml))
			}
		}
	})

	t.Run("versions", func(t *testing.T) {
		for _, v := range cnVersions {
			r := c.call(t, cnAdmin, http.MethodGet, cnp(v, "/log"))
			if !wantStatus(t, r, http.StatusOK) {
				continue
			}
			if n := rootName(t, r.Body); n.Space != cnNS(v) || n.Local != "log" {
				t.Errorf("v%d: root {%s}%s", v, n.Space, n.Local)
			}
			var l adapter.Log
			decode(t, r, &l)
			if !slices.Equal(events(&l), wantEvents) || l.Total != len(wantEvents) {
				t.Errorf("v%d: %v total %d", v, events(&l), l.Total)
			}
		}
	})

	t.Run("readers", func(t *testing.T) {
		public := []string{wantEvents[0], wantEvents[2], wantEvents[4]}
		for _, c2 := range []struct {
			who  string
			want []string
		}{
			{"", public}, {cnBob, public}, {cnAlice, wantEvents}, {cnAdmin, wantEvents},
		} {
			l := logOf(t, c2.who, cnp(2, "/log"))
			if got := events(l); !slices.Equal(got, c2.want) || l.Total != len(c2.want) {
				t.Errorf("as %q: %v (total %d), want %v", c2.who, got, l.Total, c2.want)
			}
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, c2 := range []struct {
			path string
			want []string
		}{
			{cnp(2, "/log?event=create"), []string{wantEvents[0], wantEvents[1], wantEvents[4]}},
			{cnp(1, "/log?event=read"), []string{wantEvents[2], wantEvents[3]}},
			{cnp(2, "/log?event=no-such-event"), nil},
			{cnp(2, "/log?idFilter="+priv.Identifier), []string{wantEvents[1], wantEvents[3]}},
			{cnp(1, "/log?pidFilter="+priv.Identifier), []string{wantEvents[1], wantEvents[3]}},
			{cnp(2, "/log?idFilter="+pub.Identifier+"&event=read"), []string{wantEvents[2]}},
			{cnp(2, "/log?fromDate=2999-01-01T00:00:00Z"), nil},
			{cnp(2, "/log?toDate=2000-01-01"), nil},
		} {
			if got := events(logOf(t, cnAdmin, c2.path)); !slices.Equal(got, c2.want) {
				t.Errorf("%s: %v, want %v", c2.path, got, c2.want)
			}
		}
		// Dates: fromDate is inclusive, toDate exclusive.
		mid := all.LogEntry[2].DateLogged
		var from, to []string
		for _, e := range all.LogEntry {
			if !e.DateLogged.Before(mid.Time) {
				from = append(from, e.Identifier+" "+e.Event)
			} else {
				to = append(to, e.Identifier+" "+e.Event)
			}
		}
		if got := events(logOf(t, cnAdmin, cnp(2, "/log?fromDate="+at(mid)))); !slices.Equal(got, from) {
			t.Errorf("fromDate %s: %v, want %v", mid.Format(), got, from)
		}
		if got := events(logOf(t, cnAdmin, cnp(1, "/log?toDate="+at(mid)))); !slices.Equal(got, to) {
			t.Errorf("toDate %s: %v, want %v", mid.Format(), got, to)
		}
	})

	t.Run("paging", func(t *testing.T) {
		for _, v := range cnVersions {
			l := logOf(t, cnAdmin, cnp(v, "/log?start=1&count=2"))
			if l.Start != 1 || l.Count != 2 || l.Total != 5 || !slices.Equal(events(l), wantEvents[1:3]) {
				t.Errorf("v%d start=1 count=2: start %d count %d total %d %v", v, l.Start, l.Count, l.Total, events(l))
			}
			if l := logOf(t, cnAdmin, cnp(v, "/log?count=0")); l.Count != 0 || l.Total != 5 {
				t.Errorf("v%d count=0: count %d total %d", v, l.Count, l.Total)
			}
			if l := logOf(t, cnAdmin, cnp(v, "/log?start=4&count=10")); !slices.Equal(events(l), wantEvents[4:]) || l.Total != 5 {
				t.Errorf("v%d start=4: %v total %d", v, events(l), l.Total)
			}
			// A harvest page by page gives the whole log once.
			var got []string
			for start := 0; start < 5; start += 2 {
				got = append(got, events(logOf(t, cnAdmin, cnp(v, fmt.Sprintf("/log?start=%d&count=2", start))))...)
			}
			if !slices.Equal(got, wantEvents) {
				t.Errorf("v%d: pages of 2 give %v", v, got)
			}
		}
	})

	t.Run("invalid", func(t *testing.T) {
		for _, v := range cnVersions {
			for _, q := range []string{"fromDate=yesterday", "toDate=2020-13-45", "start=-1", "count=-5", "start=x"} {
				cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnp(v, "/log?"+q)), http.StatusBadRequest, "InvalidRequest", "1480")
			}
		}
		// v1 events are a closed list.
		cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnp(1, "/log?event=no-such-event")), http.StatusBadRequest, "InvalidRequest", "1480")
	})
}

// --- reserveIdentifier, hasReservation, generateIdentifier.

func TestCNReservations(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	used, usedData := cnObject("cn-res-used", true)
	used.SeriesID = "cn-res-used-series"
	c.create(t, used, usedData)
	esc := url.PathEscape

	has := func(t *testing.T, who, path string) *response {
		t.Helper()
		return c.call(t, who, http.MethodGet, path)
	}
	for _, v := range cnVersions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			id := fmt.Sprintf("cn-res-%d", v)
			reserve := func(who, pid string) *response {
				return c.form(t, who, http.MethodPost, cnp(v, "/reserve"), textPart("pid", pid))
			}
			// None yet.
			cnWantError(t, has(t, cnAlice, cnID(v, "reserve", id)), http.StatusNotFound, "NotFound", "4923")
			cnWantError(t, has(t, "", cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnAlice)), http.StatusNotFound, "NotFound", "4923")
			cnWantError(t, has(t, "", cnID(v, "reserve", id)+"/"+esc(cnAlice)), http.StatusNotFound, "NotFound", "4923")

			// Alice reserves it, twice (idempotent).
			wantIdentifier(t, reserve(cnAlice, id), id)
			wantIdentifier(t, reserve(cnAlice, id), id)

			// The reservation is alice's: by session, by ?subject= (the spec) and
			// by /reserve/{pid}/{subject} (the Python client), whoever asks.
			for _, r := range []*response{
				has(t, cnAlice, cnID(v, "reserve", id)),
				has(t, "", cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnAlice)),
				has(t, cnBob, cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnAlice)),
				has(t, "", cnID(v, "reserve", id)+"/"+esc(cnAlice)),
				has(t, cnBob, cnID(v, "reserve", id)+"/"+esc(cnAlice)),
			} {
				cnWantOK(t, r)
			}
			// Anyone else's question: NotAuthorized.
			for _, r := range []*response{
				has(t, cnBob, cnID(v, "reserve", id)),
				has(t, "", cnID(v, "reserve", id)),
				has(t, cnAlice, cnID(v, "reserve", id)+"?subject="+url.QueryEscape(cnBob)),
				has(t, "", cnID(v, "reserve", id)+"/"+esc(cnBob)),
				has(t, cnAdmin, cnID(v, "reserve", id)+"/public"),
			} {
				cnWantError(t, r, http.StatusUnauthorized, "NotAuthorized", "4924")
			}
			// Another subject cannot take it; nor can anyone take an identifier in
			// use, as a PID or as a SID.
			cnWantError(t, reserve(cnBob, id), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, reserve(cnAdmin, id), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, reserve(cnAlice, used.Identifier), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, reserve(cnAlice, used.SeriesID), http.StatusConflict, "IdentifierNotUnique", "4210")
			// Who may reserve, and what.
			cnWantError(t, reserve("", id+"-anonymous"), http.StatusUnauthorized, "InvalidToken", "4190")
			cnWantError(t, reserve(cnAlice, "has space"), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, reserve(cnAlice, ""), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/reserve"), textPart("id", id+"-other")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.call(t, cnAlice, http.MethodPost, cnp(v, "/reserve")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, has(t, cnAlice, cnID(v, "reserve", id+"-anonymous")), http.StatusNotFound, "NotFound", "4923")
			// A HEAD of hasReservation answers as the GET does.
			wantStatus(t, c.call(t, cnAlice, http.MethodHead, cnID(v, "reserve", id)), http.StatusOK)
			cnWantError(t, c.call(t, cnBob, http.MethodHead, cnID(v, "reserve", id)), http.StatusUnauthorized, "NotAuthorized", "4924")
		})
	}

	t.Run("identifiers with reserved characters", func(t *testing.T) {
		id := "doi:10.5063/F1+ä/xy?#%"
		wantIdentifier(t, c.form(t, cnBob, http.MethodPost, cnp(2, "/reserve"), textPart("pid", id)), id)
		cnWantOK(t, has(t, cnBob, cnID(2, "reserve", id)))
		cnWantOK(t, has(t, "", cnID(2, "reserve", id)+"/"+esc(cnBob)))
		cnWantError(t, has(t, cnAlice, cnID(2, "reserve", id)), http.StatusUnauthorized, "NotAuthorized", "4924")
	})

	// The Python client POSTs reserveIdentifier to /reserve/{pid} (with the pid
	// part as well).
	t.Run("python client reserve path", func(t *testing.T) {
		for _, v := range cnVersions {
			id := fmt.Sprintf("cn-res-python-%d", v)
			wantIdentifier(t, c.form(t, cnAlice, http.MethodPost, cnID(v, "reserve", id), textPart("pid", id)), id)
			cnWantOK(t, has(t, "", cnID(v, "reserve", id)+"/"+esc(cnAlice)))
			cnWantError(t, c.form(t, cnBob, http.MethodPost, cnID(v, "reserve", id)), http.StatusConflict, "IdentifierNotUnique", "4210")
			cnWantError(t, c.form(t, "", http.MethodPost, cnID(v, "reserve", id+"-anonymous")), http.StatusUnauthorized, "InvalidToken", "4190")
			// The path alone names the identifier.
			wantIdentifier(t, c.form(t, cnBob, http.MethodPost, cnID(v, "reserve", id+"-bob")), id+"-bob")
			cnWantOK(t, has(t, "", cnID(v, "reserve", id+"-bob")+"?subject="+url.QueryEscape(cnBob)))
			cnWantError(t, c.form(t, cnBob, http.MethodPost, cnID(v, "reserve", used.Identifier)), http.StatusConflict, "IdentifierNotUnique", "4210")
		}
	})

	t.Run("generateIdentifier", func(t *testing.T) {
		seen := map[string]bool{}
		for _, v := range cnVersions {
			for _, c2 := range []struct{ scheme, fragment, prefix string }{
				{"UUID", "", "urn:uuid:"}, {"uuid", "", "urn:uuid:"}, {"UUID", "cn-gen-", "cn-gen-"},
			} {
				parts := []part{textPart("scheme", c2.scheme)}
				if c2.fragment != "" {
					parts = append(parts, textPart("fragment", c2.fragment))
				}
				r := c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), parts...)
				if !wantStatus(t, r, http.StatusOK) {
					continue
				}
				if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "identifier" {
					t.Errorf("root {%s}%s", n.Space, n.Local)
				}
				var id adapter.Identifier
				decode(t, r, &id)
				if !strings.HasPrefix(id.Value, c2.prefix) || adapter.CheckIdentifier(id.Value) != nil || seen[id.Value] {
					t.Errorf("v%d %+v: generated %q", v, c2, id.Value)
				}
				seen[id.Value] = true
				// A generated identifier is reserved for its caller.
				cnWantOK(t, has(t, cnAlice, cnID(v, "reserve", id.Value)))
				cnWantError(t, has(t, cnBob, cnID(v, "reserve", id.Value)), http.StatusUnauthorized, "NotAuthorized", "4924")
				cnWantError(t, c.form(t, cnBob, http.MethodPost, cnp(v, "/reserve"), textPart("pid", id.Value)), http.StatusConflict, "IdentifierNotUnique", "4210")
			}
			cnWantError(t, c.form(t, "", http.MethodPost, cnp(v, "/generate"), textPart("scheme", "UUID")), http.StatusUnauthorized, "InvalidToken", "4190")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), textPart("scheme", "DOI")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), textPart("fragment", "x")), http.StatusBadRequest, "InvalidRequest", "4200")
			cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/generate"), textPart("scheme", "UUID"), textPart("fragment", "has space")), http.StatusBadRequest, "InvalidRequest", "4200")
		}
	})
}

// --- registerSystemMetadata: system metadata of an object held by a member
// node; resolve then points at that node.

func TestCNRegisterSystemMetadata(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	registered := func(pid, authority string) (*adapter.SystemMetadata, []byte) {
		sm, data := cnObject(pid, true)
		sm.AuthoritativeMemberNode = authority
		sm.OriginMemberNode = authority
		sm.SerialVersion = 7
		sm.DateUploaded = adapter.NewTime(time.Date(2020, 2, 3, 4, 5, 6, 789e6, time.UTC))
		return sm, data
	}
	regParts := func(sm *adapter.SystemMetadata, v int) []part {
		return []part{textPart("pid", sm.Identifier), docPart("sysmeta", sm, max(v, 1))}
	}

	var objects []*adapter.SystemMetadata
	t.Run("register", func(t *testing.T) {
		for _, c2 := range []struct {
			name, path string
			v          int
			pidPart    bool
		}{
			{"v1", cnp(1, "/meta"), 1, true},
			{"v2", cnp(2, "/meta"), 2, true},
			{"unversioned", cnp(0, "/meta"), 2, true},
			{"seed path", "/d1/meta/", 2, false},
			{"seed path with a pid part", "/d1/meta/", 2, true},
		} {
			pid := "cn-reg-" + strings.ReplaceAll(c2.name, " ", "-")
			sm, _ := registered(pid, cnMN2)
			path := c2.path
			parts := regParts(sm, c2.v)
			if strings.HasSuffix(path, "/") {
				path += segment(pid)
			}
			if !c2.pidPart {
				parts = parts[1:]
			}
			if !wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, path, parts...), pid) {
				continue
			}
			m := c.meta(t, pid)
			if m.AuthoritativeMemberNode != cnMN2 || m.OriginMemberNode != cnMN2 || m.SerialVersion != 7 ||
				!m.DateUploaded.Equal(sm.DateUploaded.Time) || m.Submitter != cnAdmin || m.Checksum != sm.Checksum || m.Size != sm.Size ||
				m.DateSysMetadataModified.IsZero() {
				t.Errorf("%s: registered system metadata %+v", c2.name, m)
			}
			objects = append(objects, m)
		}
	})
	if len(objects) == 0 {
		t.FailNow()
	}
	pid := objects[1].Identifier

	t.Run("reads", func(t *testing.T) {
		for _, v := range cnVersions {
			// The system metadata is here, the bytes are not.
			wantStatus(t, c.get(t, cnID(v, "meta", pid)), http.StatusOK)
			cnWantError(t, c.get(t, cnID(v, "object", pid)), http.StatusNotFound, "NotFound", "1020")
			if r := c.head(t, cnID(v, "object", pid)); wantStatus(t, r, http.StatusOK) && r.Header.Get("DataONE-Checksum") != "SHA-256,"+objects[1].Checksum.Value {
				t.Errorf("v%d: describe headers %v", v, r.Header)
			}
			if r := c.get(t, cnID(v, "checksum", pid)); wantStatus(t, r, http.StatusOK) {
				var got adapter.Checksum
				decode(t, r, &got)
				if got != objects[1].Checksum {
					t.Errorf("v%d: checksum %+v", v, got)
				}
			}
			// Another algorithm would need the bytes.
			cnWantError(t, c.get(t, cnID(v, "checksum", pid)+"?checksumAlgorithm=MD5"), http.StatusNotFound, "NotFound", "1420")
			l := &adapter.ObjectList{}
			if r := c.get(t, cnp(v, "/object?nodeId="+url.QueryEscape(cnMN2))); wantStatus(t, r, http.StatusOK) {
				decode(t, r, l)
				if l.Total != len(objects) {
					t.Errorf("v%d: listObjects nodeId=%s: %v", v, cnMN2, pids(l))
				}
			}
			// resolve points at the authoritative member node, from the registry.
			r := c.noFollow(t, "", http.MethodGet, cnID(v, "resolve", pid))
			if wantStatus(t, r, http.StatusSeeOther) {
				if want := cnMN2Base + "/v2/object/" + pid; r.Header.Get("Location") != want {
					t.Errorf("v%d: Location %q, want %q", v, r.Header.Get("Location"), want)
				}
			}
		}
		// Nothing was stored as bytes.
		if n := countFiles(t, c.DataDir); n != 0 {
			t.Errorf("%d files in the object store", n)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			post := func(who string, parts ...part) *response {
				return c.form(t, who, http.MethodPost, cnp(v, "/meta"), parts...)
			}
			sm, _ := registered(fmt.Sprintf("cn-reg-refused-%d", v), cnMN2)
			// Trusted callers only; registerSystemMetadata has no InvalidToken, so
			// the anonymous caller is NotAuthorized.
			cnWantError(t, post("", regParts(sm, v)...), http.StatusUnauthorized, "NotAuthorized", "4861")
			cnWantError(t, post(cnAlice, regParts(sm, v)...), http.StatusUnauthorized, "NotAuthorized", "4861")
			cnWantError(t, post(cnMN2Subject, regParts(sm, v)...), http.StatusUnauthorized, "NotAuthorized", "4861")
			cnWantError(t, c.form(t, "", http.MethodPost, "/d1/meta/"+sm.Identifier, regParts(sm, v)[1:]...), http.StatusUnauthorized, "NotAuthorized", "4861")
			// Bad parts.
			cnWantError(t, post(cnAdmin, textPart("pid", sm.Identifier)), http.StatusBadRequest, "InvalidRequest", "4863")
			cnWantError(t, c.call(t, cnAdmin, http.MethodPost, cnp(v, "/meta")), http.StatusBadRequest, "InvalidRequest", "4863")
			cnWantError(t, post(cnAdmin, textPart("pid", sm.Identifier), filePart("sysmeta", "sysmeta.xml", strings.NewReader("<nope/>"))),
				http.StatusBadRequest, "InvalidSystemMetadata", "4864")
			cnWantError(t, post(cnAdmin, textPart("pid", "cn-reg-other"), docPart("sysmeta", sm, v)), http.StatusBadRequest, "InvalidSystemMetadata", "4864")
			cnWantError(t, c.form(t, cnAdmin, http.MethodPost, "/d1/meta/cn-reg-other", docPart("sysmeta", sm, v)), http.StatusBadRequest, "InvalidSystemMetadata", "4864")
			// Bad system metadata.
			for _, edit := range []func(*adapter.SystemMetadata){
				func(m *adapter.SystemMetadata) { m.AuthoritativeMemberNode, m.OriginMemberNode = "", "" },
				func(m *adapter.SystemMetadata) { m.RightsHolder = "" },
				func(m *adapter.SystemMetadata) { m.Obsoletes = objects[0].Identifier },
				func(m *adapter.SystemMetadata) { m.ObsoletedBy = "cn-reg-newer" },
				func(m *adapter.SystemMetadata) { m.Archived = true },
				func(m *adapter.SystemMetadata) { m.FormatID = "no/such-format" },
			} {
				bad := sm.Clone()
				edit(bad)
				cnWantError(t, post(cnAdmin, regParts(bad, v)...), http.StatusBadRequest, "InvalidSystemMetadata", "4864")
			}
			cnWantError(t, post(cnAdmin, textPart("pid", "has space"), docPart("sysmeta", &adapter.SystemMetadata{
				Identifier: "has space", FormatID: "text/plain", RightsHolder: cnAlice, AuthoritativeMemberNode: cnMN2,
				Checksum: adapter.Checksum{Algorithm: "MD5", Value: "00"}}, v)), http.StatusBadRequest, "InvalidRequest", "4863")
			// An identifier in use: the kinds of registerSystemMetadata make it an
			// InvalidRequest.
			dup := objects[0].Clone()
			cnWantError(t, post(cnAdmin, regParts(dup, v)...), http.StatusBadRequest, "InvalidRequest", "4863")
			wantNotFound(t, c.server, 2, sm.Identifier)
		}
	})

	t.Run("unregistered authority", func(t *testing.T) {
		sm, _ := registered("cn-reg-elsewhere", "urn:node:ELSEWHERE")
		if !wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, cnp(2, "/meta"), regParts(sm, 2)...), sm.Identifier) {
			return
		}
		// No registered node holds it, and no bytes are here.
		cnWantError(t, c.noFollow(t, "", http.MethodGet, cnID(2, "resolve", sm.Identifier)), http.StatusNotFound, "NotFound", "4140")
	})
}

// --- resolve: 303 (GET) or 307 (HEAD) to the first location, with an
// ObjectLocationList body.

func TestCNResolve(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	pub, pubData := cnObject("cn-resolve/public+one:ä", true) // a slash, a plus and non-ASCII in the PID
	priv, privData := cnObject("cn-resolve-private", false)
	c.create(t, pub, pubData)
	c.create(t, priv, privData)
	reg, _ := cnObject("cn-resolve-registered", true)
	reg.AuthoritativeMemberNode = cnMN3
	wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, "/d1/meta/"+reg.Identifier, docPart("sysmeta", reg)), reg.Identifier)
	self := c.URL + "/d1/mn"

	locations := func(t *testing.T, r *response) *adapter.ObjectLocationList {
		t.Helper()
		if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "objectLocationList" {
			t.Errorf("root {%s}%s", n.Space, n.Local)
		}
		l := &adapter.ObjectLocationList{}
		decode(t, r, l)
		return l
	}
	check := func(t *testing.T, v int, who, pid string, want []adapter.ObjectLocation) {
		t.Helper()
		r := c.noFollow(t, who, http.MethodGet, cnID(v, "resolve", pid))
		if !wantStatus(t, r, http.StatusSeeOther) {
			return
		}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/xml") {
			t.Errorf("Content-Type %q", r.Header.Get("Content-Type"))
		}
		l := locations(t, r)
		if l.Identifier != pid || len(l.ObjectLocation) != len(want) {
			t.Fatalf("v%d %s: %+v", v, pid, l)
		}
		for i, w := range want {
			got := l.ObjectLocation[i]
			if got.NodeIdentifier != w.NodeIdentifier || got.BaseURL != w.BaseURL || got.URL != w.URL ||
				got.Preference == nil || *got.Preference != *w.Preference || !slices.Contains(got.Version, "v2") {
				t.Errorf("v%d %s: location %d is %+v, want %+v", v, pid, i, got, w)
			}
		}
		if r.Header.Get("Location") != want[0].URL {
			t.Errorf("v%d %s: Location %q, want the first location %q", v, pid, r.Header.Get("Location"), want[0].URL)
		}
		// HEAD: 307 with the same Location and no body.
		h := c.noFollow(t, who, http.MethodHead, cnID(v, "resolve", pid))
		if wantStatus(t, h, http.StatusTemporaryRedirect) && h.Header.Get("Location") != want[0].URL {
			t.Errorf("v%d %s: HEAD Location %q", v, pid, h.Header.Get("Location"))
		}
	}
	one, two := 1, 2
	loc := func(node, base, pid string, pref *int) adapter.ObjectLocation {
		return adapter.ObjectLocation{NodeIdentifier: node, BaseURL: base, URL: base + "/v2/object/" + url.PathEscape(pid), Preference: pref}
	}

	t.Run("held here", func(t *testing.T) {
		for _, v := range cnVersions {
			check(t, v, "", pub.Identifier, []adapter.ObjectLocation{loc(testNodeID, self, pub.Identifier, &one)})
			check(t, v, cnAlice, priv.Identifier, []adapter.ObjectLocation{loc(testNodeID, self, priv.Identifier, &one)})
		}
		// The Location serves the object (a client following the 303).
		r := c.get(t, cnID(2, "resolve", pub.Identifier))
		if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, pubData) {
			t.Errorf("following the redirect gave %d bytes", len(r.Body))
		}
	})

	t.Run("registered", func(t *testing.T) {
		for _, v := range cnVersions {
			check(t, v, "", reg.Identifier, []adapter.ObjectLocation{loc(cnMN3, cnMN3Base, reg.Identifier, &one)})
		}
	})

	t.Run("with replicas", func(t *testing.T) {
		// A completed replica on MN2 comes after the authoritative node; a
		// requested one and one on an unregistered node are not locations.
		for _, n := range []struct{ node, status string }{{cnMN2, "completed"}, {cnMN3, "requested"}, {"urn:node:NOWHERE", "completed"}} {
			r := c.form(t, cnAdmin, http.MethodPut, "/replicaNotifications/"+segment(pub.Identifier), textPart("nodeRef", n.node), textPart("status", n.status))
			if !cnWantOK(t, r) {
				t.FailNow()
			}
		}
		for _, v := range cnVersions {
			check(t, v, "", pub.Identifier, []adapter.ObjectLocation{loc(testNodeID, self, pub.Identifier, &one), loc(cnMN2, cnMN2Base, pub.Identifier, &two)})
		}
		r := c.form(t, cnAdmin, http.MethodPut, "/replicaNotifications/"+segment(reg.Identifier), textPart("nodeRef", cnMN2), textPart("status", "completed"))
		if cnWantOK(t, r) {
			check(t, 2, "", reg.Identifier, []adapter.ObjectLocation{loc(cnMN3, cnMN3Base, reg.Identifier, &one), loc(cnMN2, cnMN2Base, reg.Identifier, &two)})
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, v := range cnVersions {
			cnWantError(t, c.noFollow(t, "", http.MethodGet, cnID(v, "resolve", "cn-resolve-missing")), http.StatusNotFound, "NotFound", "4140")
			cnWantError(t, c.noFollow(t, "", http.MethodHead, cnID(v, "resolve", "cn-resolve-missing")), http.StatusNotFound, "NotFound", "4140")
			cnWantError(t, c.noFollow(t, "", http.MethodGet, cnID(v, "resolve", priv.Identifier)), http.StatusUnauthorized, "InvalidToken", "4130")
			cnWantError(t, c.noFollow(t, cnBob, http.MethodGet, cnID(v, "resolve", priv.Identifier)), http.StatusUnauthorized, "NotAuthorized", "4120")
			cnWantError(t, c.noFollow(t, cnBob, http.MethodHead, cnID(v, "resolve", priv.Identifier)), http.StatusUnauthorized, "NotAuthorized", "4120")
		}
	})
}

// --- setRightsHolder, isAuthorized, setAccessPolicy.

func TestCNAuthorization(t *testing.T) {
	t.Parallel()
	c := cnStart(t)

	t.Run("setRightsHolder", func(t *testing.T) {
		for _, v := range cnVersions {
			sm, data := cnObject(fmt.Sprintf("cn-owner-%d", v), false)
			c.create(t, sm, data)
			path := cnID(v, "owner", sm.Identifier)
			put := func(who string, parts ...part) *response { return c.form(t, who, http.MethodPut, path, parts...) }

			cnWantError(t, put("", textPart("userId", cnBob), serial(1)), http.StatusUnauthorized, "InvalidToken", "4480")
			cnWantError(t, put(cnBob, textPart("userId", cnBob), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4440")
			cnWantError(t, c.form(t, cnAlice, http.MethodPut, cnID(v, "owner", "cn-owner-missing"), textPart("userId", cnBob), serial(1)),
				http.StatusNotFound, "NotFound", "4460")
			cnWantError(t, put(cnAlice, textPart("userId", cnBob)), http.StatusBadRequest, "InvalidRequest", "4442")
			cnWantError(t, put(cnAlice, textPart("userId", cnBob), textPart("serialVersion", "one")), http.StatusBadRequest, "InvalidRequest", "4442")
			cnWantError(t, put(cnAlice, serial(1)), http.StatusBadRequest, "InvalidRequest", "4442")
			cnWantError(t, c.call(t, cnAlice, http.MethodPut, path), http.StatusBadRequest, "InvalidRequest", "4442")
			for _, sv := range []uint64{0, 2, 99} {
				cnWantError(t, put(cnAlice, textPart("userId", cnBob), serial(sv)), http.StatusConflict, "VersionMismatch", "4443")
			}
			if m := c.meta(t, sm.Identifier); m.RightsHolder != cnAlice || m.SerialVersion != 1 {
				t.Fatalf("v%d: refused calls changed the object: %+v", v, m)
			}

			before := c.meta(t, sm.Identifier)
			r := put(cnAlice, textPart("userId", cnBob), serial(1))
			if !wantIdentifier(t, r, sm.Identifier) {
				t.FailNow()
			}
			m := c.meta(t, sm.Identifier)
			if m.RightsHolder != cnBob || m.SerialVersion != 2 || !m.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
				t.Errorf("v%d: after setRightsHolder %+v", v, m)
			}
			// Bob holds it now, Alice nothing.
			wantStatus(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", sm.Identifier)), http.StatusOK)
			cnWantError(t, c.call(t, cnAlice, http.MethodGet, cnID(v, "object", sm.Identifier)), http.StatusUnauthorized, "NotAuthorized", "1000")
			cnWantError(t, put(cnAlice, textPart("userId", cnAlice), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4440")
			// The old serialVersion is stale; the trusted subject may change it too.
			cnWantError(t, put(cnBob, textPart("userId", cnAlice), serial(1)), http.StatusConflict, "VersionMismatch", "4443")
			wantIdentifier(t, put(cnAdmin, textPart("userId", cnAlice), serial(2)), sm.Identifier)
			if m := c.meta(t, sm.Identifier); m.RightsHolder != cnAlice || m.SerialVersion != 3 {
				t.Errorf("v%d: after the trusted setRightsHolder %+v", v, m)
			}
		}
	})

	t.Run("isAuthorized", func(t *testing.T) {
		sm, data := cnObject("cn-isauth", false)
		sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermRead, cnBob)}}
		c.create(t, sm, data)
		pub, pubData := cnObject("cn-isauth-public", true)
		c.create(t, pub, pubData)
		for _, v := range cnVersions {
			ask := func(who, pid, action string) *response {
				return c.call(t, who, http.MethodGet, cnID(v, "isAuthorized", pid)+"?action="+action)
			}
			for _, c2 := range []struct {
				who, pid, action string
				code             int
				kind, detail     string
			}{
				{cnAlice, sm.Identifier, "changePermission", 200, "", ""},
				{cnAdmin, sm.Identifier, "changePermission", 200, "", ""},
				{cnBob, sm.Identifier, "read", 200, "", ""},
				{cnBob, sm.Identifier, "write", 401, "NotAuthorized", "1820"},
				{"", sm.Identifier, "read", 401, "InvalidToken", "1840"},
				{"", pub.Identifier, "read", 200, "", ""},
				{"", pub.Identifier, "write", 401, "InvalidToken", "1840"},
				{cnBob, pub.Identifier, "write", 401, "NotAuthorized", "1820"},
				{cnAlice, "cn-isauth-missing", "read", 404, "NotFound", "1800"},
				{cnAlice, sm.Identifier, "delete", 400, "InvalidRequest", "1761"},
				{cnAlice, sm.Identifier, "", 400, "InvalidRequest", "1761"},
			} {
				r := ask(c2.who, c2.pid, c2.action)
				if c2.code == 200 {
					cnWantOK(t, r)
				} else {
					cnWantError(t, r, c2.code, c2.kind, c2.detail)
				}
			}
		}
	})

	t.Run("setAccessPolicy", func(t *testing.T) {
		bobReads := &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermRead, cnBob)}}
		bobWrites := &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermWrite, cnBob), authRule(adapter.PermRead, "public")}}
		for _, v := range cnVersions {
			// PUT /accessRules/{pid} (the spec) and POST /accessRules with a pid
			// part (the seed).
			for _, form := range []string{http.MethodPut, http.MethodPost} {
				sm, data := cnObject(fmt.Sprintf("cn-access-%d-%s", v, form), false)
				c.create(t, sm, data)
				set := func(who string, pid string, parts ...part) *response {
					if form == http.MethodPut {
						return c.form(t, who, http.MethodPut, cnID(v, "accessRules", pid), parts...)
					}
					return c.form(t, who, http.MethodPost, cnp(v, "/accessRules"), append([]part{textPart("pid", pid)}, parts...)...)
				}
				id := sm.Identifier
				cnWantError(t, set("", id, docPart("accessPolicy", bobReads), serial(1)), http.StatusUnauthorized, "InvalidToken", "4410")
				cnWantError(t, set(cnBob, id, docPart("accessPolicy", bobReads), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4420")
				cnWantError(t, set(cnAlice, "cn-access-missing", docPart("accessPolicy", bobReads), serial(1)), http.StatusNotFound, "NotFound", "4400")
				// serialVersion is required and checked.
				cnWantError(t, set(cnAlice, id, docPart("accessPolicy", bobReads)), http.StatusBadRequest, "InvalidRequest", "4402")
				for _, sv := range []uint64{0, 2, 1000} {
					cnWantError(t, set(cnAlice, id, docPart("accessPolicy", bobReads), serial(sv)), http.StatusConflict, "VersionMismatch", "4403")
				}
				// The policy is required and must be one.
				cnWantError(t, set(cnAlice, id, serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
				cnWantError(t, set(cnAlice, id, filePart("accessPolicy", "a.xml", strings.NewReader("<accessPolicy>")), serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
				cnWantError(t, set(cnAlice, id, docPart("accessPolicy", &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{cnBob}, Permission: []adapter.Permission{"own"}}}}), serial(1)),
					http.StatusBadRequest, "InvalidRequest", "4402")
				if form == http.MethodPost {
					cnWantError(t, c.form(t, cnAlice, http.MethodPost, cnp(v, "/accessRules"), docPart("accessPolicy", bobReads), serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
					cnWantError(t, c.form(t, "", http.MethodPost, cnp(v, "/accessRules"), docPart("accessPolicy", bobReads), serial(1)), http.StatusBadRequest, "InvalidRequest", "4402")
				}
				if m := c.meta(t, id); m.SerialVersion != 1 || m.AccessPolicy != nil {
					t.Fatalf("v%d %s: refused calls changed the object: %+v", v, form, m)
				}
				cnWantError(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", id)), http.StatusUnauthorized, "NotAuthorized", "1000")

				if !cnWantOK(t, set(cnAlice, id, docPart("accessPolicy", bobReads), serial(1))) {
					t.FailNow()
				}
				m := c.meta(t, id)
				if m.SerialVersion != 2 || m.AccessPolicy == nil || len(m.AccessPolicy.Allow) != 1 || m.AccessPolicy.Allow[0].Subject[0] != cnBob {
					t.Errorf("v%d %s: after setAccessPolicy %+v", v, form, m)
				}
				// The new rules hold at once (no stale authorization decision).
				wantStatus(t, c.call(t, cnBob, http.MethodGet, cnID(v, "object", id)), http.StatusOK)
				cnWantError(t, set(cnBob, id, docPart("accessPolicy", bobWrites), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4420")
				cnWantError(t, set(cnAlice, id, docPart("accessPolicy", bobWrites), serial(1)), http.StatusConflict, "VersionMismatch", "4403")
				if cnWantOK(t, set(cnAlice, id, docPart("accessPolicy", bobWrites), serial(2))) {
					wantStatus(t, c.get(t, cnID(v, "object", id)), http.StatusOK)
					cnWantOK(t, c.call(t, cnBob, http.MethodGet, cnID(v, "isAuthorized", id)+"?action=write"))
				}
				if m := c.meta(t, id); m.SerialVersion != 3 {
					t.Errorf("v%d %s: serialVersion %d after two changes", v, form, m.SerialVersion)
				}
			}
		}
	})
}

// --- the replication group: setReplicationPolicy, updateReplicationMetadata,
// setReplicationStatus, isNodeAuthorized, deleteReplicationMetadata.

// cnPaths are where a replication operation is served: the canonical v1 and v2
// paths, and the seed's literal one (v2), or the unversioned CN path for
// deleteReplicationMetadata, which has none.
type cnPaths struct {
	name string
	v    int
	seed bool
}

func (p cnPaths) at(resource, id string) string {
	if p.seed && resource != "removeReplicaMetadata" {
		return "/" + resource + "/" + segment(id)
	}
	return cnID(p.v, resource, id)
}

func TestCNReplication(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	yes, no := true, false
	three := 3
	allow := &adapter.ReplicationPolicy{ReplicationAllowed: &yes, NumberReplicas: &three,
		PreferredMemberNode: []string{cnMN2}, BlockedMemberNode: []string{cnMN3}}
	replica := func(node, status string) *adapter.Replica {
		return &adapter.Replica{ReplicaMemberNode: node, ReplicationStatus: status, ReplicaVerified: adapter.Now()}
	}

	for _, p := range []cnPaths{{"v1", 1, false}, {"v2", 2, false}, {"seed", 2, true}} {
		t.Run(p.name, func(t *testing.T) {
			sm, data := cnObject("cn-repl-"+p.name, false)
			c.create(t, sm, data)
			id := sm.Identifier
			missing := "cn-repl-missing"
			sv := func() uint64 { return c.meta(t, id).SerialVersion }
			authorized := func(who, subject, pid string) *response {
				q := ""
				if subject != "" {
					q = "?targetNodeSubject=" + url.QueryEscape(subject)
				}
				return c.call(t, who, http.MethodGet, p.at("replicaAuthorizations", pid)+q)
			}
			policy := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("replicaPolicies", pid), parts...)
			}
			metadata := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("replicaMetadata", pid), parts...)
			}
			status := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("replicaNotifications", pid), parts...)
			}
			remove := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, p.at("removeReplicaMetadata", pid), parts...)
			}

			// No policy yet: no node may replicate.
			cnWantError(t, authorized(cnMN2Subject, cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")

			// setReplicationPolicy: changePermission on the object, serialVersion.
			cnWantError(t, policy("", id, docPart("policy", allow), serial(1)), http.StatusUnauthorized, "InvalidToken", "4885")
			cnWantError(t, policy(cnBob, id, docPart("policy", allow), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4881")
			cnWantError(t, policy(cnMN2Subject, id, docPart("policy", allow), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4881")
			cnWantError(t, policy(cnAlice, missing, docPart("policy", allow), serial(1)), http.StatusNotFound, "NotFound", "4884")
			cnWantError(t, policy(cnAlice, id, docPart("policy", allow)), http.StatusBadRequest, "InvalidRequest", "4883")
			cnWantError(t, policy(cnAlice, id, serial(1)), http.StatusBadRequest, "InvalidRequest", "4883")
			cnWantError(t, policy(cnAlice, id, filePart("policy", "p.xml", strings.NewReader("<replicationPolicy")), serial(1)), http.StatusBadRequest, "InvalidRequest", "4883")
			cnWantError(t, policy(cnAlice, id, docPart("policy", allow), serial(2)), http.StatusConflict, "VersionMismatch", "4886")
			cnWantError(t, policy(cnAlice, id, docPart("policy", allow), serial(0)), http.StatusConflict, "VersionMismatch", "4886")
			if m := c.meta(t, id); m.SerialVersion != 1 || m.ReplicationPolicy != nil {
				t.Fatalf("refused calls changed the object: %+v", m)
			}
			if !cnWantOK(t, policy(cnAlice, id, docPart("policy", allow), serial(1))) {
				t.FailNow()
			}
			m := c.meta(t, id)
			if m.SerialVersion != 2 || m.ReplicationPolicy == nil || m.ReplicationPolicy.ReplicationAllowed == nil || !*m.ReplicationPolicy.ReplicationAllowed ||
				!slices.Equal(m.ReplicationPolicy.BlockedMemberNode, []string{cnMN3}) || *m.ReplicationPolicy.NumberReplicas != 3 {
				t.Errorf("after setReplicationPolicy: %+v", m.ReplicationPolicy)
			}
			// Allowed, but no replica was requested from MN2.
			cnWantError(t, authorized("", cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")

			// updateReplicationMetadata: trusted, serialVersion.
			cnWantError(t, metadata("", id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2)), http.StatusUnauthorized, "InvalidToken", "4856")
			cnWantError(t, metadata(cnAlice, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4851")
			cnWantError(t, metadata(cnMN2Subject, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2)), http.StatusUnauthorized, "NotAuthorized", "4851")
			cnWantError(t, metadata(cnAdmin, missing, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(1)), http.StatusNotFound, "NotFound", "4854")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "requested"))), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, filePart("replicaMetadata", "r.xml", strings.NewReader("<replica>")), serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "lost")), serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica("", "requested")), serial(2)), http.StatusBadRequest, "InvalidRequest", "4853")
			cnWantError(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(1)), http.StatusConflict, "VersionMismatch", "4855")
			if m := c.meta(t, id); m.SerialVersion != 2 || len(m.Replica) != 0 {
				t.Fatalf("refused calls changed the object: %+v", m)
			}
			if !cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "requested")), serial(2))) {
				t.FailNow()
			}
			cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN3, "queued")), serial(3)))
			m = c.meta(t, id)
			if m.SerialVersion != 4 || len(m.Replica) != 2 || m.Replica[0].ReplicaMemberNode != cnMN2 || m.Replica[0].ReplicationStatus != "requested" {
				t.Errorf("after updateReplicationMetadata: serialVersion %d replicas %+v", m.SerialVersion, m.Replica)
			}

			// isNodeAuthorized: a registered node with a requested replica, under a
			// policy that allows replication and does not block it.
			cnWantOK(t, authorized("", cnMN2Subject, id))
			cnWantOK(t, authorized(cnMN2Subject, cnMN2Subject, id))
			cnWantOK(t, authorized(cnBob, cnMN2Subject, id))
			cnWantError(t, authorized("", cnMN3Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871") // blocked
			cnWantError(t, authorized("", cnStranger, id), http.StatusUnauthorized, "NotAuthorized", "4871")   // not registered
			cnWantError(t, authorized("", cnAlice, id), http.StatusUnauthorized, "NotAuthorized", "4871")      // not a node
			cnWantError(t, authorized("", cnMN2Subject, missing), http.StatusNotFound, "NotFound", "4874")     // no object
			cnWantError(t, authorized("", "", id), http.StatusBadRequest, "InvalidRequest", "4875")            // no subject
			if !p.seed {                                                                                       // the seed's literal paths have no HEAD twin
				cnWantError(t, c.call(t, "", http.MethodHead, p.at("replicaAuthorizations", id)+"?targetNodeSubject="+url.QueryEscape(cnMN3Subject)),
					http.StatusUnauthorized, "NotAuthorized", "4871")
			}

			// setReplicationStatus: trusted, no serialVersion.
			cnWantError(t, status("", id, textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusUnauthorized, "InvalidToken", "4710")
			cnWantError(t, status(cnMN2Subject, id, textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusUnauthorized, "NotAuthorized", "4720")
			cnWantError(t, status(cnAdmin, missing, textPart("nodeRef", cnMN2), textPart("status", "completed")), http.StatusNotFound, "NotFound", "4740")
			cnWantError(t, status(cnAdmin, id, textPart("nodeRef", cnMN2), textPart("status", "done")), http.StatusBadRequest, "InvalidRequest", "4730")
			cnWantError(t, status(cnAdmin, id, textPart("status", "completed")), http.StatusBadRequest, "InvalidRequest", "4730")
			cnWantError(t, status(cnAdmin, id, textPart("nodeRef", cnMN2), textPart("status", "failed"), filePart("failure", "f.xml", strings.NewReader("not xml"))),
				http.StatusBadRequest, "InvalidRequest", "4730")
			if !cnWantOK(t, status(cnAdmin, id, textPart("nodeRef", cnMN2), textPart("status", "completed"))) {
				t.FailNow()
			}
			cnWantOK(t, status(cnAdmin, id, textPart("nodeRef", cnMN3), textPart("status", "failed"), filePart("failure", "failure.xml", bytes.NewReader(syncFailed(id)))))
			m = c.meta(t, id)
			states := map[string]string{}
			for _, r := range m.Replica {
				states[r.ReplicaMemberNode] = r.ReplicationStatus
			}
			if m.SerialVersion != 6 || states[cnMN2] != "completed" || states[cnMN3] != "failed" || len(m.Replica) != 2 {
				t.Errorf("after setReplicationStatus: serialVersion %d replicas %+v", m.SerialVersion, m.Replica)
			}
			// A completed replica is no longer a pending request.
			cnWantError(t, authorized("", cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")

			// deleteReplicationMetadata: trusted, nodeId, serialVersion.
			current := sv()
			cnWantError(t, remove("", id, textPart("nodeId", cnMN3), serial(current)), http.StatusUnauthorized, "InvalidToken", "4956")
			cnWantError(t, remove(cnAlice, id, textPart("nodeId", cnMN3), serial(current)), http.StatusUnauthorized, "NotAuthorized", "4951")
			cnWantError(t, remove(cnAdmin, missing, textPart("nodeId", cnMN3), serial(1)), http.StatusNotFound, "NotFound", "4954")
			cnWantError(t, remove(cnAdmin, id, textPart("nodeId", "urn:node:NONE"), serial(current)), http.StatusNotFound, "NotFound", "4954")
			cnWantError(t, remove(cnAdmin, id, serial(current)), http.StatusBadRequest, "InvalidRequest", "4953")
			cnWantError(t, remove(cnAdmin, id, textPart("nodeId", cnMN3)), http.StatusBadRequest, "InvalidRequest", "4953")
			cnWantError(t, c.call(t, cnAdmin, http.MethodPut, p.at("removeReplicaMetadata", id)), http.StatusBadRequest, "InvalidRequest", "4953")
			cnWantError(t, remove(cnAdmin, id, textPart("nodeId", cnMN3), serial(current-1)), http.StatusConflict, "VersionMismatch", "4955")
			if !cnWantOK(t, remove(cnAdmin, id, textPart("nodeId", cnMN3), serial(current))) {
				t.FailNow()
			}
			m = c.meta(t, id)
			if m.SerialVersion != current+1 || len(m.Replica) != 1 || m.Replica[0].ReplicaMemberNode != cnMN2 {
				t.Errorf("after deleteReplicationMetadata: serialVersion %d replicas %+v", m.SerialVersion, m.Replica)
			}

			// A policy that forbids replication denies even a requested replica.
			cnWantOK(t, metadata(cnAdmin, id, docPart("replicaMetadata", replica(cnMN2, "queued")), serial(sv())))
			cnWantOK(t, authorized("", cnMN2Subject, id))
			cnWantOK(t, policy(cnAlice, id, docPart("policy", &adapter.ReplicationPolicy{ReplicationAllowed: &no}), serial(sv())))
			cnWantError(t, authorized("", cnMN2Subject, id), http.StatusUnauthorized, "NotAuthorized", "4871")
		})
	}
}

// --- setObsoletedBy and assertRelation.

func TestCNObsoletedByAndRelations(t *testing.T) {
	t.Parallel()
	c := cnStart(t)

	t.Run("setObsoletedBy", func(t *testing.T) {
		for _, v := range cnVersions {
			sm, data := cnObject(fmt.Sprintf("cn-obs-%d", v), false)
			c.create(t, sm, data)
			id, next := sm.Identifier, sm.Identifier+"-next"
			set := func(who, pid string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, cnID(v, "obsoletedBy", pid), parts...)
			}
			cnWantError(t, set("", id, textPart("obsoletedByPid", next), serial(1)), http.StatusUnauthorized, "InvalidToken", "4943")
			cnWantError(t, set(cnBob, id, textPart("obsoletedByPid", next), serial(1)), http.StatusUnauthorized, "NotAuthorized", "4945")
			cnWantError(t, set(cnAlice, "cn-obs-missing", textPart("obsoletedByPid", next), serial(1)), http.StatusNotFound, "NotFound", "4944")
			cnWantError(t, set(cnAlice, id, textPart("obsoletedByPid", next)), http.StatusBadRequest, "InvalidRequest", "4942")
			cnWantError(t, set(cnAlice, id, serial(1)), http.StatusBadRequest, "InvalidRequest", "4942")
			cnWantError(t, c.call(t, cnAlice, http.MethodPut, cnID(v, "obsoletedBy", id)), http.StatusBadRequest, "InvalidRequest", "4942")
			cnWantError(t, set(cnAlice, id, textPart("obsoletedByPid", "has space"), serial(1)), http.StatusBadRequest, "InvalidRequest", "4942")
			cnWantError(t, set(cnAlice, id, textPart("obsoletedByPid", id), serial(1)), http.StatusBadRequest, "InvalidRequest", "4942")
			cnWantError(t, set(cnAlice, id, textPart("obsoletedByPid", next), serial(7)), http.StatusConflict, "VersionMismatch", "4946")
			cnWantError(t, set(cnAlice, id, textPart("obsoletedByPid", next), serial(0)), http.StatusConflict, "VersionMismatch", "4946")
			if m := c.meta(t, id); m.ObsoletedBy != "" || m.SerialVersion != 1 {
				t.Fatalf("v%d: refused calls changed the object: %+v", v, m)
			}
			if !cnWantOK(t, set(cnAlice, id, textPart("obsoletedByPid", next), serial(1))) {
				t.FailNow()
			}
			if m := c.meta(t, id); m.ObsoletedBy != next || m.SerialVersion != 2 {
				t.Errorf("v%d: after setObsoletedBy %+v", v, m)
			}
			// Setting the same successor again is fine; another one would branch.
			cnWantOK(t, set(cnAlice, id, textPart("obsoletedByPid", next), serial(2)))
			cnWantError(t, set(cnAlice, id, textPart("obsoletedByPid", id+"-fork"), serial(3)), http.StatusBadRequest, "InvalidRequest", "4942")
			cnWantError(t, set(cnAdmin, id, textPart("obsoletedByPid", id+"-fork"), serial(3)), http.StatusBadRequest, "InvalidRequest", "4942")
			if m := c.meta(t, id); m.ObsoletedBy != next || m.SerialVersion != 3 {
				t.Errorf("v%d: after the refused branch %+v", v, m)
			}
			// The relation holds.
			cnWantOK(t, c.call(t, cnAlice, http.MethodGet, cnID(v, "assertRelation", id)+"?relationship=obsoletedBy&pidOfObject="+url.QueryEscape(next)))
		}
	})

	t.Run("assertRelation", func(t *testing.T) {
		// A chain made by the member node's update: old ← new.
		old, oldData := cnObject("cn-rel-old", true)
		c.create(t, old, oldData)
		nsm, ndata := cnObject("cn-rel-new", true)
		r := c.form(t, cnAlice, http.MethodPut, objectPath(2, old.Identifier),
			filePart("object", "content.bin", bytes.NewReader(ndata)), textPart("newPid", nsm.Identifier), docPart("sysmeta", nsm))
		if !wantIdentifier(t, r, nsm.Identifier) {
			t.FailNow()
		}
		priv, privData := cnObject("cn-rel-private", false)
		c.create(t, priv, privData)
		for _, v := range cnVersions {
			ask := func(who, pid, rel, other string) *response {
				q := "?relationship=" + rel
				if other != "" {
					q += "&pidOfObject=" + url.QueryEscape(other)
				}
				return c.call(t, who, http.MethodGet, cnID(v, "assertRelation", pid)+q)
			}
			cnWantOK(t, ask("", nsm.Identifier, "obsoletes", old.Identifier))
			cnWantOK(t, ask("", old.Identifier, "obsoletedBy", nsm.Identifier))
			cnWantError(t, ask("", old.Identifier, "obsoletes", nsm.Identifier), http.StatusNotFound, "NotFound", "")
			cnWantError(t, ask("", nsm.Identifier, "obsoletedBy", old.Identifier), http.StatusNotFound, "NotFound", "")
			cnWantError(t, ask("", nsm.Identifier, "obsoletes", "cn-rel-other"), http.StatusNotFound, "NotFound", "")
			cnWantError(t, ask("", "cn-rel-missing", "obsoletes", old.Identifier), http.StatusNotFound, "NotFound", "")
			cnWantError(t, ask("", nsm.Identifier, "isDocumentedBy", old.Identifier), http.StatusBadRequest, "InvalidRequest", "")
			cnWantError(t, ask("", nsm.Identifier, "obsoletes", ""), http.StatusBadRequest, "InvalidRequest", "")
			cnWantError(t, ask("", priv.Identifier, "obsoletes", old.Identifier), http.StatusUnauthorized, "InvalidToken", "")
			cnWantError(t, ask(cnBob, priv.Identifier, "obsoletes", old.Identifier), http.StatusUnauthorized, "NotAuthorized", "")
			cnWantError(t, ask(cnAlice, priv.Identifier, "obsoletes", old.Identifier), http.StatusNotFound, "NotFound", "")
		}
	})
}

// --- updateSystemMetadata (v2), delete, archive, synchronize (v2).

func TestCNStorage(t *testing.T) {
	t.Parallel()
	c := cnStart(t)

	t.Run("updateSystemMetadata", func(t *testing.T) {
		sm, data := cnObject("cn-usm", true)
		c.create(t, sm, data)
		for _, v := range []int{2, 0} {
			put := func(who string, parts ...part) *response {
				return c.form(t, who, http.MethodPut, cnp(v, "/meta"), parts...)
			}
			cur := c.meta(t, sm.Identifier)
			next := cur.Clone()
			next.FileName = fmt.Sprintf("renamed-%d.txt", v)
			next.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{authRule(adapter.PermWrite, cnBob)}}
			ps := func(m *adapter.SystemMetadata) []part {
				return []part{textPart("pid", m.Identifier), docPart("sysmeta", m)}
			}
			cnWantError(t, put("", ps(next)...), http.StatusUnauthorized, "InvalidToken", "4957")
			cnWantError(t, put(cnAlice, ps(next)...), http.StatusUnauthorized, "NotAuthorized", "4867")
			cnWantError(t, put(cnAdmin, textPart("pid", sm.Identifier)), http.StatusBadRequest, "InvalidRequest", "4869")
			stale := next.Clone()
			stale.DateSysMetadataModified = adapter.NewTime(stale.DateSysMetadataModified.Add(-time.Second))
			cnWantError(t, put(cnAdmin, ps(stale)...), http.StatusBadRequest, "InvalidRequest", "4869")
			missing := next.Clone()
			missing.Identifier = "cn-usm-missing"
			cnWantError(t, put(cnAdmin, ps(missing)...), http.StatusBadRequest, "InvalidRequest", "4869")
			bad := next.Clone()
			bad.Size++
			cnWantError(t, put(cnAdmin, ps(bad)...), http.StatusBadRequest, "InvalidSystemMetadata", "4956")
			cnWantError(t, put(cnAdmin, textPart("pid", sm.Identifier), filePart("sysmeta", "s.xml", strings.NewReader("<x/>"))), http.StatusBadRequest, "InvalidSystemMetadata", "4956")
			if !cnWantOK(t, put(cnAdmin, ps(next)...)) {
				t.FailNow()
			}
			m := c.meta(t, sm.Identifier)
			if m.FileName != next.FileName || m.AccessPolicy == nil || m.AccessPolicy.Allow[0].Subject[0] != cnBob || m.SerialVersion != cur.SerialVersion+1 {
				t.Errorf("v%d: after updateSystemMetadata %+v", v, m)
			}
		}
	})

	t.Run("archive", func(t *testing.T) {
		for _, v := range cnVersions {
			sm, data := cnObject(fmt.Sprintf("cn-archive-%d", v), true)
			c.create(t, sm, data)
			path := cnID(v, "archive", sm.Identifier)
			cnWantError(t, c.call(t, "", http.MethodPut, path), http.StatusUnauthorized, "InvalidToken", "4973")
			cnWantError(t, c.call(t, cnBob, http.MethodPut, path), http.StatusUnauthorized, "NotAuthorized", "4970")
			cnWantError(t, c.call(t, cnAlice, http.MethodPut, cnID(v, "archive", "cn-archive-missing")), http.StatusNotFound, "NotFound", "4971")
			if !wantIdentifier(t, c.call(t, cnAlice, http.MethodPut, path), sm.Identifier) {
				continue
			}
			wantIdentifier(t, c.call(t, cnAdmin, http.MethodPut, path), sm.Identifier) // again: idempotent
			if m := c.meta(t, sm.Identifier); !m.Archived || m.SerialVersion != 2 {
				t.Errorf("v%d: after archive %+v", v, m)
			}
			// Archived objects stay readable.
			if r := c.get(t, cnID(v, "object", sm.Identifier)); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
				t.Errorf("v%d: an archived object reads other bytes", v)
			}
		}
	})

	t.Run("delete", func(t *testing.T) {
		reg, _ := cnObject("cn-delete-registered", true)
		reg.AuthoritativeMemberNode = cnMN2
		wantIdentifier(t, c.form(t, cnAdmin, http.MethodPost, cnp(2, "/meta"), textPart("pid", reg.Identifier), docPart("sysmeta", reg)), reg.Identifier)
		for _, v := range cnVersions {
			sm, data := cnObject(fmt.Sprintf("cn-delete-%d", v), true)
			c.create(t, sm, data)
			path := cnID(v, "object", sm.Identifier)
			cnWantError(t, c.call(t, "", http.MethodDelete, path), http.StatusUnauthorized, "InvalidToken", "4963")
			cnWantError(t, c.call(t, cnAlice, http.MethodDelete, path), http.StatusUnauthorized, "NotAuthorized", "4960")
			cnWantError(t, c.call(t, cnAdmin, http.MethodDelete, cnID(v, "object", "cn-delete-missing")), http.StatusNotFound, "NotFound", "4961")
			if !wantIdentifier(t, c.call(t, cnAdmin, http.MethodDelete, path), sm.Identifier) {
				continue
			}
			cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnID(v, "meta", sm.Identifier)), http.StatusNotFound, "NotFound", "1060")
			cnWantError(t, c.call(t, cnAdmin, http.MethodGet, path), http.StatusNotFound, "NotFound", "1020")
			cnWantError(t, c.call(t, cnAdmin, http.MethodDelete, path), http.StatusNotFound, "NotFound", "4961")
		}
		// System metadata registered without bytes is deleted as well.
		wantIdentifier(t, c.call(t, cnAdmin, http.MethodDelete, cnID(2, "object", reg.Identifier)), reg.Identifier)
		cnWantError(t, c.call(t, cnAdmin, http.MethodGet, cnID(2, "meta", reg.Identifier)), http.StatusNotFound, "NotFound", "1060")
		if n := countFiles(t, c.DataDir); n != c.objectFiles(t) {
			t.Errorf("%d files in the object store, want %d", n, c.objectFiles(t))
		}
	})

	t.Run("synchronize", func(t *testing.T) {
		sm, data := cnObject("cn-sync", false)
		c.create(t, sm, data)
		for _, v := range []int{2, 0} {
			sync := func(who string, parts ...part) *response {
				return c.form(t, who, http.MethodPost, cnp(v, "/synchronize"), parts...)
			}
			cnWantOK(t, sync(cnAdmin, textPart("pid", sm.Identifier)))
			cnWantError(t, sync("", textPart("pid", sm.Identifier)), http.StatusUnauthorized, "InvalidToken", "4963")
			cnWantError(t, sync(cnAlice, textPart("pid", sm.Identifier)), http.StatusUnauthorized, "NotAuthorized", "4962")
			cnWantError(t, sync(cnAdmin, textPart("pid", "cn-sync-missing")), http.StatusBadRequest, "InvalidRequest", "")
			cnWantError(t, sync(cnAdmin), http.StatusBadRequest, "InvalidRequest", "")
			cnWantError(t, c.call(t, cnAdmin, http.MethodPost, cnp(v, "/synchronize")), http.StatusBadRequest, "InvalidRequest", "")
		}
	})
}

// objectFiles is the number of objects with bytes that listObjects shows the
// trusted subject on the CN.
func (c *cnServer) objectFiles(t testing.TB) int {
	t.Helper()
	r := c.call(t, cnAdmin, http.MethodGet, cnp(2, "/object?count=10000"))
	var l adapter.ObjectList
	decode(t, r, &l)
	n := 0
	for _, oi := range l.ObjectInfo {
		if m := c.meta(t, oi.Identifier); m.AuthoritativeMemberNode == testNodeID {
			n++
		}
	}
	return n
}
