package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
)

// runBinary runs the binary with args and env (added to the test's, less
// every D1BRIDGE_* variable) and answers its exit code, stdout and stderr.
func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(withoutD1Bridge(os.Environ()), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", binPath, args, err)
	}
	return code, stdout.String(), stderr.String()
}

// TestHelp: help, --help and -h print every subcommand, one line each, and
// every subcommand has --help; all exit 0 and write to stdout.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, _ := runBinary(t, nil, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, c := range commands {
			if !strings.Contains(out, "\n  d1bridge "+c.name) {
				t.Errorf("%v: %q is not listed:\n%s", args, c.name, out)
			}
		}
	}
	helps := [][]string{{"token", "-h"}, {"--config", "x.yaml", "--help"}}
	for _, c := range commands {
		if c.name != "help" {
			helps = append(helps, append(strings.Fields(c.name), "--help"))
		}
	}
	for _, args := range helps {
		code, out, errOut := runBinary(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: d1bridge ") {
			t.Errorf("%v: exit %d, stdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
	}
	if code, _, errOut := runBinary(t, nil, "frobnicate"); code != 1 || !strings.Contains(errOut, "d1bridge help") {
		t.Errorf("an unknown command: exit %d, %q", code, errOut)
	}
}

// TestTokenCommand: `token --new-key` makes the key pair (the private key
// 0600), prints only the token on stdout and, on stderr, the configuration
// lines; a node started with those lines accepts the token for a create that
// it refuses without it. A second run reuses the key; --subject is required.
func TestTokenCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "keys", "signing.key")
	const subject = "CN=Jane Operator,O=Example,C=US,DC=cilogon,DC=org"
	code, out, errOut := runBinary(t, nil, "token", "--subject", subject, "--new-key", keyPath, "--lifetime", "1h")
	if code != 0 {
		t.Fatalf("token: exit %d\n%s", code, errOut)
	}
	token := strings.TrimSuffix(out, "\n")
	if strings.Count(token, ".") != 2 || strings.ContainsAny(token, " \n") {
		t.Fatalf("stdout is not one token:\n%s", out)
	}
	if fi, err := os.Stat(keyPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the private key: %v %v, want mode 0600", fi, err)
	}
	if _, err := os.Stat(keyPath + ".pub.pem"); err != nil {
		t.Fatalf("the public key: %v", err)
	}
	// The configuration lines printed, as an operator would paste them.
	var cfg []string
	for _, l := range strings.Split(errOut, "\n") {
		if l == "auth:" || strings.HasPrefix(l, "  signingKey: ") || strings.HasPrefix(l, "  tokenKeys: ") {
			cfg = append(cfg, l)
		}
	}
	if len(cfg) != 3 {
		t.Fatalf("the configuration lines are not printed:\n%s", errOut)
	}
	cfgPath := authWrite(t, dir, "d1bridge.yaml", []byte(strings.Join(cfg, "\n")+"\nnode:\n  submitters: [authenticatedUser]\n"))
	if code, out, errOut := runBinary(t, nil, "config", "check", cfgPath); code != 0 {
		t.Errorf("config check of the printed lines: exit %d\n%s%s", code, out, errOut)
	}
	s := startServerConfig(t, "", cfgPath, "D1BRIDGE_NODE_SUBMITTERS=")

	data := []byte("first write\n")
	body, ctype := multipartBody(false, createParts(newSysmeta("bootstrap/1", "text/plain", "SHA-256", data), bytes.NewReader(data), false)...)
	authWantError(t, s.do(t, http.MethodPost, "/d1/mn/v2/object", body, "Content-Type", ctype), http.StatusUnauthorized, "InvalidToken")
	sm := authObject("bootstrap/1", subject, data)
	authCreate(t, s, token, sm, data)
	var who adapter.SessionDoc
	if err := adapter.Decode(bytes.NewReader(authDo(t, s, http.MethodGet, "/d1/mn/v2/whoami", token).Body), &who); err != nil || who.Subject != subject {
		t.Errorf("whoami with the token: %q %v, want %q", who.Subject, err, subject)
	}

	// Again: the key is reused, and the token is accepted too.
	code, out, errOut = runBinary(t, nil, "token", "--subject", subject, "--new-key", keyPath)
	if code != 0 || !strings.Contains(errOut, "using the signing key") {
		t.Fatalf("token again: exit %d\n%s", code, errOut)
	}
	authCreate(t, s, strings.TrimSpace(out), authObject("bootstrap/2", subject, data), data)
	// With the key in the configuration, no --new-key is needed.
	if code, out, errOut := runBinary(t, nil, "token", "--config", cfgPath, "--subject", subject); code != 0 || strings.Count(out, ".") != 2 {
		t.Errorf("token --config: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runBinary(t, nil, "token", "--new-key", keyPath); code != 1 || !strings.Contains(errOut, "--subject is required") {
		t.Errorf("token without --subject: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runBinary(t, nil, "token", "--subject", subject); code != 1 || !strings.Contains(errOut, "no signing key") {
		t.Errorf("token without a key: exit %d, %q", code, errOut)
	}
}

// TestNodeDocumentServices: the node document (validated against the
// schema by server.do) advertises the services served: MNPackage in both
// versions, MNView in v1 and v2, MNAdmin in v2, besides the core ones.
func TestNodeDocumentServices(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, path := range []string{"/d1/mn/v1/node", "/d1/mn/v2/node"} {
		r := s.get(t, path)
		if !wantStatus(t, r, http.StatusOK) {
			continue
		}
		var n adapter.Node
		decode(t, r, &n)
		have := map[string]bool{}
		for _, sv := range n.Services.Service {
			have[sv.Name+" "+sv.Version] = true
		}
		for _, want := range []string{"MNCore v1", "MNRead v2", "MNStorage v2", "MNPackage v1", "MNPackage v2", "MNView v1", "MNView v2", "MNAdmin v2"} {
			if !have[want] {
				t.Errorf("%s: service %s is not listed (%v)", path, want, have)
			}
		}
	}
}

// TestCORSPreflight: with cors.allowedOrigins set, OPTIONS answers the
// preflight of any path for an allowed origin with the Access-Control-*
// headers and gives another origin none; answers carry them for the allowed
// origin only.
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	const portal = "https://portal.example.org"
	s := startServer(t, "", "D1BRIDGE_CORS_ALLOWEDORIGINS="+portal, "D1BRIDGE_CORS_MAXAGE=5m")
	for _, path := range []string{"/d1/mn/v2/object", "/d1/mn/v2/object/a%2Fb", "/d1/cn/v2/resolve/x", "/d1/mn/v1/views"} {
		r := s.do(t, http.MethodOptions, path, nil, "Origin", portal, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization")
		if r.Status != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != portal ||
			!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
			r.Header.Get("Access-Control-Max-Age") != "300" {
			t.Errorf("preflight of %s: %d %v", path, r.Status, r.Header)
		}
		r = s.do(t, http.MethodOptions, path, nil, "Origin", "https://elsewhere.example.net", "Access-Control-Request-Method", "POST")
		for k := range r.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("preflight of %s from another origin: %s: %v", path, k, r.Header)
			}
		}
	}
	r := s.get(t, "/d1/mn/v2/monitor/ping", "Origin", portal)
	if r.Header.Get("Access-Control-Allow-Origin") != portal || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "DataONE-Checksum") {
		t.Errorf("ping from the portal: %v", r.Header)
	}
	if r := s.get(t, "/d1/mn/v2/monitor/ping", "Origin", "https://elsewhere.example.net"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("ping from another origin: %v", r.Header)
	}
}

