package main

// backup, restore and export through the real binary: a node backed up while
// writes run through its API, destroyed, restored into a new one (SQLite, and
// PostgreSQL), and checked through the API of the restored node; an export
// restored into an empty node.

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

const (
	backupReader = "CN=backup reader,O=d1bridge,DC=example,DC=org"
	backupAdmin  = "CN=backup-admin" // no comma: the environment splits lists on commas
)

// runCLI runs the binary with args and the environment a server on dataDir
// gets (plus env); it returns stdout, stderr and the exit error.
func runCLI(t testing.TB, dataDir string, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(withoutD1Bridge(os.Environ()), append([]string{"D1BRIDGE_DATADIR=" + dataDir,
		"D1BRIDGE_NODE_ID=" + testNodeID, "D1BRIDGE_NODE_SUBMITTERS=public"}, env...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// backupNode is a node with the keys of the backup tests: tokens signed by
// authCNKey are accepted, backupAdmin administers it.
type backupNode struct {
	*server
	env          []string
	reader, root string // tokens
}

func startBackupNode(t *testing.T, dataDir string, env []string) *backupNode {
	t.Helper()
	certPath, _, _, _ := authTokenKeyFiles(t)
	env = append(append([]string{}, env...), "D1BRIDGE_AUTH_TOKENKEYS="+certPath, "D1BRIDGE_NODE_ADMINISTRATORS="+backupAdmin)
	return &backupNode{server: startServer(t, dataDir, env...), env: env,
		reader: authToken(t, authCNKey(), backupReader), root: authToken(t, authCNKey(), backupAdmin)}
}

// restart starts a node on another data directory (and catalog) with the
// same keys.
func (n *backupNode) restartOn(t *testing.T, dataDir string, env []string) *backupNode {
	t.Helper()
	return startBackupNode(t, dataDir, env)
}

// call sends one request without failing the test (for the load goroutines).
func (n *backupNode) call(method, path, token string, parts ...part) (int, []byte, error) {
	var req *http.Request
	var err error
	if len(parts) > 0 {
		body, ctype := multipartBody(false, parts...)
		if req, err = http.NewRequest(method, n.URL+path, body); err == nil {
			req.Header.Set("Content-Type", ctype)
		}
	} else {
		req, err = http.NewRequest(method, n.URL+path, nil)
	}
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

// meta is the raw getSystemMetadata answer (v2), read with the admin token.
func (n *backupNode) meta(pid string) ([]byte, error) {
	code, b, err := n.call(http.MethodGet, metaPath(2, pid), n.root)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("getSystemMetadata %s: %d %s", pid, code, b)
	}
	return b, err
}

// fullLog is every log record, read with the admin token, page by page.
func (n *backupNode) fullLog(t *testing.T) []adapter.LogEntry {
	t.Helper()
	var all []adapter.LogEntry
	for start := 0; ; {
		code, b, err := n.call(http.MethodGet, mnp(2, fmt.Sprintf("/log?start=%d&count=1000", start)), n.root)
		if err != nil || code != http.StatusOK {
			t.Fatalf("getLogRecords: %d %v %s", code, err, b)
		}
		l := &adapter.Log{}
		if err := adapter.Decode(bytes.NewReader(b), l); err != nil {
			t.Fatal(err)
		}
		all = append(all, l.LogEntry...)
		start += len(l.LogEntry)
		if len(l.LogEntry) == 0 || start >= l.Total {
			return all
		}
	}
}

// seeded is an object the test made before the backup and left alone.
type seeded struct {
	pid     string
	data    []byte
	private bool // readable by backupReader only
	meta    []byte
}

// seed makes the stable objects: public and private ones, a series of two
// with an access change, an archived one, a large one, and one deleted.
func seed(t *testing.T, n *backupNode) []*seeded {
	t.Helper()
	var out []*seeded
	add := func(pid string, size int, private bool) *adapter.SystemMetadata {
		d := genBytes(uint64(len(out))+900, size)
		sm := newSysmeta(pid, "application/octet-stream", "SHA-256", d, adapter.PermChangePermission)
		if private {
			sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{backupReader}, Permission: []adapter.Permission{adapter.PermRead}}}}
		}
		create(t, n.server, sm, d)
		out = append(out, &seeded{pid: pid, data: d, private: private})
		return sm
	}
	for i := range 6 {
		add(fmt.Sprintf("seed-%d", i), 1000+i*7919, i%3 == 0)
	}
	add("seed-large", 3<<20, false)
	sm := add("seed-chain-1", 5000, false)
	sm.SeriesID = "seed-series"
	d := genBytes(77, 4000)
	next := newSysmeta("seed-chain-2", "text/plain", "MD5", d, adapter.PermChangePermission)
	next.SeriesID = "seed-series"
	r := n.send(t, http.MethodPut, objectPath(2, "seed-chain-1"), false,
		textPart("newPid", "seed-chain-2"), filePart("object", "o", bytes.NewReader(d)), docPart("sysmeta", next))
	wantStatus(t, r, http.StatusOK)
	out = append(out, &seeded{pid: "seed-chain-2", data: d})
	m := getMeta(t, n.server, 2, "seed-chain-2")
	policy := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{backupReader}, Permission: []adapter.Permission{adapter.PermWrite}}}}
	r = n.send(t, http.MethodPut, mnp(2, "/accessRules/seed-chain-2"), false,
		textPart("serialVersion", fmt.Sprint(m.SerialVersion)), docPart("accessPolicy", policy))
	wantStatus(t, r, http.StatusOK)
	out[len(out)-1].private = true
	add("seed-archived", 100, false)
	if code, b, err := n.call(http.MethodPut, mnp(2, "/archive/seed-archived"), n.root); err != nil || code != http.StatusOK {
		t.Fatalf("archive: %d %v %s", code, err, b)
	}
	add("seed-deleted", 100, false)
	if code, b, err := n.call(http.MethodDelete, objectPath(2, "seed-deleted"), n.root); err != nil || code != http.StatusOK {
		t.Fatalf("delete: %d %v %s", code, err, b)
	}
	out = out[:len(out)-1]
	for _, s := range out {
		var err error
		if s.meta, err = n.meta(s.pid); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkSeeded checks every seeded object on the restored node: the same
// bytes and system metadata, and its access rules.
func checkSeeded(t *testing.T, n *backupNode, objs []*seeded) {
	t.Helper()
	for _, o := range objs {
		if m, err := n.meta(o.pid); err != nil || !bytes.Equal(m, o.meta) {
			t.Errorf("%s: the system metadata differs (%v):\n%s\nwant:\n%s", o.pid, err, m, o.meta)
		}
		token := ""
		if o.private {
			if code, _, _ := n.call(http.MethodGet, objectPath(2, o.pid), ""); code != http.StatusUnauthorized {
				t.Errorf("%s: public get answers %d, want 401", o.pid, code)
			}
			token = n.reader
		}
		if code, b, err := n.call(http.MethodGet, objectPath(2, o.pid), token); code != http.StatusOK || !bytes.Equal(b, o.data) {
			t.Errorf("%s: get answers %d (%v) with %d bytes, want the %d bytes", o.pid, code, err, len(b), len(o.data))
		}
	}
	wantNotFound(t, n.server, 2, "seed-deleted")
}

// TestBackupRestoreUnderLoad backs a node up while writes run through its
// API, removes it, restores the backup into a new one and checks the restored
// node through its API, on SQLite and on PostgreSQL.
func TestBackupRestoreUnderLoad(t *testing.T) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		testBackupUnderLoad(t, func() []string { return nil }, func([]string) {})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		t.Parallel()
		pgtest.Start(t)
		testBackupUnderLoad(t, func() []string { return postgresEnv(pgtest.Start(t)) }, func(env []string) {
			dsn := strings.TrimPrefix(env[1], "D1BRIDGE_CATALOG_DSN=")
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, schema, _ := strings.Cut(dsn, "search_path=")
			schema, _, _ = strings.Cut(schema, "&")
			if _, err := db.Exec(`DROP SCHEMA "` + schema + `" CASCADE`); err != nil {
				t.Fatalf("dropping the catalog: %v", err)
			}
		})
	})
}

