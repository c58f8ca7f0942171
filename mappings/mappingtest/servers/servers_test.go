package servers

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestStartVersityGW(t *testing.T) {
	t.Parallel()
	start := time.Now()
	endpoint, _, _, bucket := StartVersityGW(t)
	t.Logf("versitygw at %s with bucket %s in %v", endpoint, bucket, time.Since(start))
	resp, err := http.Get(endpoint + "/" + bucket)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden { // unsigned
		t.Errorf("anonymous list: %s", resp.Status)
	}
}

func TestStartNginxDAV(t *testing.T) {
	t.Parallel()
	start := time.Now()
	base := StartNginxDAV(t)
	t.Logf("nginx at %s in %v", base, time.Since(start))
	req, _ := http.NewRequest(http.MethodPut, base+"a/b/c.txt", strings.NewReader("hello"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %s", resp.Status)
	}
	resp, err = http.Get(base + "a/b/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" {
		t.Errorf("GET: %q", b)
	}
}

func TestNginxDAVAuth(t *testing.T) {
	t.Parallel()
	d := NginxDAV(t, DAVOptions{Username: "u", Password: "p"})
	resp, err := http.Get(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, d.URL, nil)
	req.SetBasicAuth("u", "p")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the password: %s", resp.Status)
	}
}

// fatalRecorder records the message of a Fatalf and ends its goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingBinaryFailsWithTheInstallHint(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	t.Setenv("GOBIN", "")
	t.Setenv("GOPATH", empty)
	t.Setenv("HOME", empty)
	for name, start := range map[string]func(testing.TB){
		"versitygw": func(tb testing.TB) { StartVersityGW(tb) },
		"nginx":     func(tb testing.TB) { lookPath(tb, "nginx", empty+"/nginx") },
	} {
		rec := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); start(rec) }()
		<-done
		if !strings.Contains(rec.msg, "run .ci/test, which installs it") {
			t.Errorf("%s: %q", name, rec.msg)
		}
	}
}
