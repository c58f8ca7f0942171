package main

// End-to-end tests of the member node's create (e2e_test.go says how they run):
// every body form and checksum algorithm, what reads answer of the result, and
// the errors that must leave no trace.

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// created is an object a test created, with what it expects of it.
type created struct {
	sm     *adapter.SystemMetadata
	data   []byte
	before time.Time // just before the create was sent
	after  time.Time // just after it was answered
	ctype  string    // the Content-Type get must answer
}

// create in every body form and checksum algorithm; get, describe,
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
				// Another's address and subject are hidden from the public.
				if e.Subject != "<NotAuthorized>" || e.NodeIdentifier != testNodeID || e.IPAddress != "<NotAuthorized>" || e.EntryID == "" || e.DateLogged.IsZero() {
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

// create errors: each answers the right exception and leaves no trace.
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