func testBackupUnderLoad(t *testing.T, catalogEnv func() []string, drop func([]string)) {
	env := catalogEnv()
	n := startBackupNode(t, "", env)
	objs := seed(t, n)
	l := startLoad(n, 3)
	l.waitFor(t, 30)
	before := n.fullLog(t)
	acked := l.acked()
	dir := filepath.Join(t.TempDir(), "backup")
	l.mark(markStart)
	began := time.Now()
	stdout, stderr, err := runCLI(t, n.DataDir, n.env, "backup", dir)
	l.mark(markEnd)
	t.Logf("the backup took %s, %d writes acknowledged meanwhile", time.Since(began).Round(time.Millisecond), l.acked()-acked)
	l.waitFor(t, l.acked()+10) // and on after it
	l.stop(t)
	if err != nil {
		t.Fatalf("backup: %v\n%s%s", err, stdout, stderr)
	}
	t.Logf("backup:\n%s%s", stderr, stdout)
	for _, want := range []string{"backup: snapshot taken", "backup: catalog table objects:", "backup: done:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the backup's progress has no %q", want)
		}
	}
	if _, _, err := runCLI(t, n.DataDir, n.env, "backup", dir); err == nil {
		t.Error("a backup into a directory that is not empty succeeded")
	}

	// Destroy the node: the data directory, and the PostgreSQL tables.
	n.stop()
	drop(env)
	if err := os.RemoveAll(n.DataDir); err != nil {
		t.Fatal(err)
	}
	env = catalogEnv()
	fresh := t.TempDir()
	stdout, stderr, err = runCLI(t, fresh, env, "restore", dir)
	if err != nil {
		t.Fatalf("restore: %v\n%s%s", err, stdout, stderr)
	}
	t.Logf("restore:\n%s%s", stderr, stdout)
	if !strings.Contains(stderr, "restore: done:") || !strings.Contains(stderr, "verify:") {
		t.Errorf("the restore's progress has no summary or verification:\n%s", stderr)
	}
	if _, stderr, err := runCLI(t, fresh, env, "restore", dir); err == nil || !strings.Contains(stderr, "not empty") {
		t.Errorf("a second restore: %v %s, want a refusal (not empty)", err, stderr)
	}

	r := n.restartOn(t, fresh, env)
	restoredLog := r.fullLog(t) // before any read of the restored node logs more
	checkLog(t, before, l.finalLog(), restoredLog)
	checkSeeded(t, r, objs)
	l.check(t, r)
}

