package main

// Helpers shared by the tests of this package (package main: e2e, crash and
// auth tests), which drive the real binary over HTTP:
//
//   - TestMain builds the binary once, into <module root>/tmp/d1bridge, and is
//     the test binary's only TestMain (it also runs for package main_test).
//   - startServer runs one instance on a free loopback port and stops it (SIGTERM,
//     checking a clean exit) when the test ends; server.do sends a request and
//     validates every text/xml answer against the DataONE schemas (so objects
//     served as text/xml must be DataONE documents: tests use other formats).
//   - multipartBody streams a create/update body from parts (textPart, filePart,
//     docPart), in form-data or mixed flavour, without buffering the object.
//   - newSysmeta and genReader make objects and their system metadata.

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
)

// binPath is the binary TestMain built.
var binPath string

func TestMain(m *testing.M) {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(2)
	}
	bin := filepath.Join(root, "tmp", "d1bridge")
	build := exec.Command(goTool(), "build", "-o", bin, "./cmd/d1bridge")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "TestMain: go build ./cmd/d1bridge: %v\n%s", err, out)
		os.Exit(2)
	}
	binPath = bin
	os.Exit(m.Run())
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// goTool is the go command: the one on PATH, else the one in GOROOT.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if gr := os.Getenv("GOROOT"); gr != "" {
		return filepath.Join(gr, "bin", "go")
	}
	return "go"
}

// testNodeID is the node id every test server runs as.
const testNodeID = "urn:node:e2e"

// server is one running instance of the binary.
type server struct {
	t       testing.TB
	URL     string // http://127.0.0.1:PORT, no trailing slash
	DataDir string
	env     []string // the D1BRIDGE_* variables it was started with
	args    []string // its command line after the binary
	cmd     *exec.Cmd
	log     *syncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // the exit status, once done is closed
}

// startServer starts the binary on dataDir ("" for a new temporary directory)
// and waits until it answers ping. Its environment is the test's, less every
// D1BRIDGE_* variable, plus D1BRIDGE_LISTEN (a free loopback port),
// D1BRIDGE_DATADIR, D1BRIDGE_NODE_ID=urn:node:e2e and
// D1BRIDGE_NODE_SUBMITTERS=public, then env ("NAME=value", which may override
// those). When the test ends the server is stopped with SIGTERM and must exit
// with status 0; its log (stderr) is printed if the test failed.
func startServer(t testing.TB, dataDir string, env ...string) *server {
	t.Helper()
	return startWith(t, dataDir, []string{"serve"}, env)
}

// startServerConfig is startServer with `serve --config cfgPath`; the
// environment still overrides the file (an empty NAME= unsets a default above).
func startServerConfig(t testing.TB, dataDir, cfgPath string, env ...string) *server {
	t.Helper()
	return startWith(t, dataDir, []string{"serve", "--config", cfgPath}, env)
}

func startWith(t testing.TB, dataDir string, args, env []string) *server {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	var lastLog string
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launch(t, dataDir, args, env)
		if err == nil {
			t.Cleanup(func() {
				s.stop()
				if t.Failed() {
					t.Logf("log of the server at %s (data %s):\n%s", s.URL, s.DataDir, s.log.String())
				}
			})
			return s
		}
		lastLog = s.log.String()
		// Another process may have taken the port between its choice and the
		// server's listen: try another one.
		if !strings.Contains(lastLog, "address already in use") {
			t.Fatalf("starting %s: %v\nserver log:\n%s", binPath, err, lastLog)
		}
	}
	t.Fatalf("starting %s: no free port found\nserver log:\n%s", binPath, lastLog)
	return nil
}

func launch(t testing.TB, dataDir string, args, extra []string) (*server, error) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"D1BRIDGE_LISTEN=127.0.0.1:" + port,
		"D1BRIDGE_DATADIR=" + dataDir,
		"D1BRIDGE_NODE_ID=" + testNodeID,
		"D1BRIDGE_NODE_SUBMITTERS=public",
		"D1BRIDGE_SHUTDOWNTIMEOUT=10s",
	}
	env = append(env, extra...)
	s := &server{
		t: t, URL: "http://127.0.0.1:" + port, DataDir: dataDir, env: extra, args: args,
		log: &syncBuffer{}, done: make(chan struct{}),
	}
	s.cmd = exec.Command(binPath, args...)
	s.cmd.Env = append(withoutD1Bridge(os.Environ()), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", binPath, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return s, fmt.Errorf("the server exited before answering: %v", s.waitErr)
		default:
		}
		resp, err := http.Get(s.URL + "/d1/mn/v2/monitor/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	return s, errors.New("the server did not answer ping within 15s")
}

