package main

// The dataone mapping end to end (issue 6): the real binary as a front node
// whose member node is served by a second real d1bridge, the upstream, through
// `mapping: up` (type dataone, forward: proxy). The front trusts the test as
// its proxy (enableSessionFromHeader); the upstream trusts the front the same
// way, with its own secret, and so learns who calls.
//
//	go test -run TestDataONE -v ./cmd/d1bridge/
//	go test -run '^$' -bench DataONEGet -benchtime 3x ./cmd/d1bridge/

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

const (
	d1FrontSecret = "front-secret"
	d1UpSecret    = "upstream-secret"
	d1UpNodeID    = "urn:node:upstream"
	d1Submitter   = "CN=front submitter,O=d1bridge,DC=example,DC=org"
	d1Outsider    = "CN=outsider,O=d1bridge,DC=example,DC=org"
)

// d1Upstream starts the upstream d1bridge: it believes forwarded subjects
// sent with d1UpSecret, and only d1Submitter may create.
func d1Upstream(t testing.TB, env ...string) *server {
	t.Helper()
	return startServer(t, "", append([]string{
		"D1BRIDGE_NODE_ID=" + d1UpNodeID,
		"D1BRIDGE_ROLES=mn",
		"D1BRIDGE_ENABLESESSIONFROMHEADER=true",
		"D1BRIDGE_AUTH_PROXY_SECRET=" + d1UpSecret,
		`D1BRIDGE_NODE_SUBMITTERS=["` + d1Submitter + `"]`,
		"D1BRIDGE_MAXUPLOADSIZE=" + fmt.Sprint(int64(1)<<40),
	}, env...)...)
}

// d1Front starts the front d1bridge with a configuration file whose member node
// is the upstream at upURL, reached with options (a YAML flow mapping), and
// stops it when t ends.
func d1Front(t testing.TB, upURL, options string, env ...string) (*server, error) {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`roles: [mn]
enableSessionFromHeader: true
auth:
  proxy:
    secret: %s
node:
  submitters: [authenticatedUser]
upstreams:
  - name: up
    type: dataone
    baseURL: %s/d1/mn
    dialTimeout: 1s
    headerTimeout: 5s
    timeout: 10s
    retry: {max: 1, minBackoff: 10ms, maxBackoff: 50ms}
    breaker: {failures: 3, openFor: 30s}
    options: %s
mapping: up
`, d1FrontSecret, upURL, options)
	path := filepath.Join(dir, "front.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The submitters are the file's: unset the default the launcher gives.
	env = append([]string{"D1BRIDGE_NODE_SUBMITTERS=", "D1BRIDGE_MAXUPLOADSIZE=" + fmt.Sprint(int64(1)<<40)}, env...)
	return startServerConfig(t, filepath.Join(dir, "data"), path, env...), nil
}

// d1StartPair starts the upstream and the front.
func d1StartPair(t testing.TB, options string) (up, front *server) {
	t.Helper()
	up = d1Upstream(t)
	front, err := d1Front(t, up.URL, options)
	if err != nil {
		t.Fatal(err)
	}
	return up, front
}

