package servers

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

// GMN is a running DataONE Generic Member Node (PyPI dataone.gmn 3.5.2, the
// virtualenv .ci/.venv-gmn that .ci/test makes) deployed as GMN's own
// documentation deploys it: Apache with mod_ssl asks for a client certificate
// (SSLVerifyClient optional, one CA) and exports it to the WSGI environment,
// where GMN reads the caller's subject; mod_wsgi runs GMN in a daemon process;
// its database is a schema of pgtest's PostgreSQL cluster. Apache and GMN
// share the templates in .ci/gmn with the conformance suite's gmn backend.
type GMN struct {
	// BaseURL is GMN's member node base URL, https://127.0.0.1:PORT/mn.
	BaseURL string
	// NodeID is GMN's node identifier.
	NodeID string
	// CA is the PEM file of the CA that issued GMN's server certificate and
	// the client certificates GMN accepts; Authority issues more.
	CA        string
	Authority *CA
	// ClientCert and ClientKey are the PEM files of a client certificate with
	// subject ClientSubject, which GMN trusts (DATAONE_TRUSTED_SUBJECTS: it
	// bypasses access control, as a CN's does) and whitelists for create,
	// update and delete.
	ClientCert, ClientKey, ClientSubject string
	// Dir holds apache/ (httpd.conf, error.log, access.log) and gmn/ (the
	// settings, gmn.log, the object store).
	Dir string
}

// GMNOptions adjust StartGMN.
type GMNOptions struct {
	// ClientSubject is the subject of the trusted client certificate
	// (default CN=urn:node:d1bridgeTest,DC=dataone,DC=org).
	ClientSubject string
	// Whitelist are more subjects allowed to create, update and delete.
	Whitelist []string
	// VerifyClient is mod_ssl's SSLVerifyClient: optional (default) or
	// require.
	VerifyClient string
}

// GMNVenv is where .ci/test makes GMN's virtualenv, from the repository root.
const GMNVenv = ".ci/.venv-gmn"

// gmnUser is who Apache's children and GMN run as when the test runs as root
// (Apache refuses to serve as root).
const gmnUser = "www-data"