func withoutD1Bridge(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "D1BRIDGE_") {
			out = append(out, kv)
		}
	}
	return out
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// stop sends SIGTERM and reports a test error unless the server exits with
// status 0 within 15s. Stopping a stopped server does nothing.
func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Errorf("SIGTERM to the server: %v", err)
	}
	select {
	case <-s.done:
		if s.waitErr != nil {
			s.t.Errorf("the server did not exit cleanly on SIGTERM: %v", s.waitErr)
		}
	case <-time.After(15 * time.Second):
		s.t.Errorf("the server did not exit within 15s of SIGTERM")
		s.kill()
	}
}

// kill ends the server with SIGKILL (kill -9) and waits for it.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// restart starts a new instance on the same data directory and environment;
// the old one must have stopped.
func (s *server) restart(t testing.TB) *server {
	t.Helper()
	return startWith(t, s.DataDir, s.args, s.env)
}

// syncBuffer is a bytes.Buffer safe for the writes of exec and the reads of tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// client is the HTTP client of the tests.
var client = &http.Client{Timeout: 2 * time.Minute}

// response is a whole HTTP response.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends method to s.URL+path (path already escaped, query included) with an
// optional body and header pairs ("Name", "value", ...), reads the whole answer
// and validates it if its body is text/xml. A HEAD answer must have no body.
func (s *server) do(t testing.TB, method, path string, body io.Reader, header ...string) *response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	r := &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if method == http.MethodHead && len(b) > 0 {
		t.Errorf("%s %s: HEAD answer has a body of %d bytes", method, path, len(b))
	}
	checkXML(t, method+" "+path, r)
	return r
}

// checkXML validates a text/xml body against its DataONE schema.
func checkXML(t testing.TB, what string, r *response) {
	t.Helper()
	if len(r.Body) == 0 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/xml") {
		return
	}
	if err := xsdtest.Check(r.Body); err != nil {
		xsdtest.Validate(t, r.Body) // reports the error with the document
		t.Errorf("(the answer of %s)", what)
	}
}

// get, head, del are do without a body.
func (s *server) get(t testing.TB, path string, header ...string) *response {
	t.Helper()
	return s.do(t, http.MethodGet, path, nil, header...)
}

func (s *server) head(t testing.TB, path string) *response {
	t.Helper()
	return s.do(t, http.MethodHead, path, nil)
}

// send sends a multipart body.
func (s *server) send(t testing.TB, method, path string, mixed bool, parts ...part) *response {
	t.Helper()
	body, ctype := multipartBody(mixed, parts...)
	return s.do(t, method, path, body, "Content-Type", ctype)
}

// part is one part of a multipart request body.
type part struct {
	name     string
	filename string // "" makes a parameter part
	ctype    string // the part's Content-Type; "" sends none
	body     io.Reader
}

// textPart is a parameter part (pid, newPid, serialVersion, ...).
func textPart(name, value string) part {
	return part{name: name, body: strings.NewReader(value)}
}

// filePart is a file part (object, sysmeta, message, ...).
func filePart(name, filename string, body io.Reader) part {
	return part{name: name, filename: filename, ctype: "application/octet-stream", body: body}
}

// docPart is a file part holding a DataONE document in API version 2 (or 1).
func docPart(name string, doc any, version ...int) part {
	v := 2
	if len(version) > 0 {
		v = version[0]
	}
	var b bytes.Buffer
	if err := adapter.Encode(&b, doc, v); err != nil {
		panic(err)
	}
	return part{name: name, filename: name + ".xml", ctype: "text/xml", body: &b}
}

// multipartBody streams parts through a pipe as a multipart/form-data body, or
// multipart/mixed with attachment dispositions when mixed, and returns the body
// and its Content-Type. Part bodies are read as the request is sent; an error
// reading one aborts the request.
func multipartBody(mixed bool, parts ...part) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	ctype := mw.FormDataContentType()
	disposition := "form-data"
	if mixed {
		ctype = "multipart/mixed; boundary=" + mw.Boundary()
		disposition = "attachment"
	}
	go func() {
		for _, p := range parts {
			h := textproto.MIMEHeader{}
			d := fmt.Sprintf(`%s; name="%s"`, disposition, p.name)
			if p.filename != "" {
				d += fmt.Sprintf(`; filename="%s"`, p.filename)
			}
			h.Set("Content-Disposition", d)
			if p.ctype != "" {
				h.Set("Content-Type", p.ctype)
			}
			w, err := mw.CreatePart(h)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := io.Copy(w, p.body); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(mw.Close())
	}()
	return pr, ctype
}

// createParts are the parts of a create, in the order the Python client sends
// them (pid, object, sysmeta) or, with sysmetaFirst, sysmeta before the object.
func createParts(sm *adapter.SystemMetadata, object io.Reader, sysmetaFirst bool) []part {
	ps := []part{textPart("pid", sm.Identifier)}
	obj := filePart("object", "content.bin", object)
	meta := docPart("sysmeta", sm)
	if sysmetaFirst {
		return append(ps, meta, obj)
	}
	return append(ps, obj, meta)
}

