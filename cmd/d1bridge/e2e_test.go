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
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
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

// 1. ping and getCapabilities.
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

// created is an object a test created, with what it expects of it.
type created struct {
	sm     *adapter.SystemMetadata
	data   []byte
	before time.Time // just before the create was sent
	after  time.Time // just after it was answered
	ctype  string    // the Content-Type get must answer
}

// 2. create in every body form and checksum algorithm; get, describe,
// getSystemMetadata, getChecksum, listObjects and getLogRecords of the result.
func TestCreateAndRead(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	formats := adapter.OfficialFormats()
	old := adapter.NewTime(time.Date(2000, 1, 2, 3, 4, 5, 0, time.UTC))
	var objs []*created

	// submit sends one create and records what it should have made.
	submit := func(t *testing.T, path string, sm *adapter.SystemMetadata, data []byte, parts []part, mixed bool) {
		t.Helper()
		c := &created{sm: sm, data: data, before: time.Now().Truncate(time.Millisecond)}
		r := s.send(t, http.MethodPost, path, mixed, parts...)
		c.after = time.Now()
		if wantIdentifier(t, r, sm.Identifier) {
			c.ctype = formats.MediaType(sm.FormatID)
			objs = append(objs, c)
		}
	}

	t.Run("create", func(t *testing.T) {
		bodies := []struct {
			name                string
			mixed, sysmetaFirst bool
		}{
			{"form-data object first", false, false},
			{"form-data sysmeta first", false, true},
			{"mixed object first", true, false},
			{"mixed sysmeta first", true, true},
		}
		fmts := []string{"text/plain", "application/octet-stream", "text/csv", "application/json"}
		for i, alg := range []string{"MD5", "SHA-1", "SHA-256", "SHA-512"} {
			for j, b := range bodies {
				t.Run(alg+"/"+b.name, func(t *testing.T) {
					pid := fmt.Sprintf("create-%s-%d", alg, j)
					data := genBytes(uint64(10*i+j), 1000*(i+1)+317*j)
					sm := newSysmeta(pid, fmts[(i+j)%len(fmts)], alg, data)
					// Node-controlled fields a client sends are overwritten.
					sm.Submitter, sm.SerialVersion = "CN=someone else,DC=example,DC=org", 42
					sm.DateUploaded, sm.DateSysMetadataModified = old, old
					sm.OriginMemberNode, sm.AuthoritativeMemberNode = "urn:node:other", "urn:node:other"
					submit(t, mnp(2, "/object"), sm, data, createParts(sm, bytes.NewReader(data), b.sysmetaFirst), b.mixed)
				})
			}
		}
		t.Run("v1 with v1 system metadata", func(t *testing.T) {
			data := genBytes(100, 4321)
			sm := newSysmeta("create-v1", "text/csv", "SHA-1", data)
			parts := []part{textPart("pid", sm.Identifier), filePart("object", "content.bin", bytes.NewReader(data)), docPart("sysmeta", sm, 1)}
			submit(t, mnp(1, "/object"), sm, data, parts, false)
		})
		t.Run("pid in the path", func(t *testing.T) {
			data := genBytes(101, 2000)
			sm := newSysmeta("create-path", "application/octet-stream", "MD5", data)
			parts := []part{docPart("sysmeta", sm), filePart("object", "content.bin", bytes.NewReader(data))}
			submit(t, objectPath(2, sm.Identifier), sm, data, parts, false)
		})
		t.Run("upper-case checksum", func(t *testing.T) {
			data := genBytes(102, 3000)
			sm := newSysmeta("create-upper", "text/plain", "SHA-256", data)
			sm.Checksum.Value = strings.ToUpper(sm.Checksum.Value)
			submit(t, mnp(2, "/object"), sm, data, createParts(sm, bytes.NewReader(data), false), false)
			if len(objs) > 0 && objs[len(objs)-1].sm == sm {
				c := *sm
				c.Checksum.Value = strings.ToLower(c.Checksum.Value)
				objs[len(objs)-1].sm = &c // stored lower-case
			}
		})
		t.Run("v2 fields", func(t *testing.T) {
			data := []byte("héllo, wörld\n")
			sm := newSysmeta("create-v2fields", "text/plain", "SHA-1", data)
			sm.SeriesID = "create-series"
			sm.FileName = "notes.txt"
			sm.MediaType = &adapter.MediaType{Name: "text/plain", Property: []adapter.MediaTypeProperty{{Name: "charset", Value: "utf-8"}}}
			submit(t, mnp(2, "/object"), sm, data, createParts(sm, bytes.NewReader(data), true), false)
			if len(objs) > 0 && objs[len(objs)-1].sm == sm {
				objs[len(objs)-1].ctype = "text/plain; charset=utf-8"
			}
		})
		t.Run("unversioned path", func(t *testing.T) {
			data := genBytes(103, 999)
			sm := newSysmeta("create-unversioned", "text/plain", "SHA-1", data)
			submit(t, "/d1/mn/object", sm, data, createParts(sm, bytes.NewReader(data), false), false)
		})
		t.Run("empty object", func(t *testing.T) {
			sm := newSysmeta("create-empty", "application/octet-stream", "MD5", nil)
			submit(t, mnp(2, "/object"), sm, nil, createParts(sm, bytes.NewReader(nil), false), false)
		})
	})
	if len(objs) == 0 {
		t.Fatal("nothing was created")
	}

	metas := map[string]*adapter.SystemMetadata{}
	t.Run("getSystemMetadata", func(t *testing.T) {
		for _, c := range objs {
			t.Run(c.sm.Identifier, func(t *testing.T) {
				r := s.get(t, metaPath(2, c.sm.Identifier))
				if !wantStatus(t, r, http.StatusOK) {
					return
				}
				if n := rootName(t, r.Body); n.Space != adapter.NSv2 || n.Local != "systemMetadata" {
					t.Errorf("v2 root {%s}%s", n.Space, n.Local)
				}
				sm := &adapter.SystemMetadata{}
				decode(t, r, sm)
				metas[c.sm.Identifier] = sm
				checkCreatedMeta(t, c, sm, 2)

				r1 := s.get(t, metaPath(1, c.sm.Identifier))
				if !wantStatus(t, r1, http.StatusOK) {
					return
				}
				if n := rootName(t, r1.Body); n.Space != adapter.NSv1 || n.Local != "systemMetadata" {
					t.Errorf("v1 root {%s}%s", n.Space, n.Local)
				}
				for _, el := range []string{"<seriesId>", "<mediaType", "<fileName>"} {
					if bytes.Contains(r1.Body, []byte(el)) {
						t.Errorf("v1 system metadata holds %s", el)
					}
				}
				sm1 := &adapter.SystemMetadata{}
				decode(t, r1, sm1)
				checkCreatedMeta(t, c, sm1, 1)
				if !sm1.DateSysMetadataModified.Equal(sm.DateSysMetadataModified.Time) || sm1.SerialVersion != sm.SerialVersion {
					t.Errorf("v1 and v2 system metadata differ: %+v / %+v", sm1, sm)
				}
			})
		}
	})

	t.Run("get", func(t *testing.T) {
		for _, c := range objs {
			for _, v := range []int{1, 2} {
				t.Run(fmt.Sprintf("v%d/%s", v, c.sm.Identifier), func(t *testing.T) {
					r := s.get(t, objectPath(v, c.sm.Identifier))
					if !wantStatus(t, r, http.StatusOK) {
						return
					}
					if !bytes.Equal(r.Body, c.data) {
						t.Errorf("got %d bytes, not the %d created", len(r.Body), len(c.data))
					}
					checkObjectHeaders(t, r, c, metas[c.sm.Identifier], v)
					if cd := r.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") {
						t.Errorf("Content-Disposition %q", cd)
					}
				})
			}
		}
		for _, c := range objs {
			if c.sm.FileName == "" {
				continue
			}
			r := s.get(t, objectPath(2, c.sm.Identifier))
			if _, p, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err != nil || p["filename"] != c.sm.FileName {
				t.Errorf("Content-Disposition %q does not name the fileName %q", r.Header.Get("Content-Disposition"), c.sm.FileName)
			}
		}
	})

	big := objs[0]
	for _, c := range objs {
		if len(c.data) > len(big.data) {
			big = c
		}
	}
	t.Run("range", func(t *testing.T) {
		n := len(big.data)
		for _, c := range []struct {
			rng        string
			start, end int // the slice data[start:end]
		}{
			{"bytes=10-99", 10, 100},
			{"bytes=0-0", 0, 1},
			{"bytes=-7", n - 7, n},
			{fmt.Sprintf("bytes=%d-", n-100), n - 100, n},
		} {
			t.Run(c.rng, func(t *testing.T) {
				r := s.get(t, objectPath(2, big.sm.Identifier), "Range", c.rng)
				if !wantStatus(t, r, http.StatusPartialContent) {
					return
				}
				if !bytes.Equal(r.Body, big.data[c.start:c.end]) {
					t.Errorf("got %d bytes, not data[%d:%d]", len(r.Body), c.start, c.end)
				}
				if want := fmt.Sprintf("bytes %d-%d/%d", c.start, c.end-1, n); r.Header.Get("Content-Range") != want {
					t.Errorf("Content-Range %q, want %q", r.Header.Get("Content-Range"), want)
				}
				if want := strconv.Itoa(c.end - c.start); r.Header.Get("Content-Length") != want {
					t.Errorf("Content-Length %q, want %s", r.Header.Get("Content-Length"), want)
				}
			})
		}
	})

	t.Run("range refused or ignored", func(t *testing.T) {
		n := len(big.data)
		for _, c := range []struct {
			rng    string
			status int
		}{
			{"bytes=-0", http.StatusRequestedRangeNotSatisfiable},
			{fmt.Sprintf("bytes=%d-", n), http.StatusRequestedRangeNotSatisfiable},
			{"bytes=5-2", http.StatusOK},
			{"bytes=0-1,5-6", http.StatusOK},
		} {
			t.Run(c.rng, func(t *testing.T) {
				r := s.get(t, objectPath(2, big.sm.Identifier), "Range", c.rng)
				if !wantStatus(t, r, c.status) {
					return
				}
				if c.status == http.StatusOK {
					if !bytes.Equal(r.Body, big.data) || r.Header.Get("Content-Range") != "" {
						t.Errorf("not the whole object: %d bytes, Content-Range %q", len(r.Body), r.Header.Get("Content-Range"))
					}
				} else if want := fmt.Sprintf("bytes */%d", n); r.Header.Get("Content-Range") != want {
					t.Errorf("Content-Range %q, want %q", r.Header.Get("Content-Range"), want)
				}
			})
		}
	})

	t.Run("conditional", func(t *testing.T) {
		first := s.get(t, objectPath(2, big.sm.Identifier))
		etag, lm := first.Header.Get("ETag"), first.Header.Get("Last-Modified")
		if etag == "" || lm == "" {
			t.Fatalf("no ETag (%q) or Last-Modified (%q)", etag, lm)
		}
		r := s.get(t, objectPath(2, big.sm.Identifier), "If-None-Match", etag)
		if wantStatus(t, r, http.StatusNotModified) && len(r.Body) != 0 {
			t.Errorf("304 with a body of %d bytes", len(r.Body))
		}
		r = s.get(t, objectPath(2, big.sm.Identifier), "If-Modified-Since", lm)
		wantStatus(t, r, http.StatusNotModified)
		r = s.get(t, objectPath(2, big.sm.Identifier), "If-None-Match", `"something-else"`)
		wantStatus(t, r, http.StatusOK)
		earlier := metas[big.sm.Identifier].DateSysMetadataModified.Add(-time.Hour).UTC().Format(http.TimeFormat)
		r = s.get(t, objectPath(1, big.sm.Identifier), "If-Modified-Since", earlier)
		if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, big.data) {
			t.Error("a modified object did not come whole")
		}
	})

	t.Run("describe", func(t *testing.T) {
		for _, c := range objs {
			for _, v := range []int{1, 2} {
				t.Run(fmt.Sprintf("v%d/%s", v, c.sm.Identifier), func(t *testing.T) {
					r := s.head(t, objectPath(v, c.sm.Identifier))
					if wantStatus(t, r, http.StatusOK) {
						checkObjectHeaders(t, r, c, metas[c.sm.Identifier], v)
					}
				})
			}
		}
		r := s.head(t, objectPath(2, "no-such-object"))
		wantError(t, r, http.StatusNotFound, "NotFound")
		if got := r.Header.Get("DataONE-Exception-DetailCode"); got != "1380" {
			t.Errorf("describe NotFound detail code %q, want 1380", got)
		}
	})

	t.Run("getChecksum", func(t *testing.T) {
		for _, c := range objs {
			for _, v := range []int{1, 2} {
				t.Run(fmt.Sprintf("v%d/%s", v, c.sm.Identifier), func(t *testing.T) {
					path := checksumPath(v, c.sm.Identifier)
					var cs adapter.Checksum
					r := s.get(t, path)
					if !wantStatus(t, r, http.StatusOK) {
						return
					}
					if n := rootName(t, r.Body); n.Space != adapter.NSv1 || n.Local != "checksum" {
						t.Errorf("root {%s}%s, want the v1 checksum", n.Space, n.Local)
					}
					decode(t, r, &cs)
					if want := checksum(c.sm.Checksum.Algorithm, c.data); cs.Algorithm != c.sm.Checksum.Algorithm || cs.Value != want {
						t.Errorf("stored checksum %s %s, want %s %s", cs.Algorithm, cs.Value, c.sm.Checksum.Algorithm, want)
					}
					for _, alg := range adapter.ChecksumAlgorithms {
						r := s.get(t, path+"?checksumAlgorithm="+url.QueryEscape(alg))
						if !wantStatus(t, r, http.StatusOK) {
							continue
						}
						decode(t, r, &cs)
						if want := checksum(alg, c.data); cs.Algorithm != alg || cs.Value != want {
							t.Errorf("%s: got %s %s, want %s", alg, cs.Algorithm, cs.Value, want)
						}
					}
				})
			}
		}
		t.Run("alias SHA1", func(t *testing.T) {
			c := objs[0]
			r := s.get(t, checksumPath(2, c.sm.Identifier)+"?checksumAlgorithm=SHA1")
			var cs adapter.Checksum
			if wantStatus(t, r, http.StatusOK) {
				decode(t, r, &cs)
				if cs.Algorithm != "SHA-1" || cs.Value != checksum("SHA-1", c.data) {
					t.Errorf("got %s %s", cs.Algorithm, cs.Value)
				}
			}
		})
		t.Run("unsupported algorithm", func(t *testing.T) {
			for _, v := range []int{1, 2} {
				r := s.get(t, checksumPath(v, objs[0].sm.Identifier)+"?checksumAlgorithm=CRC32")
				e := wantError(t, r, http.StatusBadRequest, "InvalidRequest")
				for _, alg := range adapter.ChecksumAlgorithms {
					if !strings.Contains(e.Description, alg) {
						t.Errorf("the description %q does not list %s", e.Description, alg)
					}
				}
			}
		})
		t.Run("unknown object", func(t *testing.T) {
			wantError(t, s.get(t, checksumPath(2, "no-such-object")), http.StatusNotFound, "NotFound")
		})
	})

	t.Run("listObjects", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			l := listObjects(t, s, v, "")
			if l.Total != len(objs) || l.Count != len(objs) || l.Start != 0 {
				t.Errorf("v%d: count %d start %d total %d, want %d objects", v, l.Count, l.Start, l.Total, len(objs))
			}
			byPID := map[string]adapter.ObjectInfo{}
			for _, oi := range l.ObjectInfo {
				byPID[oi.Identifier] = oi
			}
			for _, c := range objs {
				oi, ok := byPID[c.sm.Identifier]
				if !ok {
					t.Errorf("v%d: %s is not listed", v, c.sm.Identifier)
					continue
				}
				m := metas[c.sm.Identifier]
				if oi.FormatID != c.sm.FormatID || oi.Size != uint64(len(c.data)) ||
					oi.Checksum.Algorithm != c.sm.Checksum.Algorithm || oi.Checksum.Value != checksum(c.sm.Checksum.Algorithm, c.data) ||
					(m != nil && !oi.DateSysMetadataModified.Equal(m.DateSysMetadataModified.Time)) {
					t.Errorf("v%d: listed %+v, created %+v", v, oi, c.sm)
				}
			}
		}
	})

	t.Run("getLogRecords", func(t *testing.T) {
		for _, v := range []int{1, 2} {
			l := logRecords(t, s, v, "count=10000")
			if l.Total != l.Count {
				t.Errorf("v%d: total %d, count %d", v, l.Total, l.Count)
			}
			creates, reads := map[string]int{}, map[string]int{}
			for _, e := range l.LogEntry {
				switch e.Event {
				case "create":
					creates[e.Identifier]++
				case "read":
					reads[e.Identifier]++
				}
				if e.Subject != "public" || e.NodeIdentifier != testNodeID || e.IPAddress != "127.0.0.1" || e.EntryID == "" || e.DateLogged.IsZero() {
					t.Errorf("v%d: log entry %+v", v, e)
				}
			}
			for _, c := range objs {
				if creates[c.sm.Identifier] != 1 {
					t.Errorf("v%d: %d create events for %s, want 1", v, creates[c.sm.Identifier], c.sm.Identifier)
				}
				if reads[c.sm.Identifier] == 0 {
					t.Errorf("v%d: no read event for %s", v, c.sm.Identifier)
				}
			}
		}
	})
}

