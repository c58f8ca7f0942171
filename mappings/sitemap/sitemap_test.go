package sitemap

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/mappingtest"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// site is testdata/site served by a real nginx (a static server: GET with
// ranges, ETags and If-Match), its {{HOST}} placeholders replaced by the
// server's host:port.
type site struct {
	servers.DAV
	host string
}

func serve(t *testing.T) site {
	t.Helper()
	d := servers.NginxDAV(t, servers.DAVOptions{})
	s := site{DAV: d, host: strings.TrimSuffix(strings.TrimPrefix(d.URL, "http://"), "/")}
	err := filepath.WalkDir("testdata/site", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("testdata/site", p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s.write(t, rel, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// write puts b at rel under the server's root with the host filled in,
// gzip'd again when rel ends in .gz.
func (s site) write(t *testing.T, rel string, b []byte) {
	t.Helper()
	gz := strings.HasSuffix(rel, ".gz")
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	b = bytes.ReplaceAll(b, []byte("{{HOST}}"), []byte(s.host))
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		b = buf.Bytes()
	}
	p := filepath.Join(s.Root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// url is the URL of rel on the server.
func (s site) url(rel string) string { return "http://" + s.host + "/" + rel }

func (s site) open(t *testing.T, options string) *Source {
	t.Helper()
	u := mappingtest.UpstreamConfig(t, config.UpstreamSitemap, "site", s.URL, options)
	return mappingtest.Open(t, u, nil, New)
}

// walk collects a walk's datasets by ID.
// walk walks src: the datasets by id, and in order (the pages that describe
// none, node.ErrNotADataset, are in got only).
func walk(t *testing.T, src *Source, since time.Time) (map[string]*node.Dataset, []string) {
	t.Helper()
	got := map[string]*node.Dataset{}
	var order []string
	if err := src.Walk(t.Context(), since, func(d *node.Dataset) error {
		if got[d.ID] != nil {
			t.Errorf("dataset %q walked twice", d.ID)
		}
		got[d.ID] = d
		if !errors.Is(d.Problem, node.ErrNotADataset) {
			order = append(order, d.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got, order
}

type wantFile struct {
	path, name, format string
	size               int64
	checksum           adapter.Checksum
}

type wantDataset struct {
	page, marker, version, title string // marker: the tag before the JSON-LD
	modified                     time.Time
	files                        []wantFile
}

func TestWalkSite(t *testing.T) {
	t.Parallel()
	s := serve(t)
	src := s.open(t, "")
	doi := func(id string) string { return "https://doi.org/10.5072/d1b." + id }
	want := map[string]wantDataset{
		doi("ocean-temp"): {page: "datasets/ocean-temp.html", marker: `<SCRIPT type="application/ld+json">`,
			version: "2024-03-01T10:00:00Z", modified: time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC),
			title: "Ocean temperature profiles at Station ALOHA, 2023",
			files: []wantFile{
				{"data/ocean/temps.csv", "temps.csv", "text/csv", 191, adapter.Checksum{}},
				{"data/ocean/README.txt", "README.txt", "text/plain", -1, adapter.Checksum{}},
			}},
		s.url("datasets/nitrous-oxide.html"): {page: "datasets/nitrous-oxide.html", marker: `<script type='application/ld+json' id="dataset-jsonld">`,
			version: "2024-05-10", modified: time.Date(2024, 5, 10, 0, 0, 0, 0, time.UTC),
			title: "Nitrous oxide concentrations from the R/V Falkor expedition FK160115 in the Central Pacific",
			files: []wantFile{
				{"data/n2o/n2o.tsv", "n2o.tsv", "text/tsv", 159, adapter.Checksum{Algorithm: "SHA-256", Value: "27cb5b8018f00c1089a15dbfdfff31b8597dbea6441f3ea3d732c500536ac3e0"}},
				{"data/n2o/casts.csv", "casts.csv", "text/csv", 43, adapter.Checksum{Algorithm: "MD5", Value: "7244fa3e4d5ed840df8bce40cf957359"}},
			}},
		"doi:10.5072/d1b.soil": {page: "datasets/soil-cores.html", marker: `<script type="application/ld+json; charset=utf-8">`,
			version: "2024-06-15T08:30:00+02:00", modified: time.Date(2024, 6, 15, 6, 30, 0, 0, time.UTC),
			title: "Soil organic carbon in peat cores, Flow Country 2022",
			files: []wantFile{{"data/soil/cores.tsv", "cores.tsv", "text/tsv", -1, adapter.Checksum{}}}},
		s.url("datasets/lake-survey.html"): {page: "datasets/lake-survey.html", marker: `<script type="application/ld+json">`,
			version: "2022-11-30", modified: time.Date(2022, 11, 30, 0, 0, 0, 0, time.UTC),
			title: "Lake Tahoe clarity survey, 1968-2021"},
	}
	about := s.url("about.html")

	t.Run("everything", func(t *testing.T) {
		got, order := walk(t, src, time.Time{})
		// The page without JSON-LD (about) describes no dataset.
		wantOrder := []string{doi("ocean-temp"), s.url("datasets/nitrous-oxide.html"), "doi:10.5072/d1b.soil", s.url("datasets/lake-survey.html")}
		if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
			t.Fatalf("walked %q\nwant %q", order, wantOrder)
		}
		for id, w := range want {
			check(t, s, got[id], w)
		}
		if d := got[about]; d == nil || !errors.Is(d.Problem, node.ErrNotADataset) || d.Page != about {
			t.Errorf("the page without JSON-LD: %+v, want a page that describes no dataset", d)
		}
	})

	t.Run("since", func(t *testing.T) {
		// A day's lastmod covers its day; pages without lastmod always come.
		got, order := walk(t, src, time.Date(2024, 5, 10, 12, 0, 0, 0, time.UTC))
		wantOrder := []string{s.url("datasets/nitrous-oxide.html"), "doi:10.5072/d1b.soil", s.url("datasets/lake-survey.html")}
		if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
			t.Fatalf("walked %q\nwant %q", order, wantOrder)
		}
		check(t, s, got["doi:10.5072/d1b.soil"], want["doi:10.5072/d1b.soil"])
	})

	t.Run("include", func(t *testing.T) {
		_, order := walk(t, s.open(t, `{include: "/datasets/(ocean|soil)"}`), time.Time{})
		if wantOrder := []string{doi("ocean-temp"), "doi:10.5072/d1b.soil"}; strings.Join(order, " ") != strings.Join(wantOrder, " ") {
			t.Fatalf("walked %q\nwant %q", order, wantOrder)
		}
	})

	t.Run("sitemap option", func(t *testing.T) {
		_, order := walk(t, s.open(t, `{sitemap: sitemaps/datasets-2.xml.gz}`), time.Time{})
		if wantOrder := []string{"doi:10.5072/d1b.soil", s.url("datasets/lake-survey.html")}; strings.Join(order, " ") != strings.Join(wantOrder, " ") {
			t.Fatalf("walked %q\nwant %q", order, wantOrder)
		}
	})

	t.Run("failing pages", func(t *testing.T) {
		// A page that is missing, or not a page: a Problem each, and the
		// walk goes on.
		s.write(t, "sitemaps/broken.xml", []byte(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://{{HOST}}/datasets/gone.html</loc></url>
<url><loc>mailto:data@example.org</loc></url>
<url><loc>/datasets/lake-survey.html</loc></url>
</urlset>`))
		got, order := walk(t, s.open(t, `{sitemap: sitemaps/broken.xml}`), time.Time{})
		if len(order) != 3 {
			t.Fatalf("walked %q", order)
		}
		if err := got[s.url("datasets/gone.html")].Problem; !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("missing page: %v", err)
		}
		if err := got["mailto:data@example.org"].Problem; err == nil {
			t.Error("a mailto: URL has no problem")
		}
		check(t, s, got[s.url("datasets/lake-survey.html")], want[s.url("datasets/lake-survey.html")])
	})

	t.Run("get", func(t *testing.T) {
		ctx := t.Context()
		data, err := os.ReadFile(filepath.Join(s.Root, "data/ocean/temps.csv"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := src.Get(ctx, s.url("data/ocean/temps.csv"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rs, ok := r.(io.ReadSeeker)
		if !ok {
			t.Fatalf("Get returned a %T, which cannot seek", r)
		}
		if n, err := rs.Seek(0, io.SeekEnd); err != nil || n != int64(len(data)) {
			t.Fatalf("size %d, %v; want %d", n, err, len(data))
		}
		if _, err := rs.Seek(100, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 20)
		if _, err := io.ReadFull(rs, part); err != nil || string(part) != string(data[100:120]) {
			t.Fatalf("range 100-119: %q, %v; want %q", part, err, data[100:120])
		}
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if all, err := io.ReadAll(rs); err != nil || string(all) != string(data) {
			t.Fatalf("whole file: %q, %v", all, err)
		}
		for _, key := range []string{s.url("data/ocean/missing.csv"), "ftp://" + s.host + "/data/ocean/temps.csv", "no url"} {
			if _, err := src.Get(ctx, key); !adapter.IsKind(err, adapter.NotFound) {
				t.Errorf("Get(%q): %v, want NotFound", key, err)
			}
		}
	})

	t.Run("missing sitemap", func(t *testing.T) {
		err := s.open(t, `{sitemap: /nowhere.xml}`).Walk(t.Context(), time.Time{}, func(*node.Dataset) error { return nil })
		if !adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), s.url("nowhere.xml")) || !strings.Contains(err.Error(), "404") {
			t.Fatalf("walk of a missing sitemap: %v", err)
		}
	})
}

// TestWalkSiteChanges edits a page and its lastmod: a walk since the time
// before the edit sees the new version and the pages without lastmod only.
func TestWalkSiteChanges(t *testing.T) {
	t.Parallel()
	s := serve(t)
	src := s.open(t, "")
	since := time.Date(2024, 6, 20, 0, 0, 0, 0, time.UTC)
	_, order := walk(t, src, since)
	if wantOrder := []string{s.url("datasets/lake-survey.html")}; strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Fatalf("before the edit, walked %q\nwant %q", order, wantOrder)
	}
	edit := func(rel, old, new string) {
		b, err := os.ReadFile(filepath.Join(s.Root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s holds no %q", rel, old)
		}
		s.write(t, rel, bytes.ReplaceAll(b, []byte(old), []byte(new)))
	}
	edit("datasets/ocean-temp.html", `"name": "Ocean temperature profiles at Station ALOHA, 2023",
        "description"`, `"name": "Ocean temperature profiles at Station ALOHA, 2023 (revised)",
        "description"`)
	edit("sitemaps/datasets-1.xml", "2024-03-01T10:00:00Z", "2024-07-01T00:00:00Z")

	got, order := walk(t, src, since)
	id := "https://doi.org/10.5072/d1b.ocean-temp"
	if wantOrder := []string{id, s.url("datasets/lake-survey.html")}; strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Fatalf("after the edit, walked %q\nwant %q", order, wantOrder)
	}
	d := got[id]
	if d.Version != "2024-07-01T00:00:00Z" || !d.Modified.Equal(time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("version %q modified %v", d.Version, d.Modified)
	}
	if d.Facts.Title != "Ocean temperature profiles at Station ALOHA, 2023 (revised)" || !bytes.Contains(d.Metadata.Body, []byte("(revised)")) {
		t.Errorf("title %q; metadata %s", d.Facts.Title, d.Metadata.Body)
	}
}

// TestWalkSiteDown stops nginx: a walk fails at once with a ServiceFailure
// naming the sitemap, and so does a Get.
func TestWalkSiteDown(t *testing.T) {
	t.Parallel()
	s := serve(t)
	src := s.open(t, "")
	pid, err := os.ReadFile(filepath.Join(filepath.Dir(s.Root), "nginx.pid"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(n, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(n, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nginx did not stop")
		}
	}
	start := time.Now()
	err = src.Walk(t.Context(), time.Time{}, func(d *node.Dataset) error {
		t.Errorf("walked %q with the server down", d.ID)
		return nil
	})
	if !adapter.IsKind(err, adapter.ServiceFailure) || !strings.Contains(err.Error(), s.url("sitemap.xml")) {
		t.Fatalf("walk with the server down: %v", err)
	}
	if _, err := src.Get(t.Context(), s.url("data/ocean/temps.csv")); !adapter.IsKind(err, adapter.ServiceFailure) {
		t.Fatalf("get with the server down: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("failing took %v", d)
	}
}

// TestSameFileNames: a page may list two files under one name (readme.txt
// of two folders of a Dataverse dataset): each gets a name of its own, and
// so an identifier. Both were D@v1/readme.txt, which the catalog refused:
// the dataset failed every pass.
func TestSameFileNames(t *testing.T) {
	t.Parallel()
	s := serve(t)
	s.write(t, "data/dup/a/readme.txt", []byte("first\n"))
	s.write(t, "data/dup/b/readme.txt", []byte("second\n"))
	s.write(t, "datasets/dup.html", []byte(`<script type="application/ld+json">{"@context": "https://schema.org/", "@type": "Dataset",
"@id": "doi:10.5072/d1b.dup", "name": "Two readmes", "distribution": [
{"@type": "DataDownload", "name": "readme.txt", "contentUrl": "../data/dup/a/readme.txt"},
{"@type": "DataDownload", "name": "readme.txt", "contentUrl": "../data/dup/b/readme.txt"}]}</script>`))
	s.write(t, "sitemaps/dup.xml", []byte(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://{{HOST}}/datasets/dup.html</loc></url></urlset>`))
	src := s.open(t, `{sitemap: sitemaps/dup.xml}`)

	dir := t.TempDir()
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"), sqlcatalog.WithNodeID("urn:node:t"))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	n := node.New("urn:node:t", blobs, cat, nil)
	t.Cleanup(func() { n.Close() })
	n.StartDatasets(src, node.DatasetOptions{Name: "site", Reader: src, Readers: []string{adapter.SubjectPublic}})
	if rep, err := n.HarvestDatasets(t.Context(), "site"); err != nil || rep.Registered != 1 || rep.Failed != 0 {
		t.Fatalf("pass: %+v, %v", rep, err)
	}
	for pid, want := range map[string]string{"doi:10.5072/d1b.dup@v1/readme.txt": "first\n", "doi:10.5072/d1b.dup@v1/readme-2.txt": "second\n"} {
		obj, err := n.Get(t.Context(), adapter.PublicSession(), pid)
		if err != nil {
			t.Errorf("%s: %v", pid, err)
			continue
		}
		b, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		if string(b) != want {
			t.Errorf("%s holds %q, want %q", pid, b, want)
		}
	}
}

// check compares a walked dataset with what its page says.
func check(t *testing.T, s site, d *node.Dataset, w wantDataset) {
	t.Helper()
	if d == nil {
		t.Errorf("%s: not walked", w.page)
		return
	}
	if d.Problem != nil {
		t.Errorf("%s: %v", w.page, d.Problem)
		return
	}
	if d.Version != w.version || !d.Modified.Equal(w.modified) {
		t.Errorf("%s: version %q modified %v; want %q %v", w.page, d.Version, d.Modified, w.version, w.modified)
	}
	if d.Page != s.url(w.page) {
		t.Errorf("%s: page %q, want %q", w.page, d.Page, s.url(w.page))
	}
	page, err := os.ReadFile(filepath.Join(s.Root, w.page))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(page, []byte(w.marker))
	if i < 0 {
		t.Fatalf("%s holds no %s", w.page, w.marker)
	}
	block := page[i+len(w.marker):]
	block = bytes.TrimSpace(block[:bytes.Index(block, []byte("</"))])
	if d.Metadata == nil || d.Metadata.FormatID != "science-on-schema.org/Dataset;ld+json" || !bytes.Equal(d.Metadata.Body, block) {
		t.Errorf("%s: metadata %+v\nwant the block %s", w.page, d.Metadata, block)
	} else if !json.Valid(d.Metadata.Body) {
		t.Errorf("%s: the metadata is not JSON", w.page)
	}
	if d.Facts.Title != w.title {
		t.Errorf("%s: title %q, want %q", w.page, d.Facts.Title, w.title)
	}
	if len(d.Files) != len(w.files) {
		t.Errorf("%s: files %+v\nwant %+v", w.page, d.Files, w.files)
		return
	}
	for i, f := range d.Files {
		wf := w.files[i]
		want := node.Found{Key: s.url(wf.path), FileName: wf.name, FormatID: wf.format, Size: wf.size, Checksum: wf.checksum}
		if wf.checksum.Value != "" {
			want.Claim = "the page's JSON-LD gives" // checked against the bytes
		}
		if f != want {
			t.Errorf("%s: file %d is %+v\nwant %+v", w.page, i, f, want)
		}
	}
}
