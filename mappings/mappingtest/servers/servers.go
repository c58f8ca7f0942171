// Package servers starts real upstream servers for tests: versitygw (S3 over a
// posix directory) and nginx with WebDAV, each on a free loopback port, with its
// files in t.TempDir(), stopped when the test ends. A missing binary fails the
// test (run .ci/test, which installs it); these tests are never skipped.
package servers

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const missing = "run .ci/test, which installs it"

// S3 is a running versitygw.
type S3 struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint          string
	AccessKey, Secret string
	// Bucket exists and is empty.
	Bucket string
	// Root is the posix directory behind the gateway: a bucket is a directory,
	// an object a file.
	Root string
}

// StartVersityGW starts versitygw with one empty bucket.
func StartVersityGW(t testing.TB) (endpoint, accessKey, secret, bucket string) {
	s := VersityGW(t)
	return s.Endpoint, s.AccessKey, s.Secret, s.Bucket
}

// VersityGW starts versitygw (installed by `go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0`) with one empty bucket.
func VersityGW(t testing.TB) S3 {
	t.Helper()
	bin := goBinary(t, "versitygw")
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	s := S3{AccessKey: "testkey", Secret: "testsecret123", Bucket: "d1bridge-test", Root: root}
	var addr string
	start(t, "versitygw", dir, func() *exec.Cmd {
		addr = freeAddr(t)
		return exec.Command(bin, "--access", s.AccessKey, "--secret", s.Secret, "--port", addr, "--quiet", "posix", root)
	}, func() bool { return httpAnswers("http://" + addr + "/") })
	s.Endpoint = "http://" + addr
	mc, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.Secret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := mc.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("versitygw: creating bucket %s: %v", s.Bucket, err)
	}
	return s
}

// DAV is a running nginx with WebDAV.
type DAV struct {
	// URL is the server's root collection, http://127.0.0.1:PORT/.
	URL string
	// Root is the directory nginx serves.
	Root string
}

// DAVOptions vary the nginx configuration.
type DAVOptions struct {
	// Strict turns create_full_put_path off, so that PUT (and MOVE, if nginx
	// checks) needs the parent collection, as in plain RFC 4918.
	Strict bool
	// Username and Password, when set, require basic authentication.
	Username, Password string
}

// StartNginxDAV starts nginx with WebDAV (PUT, DELETE, MKCOL, COPY, MOVE,
// PROPFIND, OPTIONS; create_full_put_path on) and returns its root URL.
func StartNginxDAV(t testing.TB) (baseURL string) {
	return NginxDAV(t, DAVOptions{}).URL
}

// NginxDAV starts nginx with WebDAV (apt: nginx libnginx-mod-http-dav-ext).
func NginxDAV(t testing.TB, o DAVOptions) DAV {
	t.Helper()
	bin := lookPath(t, "nginx", "/usr/sbin/nginx")
	const module = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("nginx WebDAV module %s is missing (libnginx-mod-http-dav-ext): %s", module, missing)
	}
	dir := t.TempDir()
	d := DAV{Root: filepath.Join(dir, "dav")}
	for _, sub := range []string{"logs", "tmp", "dav"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	auth := ""
	if o.Username != "" {
		// nginx reads {PLAIN} passwords in its htpasswd files.
		if err := os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(o.Username+":{PLAIN}"+o.Password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth_basic dav; auth_basic_user_file %s/htpasswd;", dir)
	}
	fullPath := "on"
	if o.Strict {
		fullPath = "off"
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // else the workers run as nobody and cannot write the root
	}
	var addr string
	start(t, "nginx", dir, func() *exec.Cmd {
		addr = freeAddr(t)
		conf := fmt.Sprintf(`load_module %[5]s;
daemon off;
master_process on;
worker_processes 1;
%[4]s
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %[1]s/tmp/body;
  proxy_temp_path %[1]s/tmp/proxy;
  fastcgi_temp_path %[1]s/tmp/fastcgi;
  uwsgi_temp_path %[1]s/tmp/uwsgi;
  scgi_temp_path %[1]s/tmp/scgi;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  server {
    listen %[2]s;
    root %[1]s/dav;
    client_max_body_size 0;
    location / {
      %[6]s
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path %[3]s;
      dav_access user:rw group:r all:r;
      autoindex on;
      autoindex_format json;
    }
  }
}
`, dir, addr, fullPath, user, module, auth)
		if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "logs", "error.log"))
	}, func() bool { return httpAnswers("http://" + addr + "/") })
	d.URL = "http://" + addr + "/"
	return d
}

// start runs the command cmd builds (again, on a new port, if it exits at
// once: the port was taken) until ready, and stops it when t ends. The process
// leads its own group, so that nginx's workers stop with their master.
func start(t testing.TB, name, dir string, cmd func() *exec.Cmd, ready func() bool) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	for attempt := 1; ; attempt++ {
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		c := cmd()
		c.Dir = dir
		c.Stdout, c.Stderr = logf, logf
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			logf.Close()
			t.Fatalf("starting %s: %v", name, err)
		}
		exited := make(chan struct{})
		go func() { c.Wait(); logf.Close(); close(exited) }()
		stop := func() {
			syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		switch waitReady(ready, exited, 15*time.Second) {
		case isReady:
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("%s log:\n%s", name, tail(logPath))
				}
			})
			return
		case hasExited:
			if attempt < 3 {
				continue // the port was taken meanwhile: try another
			}
			t.Fatalf("%s exited at start:\n%s", name, tail(logPath))
		default:
			stop()
			t.Fatalf("%s did not answer within 15s:\n%s", name, tail(logPath))
		}
	}
}

const (
	isReady = iota
	hasExited
	timedOut
)

func waitReady(ready func() bool, exited <-chan struct{}, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-exited:
			return hasExited
		default:
		}
		if ready() {
			return isReady
		}
		if time.Now().After(deadline) {
			return timedOut
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpAnswers reports whether anything answers HTTP at url.
func httpAnswers(url string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// freeAddr is a loopback address with a port nothing listens on (yet).
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// lookPath finds a system binary on PATH or at fallback.
func lookPath(t testing.TB, name, fallback string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat(fallback); err == nil {
		return fallback
	}
	t.Fatalf("%s is not installed: %s", name, missing)
	return ""
}

// goBinary finds a binary `go install` put in GOBIN or GOPATH/bin, or on PATH.
func goBinary(t testing.TB, name string) string {
	t.Helper()
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, p := range filepath.SplitList(gopath) {
		dirs = append(dirs, filepath.Join(p, "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("%s is not installed (looked in %s and PATH): %s", name, strings.Join(dirs, ", "), missing)
	return ""
}