// checkCreatedMeta checks stored system metadata against what was created.
func checkCreatedMeta(t *testing.T, c *created, sm *adapter.SystemMetadata, v int) {
	t.Helper()
	want := c.sm
	if sm.Identifier != want.Identifier || sm.FormatID != want.FormatID || sm.Size != uint64(len(c.data)) {
		t.Errorf("v%d: identifier/format/size %s %s %d, want %s %s %d", v, sm.Identifier, sm.FormatID, sm.Size, want.Identifier, want.FormatID, len(c.data))
	}
	if sm.Checksum.Algorithm != want.Checksum.Algorithm || sm.Checksum.Value != checksum(want.Checksum.Algorithm, c.data) {
		t.Errorf("v%d: checksum %s %s", v, sm.Checksum.Algorithm, sm.Checksum.Value)
	}
	if sm.RightsHolder != testOwner || sm.AccessPolicy == nil || len(sm.AccessPolicy.Allow) != 1 || sm.AccessPolicy.Allow[0].Subject[0] != "public" {
		t.Errorf("v%d: rightsHolder %q accessPolicy %+v not kept", v, sm.RightsHolder, sm.AccessPolicy)
	}
	// Node-controlled fields (API.md §10 rule 4).
	if sm.Submitter != "public" {
		t.Errorf("v%d: submitter %q, want public (the caller)", v, sm.Submitter)
	}
	if sm.SerialVersion != 1 {
		t.Errorf("v%d: serialVersion %d, want 1", v, sm.SerialVersion)
	}
	if sm.DateUploaded.Before(c.before) || sm.DateUploaded.After(c.after) {
		t.Errorf("v%d: dateUploaded %s is not between %s and %s", v, sm.DateUploaded.Format(), c.before, c.after)
	}
	if !sm.DateSysMetadataModified.Equal(sm.DateUploaded.Time) {
		t.Errorf("v%d: dateSysMetadataModified %s, dateUploaded %s", v, sm.DateSysMetadataModified.Format(), sm.DateUploaded.Format())
	}
	if sm.OriginMemberNode != testNodeID || sm.AuthoritativeMemberNode != testNodeID {
		t.Errorf("v%d: origin %q authoritative %q, want %s", v, sm.OriginMemberNode, sm.AuthoritativeMemberNode, testNodeID)
	}
	if sm.Archived || sm.Obsoletes != "" || sm.ObsoletedBy != "" || len(sm.Replica) > 0 {
		t.Errorf("v%d: a new object is archived, in a chain or replicated: %+v", v, sm)
	}
	if v == 2 && (sm.SeriesID != want.SeriesID || sm.FileName != want.FileName || (sm.MediaType == nil) != (want.MediaType == nil)) {
		t.Errorf("v2: seriesId %q fileName %q mediaType %+v, want %q %q %+v", sm.SeriesID, sm.FileName, sm.MediaType, want.SeriesID, want.FileName, want.MediaType)
	}
	if v == 1 && (sm.SeriesID != "" || sm.FileName != "" || sm.MediaType != nil) {
		t.Errorf("v1: system metadata has v2 fields: %+v", sm)
	}
}

// checkObjectHeaders checks the describe headers (API.md §5.2), sent by get too.
func checkObjectHeaders(t *testing.T, r *response, c *created, sm *adapter.SystemMetadata, v int) {
	t.Helper()
	h := r.Header
	want := map[string]string{
		"Content-Type":          c.ctype,
		"Content-Length":        strconv.Itoa(len(c.data)),
		"DataONE-FormatId":      c.sm.FormatID,
		"DataONE-ObjectFormat":  c.sm.FormatID,
		"DataONE-Checksum":      c.sm.Checksum.Algorithm + "," + checksum(c.sm.Checksum.Algorithm, c.data),
		"DataONE-SerialVersion": "1",
	}
	if sm != nil {
		want["DataONE-SerialVersion"] = strconv.FormatUint(sm.SerialVersion, 10)
	}
	for k, w := range want {
		if got := h.Get(k); got != w {
			t.Errorf("%s: %q, want %q", k, got, w)
		}
	}
	lm, err := http.ParseTime(h.Get("Last-Modified"))
	if err != nil {
		t.Errorf("Last-Modified %q is not an HTTP date: %v", h.Get("Last-Modified"), err)
	} else if sm != nil && !lm.Equal(sm.DateSysMetadataModified.Truncate(time.Second)) {
		t.Errorf("Last-Modified %s, dateSysMetadataModified %s", lm, sm.DateSysMetadataModified.Format())
	}
	sid := h.Get("DataONE-SeriesId")
	switch {
	case v == 1 && sid != "":
		t.Errorf("v1 answer names a series: DataONE-SeriesId %q", sid)
	case v == 2 && sid != url.PathEscape(c.sm.SeriesID):
		t.Errorf("DataONE-SeriesId %q, want %q", sid, c.sm.SeriesID)
	}
}

