package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestBackupExternalStore: with the bytes in an S3 bucket (versitygw), a
// backup is the catalog alone and says the bucket needs its own; restored
// into a new catalog beside the same bucket, every object is back. An export
// reads the bytes from the bucket, and restores into a node with the
// embedded store.
func TestBackupExternalStore(t *testing.T) {
	t.Parallel()
	s3 := servers.VersityGW(t)
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	cfg := fmt.Sprintf(`upstreams:
  - name: bucket
    type: s3
    baseURL: %s
    options: {bucket: %s, accessKey: %s, secretKey: %s, prefix: d1bridge/}
store: bucket
`, s3.Endpoint, s3.Bucket, s3.AccessKey, s3.Secret)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	certPath, _, _, _ := authTokenKeyFiles(t)
	env := []string{"D1BRIDGE_AUTH_TOKENKEYS=" + certPath, "D1BRIDGE_NODE_ADMINISTRATORS=" + backupAdmin}
	start := func(dataDir string) *backupNode {
		return &backupNode{server: startServerConfig(t, dataDir, cfgPath, env...), env: env,
			reader: authToken(t, authCNKey(), backupReader), root: authToken(t, authCNKey(), backupAdmin)}
	}
	n := start("")
	objs := seed(t, n)

	bdir, edir := filepath.Join(t.TempDir(), "backup"), filepath.Join(t.TempDir(), "export")
	_, stderr, err := runCLI(t, n.DataDir, env, "backup", "--config", cfgPath, bdir)
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, `the bytes are in the store "bucket", which needs a backup (or versioning) of its own`) {
		t.Errorf("the backup does not say the bucket needs its own:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(bdir, "blobs")); err == nil {
		t.Error("a backup of a node with an external store has blobs/")
	}
	if _, stderr, err := runCLI(t, n.DataDir, env, "export", "--config", cfgPath, edir); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	n.stop()

	// The catalog is lost, the bucket is not.
	fresh := t.TempDir()
	_, stderr, err = runCLI(t, fresh, env, "restore", "--config", cfgPath, bdir)
	if err != nil {
		t.Fatalf("restore of the backup: %v\n%s", err, stderr)
	}
	if want := fmt.Sprintf("verify: %d objects", len(objs)); !strings.Contains(stderr, want) {
		t.Errorf("the restore did not verify the bytes in the bucket (%q):\n%s", want, stderr)
	}
	checkSeeded(t, start(fresh), objs)

	// The export into a node with the embedded store.
	embedded := t.TempDir()
	if _, stderr, err := runCLI(t, embedded, env, "restore", edir); err != nil {
		t.Fatalf("restore of the export: %v\n%s", err, stderr)
	}
	checkSeeded(t, startBackupNode(t, embedded, nil), objs)
}
