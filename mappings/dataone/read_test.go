package dataone

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	var s [32]byte
	s[0] = byte(seed)
	rand.NewChaCha8(s).Read(b)
	return b
}

func encoded(t testing.TB, doc any) string {
	t.Helper()
	var b bytes.Buffer
	if err := adapter.Encode(&b, doc, 2); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGet(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	data := randomBytes(1, 100_000)
	sm := f.put("obj/1", "series:1", data)
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	s := session("CN=reader", "")

	t.Run("stream", func(t *testing.T) {
		obj, err := n.Get(t.Context(), s, "obj/1")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Body.Close()
		if encoded(t, obj.Meta) != encoded(t, sm) {
			t.Errorf("meta\n%s\nwant\n%s", encoded(t, obj.Meta), encoded(t, sm))
		}
		b, err := io.ReadAll(obj.Body)
		if err != nil || !bytes.Equal(b, data) {
			t.Errorf("read %d bytes, %v", len(b), err)
		}
	})
	t.Run("ranges", func(t *testing.T) {
		obj, err := n.Get(t.Context(), s, "obj/1")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Body.Close()
		rs, ok := obj.Body.(io.ReadSeeker)
		if !ok {
			t.Fatalf("the body of an upstream that serves ranges is a %T, not a seeker", obj.Body)
		}
		if end, err := rs.Seek(0, io.SeekEnd); err != nil || end != int64(len(data)) {
			t.Fatalf("Seek to the end: %d, %v", end, err)
		}
		rs.Seek(60_000, io.SeekStart)
		b, err := io.ReadAll(rs)
		if err != nil || !bytes.Equal(b, data[60_000:]) {
			t.Errorf("from 60000: %d bytes, %v", len(b), err)
		}
		r := f.last(t, "GET", "/mn/v2/object/")
		if r.Header.Get("Range") != "bytes=60000-" || r.Header.Get("If-Range") != `"`+sm.Checksum.Value+`"` {
			t.Errorf("ranged GET with Range %q, If-Range %q", r.Header.Get("Range"), r.Header.Get("If-Range"))
		}
	})
	t.Run("series id", func(t *testing.T) {
		obj, err := n.Get(t.Context(), s, "series:1")
		if err != nil {
			t.Fatal(err)
		}
		obj.Body.Close()
		if obj.Meta.Identifier != "obj/1" {
			t.Errorf("meta of %q", obj.Meta.Identifier)
		}
	})
	t.Run("both at once", func(t *testing.T) {
		f.requests()
		obj, err := n.Get(t.Context(), s, "obj/1")
		if err != nil {
			t.Fatal(err)
		}
		obj.Body.Close()
		var paths []string
		for _, r := range f.requests() {
			paths = append(paths, r.Path)
		}
		slices.Sort(paths)
		if strings.Join(paths, " ") != "/mn/v2/meta/obj%2F1 /mn/v2/object/obj%2F1" {
			t.Errorf("requests %v", paths)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := n.Get(t.Context(), s, "nothing")
		e := adapter.AsException(err)
		if e.Kind != adapter.NotFound || e.Description != `up: no object "nothing" here` || e.PID != "nothing" || e.DetailCode != "" {
			t.Errorf("%+v", e)
		}
	})
	t.Run("no ranges", func(t *testing.T) {
		g := newFake(t)
		g.set(func(f *fakeMN) { f.noRanges = true })
		g.put("p", "", data)
		obj, err := open(t, upstreamConfig(t, g.URL, ""), nil).Get(t.Context(), s, "p")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Body.Close()
		if _, ok := obj.Body.(io.Seeker); ok {
			t.Error("the body of an upstream without ranges seeks")
		}
		if b, err := io.ReadAll(obj.Body); err != nil || !bytes.Equal(b, data) {
			t.Errorf("read %d bytes, %v", len(b), err)
		}
	})
	t.Run("ranges ignored", func(t *testing.T) {
		// Accept-Ranges, but whole answers and no ETag: the body skips.
		g := newFake(t)
		g.put("p", "", data)
		g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasPrefix(r.URL.Path, "/mn/v2/object/") {
				return false
			}
			w.Header().Set("Accept-Ranges", "bytes")
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data)
			return true
		})
		obj, err := open(t, upstreamConfig(t, g.URL, ""), nil).Get(t.Context(), s, "p")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Body.Close()
		obj.Body.(io.Seeker).Seek(99_000, io.SeekStart)
		if b, err := io.ReadAll(obj.Body); err != nil || !bytes.Equal(b, data[99_000:]) {
			t.Errorf("from 99000: %d bytes, %v", len(b), err)
		}
	})
	t.Run("changed while read", func(t *testing.T) {
		g := newFake(t)
		g.put("p", "", data)
		obj, err := open(t, upstreamConfig(t, g.URL, ""), nil).Get(t.Context(), s, "p")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Body.Close()
		g.put("p", "", bytes.ToUpper(data)) // another checksum: another ETag
		obj.Body.(io.Seeker).Seek(10, io.SeekStart)
		if _, err := io.ReadAll(obj.Body); !strings.Contains(fmt.Sprint(err), `object "p" changed on upstream "up" while it was read`) {
			t.Errorf("%v", err)
		}
	})
	t.Run("size disagrees", func(t *testing.T) {
		g := newFake(t)
		g.put("p", "", data)
		g.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/mn/v2/object/") {
				w.Write([]byte("short"))
				return true
			}
			return false
		})
		_, err := open(t, upstreamConfig(t, g.URL, ""), nil).Get(t.Context(), s, "p")
		if e := adapter.AsException(err); e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, `upstream "up" sent 5 bytes for "p", whose system metadata says 100000`) {
			t.Errorf("%v", err)
		}
	})
}