// d1As are the headers of a caller the front's trusted proxy vouches for.
func d1As(subject string) []string {
	return []string{"Ssl-Client-Subject-Dn", subject, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", d1FrontSecret}
}

// d1Object is an object of d1Submitter, readable by everyone.
func d1Object(pid string, data []byte) *adapter.SystemMetadata {
	sm := newSysmeta(pid, "application/octet-stream", "SHA-1", data)
	sm.RightsHolder = d1Submitter
	return sm
}

// d1Create creates sm through the front as who ("" for public), with the
// parts in the Python client's order.
func d1Create(t testing.TB, s *server, who string, sm *adapter.SystemMetadata, body io.Reader) *response {
	t.Helper()
	var h []string
	if who != "" {
		h = d1As(who)
	}
	return d1Post(t, s, sm, body, h...)
}

// d1CreateUp creates sm straight on the upstream, as d1Submitter.
func d1CreateUp(t testing.TB, up *server, sm *adapter.SystemMetadata, body io.Reader) *response {
	t.Helper()
	return d1Post(t, up, sm, body, "Ssl-Client-Subject-Dn", d1Submitter, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", d1UpSecret)
}

func d1Post(t testing.TB, s *server, sm *adapter.SystemMetadata, body io.Reader, header ...string) *response {
	t.Helper()
	b, ctype := multipartBody(false, createParts(sm, body, false)...)
	return s.do(t, http.MethodPost, mnp(2, "/object"), b, append([]string{"Content-Type", ctype}, header...)...)
}

func TestDataONEFront(t *testing.T) {
	t.Parallel()
	spool := t.TempDir()
	up, front := d1StartPair(t, fmt.Sprintf("{forward: proxy, secret: %s, spoolDir: %s}", d1UpSecret, spool))

	pid := "front/1+é:x"
	data := genBytes(61, 1<<20+3)
	sm := d1Object(pid, data)
	r := d1Create(t, front, d1Submitter, sm, bytes.NewReader(data))
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	var id adapter.Identifier
	decode(t, r, &id)
	if id.Value != pid {
		t.Errorf("create answered %q", id.Value)
	}
	const bigSize = 8<<20 + 11
	bigPID := "front-big"
	big := sysmetaFor(bigPID, "application/octet-stream", "SHA-1", bigSize, genChecksum("SHA-1", 62, bigSize))
	big.RightsHolder = d1Submitter
	if r := d1Create(t, front, d1Submitter, big, newGenReader(62, bigSize)); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}

	t.Run("read back through the front", func(t *testing.T) {
		r := front.get(t, objectPath(2, pid), d1As(d1Submitter)...)
		if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
			t.Errorf("the front served %d bytes that differ", len(r.Body))
		}
		if r.Header.Get("DataONE-Checksum") != "SHA-1,"+sm.Checksum.Value {
			t.Errorf("DataONE-Checksum %q", r.Header.Get("DataONE-Checksum"))
		}
		var got adapter.SystemMetadata
		r = front.get(t, metaPath(2, pid))
		decode(t, r, &got)
		// The upstream set the node-controlled fields: the submitter is the
		// subject the front forwarded.
		if got.Submitter != d1Submitter || got.AuthoritativeMemberNode != d1UpNodeID || got.Checksum != sm.Checksum {
			t.Errorf("submitter %q, authoritative node %q, checksum %v", got.Submitter, got.AuthoritativeMemberNode, got.Checksum)
		}
		if r := front.get(t, metaPath(1, pid)); wantStatus(t, r, http.StatusOK) && !bytes.Contains(r.Body, []byte(adapter.NSv1)) {
			t.Error("v1 through the front is not a v1 document")
		}
		h := front.head(t, objectPath(2, bigPID))
		if wantStatus(t, h, http.StatusOK) && h.Header.Get("Content-Length") != fmt.Sprint(bigSize) {
			t.Errorf("describe: Content-Length %q", h.Header.Get("Content-Length"))
		}
		sum, n, err := fetchSum(front, objectPath(2, bigPID), "SHA-1")
		if err != nil || n != bigSize || sum != big.Checksum.Value {
			t.Errorf("the big object through the front: %d bytes, %s, %v", n, sum, err)
		}
		r = front.get(t, objectPath(2, pid), "Range", "bytes=10-19")
		if wantStatus(t, r, http.StatusPartialContent) && !bytes.Equal(r.Body, data[10:20]) {
			t.Errorf("range: %q", r.Body)
		}
		c := front.get(t, checksumPath(2, pid)+"?checksumAlgorithm=MD5")
		var cs adapter.Checksum
		decode(t, c, &cs)
		if cs.Algorithm != "MD5" || cs.Value != checksum("MD5", data) {
			t.Errorf("checksum %v", cs)
		}
	})
	t.Run("read back from the upstream", func(t *testing.T) {
		r := up.get(t, objectPath(2, pid))
		if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
			t.Errorf("the upstream holds %d bytes that differ", len(r.Body))
		}
		sum, n, err := fetchSum(up, objectPath(2, bigPID), "SHA-1")
		if err != nil || n != bigSize || sum != big.Checksum.Value {
			t.Errorf("the big object on the upstream: %d bytes, %s, %v", n, sum, err)
		}
	})
	t.Run("listObjects and log through the front", func(t *testing.T) {
		l := listObjects(t, front, 2, "")
		var ids []string
		for _, o := range l.ObjectInfo {
			ids = append(ids, o.Identifier)
		}
		if !slices.Contains(ids, pid) || !slices.Contains(ids, bigPID) || l.Total != len(ids) {
			t.Errorf("listObjects: %v (total %d)", ids, l.Total)
		}
		l = listObjects(t, front, 2, "identifier="+url.QueryEscape(pid))
		if len(l.ObjectInfo) != 1 || l.ObjectInfo[0].Identifier != pid {
			t.Errorf("listObjects by identifier: %+v", l.ObjectInfo)
		}
		var log adapter.Log
		r := front.get(t, mnp(2, "/log?event=create&idFilter="+url.QueryEscape(pid)), d1As(d1Submitter)...)
		decode(t, r, &log)
		if len(log.LogEntry) != 1 || log.LogEntry[0].Identifier != pid || log.LogEntry[0].Subject != d1Submitter ||
			log.LogEntry[0].NodeIdentifier != d1UpNodeID {
			t.Errorf("log %+v", log.LogEntry)
		}
	})
	t.Run("update and archive through the front", func(t *testing.T) {
		next := []byte("the second version")
		nsm := d1Object("front/2", next)
		b, ctype := multipartBody(false, textPart("newPid", "front/2"), docPart("sysmeta", nsm),
			filePart("object", "content.bin", bytes.NewReader(next)))
		r := front.do(t, http.MethodPut, objectPath(2, pid), b, append([]string{"Content-Type", ctype}, d1As(d1Submitter)...)...)
		if !wantStatus(t, r, http.StatusOK) {
			return
		}
		var old adapter.SystemMetadata
		decode(t, up.get(t, metaPath(2, pid)), &old)
		if old.ObsoletedBy != "front/2" {
			t.Errorf("obsoletedBy %q on the upstream", old.ObsoletedBy)
		}
		r = front.do(t, http.MethodPut, mnp(2, "/archive/"+segment("front/2")), nil, d1As(d1Submitter)...)
		wantStatus(t, r, http.StatusOK)
		var archived adapter.SystemMetadata
		decode(t, up.get(t, metaPath(2, "front/2")), &archived)
		if !archived.Archived {
			t.Error("not archived on the upstream")
		}
	})
	t.Run("errors arrive with their kind", func(t *testing.T) {
		e := wantError(t, front.get(t, objectPath(2, "no-such-object")), http.StatusNotFound, "NotFound")
		if !strings.HasPrefix(e.Description, "up: ") {
			t.Errorf("NotFound: %q", e.Description)
		}
		wantError(t, front.head(t, objectPath(2, "no-such-object")), http.StatusNotFound, "NotFound")

		e = wantError(t, d1Create(t, front, d1Submitter, sm, bytes.NewReader(data)), http.StatusConflict, "IdentifierNotUnique")
		if !strings.HasPrefix(e.Description, "up: ") {
			t.Errorf("IdentifierNotUnique: %q", e.Description)
		}

		bad := d1Object("front-bad", data)
		bad.ObsoletedBy = "someone"
		e = wantError(t, d1Create(t, front, d1Submitter, bad, bytes.NewReader(data)), http.StatusBadRequest, "InvalidSystemMetadata")
		if !strings.HasPrefix(e.Description, "up: ") || !strings.Contains(e.Description, "obsoleted") {
			t.Errorf("InvalidSystemMetadata from the upstream: %q", e.Description)
		}
		// A checksum that does not match is found by the front before sending.
		bad = d1Object("front-bad", data)
		bad.Checksum.Value = strings.Repeat("0", 40)
		wantError(t, d1Create(t, front, d1Submitter, bad, bytes.NewReader(data)), http.StatusBadRequest, "InvalidSystemMetadata")

		// The front lets any authenticated user submit; the upstream does not.
		e = wantError(t, d1Create(t, front, d1Outsider, d1Object("front-out", data), bytes.NewReader(data)), http.StatusUnauthorized, "NotAuthorized")
		if !strings.HasPrefix(e.Description, "up: ") {
			t.Errorf("NotAuthorized from the upstream: %q", e.Description)
		}
		// The front's own rules still come first.
		e = wantError(t, d1Create(t, front, "", d1Object("front-public", data), bytes.NewReader(data)), http.StatusUnauthorized, "InvalidToken")
		if strings.HasPrefix(e.Description, "up: ") {
			t.Errorf("a public create reached the upstream: %q", e.Description)
		}
		if r := up.get(t, metaPath(2, "front-out")); r.Status != http.StatusNotFound {
			t.Errorf("a refused create left an object upstream: %d", r.Status)
		}
	})
	// Every create and update above, failed or not, removed its spool file.
	if es, err := os.ReadDir(spool); err != nil || len(es) != 0 {
		t.Errorf("spool directory: %v, %v", es, err)
	}
}