// 3. create errors: each answers the right exception and leaves no trace.
func TestCreateErrorsLeaveNoTrace(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	good := genBytes(1, 5000)
	goodSM := newSysmeta("good", "text/plain", "MD5", good)
	create(t, s, goodSM, good)
	goodSID := genBytes(2, 100)
	goodSIDSM := newSysmeta("good-with-series", "text/plain", "MD5", goodSID)
	goodSIDSM.SeriesID = "good-series"
	create(t, s, goodSIDSM, goodSID)
	baseline := countFiles(t, s.DataDir)
	if baseline != 2 {
		t.Fatalf("%d files under the object store after two creates", baseline)
	}

	data := genBytes(3, 7000)
	sm := func(pid string, change func(sm *adapter.SystemMetadata)) *adapter.SystemMetadata {
		m := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
		if change != nil {
			change(m)
		}
		return m
	}
	obj := func() part { return filePart("object", "content.bin", bytes.NewReader(data)) }
	cases := []struct {
		name    string
		v       int    // API version (2 when 0)
		path    string // "" for /object
		parts   []part
		body    io.Reader // a raw body instead of parts
		ctype   string    // its Content-Type
		code    int
		kind    string
		missing []string // identifiers that must stay unknown
	}{
		{name: "duplicate pid", code: 409, kind: "IdentifierNotUnique",
			parts: createParts(sm("good", nil), bytes.NewReader(data), false)},
		{name: "pid in use as a series id", code: 409, kind: "IdentifierNotUnique",
			parts: createParts(sm("good-series", nil), bytes.NewReader(data), false)},
		{name: "series id in use as a pid", code: 409, kind: "IdentifierNotUnique", missing: []string{"err-sid-pid"},
			parts: createParts(sm("err-sid-pid", func(m *adapter.SystemMetadata) { m.SeriesID = "good" }), bytes.NewReader(data), false)},
		{name: "series id in use by another series", code: 409, kind: "IdentifierNotUnique", missing: []string{"err-sid-taken"},
			parts: createParts(sm("err-sid-taken", func(m *adapter.SystemMetadata) { m.SeriesID = "good-series" }), bytes.NewReader(data), true)},
		{name: "wrong checksum, object first", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-sum-1"},
			parts: createParts(sm("err-sum-1", func(m *adapter.SystemMetadata) { m.Checksum.Value = checksum("SHA-256", good) }), bytes.NewReader(data), false)},
		{name: "wrong checksum, sysmeta first", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-sum-2"},
			parts: createParts(sm("err-sum-2", func(m *adapter.SystemMetadata) { m.Checksum.Value = checksum("SHA-256", good) }), bytes.NewReader(data), true)},
		{name: "wrong SHA-512 checksum, object first", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-sum-3"},
			parts: createParts(sm("err-sum-3", func(m *adapter.SystemMetadata) {
				m.Checksum = adapter.Checksum{Algorithm: "SHA-512", Value: checksum("SHA-512", good)}
			}), bytes.NewReader(data), false)},
		{name: "wrong checksum on v1", v: 1, code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-sum-4"},
			parts: []part{textPart("pid", "err-sum-4"), obj(), docPart("sysmeta", sm("err-sum-4", func(m *adapter.SystemMetadata) { m.Checksum.Value = checksum("SHA-256", good) }), 1)}},
		{name: "unsupported checksum algorithm", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-alg"},
			parts: createParts(sm("err-alg", func(m *adapter.SystemMetadata) { m.Checksum.Algorithm = "CRC32" }), bytes.NewReader(data), false)},
		{name: "size too large", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-size-1"},
			parts: createParts(sm("err-size-1", func(m *adapter.SystemMetadata) { m.Size++ }), bytes.NewReader(data), false)},
		{name: "size too small", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-size-2"},
			parts: createParts(sm("err-size-2", func(m *adapter.SystemMetadata) { m.Size-- }), bytes.NewReader(data), true)},
		{name: "formatId not in the official list", code: 400, kind: "UnsupportedType", missing: []string{"err-format"},
			parts: createParts(sm("err-format", func(m *adapter.SystemMetadata) { m.FormatID = "application/x-no-such-format" }), bytes.NewReader(data), false)},
		{name: "whitespace in pid", code: 400, kind: "InvalidRequest", missing: []string{"err-pid-x"},
			parts: createParts(sm("err pid", nil), bytes.NewReader(data), false)},
		{name: "pid part differs from sysmeta identifier", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-pid-a", "err-pid-b"},
			parts: []part{textPart("pid", "err-pid-a"), obj(), docPart("sysmeta", sm("err-pid-b", nil))}},
		{name: "pid part differs from the path", path: objectPath(2, "err-path-a"), code: 400, kind: "InvalidRequest", missing: []string{"err-path-a", "err-path-b"},
			parts: []part{textPart("pid", "err-path-b"), obj(), docPart("sysmeta", sm("err-path-b", nil))}},
		{name: "missing pid", code: 400, kind: "InvalidRequest", missing: []string{"err-nopid"},
			parts: []part{obj(), docPart("sysmeta", sm("err-nopid", nil))}},
		{name: "missing object", code: 400, kind: "InvalidRequest", missing: []string{"err-noobject"},
			parts: []part{textPart("pid", "err-noobject"), docPart("sysmeta", sm("err-noobject", nil))}},
		{name: "missing sysmeta", code: 400, kind: "InvalidRequest", missing: []string{"err-nosysmeta"},
			parts: []part{textPart("pid", "err-nosysmeta"), obj()}},
		{name: "two object parts", code: 400, kind: "InvalidRequest", missing: []string{"err-twoobjects"},
			parts: []part{textPart("pid", "err-twoobjects"), obj(), obj(), docPart("sysmeta", sm("err-twoobjects", nil))}},
		{name: "malformed sysmeta", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-badxml"},
			parts: []part{textPart("pid", "err-badxml"), obj(), filePart("sysmeta", "sysmeta.xml", strings.NewReader("<d2:systemMetadata xmlns:d2="))}},
		{name: "non-multipart body", code: 400, kind: "InvalidRequest",
			body: strings.NewReader("pid=err-form"), ctype: "application/x-www-form-urlencoded", missing: []string{"err-form"}},
		{name: "XML body", code: 400, kind: "InvalidRequest",
			body: strings.NewReader("<a/>"), ctype: "text/xml", missing: []string{"err-form"}},
		{name: "no body", code: 400, kind: "InvalidRequest"},
		{name: "sysmeta with obsoletes", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-obsoletes"},
			parts: createParts(sm("err-obsoletes", func(m *adapter.SystemMetadata) { m.Obsoletes = "good" }), bytes.NewReader(data), false)},
		{name: "sysmeta with obsoletedBy", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-obsoletedby"},
			parts: createParts(sm("err-obsoletedby", func(m *adapter.SystemMetadata) { m.ObsoletedBy = "good" }), bytes.NewReader(data), false)},
		{name: "sysmeta archived", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-archived"},
			parts: createParts(sm("err-archived", func(m *adapter.SystemMetadata) { m.Archived = true }), bytes.NewReader(data), false)},
		{name: "archived on v1", v: 1, code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-archived-v1"},
			parts: []part{textPart("pid", "err-archived-v1"), obj(), docPart("sysmeta", sm("err-archived-v1", func(m *adapter.SystemMetadata) { m.Archived = true }), 1)}},
		{name: "empty rightsHolder", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-owner"},
			parts: createParts(sm("err-owner", func(m *adapter.SystemMetadata) { m.RightsHolder = " " }), bytes.NewReader(data), false)},
		{name: "unknown permission in the access policy", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-perm"},
			parts: createParts(sm("err-perm", func(m *adapter.SystemMetadata) {
				m.AccessPolicy.Allow = append(m.AccessPolicy.Allow, adapter.AccessRule{Subject: []string{"CN=x"}, Permission: []adapter.Permission{"admin"}})
			}), bytes.NewReader(data), false)},
		{name: "access rule without a subject", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-rule"},
			parts: createParts(sm("err-rule", func(m *adapter.SystemMetadata) {
				m.AccessPolicy.Allow = append(m.AccessPolicy.Allow, adapter.AccessRule{Permission: []adapter.Permission{"read"}})
			}), bytes.NewReader(data), true)},
		{name: "series id equal to the pid", code: 400, kind: "InvalidSystemMetadata", missing: []string{"err-sid-self"},
			parts: createParts(sm("err-sid-self", func(m *adapter.SystemMetadata) { m.SeriesID = "err-sid-self" }), bytes.NewReader(data), false)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.v
			if v == 0 {
				v = 2
			}
			path := c.path
			if path == "" {
				path = mnp(v, "/object")
			}
			var r *response
			if c.parts != nil {
				r = s.send(t, http.MethodPost, path, false, c.parts...)
			} else {
				var hdr []string
				if c.ctype != "" {
					hdr = []string{"Content-Type", c.ctype}
				}
				r = s.do(t, http.MethodPost, path, c.body, hdr...)
			}
			wantError(t, r, c.code, c.kind)
			for _, id := range c.missing {
				wantNotFound(t, s, 2, id)
			}
			if n := countFiles(t, s.DataDir); n != baseline {
				t.Errorf("%d files under the object store, want %d", n, baseline)
			}
			if r := s.get(t, objectPath(2, "good")); !bytes.Equal(r.Body, good) {
				t.Error("the existing object changed")
			}
		})
	}
	if l := listObjects(t, s, 2, ""); l.Total != 2 {
		t.Errorf("listObjects total %d after the failed creates, want 2: %v", l.Total, pids(l))
	}

	t.Run("larger than maxUploadSize", func(t *testing.T) {
		small := startServer(t, "", "D1BRIDGE_MAXUPLOADSIZE=1000")
		for _, c := range []struct {
			name         string
			size         int64
			sysmetaFirst bool
		}{
			{"1001 bytes, object first", 1001, false},
			{"1001 bytes, sysmeta first", 1001, true},
			{"5 MiB streamed", 5 << 20, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				pid := fmt.Sprintf("too-large-%d-%t", c.size, c.sysmetaFirst)
				m := sysmetaFor(pid, "application/octet-stream", "MD5", uint64(c.size), genChecksum("MD5", 7, c.size))
				r := small.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(m, newGenReader(7, c.size), c.sysmetaFirst)...)
				wantError(t, r, http.StatusRequestEntityTooLarge, "InsufficientResources")
				wantNotFound(t, small, 2, pid)
				if n := countFiles(t, small.DataDir); n != 0 {
					t.Errorf("%d files under the object store, want 0", n)
				}
			})
		}
		t.Run("exactly 1000 bytes", func(t *testing.T) {
			d := genBytes(8, 1000)
			create(t, small, newSysmeta("just-fits", "application/octet-stream", "MD5", d), d)
		})
	})
}