func TestMetadataCalls(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	data := []byte("some bytes")
	sm := f.put("a pid", "", data)
	f.put("b", "", []byte("b"))
	f.set(func(f *fakeMN) {
		f.log = []adapter.LogEntry{{EntryID: "1", Identifier: "a pid", IPAddress: "192.0.2.1", UserAgent: "x", Subject: "CN=s",
			Event: "read", DateLogged: sm.DateUploaded, NodeIdentifier: "urn:node:fake"}}
	})
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	s := session("CN=reader", "")
	ctx := t.Context()
	from, _ := adapter.ParseTime("2024-01-02T03:04:05.678Z")
	to, _ := adapter.ParseTime("2024-02-01T00:00:00Z")

	t.Run("systemMetadata", func(t *testing.T) {
		got, err := n.SystemMetadata(ctx, s, "a pid")
		if err != nil || encoded(t, got) != encoded(t, sm) {
			t.Errorf("%v\n%v", err, got)
		}
	})
	t.Run("checksum", func(t *testing.T) {
		c, err := n.Checksum(ctx, s, "a pid", "")
		if err != nil || *c != sm.Checksum {
			t.Errorf("stored: %v, %v", c, err)
		}
		if r := f.last(t, "GET", "/mn/v2/checksum/"); r.Path != "/mn/v2/checksum/a%20pid" || r.RawQuery != "" {
			t.Errorf("sent %s?%s", r.Path, r.RawQuery)
		}
		sum := md5.Sum(data)
		c, err = n.Checksum(ctx, s, "a pid", "MD5")
		if err != nil || c.Algorithm != "MD5" || c.Value != hex.EncodeToString(sum[:]) {
			t.Errorf("MD5: %v, %v", c, err)
		}
		if q := f.last(t, "GET", "/mn/v2/checksum/").RawQuery; q != "checksumAlgorithm=MD5" {
			t.Errorf("query %q", q)
		}
	})
	t.Run("listObjects", func(t *testing.T) {
		// A caller the front trusts (no ReadableBy): the query as it is.
		l, err := n.ListObjects(ctx, s, adapter.ListQuery{FromDate: from, ToDate: to, FormatID: "text/csv",
			Identifier: "a pid", ExcludeReplicas: true, Start: 5, Count: 7, NodeID: "urn:node:x"})
		if err != nil || l.Total != 2 || len(l.ObjectInfo) != 2 || l.ObjectInfo[0].Identifier != "a pid" || l.ObjectInfo[0].Checksum != sm.Checksum {
			t.Fatalf("%+v, %v", l, err)
		}
		r := f.last(t, "GET", "/mn/v2/object")
		want := "count=7&formatId=text%2Fcsv&fromDate=2024-01-02T03%3A04%3A05.678Z&identifier=a%20pid&replicaStatus=false&start=5&toDate=2024-02-01T00%3A00%3A00.000Z"
		if r.Path != "/mn/v2/object" || r.RawQuery != want {
			t.Errorf("sent %s?%s\nwant query %s", r.Path, r.RawQuery, want)
		}
		n.ListObjects(ctx, s, adapter.ListQuery{Count: 1000})
		if q := f.last(t, "GET", "/mn/v2/object").RawQuery; q != "count=1000&start=0" {
			t.Errorf("no filters: %q", q)
		}
	})
	t.Run("log v2", func(t *testing.T) {
		l, err := n.LogRecords(ctx, s, adapter.LogQuery{FromDate: from, ToDate: to, Event: "read", IDFilter: "a pid", Start: 1, Count: 2})
		if err != nil || len(l.LogEntry) != 1 || l.LogEntry[0].Identifier != "a pid" || l.Start != 1 {
			t.Fatalf("%+v, %v", l, err)
		}
		r := f.last(t, "GET", "/mn/v")
		want := "count=2&event=read&fromDate=2024-01-02T03%3A04%3A05.678Z&idFilter=a%20pid&start=1&toDate=2024-02-01T00%3A00%3A00.000Z"
		if r.Path != "/mn/v2/log" || r.RawQuery != want {
			t.Errorf("sent %s?%s", r.Path, r.RawQuery)
		}
	})
	t.Run("log v1", func(t *testing.T) {
		if _, err := n.LogRecords(ctx, s, adapter.LogQuery{IDFilter: "a", PIDsOnly: true, Count: 10}); err != nil {
			t.Fatal(err)
		}
		if r := f.last(t, "GET", "/mn/v"); r.Path != "/mn/v1/log" || r.RawQuery != "count=10&pidFilter=a&start=0" {
			t.Errorf("sent %s?%s", r.Path, r.RawQuery)
		}
	})
	t.Run("synchronizationFailed", func(t *testing.T) {
		report := &adapter.Exception{Kind: adapter.SynchronizationFailed, DetailCode: "0", PID: "a pid", Description: "could not harvest"}
		if err := n.SynchronizationFailed(ctx, s, report); err != nil {
			t.Fatal(err)
		}
		r := f.last(t, "POST", "/mn/v2/error")
		f.mu.Lock()
		got := f.reports[len(f.reports)-1]
		f.mu.Unlock()
		if !slices.Equal(r.Parts, []string{"message"}) || got.Kind != adapter.SynchronizationFailed || got.PID != "a pid" || got.Description != "could not harvest" {
			t.Errorf("parts %v, report %+v", r.Parts, got)
		}
	})
	t.Run("systemMetadataChanged", func(t *testing.T) {
		if err := n.SystemMetadataChanged(ctx, s, "a pid", 7, from); err != nil {
			t.Fatal(err)
		}
		r := f.last(t, "POST", "/mn/v2/dirtySystemMetadata")
		if !slices.Equal(r.Parts, []string{"pid", "serialVersion", "dateSysMetaLastModified"}) || r.Values["pid"] != "a pid" ||
			r.Values["serialVersion"] != "7" || r.Values["dateSysMetaLastModified"] != "2024-01-02T03:04:05.678Z" {
			t.Errorf("parts %v %v", r.Parts, r.Values)
		}
	})
	t.Run("ping", func(t *testing.T) {
		if err := n.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSetAccessPolicy(t *testing.T) {
	t.Parallel()
	policy := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"CN=x"}, Permission: []adapter.Permission{"write"}}}}
	s := session("CN=owner", "")
	t.Run("offered", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		f.put("p/1", "", []byte("x"))
		n := open(t, upstreamConfig(t, f.URL, ""), nil)
		if err := n.SetAccessPolicy(t.Context(), s, "p/1", policy, 3); err != nil {
			t.Fatal(err)
		}
		r := f.last(t, "PUT", "/mn/v2/accessRules/")
		o, _ := f.lookup("p/1")
		if r.Path != "/mn/v2/accessRules/p%2F1" || !slices.Equal(r.Parts, []string{"accessPolicy", "serialVersion"}) ||
			r.Values["serialVersion"] != "3" || encoded(t, o.sm.AccessPolicy) != encoded(t, policy) {
			t.Errorf("%s %v %v", r.Path, r.Parts, r.Values)
		}
		n.SetAccessPolicy(t.Context(), s, "p/1", policy, 0)
		if r := f.last(t, "PUT", "/mn/v2/accessRules/"); !slices.Equal(r.Parts, []string{"accessPolicy"}) {
			t.Errorf("without serialVersion: parts %v", r.Parts)
		}
	})
	for _, tc := range []struct {
		name   string
		status int
		doc    bool
		exists bool
		want   adapter.Kind
	}{
		{"404 page", http.StatusNotFound, false, true, adapter.NotImplemented},
		{"405", http.StatusMethodNotAllowed, false, true, adapter.NotImplemented},
		{"501", http.StatusNotImplemented, false, true, adapter.NotImplemented},
		{"Metacat's 400", http.StatusBadRequest, true, true, adapter.NotImplemented},
		{"404 NotFound, object exists", http.StatusNotFound, true, true, adapter.NotImplemented},
		{"404 NotFound, no object", http.StatusNotFound, true, false, adapter.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.set(func(f *fakeMN) { f.accessRules, f.notFoundDoc = tc.status, tc.doc })
			if tc.exists {
				f.put("p", "", []byte("x"))
			}
			n := open(t, upstreamConfig(t, f.URL, ""), nil)
			err := n.SetAccessPolicy(t.Context(), s, "p", policy, 0)
			e := adapter.AsException(err)
			if e.Kind != tc.want {
				t.Fatalf("%v, want %s", err, tc.want)
			}
			if tc.want == adapter.NotImplemented && e.Description != `MNAuthorization.setAccessPolicy is not offered by upstream "up"` {
				t.Errorf("description %q", e.Description)
			}
		})
	}
}

