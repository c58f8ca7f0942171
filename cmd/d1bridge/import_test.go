package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// importSubject is who the imports create as (a token signed with the
// node's key), and so the default rights holder.
const importSubject = "CN=Importer,O=d1bridge,DC=example,DC=org"

// importEML is a small EML 2.2.0 document, which import must recognise by
// its content whatever its name.
const importEML = `<?xml version="1.0" encoding="UTF-8"?>
<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="import-test" system="test">
  <dataset><title>An imported dataset</title></dataset>
</eml:eml>
`

// importNode starts a node that accepts creates from authenticated
// submitters only, signing tokens with a key, and writes the configuration
// an import reads (its signing key, node id and, in extra, more YAML).
func importNode(t *testing.T, extra string) (*server, string) {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := authWrite(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	cfg := fmt.Sprintf("node:\n  id: %s\nauth:\n  signingKey: %q\n%s", testNodeID, keyPath, extra)
	cfgPath := authWrite(t, dir, "d1bridge.yaml", []byte(cfg))
	s := startServer(t, "", "D1BRIDGE_AUTH_SIGNINGKEY="+keyPath, "D1BRIDGE_NODE_SUBMITTERS=authenticatedUser")
	return s, cfgPath
}

// runImport runs `d1bridge import` against s as importSubject.
func runImport(t *testing.T, s *server, cfgPath string, args ...string) (int, string, string) {
	t.Helper()
	all := append([]string{"import", "--config", cfgPath, "--node", s.URL + "/d1", "--subject", importSubject}, args...)
	code, out, errOut := runBinary(t, nil, all...)
	t.Logf("d1bridge %s: exit %d\nstdout:\n%sstderr:\n%s", strings.Join(all[1:], " "), code, out, errOut)
	return code, out, errOut
}

// importWant checks the object pid on s: its bytes, and its system
// metadata's format, rights holder, file name, checksum and submitter.
func importWant(t *testing.T, s *server, pid string, data []byte, format, holder, fileName string) {
	t.Helper()
	r := s.get(t, metaPath(2, pid))
	if !wantStatus(t, r, http.StatusOK) {
		return
	}
	var sm adapter.SystemMetadata
	decode(t, r, &sm)
	if sm.FormatID != format || sm.RightsHolder != holder || sm.FileName != fileName || sm.Size != uint64(len(data)) ||
		sm.Checksum.Algorithm != "SHA-256" || sm.Checksum.Value != checksum("SHA-256", data) || sm.Submitter != importSubject {
		t.Errorf("%s: formatId %q rightsHolder %q fileName %q size %d checksum %v submitter %q; want %q %q %q %d %s",
			pid, sm.FormatID, sm.RightsHolder, sm.FileName, sm.Size, sm.Checksum, sm.Submitter, format, holder, fileName, len(data), checksum("SHA-256", data))
	}
	// Read without server.do, which takes text/xml for a DataONE document (EML is not).
	resp, err := client.Get(s.URL + objectPath(2, pid))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
		t.Errorf("%s: get answered %d with %d bytes (%v), want the %d bytes imported", pid, resp.StatusCode, len(b), err, len(data))
	}
}