// 4. update: chains, series ids, errors.
func TestUpdate(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d1, d2, d3 := genBytes(41, 3000), genBytes(42, 4000), genBytes(43, 5000)
	sm1 := newSysmeta("upd-1", "text/plain", "MD5", d1, all...)
	sm1.SeriesID = "upd-series"
	create(t, s, sm1, d1)
	before := getMeta(t, s, 2, "upd-1")

	// update sends an update of target; the sysmeta part comes last.
	update := func(t *testing.T, v int, target string, sm *adapter.SystemMetadata, data []byte, mixed bool) *response {
		t.Helper()
		return s.send(t, http.MethodPut, objectPath(v, target), mixed,
			textPart("newPid", sm.Identifier), filePart("object", "content.bin", bytes.NewReader(data)), docPart("sysmeta", sm, v))
	}

	t.Run("update", func(t *testing.T) {
		sm2 := newSysmeta("upd-2", "text/csv", "SHA-1", d2, all...)
		sm2.SeriesID = "upd-series" // keeps the series
		if !wantIdentifier(t, update(t, 2, "upd-1", sm2, d2, false), "upd-2") {
			t.FailNow()
		}
		oldM, newM := getMeta(t, s, 2, "upd-1"), getMeta(t, s, 2, "upd-2")
		if oldM.ObsoletedBy != "upd-2" || newM.Obsoletes != "upd-1" {
			t.Errorf("upd-1 obsoletedBy %q, upd-2 obsoletes %q", oldM.ObsoletedBy, newM.Obsoletes)
		}
		if !oldM.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
			t.Errorf("the old object's dateSysMetadataModified did not move: %s then %s", before.DateSysMetadataModified.Format(), oldM.DateSysMetadataModified.Format())
		}
		if oldM.SerialVersion <= before.SerialVersion {
			t.Errorf("the old object's serialVersion %d did not grow from %d", oldM.SerialVersion, before.SerialVersion)
		}
		if newM.SeriesID != "upd-series" || newM.SerialVersion != 1 || newM.Submitter != "public" {
			t.Errorf("new object: %+v", newM)
		}
		l := listObjects(t, s, 2, "")
		dates := map[string]adapter.Time{}
		for _, oi := range l.ObjectInfo {
			dates[oi.Identifier] = oi.DateSysMetadataModified
		}
		if !dates["upd-1"].Equal(oldM.DateSysMetadataModified.Time) || !dates["upd-2"].Equal(newM.DateSysMetadataModified.Time) {
			t.Errorf("listObjects dates %v, want upd-1 %s and upd-2 %s", dates, oldM.DateSysMetadataModified.Format(), newM.DateSysMetadataModified.Format())
		}
		// The old object stays readable.
		if r := s.get(t, objectPath(2, "upd-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d1) {
			t.Error("the obsoleted object's bytes changed")
		}
		if h := s.head(t, objectPath(2, "upd-1")).Header; h.Get("DataONE-ObsoletedBy") != "upd-2" {
			t.Errorf("describe upd-1: DataONE-ObsoletedBy %q", h.Get("DataONE-ObsoletedBy"))
		}
		if h := s.head(t, objectPath(2, "upd-2")).Header; h.Get("DataONE-Obsoletes") != "upd-1" {
			t.Errorf("describe upd-2: DataONE-Obsoletes %q", h.Get("DataONE-Obsoletes"))
		}
		if got := events(logRecords(t, s, 2, "event=update")); !slices.Contains(got, "upd-1 update") {
			t.Errorf("update events %v: none on the obsoleted object upd-1", got)
		}
	})

	files := countFiles(t, s.DataDir)
	t.Run("errors", func(t *testing.T) {
		ro := genBytes(44, 100)
		create(t, s, newSysmeta("upd-readonly", "text/plain", "MD5", ro), ro)
		files++
		for _, c := range []struct {
			name   string
			target string
			sm     *adapter.SystemMetadata
			code   int
			kind   string
		}{
			{"obsoleted object", "upd-1", newSysmeta("upd-x1", "text/plain", "MD5", d3, all...), 400, "InvalidRequest"},
			{"missing object", "upd-missing", newSysmeta("upd-x2", "text/plain", "MD5", d3, all...), 404, "NotFound"},
			{"obsoletes another object", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x3", "text/plain", "MD5", d3, all...)
				m.Obsoletes = "upd-readonly"
				return m
			}(), 400, "InvalidSystemMetadata"},
			{"newPid in use", "upd-2", newSysmeta("upd-1", "text/plain", "MD5", d3, all...), 409, "IdentifierNotUnique"},
			{"wrong checksum", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x4", "text/plain", "MD5", d3, all...)
				m.Checksum.Value = checksum("MD5", d1)
				return m
			}(), 400, "InvalidSystemMetadata"},
			{"unknown format", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x5", "text/plain", "MD5", d3, all...)
				m.FormatID = "no/such-format"
				return m
			}(), 400, "UnsupportedType"},
			{"series id of another series", "upd-2", func() *adapter.SystemMetadata {
				m := newSysmeta("upd-x6", "text/plain", "MD5", d3, all...)
				m.SeriesID = "upd-1"
				return m
			}(), 409, "IdentifierNotUnique"},
			{"no write permission", "upd-readonly", newSysmeta("upd-x7", "text/plain", "MD5", d3, all...), 401, "InvalidToken"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, update(t, 2, c.target, c.sm, d3, false), c.code, c.kind)
				if c.sm.Identifier != "upd-1" {
					wantNotFound(t, s, 2, c.sm.Identifier)
				}
				if n := countFiles(t, s.DataDir); n != files {
					t.Errorf("%d files under the object store, want %d", n, files)
				}
			})
		}
		t.Run("missing newPid", func(t *testing.T) {
			r := s.send(t, http.MethodPut, objectPath(2, "upd-2"), false,
				filePart("object", "content.bin", bytes.NewReader(d3)), docPart("sysmeta", newSysmeta("upd-x8", "text/plain", "MD5", d3, all...)))
			wantError(t, r, http.StatusBadRequest, "InvalidRequest")
			wantNotFound(t, s, 2, "upd-x8")
		})
		if m := getMeta(t, s, 2, "upd-2"); m.ObsoletedBy != "" || m.SerialVersion != 1 {
			t.Errorf("failed updates changed upd-2: %+v", m)
		}
	})

	t.Run("by series id", func(t *testing.T) {
		sm3 := newSysmeta("upd-3", "text/plain", "SHA-256", d3, all...)
		sm3.SeriesID = "upd-series"
		sm3.Obsoletes = "upd-2" // may be given when it names the object updated
		if !wantIdentifier(t, update(t, 2, "upd-series", sm3, d3, true), "upd-3") {
			t.FailNow()
		}
		if m := getMeta(t, s, 2, "upd-2"); m.ObsoletedBy != "upd-3" {
			t.Errorf("upd-2 obsoletedBy %q, want upd-3", m.ObsoletedBy)
		}
		// v2 resolves the SID to the head, v1 does not know it.
		r := s.get(t, objectPath(2, "upd-series"))
		if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d3) {
			t.Error("v2 get by SID did not return the head's bytes")
		}
		if m := getMeta(t, s, 2, "upd-series"); m.Identifier != "upd-3" {
			t.Errorf("v2 getSystemMetadata by SID: %s, want upd-3", m.Identifier)
		}
		h := s.head(t, objectPath(2, "upd-series"))
		if wantStatus(t, h, http.StatusOK) && h.Header.Get("DataONE-Checksum") != "SHA-256,"+checksum("SHA-256", d3) {
			t.Errorf("v2 describe by SID: DataONE-Checksum %q", h.Header.Get("DataONE-Checksum"))
		}
		wantNotFound(t, s, 1, "upd-series")
		wantError(t, s.get(t, checksumPath(1, "upd-series")), http.StatusNotFound, "NotFound")
		d4 := genBytes(45, 10)
		wantError(t, update(t, 1, "upd-series", newSysmeta("upd-x9", "text/plain", "MD5", d4, all...), d4, false), http.StatusNotFound, "NotFound")

		l := listObjects(t, s, 2, "identifier=upd-series")
		if got := pids(l); l.Total != 3 || !slices.Equal(got, []string{"upd-1", "upd-2", "upd-3"}) {
			t.Errorf("v2 listObjects by SID: total %d %v, want the 3 members", l.Total, got)
		}
		if l := listObjects(t, s, 1, "identifier=upd-series"); l.Total != 0 || l.Count != 0 {
			t.Errorf("v1 listObjects by SID: total %d %v, want none", l.Total, pids(l))
		}
		got := events(logRecords(t, s, 2, "idFilter=upd-series"))
		for _, want := range []string{"upd-1 create", "upd-1 update", "upd-2 update"} {
			if !slices.Contains(got, want) {
				t.Errorf("v2 getLogRecords(idFilter=SID) %v lacks %q", got, want)
			}
		}
		if l := logRecords(t, s, 1, "pidFilter=upd-series"); l.Total != 0 {
			t.Errorf("v1 getLogRecords(pidFilter=SID) %v, want none: v1 has no series ids", events(l))
		}
		if l := listObjects(t, s, 1, "identifier=upd-2"); l.Total != 1 || pids(l)[0] != "upd-2" {
			t.Errorf("v1 listObjects by PID: %v", pids(l))
		}
	})

	t.Run("the head moves on an update by PID", func(t *testing.T) {
		// Read by SID first, so that any remembered resolution would be stale.
		for _, v := range []int{2} {
			if m := getMeta(t, s, v, "upd-series"); m.Identifier != "upd-3" {
				t.Fatalf("the head is %s", m.Identifier)
			}
			wantStatus(t, s.get(t, objectPath(v, "upd-series")), http.StatusOK)
			wantStatus(t, s.head(t, objectPath(v, "upd-series")), http.StatusOK)
		}
		d5 := genBytes(50, 321)
		sm5 := newSysmeta("upd-5", "text/plain", "MD5", d5, all...)
		sm5.SeriesID = "upd-series"
		if !wantIdentifier(t, update(t, 2, "upd-3", sm5, d5, false), "upd-5") {
			t.FailNow()
		}
		if m := getMeta(t, s, 2, "upd-series"); m.Identifier != "upd-5" {
			t.Errorf("getSystemMetadata by SID after the update: %s, want upd-5", m.Identifier)
		}
		if r := s.get(t, objectPath(2, "upd-series")); !bytes.Equal(r.Body, d5) {
			t.Error("get by SID after the update: not the new head's bytes")
		}
		if h := s.head(t, objectPath(2, "upd-series")); h.Header.Get("DataONE-Checksum") != "MD5,"+checksum("MD5", d5) {
			t.Errorf("describe by SID after the update: %q", h.Header.Get("DataONE-Checksum"))
		}
	})

	t.Run("a new series", func(t *testing.T) {
		a, b := genBytes(51, 100), genBytes(52, 200)
		create(t, s, newSysmeta("upd-nosid", "text/plain", "MD5", a, all...), a)
		sm := newSysmeta("upd-newsid", "text/plain", "MD5", b, all...)
		sm.SeriesID = "upd-fresh-series"
		if wantIdentifier(t, update(t, 2, "upd-nosid", sm, b, false), "upd-newsid") {
			if m := getMeta(t, s, 2, "upd-fresh-series"); m.Identifier != "upd-newsid" {
				t.Errorf("the new series resolves to %s", m.Identifier)
			}
		}
	})

	t.Run("v1", func(t *testing.T) {
		a, b := genBytes(48, 600), genBytes(49, 700)
		create(t, s, newSysmeta("upd-v1-b", "text/plain", "MD5", a, all...), a)
		if !wantIdentifier(t, update(t, 1, "upd-v1-b", newSysmeta("upd-v1-c", "text/plain", "SHA-1", b, all...), b, false), "upd-v1-c") {
			return
		}
		if m := getMeta(t, s, 1, "upd-v1-b"); m.ObsoletedBy != "upd-v1-c" {
			t.Errorf("v1: obsoletedBy %q", m.ObsoletedBy)
		}
		if m := getMeta(t, s, 1, "upd-v1-c"); m.Obsoletes != "upd-v1-b" {
			t.Errorf("v1: obsoletes %q", m.Obsoletes)
		}
	})
}

