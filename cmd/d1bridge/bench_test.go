//go:build linux

package main

// Benchmarks and memory checks of the d1bridge binary (issue 3). Everything
// here drives the real binary (built by TestMain, started by startServer: see
// helpers_test.go) on a temporary data directory, over loopback.
//
// Speed is never asserted: each benchmark measures d1bridge and, in the same
// loop, a baseline, and reports the ratio as a custom metric. Ratios of
// throughput are "x-<baseline>" (d1bridge MB/s ÷ baseline MB/s: 1 is parity,
// 0.8 the target for the 1 GiB get); ratios of cost are
// "x-startA/B" (ns at start A ÷ ns at start B: 1 means page A costs page B).
// srv-cpu-ms/op is the server process's CPU time per operation and
// srv-peak-MiB its peak RSS during the loop (VmHWM, reset before it).
//
//	go test -run '^$' -bench . -benchtime 3x -timeout 30m ./cmd/d1bridge/
//	go test -run '^$' -bench 'MNGet/1KiB|MNDescribe' -benchtime 2s ./cmd/d1bridge/
//	go test -run TestPeakMemory1GiB -v ./cmd/d1bridge/
//
// With -short the 1 GiB objects become 256 MiB (sub-benchmarks are named after
// the size really used). The listObjects benchmark fills a catalog of 200,000
// objects once (about 75 s; -v logs how long) and keeps it under
// $TMPDIR/d1bridge-bench-200k, keyed by benchFillVersion and the catalog
// schema; delete that directory to refill.
//
// The only assertion is TestPeakMemory1GiB: the server's peak resident set
// (VmHWM) after a 1 GiB create and after a 1 GiB get, each on a freshly
// started server, stays under 64 MiB. That is a memory figure, not a timing.

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
)

const (
	// benchFillVersion keys the cached 200,000-object catalog: bump it when
	// what benchFill stores changes.
	benchFillVersion = 1
	benchFillObjects = 200_000
	benchPageCount   = 1000
	benchPages       = benchFillObjects / benchPageCount
	// benchPeakLimit is the bound on the server's peak RSS.
	benchPeakLimit = 64 << 20
	benchSubject   = "CN=d1bridge bench,DC=dataone,DC=org"
	benchNodeID    = "urn:node:d1bridge" // config.Default's node id, which the binary uses
	benchMiB       = 1 << 20
)

// benchBigSize is the "1 GiB" of the issue, 256 MiB in -short mode.
func benchBigSize() (int64, string) {
	if testing.Short() {
		return 256 << 20, "256MiB"
	}
	return 1 << 30, "1GiB"
}

// --- the server process

// benchStart starts the binary with startServer (helpers_test.go; TestMain
// built it) on dataDir, as node benchNodeID, with anonymous creates and an
// upload limit no benchmark reaches, and returns it with its MN v2 base URL.
func benchStart(tb testing.TB, dataDir string) (*server, string) {
	tb.Helper()
	s := startServer(tb, dataDir,
		"D1BRIDGE_NODE_ID="+benchNodeID,
		"D1BRIDGE_MAXUPLOADSIZE="+strconv.FormatInt(1<<40, 10),
	)
	return s, s.URL + "/d1/mn/v2"
}

// benchHWM is the server's peak resident set size in bytes (VmHWM, /proc).
func benchHWM(tb testing.TB, s *server) int64 {
	tb.Helper()
	pid := s.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatalf("reading the server's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(rest); len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	tb.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// benchResetHWM sets the server's peak RSS back to its current RSS (Linux ≥
// 4.0), so that a later benchHWM tells the peak of what ran in between. It
// reports whether the kernel took it.
func benchResetHWM(s *server) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.cmd.Process.Pid), []byte("5"), 0) == nil
}

