package main

// End-to-end tests of the coordinating node's objects (cn_test.go says how they
// run and who the callers are): create and read, registerSystemMetadata,
// resolve, obsoletedBy and relations, and where the objects are stored.

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

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
			again := *pub
			if v == 1 {
				again.SeriesID = "" // v1 has none
			}
			for _, who := range []string{cnAdmin, cnAlice, "", cnBob} {
				code, name := http.StatusConflict, "IdentifierNotUnique"
				if who != cnAdmin {
					code, name = http.StatusUnauthorized, "NotAuthorized"
					if who == "" {
						name = "InvalidToken"
					}
				}
				cnWantError(t, c.form(t, who, http.MethodPost, cnp(v, "/object"), createParts(&again, bytes.NewReader(pubData), false)...), code, name, "")
			}
			// The series id is taken too (v2); v1 takes none.
			dup, dupData := cnObject("cn-read-sid-taken", true)
			dup.SeriesID = pub.SeriesID
			code, name, detail := http.StatusConflict, "IdentifierNotUnique", "1120"
			if v == 1 {
				code, name, detail = http.StatusBadRequest, "InvalidSystemMetadata", "4896"
			}
			cnWantError(t, c.form(t, cnAdmin, http.MethodPost, cnp(v, "/object"), createParts(dup, bytes.NewReader(dupData), false)...), code, name, detail)
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
			noID := sm.Clone()
			noID.Identifier = ""
			cnWantError(t, post(cnAdmin, textPart("pid", sm.Identifier), docPart("sysmeta", noID, v)), http.StatusBadRequest, "InvalidSystemMetadata", "4864")
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
		// A + as %2B: Metacat reads a bare + in a path as a space.
		return adapter.ObjectLocation{NodeIdentifier: node, BaseURL: base, URL: base + "/v2/object/" + strings.ReplaceAll(url.PathEscape(pid), "+", "%2B"), Preference: pref}
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

// api-documentation CNCore.setObsoletedBy, v2: "ensure that the obsolescence
// chain is consistent with use of any SID"; Metacat's CN answers
// InvalidRequest 4942 when obsoletedByPid is an existing SID. A chain link to
// a SID is not a PID of any object.
func TestCNSetObsoletedByRefusesSeriesID(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	a, aData := cnObject("cn-obs-sid-a", true)
	a.SeriesID = "cn-obs-sid-series"
	c.create(t, a, aData)
	b, bData := cnObject("cn-obs-sid-b", true)
	c.create(t, b, bData)
	for _, v := range []int{1, 2} {
		cnWantError(t, c.form(t, cnAlice, http.MethodPut, cnID(v, "obsoletedBy", b.Identifier),
			textPart("obsoletedByPid", a.SeriesID), serial(1)), http.StatusBadRequest, "InvalidRequest", "4942")
	}
	if m := c.meta(t, b.Identifier); m.ObsoletedBy != "" {
		t.Errorf("%s is now obsoleted by the series id %q", b.Identifier, m.ObsoletedBy)
	}
}

// TestCNDeletedIdentifierStaysInUse: an identifier the CN deleted stays
// reserved forever (API.md §4.1, §10 rule 7; CNCore.delete: it "will continue
// to be shown as in use"). Anyone could reserve it, and another object could
// be stored under it.
func TestCNDeletedIdentifierStaysInUse(t *testing.T) {
	t.Parallel()
	c := cnStart(t)
	sm, data := cnObject("cn-deleted-stays", true)
	c.create(t, sm, data)
	if !wantIdentifier(t, c.call(t, cnAdmin, http.MethodDelete, cnID(2, "object", sm.Identifier)), sm.Identifier) {
		t.FailNow()
	}
	// Nobody may reserve the deleted identifier...
	cnWantError(t, c.form(t, cnBob, http.MethodPost, cnp(2, "/reserve"), textPart("pid", sm.Identifier)),
		http.StatusConflict, "IdentifierNotUnique", "4210")
	// ...nor store another object under it.
	data2 := []byte("a different object under a deleted identifier\n")
	sm2 := newSysmeta(sm.Identifier, "text/plain", "SHA-256", data2)
	sm2.RightsHolder = cnBob
	cnWantError(t, c.form(t, cnAdmin, http.MethodPost, cnp(2, "/object"), createParts(sm2, bytes.NewReader(data2), false)...),
		http.StatusConflict, "IdentifierNotUnique", "1120")
}
