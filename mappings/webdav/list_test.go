package webdav

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// A key starting with "/" names a holding of this store, which Put refuses:
// the acceptance suite's odd keys leave those out here.
func init() {
	mappingtest.OddKeys = slices.DeleteFunc(slices.Clone(mappingtest.OddKeys),
		func(k string) bool { return strings.HasPrefix(k, "/") })
}

// davPut puts data at path (unescaped, relative to the server's root) with a
// plain HTTP PUT to nginx, which makes the collections.
func davPut(t *testing.T, d servers.DAV, path string, data []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, d.URL+escapePath(path), bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT %s: %s", path, resp.Status)
	}
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// holdings are the files of the pre-existing collection under "repo/", by
// path relative to it.
var holdingsPaths = []string{"data/a.csv", "data/sub/b.txt", "data/sub/deeper/c.bin", "data-z.txt", "data.txt",
	"docs/ünïcødé 日本.txt", "docs/with space.txt", "docs/per%cent & more+.txt", "zz/last", "a/b/c/d/e/deep.txt"}

// collection puts the holdings, and returns each one's size by path, and the
// big file's bytes.
func collection(t *testing.T, d servers.DAV) (map[string]int64, []byte) {
	t.Helper()
	want := map[string]int64{}
	for _, p := range holdingsPaths {
		davPut(t, d, "repo/"+p, []byte("bytes of "+p))
		want[p] = int64(len("bytes of " + p))
	}
	for i := range 25 { // many folders, for paging
		p := fmt.Sprintf("many/f%02d/x.txt", i)
		davPut(t, d, "repo/"+p, []byte("bytes of "+p))
		want[p] = int64(len("bytes of " + p))
	}
	davPut(t, d, "repo/empty.dat", nil)
	want["empty.dat"] = 0
	big := make([]byte, 3<<20+5)
	for i := range big {
		big[i] = byte(i * 13)
	}
	davPut(t, d, "repo/big/file.bin", big)
	want["big/file.bin"] = int64(len(big))
	req, _ := http.NewRequestWithContext(t.Context(), "MKCOL", d.URL+"repo/emptydir/", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("MKCOL: %v %v", resp, err)
	}
	davPut(t, d, "elsewhere/x", []byte("x")) // not under holdings
	return want, big
}

// listAll pages through s; it fails t when the paging does not end.
func listAll(t *testing.T, s *Store) (found []node.Found, pages int) {
	t.Helper()
	cursor := ""
	seen := map[string]bool{}
	for {
		page, next, err := s.List(t.Context(), time.Now(), cursor) // since is ignored
		if err != nil {
			t.Fatalf("List(%q): %v", cursor, err)
		}
		pages++
		found = append(found, page...)
		if next == "" {
			return found, pages
		}
		if seen[next] || pages > 1000 {
			t.Fatalf("List(%q) gave the cursor %q again", cursor, next)
		}
		seen[next] = true
		cursor = next
	}
}

const uuidKey = "8e0a4c1e-5f6b-4d2c-9a1b-0c2d3e4f5a6b"

