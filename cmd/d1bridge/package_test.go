package main

import (
	"archive/zip"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// resourceMap is an OAI-ORE resource map aggregating pids, as the DataONE
// Python client writes them.
func resourceMap(orePID string, pids ...string) []byte {
	res := func(pid string) string { return "https://cn.dataone.org/cn/v2/resolve/" + url.PathEscape(pid) }
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>
<rdf:RDF xmlns:dcterms="http://purl.org/dc/terms/" xmlns:ore="http://www.openarchives.org/ore/terms/" xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
`)
	for _, p := range pids {
		fmt.Fprintf(&b, "  <rdf:Description rdf:about=%q><dcterms:identifier>%s</dcterms:identifier></rdf:Description>\n", res(p), p)
	}
	fmt.Fprintf(&b, "  <rdf:Description rdf:about=%q>\n", res(orePID)+"#aggregation")
	for _, p := range pids {
		fmt.Fprintf(&b, "    <ore:aggregates rdf:resource=%q/>\n", res(p))
	}
	fmt.Fprintf(&b, "  </rdf:Description>\n  <rdf:Description rdf:about=%q><dcterms:identifier>%s</dcterms:identifier></rdf:Description>\n</rdf:RDF>\n", res(orePID), orePID)
	return []byte(b.String())
}

// TestGetPackage streams BagIt zips of a resource map and its members, v1 (both
// path forms) and v2, and checks the bag: every member's bytes, the MD5 manifest,
// the tag files; a missing or unreadable member fails before any byte.
func TestGetPackage(t *testing.T) {
	s := startServer(t, "")
	create := func(pid, format string, data []byte, perms ...adapter.Permission) {
		t.Helper()
		sm := newSysmeta(pid, format, "MD5", data, perms...)
		if r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, bytes.NewReader(data), false)...); r.Status != 200 {
			t.Fatalf("create %s: %d %s", pid, r.Status, r.Body)
		}
	}
	members := map[string][]byte{"pkg/meta": []byte("a,b\n1,2\n"), "pkg:data#1": []byte("payload one"), "pkg-data-2": bytes.Repeat([]byte("x"), 300_000)}
	for pid, data := range members {
		create(pid, "text/csv", data)
	}
	ore := resourceMap("pkg-ore", "pkg/meta", "pkg:data#1", "pkg-data-2")
	create("pkg-ore", "http://www.openarchives.org/ore/terms", ore)
	members["pkg-ore"] = ore

	for _, path := range []string{
		"/d1/mn/v2/packages/application%2Fbagit-097/pkg-ore",
		"/d1/mn/v2/packages/application%2Fbagit-1.0/pkg-ore",
		"/d1/mn/v1/packages/application%2Fbagit-097/pkg-ore",
		"/d1/mn/v1/packages/pkg-ore",
	} {
		t.Run(path, func(t *testing.T) {
			r := s.get(t, path)
			if r.Status != 200 || r.Header.Get("Content-Type") != "application/zip" {
				t.Fatalf("%d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
			checkBag(t, r.Body, members)
		})
	}
	t.Run("a missing member fails before any byte", func(t *testing.T) {
		create("pkg-ore-missing", "http://www.openarchives.org/ore/terms", resourceMap("pkg-ore-missing", "pkg/meta", "no-such-member"))
		wantError(t, s.get(t, "/d1/mn/v2/packages/application%2Fbagit-097/pkg-ore-missing"), 404, "NotFound")
	})
	t.Run("an unreadable member fails before any byte", func(t *testing.T) {
		create("pkg-private", "text/csv", []byte("secret"), adapter.PermWrite) // no public read
		private := newSysmeta("pkg-private2", "text/csv", "MD5", []byte("secret"))
		private.RightsHolder, private.AccessPolicy = "CN=someone", nil
		if r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(private, strings.NewReader("secret"), false)...); r.Status != 200 {
			t.Fatalf("create private: %d %s", r.Status, r.Body)
		}
		create("pkg-ore-private", "http://www.openarchives.org/ore/terms", resourceMap("pkg-ore-private", "pkg/meta", "pkg-private2"))
		r := s.get(t, "/d1/mn/v2/packages/application%2Fbagit-097/pkg-ore-private")
		if r.Status != 401 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	})
	t.Run("unsupported type", func(t *testing.T) {
		wantError(t, s.get(t, "/d1/mn/v2/packages/application%2Fx-nope/pkg-ore"), 400, "InvalidRequest")
	})
	t.Run("not a resource map", func(t *testing.T) {
		wantError(t, s.get(t, "/d1/mn/v2/packages/application%2Fbagit-097/pkg-data-2"), 400, "InvalidRequest")
	})
}

// checkBag opens a BagIt zip and checks it holds exactly want's bytes, with a
// manifest that matches them.
func checkBag(t *testing.T, zipped []byte, want map[string][]byte) {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	files := map[string][]byte{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		i := strings.Index(f.Name, "/")
		files[f.Name[i+1:]] = b
	}
	for _, tag := range []string{"bagit.txt", "bag-info.txt", "manifest-md5.txt", "tagmanifest-md5.txt"} {
		if _, ok := files[tag]; !ok {
			t.Fatalf("the bag lacks %s (has %v)", tag, keys(files))
		}
	}
	payload := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(files["manifest-md5.txt"])), "\n") {
		sum, name, _ := strings.Cut(line, "  ")
		got := md5.Sum(files[name])
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("manifest: %s has MD5 %x, the manifest says %s", name, got, sum)
		}
		payload[string(files[name])] = true
	}
	if len(payload) != len(want) {
		t.Errorf("the bag has %d payload files, want %d", len(payload), len(want))
	}
	for pid, data := range want {
		if !payload[string(data)] {
			t.Errorf("the bytes of %q are not in the bag", pid)
		}
	}
	if !strings.Contains(string(files["bag-info.txt"]), fmt.Sprintf(".%d\n", len(want))) {
		t.Errorf("bag-info.txt Payload-Oxum does not count %d files: %s", len(want), files["bag-info.txt"])
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
