package main

// End-to-end tests of the member node: the real binary (built by TestMain),
// started on a temporary data directory, driven over HTTP on v1 and v2, every
// XML answer validated against the DataONE schemas (server.do).
//
// These tests present no credential, so every caller is the public subject
// (credentials are auth_test.go's). Servers run with
// D1BRIDGE_NODE_SUBMITTERS=public, so public may create; the
// objects' access policies give public the level each test needs (read, or
// changePermission for update, archive and updateSystemMetadata). The trusted
// operations (delete, systemMetadataChanged, synchronizationFailed) cannot be
// granted by an object: their tests start a second instance with
// D1BRIDGE_NODE_ADMINISTRATORS=public, and check that on an ordinary instance
// the same calls answer 401 InvalidToken (public presents no credential).

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// adminEnv makes the public subject trusted (an administrator).
const adminEnv = "D1BRIDGE_NODE_ADMINISTRATORS=public"

// mnp is a path under the MN interface of API version v.
func mnp(v int, rest string) string { return fmt.Sprintf("/d1/mn/v%d%s", v, rest) }

// segment percent-encodes id as one path segment: url.PathEscape, and the
// identifiers "." and ".." as %2E and %2E%2E, which RFC 3986 clients (and Go's
// ServeMux) would otherwise take for dot-segments.
func segment(id string) string {
	if id == "." || id == ".." {
		return strings.ReplaceAll(id, ".", "%2E")
	}
	return url.PathEscape(id)
}

// objectPath, metaPath and checksumPath name an identifier's resources.
func objectPath(v int, id string) string   { return mnp(v, "/object/"+segment(id)) }
func metaPath(v int, id string) string     { return mnp(v, "/meta/"+segment(id)) }
func checksumPath(v int, id string) string { return mnp(v, "/checksum/"+segment(id)) }

// genBytes is n deterministic bytes.
func genBytes(seed uint64, n int) []byte {
	b, _ := io.ReadAll(newGenReader(seed, int64(n)))
	return b
}

// create creates data under sm on v2 (form-data, object first) and fails the
// test unless the answer is the Identifier.
func create(t testing.TB, s *server, sm *adapter.SystemMetadata, data []byte) {
	t.Helper()
	r := s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(data), false)...)
	if !wantIdentifier(t, r, sm.Identifier) {
		t.FailNow()
	}
}

// wantIdentifier checks a d1:identifier answer.
func wantIdentifier(t testing.TB, r *response, id string) bool {
	t.Helper()
	if !wantStatus(t, r, http.StatusOK) {
		return false
	}
	if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "identifier" {
		t.Errorf("answer root is {%s}%s, want a v1 identifier", n.Space, n.Local)
	}
	var got adapter.Identifier
	decode(t, r, &got)
	if got.Value != id {
		t.Errorf("identifier %q, want %q", got.Value, id)
		return false
	}
	return true
}

// rootName is the name of the root element of doc.
func rootName(t testing.TB, doc []byte) xml.Name {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := d.Token()
		if err != nil {
			t.Fatalf("no root element: %v\n%s", err, doc)
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name
		}
	}
}

// getMeta reads the system metadata of id on API version v.
func getMeta(t testing.TB, s *server, v int, id string) *adapter.SystemMetadata {
	t.Helper()
	r := s.get(t, metaPath(v, id))
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	sm := &adapter.SystemMetadata{}
	decode(t, r, sm)
	return sm
}

// listObjects answers listObjects on version v with the raw query q.
func listObjects(t testing.TB, s *server, v int, q string) *adapter.ObjectList {
	t.Helper()
	r := s.get(t, mnp(v, "/object")+"?"+q)
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "objectList" {
		t.Errorf("listObjects root is {%s}%s, want the v1 objectList", n.Space, n.Local)
	}
	l := &adapter.ObjectList{}
	decode(t, r, l)
	if l.Count != len(l.ObjectInfo) {
		t.Errorf("listObjects count=%d with %d entries", l.Count, len(l.ObjectInfo))
	}
	return l
}