func TestList(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	want, big := collection(t, d)
	// The node's store shares the collection: its objects are in the listing
	// (under their keys, or not at all for keys that are not plain), its tmp
	// collection is not.
	reg := prometheus.NewRegistry()
	s := open(t, upstreamConfig(t, d.URL, "prefix: repo\n"), metrics.New(reg, "test"))
	for _, key := range []string{uuidKey, "ünï/not plain"} {
		if _, err := s.Put(t.Context(), key, strings.NewReader("node bytes")); err != nil {
			t.Fatal(err)
		}
	}
	davPut(t, d, "repo/.d1bridge-tmp/leftover", []byte("a crashed Put's"))
	before := propfinds(t, reg)
	all, pages := listAll(t, s)
	if pages != 1 {
		t.Errorf("%d pages", pages)
	}
	// One PROPFIND per collection: repo, data (3), docs, zz, a (5), many
	// (26), big, emptydir, and the node's two fan-out levels for each of its
	// two keys; not tmp.
	if n := propfinds(t, reg) - before; n != 43 {
		t.Errorf("%v PROPFINDs for one listing", n)
	}
	got := map[string]int64{}
	var order [][]string
	for _, f := range all {
		if f.Key == uuidKey {
			if f.FileName != "" || f.Size != 10 {
				t.Errorf("the node's object is listed as %+v", f)
			}
			order = append(order, strings.Split(upstream.BlobName(uuidKey), "/"))
			continue
		}
		rel, ok := strings.CutPrefix(f.Key, "/")
		if !ok {
			t.Errorf("unexpected key %q", f.Key)
			continue
		}
		if f.FileName != rel || f.Modified.IsZero() || time.Since(f.Modified) > time.Hour || f.Checksum.Algorithm != "" {
			t.Errorf("%s: %+v", f.Key, f)
		}
		got[rel] = f.Size
		order = append(order, strings.Split(rel, "/"))
	}
	if !maps.Equal(got, want) {
		t.Errorf("holdings listed:\n%v\nwant\n%v", got, want)
	}
	if len(order) != len(want)+1 {
		t.Errorf("%d listed, want %d holdings and the node's object", len(order), len(want))
	}
	if !slices.IsSortedFunc(order, slices.Compare) {
		t.Errorf("not in path order: %q", order)
	}

	t.Run("paging", func(t *testing.T) {
		for _, size := range []struct{ files, collections int }{{1, 100}, {2, 100}, {7, 100}, {1000, 1}, {1000, 2}, {3, 2}, {1, 1}, {len(all), 100}} {
			reg := prometheus.NewRegistry()
			pg := open(t, upstreamConfig(t, d.URL, "prefix: repo\n"), metrics.New(reg, "test"))
			pg.pageSize, pg.pageCollections = size.files, size.collections
			paged, pages := listAll(t, pg)
			if !slices.EqualFunc(paged, all, func(a, b node.Found) bool { return a.Key == b.Key && a.Size == b.Size }) {
				t.Errorf("pages of %v: %d objects, not those of one page", size, len(paged))
			}
			if size.files == 1 && pages < len(all) {
				t.Errorf("pages of %v: %d pages", size, pages)
			}
			// A page reads the cursor's ancestors again (at most 6 deep)
			// and then its own collections.
			if n := propfinds(t, reg); n > float64(pages*(size.collections+7)) {
				t.Errorf("pages of %v: %v PROPFINDs for %d pages", size, n, pages)
			}
		}
	})

	t.Run("holdings option", func(t *testing.T) {
		h := open(t, upstreamConfig(t, d.URL, "prefix: repo\nholdings: repo/data\n"), nil)
		found, _ := listAll(t, h)
		var keys []string
		for _, f := range found {
			keys = append(keys, f.Key+"="+f.FileName)
		}
		if w := []string{"/a.csv=a.csv", "/sub/b.txt=sub/b.txt", "/sub/deeper/c.bin=sub/deeper/c.bin"}; !slices.Equal(keys, w) {
			t.Errorf("listed %q, want %q", keys, w)
		}
		if b := read(t, h, "/sub/b.txt"); string(b) != "bytes of data/sub/b.txt" {
			t.Errorf("Get: %q", b)
		}
		missing := open(t, upstreamConfig(t, d.URL, "holdings: no/such/collection\n"), nil)
		if found, next, err := missing.List(t.Context(), time.Time{}, ""); err != nil || len(found) != 0 || next != "" {
			t.Errorf("List of a missing collection: %v %q %v", found, next, err)
		}
	})

	t.Run("get", func(t *testing.T) {
		for rel := range want {
			if rel == "big/file.bin" {
				continue
			}
			w := "bytes of " + rel
			if rel == "empty.dat" {
				w = ""
			}
			if b := read(t, s, "/"+rel); string(b) != w {
				t.Errorf("Get(/%s) = %q", rel, b)
			}
		}
		r, err := s.Get(t.Context(), "/big/file.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rs := r.(io.ReadSeeker)
		if n, err := rs.Seek(0, io.SeekEnd); err != nil || n != int64(len(big)) {
			t.Fatalf("Seek to the end: %d, %v", n, err)
		}
		off := int64(2<<20 + 3)
		if _, err := rs.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if rest, err := io.ReadAll(rs); err != nil || !bytes.Equal(rest, big[off:]) {
			t.Errorf("after a seek: %d bytes, %v", len(rest), err)
		}
		if b := read(t, s, uuidKey); string(b) != "node bytes" {
			t.Errorf("Get(%s) = %q", uuidKey, b)
		}
	})

	t.Run("stat", func(t *testing.T) {
		f, err := s.Stat(t.Context(), "/docs/ünïcødé 日本.txt")
		if err != nil {
			t.Fatal(err)
		}
		if f.Key != "/docs/ünïcødé 日本.txt" || f.FileName != "docs/ünïcødé 日本.txt" || f.Size != want["docs/ünïcødé 日本.txt"] || f.Modified.IsZero() {
			t.Errorf("Stat: %+v", f)
		}
		if f, err := s.Stat(t.Context(), uuidKey); err != nil || f.Key != uuidKey || f.Size != 10 {
			t.Errorf("Stat(%s): %+v, %v", uuidKey, f, err)
		}
		for _, key := range []string{"/data/missing", "/data", "no-such-key"} {
			if _, err := s.Stat(t.Context(), key); !adapter.IsKind(err, adapter.NotFound) {
				t.Errorf("Stat(%q): %v, want NotFound", key, err)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, key := range []string{"/../elsewhere/x", "/data/../../elsewhere/x", "/data//a.csv", "/./data/a.csv", "/", "/data/"} {
			if _, err := s.Get(t.Context(), key); !adapter.IsKind(err, adapter.InvalidRequest) {
				t.Errorf("Get(%q): %v, want InvalidRequest", key, err)
			}
			if _, err := s.Stat(t.Context(), key); !adapter.IsKind(err, adapter.InvalidRequest) {
				t.Errorf("Stat(%q): %v, want InvalidRequest", key, err)
			}
		}
		if _, err := s.Get(t.Context(), "/data/missing"); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("Get of a missing holding: %v", err)
		}
		if _, err := s.Put(t.Context(), "/data/a.csv", strings.NewReader("overwritten")); !adapter.IsKind(err, adapter.InvalidRequest) {
			t.Errorf("Put of a holding: %v", err)
		}
		if err := s.Delete(t.Context(), "/data/a.csv"); !adapter.IsKind(err, adapter.InvalidRequest) {
			t.Errorf("Delete of a holding: %v", err)
		}
		if b := read(t, s, "/data/a.csv"); string(b) != "bytes of data/a.csv" {
			t.Errorf("the holding changed: %q", b)
		}
	})
}

func read(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	r, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b
}

// TestListFaults: List and Stat fail with a ServiceFailure that says how
// (PROPFIND is not retried), and a listing cut mid-answer is an error.
func TestListFaults(t *testing.T) {
	t.Parallel()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	davPut(t, d, "c/file", []byte("x"))
	p := servers.NewFaultProxy(t, d.URL)
	u := upstreamConfig(t, p.URL, "holdings: c\n")
	u.HeaderTimeout = 200 * time.Millisecond
	u.Retry = config.Retry{Max: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	u.Breaker = config.Breaker{Failures: 100, OpenFor: 300 * time.Millisecond}
	s := open(t, u, nil)
	for _, tc := range []struct {
		fault servers.Fault
		want  string
	}{
		{servers.ServerError, `upstream "dav" failed (HTTP 500) on`},
		{servers.Overloaded, `upstream "dav" is overloaded (HTTP 429)`},
		{servers.Hang, `upstream "dav" did not answer in time`},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			p.Set(tc.fault)
			defer p.Set(servers.Pass)
			for _, rd := range []struct {
				name string
				call func() error
			}{
				{"List", func() error { _, _, err := s.List(t.Context(), time.Time{}, ""); return err }},
				{"Stat", func() error { _, err := s.Stat(t.Context(), "/file"); return err }},
			} {
				p.ResetHits()
				err := rd.call()
				if e := adapter.AsException(err); err == nil || e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, tc.want) {
					t.Errorf("%s: %v, want a ServiceFailure with %q", rd.name, err, tc.want)
				}
				if n := p.Hits(""); n != 1 {
					t.Errorf("%s: %d requests; want 1", rd.name, n)
				}
			}
		})
	}
	if page, _, err := s.List(t.Context(), time.Time{}, ""); err != nil || len(page) != 1 || page[0].Key != "/file" {
		t.Errorf("after the faults: %+v, %v", page, err)
	}
}

func TestHoldingsOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ options, holdings, wantErr string }{
		{"prefix: d1/objects", "d1/objects", ""},
		{"prefix: d1\nholdings: ''", "", ""},
		{"holdings: /coll/x/", "coll/x", ""},
		{"holdings: a/../b", "", `options.holdings "a/../b" has a ".." segment`},
		{"holdings: a//b", "", `options.holdings "a//b" has an empty segment`},
	} {
		t.Run(tc.options, func(t *testing.T) {
			s, ok := mappingtest.CheckNew(t, upstreamConfig(t, "http://h/", tc.options), New, tc.wantErr)
			if ok && strings.Join(s.holdings, "/") != tc.holdings {
				t.Errorf("holdings %q, want %q", s.holdings, tc.holdings)
			}
		})
	}
}

// propfinds is how many PROPFIND requests the store measured in reg sent.
func propfinds(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "d1bridge_upstream_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == "PROPFIND" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
