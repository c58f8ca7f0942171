package main

// The end-to-end proof of issue 16: a repository's existing holdings, served
// by real software nobody here wrote, become DataONE data packages that
// DataONE's own Python software accepts. For each input (a directory tree,
// versitygw's S3, nginx's WebDAV, pyoai's OAI-PMH provider, an nginx site
// with a schema.org sitemap, an OCFL storage root that ocfl-py builds and
// validates) the test:
//
//  1. builds a collection holding datasets, a shared file and (next) a
//     deleted record;
//  2. starts the binary with the source as an upstream harvested every
//     second, and waits until the catalog holds exactly the objects expected;
//  3. runs testdata/check_packages.py (dataone.libclient, d1_common's
//     ResourceMap, dataone.scimeta, bagit) over the node: resource map heads,
//     their members, the science metadata's validity, get and
//     getSystemMetadata of every member, getPackage bags;
//  4. changes the upstream (a file changed, a file removed, a dataset
//     withdrawn), waits for the next harvest and checks the chains
//     (obsoletes/obsoletedBy, dateUploaded increasing), the archived flags,
//     the identifiers kept, and that no other object's system metadata moved;
//     then runs the checker again.
//
// Every DataONE document the test reads (listObjects, system metadata) is
// validated against the DataONE schemas by server.do.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	formatORE    = "http://www.openarchives.org/ore/terms"
	formatEML220 = "https://eml.ecoinformatics.org/eml-2.2.0"
	formatSOSO   = "science-on-schema.org/Dataset;ld+json"
)

// pkgWant is a resource map head and the members it must aggregate.
type pkgWant struct {
	Metadata string   `json:"metadata"`
	Format   string   `json:"-"` // the science metadata's formatId
	Data     []string `json:"data"`
}

// phaseWant is the catalog expected after a harvest.
type phaseWant struct {
	// heads are the resource maps that are heads, by pid.
	heads map[string]pkgWant
	// extra are the other objects registered by now (older versions).
	extra []string
	// archived are the objects archived by this phase (on top of the
	// previous phase's).
	archived []string
	// obsoletes are {newer, older} pairs made by this phase.
	obsoletes [][2]string
	// afterFull are the objects archived once a walk of everything (every
	// harvest.fullInterval) sees their dataset gone: the source's walks of
	// what changed cannot show it.
	afterFull []string
}

// pids are every object the phase names.
func (w phaseWant) pids() []string {
	out := slices.Clone(w.extra)
	for m, p := range w.heads {
		out = append(out, m, p.Metadata)
		out = append(out, p.Data...)
	}
	out = append(out, w.archived...)
	out = append(out, w.afterFull...)
	for _, o := range w.obsoletes {
		out = append(out, o[0], o[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// datasetFixture is one input: the upstream entry of the configuration, the
// catalog expected before and after change.
type datasetFixture struct {
	config         string // YAML: the upstreams list item(s), and store if any
	phase1, phase2 phaseWant
	change         func(t *testing.T)
}

func TestDatasets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		build func(t *testing.T) datasetFixture
	}{
		{"files", datasetsFiles},
		{"s3", datasetsS3},
		{"webdav", datasetsWebDAV},
		{"oaipmh", datasetsOAIPMH},
		{"sitemap", datasetsSitemap},
		{"ocfl", datasetsOCFL},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runDatasets(t, c.build(t))
		})
	}
}

// The tree the file-like stores hold (files, S3, WebDAV), under prefix p:
// ds1 (a.csv changes, b.csv is shared, c.csv goes), ds2 (unchanged), ds3
// (withdrawn), and a file above the datasets' level (not a dataset's).
var treeFiles = map[string]string{
	"ds1/a.csv":   "x,y\n1,2\n",
	"ds1/b.csv":   "p,q\n3,4\n",
	"ds1/c.csv":   "c\n1\n",
	"ds2/x.txt":   "hello\n",
	"ds3/y.csv":   "y\n1\n",
	"README.txt":  "the collection\n",
	"ds2/sub/z.c": "int z;\n",
}

const treeChangedA = "x,y\n1,2\n5,6\n"