// 5. archive.
func TestArchive(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(51, 2500)
	create(t, s, newSysmeta("arch-1", "text/plain", "MD5", d, all...), d)
	create(t, s, newSysmeta("arch-2", "text/plain", "MD5", d, all...), d)
	create(t, s, newSysmeta("arch-readonly", "text/plain", "MD5", d), d)
	sidSM := newSysmeta("arch-sid-1", "text/plain", "MD5", d, all...)
	sidSM.SeriesID = "arch-series"
	create(t, s, sidSM, d)
	before := getMeta(t, s, 2, "arch-1")

	t.Run("archive", func(t *testing.T) {
		if !wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-1"), nil), "arch-1") {
			t.FailNow()
		}
		m := getMeta(t, s, 2, "arch-1")
		if !m.Archived || m.SerialVersion != before.SerialVersion+1 || !m.DateSysMetadataModified.After(before.DateSysMetadataModified.Time) {
			t.Errorf("after archive: archived %t serialVersion %d dateSysMetadataModified %s (was %d, %s)",
				m.Archived, m.SerialVersion, m.DateSysMetadataModified.Format(), before.SerialVersion, before.DateSysMetadataModified.Format())
		}
		if r := s.get(t, objectPath(2, "arch-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d) {
			t.Error("an archived object's bytes changed")
		}
		wantStatus(t, s.head(t, objectPath(1, "arch-1")), http.StatusOK)
		if m := getMeta(t, s, 1, "arch-1"); !m.Archived {
			t.Error("v1 system metadata is not archived")
		}
		if h := s.head(t, objectPath(2, "arch-1")).Header; h.Get("DataONE-SerialVersion") != strconv.FormatUint(m.SerialVersion, 10) ||
			h.Get("Last-Modified") != m.DateSysMetadataModified.UTC().Format(http.TimeFormat) {
			t.Errorf("describe after archive: serial version %q, Last-Modified %q", h.Get("DataONE-SerialVersion"), h.Get("Last-Modified"))
		}
		l := listObjects(t, s, 2, "identifier=arch-1")
		if l.Total != 1 || !l.ObjectInfo[0].DateSysMetadataModified.Equal(m.DateSysMetadataModified.Time) {
			t.Errorf("listObjects of the archived object: %+v", l)
		}
	})
	t.Run("update of an archived object", func(t *testing.T) {
		n := genBytes(52, 10)
		r := s.send(t, http.MethodPut, objectPath(2, "arch-1"), false,
			textPart("newPid", "arch-1-next"), filePart("object", "o", bytes.NewReader(n)), docPart("sysmeta", newSysmeta("arch-1-next", "text/plain", "MD5", n, all...)))
		wantError(t, r, http.StatusBadRequest, "InvalidRequest")
		wantNotFound(t, s, 2, "arch-1-next")
	})
	t.Run("archive again", func(t *testing.T) {
		wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-1"), nil), "arch-1")
		if m := getMeta(t, s, 2, "arch-1"); !m.Archived || m.SerialVersion != before.SerialVersion+1 {
			t.Errorf("archiving again changed the object: %+v", m)
		}
	})
	t.Run("v1", func(t *testing.T) {
		wantIdentifier(t, s.do(t, http.MethodPut, mnp(1, "/archive/arch-2"), nil), "arch-2")
		if m := getMeta(t, s, 1, "arch-2"); !m.Archived {
			t.Error("not archived")
		}
	})
	t.Run("by series id", func(t *testing.T) {
		wantError(t, s.do(t, http.MethodPut, mnp(1, "/archive/arch-series"), nil), http.StatusNotFound, "NotFound")
		wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-series"), nil), "arch-sid-1")
		if m := getMeta(t, s, 2, "arch-sid-1"); !m.Archived {
			t.Error("not archived")
		}
	})
	t.Run("missing object", func(t *testing.T) {
		wantError(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-missing"), nil), http.StatusNotFound, "NotFound")
	})
	t.Run("no permission", func(t *testing.T) {
		wantError(t, s.do(t, http.MethodPut, mnp(2, "/archive/arch-readonly"), nil), http.StatusUnauthorized, "InvalidToken")
		if m := getMeta(t, s, 2, "arch-readonly"); m.Archived {
			t.Error("archived without the permission")
		}
	})
}

// 6. delete. It needs a trusted caller: on an ordinary instance public gets
// 401 InvalidToken; the admin instance (D1BRIDGE_NODE_ADMINISTRATORS=public)
// deletes.
func TestDelete(t *testing.T) {
	t.Parallel()
	d := genBytes(61, 3000)

	t.Run("untrusted caller", func(t *testing.T) {
		s := startServer(t, "")
		create(t, s, newSysmeta("del-keep", "text/plain", "MD5", d), d)
		for _, v := range []int{1, 2} {
			wantError(t, s.do(t, http.MethodDelete, objectPath(v, "del-keep"), nil), http.StatusUnauthorized, "InvalidToken")
			wantError(t, s.do(t, http.MethodDelete, objectPath(v, "del-missing"), nil), http.StatusUnauthorized, "InvalidToken")
		}
		if r := s.get(t, objectPath(2, "del-keep")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, d) {
			t.Error("the object changed")
		}
	})

	t.Run("administrator", func(t *testing.T) {
		s := startServer(t, "", adminEnv)
		for _, pid := range []string{"del-1", "del-2"} {
			create(t, s, newSysmeta(pid, "text/plain", "MD5", d), d)
		}
		sidSM := newSysmeta("del-sid-1", "text/plain", "MD5", d)
		sidSM.SeriesID = "del-series"
		create(t, s, sidSM, d)
		wantStatus(t, s.get(t, objectPath(2, "del-1")), http.StatusOK) // a read event
		files := countFiles(t, s.DataDir)

		if !wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "del-1"), nil), "del-1") {
			t.FailNow()
		}
		for _, v := range []int{1, 2} {
			wantError(t, s.get(t, objectPath(v, "del-1")), http.StatusNotFound, "NotFound")
			wantError(t, s.get(t, metaPath(v, "del-1")), http.StatusNotFound, "NotFound")
			wantError(t, s.get(t, checksumPath(v, "del-1")), http.StatusNotFound, "NotFound")
			r := s.head(t, objectPath(v, "del-1"))
			wantError(t, r, http.StatusNotFound, "NotFound")
			if len(r.Body) != 0 || r.Header.Get("DataONE-Exception-DetailCode") == "" {
				t.Errorf("describe after delete: body %q, headers %v", r.Body, r.Header)
			}
			if l := listObjects(t, s, v, "identifier=del-1"); l.Total != 0 {
				t.Errorf("v%d: the deleted object is listed", v)
			}
		}
		if n := countFiles(t, s.DataDir); n != files-1 {
			t.Errorf("%d files under the object store after delete, want %d", n, files-1)
		}
		got := events(logRecords(t, s, 2, "idFilter=del-1"))
		for _, want := range []string{"del-1 create", "del-1 read", "del-1 delete"} {
			if !slices.Contains(got, want) {
				t.Errorf("the log of del-1 %v lacks %q", got, want)
			}
		}
		if l := logRecords(t, s, 1, "event=delete"); l.Total != 1 || l.LogEntry[0].Identifier != "del-1" {
			t.Errorf("v1 delete events: %v", events(l))
		}

		t.Run("again", func(t *testing.T) {
			wantError(t, s.do(t, http.MethodDelete, objectPath(2, "del-1"), nil), http.StatusNotFound, "NotFound")
		})
		t.Run("v1", func(t *testing.T) {
			wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(1, "del-2"), nil), "del-2")
			wantNotFound(t, s, 1, "del-2")
		})
		t.Run("by series id", func(t *testing.T) {
			wantError(t, s.do(t, http.MethodDelete, objectPath(1, "del-series"), nil), http.StatusNotFound, "NotFound")
			wantIdentifier(t, s.do(t, http.MethodDelete, objectPath(2, "del-series"), nil), "del-sid-1")
			wantNotFound(t, s, 2, "del-sid-1")
			wantNotFound(t, s, 2, "del-series")
		})
		if n := countFiles(t, s.DataDir); n != 0 {
			t.Errorf("%d files left under the object store, want 0", n)
		}
	})
}

