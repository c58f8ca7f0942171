package oaipmh

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fixture is the repository testdata/provider.py serves (see its doc).
type fixture struct {
	Formats []string               `json:"formats,omitempty"`
	Sets    []string               `json:"sets"`
	Records []fixtureRecord        `json:"records"`
	Landing map[string]fixturePage `json:"landing"`
}

type fixtureRecord struct {
	ID        string              `json:"id"`
	Datestamp string              `json:"datestamp"`
	Sets      []string            `json:"sets,omitempty"`
	Deleted   bool                `json:"deleted,omitempty"`
	DC        map[string][]string `json:"dc,omitempty"`
}

type fixturePage struct {
	Files []fixtureFile `json:"files"`
	Head  *bool         `json:"head,omitempty"`
}

type fixtureFile struct {
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"`
	Content     string `json:"content"`
	Modified    string `json:"modified,omitempty"`
	Disposition string `json:"disposition,omitempty"`
	Relative    bool   `json:"relative,omitempty"`
}

// provider is a running testdata/provider.py: pyoai's OAI-PMH server over
// a fixture the test rewrites (the provider reads it on every request).
type provider struct {
	origin string // http://127.0.0.1:port
	data   string // the fixture's path
	log    string
}

// write replaces the fixture the provider serves.
func (p *provider) write(t *testing.T, f fixture) {
	t.Helper()
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	tmp := p.data + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.data); err != nil { // the provider never reads half a file
		t.Fatal(err)
	}
}

// startProvider runs testdata/provider.py with the fixtures' Python on a
// free loopback port, serving f, until t ends.
func startProvider(t *testing.T, f fixture) *provider {
	t.Helper()
	python := filepath.Join(repoRoot(t), ".ci", ".venv-fixtures", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: run .ci/test, which makes the fixtures' Python environment (pyoai)", python)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "provider.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &provider{data: filepath.Join(dir, "repository.json"), log: filepath.Join(dir, "provider.log")}
	p.write(t, f)
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		p.origin = "http://127.0.0.1:" + port
		logf, err := os.Create(p.log)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, script, port, p.data)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting the OAI-PMH provider: %v", err)
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
		switch wait(p.origin+"/oai?verb=Identify", exited, 20*time.Second) {
		case "ready":
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					b, _ := os.ReadFile(p.log)
					t.Logf("provider log:\n%s", b)
				}
			})
			return p
		case "exited":
			if attempt < 3 {
				continue // the port was taken meanwhile: another
			}
			b, _ := os.ReadFile(p.log)
			t.Fatalf("the OAI-PMH provider exited at start:\n%s", b)
		default:
			stop()
			b, _ := os.ReadFile(p.log)
			t.Fatalf("the OAI-PMH provider did not answer within 20s:\n%s", b)
		}
	}
}

// wait is "ready" when url answers, "exited" when the process has, or
// "timeout".
func wait(url string, exited <-chan struct{}, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-exited:
			return "exited"
		default:
		}
		if answers(url) {
			return "ready"
		}
		if time.Now().After(deadline) {
			return "timeout"
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func answers(url string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freePort is a loopback port nothing listens on (yet).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// repoRoot is the directory of the module's go.mod.
func repoRoot(t *testing.T) string {
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