// treeWant is what a tree harvested with pidPrefix p gives.
func treeWant(p string) (phaseWant, phaseWant) {
	d1, d2, d3 := p+"ds1", p+"ds2", p+"ds3"
	one := phaseWant{heads: map[string]pkgWant{
		"resource_map_" + d1 + "@v1": {d1 + "@v1", formatEML220, []string{d1 + "@v1/a.csv", d1 + "@v1/b.csv", d1 + "@v1/c.csv"}},
		"resource_map_" + d2 + "@v1": {d2 + "@v1", formatEML220, []string{d2 + "@v1/sub/z.c", d2 + "@v1/x.txt"}},
		"resource_map_" + d3 + "@v1": {d3 + "@v1", formatEML220, []string{d3 + "@v1/y.csv"}},
	}}
	two := phaseWant{
		heads: map[string]pkgWant{
			"resource_map_" + d1 + "@v2": {d1 + "@v2", formatEML220, []string{d1 + "@v1/b.csv", d1 + "@v2/a.csv"}},
			"resource_map_" + d2 + "@v1": one.heads["resource_map_"+d2+"@v1"],
		},
		archived: []string{d1 + "@v1/c.csv", "resource_map_" + d3 + "@v1", d3 + "@v1", d3 + "@v1/y.csv"},
		obsoletes: [][2]string{
			{"resource_map_" + d1 + "@v2", "resource_map_" + d1 + "@v1"},
			{d1 + "@v2", d1 + "@v1"},
			{d1 + "@v2/a.csv", d1 + "@v1/a.csv"},
		},
	}
	return one, two
}