// 7. updateSystemMetadata (v2 only).
func TestUpdateSystemMetadata(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	all := []adapter.Permission{adapter.PermChangePermission}
	d := genBytes(71, 1234)
	create(t, s, newSysmeta("usm-1", "text/plain", "SHA-1", d, all...), d)
	create(t, s, newSysmeta("usm-readonly", "text/plain", "SHA-1", d), d)
	create(t, s, newSysmeta("usm-archived", "text/plain", "SHA-1", d, all...), d)
	sidSM := newSysmeta("usm-sid-1", "text/plain", "SHA-1", d, all...)
	sidSM.SeriesID = "usm-series"
	create(t, s, sidSM, d)
	wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/usm-archived"), nil), "usm-archived")

	put := func(t *testing.T, v int, pid string, sm *adapter.SystemMetadata) *response {
		t.Helper()
		parts := []part{docPart("sysmeta", sm)}
		if pid != "" {
			parts = append([]part{textPart("pid", pid)}, parts...)
		}
		return s.send(t, http.MethodPut, mnp(v, "/meta"), false, parts...)
	}
	old := getMeta(t, s, 2, "usm-1")

	t.Run("change", func(t *testing.T) {
		next := old.Clone()
		next.RightsHolder = "CN=new owner,O=d1bridge,DC=example,DC=org"
		next.AccessPolicy.Allow = append(next.AccessPolicy.Allow, adapter.AccessRule{Subject: []string{"CN=reader,DC=example,DC=org"}, Permission: []adapter.Permission{adapter.PermRead}})
		next.FileName = "renamed.txt"
		next.FormatID = "text/csv"
		r := put(t, 2, "usm-1", next)
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		m := getMeta(t, s, 2, "usm-1")
		if m.RightsHolder != next.RightsHolder || len(m.AccessPolicy.Allow) != 2 || m.FileName != "renamed.txt" || m.FormatID != "text/csv" {
			t.Errorf("the change did not take: %+v", m)
		}
		if m.SerialVersion != old.SerialVersion+1 || !m.DateSysMetadataModified.After(old.DateSysMetadataModified.Time) {
			t.Errorf("serialVersion %d dateSysMetadataModified %s, was %d %s", m.SerialVersion, m.DateSysMetadataModified.Format(), old.SerialVersion, old.DateSysMetadataModified.Format())
		}
		if m.Size != old.Size || m.Checksum != old.Checksum || !m.DateUploaded.Equal(old.DateUploaded.Time) || m.Submitter != old.Submitter {
			t.Errorf("fields that may not change changed: %+v", m)
		}
		g := s.get(t, objectPath(2, "usm-1"))
		if cd := g.Header.Get("Content-Disposition"); !strings.Contains(cd, "renamed.txt") {
			t.Errorf("Content-Disposition %q does not use the new fileName", cd)
		}
		if l := listObjects(t, s, 2, "identifier=usm-1"); l.Total != 1 || !l.ObjectInfo[0].DateSysMetadataModified.Equal(m.DateSysMetadataModified.Time) || l.ObjectInfo[0].FormatID != "text/csv" {
			t.Errorf("listObjects does not show the change: %+v", l.ObjectInfo)
		}
		t.Run("stale dateSysMetadataModified", func(t *testing.T) {
			stale := next.Clone()
			stale.FileName = "stale.txt"
			wantError(t, put(t, 2, "usm-1", stale), http.StatusBadRequest, "InvalidRequest")
			if got := getMeta(t, s, 2, "usm-1"); got.FileName != "renamed.txt" || got.SerialVersion != m.SerialVersion {
				t.Errorf("a stale update changed the object: %+v", got)
			}
		})
		t.Run("without the pid part", func(t *testing.T) {
			n := m.Clone()
			n.FileName = "again.txt"
			wantStatus(t, put(t, 2, "", n), http.StatusOK)
		})
	})

	fresh := func() *adapter.SystemMetadata { return getMeta(t, s, 2, "usm-1") }
	for _, c := range []struct {
		name   string
		pid    string
		change func(m *adapter.SystemMetadata)
		code   int
		kind   string
	}{
		{"size", "usm-1", func(m *adapter.SystemMetadata) { m.Size++ }, 400, "InvalidSystemMetadata"},
		{"checksum", "usm-1", func(m *adapter.SystemMetadata) { m.Checksum.Value = checksum("SHA-1", []byte("other")) }, 400, "InvalidSystemMetadata"},
		{"obsoletedBy", "usm-1", func(m *adapter.SystemMetadata) { m.ObsoletedBy = "usm-readonly" }, 400, "InvalidSystemMetadata"},
		{"unknown format", "usm-1", func(m *adapter.SystemMetadata) { m.FormatID = "no/such-format" }, 400, "InvalidSystemMetadata"},
		{"empty rightsHolder", "usm-1", func(m *adapter.SystemMetadata) { m.RightsHolder = "" }, 400, "InvalidSystemMetadata"},
		{"unknown permission", "usm-1", func(m *adapter.SystemMetadata) {
			m.AccessPolicy.Allow[0].Permission = []adapter.Permission{"owner"}
		}, 400, "InvalidSystemMetadata"},
		{"series id given for a pid", "usm-series", func(m *adapter.SystemMetadata) { m.Identifier = "usm-series" }, 400, "InvalidRequest"},
		{"pid part differs", "usm-readonly", nil, 400, "InvalidSystemMetadata"},
		{"unknown pid", "usm-missing", func(m *adapter.SystemMetadata) { m.Identifier = "usm-missing" }, 400, "InvalidRequest"},
		{"whitespace pid", "usm missing", func(m *adapter.SystemMetadata) { m.Identifier = "usm missing" }, 400, "InvalidRequest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := fresh()
			if c.change != nil {
				c.change(m)
			}
			wantError(t, put(t, 2, c.pid, m), c.code, c.kind)
			if got := fresh(); got.SerialVersion != m.SerialVersion && c.change != nil && m.Identifier == "usm-1" {
				t.Errorf("a refused update changed the object: serialVersion %d", got.SerialVersion)
			}
		})
	}
	t.Run("node-controlled fields", func(t *testing.T) {
		m := fresh()
		n := m.Clone()
		n.Submitter, n.OriginMemberNode, n.AuthoritativeMemberNode = "CN=other,DC=example,DC=org", "urn:node:other", "urn:node:other"
		n.DateUploaded = adapter.NewTime(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
		n.SerialVersion = 99
		n.Replica = []adapter.Replica{{ReplicaMemberNode: "urn:node:other", ReplicationStatus: "completed", ReplicaVerified: adapter.Now()}}
		if wantStatus(t, put(t, 2, "usm-1", n), http.StatusOK) {
			got := fresh()
			if got.Submitter != m.Submitter || got.OriginMemberNode != testNodeID || got.AuthoritativeMemberNode != testNodeID ||
				!got.DateUploaded.Equal(m.DateUploaded.Time) || got.SerialVersion != m.SerialVersion+1 || len(got.Replica) != 0 {
				t.Errorf("updateSystemMetadata took node-controlled fields: %+v", got)
			}
		}
	})
	t.Run("series id", func(t *testing.T) {
		m := fresh()
		m.SeriesID = "usm-new-series"
		wantError(t, put(t, 2, "usm-1", m), http.StatusBadRequest, "InvalidSystemMetadata")
		wantError(t, s.get(t, metaPath(2, "usm-new-series")), http.StatusNotFound, "NotFound")
	})
	t.Run("archive through it", func(t *testing.T) {
		create(t, s, newSysmeta("usm-to-archive", "text/plain", "SHA-1", d, all...), d)
		m := getMeta(t, s, 2, "usm-to-archive")
		m.Archived = true
		if wantStatus(t, put(t, 2, "usm-to-archive", m), http.StatusOK) && !getMeta(t, s, 2, "usm-to-archive").Archived {
			t.Error("not archived")
		}
	})
	t.Run("rights taken away", func(t *testing.T) {
		create(t, s, newSysmeta("usm-revoke", "text/plain", "SHA-1", d, all...), d)
		m := getMeta(t, s, 2, "usm-revoke")
		m.AccessPolicy.Allow[0].Permission = []adapter.Permission{adapter.PermRead}
		if !wantStatus(t, put(t, 2, "usm-revoke", m), http.StatusOK) {
			return
		}
		m = getMeta(t, s, 2, "usm-revoke")
		m.FileName = "not-allowed.txt"
		wantError(t, put(t, 2, "usm-revoke", m), http.StatusUnauthorized, "InvalidToken")
		wantStatus(t, s.get(t, objectPath(2, "usm-revoke")), http.StatusOK)
	})
	t.Run("unarchive", func(t *testing.T) {
		m := getMeta(t, s, 2, "usm-archived")
		m.Archived = false
		wantError(t, put(t, 2, "usm-archived", m), http.StatusBadRequest, "InvalidRequest")
		if !getMeta(t, s, 2, "usm-archived").Archived {
			t.Error("unarchived")
		}
	})
	t.Run("no write permission", func(t *testing.T) {
		m := getMeta(t, s, 2, "usm-readonly")
		m.FileName = "x.txt"
		wantError(t, put(t, 2, "usm-readonly", m), http.StatusUnauthorized, "InvalidToken")
	})
	t.Run("missing sysmeta", func(t *testing.T) {
		wantError(t, s.send(t, http.MethodPut, mnp(2, "/meta"), false, textPart("pid", "usm-1")), http.StatusBadRequest, "InvalidRequest")
	})
	t.Run("not on v1", func(t *testing.T) {
		r := put(t, 1, "usm-1", fresh())
		if r.Status != http.StatusNotFound && r.Status != http.StatusMethodNotAllowed {
			t.Errorf("v1 PUT /meta: status %d, want 404 or 405", r.Status)
		}
		var e errorDoc
		if err := xml.Unmarshal(r.Body, &e); err != nil || e.Name == "" {
			t.Errorf("v1 PUT /meta: not a DataONE error: %s", r.Body)
		}
	})
}

// 8. listObjects: filters, paging and order, on v1 and v2.
func TestListObjects(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 12
	fmts := []string{"text/plain", "application/octet-stream", "text/csv"}
	var infos []adapter.ObjectInfo // in creation order
	for i := range n {
		d := genBytes(uint64(800+i), 100+i)
		sm := newSysmeta(fmt.Sprintf("list-%02d", i), fmts[i%3], "MD5", d, adapter.PermChangePermission)
		create(t, s, sm, d)
		m := getMeta(t, s, 2, sm.Identifier)
		infos = append(infos, adapter.ObjectInfo{Identifier: m.Identifier, FormatID: m.FormatID, Checksum: m.Checksum, DateSysMetadataModified: m.DateSysMetadataModified, Size: m.Size})
		// Distinct dates, so that date filters split the list exactly.
		for time.Now().Truncate(time.Millisecond).Equal(m.DateSysMetadataModified.Time) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
	ids := func(is []adapter.ObjectInfo) []string {
		var out []string
		for _, i := range is {
			out = append(out, i.Identifier)
		}
		return out
	}
	where := func(f func(i int, oi adapter.ObjectInfo) bool) []string {
		var out []string
		for i, oi := range infos {
			if f(i, oi) {
				out = append(out, oi.Identifier)
			}
		}
		return out
	}
	mid := infos[5].DateSysMetadataModified
	for _, v := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			for _, c := range []struct {
				name  string
				q     string
				want  []string // the page
				total int
				start int
			}{
				{"all", "", ids(infos), n, 0},
				{"fromDate inclusive", "fromDate=" + at(mid), where(func(i int, _ adapter.ObjectInfo) bool { return i >= 5 }), n - 5, 0},
				{"toDate exclusive", "toDate=" + at(mid), where(func(i int, _ adapter.ObjectInfo) bool { return i < 5 }), 5, 0},
				{"fromDate and toDate", "fromDate=" + at(infos[2].DateSysMetadataModified) + "&toDate=" + at(infos[7].DateSysMetadataModified),
					where(func(i int, _ adapter.ObjectInfo) bool { return i >= 2 && i < 7 }), 5, 0},
				{"fromDate with an offset", "fromDate=" + url.QueryEscape(mid.In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000-07:00")),
					where(func(i int, _ adapter.ObjectInfo) bool { return i >= 5 }), n - 5, 0},
				{"empty date range", "fromDate=" + at(mid) + "&toDate=" + at(mid), nil, 0, 0},
				{"bare dates", "fromDate=2000-01-01&toDate=2999-12-31", ids(infos), n, 0},
				{"a future fromDate", "fromDate=2999-01-01T00:00:00Z", nil, 0, 0},
				{"formatId", "formatId=" + url.QueryEscape("text/csv"), where(func(_ int, oi adapter.ObjectInfo) bool { return oi.FormatID == "text/csv" }), n / 3, 0},
				{"formatId and fromDate", "formatId=text%2Fplain&fromDate=" + at(mid),
					where(func(i int, oi adapter.ObjectInfo) bool { return i >= 5 && oi.FormatID == "text/plain" }), 2, 0},
				{"unknown formatId", "formatId=image%2Fpng", nil, 0, 0},
				{"identifier", "identifier=list-07", []string{"list-07"}, 1, 0},
				{"unknown identifier", "identifier=list-99", nil, 0, 0},
				{"replicaStatus=false", "replicaStatus=false", ids(infos), n, 0},
				{"replicaStatus=true", "replicaStatus=true", ids(infos), n, 0},
				{"first page", "start=0&count=5", ids(infos[:5]), n, 0},
				{"second page", "start=5&count=5", ids(infos[5:10]), n, 5},
				{"last page", "start=10&count=5", ids(infos[10:]), n, 10},
				{"count 0", "count=0", nil, n, 0},
				{"start at the end", "start=12", nil, n, 12},
				{"start past the end", "start=100&count=5", nil, n, 100},
				{"filtered page", "formatId=text%2Fplain&start=1&count=2", where(func(i int, oi adapter.ObjectInfo) bool { return oi.FormatID == "text/plain" && i > 0 && i < 9 }), 4, 1},
			} {
				t.Run(c.name, func(t *testing.T) {
					l := listObjects(t, s, v, c.q)
					if got := pids(l); !slices.Equal(got, c.want) || l.Total != c.total || l.Start != c.start {
						t.Errorf("start %d total %d %v, want start %d total %d %v", l.Start, l.Total, got, c.start, c.total, c.want)
					}
					for i := 1; i < len(l.ObjectInfo); i++ {
						if l.ObjectInfo[i].DateSysMetadataModified.Before(l.ObjectInfo[i-1].DateSysMetadataModified.Time) {
							t.Errorf("not in ascending dateSysMetadataModified order: %v", pids(l))
						}
					}
					for _, oi := range l.ObjectInfo {
						for _, want := range infos {
							if want.Identifier == oi.Identifier && (want.FormatID != oi.FormatID || want.Size != oi.Size ||
								want.Checksum != oi.Checksum || !want.DateSysMetadataModified.Equal(oi.DateSysMetadataModified.Time)) {
								t.Errorf("listed %+v, stored %+v", oi, want)
							}
						}
					}
				})
			}
			t.Run("pages add up", func(t *testing.T) {
				var got []string
				for start := 0; start < n; start += 5 {
					l := listObjects(t, s, v, fmt.Sprintf("start=%d&count=5", start))
					if l.Total != n {
						t.Errorf("total %d at start %d", l.Total, start)
					}
					got = append(got, pids(l)...)
				}
				if !slices.Equal(got, ids(infos)) {
					t.Errorf("paged %v, want %v", got, ids(infos))
				}
			})
			for _, q := range []string{"count=-1", "count=abc", "start=-1", "start=1.5", "fromDate=yesterday", "toDate=2024-13-45", "replicaStatus=maybe", "identifier=a%20b"} {
				t.Run("bad "+q, func(t *testing.T) {
					wantError(t, s.get(t, mnp(v, "/object")+"?"+q), http.StatusBadRequest, "InvalidRequest")
				})
			}
		})
	}
	t.Run("after changes", func(t *testing.T) { listAfterChanges(t, s, ids(infos)) })
}

