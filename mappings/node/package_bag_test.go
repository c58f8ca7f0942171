package node_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// bagFiles writes the package id of type typ and returns its zip entries by
// full name.
func (e *harvestEnv) bagFiles(typ, id string) map[string]string {
	e.t.Helper()
	p, err := e.n.Package(context.Background(), adapter.PublicSession(), typ, id, func(*adapter.SystemMetadata) bool { return true })
	if err != nil {
		e.t.Fatalf("package %q: %v", id, err)
	}
	var buf bytes.Buffer
	if err := p.Write(context.Background(), &buf); err != nil {
		e.t.Fatalf("writing the package: %v", err)
	}
	z, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		e.t.Fatalf("not a zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			e.t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		out[f.Name] = string(b)
	}
	return out
}

func tagFile(files map[string]string, tag string) (string, bool) {
	for name, body := range files {
		if strings.HasSuffix(name, "/"+tag) && strings.Count(name, "/") == 1 {
			return body, true
		}
	}
	return "", false
}

// TestBagIt10IsWrittenAsBagIt10: getPackage with packageType
// application/bagit-1.0 must give a BagIt 1.0 bag (RFC 8493): bagit.txt says
// "BagIt-Version: 1.0", and a payload path holding '%' is written %25 in the
// manifest (RFC 8493 §2.1.3). The node took the type and wrote a 0.97 bag
// with the path unencoded.
func TestBagIt10IsWrittenAsBagIt10(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.startTree()
	e.file("ds/50%.csv", "a\n", t0)
	if rep := e.datasets("tree"); rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass: %+v", rep)
	}
	files := e.bagFiles(adapter.PackageBagIt10, "resource_map_t:ds@v1")
	bagit, ok := tagFile(files, "bagit.txt")
	if !ok {
		t.Fatalf("no bagit.txt in %v", slices.Sorted(func(yield func(string) bool) {
			for k := range files {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if !strings.Contains(bagit, "BagIt-Version: 1.0") {
		t.Errorf("application/bagit-1.0 was asked for; bagit.txt says:\n%s", bagit)
	}
	manifest, _ := tagFile(files, "manifest-md5.txt")
	if !strings.Contains(manifest, "data/50%25.csv") {
		t.Errorf("a BagIt 1.0 manifest must percent-encode '%%' in paths; manifest:\n%s", manifest)
	}
}

// TestBagNameDotDot: a resource map whose identifier is ".." (a valid
// DataONE identifier: no whitespace, no control character) gave a bag whose
// every entry was "../…": unzipped, it wrote outside the directory it was
// unzipped in (zip slip). The bag's directory is "bag" then.
func TestBagNameDotDot(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.createObject("member-1", "text/csv", []byte("a,b\n"))
	ore := datapackage.ResourceMap("..", "member-1", nil, time.Time{})
	e.createObject("..", datapackage.FormatORE, ore)
	for name := range e.bagFiles(adapter.PackageBagIt097, "..") {
		if strings.HasPrefix(name, "../") || strings.HasPrefix(name, "./") || strings.Contains(name, "/../") {
			t.Errorf("zip entry %q escapes the bag's directory", name)
		}
	}
}