// benchCPU is the CPU time (user and system) the server has used so far.
func benchCPU(tb testing.TB, s *server) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		tb.Fatalf("reading the server's stat: %v", err)
	}
	// The fields after "pid (comm) " start at field 3; utime and stime are 14
	// and 15, in clock ticks of 1/100 s (USER_HZ on Linux).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		tb.Fatalf("unexpected /proc/%d/stat: %s", s.cmd.Process.Pid, b)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// --- clients and bytes

func benchNewClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      64 << 10,
		WriteBufferSize:     256 << 10,
	}}
}

var benchBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// benchCopy copies through a 256 KiB buffer, the same way for every server:
// the wrappers hide ReadFrom and WriteTo so that io.CopyBuffer uses the buffer.
func benchCopy(w io.Writer, r io.Reader) (int64, error) {
	bp := benchBufs.Get().(*[]byte)
	defer benchBufs.Put(bp)
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{r}, *bp)
}

// benchFetch sends a GET or HEAD and reads the whole body into h (discarded
// when h is nil); anything but 200 is an error.
func benchFetch(c *http.Client, method, u string, h hash.Hash) (int64, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var w io.Writer = io.Discard
	if h != nil {
		w = h
	}
	n, err := benchCopy(w, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("%s %s: %s", method, u, resp.Status)
	}
	return n, err
}

// benchPattern is the bytes every generated object repeats: a fixed
// pseudo-random block of odd length.
var benchPattern = func() []byte {
	p := make([]byte, 1<<20+4093)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x >> 32)
	}
	return p
}()

// benchGen reads size generated bytes without holding them: the first size
// bytes of benchPattern repeated.
type benchGen struct{ off, left int64 }

func newBenchGen(size int64) *benchGen { return &benchGen{left: size} }

func (g *benchGen) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], benchPattern[g.off%int64(len(benchPattern)):])
		n += c
		g.off += int64(c)
	}
	g.left -= int64(n)
	return n, nil
}

var benchSums sync.Map // size -> SHA-1 hex of newBenchGen(size)