// logRecords answers getLogRecords on version v with the raw query q.
func logRecords(t testing.TB, s *server, v int, q string) *adapter.Log {
	t.Helper()
	r := s.get(t, mnp(v, "/log")+"?"+q)
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	wantNS := adapter.NSv2
	if v == 1 {
		wantNS = adapter.NSv1
	}
	if n := rootName(t, r.Body); n.Space != wantNS || n.Local != "log" {
		t.Errorf("getLogRecords root is {%s}%s, want {%s}log", n.Space, n.Local, wantNS)
	}
	l := &adapter.Log{}
	decode(t, r, l)
	if l.Count != len(l.LogEntry) {
		t.Errorf("getLogRecords count=%d with %d entries", l.Count, len(l.LogEntry))
	}
	return l
}

func pids(l *adapter.ObjectList) []string {
	var out []string
	for _, oi := range l.ObjectInfo {
		out = append(out, oi.Identifier)
	}
	return out
}

// events lists "pid event" of every entry.
func events(l *adapter.Log) []string {
	var out []string
	for _, e := range l.LogEntry {
		out = append(out, e.Identifier+" "+e.Event)
	}
	return out
}

// countFiles counts the regular files under the object store of dataDir
// (committed objects and temporary files alike).
func countFiles(t testing.TB, dataDir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dataDir, "objects"), func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && d.Name() != ".lock" { // a store instance's lock is not an object
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantNotFound checks that id is unknown to get, getSystemMetadata and describe.
func wantNotFound(t testing.TB, s *server, v int, id string) {
	t.Helper()
	wantError(t, s.get(t, metaPath(v, id)), http.StatusNotFound, "NotFound")
	wantError(t, s.get(t, objectPath(v, id)), http.StatusNotFound, "NotFound")
	wantError(t, s.head(t, objectPath(v, id)), http.StatusNotFound, "NotFound")
}

// at formats a time for a query parameter.
func at(tm adapter.Time) string { return url.QueryEscape(tm.Format()) }

// ping and getCapabilities.
func TestPingAndCapabilities(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	t.Run("ping", func(t *testing.T) {
		for _, p := range []string{"/d1/mn/v1/monitor/ping", "/d1/mn/v2/monitor/ping", "/d1/mn/monitor/ping"} {
			r := s.get(t, p)
			wantStatus(t, r, http.StatusOK)
			d, err := http.ParseTime(r.Header.Get("Date"))
			if err != nil {
				t.Errorf("%s: Date header %q: %v", p, r.Header.Get("Date"), err)
			} else if diff := time.Since(d); diff < -time.Minute || diff > time.Minute {
				t.Errorf("%s: Date %s is not now", p, d)
			}
		}
	})

	t.Run("getCapabilities", func(t *testing.T) {
		for _, c := range []struct {
			path string
			ns   string
		}{
			{"/d1/mn/v2/", adapter.NSv2},
			{"/d1/mn/v2", adapter.NSv2},
			{"/d1/mn/v2/node", adapter.NSv2},
			{"/d1/mn/v1/", adapter.NSv1},
			{"/d1/mn/v1/node", adapter.NSv1},
			{"/d1/mn", adapter.NSv2},
			{"/d1/mn/", adapter.NSv2},
			{"/d1/mn/node", adapter.NSv2},
		} {
			t.Run(c.path, func(t *testing.T) {
				r := s.get(t, c.path)
				if !wantStatus(t, r, http.StatusOK) {
					return
				}
				if n := rootName(t, r.Body); n.Space != c.ns || n.Local != "node" {
					t.Errorf("root {%s}%s, want {%s}node", n.Space, n.Local, c.ns)
				}
				var n adapter.Node
				decode(t, r, &n)
				if n.Identifier != testNodeID || n.Type != "mn" || n.State != "up" {
					t.Errorf("node %s type %s state %s, want %s mn up", n.Identifier, n.Type, n.State, testNodeID)
				}
				if want := s.URL + "/d1/mn"; n.BaseURL != want {
					t.Errorf("baseURL %q, want %q", n.BaseURL, want)
				}
				if n.Services == nil {
					t.Fatal("no services")
				}
				have := map[string]bool{}
				for _, sv := range n.Services.Service {
					if sv.Available == nil || !*sv.Available {
						t.Errorf("service %s %s is not available", sv.Name, sv.Version)
					}
					have[sv.Name+" "+sv.Version] = true
				}
				for _, name := range []string{"MNCore", "MNRead", "MNAuthorization", "MNStorage"} {
					for _, v := range []string{"v1", "v2"} {
						if !have[name+" "+v] {
							t.Errorf("service %s %s is not listed", name, v)
						}
					}
				}
				if len(n.ContactSubject) == 0 {
					t.Error("no contactSubject")
				}
			})
		}
	})
}

// identifiers with reserved, non-ASCII and many characters survive every
// operation; identifiers with whitespace are refused.
func TestIdentifierCharacters(t *testing.T) {
	t.Parallel()
	// The administrator instance, so that delete works too.
	s := startServer(t, "", adminEnv)
	long := strings.Repeat("é", 10) + strings.Repeat("x", 789) + "/"
	if n := len([]rune(long)); n != 800 {
		t.Fatalf("the long identifier has %d characters", n)
	}
	for i, id := range []string{
		"10.1000/182",
		"a/b//c/",
		"what?x=1&y=2",
		"frag#ment",
		"plus+sign",
		"per%cent%2F%20",
		"urn:uuid:0b7f0f63-4e4f-4bde-9a85-4f0d9f5b4b6e",
		"doi:10.5063/F1Z899CZ",
		"ünïcödé-日本語-😀",
		`quote"apos'<lt>&amp;`,
		"semi;colon,comma@at$dollar!bang(paren)*star~tilde='",
		"back\\slash",
		".",
		"..",
		"a/./b/../c",
		"../etc/passwd",
		long,
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			d := genBytes(uint64(1100+i), 200+i)
			sm := newSysmeta(id, "application/octet-stream", "SHA-256", d)
			create(t, s, sm, d)
			for _, v := range []int{1, 2} {
				r := s.get(t, objectPath(v, id))
				if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d) {
					t.Errorf("v%d get: wrong bytes", v)
				}
				// The download is named after the identifier (and the format's
				// extension), in a Content-Disposition a strict parser reads.
				wantName := id
				if f, ok := adapter.OfficialFormats().Lookup(sm.FormatID); ok && f.Extension != "" {
					wantName += "." + f.Extension
				}
				cd := r.Header.Get("Content-Disposition")
				if disp, params, err := mime.ParseMediaType(cd); err != nil || disp != "attachment" || params["filename"] != wantName {
					t.Errorf("v%d get: Content-Disposition %q reads as %q %q (%v), want the filename %q", v, cd, disp, params["filename"], err, wantName)
				}
				h := s.head(t, objectPath(v, id))
				if wantStatus(t, h, http.StatusOK) && h.Header.Get("DataONE-Checksum") != "SHA-256,"+sm.Checksum.Value {
					t.Errorf("v%d describe: DataONE-Checksum %q", v, h.Header.Get("DataONE-Checksum"))
				}
				if m := getMeta(t, s, v, id); m.Identifier != id {
					t.Errorf("v%d getSystemMetadata: identifier %q", v, m.Identifier)
				}
				var cs adapter.Checksum
				if r := s.get(t, checksumPath(v, id)+"?checksumAlgorithm=MD5"); wantStatus(t, r, http.StatusOK) {
					if decode(t, r, &cs); cs.Value != checksum("MD5", d) {
						t.Errorf("v%d getChecksum: %s", v, cs.Value)
					}
				}
				l := listObjects(t, s, v, "identifier="+url.QueryEscape(id))
				if l.Total != 1 || l.Count != 1 || l.ObjectInfo[0].Identifier != id {
					t.Errorf("v%d listObjects(identifier): %v", v, pids(l))
				}
				lg := logRecords(t, s, v, map[int]string{1: "pidFilter=", 2: "idFilter="}[v]+url.QueryEscape(id))
				if lg.Total < 2 || lg.LogEntry[0].Identifier != id {
					t.Errorf("v%d getLogRecords(id): %v", v, events(lg))
				}
			}
			if !wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, id), nil), id) {
				return
			}
			wantNotFound(t, s, 2, id)
			wantNotFound(t, s, 1, id)
		})
	}

	t.Run("too long", func(t *testing.T) {
		id := long + "x"
		d := genBytes(1200, 10)
		wantError(t, s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(newSysmeta(id, "text/plain", "MD5", d), bytes.NewReader(d), false)...), http.StatusBadRequest, "InvalidRequest")
		wantError(t, s.get(t, objectPath(2, id)), http.StatusBadRequest, "InvalidRequest")
	})

	files := countFiles(t, s.DataDir)
	for _, c := range []struct{ name, id string }{
		{"space", "has space"},
		{"tab", "has\ttab"},
		{"newline", "has\nnewline"},
		{"no-break space", "has\u00a0nbsp"},
		{"ideographic space", "has\u3000space"},
		{"line separator", "has\u2028ls"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := genBytes(1300, 10)
			sm := newSysmeta(c.id, "text/plain", "MD5", d)
			for _, v := range []int{1, 2} {
				parts := []part{textPart("pid", c.id), filePart("object", "o", bytes.NewReader(d)), docPart("sysmeta", sm, v)}
				wantError(t, s.send(t, http.MethodPost, mnp(v, "/object"), false, parts...), http.StatusBadRequest, "InvalidRequest")
				wantError(t, s.send(t, http.MethodPost, objectPath(v, c.id), false, parts[1:]...), http.StatusBadRequest, "InvalidRequest")
				wantError(t, s.get(t, objectPath(v, c.id)), http.StatusBadRequest, "InvalidRequest")
				wantError(t, s.get(t, metaPath(v, c.id)), http.StatusBadRequest, "InvalidRequest")
				wantError(t, s.head(t, objectPath(v, c.id)), http.StatusBadRequest, "InvalidRequest")
				wantError(t, s.do(t, http.MethodDelete, objectPath(v, c.id), nil), http.StatusBadRequest, "InvalidRequest")
				wantError(t, s.get(t, mnp(v, "/object")+"?identifier="+url.QueryEscape(c.id)), http.StatusBadRequest, "InvalidRequest")
			}
			if n := countFiles(t, s.DataDir); n != files {
				t.Errorf("%d files under the object store, want %d", n, files)
			}
		})
	}
	if l := listObjects(t, s, 2, ""); l.Total != 0 {
		t.Errorf("objects left: %v", pids(l))
	}
}