func datasetsFiles(t *testing.T) datasetFixture {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for rel, body := range treeFiles {
		write(rel, body)
	}
	one, two := treeWant("files:")
	return datasetFixture{
		config: fmt.Sprintf(`upstreams:
  - name: archive
    type: files
    options: {root: %q}
    harvest: {interval: 1s, depth: 1, pidPrefix: "files:", readers: [public]}
`, root),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			write("ds1/a.csv", treeChangedA)
			for _, p := range []string{"ds1/c.csv", "ds3"} {
				if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

func datasetsS3(t *testing.T) datasetFixture {
	s3 := servers.VersityGW(t)
	mc, err := minio.New(strings.TrimPrefix(s3.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3.AccessKey, s3.Secret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, rel, body string) {
		_, err := mc.PutObject(context.Background(), s3.Bucket, "collection/"+rel, strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		if err != nil {
			t.Fatalf("putting %s: %v", rel, err)
		}
	}
	for rel, body := range treeFiles {
		put(t, rel, body)
	}
	one, two := treeWant("s3:")
	return datasetFixture{
		// The bucket is the node's store too: what the node writes goes
		// under d1bridge/, which the harvest does not list.
		config: fmt.Sprintf(`upstreams:
  - name: bucket
    type: s3
    baseURL: %s
    options: {bucket: %s, accessKey: %s, secretKey: %s, prefix: d1bridge/, holdings: collection/}
    harvest: {interval: 1s, depth: 1, pidPrefix: "s3:", readers: [public]}
store: bucket
`, s3.Endpoint, s3.Bucket, s3.AccessKey, s3.Secret),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			put(t, "ds1/a.csv", treeChangedA)
			for _, k := range []string{"ds1/c.csv", "ds3/y.csv"} {
				if err := mc.RemoveObject(context.Background(), s3.Bucket, "collection/"+k, minio.RemoveObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

func datasetsWebDAV(t *testing.T) datasetFixture {
	d := servers.NginxDAV(t, servers.DAVOptions{})
	send := func(t *testing.T, method, rel, body string) {
		req, err := http.NewRequest(method, d.URL+"datasets/"+rel, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s", method, rel, resp.Status)
		}
	}
	for rel, body := range treeFiles {
		send(t, http.MethodPut, rel, body)
	}
	one, two := treeWant("dav:")
	return datasetFixture{
		config: fmt.Sprintf(`upstreams:
  - name: share
    type: webdav
    baseURL: %s
    options: {holdings: /datasets/}
    harvest: {interval: 1s, depth: 1, pidPrefix: "dav:", readers: [public]}
`, d.URL),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			send(t, http.MethodPut, "ds1/a.csv", treeChangedA)
			send(t, http.MethodDelete, "ds1/c.csv", "")
			send(t, http.MethodDelete, "ds3/", "")
		},
	}
}

// oaiFixture is the repository mappings/oaipmh/testdata/provider.py serves
// (its doc says the shape; the types are copied from that package's test).
type oaiFixture struct {
	Formats []string           `json:"formats,omitempty"`
	Sets    []string           `json:"sets"`
	Records []oaiRecord        `json:"records"`
	Landing map[string]oaiPage `json:"landing"`
}

type oaiRecord struct {
	ID        string              `json:"id"`
	Datestamp string              `json:"datestamp"`
	Deleted   bool                `json:"deleted,omitempty"`
	DC        map[string][]string `json:"dc,omitempty"`
}

type oaiPage struct {
	Files []oaiFile `json:"files"`
}

type oaiFile struct {
	Name     string `json:"name"`
	Type     string `json:"type,omitempty"`
	Content  string `json:"content"`
	Modified string `json:"modified,omitempty"`
}

func datasetsOAIPMH(t *testing.T) datasetFixture {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "repository.json")
	write := func(t *testing.T, f oaiFixture) {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(data+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(data+".tmp", data); err != nil { // never half a file
			t.Fatal(err)
		}
	}
	write(t, oaiFixture{})
	origin := startPython(t, fixturesPython(t), filepath.Join(root, "mappings", "oaipmh", "testdata", "provider.py"), "/oai?verb=Identify", data)

	dc := func(n, title string) map[string][]string {
		return map[string][]string{"title": {title}, "creator": {"Fixture, Ann"}, "identifier": {origin + "/landing/" + n}}
	}
	const t1, t2 = "2024-01-02T03:04:05Z", "2024-02-01T00:00:00Z"
	repo := oaiFixture{
		Formats: []string{"oai_dc", "oai_datacite"},
		Records: []oaiRecord{
			{ID: "oai:fixture:1", Datestamp: t1, DC: dc("1", "Stream chemistry")},
			{ID: "oai:fixture:2", Datestamp: "2024-01-03T00:00:00Z", DC: dc("2", "Bird counts")},
			{ID: "oai:fixture:3", Datestamp: "2024-01-03T00:00:00Z", Deleted: true}, // never registered
		},
		Landing: map[string]oaiPage{
			"1": {Files: []oaiFile{
				{Name: "table.csv", Type: "text/csv", Content: "a,b\n1,2\n", Modified: t1},
				{Name: "readme.txt", Type: "text/plain", Content: "read me\n", Modified: t1},
				{Name: "extra.csv", Type: "text/csv", Content: "e\n1\n", Modified: t1},
			}},
			"2": {Files: []oaiFile{{Name: "data.csv", Type: "text/csv", Content: "n\n7\n", Modified: t1}}},
		},
	}
	write(t, repo)
	one := phaseWant{heads: map[string]pkgWant{
		"resource_map_oai:fixture:1@v1": {"oai:fixture:1@v1", formatEML220, []string{"oai:fixture:1@v1/extra.csv", "oai:fixture:1@v1/readme.txt", "oai:fixture:1@v1/table.csv"}},
		"resource_map_oai:fixture:2@v1": {"oai:fixture:2@v1", formatEML220, []string{"oai:fixture:2@v1/data.csv"}},
	}}
	two := phaseWant{
		heads: map[string]pkgWant{
			"resource_map_oai:fixture:1@v2": {"oai:fixture:1@v2", formatEML220, []string{"oai:fixture:1@v1/readme.txt", "oai:fixture:1@v2/table.csv"}},
		},
		archived: []string{"oai:fixture:1@v1/extra.csv", "resource_map_oai:fixture:2@v1", "oai:fixture:2@v1", "oai:fixture:2@v1/data.csv"},
		obsoletes: [][2]string{
			{"resource_map_oai:fixture:1@v2", "resource_map_oai:fixture:1@v1"},
			{"oai:fixture:1@v2", "oai:fixture:1@v1"},
			{"oai:fixture:1@v2/table.csv", "oai:fixture:1@v1/table.csv"},
		},
	}
	return datasetFixture{
		config: fmt.Sprintf(`upstreams:
  - name: repo
    type: oaipmh
    baseURL: %s/oai
    harvest: {interval: 1s, readers: [public]}
`, origin),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			repo.Records[0].Datestamp = t2
			repo.Records[1] = oaiRecord{ID: "oai:fixture:2", Datestamp: t2, Deleted: true}
			repo.Landing["1"] = oaiPage{Files: []oaiFile{
				{Name: "table.csv", Type: "text/csv", Content: "a,b\n1,2\n3,4\n", Modified: t2},
				repo.Landing["1"].Files[1],
			}}
			write(t, repo)
		},
	}
}

func datasetsSitemap(t *testing.T) datasetFixture {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := servers.NginxDAV(t, servers.DAVOptions{})
	host := strings.TrimSuffix(strings.TrimPrefix(d.URL, "http://"), "/")
	site := filepath.Join(root, "mappings", "sitemap", "testdata", "site")
	// write puts b at rel on the server with {{HOST}} filled in, gzip'd
	// when rel ends in .gz (b is given plain).
	write := func(t *testing.T, rel string, b []byte) {
		b = bytes.ReplaceAll(b, []byte("{{HOST}}"), []byte(host))
		if strings.HasSuffix(rel, ".gz") {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(b)
			zw.Close()
			b = buf.Bytes()
		}
		p := filepath.Join(d.Root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(site, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(rel, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := buf.ReadFrom(zr); err != nil {
				t.Fatal(err)
			}
			b = buf.Bytes()
		}
		return b
	}
	edit := func(t *testing.T, rel, old, new string) {
		b := read(rel)
		if cur, err := os.ReadFile(filepath.Join(d.Root, filepath.FromSlash(rel))); err == nil && !strings.HasSuffix(rel, ".gz") {
			b = bytes.ReplaceAll(cur, []byte(host), []byte("{{HOST}}"))
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s holds no %q", rel, old)
		}
		write(t, rel, bytes.Replace(b, []byte(old), []byte(new), 1))
	}
	for _, rel := range []string{"about.html", "data/n2o/casts.csv", "data/n2o/n2o.tsv", "data/ocean/README.txt", "data/ocean/temps.csv",
		"data/soil/cores.tsv", "datasets/lake-survey.html", "datasets/nitrous-oxide.html", "datasets/ocean-temp.html",
		"datasets/soil-cores.html", "sitemap.xml", "sitemaps/datasets-1.xml", "sitemaps/datasets-2.xml.gz"} {
		write(t, rel, read(rel))
	}
	ocean := "https://doi.org/10.5072/d1b.ocean-temp"
	n2o := "http://" + host + "/datasets/nitrous-oxide.html"
	soil := "doi:10.5072/d1b.soil"
	lake := "http://" + host + "/datasets/lake-survey.html"
	one := phaseWant{heads: map[string]pkgWant{
		"resource_map_" + ocean + "@v1": {ocean + "@v1", formatSOSO, []string{ocean + "@v1/README.txt", ocean + "@v1/temps.csv"}},
		"resource_map_" + n2o + "@v1":   {n2o + "@v1", formatSOSO, []string{n2o + "@v1/casts.csv", n2o + "@v1/n2o.tsv"}},
		"resource_map_" + soil + "@v1":  {soil + "@v1", formatSOSO, []string{soil + "@v1/cores.tsv"}},
		"resource_map_" + lake + "@v1":  {lake + "@v1", formatSOSO, nil},
	}}
	two := phaseWant{
		heads: map[string]pkgWant{
			// The page's JSON-LD changed (temps.csv's size): new metadata.
			"resource_map_" + ocean + "@v2": {ocean + "@v2", formatSOSO, []string{ocean + "@v1/README.txt", ocean + "@v2/temps.csv"}},
			"resource_map_" + n2o + "@v1":   one.heads["resource_map_"+n2o+"@v1"],
			// The page is the same, its lastmod and cores.tsv's bytes are
			// not: the same metadata, a new cores.tsv.
			"resource_map_" + soil + "@v2": {soil + "@v1", formatSOSO, []string{soil + "@v2/cores.tsv"}},
		},
		obsoletes: [][2]string{
			{"resource_map_" + ocean + "@v2", "resource_map_" + ocean + "@v1"},
			{ocean + "@v2", ocean + "@v1"},
			{ocean + "@v2/temps.csv", ocean + "@v1/temps.csv"},
			{"resource_map_" + soil + "@v2", "resource_map_" + soil + "@v1"},
			{soil + "@v2/cores.tsv", soil + "@v1/cores.tsv"},
		},
		// A page gone from the sitemap is seen by a walk of everything only.
		afterFull: []string{"resource_map_" + lake + "@v1", lake + "@v1"},
	}
	return datasetFixture{
		config: fmt.Sprintf(`upstreams:
  - name: portal
    type: sitemap
    baseURL: %s
    harvest: {interval: 1s, fullInterval: 2s, readers: [public]}
`, strings.TrimSuffix(d.URL, "/")),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			// The data first, then the pages, then the sitemaps.
			temps := "time,depth,temp\n" + strings.Repeat("2023-01-01,10,24.5\n", 12)
			write(t, "data/ocean/temps.csv", []byte(temps))
			write(t, "data/soil/cores.tsv", []byte("core\tdepth\tsoc\nA\t10\t41.5\nB\t20\t38.0\n"))
			edit(t, "datasets/ocean-temp.html", `"contentSize": 191`, fmt.Sprintf(`"contentSize": %d`, len(temps)))
			edit(t, "sitemaps/datasets-1.xml", "2024-03-01T10:00:00Z", "2024-07-01T00:00:00Z")
			write(t, "sitemaps/datasets-2.xml.gz", []byte(`<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url>
    <loc>http://{{HOST}}/datasets/soil-cores.html</loc>
    <lastmod>2024-07-02T00:00:00Z</lastmod>
  </url>
</urlset>
`))
		},
	}
}

func datasetsOCFL(t *testing.T) datasetFixture {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	buildOCFL(t, root, "3", "yes")
	const d1, d2 = "ark:/99999/fk4-dataset-1", "ark:/99999/fk4-dataset-2"
	one := phaseWant{
		heads: map[string]pkgWant{
			// eml.xml, the object's own EML, is the science metadata of
			// every version: unchanged, it keeps its pid.
			"resource_map_" + d1 + "@v3": {d1 + "@v1", formatEML220, []string{d1 + "@v2/data/a.csv", d1 + "@v3/data/c.csv", d1 + "@v3/data/e.csv"}},
			// RO-Crate, which the CN does not index: EML is generated.
			"resource_map_" + d2 + "@v1": {d2 + "@v1", formatEML220, []string{d2 + "@v1/measurements.tsv"}},
		},
		extra:    []string{"resource_map_" + d1 + "@v1", "resource_map_" + d1 + "@v2", d1 + "@v1/data/a.csv"},
		archived: []string{d1 + "@v1/data/b.csv"}, // gone in v3
		obsoletes: [][2]string{
			{"resource_map_" + d1 + "@v2", "resource_map_" + d1 + "@v1"},
			{"resource_map_" + d1 + "@v3", "resource_map_" + d1 + "@v2"},
			{d1 + "@v2/data/a.csv", d1 + "@v1/data/a.csv"},
		},
	}
	two := phaseWant{
		heads: map[string]pkgWant{
			"resource_map_" + d1 + "@v4": {d1 + "@v1", formatEML220, []string{d1 + "@v3/data/c.csv", d1 + "@v4/data/a.csv"}},
		},
		archived: []string{d1 + "@v3/data/e.csv"},
		obsoletes: [][2]string{
			{"resource_map_" + d1 + "@v4", "resource_map_" + d1 + "@v3"},
			{d1 + "@v4/data/a.csv", d1 + "@v2/data/a.csv"},
		},
		// An object removed from the root is seen by a walk of everything
		// only.
		afterFull: []string{"resource_map_" + d2 + "@v1", d2 + "@v1", d2 + "@v1/measurements.tsv"},
	}
	objectDir := func(t *testing.T, root, enc string) string {
		dirs, err := filepath.Glob(filepath.Join(root, "*", "*", "*", enc))
		if err != nil || len(dirs) != 1 {
			t.Fatalf("object %s under %s: %v %v", enc, root, dirs, err)
		}
		return dirs[0]
	}
	return datasetFixture{
		config: fmt.Sprintf(`upstreams:
  - name: fedora
    type: ocfl
    options: {root: %q}
    harvest: {interval: 1s, fullInterval: 2s, readers: [public]}
`, root),
		phase1: one, phase2: two,
		change: func(t *testing.T) {
			// Object 1 gets its v4 (the same v1-v3, built again); object 2
			// is removed. The new object folder is copied beside the old
			// under a dot name (never listed), then renamed over it.
			next := filepath.Join(dir, "next")
			buildOCFL(t, next, "4", "no")
			const enc1, enc2 = "ark%3a%2f99999%2ffk4-dataset-1", "ark%3a%2f99999%2ffk4-dataset-2"
			old := objectDir(t, root, enc1)
			tmp := filepath.Join(filepath.Dir(old), ".next")
			if err := os.CopyFS(tmp, os.DirFS(objectDir(t, next, enc1))); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(old, filepath.Join(filepath.Dir(old), ".old")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, old); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(filepath.Dir(old), ".old")); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(objectDir(t, root, enc2)); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// buildOCFL runs testdata/build_ocfl.py (ocfl-py builds and validates the
// root).
func buildOCFL(t *testing.T, root, versions, object2 string) {
	t.Helper()
	cmd := exec.Command(fixturesPython(t), filepath.Join("testdata", "build_ocfl.py"), root, versions, object2)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build_ocfl.py: %v\n%s", err, out)
	}
}

// venvPython is a virtualenv's python under .ci, which .ci/test makes.
func venvPython(t *testing.T, venv, what string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".ci", venv, "bin", "python")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run .ci/test, which makes the Python environment (%s)", p, what)
	}
	return p
}

func fixturesPython(t *testing.T) string {
	return venvPython(t, ".venv-fixtures", "ocfl-py, pyoai")
}

// startPython runs `python script PORT args...` on a free loopback port until
// t ends, and returns its origin once path answers 200.
func startPython(t *testing.T, python, script, path string, args ...string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "python.log")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		origin := "http://127.0.0.1:" + port
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, append([]string{script, port}, args...)...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(exited) }()
		stop := func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		state := ""
		for deadline := time.Now().Add(20 * time.Second); state == ""; time.Sleep(20 * time.Millisecond) {
			select {
			case <-exited:
				state = "exited"
				continue
			default:
			}
			if resp, err := http.Get(origin + path); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					state = "ready"
				}
			}
			if state == "" && time.Now().After(deadline) {
				state = "timeout"
			}
		}
		ready := state == "ready"
		if ready {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					b, _ := os.ReadFile(logPath)
					t.Logf("log of %s:\n%s", filepath.Base(script), b)
				}
			})
			return origin
		}
		stop()
		b, _ := os.ReadFile(logPath)
		if attempt >= 3 {
			t.Fatalf("%s did not start:\n%s", filepath.Base(script), b)
		}
	}
}