// TestImportTree: a tree with nested folders and a CSV manifest in it is
// imported through create (each object logged as created): the manifest's
// pid, format, rights holder and access for the file it names, defaults
// (relative path, sniffed or extension format, the subject, --access) for
// the others; the manifest itself is not imported. A rerun skips
// everything; a file changed under a pid the node has is reported as a
// failure (IdentifierNotUnique) with exit 1, and the node's object stays.
func TestImportTree(t *testing.T) {
	t.Parallel()
	s, cfgPath := importNode(t, "")
	tree := t.TempDir()
	files := map[string][]byte{
		"readme.txt":               []byte("An imported collection.\n"),
		"data/2024/obs.csv":        []byte("site,value\nA,1\nB,2\n"),
		"data/2024/raw/blob.bin":   genBytes(7, 300_000),
		"meta/record.xml":          []byte(importEML),
		"meta/eml-without-ext":     []byte(importEML),
		"data/2025/deep/er/x.json": []byte(`{"a": 1}`),
	}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		authWrite(t, filepath.Join(tree, filepath.Dir(p)), filepath.Base(p), b)
	}
	const other = "CN=Other Owner,O=d1bridge,DC=example,DC=org"
	manifest := authWrite(t, tree, "manifest.csv", []byte("path,pid,formatId,rightsHolder,access\n"+
		`readme.txt,doi:10.5072/IMPORT-README,text/plain,"`+other+`",read:public;write:`+importSubject+"\n"))

	code, out, errOut := runImport(t, s, cfgPath, "--manifest", manifest, "--access", "read:public", "--jobs", "3", tree)
	if code != 0 || !strings.Contains(out, "imported 6 objects") || !strings.Contains(out, "0 failed") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "6/6 objects (6 created, 0 skipped, 0 failed)") {
		t.Errorf("no plain progress line off a terminal:\n%s", errOut)
	}
	importWant(t, s, "doi:10.5072/IMPORT-README", files["readme.txt"], "text/plain", other, "readme.txt")
	importWant(t, s, "data/2024/obs.csv", files["data/2024/obs.csv"], "text/csv", importSubject, "obs.csv")
	importWant(t, s, "data/2024/raw/blob.bin", files["data/2024/raw/blob.bin"], "application/octet-stream", importSubject, "blob.bin")
	importWant(t, s, "meta/record.xml", files["meta/record.xml"], "https://eml.ecoinformatics.org/eml-2.2.0", importSubject, "record.xml")
	importWant(t, s, "meta/eml-without-ext", files["meta/eml-without-ext"], "https://eml.ecoinformatics.org/eml-2.2.0", importSubject, "eml-without-ext")
	importWant(t, s, "data/2025/deep/er/x.json", files["data/2025/deep/er/x.json"], "application/json", importSubject, "x.json")
	wantError(t, s.head(t, objectPath(2, "manifest.csv")), http.StatusNotFound, "NotFound")
	if l := logRecords(t, s, 2, "event=create&count=100"); len(l.LogEntry) != 6 {
		t.Errorf("%d create events logged, want 6: %v", len(l.LogEntry), events(l))
	}

	// Again: everything is there with the same checksum.
	code, out, errOut = runImport(t, s, cfgPath, "--manifest", manifest, "--access", "read:public", tree)
	if code != 0 || !strings.Contains(out, "imported 0 objects") || !strings.Contains(out, "skipped 6 already there") {
		t.Fatalf("rerun: exit %d\n%s%s", code, out, errOut)
	}

	// A changed file under a pid the node holds: reported, not overwritten.
	authWrite(t, filepath.Join(tree, "data", "2024"), "obs.csv", []byte("site,value\nA,1\nB,3\n"))
	code, out, _ = runImport(t, s, cfgPath, "--manifest", manifest, "--access", "read:public", tree)
	if code != 1 || !strings.Contains(out, "skipped 5 already there, 1 failed") ||
		!strings.Contains(out, "data/2024/obs.csv (pid data/2024/obs.csv): IdentifierNotUnique: ") ||
		!strings.Contains(out, "not overwritten") {
		t.Fatalf("conflict: exit %d\n%s", code, out)
	}
	importWant(t, s, "data/2024/obs.csv", files["data/2024/obs.csv"], "text/csv", importSubject, "obs.csv")
	if l := logRecords(t, s, 2, "event=create&count=100"); len(l.LogEntry) != 6 {
		t.Errorf("%d create events after the reruns, want 6", len(l.LogEntry))
	}
}