// listAfterChanges pages through listObjects (so that any paging state is
// warm), changes objects, and checks that totals, pages and filters follow.
func listAfterChanges(t *testing.T, s *server, initial []string) {
	// order is the expected list: initial, less what moved, plus what moved, in the order moved.
	order := slices.Clone(initial)
	moved := func(ids ...string) {
		for _, id := range ids {
			if i := slices.Index(order, id); i >= 0 {
				order = slices.Delete(order, i, i+1)
			}
			order = append(order, id)
		}
	}
	check := func(t *testing.T, what string) {
		t.Helper()
		for _, v := range []int{1, 2} {
			var got []string
			for start := 0; start < len(order)+3; start += 3 {
				l := listObjects(t, s, v, fmt.Sprintf("start=%d&count=3", start))
				if l.Total != len(order) {
					t.Errorf("%s: v%d start %d: total %d, want %d", what, v, start, l.Total, len(order))
				}
				got = append(got, pids(l)...)
			}
			if !slices.Equal(got, order) {
				t.Errorf("%s: v%d pages give %v, want %v", what, v, got, order)
			}
			csv := listObjects(t, s, v, "formatId=text%2Fcsv")
			want := 0
			for _, id := range order {
				if getMeta(t, s, 2, id).FormatID == "text/csv" {
					want++
				}
			}
			if csv.Total != want || csv.Count != want {
				t.Errorf("%s: v%d formatId=text/csv: total %d count %d, want %d", what, v, csv.Total, csv.Count, want)
			}
		}
	}
	check(t, "before")
	wantIdentifier(t, s.do(t, http.MethodPut, mnp(2, "/archive/list-02"), nil), "list-02")
	moved("list-02")
	check(t, "after archive")
	d := genBytes(850, 10)
	r := s.send(t, http.MethodPut, objectPath(2, "list-04"), false, textPart("newPid", "list-04-next"),
		filePart("object", "o", bytes.NewReader(d)), docPart("sysmeta", newSysmeta("list-04-next", "text/csv", "MD5", d)))
	if wantIdentifier(t, r, "list-04-next") {
		moved("list-04", "list-04-next")
	}
	check(t, "after update")
	m := getMeta(t, s, 2, "list-00")
	m.FormatID = "text/csv" // moves it into the text/csv filter
	if wantStatus(t, s.send(t, http.MethodPut, mnp(2, "/meta"), false, textPart("pid", "list-00"), docPart("sysmeta", m)), http.StatusOK) {
		moved("list-00")
	}
	check(t, "after updateSystemMetadata")
	d = genBytes(851, 10)
	create(t, s, newSysmeta("list-new", "text/csv", "MD5", d), d)
	moved("list-new")
	check(t, "after create")
}

// 9. getLogRecords: filters and paging.
func TestLogRecords(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, pid := range []string{"log-a-1", "log-a-2", "log-b-1"} {
		d := genBytes(900, 50)
		create(t, s, newSysmeta(pid, "text/plain", "MD5", d), d)
	}
	for _, pid := range []string{"log-a-1", "log-b-1", "log-a-1", "log-a-2", "log-b-1"} {
		wantStatus(t, s.get(t, objectPath(2, pid)), http.StatusOK)
		time.Sleep(2 * time.Millisecond)
	}
	all := logRecords(t, s, 2, "")
	if all.Total != 8 || all.Count != 8 {
		t.Fatalf("%d (total %d) events, want 3 creates and 5 reads: %v", all.Count, all.Total, events(all))
	}
	for i := 1; i < len(all.LogEntry); i++ {
		if all.LogEntry[i].DateLogged.Before(all.LogEntry[i-1].DateLogged.Time) {
			t.Errorf("not in ascending dateLogged order: %v", all.LogEntry)
		}
	}
	entries := func(f func(e adapter.LogEntry) bool) []string {
		var out []string
		for _, e := range all.LogEntry {
			if f(e) {
				out = append(out, e.EntryID)
			}
		}
		return out
	}
	ids := func(l *adapter.Log) []string {
		var out []string
		for _, e := range l.LogEntry {
			out = append(out, e.EntryID)
		}
		return out
	}
	from := all.LogEntry[4].DateLogged
	for _, v := range []int{1, 2} {
		idParam := "idFilter"
		if v == 1 {
			idParam = "pidFilter"
		}
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			for _, c := range []struct {
				name  string
				q     string
				want  []string
				total int
			}{
				{"all", "", entries(func(adapter.LogEntry) bool { return true }), 8},
				{"event create", "event=create", entries(func(e adapter.LogEntry) bool { return e.Event == "create" }), 3},
				{"event read", "event=read", entries(func(e adapter.LogEntry) bool { return e.Event == "read" }), 5},
				{"event delete", "event=delete", nil, 0},
				{"id prefix", idParam + "=log-a", entries(func(e adapter.LogEntry) bool { return strings.HasPrefix(e.Identifier, "log-a") }), 5},
				{"whole id", idParam + "=log-b-1", entries(func(e adapter.LogEntry) bool { return e.Identifier == "log-b-1" }), 3},
				{"id and event", idParam + "=log-a&event=read", entries(func(e adapter.LogEntry) bool { return strings.HasPrefix(e.Identifier, "log-a") && e.Event == "read" }), 3},
				{"fromDate inclusive", "fromDate=" + at(from), entries(func(e adapter.LogEntry) bool { return !e.DateLogged.Before(from.Time) }), -1},
				{"toDate exclusive", "toDate=" + at(from), entries(func(e adapter.LogEntry) bool { return e.DateLogged.Before(from.Time) }), -1},
				{"page", "start=2&count=3", ids(all)[2:5], 8},
				{"page past the end", "start=8&count=3", nil, 8},
				{"filtered page", "event=read&start=1&count=2", entries(func(e adapter.LogEntry) bool { return e.Event == "read" })[1:3], 5},
			} {
				t.Run(c.name, func(t *testing.T) {
					l := logRecords(t, s, v, c.q)
					total := c.total
					if total < 0 {
						total = len(c.want)
					}
					if got := ids(l); !slices.Equal(got, c.want) || l.Total != total {
						t.Errorf("total %d entries %v, want total %d %v", l.Total, got, total, c.want)
					}
				})
			}
			for _, q := range []string{"count=-1", "start=x", "fromDate=soon", "toDate=2024-02-30T00:00:00Z"} {
				t.Run("bad "+q, func(t *testing.T) {
					wantError(t, s.get(t, mnp(v, "/log")+"?"+q), http.StatusBadRequest, "InvalidRequest")
				})
			}
		})
	}
	t.Run("new events", func(t *testing.T) {
		// After the pages above, new events must show in totals and pages.
		before := logRecords(t, s, 2, "event=read&"+"idFilter=log-a")
		for range 3 {
			wantStatus(t, s.get(t, objectPath(2, "log-a-2")), http.StatusOK)
		}
		after := logRecords(t, s, 2, "event=read&idFilter=log-a&start=1&count=100")
		if after.Total != before.Total+3 || after.Count != before.Total+2 {
			t.Errorf("after 3 reads: total %d count %d, had total %d", after.Total, after.Count, before.Total)
		}
		if l := logRecords(t, s, 1, ""); l.Total != 11 {
			t.Errorf("v1: total %d, want 11", l.Total)
		}
	})
	t.Run("who is logged", func(t *testing.T) {
		// The address is the peer's: headers a client sends cannot forge it.
		r := s.get(t, objectPath(2, "log-b-1"), "User-Agent", "e2e-agent/1.0", "X-Forwarded-For", "203.0.113.9", "X-Real-IP", "203.0.113.10")
		wantStatus(t, r, http.StatusOK)
		l := logRecords(t, s, 2, "idFilter=log-b-1&event=read&count=1000")
		e := l.LogEntry[len(l.LogEntry)-1]
		if e.IPAddress != "127.0.0.1" || e.UserAgent != "e2e-agent/1.0" || e.Subject != "public" || e.NodeIdentifier != testNodeID {
			t.Errorf("logged %+v, want ipAddress 127.0.0.1, userAgent e2e-agent/1.0, subject public", e)
		}
	})
	t.Run("v1 refuses an event outside its enumeration", func(t *testing.T) {
		wantError(t, s.get(t, mnp(1, "/log")+"?event=custom_event"), http.StatusBadRequest, "InvalidRequest")
		if l := logRecords(t, s, 2, "event=custom_event"); l.Total != 0 {
			t.Errorf("v2: %v", events(l))
		}
	})
}