// checkLog: every record logged before the backup began is back, and every
// record back is one the node logged.
func checkLog(t *testing.T, before, final, restored []adapter.LogEntry) {
	t.Helper()
	key := func(e adapter.LogEntry) string { return fmt.Sprintf("%+v", e) }
	logged := map[string]bool{}
	for _, e := range final {
		logged[key(e)] = true
	}
	back := map[string]bool{}
	for _, e := range restored {
		back[key(e)] = true
		if !logged[key(e)] {
			t.Errorf("the restored log has a record the node never logged: %+v", e)
		}
	}
	missing := 0
	for _, e := range before {
		if !back[key(e)] {
			if missing++; missing < 5 {
				t.Errorf("a record logged before the backup is not back: %+v", e)
			}
		}
	}
	if len(restored) < len(before) {
		t.Errorf("the restored log has %d records, %d were logged before the backup", len(restored), len(before))
	}
}

// TestExportRestore exports a node's objects as a hashstore while it serves,
// restores the export into an empty node and checks every object there.
func TestExportRestore(t *testing.T) {
	t.Parallel()
	n := startBackupNode(t, "", nil)
	objs := seed(t, n)
	dir := filepath.Join(t.TempDir(), "export")
	stdout, stderr, err := runCLI(t, n.DataDir, n.env, "export", dir)
	if err != nil {
		t.Fatalf("export: %v\n%s%s", err, stdout, stderr)
	}
	t.Logf("export:\n%s%s", stderr, stdout)
	// The layout: refs/pids names the SHA-256 of the bytes, objects/ has them.
	o := objs[1]
	pidHash, cid := checksum("SHA-256", []byte(o.pid)), checksum("SHA-256", o.data)
	sh := func(h string) string { return filepath.Join(h[0:2], h[2:4], h[4:6], h[6:]) }
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "pids", sh(pidHash))); err != nil || string(ref) != cid {
		t.Errorf("refs/pids of %s: %q %v, want %s", o.pid, ref, err, cid)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "objects", sh(cid))); err != nil || !bytes.Equal(b, o.data) {
		t.Errorf("objects/%s: %v, not the bytes of %s", sh(cid), err, o.pid)
	}
	meta, err := os.ReadFile(filepath.Join(dir, "metadata", sh(pidHash), checksum("SHA-256", []byte(o.pid+"https://ns.dataone.org/service/types/v2.0#SystemMetadata"))))
	if err != nil || !bytes.Equal(meta, o.meta) {
		t.Errorf("the exported system metadata of %s (%v):\n%s\nwant:\n%s", o.pid, err, meta, o.meta)
	}
	n.stop()

	fresh := t.TempDir()
	stdout, stderr, err = runCLI(t, fresh, nil, "restore", dir)
	if err != nil {
		t.Fatalf("restore: %v\n%s%s", err, stdout, stderr)
	}
	t.Logf("restore:\n%s%s", stderr, stdout)
	r := n.restartOn(t, fresh, nil)
	checkSeeded(t, r, objs)
	code, b, err := r.call(http.MethodGet, mnp(2, "/object?count=100"), r.root)
	l := &adapter.ObjectList{}
	if err != nil || code != http.StatusOK || adapter.Decode(bytes.NewReader(b), l) != nil || l.Total != len(objs) {
		t.Errorf("the restored node lists %d objects (%d %v), want %d", l.Total, code, err, len(objs))
	}
	// import --from-export brings it back the same way.
	r.stop()
	again := t.TempDir()
	if stdout, stderr, err = runCLI(t, again, nil, "import", "--from-export", dir); err != nil {
		t.Fatalf("import --from-export: %v\n%s%s", err, stdout, stderr)
	}
	ra := n.restartOn(t, again, nil)
	checkSeeded(t, ra, objs)
	ra.stop()
	// Into a catalog that holds objects only with --force, as restore.
	if _, _, err := runCLI(t, again, nil, "import", "--from-export", dir); err == nil {
		t.Error("import --from-export into a catalog that holds objects, without --force, succeeded")
	}
	if stdout, stderr, err = runCLI(t, again, nil, "import", "--from-export", dir, "--force"); err != nil {
		t.Errorf("import --from-export --force: %v\n%s%s", err, stdout, stderr)
	}
	if _, _, err := runCLI(t, t.TempDir(), nil, "import", "--from-export", t.TempDir()); err == nil {
		t.Error("import --from-export of a directory that holds no export succeeded")
	}
	// A damaged export: one object's bytes changed fail its restore.
	if err := os.WriteFile(filepath.Join(dir, "objects", sh(cid)), []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI(t, t.TempDir(), nil, "restore", dir); err == nil || !strings.Contains(stderr, "checksum") {
		t.Errorf("the restore of a damaged export: %v\n%s", err, stderr)
	}
}