// TestStartWarnings: a node on a wildcard listen without node.baseURL, and
// a member node that synchronizes without node.subjects, says so in its log
// at start.
func TestStartWarnings(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binPath, "serve")
	cmd.Env = append(withoutD1Bridge(os.Environ()), "D1BRIDGE_LISTEN=0.0.0.0:0", "D1BRIDGE_DATADIR="+t.TempDir(),
		"D1BRIDGE_NODE_ID="+testNodeID, "D1BRIDGE_NODE_SYNCHRONIZE=true", "D1BRIDGE_ROLES=mn")
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(log.String(), `"msg":"listening"`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Error("no exit within 15s of SIGTERM")
	}
	for _, want := range []string{"node.baseURL is empty on the wildcard listen 0.0.0.0:0", "node.synchronize is on but node.subjects is empty"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log.String())
		}
	}

	// The first start of the README, both roles on loopback, warns of nothing.
	quiet := startServer(t, "")
	quiet.stop()
	if l := quiet.log.String(); strings.Contains(l, `"level":"WARN"`) {
		t.Errorf("warnings on a loopback node of both roles:\n%s", l)
	}
}

// TestStartWarningsCases: which listens and node settings warn.
func TestStartWarningsCases(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		listen, baseURL string
		subjects        []string
		synchronize     bool
		roles           []string
		want            int
	}{
		"loopback":                 {"127.0.0.1:8080", "", []string{"CN=n"}, true, []string{"mn"}, 0},
		"0.0.0.0":                  {"0.0.0.0:8080", "", []string{"CN=n"}, true, []string{"mn"}, 1},
		"[::]":                     {"[::]:8080", "", []string{"CN=n"}, true, []string{"mn"}, 1},
		"no host":                  {":8080", "", []string{"CN=n"}, true, []string{"mn"}, 1},
		"wildcard with baseURL":    {":8080", "https://repo.example.org/d1", []string{"CN=n"}, true, []string{"mn"}, 0},
		"synchronize, no subjects": {"127.0.0.1:8080", "", nil, true, []string{"mn"}, 1},
		"no synchronize":           {"127.0.0.1:8080", "", nil, false, []string{"mn"}, 0},
		"cn only":                  {"127.0.0.1:8080", "", nil, true, []string{"cn"}, 0},
		"mn and cn (the default)":  {"127.0.0.1:8080", "", nil, true, []string{"mn", "cn"}, 0},
		"both":                     {"0.0.0.0:8080", "", nil, true, []string{"mn"}, 2},
	}
	for name, tc := range tests {
		cfg := config.Default()
		cfg.Listen, cfg.Node.BaseURL, cfg.Node.Subjects, cfg.Node.Synchronize, cfg.Roles =
			tc.listen, tc.baseURL, tc.subjects, tc.synchronize, tc.roles
		if got := startWarnings(cfg); len(got) != tc.want {
			t.Errorf("%s: %d warnings %q, want %d", name, len(got), got, tc.want)
		}
	}
}