// syncFailed is a SynchronizationFailed report of a CN about pid.
func syncFailed(pid string) []byte {
	return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<error name="SynchronizationFailed" errorCode="0" detailCode="6001" identifier="` + pid + `" nodeId="urn:node:CN">
  <description>The CN could not harvest ` + pid + `</description>
</error>
`)
}

// 10. systemMetadataChanged and synchronizationFailed: trusted callers only.
func TestNotifications(t *testing.T) {
	t.Parallel()
	d := genBytes(1000, 64)
	changed := func(pid string, m *adapter.SystemMetadata) []part {
		return []part{textPart("pid", pid), textPart("serialVersion", strconv.FormatUint(m.SerialVersion, 10)),
			textPart("dateSysMetaLastModified", m.DateSysMetadataModified.Format())}
	}
	report := func(pid string) part {
		doc := syncFailed(pid)
		return part{name: "message", filename: "message.xml", ctype: "text/xml", body: bytes.NewReader(doc)}
	}
	if err := xsdtest.Check(syncFailed("x")); err != nil {
		t.Fatalf("the test's SynchronizationFailed document is invalid: %v", err)
	}

	t.Run("untrusted caller", func(t *testing.T) {
		s := startServer(t, "")
		create(t, s, newSysmeta("note-1", "text/plain", "MD5", d), d)
		m := getMeta(t, s, 2, "note-1")
		for _, v := range []int{1, 2} {
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/dirtySystemMetadata"), false, changed("note-1", m)...), http.StatusUnauthorized, "InvalidToken")
			wantError(t, s.send(t, http.MethodPost, mnp(v, "/error"), false, report("note-1")), http.StatusUnauthorized, "InvalidToken")
		}
		wantError(t, s.send(t, http.MethodPost, "/dirtySystemMetadata/note-1", false, changed("note-1", m)[1:]...), http.StatusUnauthorized, "InvalidToken")
		if l := logRecords(t, s, 2, "event=synchronization_failed"); l.Total != 0 {
			t.Errorf("refused reports were logged: %v", events(l))
		}
	})

	t.Run("administrator", func(t *testing.T) {
		s := startServer(t, "", adminEnv)
		create(t, s, newSysmeta("note-1", "text/plain", "MD5", d), d)
		m := getMeta(t, s, 2, "note-1")
		t.Run("systemMetadataChanged", func(t *testing.T) {
			for _, v := range []int{1, 2} {
				wantStatus(t, s.send(t, http.MethodPost, mnp(v, "/dirtySystemMetadata"), false, changed("note-1", m)...), http.StatusOK)
				wantStatus(t, s.send(t, http.MethodPost, mnp(v, "/dirtySystemMetadata"), true, changed("note-1", m)...), http.StatusOK)
			}
			// The seed's literal path, with the identifier in it.
			wantStatus(t, s.send(t, http.MethodPost, "/dirtySystemMetadata/note-1", false, changed("note-1", m)[1:]...), http.StatusOK)
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false, changed("note-missing", m)...), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false, changed("note-1", m)[1:]...), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false,
				textPart("pid", "note-1"), textPart("serialVersion", "one"), textPart("dateSysMetaLastModified", m.DateSysMetadataModified.Format())), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/dirtySystemMetadata"), false,
				textPart("pid", "note-1"), textPart("serialVersion", "1"), textPart("dateSysMetaLastModified", "yesterday")), http.StatusBadRequest, "InvalidRequest")
			if got := getMeta(t, s, 2, "note-1"); got.SerialVersion != m.SerialVersion {
				t.Errorf("a notice changed the object: %+v", got)
			}
		})
		t.Run("synchronizationFailed", func(t *testing.T) {
			for _, v := range []int{1, 2} {
				r := s.send(t, http.MethodPost, mnp(v, "/error"), false, report("note-1"))
				wantStatus(t, r, http.StatusOK)
			}
			// A report on an identifier this node does not hold is accepted too.
			wantStatus(t, s.send(t, http.MethodPost, mnp(2, "/error"), true, report("note-unknown")), http.StatusOK)
			got := events(logRecords(t, s, 2, "event=synchronization_failed"))
			if n := strings.Count(strings.Join(got, "\n"), "note-1 synchronization_failed"); n != 2 {
				t.Errorf("synchronization_failed events %v, want 2 on note-1", got)
			}
			if l := logRecords(t, s, 1, "event=synchronization_failed&pidFilter=note-1"); l.Total != 2 {
				t.Errorf("v1: %v", events(l))
			}
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/error"), false, textPart("pid", "note-1")), http.StatusBadRequest, "InvalidRequest")
			wantError(t, s.send(t, http.MethodPost, mnp(2, "/error"), false,
				part{name: "message", filename: "m.xml", body: strings.NewReader("not xml")}), http.StatusBadRequest, "InvalidRequest")
		})
	})
}

// 11. identifiers with reserved, non-ASCII and many characters survive every
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

// Races and interrupted requests: concurrent creates of one identifier and
// concurrent updates of one object have one winner and leave nothing of the
// losers; an upload the client abandons leaves nothing.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 8
	all := []adapter.Permission{adapter.PermChangePermission}

	t.Run("creates of one pid", func(t *testing.T) {
		datas := make([][]byte, n)
		rs := make([]*response, n)
		var wg sync.WaitGroup
		for i := range n {
			datas[i] = genBytes(uint64(1600+i), 200_000+i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				sm := newSysmeta("race-create", "application/octet-stream", "SHA-1", datas[i], all...)
				rs[i] = s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(datas[i]), i%2 == 0)...)
			}()
		}
		wg.Wait()
		winner := -1
		for i, r := range rs {
			if r == nil {
				t.Errorf("create %d got no answer", i)
				continue
			}
			switch r.Status {
			case http.StatusOK:
				if winner >= 0 {
					t.Errorf("creates %d and %d both succeeded", winner, i)
				}
				winner = i
			default:
				wantError(t, r, http.StatusConflict, "IdentifierNotUnique")
			}
		}
		if winner < 0 {
			t.Fatal("no create succeeded")
		}
		if r := s.get(t, objectPath(2, "race-create")); !bytes.Equal(r.Body, datas[winner]) {
			t.Error("the stored bytes are not the winner's")
		}
		if f := countFiles(t, s.DataDir); f != 1 {
			t.Errorf("%d files under the object store, want 1", f)
		}
	})

	t.Run("updates of one object", func(t *testing.T) {
		base := genBytes(1700, 1000)
		create(t, s, newSysmeta("race-base", "text/plain", "MD5", base, all...), base)
		files := countFiles(t, s.DataDir)
		rs := make([]*response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := genBytes(uint64(1710+i), 50_000)
				sm := newSysmeta(fmt.Sprintf("race-next-%d", i), "text/plain", "MD5", d, all...)
				rs[i] = s.send(t, http.MethodPut, objectPath(2, "race-base"), false,
					textPart("newPid", sm.Identifier), filePart("object", "o", bytes.NewReader(d)), docPart("sysmeta", sm))
			}()
		}
		wg.Wait()
		winner := ""
		for i, r := range rs {
			id := fmt.Sprintf("race-next-%d", i)
			if r == nil {
				t.Errorf("update %d got no answer", i)
				continue
			}
			if r.Status == http.StatusOK {
				if winner != "" {
					t.Errorf("updates to %s and %s both succeeded: the chain branched", winner, id)
				}
				winner = id
				continue
			}
			wantError(t, r, http.StatusBadRequest, "InvalidRequest")
			wantNotFound(t, s, 2, id)
		}
		if m := getMeta(t, s, 2, "race-base"); winner == "" || m.ObsoletedBy != winner {
			t.Errorf("race-base obsoletedBy %q, winner %q", m.ObsoletedBy, winner)
		}
		if f := countFiles(t, s.DataDir); f != files+1 {
			t.Errorf("%d files under the object store, want %d", f, files+1)
		}
	})

	t.Run("abandoned upload", func(t *testing.T) {
		files := countFiles(t, s.DataDir)
		const malformed = "the multipart body is malformed"
		answered := strings.Count(s.log.String(), malformed)
		size := int64(4 << 20)
		sm := sysmetaFor("race-abandoned", "application/octet-stream", "MD5", uint64(size), genChecksum("MD5", 1800, size))
		body := io.MultiReader(io.LimitReader(newGenReader(1800, size), 1<<20), errReader{io.ErrUnexpectedEOF})
		for _, sysmetaFirst := range []bool{false, true} {
			mb, ctype := multipartBody(false, createParts(sm, body, sysmetaFirst)...)
			req, _ := http.NewRequest(http.MethodPost, s.URL+mnp(2, "/object"), mb)
			req.Header.Set("Content-Type", ctype)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("an abandoned upload was answered %d", resp.StatusCode)
			}
		}
		// The server notices the abandoned connections on its own time, and
		// logs each one once it has discarded what it staged.
		deadline := time.Now().Add(10 * time.Second)
		for strings.Count(s.log.String(), malformed) < answered+2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if f := countFiles(t, s.DataDir); f != files {
			t.Errorf("%d files under the object store, want %d", f, files)
		}
		wantNotFound(t, s, 2, "race-abandoned")
		wantStatus(t, s.get(t, "/d1/mn/v2/monitor/ping"), http.StatusOK)
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Checksum algorithm names: peers send aliases (SHA1, sha-256); the node
// verifies with them and answers in the Library of Congress labels.
func TestChecksumAlgorithmAliases(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for i, c := range []struct{ sent, label string }{
		{"SHA1", "SHA-1"},
		{"sha-256", "SHA-256"},
		{"md5", "MD5"},
		{"Sha512", "SHA-512"},
	} {
		t.Run(c.sent, func(t *testing.T) {
			d := genBytes(uint64(1900+i), 777)
			pid := "alias-" + c.label
			sm := sysmetaFor(pid, "text/plain", c.sent, uint64(len(d)), checksum(c.label, d))
			create(t, s, sm, d)
			m := getMeta(t, s, 2, pid)
			if m.Checksum.Algorithm != c.label {
				t.Errorf("stored algorithm %q, want %q", m.Checksum.Algorithm, c.label)
			}
			var cs adapter.Checksum
			r := s.get(t, checksumPath(2, pid)+"?checksumAlgorithm="+c.label)
			if wantStatus(t, r, http.StatusOK) {
				if decode(t, r, &cs); cs.Algorithm != c.label || cs.Value != checksum(c.label, d) {
					t.Errorf("getChecksum(%s): %s %s", c.label, cs.Algorithm, cs.Value)
				}
			}
			if h := s.head(t, objectPath(2, pid)); h.Header.Get("DataONE-Checksum") != c.label+","+checksum(c.label, d) {
				t.Errorf("DataONE-Checksum %q", h.Header.Get("DataONE-Checksum"))
			}
			if l := listObjects(t, s, 2, "identifier="+pid); l.Total != 1 || l.ObjectInfo[0].Checksum.Algorithm != c.label {
				t.Errorf("listObjects: %+v", l.ObjectInfo)
			}
		})
	}
}
