package importer

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadManifest: CSV (columns in any order, quoted DNs, a BOM) and JSON
// lines give the same entries; every problem is reported with its line.
func TestLoadManifest(t *testing.T) {
	t.Parallel()
	const dn = "CN=Jane Doe,O=Example,C=US"
	want := &Entry{Path: "a/b.csv", PID: "doi:10.5072/X", FormatID: "text/csv", RightsHolder: dn,
		Access: &adapter.AccessPolicy{Allow: []adapter.AccessRule{
			{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}},
			{Subject: []string{dn}, Permission: []adapter.Permission{adapter.PermWrite}}}}}
	files := map[string]string{
		"m.csv":   "\ufeffpid,path,rightsHolder,formatId,access\ndoi:10.5072/X,a/b.csv,\"" + dn + "\",text/csv,\"read:public; write:" + dn + "\"\n,only/path.txt\n",
		"m.jsonl": `{"path":"a/b.csv","pid":"doi:10.5072/X","formatId":"text/csv","rightsHolder":"` + dn + `","access":"read:public;write:` + dn + `"}` + "\n\n" + `{"path":"only/path.txt"}` + "\n",
	}
	for name, content := range files {
		m, err := LoadManifest(writeFile(t, name, content))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := m["a/b.csv"]
		if len(m) != 2 || got == nil || got.PID != want.PID || got.FormatID != want.FormatID || got.RightsHolder != want.RightsHolder ||
			got.Access == nil || len(got.Access.Allow) != 2 || got.Access.Allow[1].Subject[0] != dn || got.Access.Allow[1].Permission[0] != adapter.PermWrite {
			t.Errorf("%s: %+v (%d entries), want %+v", name, got, len(m), want)
		}
		if e := m["only/path.txt"]; e == nil || e.PID != "" || e.Access != nil {
			t.Errorf("%s: the path-only entry is %+v", name, e)
		}
	}
	bad := map[string]string{
		"no path column": "pid,formatId\nx,text/csv\n",
		"unknown column": "path,owner\nx,y\n",
		"twice":          "path\na\na\n",
		"bad access":     "path,access\na,own:public\n",
		"unknown key":    `{"path":"a","size":3}` + "\n",
		"json no path":   `{"pid":"a"}` + "\n",
	}
	for name, content := range bad {
		ext := ".csv"
		if strings.HasPrefix(content, "{") {
			ext = ".jsonl"
		}
		if _, err := LoadManifest(writeFile(t, "m"+ext, content)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestGuessFormat: metadata by content, data by extension, text by its
// bytes, octet-stream otherwise; only formats of the list.
func TestGuessFormat(t *testing.T) {
	t.Parallel()
	formats := adapter.OfficialFormats()
	eml := []byte(`<?xml version="1.0"?><eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="p" system="s"><dataset/></eml:eml>`)
	tests := map[string]struct {
		name string
		head []byte
		want string
	}{
		"eml by content":      {"anything.dat", eml, "https://eml.ecoinformatics.org/eml-2.2.0"},
		"csv by extension":    {"x.csv", []byte("a,b\n"), "text/csv"},
		"png by extension":    {"x.png", []byte("\x89PNG\r\n\x1a\n"), "image/png"},
		"text by content":     {"README", []byte("plain words\n"), "text/plain"},
		"binary":              {"blob", []byte{0, 1, 2, 3, 0xff}, "application/octet-stream"},
		"ro-crate not listed": {"ro-crate-metadata.json", []byte(`{"@context": "https://w3id.org/ro/crate/1.1/context"}`), "application/json"},
	}
	for name, tc := range tests {
		if got := GuessFormat(formats, tc.name, tc.head); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

// TestProgressLine: the terminal line has a bar, the counts, the bytes of
// the total and the time left; without sizes the count gives the share.
func TestProgressLine(t *testing.T) {
	t.Parallel()
	items := []Item{{Size: 600}, {Size: 400}, {Size: 1000}, {Size: 0}}
	var b bytes.Buffer
	p := NewProgress(&b, true, time.Second, items)
	p.created.Add(1)
	p.skipped.Add(1)
	p.item(false).add(1000)
	got := p.line(10 * time.Second)
	for _, want := range []string{"[============            ]", "2/4 objects (1 created, 1 skipped, 0 failed)", "1.0 kB of 2.0 kB", "100 B/s", "about 10s left"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal line %q lacks %q", got, want)
		}
	}
	p = NewProgress(&b, false, time.Second, []Item{{Size: -1}, {Size: 5}})
	p.failed.Add(1)
	got = p.line(4 * time.Second)
	if strings.Contains(got, "[") || strings.Contains(got, " of ") || !strings.Contains(got, "1/2 objects (0 created, 0 skipped, 1 failed)") || !strings.Contains(got, "about 4s left") {
		t.Errorf("plain line %q", got)
	}
	p.Printf("failed: x")
	if !strings.HasSuffix(b.String(), "failed: x\n") {
		t.Errorf("message: %q", b.String())
	}
}