// benchSHA1 is the SHA-1 of the generated object of size bytes (computed once).
func benchSHA1(size int64) string {
	if v, ok := benchSums.Load(size); ok {
		return v.(string)
	}
	h := sha1.New()
	if _, err := benchCopy(h, newBenchGen(size)); err != nil {
		panic(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	benchSums.Store(size, sum)
	return sum
}

// benchSysmeta is the system metadata of a public-readable object.
func benchSysmeta(pid string, size int64, sha1Hex string) *adapter.SystemMetadata {
	now := adapter.Now()
	return &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: pid, FormatID: "application/octet-stream", Size: uint64(size),
		Checksum:  adapter.Checksum{Algorithm: "SHA-1", Value: sha1Hex},
		Submitter: benchSubject, RightsHolder: benchSubject,
		AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{{
			Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}},
		DateUploaded: now, DateSysMetadataModified: now,
		OriginMemberNode: benchNodeID, AuthoritativeMemberNode: benchNodeID,
	}
}

// benchOrder is the order of the parts of a create body.
type benchOrder string

const (
	// benchObjectFirst is what the DataONE Python client sends: pid, object, sysmeta.
	benchObjectFirst benchOrder = "object-first"
	// benchSysmetaFirst lets the server hash with the declared algorithm only.
	benchSysmetaFirst benchOrder = "sysmeta-first"
)

// benchCreate creates pid with size generated bytes through POST /object, the
// object part streamed from the generator (never held in memory) with a
// Content-Length, as the Python client's MultipartEncoder sends it.
func benchCreate(c *http.Client, base, pid string, size int64, order benchOrder) error {
	var doc bytes.Buffer
	if err := adapter.Encode(&doc, benchSysmeta(pid, size, benchSHA1(size)), 2); err != nil {
		return err
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	writeSysmeta := func() error {
		w, err := mw.CreateFormFile("sysmeta", "sysmeta.xml")
		if err == nil {
			_, err = w.Write(doc.Bytes())
		}
		return err
	}
	if err := mw.WriteField("pid", pid); err != nil {
		return err
	}
	if order == benchSysmetaFirst {
		if err := writeSysmeta(); err != nil {
			return err
		}
	}
	if _, err := mw.CreateFormFile("object", "content.bin"); err != nil {
		return err
	}
	// The writer writes straight through: what is in buf now precedes the
	// object's bytes, and what it writes next follows them.
	prefix := bytes.Clone(buf.Bytes())
	buf.Reset()
	if order == benchObjectFirst {
		if err := writeSysmeta(); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	suffix := bytes.Clone(buf.Bytes())
	body := io.MultiReader(bytes.NewReader(prefix), newBenchGen(size), bytes.NewReader(suffix))
	req, err := http.NewRequest(http.MethodPost, base+"/object", body)
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(prefix)) + size + int64(len(suffix))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("create %s: %w", pid, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("create %s: %s\n%s", pid, resp.Status, answer)
	}
	var id adapter.Identifier
	if err := adapter.Decode(bytes.NewReader(answer), &id); err != nil || id.Value != pid {
		return fmt.Errorf("create %s: answer %q (%v)", pid, answer, err)
	}
	return nil
}

// benchBlobs lists the files of size bytes in the object store of dataDir.
func benchBlobs(dataDir string, size int64) ([]string, error) {
	var out []string
	err := filepath.WalkDir(filepath.Join(dataDir, "objects", "objects"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Size() == size {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// --- baselines

// benchStartNginx serves root with Debian's nginx on a free loopback port, the
// way a static file server is deployed (sendfile on, no access log). It
// returns "" when nginx is not installed.
func benchStartNginx(tb testing.TB, root string) string {
	tb.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			return ""
		}
		bin = "/usr/sbin/nginx"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := tb.TempDir()
	user := ""
	if os.Getuid() == 0 {
		user = "user root;" // workers would be nobody, who cannot read the store
	}
	conf := fmt.Sprintf(`daemon off;
%s
worker_processes auto;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { }
  default_type application/octet-stream;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  server {
    listen %[3]s;
    root %[4]s;
  }
}
`, user, dir, addr, root)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Logf("nginx does not start, no nginx baseline: %v", err)
		return ""
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case <-done:
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Logf("nginx exited, no nginx baseline:\n%s%s", out.Bytes(), errLog)
			return ""
		default:
		}
		if time.Now().After(deadline) {
			tb.Logf("nginx does not listen on %s, no nginx baseline", addr)
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchTarget is one server's URL for the same bytes.
type benchTarget struct{ name, url string }

// --- 1. get, against static file servers

// BenchmarkMNGet streams an object of 1 KiB and of 1 GiB from d1bridge and, in
// the same loop, the very file d1bridge stores from Go's http.FileServer (in
// this process) and from nginx when installed. ns/op and MB/s are d1bridge's;
// static-MB/s and nginx-MB/s the baselines'; x-static and x-nginx the
// throughput ratios d1bridge/baseline (target for 1 GiB: ≥ 0.8 of static);
// srv-peak-MiB the server's peak RSS during the loop.
func BenchmarkMNGet(b *testing.B) {
	big, bigName := benchBigSize()
	dataDir := b.TempDir()
	srv, base := benchStart(b, dataDir)
	c := benchNewClient()
	root := filepath.Join(dataDir, "objects", "objects")
	static := httptest.NewServer(http.FileServer(http.Dir(root)))
	b.Cleanup(static.Close)
	nginx := benchStartNginx(b, root)

	for _, sz := range []struct {
		name string
		size int64
	}{{"1KiB", 1 << 10}, {bigName, big}} {
		pid := "bench-get-" + sz.name
		if err := benchCreate(c, base, pid, sz.size, benchSysmetaFirst); err != nil {
			b.Fatal(err)
		}
		blobs, err := benchBlobs(dataDir, sz.size)
		if err != nil || len(blobs) != 1 {
			b.Fatalf("the stored file of %s: %v %v", pid, blobs, err)
		}
		rel, _ := filepath.Rel(root, blobs[0])
		targets := []benchTarget{
			{"d1bridge", base + "/object/" + url.PathEscape(pid)},
			{"static", static.URL + "/" + filepath.ToSlash(rel)},
		}
		if nginx != "" {
			targets = append(targets, benchTarget{"nginx", nginx + "/" + filepath.ToSlash(rel)})
		}
		want := benchSHA1(sz.size)
		for _, t := range targets {
			h := sha1.New()
			if n, err := benchFetch(c, http.MethodGet, t.url, h); err != nil || n != sz.size || hex.EncodeToString(h.Sum(nil)) != want {
				b.Fatalf("%s: got %d bytes, SHA-1 %x, err %v; want %d bytes, %s", t.name, n, h.Sum(nil), err, sz.size, want)
			}
		}

		b.Run(sz.name, func(b *testing.B) {
			b.SetBytes(sz.size)
			hwmOK := benchResetHWM(srv)
			cpu0 := benchCPU(b, srv)
			spent := make([]time.Duration, len(targets))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Rotate who goes first, so that neither gains from warm caches.
				for j := range targets {
					k := (i + j) % len(targets)
					start := time.Now()
					n, err := benchFetch(c, http.MethodGet, targets[k].url, nil)
					spent[k] += time.Since(start)
					if err != nil || n != sz.size {
						b.Fatalf("%s: %d bytes, %v", targets[k].name, n, err)
					}
				}
			}
			b.StopTimer()
			mbps := func(d time.Duration) float64 {
				return float64(sz.size) * float64(b.N) / 1e6 / d.Seconds()
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(mbps(spent[0]), "MB/s")
			b.ReportMetric(float64((benchCPU(b, srv)-cpu0).Microseconds())/1e3/float64(b.N), "srv-cpu-ms/op")
			for k, t := range targets[1:] {
				b.ReportMetric(mbps(spent[k+1]), t.name+"-MB/s")
				b.ReportMetric(mbps(spent[0])/mbps(spent[k+1]), "x-"+t.name)
			}
			if hwmOK {
				b.ReportMetric(float64(benchHWM(b, srv))/benchMiB, "srv-peak-MiB")
			}
		})
	}
}

// --- 2. create

var benchSeq atomic.Int64

// BenchmarkMNCreate creates 1 GiB objects streamed from the generator, with
// the object part before the system metadata (the Python client's order, so
// the server hashes MD5, SHA-1 and SHA-256 speculatively) and after it (SHA-1
// only). The baseline, in the same loop, writes the same bytes to a file on
// the same filesystem and fsyncs it, as the store must: disk-MB/s, and x-disk
// the ratio d1bridge/disk. Stored objects are removed between iterations.
func BenchmarkMNCreate(b *testing.B) {
	size, name := benchBigSize()
	dataDir := b.TempDir()
	srv, base := benchStart(b, dataDir)
	c := benchNewClient()
	benchSHA1(size)
	for _, order := range []benchOrder{benchObjectFirst, benchSysmetaFirst} {
		b.Run(name+"/"+string(order), func(b *testing.B) {
			b.SetBytes(size)
			hwmOK := benchResetHWM(srv)
			cpu0 := benchCPU(b, srv)
			var d1, disk time.Duration
			create := func() {
				pid := fmt.Sprintf("bench-create-%d-%d", os.Getpid(), benchSeq.Add(1))
				start := time.Now()
				if err := benchCreate(c, base, pid, size, order); err != nil {
					b.Fatal(err)
				}
				d1 += time.Since(start)
			}
			write := func() {
				start := time.Now()
				if err := benchWriteFile(filepath.Join(dataDir, "baseline"), size); err != nil {
					b.Fatal(err)
				}
				disk += time.Since(start)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					create()
					write()
				} else {
					write()
					create()
				}
				blobs, err := benchBlobs(dataDir, size)
				if err != nil {
					b.Fatal(err)
				}
				for _, p := range blobs {
					os.Remove(p)
				}
			}
			b.StopTimer()
			mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / 1e6 / d.Seconds() }
			b.ReportMetric(float64(d1.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(mbps(d1), "MB/s")
			b.ReportMetric(float64((benchCPU(b, srv)-cpu0).Microseconds())/1e3/float64(b.N), "srv-cpu-ms/op")
			b.ReportMetric(mbps(disk), "disk-MB/s")
			b.ReportMetric(mbps(d1)/mbps(disk), "x-disk")
			if hwmOK {
				b.ReportMetric(float64(benchHWM(b, srv))/benchMiB, "srv-peak-MiB")
			}
		})
	}
}

// benchWriteFile writes size generated bytes to path durably, then removes it.
func benchWriteFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	if _, err := benchCopy(f, newBenchGen(size)); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// --- 3. describe

// BenchmarkMNDescribe sends HEAD /object/{pid} from parallel keep-alive
// clients (8 goroutines per GOMAXPROCS) and reports requests per second.
func BenchmarkMNDescribe(b *testing.B) {
	srv, base := benchStart(b, b.TempDir())
	c := benchNewClient()
	const pid = "bench-describe"
	if err := benchCreate(c, base, pid, 1<<10, benchSysmetaFirst); err != nil {
		b.Fatal(err)
	}
	u := base + "/object/" + url.PathEscape(pid)
	if _, err := benchFetch(c, http.MethodHead, u, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("1KiB", func(b *testing.B) {
		b.SetParallelism(8)
		cpu0 := benchCPU(b, srv)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := benchFetch(c, http.MethodHead, u, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		b.ReportMetric(float64((benchCPU(b, srv)-cpu0).Microseconds())/1e3/float64(b.N), "srv-cpu-ms/op")
	})
}

// --- 4. listObjects over 200,000 objects

// BenchmarkMNListObjects pages listObjects (count=1000, anonymous caller) over
// a catalog of 200,000 public objects, created through the node package (see
// benchFilled). Each start*-ns metric is ns per request at that start, and
// x-startA/B the ratio of two (1: page A costs what page B costs).
//
//   - cold/fromDate: each iteration asks start=0 and start=100000 once, each
//     with a filter never seen before (a fromDate earlier than every object,
//     so that all 200,000 match): the first request for that offset, total
//     counted. ns/op is suppressed: it would be the pair.
//   - cold/unfiltered: the same without a filter, each request on a freshly
//     started server (restarts are not timed).
//   - harvest/fromDate: a harvester (a CN harvests from a date) pages
//     0..199 in order with a new fromDate each iteration: page 0 counts the
//     total, page k starts from the cursor page k-1 left.
//   - harvest/unfiltered: the same without a filter, on a freshly started
//     server each iteration.
//   - harvest/repeat: unfiltered again on the same server, after one untimed
//     harvest: every total and cursor is known.
//
// For harvests ns/op is the whole harvest of 200 pages, ns/page its mean.
// The srv-cpu metrics are the server's CPU time (at the kernel's 10 ms
// accounting granularity, summed over the loop): less disturbed than wall
// time when other processes share the two cores.
func BenchmarkMNListObjects(b *testing.B) {
	dataDir := benchFilled(b)
	srv, base := benchStart(b, dataDir)
	c := benchNewClient()
	var list adapter.ObjectList
	if err := benchList(c, benchPageURL(base, 100_000, ""), &list); err != nil {
		b.Fatal(err)
	}
	if list.Total != benchFillObjects || list.Count != benchPageCount || len(list.ObjectInfo) != benchPageCount {
		b.Fatalf("start=100000: count %d, total %d; want %d of %d", list.Count, list.Total, benchPageCount, benchFillObjects)
	}
	// fresh is a base URL to ask, base or that of a newly started server, and
	// the function to call when done with it, which adds the server CPU time
	// used meanwhile to *cpu.
	fresh := func(b *testing.B, restart bool, cpu *time.Duration) (string, func()) {
		if !restart {
			cpu0 := benchCPU(b, srv)
			return base, func() { *cpu += benchCPU(b, srv) - cpu0 }
		}
		b.StopTimer()
		s, u := benchStart(b, dataDir)
		cpu0 := benchCPU(b, s)
		b.StartTimer()
		return u, func() {
			b.StopTimer()
			*cpu += benchCPU(b, s) - cpu0
			s.stop()
			b.StartTimer()
		}
	}
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1e3 / float64(n) }

	cold := func(b *testing.B, restart bool) {
		starts := []int{0, 100_000}
		spent := make([]time.Duration, len(starts))
		cpu := make([]time.Duration, len(starts))
		for i := 0; i < b.N; i++ {
			for j := range starts {
				k := (i + j) % len(starts)
				from := ""
				if !restart {
					from = benchNewFromDate()
				}
				u, done := fresh(b, restart, &cpu[k])
				t0 := time.Now()
				if err := benchList(c, benchPageURL(u, starts[k], from), nil); err != nil {
					b.Fatal(err)
				}
				spent[k] += time.Since(t0)
				done()
			}
		}
		per := func(k int) float64 { return float64(spent[k].Nanoseconds()) / float64(b.N) }
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(per(0), "start0-ns")
		b.ReportMetric(per(1), "start100000-ns")
		b.ReportMetric(per(1)/per(0), "x-start100000/0")
		b.ReportMetric(ms(cpu[0], b.N), "start0-srv-cpu-ms")
		b.ReportMetric(ms(cpu[1], b.N), "start100000-srv-cpu-ms")
	}
	b.Run("cold/fromDate", func(b *testing.B) { cold(b, false) })
	b.Run("cold/unfiltered", func(b *testing.B) { cold(b, true) })

	harvest := func(b *testing.B, restart, filtered bool) {
		spent := make([]time.Duration, benchPages)
		var cpu time.Duration
		for i := 0; i < b.N; i++ {
			from := ""
			if filtered {
				from = benchNewFromDate()
			}
			u, done := fresh(b, restart, &cpu)
			for p := range benchPages {
				t0 := time.Now()
				if err := benchList(c, benchPageURL(u, p*benchPageCount, from), nil); err != nil {
					b.Fatal(err)
				}
				spent[p] += time.Since(t0)
			}
			done()
		}
		var total time.Duration
		for _, d := range spent {
			total += d
		}
		per := func(p int) float64 { return float64(spent[p].Nanoseconds()) / float64(b.N) }
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*benchPages), "ns/page")
		b.ReportMetric(ms(cpu, b.N*benchPages), "srv-cpu-ms/page")
		b.ReportMetric(per(0), "start0-ns")
		b.ReportMetric(per(1), "start1000-ns")
		b.ReportMetric(per(100), "start100000-ns")
		b.ReportMetric(per(benchPages-1), "start199000-ns")
		b.ReportMetric(per(100)/per(0), "x-start100000/0")
		b.ReportMetric(per(100)/per(1), "x-start100000/1000")
	}
	b.Run("harvest/fromDate", func(b *testing.B) { harvest(b, false, true) })
	b.Run("harvest/unfiltered", func(b *testing.B) { harvest(b, true, false) })
	b.Run("harvest/repeat", func(b *testing.B) {
		for p := range benchPages {
			if err := benchList(c, benchPageURL(base, p*benchPageCount, ""), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		harvest(b, false, false)
	})
}

var benchFromSeq atomic.Int64

// benchNewFromDate is a fromDate no request has used, before every object.
func benchNewFromDate() string {
	t := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(benchFromSeq.Add(1)) * time.Millisecond)
	return t.Format("2006-01-02T15:04:05.000Z")
}

func benchPageURL(base string, start int, fromDate string) string {
	u := fmt.Sprintf("%s/object?start=%d&count=%d", base, start, benchPageCount)
	if fromDate != "" {
		u += "&fromDate=" + url.QueryEscape(fromDate)
	}
	return u
}

// benchList GETs a list page and, when out is not nil, decodes it.
func benchList(c *http.Client, u string, out *adapter.ObjectList) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := benchCopy(&body, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s\n%s", u, resp.Status, body.Bytes())
	}
	if out != nil {
		return adapter.Decode(&body, out)
	}
	return nil
}

// benchFilled returns a data directory holding benchFillObjects public objects,
// filling it the first time: $TMPDIR/d1bridge-bench-200k/v<version>-<schema>.
// Only reads are served from it, so runs share it.
func benchFilled(tb testing.TB) string {
	key := fmt.Sprintf("v%d-%s", benchFillVersion, benchSchemaKey())
	return benchCached(tb, "d1bridge-bench-200k", key, func(name string) bool { return name == key },
		func(dir string) (string, error) {
			// Fill on tmpfs when there is one (fsync costs nothing there), then copy.
			start, fillDir := time.Now(), dir
			if shm := "/dev/shm"; benchFreeBytes(shm) > 8<<30 {
				if d, err := os.MkdirTemp(shm, "d1bridge-bench-fill-"); err == nil {
					defer os.RemoveAll(d)
					fillDir = d
				}
			}
			if err := benchFill(fillDir); err != nil {
				return "", err
			}
			filled := time.Since(start)
			if fillDir != dir {
				if err := os.CopyFS(dir, os.DirFS(fillDir)); err != nil {
					return "", fmt.Errorf("copying the fill: %w", err)
				}
			}
			return fmt.Sprintf("%d objects, filled in %s (in %s)", benchFillObjects, filled.Round(time.Millisecond), fillDir), nil
		})
}

// benchCached returns $TMPDIR/parent/key, filled by fill the first time (in a
// staging directory renamed into place once complete, so that a killed run
// leaves no half fill); fill's summary is logged and kept in its marker file.
// Fills under parent whose names start with v and that keep does not want,
// and stagings older than six hours, are removed. Benchmarks only read the
// result, so runs share it.
func benchCached(tb testing.TB, parent, key string, keep func(name string) bool, fill func(dir string) (string, error)) string {
	tb.Helper()
	parent = filepath.Join(os.TempDir(), parent)
	final := filepath.Join(parent, key)
	marker := filepath.Join(final, "bench-fill.done")
	if _, err := os.Stat(marker); err == nil {
		return final
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		tb.Fatal(err)
	}
	if entries, err := os.ReadDir(parent); err == nil {
		for _, e := range entries {
			info, _ := e.Info()
			stale := strings.HasPrefix(e.Name(), ".staging-") && info != nil && time.Since(info.ModTime()) > 6*time.Hour
			if (strings.HasPrefix(e.Name(), "v") && !keep(e.Name())) || stale {
				os.RemoveAll(filepath.Join(parent, e.Name()))
			}
		}
	}
	start := time.Now()
	staging, err := os.MkdirTemp(parent, ".staging-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(staging)
	summary, err := fill(staging)
	if err != nil {
		tb.Fatalf("filling %s: %v", final, err)
	}
	summary += fmt.Sprintf(", ready in %s", time.Since(start).Round(time.Millisecond))
	if err := os.WriteFile(filepath.Join(staging, "bench-fill.done"), []byte(summary+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(staging, final); err != nil {
		if _, serr := os.Stat(marker); serr != nil { // not a concurrent run's fill
			tb.Fatal(err)
		}
	}
	tb.Logf("%s (cached in %s)", summary, final)
	return final
}

// benchSchemaKey is a short digest of the catalog schema's source, so that a
// schema change refills the cache; "" parts are fine when it cannot be read.
func benchSchemaKey() string {
	src, _ := os.ReadFile(filepath.Join("..", "..", "mappings", "sqlcatalog", "schema.go"))
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:6])
}

func benchFreeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}

// benchFill creates benchFillObjects small public objects in the embedded
// store of dataDir through the node (Stage, then Create), as the binary would
// with the default configuration, from parallel goroutines.
func benchFill(dataDir string) error {
	cfg := config.Default()
	cfg.DataDir = dataDir
	ns, err := mappings.New(cfg, nil, nil)
	if err != nil {
		return err
	}
	n := ns.Catalog
	ctx := context.Background()
	session := &adapter.Session{Subject: adapter.SubjectPublic, Subjects: []string{adapter.SubjectPublic},
		Address: "127.0.0.1", UserAgent: "d1bridge-bench-fill"}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range cap(errs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= benchFillObjects {
					return
				}
				pid := fmt.Sprintf("bench-list-%06d", i)
				body := []byte("object " + pid + "\n")
				u, err := n.Stage(ctx, bytes.NewReader(body), []string{"SHA-1"})
				if err == nil {
					_, err = n.Create(ctx, session, benchSysmeta(pid, int64(len(body)), u.Checksums["SHA-1"]), u)
				}
				if err != nil {
					next.Store(benchFillObjects) // stop the others
					errs <- fmt.Errorf("object %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	err = errors.Join(<-errs, n.Close())
	return err
}

// --- 5. peak memory

// TestPeakMemory1GiB checks that the server's peak RSS stays under 64 MiB while
// it creates a 1 GiB object (either part order) and while it serves one, each
// on a freshly started server (256 MiB objects with -short). The figure is the
// kernel's VmHWM of the server process, read once the operation has finished.
func TestPeakMemory1GiB(t *testing.T) {
	size, name := benchBigSize()
	dataDir := t.TempDir()
	c := benchNewClient()
	defer c.CloseIdleConnections()
	benchSHA1(size)
	check := func(t *testing.T, srv *server, what string, atStart int64) {
		t.Helper()
		peak := benchHWM(t, srv)
		t.Logf("%s of %s: server peak RSS (VmHWM) %.1f MiB (%.1f MiB after start; limit %d MiB)",
			what, name, float64(peak)/benchMiB, float64(atStart)/benchMiB, benchPeakLimit/benchMiB)
		if peak >= benchPeakLimit {
			t.Errorf("%s of %s: server peak RSS %.1f MiB, want < %d MiB", what, name, float64(peak)/benchMiB, benchPeakLimit/benchMiB)
		}
	}
	pid := "bench-peak-" + string(benchObjectFirst)
	for _, order := range []benchOrder{benchObjectFirst, benchSysmetaFirst} {
		t.Run("create/"+string(order), func(t *testing.T) {
			srv, base := benchStart(t, dataDir)
			atStart := benchHWM(t, srv)
			if err := benchCreate(c, base, "bench-peak-"+string(order), size, order); err != nil {
				t.Fatal(err)
			}
			check(t, srv, "create ("+string(order)+")", atStart)
		})
	}
	t.Run("get", func(t *testing.T) {
		srv, base := benchStart(t, dataDir)
		atStart := benchHWM(t, srv)
		h := sha1.New()
		n, err := benchFetch(c, http.MethodGet, base+"/object/"+url.PathEscape(pid), h)
		if err != nil {
			t.Fatal(err)
		}
		if sum := hex.EncodeToString(h.Sum(nil)); n != size || sum != benchSHA1(size) {
			t.Fatalf("get %s: %d bytes, SHA-1 %s; want %d bytes, %s", pid, n, sum, size, benchSHA1(size))
		}
		check(t, srv, "get", atStart)
	})
}