// TestDataONEUpstreamStopped: once the upstream is gone, the front answers
// ServiceFailure quickly, and then without trying (the breaker is open).
func TestDataONEUpstreamStopped(t *testing.T) {
	t.Parallel()
	up, front := d1StartPair(t, fmt.Sprintf("{forward: proxy, secret: %s}", d1UpSecret))
	data := []byte("soon unreachable")
	if r := d1Create(t, front, d1Submitter, d1Object("gone", data), bytes.NewReader(data)); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	up.stop()
	for i, path := range []string{metaPath(2, "gone"), objectPath(2, "gone"), mnp(2, "/object"), metaPath(2, "gone")} {
		start := time.Now()
		r := front.get(t, path, d1As(d1Submitter)...)
		took := time.Since(start)
		e := wantError(t, r, http.StatusInternalServerError, "ServiceFailure")
		want := `upstream "up" is unreachable`
		if i == 3 {
			want = `upstream "up" is unavailable (circuit open after 3 failures)`
		}
		if !strings.Contains(e.Description, want) {
			t.Errorf("GET %s: %q, want %q", path, e.Description, want)
		}
		if took > 2*time.Second {
			t.Errorf("GET %s took %v", path, took)
		}
	}
	r := d1Create(t, front, d1Submitter, d1Object("never", data), bytes.NewReader(data))
	wantError(t, r, http.StatusInternalServerError, "ServiceFailure")
}

