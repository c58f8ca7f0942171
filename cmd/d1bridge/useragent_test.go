package main

import (
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestBackupAfterLatin1UserAgent: one anonymous read whose User-Agent header
// carries a Latin-1 byte (obs-text, legal in HTTP, not UTF-8) made every later
// backup of the node fail: the log kept the bytes, which the dump refuses. The
// log entry now holds U+FFFD, and getLogRecords says so.
func TestBackupAfterLatin1UserAgent(t *testing.T) {
	n := startBackupNode(t, "", nil)
	d := genBytes(1, 100)
	create(t, n.server, newSysmeta("ua-object", "application/octet-stream", "SHA-256", d, adapter.PermChangePermission), d)
	req, err := http.NewRequest(http.MethodGet, n.URL+objectPath(2, "ua-object"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "Navigateur/1.0 (r\xe9seau)")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d", resp.StatusCode)
	}
	n.fullLog(t) // reading the log writes the queued read event
	if log := n.fullLog(t); !slices.ContainsFunc(log, func(e adapter.LogEntry) bool { return e.UserAgent == "Navigateur/1.0 (r\uFFFDseau)" }) {
		t.Errorf("the log holds no read with the User-Agent made valid: %+v", log)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	if stdout, stderr, err := runCLI(t, n.DataDir, n.env, "backup", dir); err != nil {
		t.Fatalf("backup after one read with a Latin-1 User-Agent: %v\n%s%s", err, stdout, stderr)
	}
}