// TestImportRefusals: what the node refuses comes back with the DataONE
// error's name and description, per object, in the summary (exit 1), and
// what it accepts is created: a JSON-lines manifest giving a format the
// node does not know and an identifier with a space; a manifest path no
// source holds; without a credential the node's whoami says public.
func TestImportRefusals(t *testing.T) {
	t.Parallel()
	s, cfgPath := importNode(t, "")
	tree := t.TempDir()
	authWrite(t, tree, "good.txt", []byte("good\n"))
	authWrite(t, tree, "odd.dat", []byte("odd\n"))
	authWrite(t, tree, "spaced.txt", []byte("spaced\n"))
	manifest := authWrite(t, t.TempDir(), "manifest.jsonl", []byte(
		`{"path": "odd.dat", "formatId": "application/x-not-a-dataone-format"}`+"\n"+
			`{"path": "spaced.txt", "pid": "has a space"}`+"\n"+
			`{"path": "missing.txt", "pid": "missing"}`+"\n"))
	code, out, _ := runImport(t, s, cfgPath, "--manifest", manifest, "--pid-prefix", "urn:test:", tree)
	for _, want := range []string{"imported 1 objects", "3 failed",
		"odd.dat (pid urn:test:odd.dat): UnsupportedType: ", "spaced.txt (pid has a space): Invalid",
		"missing.txt (pid missing): InvalidRequest: the manifest (line 3) names"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary does not say %q", want)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	wantStatus(t, s.head(t, objectPath(2, "urn:test:good.txt")), http.StatusUnauthorized) // the rights holder's, not public
	code, _, errOut := runBinary(t, nil, "import", "--config", cfgPath, "--node", s.URL+"/d1", tree)
	if code != 1 || !strings.Contains(errOut, "public") {
		t.Errorf("no credential: exit %d, %q", code, errOut)
	}
	if code, out, _ := runBinary(t, nil, "import", "--help"); code != 0 || !strings.Contains(out, "s3://UPSTREAM/PREFIX") {
		t.Errorf("import --help: exit %d\n%s", code, out)
	}
}

// TestImportURLs: a list of URLs served by a test server is streamed into
// the node (read once each, the system metadata after the object); the pid
// is the URL, the format sniffed from the bytes that went by; a URL that
// answers 404 is a failure named NotFound; a rerun skips what is there.
func TestImportURLs(t *testing.T) {
	t.Parallel()
	s, cfgPath := importNode(t, "")
	big := genBytes(11, 3<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/files/record", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(importEML)) })
	mux.HandleFunc("/files/table.csv", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a,b\n1,2\n")) })
	mux.HandleFunc("/files/big.bin", func(w http.ResponseWriter, r *http.Request) { w.Write(big) })
	web := httptest.NewServer(mux)
	defer web.Close()
	list := authWrite(t, t.TempDir(), "urls.txt", []byte("# the collection\n"+web.URL+"/files/record\n\n"+
		web.URL+"/files/table.csv\n"+web.URL+"/files/big.bin\n"+web.URL+"/files/gone.txt\n"))

	code, out, _ := runImport(t, s, cfgPath, "--access", "read:public", "urls:"+list)
	if code != 1 || !strings.Contains(out, "imported 3 objects") ||
		!strings.Contains(out, web.URL+"/files/gone.txt (pid "+web.URL+"/files/gone.txt): NotFound: ") {
		t.Fatalf("import of the URLs: exit %d\n%s", code, out)
	}
	importWant(t, s, web.URL+"/files/record", []byte(importEML), "https://eml.ecoinformatics.org/eml-2.2.0", importSubject, "record")
	importWant(t, s, web.URL+"/files/table.csv", []byte("a,b\n1,2\n"), "text/csv", importSubject, "table.csv")
	importWant(t, s, web.URL+"/files/big.bin", big, "application/octet-stream", importSubject, "big.bin")

	code, out, _ = runImport(t, s, cfgPath, "--access", "read:public", "urls:"+list)
	if code != 1 || !strings.Contains(out, "imported 0 objects") || !strings.Contains(out, "skipped 3 already there, 1 failed") {
		t.Fatalf("rerun: exit %d\n%s", code, out)
	}
}

// TestImportBucket: the objects under a prefix of a real S3 bucket
// (versitygw), named by an s3 upstream of the configuration, are imported
// with their keys less the prefix as pids; objects outside the prefix are
// not; a rerun skips them all.
func TestImportBucket(t *testing.T) {
	t.Parallel()
	gw := servers.VersityGW(t)
	extra := fmt.Sprintf("upstreams:\n  - name: archive\n    type: s3\n    baseURL: %s\n    options: {bucket: %s, accessKey: %s, secretKey: %s}\n",
		gw.Endpoint, gw.Bucket, gw.AccessKey, gw.Secret)
	s, cfgPath := importNode(t, extra)
	mc, err := minio.New(strings.TrimPrefix(gw.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(gw.AccessKey, gw.Secret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string][]byte{
		"collection/eml/record.xml":  []byte(importEML),
		"collection/tables/obs.csv":  []byte("x,y\n1,2\n"),
		"collection/raw/part-1.bin":  genBytes(3, 2<<20),
		"elsewhere/not-imported.txt": []byte("no\n"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k, b := range objects {
		if _, err := mc.PutObject(ctx, gw.Bucket, k, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runImport(t, s, cfgPath, "--access", "read:public", "s3://archive/collection/")
	if code != 0 || !strings.Contains(out, "imported 3 objects") {
		t.Fatalf("import of the bucket prefix: exit %d\n%s%s", code, out, errOut)
	}
	importWant(t, s, "eml/record.xml", objects["collection/eml/record.xml"], "https://eml.ecoinformatics.org/eml-2.2.0", importSubject, "record.xml")
	importWant(t, s, "tables/obs.csv", objects["collection/tables/obs.csv"], "text/csv", importSubject, "obs.csv")
	importWant(t, s, "raw/part-1.bin", objects["collection/raw/part-1.bin"], "application/octet-stream", importSubject, "part-1.bin")
	wantError(t, s.head(t, objectPath(2, "elsewhere/not-imported.txt")), http.StatusNotFound, "NotFound")
	wantError(t, s.head(t, objectPath(2, "../elsewhere/not-imported.txt")), http.StatusNotFound, "NotFound")

	code, out, _ = runImport(t, s, cfgPath, "--access", "read:public", "s3://archive/collection/")
	if code != 0 || !strings.Contains(out, "skipped 3 already there") {
		t.Fatalf("rerun: exit %d\n%s", code, out)
	}
	if code, _, errOut := runImport(t, s, cfgPath, "s3://nosuch/x/"); code != 1 || !strings.Contains(errOut, `no s3 upstream named "nosuch"`) {
		t.Errorf("an unknown upstream: exit %d %q", code, errOut)
	}
}

// TestImportBusyNode: a node that takes one upload at a time from a client
// (limits.maxUploadsPerClient) refuses the others with InsufficientResources,
// before reading them; import sends those again, and all are created.
func TestImportBusyNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := authWrite(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	cfgPath := authWrite(t, dir, "d1bridge.yaml", []byte(fmt.Sprintf("node:\n  id: %s\nauth:\n  signingKey: %q\n", testNodeID, keyPath)))
	s := startServer(t, "", "D1BRIDGE_AUTH_SIGNINGKEY="+keyPath, "D1BRIDGE_NODE_SUBMITTERS=authenticatedUser",
		"D1BRIDGE_LIMITS_MAXUPLOADSPERCLIENT=1")
	tree := t.TempDir()
	for i := range 12 {
		authWrite(t, tree, fmt.Sprintf("part-%02d.bin", i), genBytes(uint64(100+i), 1<<20))
	}
	code, out, errOut := runImport(t, s, cfgPath, "--jobs", "4", tree)
	if code != 0 || !strings.Contains(out, "imported 12 objects") {
		t.Fatalf("import into a busy node: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(s.log.String(), "InsufficientResources") {
		t.Errorf("the node never refused an upload as busy: the test did not test the retry")
	}
}