// TestErrors: DataONE errors keep their kind and identifier, with the
// upstream's name before the description (the detail code is the client's
// operation's, and an upstream's own failure is described in the log only);
// anything else is a ServiceFailure that names the upstream.
func TestErrors(t *testing.T) {
	t.Parallel()
	doc := func(k adapter.Kind) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) { fail(w, k, "the/pid", "it went %s", k) }
	}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		kind   adapter.Kind
		desc   string
		detail string
	}{
		{"NotFound", doc(adapter.NotFound), adapter.NotFound, "up: it went NotFound", ""},
		{"NotAuthorized", doc(adapter.NotAuthorized), adapter.NotAuthorized, "up: it went NotAuthorized", ""},
		{"InvalidToken", doc(adapter.InvalidToken), adapter.ServiceFailure, `upstream "up" refused this node's own credential`, ""}, // forward: none
		{"InvalidRequest", doc(adapter.InvalidRequest), adapter.InvalidRequest, "up: it went InvalidRequest", ""},
		{"IdentifierNotUnique", doc(adapter.IdentifierNotUnique), adapter.IdentifierNotUnique, "up: it went IdentifierNotUnique", ""},
		{"InvalidSystemMetadata", doc(adapter.InvalidSystemMetadata), adapter.InvalidSystemMetadata, "up: it went InvalidSystemMetadata", ""},
		{"InsufficientResources", doc(adapter.InsufficientResources), adapter.InsufficientResources, "up: it went InsufficientResources", ""},
		{"VersionMismatch", doc(adapter.VersionMismatch), adapter.VersionMismatch, "up: it went VersionMismatch", ""},
		{"NotImplemented", doc(adapter.NotImplemented), adapter.NotImplemented, "up: it went NotImplemented", ""},
		{"ServiceFailure", doc(adapter.ServiceFailure), adapter.ServiceFailure, "up: the upstream failed (HTTP 500) to answer the system metadata of \"p\"", ""},
		{"unknown name", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, `<error name="Weird" errorCode="418" detailCode="9"><description>odd</description></error>`)
		}, adapter.ServiceFailure, `up: the upstream failed (HTTP 418) to answer the system metadata of "p"`, ""},
		{"no description", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0"?><error name="NotFound" errorCode="404" detailCode="1060"/>`)
		}, adapter.NotFound, `up: NotFound (HTTP 404) to the system metadata of "p"`, ""},
		{"headers only (Metacat)", func(w http.ResponseWriter) {
			w.Header().Set("DataONE-Exception-Name", "org.dataone.service.exceptions.NotAuthorized")
			w.Header().Set("DataONE-Exception-DetailCode", "1040")
			w.Header().Set("DataONE-Exception-Description", "not%20yours")
			w.WriteHeader(http.StatusUnauthorized)
		}, adapter.NotAuthorized, "up: not yours", ""},
		{"HTML 500", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "<html><body>Internal Server Error</body></html>")
		}, adapter.ServiceFailure, `upstream "up" answered HTTP 500 to the system metadata of "p", not a DataONE error`, ""},
		{"plain 404", func(w http.ResponseWriter) { http.NotFound(w, nil) },
			adapter.ServiceFailure, `upstream "up" answered HTTP 404 to the system metadata of "p", not a DataONE error`, ""},
		{"plain 403", func(w http.ResponseWriter) { http.Error(w, "forbidden", http.StatusForbidden) },
			adapter.ServiceFailure, `upstream "up" answered HTTP 403 to the system metadata of "p", not a DataONE error`, ""},
		{"200, not a document", func(w http.ResponseWriter) { io.WriteString(w, "OK") },
			adapter.ServiceFailure, `upstream "up" answered the system metadata of "p" with an invalid document`, ""},
		{"200, another document", func(w http.ResponseWriter) {
			adapter.Encode(w, &adapter.Identifier{Value: "p"}, 2)
		}, adapter.ServiceFailure, `upstream "up" answered the system metadata of "p" with an invalid document: expected a systemMetadata document, got <identifier>`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool { tc.answer(w); return true })
			n := open(t, upstreamConfig(t, f.URL, ""), nil)
			_, err := n.SystemMetadata(t.Context(), session("CN=x", ""), "p")
			e := adapter.AsException(err)
			if e.Kind != tc.kind || !strings.HasPrefix(e.Description, tc.desc) || e.DetailCode != tc.detail {
				t.Errorf("got %s %q detail %q\nwant %s %q detail %q", e.Kind, e.Description, e.DetailCode, tc.kind, tc.desc, tc.detail)
			}
			if e.Err == nil {
				t.Error("no cause for the log")
			}
			if e.Kind != adapter.ServiceFailure && e.NodeID != "" {
				t.Errorf("the upstream's nodeId %q is kept: the front fills in its own", e.NodeID)
			}
		})
	}
}

func TestQueryEncoding(t *testing.T) {
	t.Parallel()
	q := url.Values{"idFilter": {"a b+c/d"}}
	if got := encodeQuery(q); got != "idFilter=a%20b%2Bc%2Fd" {
		t.Errorf("%q", got)
	}
}
