package main

// Tests of the connection limits (config limits.*), with raw TCP clients that
// do what well-behaved HTTP clients never do: stall mid-body, sit idle, send
// huge headers, hold many uploads open.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// stallBoundary is the multipart boundary of stalledCreate's bodies.
const stallBoundary = "stall-boundary-0123456789"

// stalledCreate opens a connection to s and sends a create of pid whose body
// announces 10 MiB, then sends the pid part and the first 64 KiB of the object
// part, and stops: the connection stays open, the rest never comes.
func stalledCreate(t *testing.T, s *server, pid string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b bytes.Buffer
	fmt.Fprintf(&b, "--%s\r\nContent-Disposition: form-data; name=\"pid\"\r\n\r\n%s\r\n", stallBoundary, pid)
	fmt.Fprintf(&b, "--%s\r\nContent-Disposition: form-data; name=\"object\"; filename=\"o.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n", stallBoundary)
	b.Write(bytes.Repeat([]byte("x"), 64<<10))
	head := fmt.Sprintf("POST /d1/mn/v2/object HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n",
		strings.TrimPrefix(s.URL, "http://"), stallBoundary, 10<<20)
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return c
}

// stagedFiles counts the temporary files of uploads under the data directory.
func stagedFiles(t *testing.T, s *server) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(s.DataDir, "objects", "tmp"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "put-") {
			n++
		}
		return nil
	})
	return n
}

// waitStaged waits until n uploads are being staged.
func waitStaged(t *testing.T, s *server, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if stagedFiles(t, s) == n {
			return
		}
	}
	t.Fatalf("%d uploads staged, want %d", stagedFiles(t, s), n)
}

// readAnswer reads one HTTP answer from c, failing after wait.
func readAnswer(t *testing.T, c net.Conn, wait time.Duration) (*response, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	checkXML(t, "the answer on the raw connection", r)
	return r, nil
}

// TestLimitsStalledUpload: a create whose body stops flowing is ended within
// limits.bodyStallTimeout: the client gets InvalidRequest saying so (or at
// least the connection closed), and what was staged is gone.
func TestLimitsStalledUpload(t *testing.T) {
	t.Parallel()
	const gap = time.Second
	s := startServer(t, "", "D1BRIDGE_LIMITS_BODYSTALLTIMEOUT="+gap.String())
	c := stalledCreate(t, s, "limits-stalled")
	waitStaged(t, s, 1)
	start := time.Now()
	r, err := readAnswer(t, c, gap+5*time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the stalled upload was not ended: %v after %s (bodyStallTimeout %s)", err, took, gap)
	}
	t.Logf("the stalled upload was answered %d after %s", r.Status, took)
	if took > gap+3*time.Second {
		t.Errorf("answered after %s, bodyStallTimeout %s", took, gap)
	}
	if e := wantError(t, r, http.StatusBadRequest, "InvalidRequest"); !strings.Contains(e.Description, "stalled") {
		t.Errorf("the description does not say the body stalled: %q", e.Description)
	}
	// The connection is closed: the rest of the body is not waited for.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("the connection is still open after the answer (%d, %v)", n, err)
	}
	waitStaged(t, s, 0)
	wantError(t, s.get(t, "/d1/mn/v2/object/limits-stalled"), http.StatusNotFound, "NotFound")
	// A slow upload whose bytes keep coming is not ended: three times the gap,
	// a chunk every half gap.
	data := bytes.Repeat([]byte("slow"), 1024)
	sm := newSysmeta("limits-slow", "application/octet-stream", "SHA-256", data)
	slow := &dripReader{data: data, chunk: len(data) / 6, every: gap / 2}
	r = s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, slow, true)...)
	wantStatus(t, r, http.StatusOK)
}

// dripReader gives chunk bytes of data at a time, every interval.
type dripReader struct {
	data  []byte
	chunk int
	every time.Duration
}

func (d *dripReader) Read(p []byte) (int, error) {
	if len(d.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(d.every)
	n := copy(p[:min(len(p), d.chunk)], d.data)
	d.data = d.data[n:]
	return n, nil
}

// TestLimitsIdleConnection: a keep-alive connection that sends no new request
// is closed after limits.idleTimeout.
func TestLimitsIdleConnection(t *testing.T) {
	t.Parallel()
	const idle = time.Second
	s := startServer(t, "", "D1BRIDGE_LIMITS_IDLETIMEOUT="+idle.String())
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /d1/mn/v2/monitor/ping HTTP/1.1\r\nHost: %s\r\n\r\n", strings.TrimPrefix(s.URL, "http://"))
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("ping: %d (close %v), want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(idle + 10*time.Second))
	_, err = br.ReadByte()
	took := time.Since(start)
	switch {
	case isTimeout(err):
		t.Fatalf("the idle connection was still open after %s (idleTimeout %s)", took, idle)
	case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmt.Sprint(err), "reset"):
		t.Fatalf("reading the idle connection: %v", err)
	case took > idle+3*time.Second:
		t.Errorf("the idle connection was closed after %s, idleTimeout %s", took, idle)
	}
	t.Logf("the idle connection was closed after %s", took)
}

// TestLimitsHeaderSize: a header block over limits.maxHeaderBytes (64 KiB by
// default) is answered 431; a bearer-token-sized one is served.
func TestLimitsHeaderSize(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	big := strings.Repeat("a", 100<<10)
	req, err := http.NewRequest(http.MethodGet, s.URL+"/d1/mn/v2/monitor/ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", big)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 100 KiB header: %d, want 431", resp.StatusCode)
	}
	wantStatus(t, s.get(t, "/d1/mn/v2/monitor/ping", "Authorization", "Bearer "+strings.Repeat("t", 8<<10)), http.StatusOK)
}

// TestLimitsUploadsPerClient: with limits.maxUploadsPerClient uploads in
// flight from one address, the next is refused at once with
// InsufficientResources (create's detail code 1160), a valid error document;
// once one ends, uploads are taken again.
func TestLimitsUploadsPerClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "D1BRIDGE_LIMITS_MAXUPLOADSPERCLIENT=2", "D1BRIDGE_LIMITS_BODYSTALLTIMEOUT=1m")
	first := stalledCreate(t, s, "limits-held-1")
	stalledCreate(t, s, "limits-held-2")
	waitStaged(t, s, 2)

	data := []byte("one too many")
	sm := newSysmeta("limits-third", "application/octet-stream", "SHA-256", data)
	start := time.Now()
	r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, bytes.NewReader(data), false)...)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the refusal took %s: it must come at once", took)
	}
	e := wantError(t, r, http.StatusRequestEntityTooLarge, "InsufficientResources")
	if e.DetailCode != "1160" || !strings.Contains(e.Description, "too many uploads in flight from 127.0.0.1") {
		t.Errorf("detail code %s, description %q; want 1160 naming the client", e.DetailCode, e.Description)
	}
	// Reads are not uploads: not bounded.
	wantStatus(t, s.get(t, "/d1/mn/v2/monitor/ping"), http.StatusOK)

	// The client gives up one upload: its slot is free again.
	first.Close()
	waitStaged(t, s, 1)
	var last *response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, bytes.NewReader(data), false)...); last.Status == http.StatusOK {
			break
		}
	}
	wantStatus(t, last, http.StatusOK)
	var id adapter.Identifier
	decode(t, last, &id)
	if id.Value != "limits-third" {
		t.Errorf("created %q", id.Value)
	}
}