// runDatasets is the test of one input.
func runDatasets(t *testing.T, fx datasetFixture) {
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	if err := os.WriteFile(cfgPath, []byte(fx.config), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, "", cfgPath)

	// 1. The first harvest.
	all1 := fx.phase1.pids()
	archived1 := fx.phase1.archived
	if msg := waitCatalog(t, s, all1, archived1, 40*time.Second); msg != "" {
		t.Fatalf("the first harvest: %s", msg)
	}
	before := sysmetas(t, s, all1)
	checkPhase(t, s, fx.phase1, before, nil)
	checkPackages(t, s, fx.phase1)

	// 2. The upstream changes; the next harvest follows.
	fx.change(t)
	all2 := sortedUnion(all1, fx.phase2.pids())
	archived2 := sortedUnion(archived1, fx.phase2.archived)
	if msg := waitCatalog(t, s, all2, archived2, 20*time.Second); msg != "" {
		// Reported, and the checks go on with what the node has.
		t.Errorf("the harvest after the change: %s", msg)
	}
	if late := fx.phase2.afterFull; len(late) > 0 {
		archivedAll := sortedUnion(archived2, late)
		if msg := waitCatalog(t, s, all2, archivedAll, 15*time.Second); msg != "" {
			t.Errorf("a dataset the source no longer lists is not archived by the next walk of everything: %s", msg)
		}
		archived2 = archivedAll
	}
	after := sysmetas(t, s, listPIDs(t, s))
	checkPhase(t, s, fx.phase2, after, before)
	for _, pid := range archived2 {
		if sm := after[pid]; sm != nil && !sm.Archived {
			t.Errorf("%s: not archived", pid)
		}
	}
	for pid, sm := range after {
		if sm.Archived && !slices.Contains(archived2, pid) {
			t.Errorf("%s: archived, and should not be", pid)
		}
	}
	checkPackages(t, s, fx.phase2)
}