// TestDataONEForwardNone: with forward: none the upstream sees the bridge
// (public, without a token), whoever calls the front.
func TestDataONEForwardNone(t *testing.T) {
	t.Parallel()
	up, front := d1StartPair(t, "{forward: none}")
	data := []byte("created upstream")
	if r := d1CreateUp(t, up, d1Object("none-1", data), bytes.NewReader(data)); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	if r := front.get(t, objectPath(2, "none-1")); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
		t.Errorf("read %q", r.Body)
	}
	// The front lets the submitter create; the upstream sees no credential,
	// which is the bridge's to fix, not the submitter's.
	e := wantError(t, d1Create(t, front, d1Submitter, d1Object("none-2", data), bytes.NewReader(data)), http.StatusInternalServerError, "ServiceFailure")
	if !strings.Contains(e.Description, `upstream "up" refused this node's own credential`) {
		t.Errorf("%q", e.Description)
	}
}

// TestDataONEV1ListBySIDWithPrivateHead: through the front, v1 listObjects by
// a series id lists nothing, also when the upstream refuses the anonymous
// caller the series' head (private): listing would give the series' public
// versions, and v1 has no series ids.
func TestDataONEV1ListBySIDWithPrivateHead(t *testing.T) {
	t.Parallel()
	up, front := d1StartPair(t, fmt.Sprintf("{forward: proxy, secret: %s}", d1UpSecret))
	data := []byte("a series")
	first := d1Object("sid-1", data)
	first.SeriesID = "front-series"
	if r := d1CreateUp(t, up, first, bytes.NewReader(data)); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	head := d1Object("sid-2", data)
	head.SeriesID, head.Obsoletes, head.AccessPolicy = "front-series", "sid-1", nil // the submitter's alone
	b, ctype := multipartBody(false, textPart("newPid", "sid-2"), docPart("sysmeta", head), filePart("object", "content.bin", bytes.NewReader(data)))
	r := up.do(t, http.MethodPut, objectPath(2, "sid-1"), b, "Content-Type", ctype,
		"Ssl-Client-Subject-Dn", d1Submitter, "Ssl-Client-Verify", "SUCCESS", "X-Proxy-Key", d1UpSecret)
	if !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	if l := listObjects(t, front, 2, "identifier=front-series"); l.Total != 1 || pids(l)[0] != "sid-1" {
		t.Errorf("v2 listObjects by SID, anonymous: %v, want the public version", pids(l))
	}
	if l := listObjects(t, front, 1, "identifier=front-series"); l.Total != 0 || l.Count != 0 {
		t.Errorf("v1 listObjects by SID, anonymous, with a private head upstream: %v, want none", pids(l))
	}
	if l := listObjects(t, front, 1, "identifier=sid-1"); l.Total != 1 {
		t.Errorf("v1 listObjects by the public PID: %v", pids(l))
	}
}