// StartGMN starts GMN behind Apache with TLS until t ends. It fails the test
// when Apache, mod_wsgi, PostgreSQL or the virtualenv is missing.
func StartGMN(t testing.TB, o GMNOptions) *GMN {
	t.Helper()
	if o.ClientSubject == "" {
		o.ClientSubject = "CN=urn:node:d1bridgeTest,DC=dataone,DC=org"
	}
	if o.VerifyClient == "" {
		o.VerifyClient = "optional"
	}
	root := repoRoot(t)
	venv := filepath.Join(root, GMNVenv)
	python := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: run .ci/test, which makes GMN's virtualenv (dataone.gmn)", python)
	}
	apache := lookPath(t, "apache2", "/usr/sbin/apache2")
	const modules = "/usr/lib/apache2/modules"
	for _, m := range []string{"mod_ssl.so", "mod_wsgi.so"} {
		if _, err := os.Stat(filepath.Join(modules, m)); err != nil {
			t.Fatalf("%s/%s is missing (apt packages apache2, libapache2-mod-wsgi-py3): %s", modules, m, missing)
		}
	}
	pg, err := url.Parse(pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}

	// Apache's children and GMN run as www-data when root: the directory
	// must be theirs, not under t.TempDir (root's, mode 0700).
	dir, err := os.MkdirTemp("", "gmn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	g := &GMN{NodeID: "urn:node:GMNTest", ClientSubject: o.ClientSubject, Dir: dir}
	for _, d := range []string{"apache", "gmn/objects", "pki"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	g.Authority = NewCA(t, filepath.Join(dir, "pki"), "GMN test CA")
	g.CA = g.Authority.File
	serverCert, serverKey := g.Authority.Server(t, "gmn-server")
	g.ClientCert, g.ClientKey = g.Authority.Client(t, "gmn-client", o.ClientSubject, time.Time{}, time.Time{})
	nodeCert, nodeKey := g.Authority.Client(t, "gmn-node", "CN="+g.NodeID+",DC=dataone,DC=org", time.Time{}, time.Time{})
	if err := os.WriteFile(filepath.Join(dir, "gmn", "secret_key.txt"), []byte("gmn-test-secret-key\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var asGMN []string // runs a command as gmnUser when root
	userLines, daemonUser := "", ""
	if os.Geteuid() == 0 {
		u, err := user.Lookup(gmnUser)
		if err != nil {
			t.Fatalf("running as root needs the user %s for Apache's children (%v): %s", gmnUser, err, missing)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := chownTree(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		asGMN = []string{"runuser", "-u", gmnUser, "--"}
		userLines = "User " + gmnUser + "\nGroup " + gmnUser
		daemonUser = "user=" + gmnUser + " group=" + gmnUser + " "
	}
	// d1_common's object format list locks /tmp/object_format_cache.lock, a
	// fixed path whoever ran GMN first created: everyone must be able to write it.
	if err := shareLockFile("/tmp/object_format_cache.lock"); err != nil {
		t.Fatal(err)
	}

	vars := map[string]string{
		"DIR":           dir,
		"MODULES":       modules,
		"USER_LINES":    userLines,
		"DAEMON_USER":   daemonUser,
		"VENV":          venv,
		"SERVER_CERT":   serverCert,
		"SERVER_KEY":    serverKey,
		"CLIENT_CA":     g.CA,
		"VERIFY_CLIENT": o.VerifyClient,
		"NODE_ID":       g.NodeID,
		"NODE_CERT":     nodeCert,
		"NODE_KEY":      nodeKey,
		"TRUSTED":       o.ClientSubject,
		"PG_DB":         strings.TrimPrefix(pg.Path, "/"),
		"PG_USER":       pg.User.Username(),
		"PG_PORT":       pg.Port(),
		"PG_SCHEMA":     pg.Query().Get("search_path"),
	}
	tmpl := filepath.Join(root, ".ci", "gmn")
	// The base URL names the port, which is picked when Apache starts; the
	// settings are written before the migrations with a placeholder port,
	// then again with the port.
	writeSettings := func(port string) {
		vars["PORT"] = port
		vars["BASE_URL"] = "https://127.0.0.1:" + port + "/mn"
		fill(t, filepath.Join(tmpl, "settings.py.in"), filepath.Join(dir, "gmn", "gmn_test_settings.py"), vars)
		fill(t, filepath.Join(tmpl, "gmn.wsgi.in"), filepath.Join(dir, "gmn", "gmn.wsgi"), vars)
		fill(t, filepath.Join(tmpl, "httpd.conf.in"), filepath.Join(dir, "apache", "httpd.conf"), vars)
	}
	writeSettings("0")
	argv := append(append(asGMN, python, filepath.Join(tmpl, "setup_gmn.py"), o.ClientSubject), o.Whitelist...)
	setup := exec.Command(argv[0], argv[1:]...)
	setup.Dir = filepath.Join(dir, "gmn")
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("GMN's migrations (setup_gmn.py): %v\n%s", err, out)
	}

	client := g.client(t, false)
	var port string
	start(t, "apache2", filepath.Join(dir, "apache"), func() *exec.Cmd {
		port = strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
		writeSettings(port)
		return exec.Command(apache, "-f", filepath.Join(dir, "apache", "httpd.conf"), "-DFOREGROUND")
	}, func() bool {
		resp, err := client.Get("https://127.0.0.1:" + port + "/mn/v2/monitor/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	g.BaseURL = "https://127.0.0.1:" + port + "/mn"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("GMN: Apache's error.log:\n%s\nGMN's gmn.log:\n%s", tail(filepath.Join(dir, "apache", "error.log")),
				tail(filepath.Join(dir, "gmn", "gmn.log")))
		}
	})
	return g
}

// Client is an HTTP client that trusts GMN's CA and, when withCert, presents
// the trusted client certificate.
func (g *GMN) Client(t testing.TB, withCert bool) *http.Client { return g.client(t, withCert) }

func (g *GMN) client(t testing.TB, withCert bool) *http.Client {
	t.Helper()
	b, err := os.ReadFile(g.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	cfg := &tls.Config{RootCAs: pool}
	if withCert {
		pair, err := tls.LoadX509KeyPair(g.ClientCert, g.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

var placeholder = regexp.MustCompile(`@[A-Z][A-Z_]*@`)

// fill writes template src to dst with each @NAME@ replaced by vars[NAME].
func fill(t testing.TB, src, dst string, vars map[string]string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("the GMN templates: %v", err)
	}
	s := string(b)
	for k, v := range vars {
		s = strings.ReplaceAll(s, "@"+k+"@", v)
	}
	if left := placeholder.FindString(s); left != "" {
		t.Fatalf("%s: %s is not replaced", src, left)
	}
	if err := os.WriteFile(dst, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chownTree(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// shareLockFile makes path exist and writable by everyone.
func shareLockFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return fmt.Errorf("GMN's object format lock %s: %w (remove it, or make it writable)", path, err)
	}
	f.Close()
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o666 {
		if err := os.Chmod(path, 0o666); err != nil && os.Geteuid() == 0 {
			return err
		}
	}
	return nil
}

// repoRoot is the directory of go.mod above the test's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