// testOwner is the rights holder of test objects; the public subject gets its
// rights from the access policy.
const testOwner = "CN=e2e owner,O=d1bridge,DC=example,DC=org"

// newSysmeta describes data as object pid of format formatID with a checksum
// of algorithm alg, owned by testOwner, with public holding perms (read when
// none are given).
func newSysmeta(pid, formatID, alg string, data []byte, perms ...adapter.Permission) *adapter.SystemMetadata {
	return sysmetaFor(pid, formatID, alg, uint64(len(data)), checksum(alg, data), perms...)
}

// sysmetaFor is newSysmeta from a known size and checksum.
func sysmetaFor(pid, formatID, alg string, size uint64, sum string, perms ...adapter.Permission) *adapter.SystemMetadata {
	if len(perms) == 0 {
		perms = []adapter.Permission{adapter.PermRead}
	}
	return &adapter.SystemMetadata{
		Identifier: pid, FormatID: formatID, Size: size,
		Checksum:     adapter.Checksum{Algorithm: alg, Value: sum},
		RightsHolder: testOwner,
		AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: perms}}},
	}
}

// newHash is Go's hash of a DataONE algorithm label.
func newHash(alg string) hash.Hash {
	switch alg {
	case "MD5":
		return md5.New()
	case "SHA-1":
		return sha1.New()
	case "SHA-256":
		return sha256.New()
	case "SHA-384":
		return sha512.New384()
	case "SHA-512":
		return sha512.New()
	}
	panic("no hash " + alg)
}

// checksum is the lower-case hex digest of data.
func checksum(alg string, data []byte) string {
	h := newHash(alg)
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// genReader yields size deterministic pseudo-random bytes from seed, so that
// large objects are streamed and checked without being held in memory.
type genReader struct {
	rng  *rand.ChaCha8
	left int64
}

func newGenReader(seed uint64, size int64) *genReader {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return &genReader{rng: rand.NewChaCha8(s), left: size}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n, _ := g.rng.Read(p)
	g.left -= int64(n)
	return n, nil
}

// genChecksum is the checksum of newGenReader(seed, size).
func genChecksum(alg string, seed uint64, size int64) string {
	h := newHash(alg)
	io.Copy(h, newGenReader(seed, size))
	return hex.EncodeToString(h.Sum(nil))
}

// decode reads a DataONE document answer into v.
func decode(t testing.TB, r *response, v any) {
	t.Helper()
	if err := adapter.Decode(bytes.NewReader(r.Body), v); err != nil {
		t.Fatalf("decoding a %T from the answer (status %d): %v\n%s", v, r.Status, err, r.Body)
	}
}

// errorDoc is what the tests read of an <error> document.
type errorDoc struct {
	Name        string `xml:"name,attr"`
	ErrorCode   int    `xml:"errorCode,attr"`
	DetailCode  string `xml:"detailCode,attr"`
	Identifier  string `xml:"identifier,attr"`
	NodeID      string `xml:"nodeId,attr"`
	Description string `xml:"description"`
}

// wantStatus reports a test error unless r has status code.
func wantStatus(t testing.TB, r *response, code int) bool {
	t.Helper()
	if r.Status != code {
		t.Errorf("status %d, want %d; body:\n%s", r.Status, code, r.Body)
		return false
	}
	return true
}

// wantError checks that r is the DataONE error name with HTTP status code: an
// <error> document, or on HEAD (no body) the DataONE-Exception-* headers.
func wantError(t testing.TB, r *response, code int, name string) *errorDoc {
	t.Helper()
	if r.Status != code {
		t.Errorf("status %d, want %d (%s); body:\n%s", r.Status, code, name, r.Body)
	}
	if len(r.Body) == 0 {
		if got := r.Header.Get("DataONE-Exception-Name"); got != name {
			t.Errorf("no body and DataONE-Exception-Name %q, want %q", got, name)
		}
		return &errorDoc{Name: r.Header.Get("DataONE-Exception-Name"), Description: r.Header.Get("DataONE-Exception-Description")}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/xml") {
		t.Errorf("error answer has Content-Type %q, want text/xml", ct)
	}
	var e errorDoc
	if err := xml.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("not an error document: %v\n%s", err, r.Body)
	}
	if e.Name != name || e.ErrorCode != code {
		t.Errorf("error %s (errorCode %d), want %s (%d): %s", e.Name, e.ErrorCode, name, code, e.Description)
	}
	if e.NodeID != testNodeID {
		t.Errorf("error nodeId %q, want %q", e.NodeID, testNodeID)
	}
	return &e
}