// isAuthorized, setAccessPolicy (PUT /accessRules/{id}) and what objects the
// public subject cannot read look like.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	d := genBytes(1500, 300)
	create(t, s, newSysmeta("auth-read", "text/plain", "MD5", d), d)
	create(t, s, newSysmeta("auth-all", "text/plain", "MD5", d, adapter.PermChangePermission), d)
	create(t, s, newSysmeta("auth-write", "text/plain", "MD5", d, adapter.PermWrite), d)
	private := newSysmeta("auth-private", "text/plain", "MD5", d)
	private.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"CN=someone,DC=example,DC=org"}, Permission: []adapter.Permission{adapter.PermRead}}}}
	create(t, s, private, d) // public may create what it cannot read
	sidSM := newSysmeta("auth-sid-1", "text/plain", "MD5", d)
	sidSM.SeriesID = "auth-series"
	create(t, s, sidSM, d)

	// unauthorized is a 401 for the public subject: InvalidToken, as it
	// presents no credential (NotAuthorized is accepted for isAuthorized,
	// whose answer clients read as false either way).
	unauthorized := func(t *testing.T, r *response, names ...string) {
		t.Helper()
		if len(names) == 0 {
			names = []string{"InvalidToken"}
		}
		name := r.Header.Get("DataONE-Exception-Name")
		if len(r.Body) > 0 {
			var e errorDoc
			xml.Unmarshal(r.Body, &e)
			name = e.Name
		}
		if r.Status != http.StatusUnauthorized || !slices.Contains(names, name) {
			t.Errorf("status %d %s, want 401 %v: %s", r.Status, name, names, r.Body)
		}
	}

	t.Run("isAuthorized", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			is := func(id, action string) *response {
				return s.get(t, mnp(v, "/isAuthorized/"+segment(id))+"?action="+action)
			}
			wantStatus(t, is("auth-read", "read"), http.StatusOK)
			unauthorized(t, is("auth-read", "write"), "InvalidToken", "NotAuthorized")
			unauthorized(t, is("auth-read", "changePermission"), "InvalidToken", "NotAuthorized")
			wantStatus(t, is("auth-write", "write"), http.StatusOK)
			unauthorized(t, is("auth-write", "changePermission"), "InvalidToken", "NotAuthorized")
			wantStatus(t, is("auth-all", "changePermission"), http.StatusOK)
			wantStatus(t, is("auth-all", "read"), http.StatusOK)
			unauthorized(t, is("auth-private", "read"), "InvalidToken", "NotAuthorized")
			wantError(t, is("auth-missing", "read"), http.StatusNotFound, "NotFound")
			wantError(t, is("auth-read", "delete"), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.get(t, mnp(v, "/isAuthorized/auth-read")), http.StatusBadRequest, "InvalidRequest")
		}
		wantStatus(t, s.get(t, mnp(2, "/isAuthorized/auth-series?action=read")), http.StatusOK)
		wantError(t, s.get(t, mnp(1, "/isAuthorized/auth-series?action=read")), http.StatusNotFound, "NotFound")
	})

	t.Run("objects public cannot read", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			unauthorized(t, s.get(t, objectPath(v, "auth-private")))
			unauthorized(t, s.get(t, metaPath(v, "auth-private")))
			unauthorized(t, s.get(t, checksumPath(v, "auth-private")))
			unauthorized(t, s.head(t, objectPath(v, "auth-private")))
			l := listObjects(t, s, v, "")
			if slices.Contains(pids(l), "auth-private") || l.Total != 4 {
				t.Errorf("v%d: public lists %v (total %d)", v, pids(l), l.Total)
			}
			if l := listObjects(t, s, v, "identifier=auth-private"); l.Total != 0 {
				t.Errorf("v%d: public lists the private object by identifier", v)
			}
			if got := events(logRecords(t, s, v, "")); slices.Contains(got, "auth-private create") {
				t.Errorf("v%d: public sees the private object's events: %v", v, got)
			}
		}
	})

	t.Run("setAccessPolicy", func(t *testing.T) {
		m := getMeta(t, s, 2, "auth-all")
		policy := &adapter.AccessPolicy{Allow: []adapter.AccessRule{
			{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}},
			{Subject: []string{"CN=editor,DC=example,DC=org"}, Permission: []adapter.Permission{adapter.PermWrite}},
		}}
		set := func(v int, id string, serial uint64, p *adapter.AccessPolicy) *response {
			parts := []part{textPart("serialVersion", strconv.FormatUint(serial, 10))}
			if p != nil {
				parts = append(parts, docPart("accessPolicy", p))
			}
			return s.send(t, http.MethodPut, mnp(v, "/accessRules/"+segment(id)), false, parts...)
		}
		wantError(t, set(2, "auth-all", m.SerialVersion+5, policy), http.StatusConflict, "VersionMismatch")
		wantError(t, set(2, "auth-all", m.SerialVersion, nil), http.StatusBadRequest, "InvalidRequest")
		wantError(t, set(2, "auth-missing", 1, policy), http.StatusNotFound, "NotFound")
		unauthorized(t, set(2, "auth-write", 1, policy))
		wantStatus(t, set(2, "auth-all", m.SerialVersion, policy), http.StatusOK)
		after := getMeta(t, s, 2, "auth-all")
		if after.SerialVersion != m.SerialVersion+1 || !after.DateSysMetadataModified.After(m.DateSysMetadataModified.Time) ||
			after.AccessPolicy == nil || len(after.AccessPolicy.Allow) != 2 {
			t.Errorf("after setAccessPolicy: %+v", after)
		}
		// Public now only reads: the decision made before must not be reused.
		unauthorized(t, s.get(t, mnp(2, "/isAuthorized/auth-all?action=changePermission")), "InvalidToken", "NotAuthorized")
		unauthorized(t, set(1, "auth-all", after.SerialVersion, policy))
		wantStatus(t, s.get(t, objectPath(1, "auth-all")), http.StatusOK)
	})
}

