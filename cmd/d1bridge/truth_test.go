package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
)

// TestReadyzChecksTheStore: with credentials the S3 server refuses, the node
// is not ready and says which upstream and why, and so does ping?deep=true;
// the base URL answering (403) is not enough.
func TestReadyzChecksTheStore(t *testing.T) {
	t.Parallel()
	s3 := servers.VersityGW(t)
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	cfg := fmt.Sprintf("upstreams:\n  - name: bucket\n    type: s3\n    baseURL: %s\n    retry: {max: 0}\n    options: {bucket: %s, accessKey: %s, secretKey: wrong-secret}\nstore: bucket\n",
		s3.Endpoint, s3.Bucket, s3.AccessKey)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, t.TempDir(), cfgPath)
	r := s.get(t, "/readyz")
	var report map[string]string
	if err := json.Unmarshal(r.Body, &report); err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with refused credentials: %d %s (%v)", r.Status, r.Body, err)
	}
	if why := report["upstream bucket"]; report["status"] != "not ready" || !strings.Contains(why, `upstream "bucket" refused access`) {
		t.Fatalf("readyz does not say why: %s", r.Body)
	}
	e := wantError(t, s.get(t, "/d1/mn/v2/monitor/ping?deep=true"), 500, "ServiceFailure")
	if !strings.Contains(e.Description, `upstream "bucket" refused access`) {
		t.Fatalf("deep ping: %q", e.Description)
	}
}

// logLine is the first JSON log line whose msg is msg, or nil.
func logLine(log, msg string) map[string]any {
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// strs is a log attribute holding a list of strings.
func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestReloadNamesEveryKey: a reload that edits upstreams (and store-like keys
// that need new clients) names each changed key in one log line as waiting
// for a restart, and lists the keys it applied.
func TestReloadNamesEveryKey(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	write := func(name, timeout, extra string) {
		t.Helper()
		cfg := fmt.Sprintf("node: {name: %s}\nupstreams:\n  - {name: share, type: webdav, baseURL: \"http://127.0.0.1:1/\", timeout: %s%s}\n", name, timeout, extra)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("before", "1m", "")
	s := startServerConfig(t, t.TempDir(), cfgPath)
	write("after", "2m", ", breaker: {failures: 9}, options: {prefix: elsewhere}")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var done map[string]any
	for deadline := time.Now().Add(10 * time.Second); done == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged:\n%s", s.log.String())
		}
		done = logLine(s.log.String(), "configuration reloaded")
	}
	if got := strs(done["applied"]); !slices.Equal(got, []string{"node.name"}) {
		t.Errorf("applied %q, want [node.name]", got)
	}
	restart := logLine(s.log.String(), "changed keys take effect at the next restart")
	want := []string{"upstreams[0].timeout", "upstreams[0].breaker.failures", "upstreams[0].options"}
	if restart == nil || !slices.Equal(strs(restart["keys"]), want) {
		t.Fatalf("the restart line %v does not name %q:\n%s", restart, want, s.log.String())
	}
}

// TestReloadTLSCertificate: a renewed certificate written over the files
// tls.cert and tls.key name is served after SIGHUP, without a restart.
func TestReloadTLSCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := authNewCA(t, "Test server CA")
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	issue := func(serial int64) {
		t.Helper()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		authWrite(t, dir, "server.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		authWrite(t, dir, "server.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	}
	served := func(s *server) int64 {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(s.URL, "https://"), &tls.Config{RootCAs: authPool(ca)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	issue(1001)
	s := authStartTLS(t, ca, "D1BRIDGE_TLS_CERT="+certFile, "D1BRIDGE_TLS_KEY="+keyFile)
	if got := served(s); got != 1001 {
		t.Fatalf("serial %d served, want 1001", got)
	}
	issue(1002)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); served(s) != 1002; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served after SIGHUP:\n%s", s.log.String())
		}
	}
}