// --- benchmark

// d1CPU is the CPU time (user and system) process pid has used so far, from
// /proc/PID/stat; 0 where there is no /proc.
func d1CPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After "pid (comm) ", utime and stime are fields 14 and 15, in ticks of
	// 1/100 s (USER_HZ).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkDataONEGet reads 1 KiB and 256 MiB objects through the front
// d1bridge (forward: none) and straight from the upstream d1bridge,
// alternately in the same loop, and reports both throughputs, their ratio
// x-direct (front ÷ direct; the issue asks ≥ 0.9 for 256 MiB), and, for the
// large object, the CPU time per get of each process on each path (the
// front, the upstream, and this client): /proc counts in 10 ms ticks.
func BenchmarkDataONEGet(b *testing.B) {
	up, front := d1StartPair(b, "{forward: none}")
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true, ReadBufferSize: 256 << 10}}
	buf := make([]byte, 256<<10)
	fetch := func(u string) (int64, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{resp.Body}, buf)
		if resp.StatusCode != http.StatusOK {
			return n, fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return n, err
	}
	for _, sz := range []struct {
		name string
		size int64
	}{{"1KiB", 1 << 10}, {"256MiB", 256 << 20}} {
		pid := "bench-" + sz.name
		sm := sysmetaFor(pid, "application/octet-stream", "SHA-1", uint64(sz.size), genChecksum("SHA-1", 7, sz.size))
		sm.RightsHolder = d1Submitter
		if r := d1CreateUp(b, up, sm, newGenReader(7, sz.size)); r.Status != http.StatusOK {
			b.Fatalf("creating %s: %d %s", pid, r.Status, r.Body)
		}
		targets := []struct{ name, url string }{
			{"front", front.URL + objectPath(2, pid)},
			{"direct", up.URL + objectPath(2, pid)},
		}
		b.Run(sz.name, func(b *testing.B) {
			b.SetBytes(sz.size)
			spent := make([]time.Duration, len(targets))
			var frontCPU, upCPU, clientCPU [2]time.Duration
			self, fp, upp := os.Getpid(), front.cmd.Process.Pid, up.cmd.Process.Pid
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range targets {
					k := (i + j) % len(targets) // who goes first alternates
					f0, u0, c0 := d1CPU(fp), d1CPU(upp), d1CPU(self)
					start := time.Now()
					n, err := fetch(targets[k].url)
					spent[k] += time.Since(start)
					frontCPU[k] += d1CPU(fp) - f0
					upCPU[k] += d1CPU(upp) - u0
					clientCPU[k] += d1CPU(self) - c0
					if err != nil || n != sz.size {
						b.Fatalf("%s: %d bytes, %v", targets[k].name, n, err)
					}
				}
			}
			b.StopTimer()
			mbps := func(d time.Duration) float64 { return float64(sz.size) * float64(b.N) / 1e6 / d.Seconds() }
			perOp := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(mbps(spent[0]), "MB/s")
			b.ReportMetric(mbps(spent[1]), "direct-MB/s")
			b.ReportMetric(mbps(spent[0])/mbps(spent[1]), "x-direct")
			if sz.size >= 1<<20 {
				b.ReportMetric(perOp(frontCPU[0]), "front-cpu-ms/op")
				b.ReportMetric(perOp(upCPU[0]), "up-cpu-ms/op")
				b.ReportMetric(perOp(clientCPU[0]), "client-cpu-ms/op")
				b.ReportMetric(perOp(upCPU[1]), "direct-up-cpu-ms/op")
				b.ReportMetric(perOp(clientCPU[1]), "direct-client-cpu-ms/op")
			}
		})
	}
}