// generateIdentifier, unknown paths, wrong methods and the operations this
// node does not offer yet: each answers a DataONE error document.
func TestOtherOperations(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	t.Run("generateIdentifier", func(t *testing.T) {
		seen := map[string]bool{}
		for _, v := range []int{1, 2} {
			for _, c := range []struct{ scheme, fragment, prefix string }{
				{"UUID", "", "urn:uuid:"},
				{"uuid", "", "urn:uuid:"},
				{"UUID", "my-prefix-", "my-prefix-"},
			} {
				parts := []part{textPart("scheme", c.scheme)}
				if c.fragment != "" {
					parts = append(parts, textPart("fragment", c.fragment))
				}
				r := s.send(t, http.MethodPost, mnp(v, "/generate"), false, parts...)
				if !wantStatus(t, r, http.StatusOK) {
					continue
				}
				var id adapter.Identifier
				decode(t, r, &id)
				if !strings.HasPrefix(id.Value, c.prefix) || adapter.CheckIdentifier(id.Value) != nil || seen[id.Value] {
					t.Errorf("v%d %s/%s: generated %q", v, c.scheme, c.fragment, id.Value)
				}
				seen[id.Value] = true
				wantNotFound(t, s, 2, id.Value) // generating reserves nothing here
			}
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/generate"), false, textPart("scheme", "DOI")), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/generate"), false, textPart("fragment", "x")), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/generate"), false, textPart("scheme", "UUID"), textPart("fragment", "has space")), http.StatusBadRequest, "InvalidRequest")
		}
	})

	t.Run("callers who may not create", func(t *testing.T) {
		// The default submitters (authenticatedUser) exclude public.
		c := startServer(t, "", "D1BRIDGE_NODE_SUBMITTERS=authenticatedUser")
		d := genBytes(1550, 100)
		sm := newSysmeta("not-a-submitter", "text/plain", "MD5", d)
		for _, v := range []int{1, 2} {
			wantError(t, c.send(t, http.MethodPost, mnp(v, "/object"), false, createParts(sm, bytes.NewReader(d), false)...), http.StatusUnauthorized, "InvalidToken")
			wantError(t, c.send(t, http.MethodPost, mnp(v, "/generate"), false, textPart("scheme", "UUID")), http.StatusUnauthorized, "InvalidToken")
		}
		wantNotFound(t, c, 2, "not-a-submitter")
		if n := countFiles(t, c.DataDir); n != 0 {
			t.Errorf("%d files under the object store", n)
		}
	})

	t.Run("unknown path", func(t *testing.T) {
		for _, p := range []string{"/d1/mn/v3/node", "/d1/mn/v2/nodes", "/d1/mn/v2/object/a/b", "/nothing"} {
			wantError(t, s.get(t, p), http.StatusNotFound, "NotFound")
		}
	})

	t.Run("wrong method", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{http.MethodDelete, "/d1/mn/v2/meta/x"},
			{http.MethodPost, "/d1/mn/v2/monitor/ping"},
			{http.MethodPut, "/d1/mn/v1/node"},
		} {
			r := s.do(t, c.method, c.path, nil)
			// An InvalidRequest document whose errorCode is the HTTP status.
			var e errorDoc
			if err := xml.Unmarshal(r.Body, &e); err != nil || r.Status != http.StatusMethodNotAllowed || e.Name != "InvalidRequest" || e.ErrorCode != 405 {
				t.Errorf("%s %s: status %d, %s", c.method, c.path, r.Status, r.Body)
			}
			if r.Header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 without Allow", c.method, c.path)
			}
		}
	})

	t.Run("not offered", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			for _, c := range []struct {
				method, path string
				code         int
				kind         string
			}{
				// Trusted operations: the permission is checked first.
				{http.MethodPost, "/replicate", 401, "InvalidToken"},
				{http.MethodGet, "/replica/x", 401, "InvalidToken"},
			} {
				wantError(t, s.do(t, c.method, mnp(v, c.path), nil), c.code, c.kind)
			}
		}
		a := startServer(t, "", adminEnv)
		for _, v := range []int{1, 2} {
			// replicate is built (TestReplicate): a request without sysmeta is refused.
			wantError(t, a.send(t, http.MethodPost, mnp(v, "/replicate"), false, textPart("sourceNode", "urn:node:other")), http.StatusBadRequest, "InvalidRequest")
			// getReplica is built: a missing object is NotFound, as on get.
			wantError(t, a.get(t, mnp(v, "/replica/x")), http.StatusNotFound, "NotFound")
		}
		// getPackage is built (TestGetPackage): a missing resource map is NotFound.
		wantError(t, s.get(t, mnp(2, "/packages/application%2Fbagit-097/x")), http.StatusNotFound, "NotFound")
		wantError(t, s.get(t, mnp(1, "/packages/x")), http.StatusNotFound, "NotFound")
		// views is built (TestViewsAndWhoami): an unknown object is NotFound.
		wantError(t, s.get(t, mnp(1, "/views/default/x")), http.StatusNotFound, "NotFound")
	})
}