func sortedUnion(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// listPIDs is every pid listObjects lists.
func listPIDs(t *testing.T, s *server) []string {
	t.Helper()
	var out []string
	for start := 0; ; {
		r := s.get(t, fmt.Sprintf("/d1/mn/v2/object?start=%d&count=1000", start))
		if !wantStatus(t, r, http.StatusOK) {
			t.FailNow()
		}
		var l adapter.ObjectList
		decode(t, r, &l)
		for _, o := range l.ObjectInfo {
			out = append(out, o.Identifier)
		}
		start += len(l.ObjectInfo)
		if len(l.ObjectInfo) == 0 || start >= l.Total {
			slices.Sort(out)
			return out
		}
	}
}

func sysmeta(t *testing.T, s *server, pid string) *adapter.SystemMetadata {
	t.Helper()
	r := s.get(t, "/d1/mn/v2/meta/"+url.PathEscape(pid))
	if !wantStatus(t, r, http.StatusOK) {
		t.Fatalf("getSystemMetadata(%s)", pid)
	}
	var sm adapter.SystemMetadata
	decode(t, r, &sm)
	return &sm
}

func sysmetas(t *testing.T, s *server, pids []string) map[string]*adapter.SystemMetadata {
	t.Helper()
	out := map[string]*adapter.SystemMetadata{}
	for _, pid := range pids {
		out[pid] = sysmeta(t, s, pid)
	}
	return out
}

// waitCatalog waits until the node lists exactly want and the pids in
// archived are archived; it returns what differs at the deadline, or "".
func waitCatalog(t *testing.T, s *server, want, archived []string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		msg := ""
		got := listPIDs(t, s)
		if !slices.Equal(got, want) {
			msg = fmt.Sprintf("the node lists\n  %s\nwant\n  %s\nmissing %q\nextra %q\n", strings.Join(got, "\n  "), strings.Join(want, "\n  "),
				minus(want, got), minus(got, want))
		}
		for _, pid := range archived {
			if slices.Contains(got, pid) && !sysmeta(t, s, pid).Archived {
				msg += fmt.Sprintf("%s is not archived; ", pid)
			}
		}
		if msg == "" {
			return ""
		}
		if time.Now().After(deadline) {
			return msg
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// checkPhase checks the chains the phase made, the formats, and, given the
// system metadata of the previous phase, that nothing else moved.
func checkPhase(t *testing.T, s *server, w phaseWant, now, before map[string]*adapter.SystemMetadata) {
	t.Helper()
	touched := map[string]bool{}
	for _, o := range w.obsoletes {
		newer, older := now[o[0]], now[o[1]]
		if newer == nil || older == nil {
			t.Errorf("no chain %s → %s: the node does not hold both", o[0], o[1])
			continue
		}
		if newer.Obsoletes != o[1] || older.ObsoletedBy != o[0] {
			t.Errorf("%s obsoletes %q, want %s; %s obsoletedBy %q, want %s", o[0], newer.Obsoletes, o[1], o[1], older.ObsoletedBy, o[0])
		}
		if !newer.DateUploaded.After(older.DateUploaded.Time) {
			t.Errorf("%s uploaded %v, not after %s's %v", o[0], newer.DateUploaded, o[1], older.DateUploaded)
		}
		if newer.SeriesID == "" || newer.SeriesID != older.SeriesID {
			t.Errorf("%s series %q, %s series %q: want the same", o[0], newer.SeriesID, o[1], older.SeriesID)
		}
		touched[o[1]] = true
	}
	for _, pid := range append(slices.Clone(w.archived), w.afterFull...) {
		touched[pid] = true
	}
	for m, p := range w.heads {
		if now[m] == nil {
			t.Errorf("resource map %s: missing", m)
			continue
		}
		if sm := now[m]; sm.FormatID != formatORE || sm.ObsoletedBy != "" || sm.Archived {
			t.Errorf("resource map %s: format %s obsoletedBy %q archived %v", m, sm.FormatID, sm.ObsoletedBy, sm.Archived)
		}
		if sm := now[p.Metadata]; sm != nil && sm.FormatID != p.Format {
			t.Errorf("science metadata %s: format %s, want %s", p.Metadata, sm.FormatID, p.Format)
		}
		for _, pid := range append([]string{m, p.Metadata}, p.Data...) {
			if sm := now[pid]; sm != nil && !readable(sm) {
				t.Errorf("%s: the public cannot read it (access policy %+v)", pid, sm.AccessPolicy)
			}
		}
	}
	if before == nil {
		return
	}
	for pid, old := range before {
		cur := now[pid]
		if cur == nil {
			t.Errorf("%s: no longer listed", pid)
			continue
		}
		if touched[pid] {
			if !cur.DateSysMetadataModified.After(old.DateSysMetadataModified.Time) {
				t.Errorf("%s changed (obsoleted or archived) and its dateSysMetadataModified stayed %v", pid, cur.DateSysMetadataModified)
			}
			continue
		}
		if cur.ObsoletedBy != old.ObsoletedBy || cur.Archived != old.Archived || cur.Checksum != old.Checksum ||
			cur.Size != old.Size || !cur.DateSysMetadataModified.Equal(old.DateSysMetadataModified.Time) {
			t.Errorf("%s changed and should not have: obsoletedBy %q→%q archived %v→%v checksum %v→%v dateSysMetadataModified %v→%v",
				pid, old.ObsoletedBy, cur.ObsoletedBy, old.Archived, cur.Archived, old.Checksum, cur.Checksum,
				old.DateSysMetadataModified, cur.DateSysMetadataModified)
		}
	}
}

func readable(sm *adapter.SystemMetadata) bool {
	if sm.AccessPolicy == nil {
		return false
	}
	for _, r := range sm.AccessPolicy.Allow {
		if slices.Contains(r.Subject, "public") {
			return true
		}
	}
	return false
}

// checkReport is what check_packages.py prints.
type checkReport struct {
	Errors   []string `json:"errors"`
	Objects  int      `json:"objects"`
	Packages map[string]struct {
		Members        []string `json:"members"`
		MetadataFormat string   `json:"metadata_format"`
		BagPayload     []string `json:"bag_payload"`
	} `json:"packages"`
}

// pythonChecks serialises the checker's runs: each loads the whole DataONE
// stack, which on two cores is better one at a time.
var pythonChecks sync.Mutex

// checkPackages runs testdata/check_packages.py over the node.
func checkPackages(t *testing.T, s *server, w phaseWant) {
	t.Helper()
	python := venvPython(t, ".venv", "dataone.common, dataone.libclient, dataone.scimeta, bagit")
	dir := t.TempDir()
	want := map[string]pkgWant{}
	maps.Copy(want, w.heads)
	for k, p := range want {
		if p.Data == nil {
			p.Data = []string{}
			want[k] = p
		}
	}
	b, err := json.Marshal(map[string]any{"packages": want})
	if err != nil {
		t.Fatal(err)
	}
	expected := filepath.Join(dir, "expected.json")
	if err := os.WriteFile(expected, b, 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	pythonChecks.Lock()
	cmd := exec.Command(python, filepath.Join("testdata", "check_packages.py"), s.URL+"/d1/mn", expected, work)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	pythonChecks.Unlock()
	var rep checkReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("check_packages.py: %v; no report (%v)\nstdout:\n%s\nstderr:\n%s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	for _, e := range rep.Errors {
		t.Errorf("check_packages.py: %s", e)
	}
	if runErr != nil && len(rep.Errors) == 0 {
		t.Errorf("check_packages.py: %v without errors in its report\nstderr:\n%s", runErr, stderr.Bytes())
	}
	for m, p := range w.heads {
		got := rep.Packages[m]
		if got.MetadataFormat != p.Format {
			t.Errorf("%s: the checker read science metadata of format %q, want %q", m, got.MetadataFormat, p.Format)
		}
		if runErr == nil && len(got.BagPayload) == 0 {
			t.Errorf("%s: getPackage's bag has no payload", m)
		}
	}
	if testing.Verbose() {
		t.Logf("check_packages.py: %d objects, %d packages checked", rep.Objects, len(rep.Packages))
	}
}