// TestRestoreRefusesRunningNode: restore --force under a running node
// replaced its catalog while the node went on answering from its caches
// (an object the restored catalog no longer held was still served, a list's
// total counted it). A node holds its data directory; restore refuses it,
// and restores once the node is stopped.
func TestRestoreRefusesRunningNode(t *testing.T) {
	t.Parallel()
	n := startBackupNode(t, "", nil)
	data := genBytes(71, 300)
	create(t, n.server, newSysmeta("before-backup", "text/plain", "MD5", data), data)
	dir := filepath.Join(t.TempDir(), "backup")
	if stdout, stderr, err := runCLI(t, n.DataDir, n.env, "backup", dir); err != nil {
		t.Fatalf("backup: %v\n%s%s", err, stdout, stderr)
	}
	_, stderr, err := runCLI(t, n.DataDir, n.env, "restore", "--force", dir)
	if err == nil || !strings.Contains(stderr, "a node or a restore is using the data directory") {
		t.Fatalf("restore --force under a running node: %v\n%s", err, stderr)
	}
	n.stop()
	if stdout, stderr, err := runCLI(t, n.DataDir, n.env, "restore", "--force", dir); err != nil {
		t.Fatalf("restore --force once the node stopped: %v\n%s%s", err, stdout, stderr)
	}
}

// TestSecondNodeRefused: a second node on the data directory of a node on the
// embedded catalog kept caches the first one's writes never reached (SQLite
// tells no other process what changed); it refuses to start, saying why, and
// starts once the first has stopped.
func TestSecondNodeRefused(t *testing.T) {
	t.Parallel()
	first := startServer(t, "")
	second, err := launch(t, first.DataDir, []string{"serve"}, nil)
	if err == nil {
		second.stop()
		t.Fatal("a second node started on the data directory of a running one")
	}
	if log := second.log.String(); !strings.Contains(log, "a node or a restore is using the data directory") ||
		!strings.Contains(log, "needs a data directory of its own") {
		t.Fatalf("the second node's refusal does not say why: %v\n%s", err, log)
	}
	first.stop()
	startServer(t, first.DataDir)
}

// TestBackupDoesNotMigrateCatalog: backup and export read the catalog of a
// node that may be serving, perhaps with an older binary (the upgrade steps
// back up before replacing it): they migrated its schema under it, and the
// backup taken for a rollback was of the new schema. Now they refuse a
// catalog of another schema version and leave it as it is.
func TestBackupDoesNotMigrateCatalog(t *testing.T) {
	t.Parallel()
	n := startBackupNode(t, "", nil)
	n.stop()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(n.DataDir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version int
	if err := db.QueryRow(`SELECT version FROM catalog_schema`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE catalog_schema SET version = ?`, version-1); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"backup", "export"} {
		_, stderr, err := runCLI(t, n.DataDir, n.env, cmd, filepath.Join(t.TempDir(), cmd))
		if err == nil || !strings.Contains(stderr, "would migrate it") {
			t.Errorf("%s of a catalog of schema version %d: %v\n%s", cmd, version-1, err, stderr)
		}
		var now int
		if err := db.QueryRow(`SELECT version FROM catalog_schema`).Scan(&now); err != nil || now != version-1 {
			t.Errorf("after %s the schema version is %d (%v), want %d, as it was", cmd, now, err, version-1)
		}
	}
}
