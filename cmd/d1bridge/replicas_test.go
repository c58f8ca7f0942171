package main

// Several replicas of the binary on one catalog and one bucket (issue 14's
// Done-when): a real PostgreSQL (pgtest), a real S3 server (versitygw), three
// d1bridge processes with the same auth.signingKey behind a round-robin
// reverse proxy written here (rsProxy), clients creating, updating, changing
// system metadata and access policies, reading and harvesting the log while a
// random replica is killed with SIGKILL every ~15 s and restarted. Afterwards
// every acknowledged write is checked on every replica directly, access
// revocation is timed across replicas, and the clients' history of each
// identifier's serialVersion is checked for linearizability
// (replicas_history_test.go).
//
//	go test -run TestReplicasChaos -v ./cmd/d1bridge/
//	D1BRIDGE_REPLICAS_DURATION=120s D1BRIDGE_REPLICAS_CLIENTS=8 go test -run TestReplicasChaos -v ./cmd/d1bridge/
//
// What the test does not check yet: with the code as committed, accepted
// replication jobs are files in one replica's dataDir and every replica runs
// its own harvester (issue 14, item 2). Once jobs and leases live in the
// catalog, two more subtests belong here:
//   - ReplicationJobs: a source node whose CN role counts
//     setReplicationStatus calls (replicate_durable_test.go's pair);
//     replicate requests for N objects sent through the proxy during the
//     chaos; afterwards every job completed exactly once (one "completed"
//     per pid at the CN, one getReplica per pid in the source's log), the
//     bytes on every replica, none lost to a killed replica, none left
//     queued (the jobs table empty or all done).
//   - HarvestLease: an upstream that every replica harvests (an httptest
//     sitemap the test serves, harvest.interval of a second); during the
//     chaos the test reads the leases row from PostgreSQL every 100 ms: its
//     epoch never goes back and changes holder only after the holder was
//     killed or its lease expired; the source sees no two pages fetched
//     under one epoch by two replicas; afterwards each harvested record
//     exists exactly once and the checkpoint is the last page.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/mappingtest/servers"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

// Subjects of the replica tests. Tokens for them are signed with authCNKey,
// which every replica has as its auth.signingKey.
const (
	rsWriter = "CN=replicas writer,O=d1bridge,DC=example,DC=org" // rightsHolder of every object
	rsReader = "CN=replicas reader,O=d1bridge,DC=example,DC=org" // the subject whose read is revoked
	rsOther  = "CN=replicas other,O=d1bridge,DC=example,DC=org"
	rsCN     = "CN=urn:node:CNREPLICAS,DC=dataone,DC=org" // a CN: reads the whole log
)

// rsDuration and rsCount read a setting of the test from the environment,
// with a default.
func rsDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
	}
	return def
}

func rsCount(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// --- the replica set

// replicaSet is n replicas of the binary sharing one PostgreSQL schema and one
// bucket, each with a data directory of its own, and the proxy in front.
type replicaSet struct {
	t       testing.TB
	cfgPath string
	env     []string
	mu      sync.Mutex
	nodes   []*server
	proxy   *rsProxy
	tokens  map[string]string // subject -> bearer token
	dsn     string            // the catalog's
	s3      servers.S3        // the bucket's server
}

// startReplicas starts PostgreSQL (a schema of pgtest's shared cluster),
// versitygw and n replicas, each a `serve --config` of the same file, and
// the proxy over them.
func startReplicas(t testing.TB, n int) *replicaSet {
	t.Helper()
	dsn := pgtest.Start(t)
	s3 := servers.VersityGW(t)
	dir := t.TempDir()
	key := authWrite(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(authCNKey())}))
	cfg := fmt.Sprintf(`upstreams:
  - name: bucket
    type: s3
    baseURL: %s
    options: {bucket: %s, accessKey: %s, secretKey: %s, prefix: replicas/}
store: bucket
catalog:
  driver: postgres
  dsn: %q
auth:
  signingKey: %s
node:
  cnSubjects: [%q]
log:
  level: error
`, s3.Endpoint, s3.Bucket, s3.AccessKey, s3.Secret, dsn, key, rsCN)
	rs := &replicaSet{
		t: t, cfgPath: authWrite(t, dir, "d1bridge.yaml", []byte(cfg)),
		env:    []string{"D1BRIDGE_NODE_SUBMITTERS=authenticatedUser"},
		tokens: map[string]string{}, dsn: dsn, s3: s3,
	}
	for _, sub := range []string{rsWriter, rsReader, rsOther, rsCN} {
		rs.tokens[sub] = authToken(t, authCNKey(), sub)
	}
	for range n {
		rs.nodes = append(rs.nodes, startServerConfig(t, "", rs.cfgPath, rs.env...))
	}
	rs.proxy = newRSProxy(t, rs.urls())
	return rs
}

func (rs *replicaSet) urls() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []string
	for _, s := range rs.nodes {
		out = append(out, s.URL)
	}
	return out
}

// node is replica i as it runs now.
func (rs *replicaSet) node(i int) *server {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.nodes[i]
}

// killAndRestart ends replica i with SIGKILL, then starts it again on its data
// directory (a new port, which the proxy is told). It runs on the test's
// goroutine: starting may fail the test.
func (rs *replicaSet) killAndRestart(i int, down time.Duration) {
	old := rs.node(i)
	old.kill()
	time.Sleep(down)
	s := old.restart(rs.t)
	rs.mu.Lock()
	rs.nodes[i] = s
	rs.mu.Unlock()
	rs.proxy.set(i, s.URL)
}

// --- the proxy

// rsProxy is a round-robin reverse proxy (httputil.ReverseProxy) over the
// replicas. A replica that fails to answer is skipped for rsDownFor (a
// passive health check, as nginx's max_fails/fail_timeout); a GET or HEAD
// that failed there goes on to the next replica, any other request's
// failure reaches the client as 502.
type rsProxy struct {
	srv     *httptest.Server
	targets []atomic.Pointer[url.URL]
	downTil []atomic.Int64 // UnixNano until which the replica is skipped
	next    atomic.Uint64
	tr      *http.Transport
	limit   atomic.Int32 // only the first limit replicas are used (the benchmark); 0: all

	retried, failed atomic.Int64
}

const rsDownFor = time.Second

// rsReplicaHeader is the answer header in which the proxy names the replica
// that answered, for the diagnostics of the checks.
const rsReplicaHeader = "X-Test-Replica"

func newRSProxy(t testing.TB, urls []string) *rsProxy {
	p := &rsProxy{
		targets: make([]atomic.Pointer[url.URL], len(urls)),
		downTil: make([]atomic.Int64, len(urls)),
		tr: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	for i, u := range urls {
		p.set(i, u)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "replicas"
		},
		Transport:     p,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.failed.Add(1)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(func() {
		p.srv.Close()
		p.tr.CloseIdleConnections()
	})
	return p
}

func (p *rsProxy) set(i int, raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	p.targets[i].Store(u)
	p.downTil[i].Store(0)
}

// URL is the proxy's base URL, as the replicas' (no trailing slash).
func (p *rsProxy) URL() string { return p.srv.URL }

func (p *rsProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	n := len(p.targets)
	if l := int(p.limit.Load()); l > 0 && l < n {
		n = l
	}
	retry := (req.Method == http.MethodGet || req.Method == http.MethodHead) && (req.Body == nil || req.Body == http.NoBody)
	first := int(p.next.Add(1) % uint64(n))
	now := time.Now().UnixNano()
	var order []int
	var skipped []int
	for k := range n {
		i := (first + k) % n
		if p.downTil[i].Load() > now {
			skipped = append(skipped, i)
			continue
		}
		order = append(order, i)
	}
	order = append(order, skipped...) // the down ones last, should all others fail
	var err error
	for k, i := range order {
		out := req
		if k > 0 {
			p.retried.Add(1)
			out = req.Clone(req.Context())
		}
		u := p.targets[i].Load()
		out.URL.Scheme, out.URL.Host = u.Scheme, u.Host
		var resp *http.Response
		if resp, err = p.tr.RoundTrip(out); err == nil {
			resp.Header.Set(rsReplicaHeader, strconv.Itoa(i))
			return resp, nil
		}
		if req.Context().Err() != nil {
			return nil, err
		}
		p.downTil[i].Store(time.Now().Add(rsDownFor).UnixNano())
		if !retry {
			return nil, err
		}
	}
	return nil, err
}

// --- a client that reports failures instead of failing the test

// rsAnswer is one HTTP exchange: an answer (status, header, body) or a
// transport error (no answer: the outcome of a write is unknown).
type rsAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

var rsHTTP = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	},
}

// do sends a request with the bearer token of subject (none when "") and
// reads the whole answer.
func (rs *replicaSet) do(ctx context.Context, method, u string, body io.Reader, ctype, subject string) rsAnswer {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return rsAnswer{err: err}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if subject != "" {
		req.Header.Set("Authorization", "Bearer "+rs.tokens[subject])
	}
	resp, err := rsHTTP.Do(req)
	if err != nil {
		return rsAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return rsAnswer{status: resp.StatusCode, err: err}
	}
	return rsAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

// send is do with a multipart body.
func (rs *replicaSet) send(ctx context.Context, method, u, subject string, parts ...part) rsAnswer {
	body, ctype := multipartBody(false, parts...)
	return rs.do(ctx, method, u, body, ctype, subject)
}

// exception is the DataONE error an answer carries: its name (from the body or,
// on HEAD, the headers) and description.
func (a rsAnswer) exception() (name, description string) {
	if a.header != nil && a.header.Get("DataONE-Exception-Name") != "" {
		return a.header.Get("DataONE-Exception-Name"), a.header.Get("DataONE-Exception-Description")
	}
	var e errorDoc
	if xml.Unmarshal(a.body, &e) == nil {
		return e.Name, e.Description
	}
	return "", ""
}

func (a rsAnswer) String() string {
	if a.err != nil {
		return "no answer: " + a.err.Error()
	}
	name, desc := a.exception()
	if name != "" {
		return fmt.Sprintf("%d %s: %s", a.status, name, desc)
	}
	return fmt.Sprintf("%d (%d bytes)", a.status, len(a.body))
}

// unknown reports whether the outcome of a write is unknown: no answer, or
// an answer from the proxy or a dying replica (5xx) rather than a decision.
func (a rsAnswer) unknown() bool { return a.err != nil || a.status >= 500 }

// --- the workload

// rsObject is an object a create or update acknowledged.
type rsObject struct {
	pid  string
	size int
	sum  string // SHA-256
}

// rsWorld is what the clients know: every identifier they tried to create,
// the ones acknowledged, the heads of chains, and counts of outcomes.
type rsWorld struct {
	mu        sync.Mutex
	attempted map[string]bool
	acked     map[string]*rsObject
	ackedPIDs []string
	heads     []string          // acknowledged, and not known to be obsoleted
	updates   map[string]string // old pid -> new pid, acknowledged updates
	ackedBy   map[string]string // "pid event" of an acknowledged write -> "replica R at T"
	counts    map[string]int    // "op outcome" -> how many
	problems  []string          // consistency violations seen by clients
	hist      *history
}

func newRSWorld() *rsWorld {
	return &rsWorld{attempted: map[string]bool{}, acked: map[string]*rsObject{}, updates: map[string]string{},
		ackedBy: map[string]string{}, counts: map[string]int{}, hist: newHistory()}
}

func (w *rsWorld) count(op, outcome string) {
	w.mu.Lock()
	w.counts[op+" "+outcome]++
	w.mu.Unlock()
}

func (w *rsWorld) problem(format string, a ...any) {
	w.mu.Lock()
	w.problems = append(w.problems, fmt.Sprintf(format, a...))
	w.mu.Unlock()
}

// pick is a random acknowledged pid, or "" when there is none; heads only
// picks among the heads of chains.
func (w *rsWorld) pick(rng *rand.Rand, heads bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	from := w.ackedPIDs
	if heads {
		from = w.heads
	}
	if len(from) == 0 {
		return ""
	}
	return from[rng.IntN(len(from))]
}

func (w *rsWorld) dropHead(pid string) {
	if i := slices.Index(w.heads, pid); i >= 0 {
		w.heads = slices.Delete(w.heads, i, i+1)
	}
}

// rsClient is one client of the chaos test.
type rsClient struct {
	id  int
	rs  *replicaSet
	w   *rsWorld
	rng *rand.Rand
	seq int
}

func (c *rsClient) base() string { return c.rs.proxy.URL() }

// where says which replica acknowledged a, and when (on the history's clock).
func (c *rsClient) where(a rsAnswer) string {
	return fmt.Sprintf("acknowledged by replica %s at %.3fs", a.header.Get(rsReplicaHeader), float64(c.w.hist.now())/1e9)
}

// newObject makes the bytes and system metadata of a new object pid.
func (c *rsClient) newObject(pid string) ([]byte, *adapter.SystemMetadata) {
	data := genBytes(c.rng.Uint64(), 1+c.rng.IntN(16<<10))
	sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
	sm.RightsHolder = rsWriter
	return data, sm
}

func (c *rsClient) nextPID(kind string) string {
	c.seq++
	return fmt.Sprintf("rs-%s-%d-%d", kind, c.id, c.seq)
}

func (c *rsClient) create(ctx context.Context) {
	pid := c.nextPID("c")
	data, sm := c.newObject(pid)
	c.w.mu.Lock()
	c.w.attempted[pid] = true
	c.w.mu.Unlock()
	a := c.rs.send(ctx, http.MethodPost, c.base()+mnp(2, "/object"), rsWriter, createParts(sm, bytes.NewReader(data), false)...)
	if ctx.Err() != nil {
		return
	}
	switch {
	case a.status == http.StatusOK:
		c.w.count("create", "ok")
		c.w.mu.Lock()
		c.w.acked[pid] = &rsObject{pid: pid, size: len(data), sum: sm.Checksum.Value}
		c.w.ackedPIDs = append(c.w.ackedPIDs, pid)
		c.w.heads = append(c.w.heads, pid)
		c.w.ackedBy[pid+" "+adapter.EventCreate] = c.where(a)
		c.w.mu.Unlock()
	case a.unknown():
		c.w.count("create", "unknown")
	default:
		c.w.count("create", "refused")
		c.w.problem("create %s refused: %s", pid, a)
	}
}

// update makes a new version of a head of a chain.
func (c *rsClient) update(ctx context.Context) {
	old := c.w.pick(c.rng, true)
	if old == "" {
		return
	}
	pid := c.nextPID("u")
	data, sm := c.newObject(pid)
	c.w.mu.Lock()
	c.w.attempted[pid] = true
	c.w.mu.Unlock()
	call := c.w.hist.now()
	a := c.rs.send(ctx, http.MethodPut, c.base()+objectPath(2, old), rsWriter,
		textPart("newPid", pid), filePart("object", "content.bin", bytes.NewReader(data)), docPart("sysmeta", sm))
	if ctx.Err() != nil {
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smUnknown}, call, math.MaxInt64, "")
		return
	}
	ret := c.w.hist.now()
	name, desc := a.exception()
	switch {
	case a.status == http.StatusOK:
		c.w.count("update", "ok")
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smOK}, call, ret, a.header.Get(rsReplicaHeader))
		c.w.mu.Lock()
		c.w.acked[pid] = &rsObject{pid: pid, size: len(data), sum: sm.Checksum.Value}
		c.w.ackedPIDs = append(c.w.ackedPIDs, pid)
		c.w.dropHead(old)
		c.w.heads = append(c.w.heads, pid)
		c.w.updates[old] = pid
		c.w.ackedBy[old+" "+adapter.EventUpdate] = c.where(a)
		c.w.mu.Unlock()
	case a.unknown():
		c.w.count("update", "unknown")
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smUnknown}, call, math.MaxInt64, a.header.Get(rsReplicaHeader))
	case name == "InvalidRequest" && strings.Contains(desc, "obsolete"):
		// Another client updated it first.
		c.w.count("update", "refused (obsoleted)")
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smRefused}, call, ret, a.header.Get(rsReplicaHeader))
		c.w.mu.Lock()
		c.w.dropHead(old)
		c.w.mu.Unlock()
	default:
		c.w.count("update", "refused")
		c.w.problem("update of %s refused: %s", old, a)
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smRefused}, call, ret, a.header.Get(rsReplicaHeader))
	}
}

// readMeta is getSystemMetadata of pid through the proxy, recorded as a read
// of its serialVersion.
func (c *rsClient) readMeta(ctx context.Context, pid string) *adapter.SystemMetadata {
	call := c.w.hist.now()
	a := c.rs.do(ctx, http.MethodGet, c.base()+metaPath(2, pid), nil, "", rsWriter)
	ret := c.w.hist.now()
	if ctx.Err() != nil {
		return nil
	}
	if a.status != http.StatusOK {
		c.readFailed("getSystemMetadata", pid, a)
		return nil
	}
	sm := &adapter.SystemMetadata{}
	if err := adapter.Decode(bytes.NewReader(a.body), sm); err != nil {
		c.w.problem("getSystemMetadata %s: %v", pid, err)
		return nil
	}
	c.w.count("getSystemMetadata", "ok")
	c.w.hist.add(c.id, smInput{PID: pid, Kind: smRead}, smOutput{Outcome: smOK, Seen: sm.SerialVersion}, call, ret, a.header.Get(rsReplicaHeader))
	return sm
}

// readFailed counts a failed read of an acknowledged object: no answer or a
// 5xx is the chaos, anything else (NotFound above all) a violation.
func (c *rsClient) readFailed(op, pid string, a rsAnswer) {
	if a.unknown() {
		c.w.count(op, "unavailable")
		return
	}
	c.w.count(op, "failed")
	c.w.problem("%s of the acknowledged %s: %s", op, pid, a)
}

func (c *rsClient) describe(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	call := c.w.hist.now()
	a := c.rs.do(ctx, http.MethodHead, c.base()+objectPath(2, pid), nil, "", rsWriter)
	ret := c.w.hist.now()
	if ctx.Err() != nil {
		return
	}
	if a.status != http.StatusOK {
		c.readFailed("describe", pid, a)
		return
	}
	v, err := strconv.ParseUint(a.header.Get("DataONE-SerialVersion"), 10, 64)
	if err != nil {
		c.w.problem("describe %s: DataONE-SerialVersion %q", pid, a.header.Get("DataONE-SerialVersion"))
		return
	}
	c.w.count("describe", "ok")
	c.w.hist.add(c.id, smInput{PID: pid, Kind: smRead}, smOutput{Outcome: smOK, Seen: v}, call, ret, a.header.Get(rsReplicaHeader))
}

func (c *rsClient) get(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	a := c.rs.do(ctx, http.MethodGet, c.base()+objectPath(2, pid), nil, "", rsWriter)
	if ctx.Err() != nil {
		return
	}
	if a.status != http.StatusOK {
		c.readFailed("get", pid, a)
		return
	}
	c.w.mu.Lock()
	o := c.w.acked[pid]
	c.w.mu.Unlock()
	if sum := sha256.Sum256(a.body); hex.EncodeToString(sum[:]) != o.sum {
		c.w.problem("get %s: %d bytes, not the %d acknowledged", pid, len(a.body), o.size)
		return
	}
	c.w.count("get", "ok")
}

// casOutcome classifies the answer of a write conditioned on a version.
func casOutcome(a rsAnswer) smOutcome {
	name, desc := a.exception()
	switch {
	case a.status == http.StatusOK:
		return smOK
	case a.unknown():
		return smUnknown
	case name == "VersionMismatch",
		name == "InvalidRequest" && strings.Contains(desc, "dateSysMetadataModified"):
		return smRefused
	}
	return smOther
}

func (c *rsClient) record(ctx context.Context, op, pid string, expect uint64, a rsAnswer, call int64) {
	out := casOutcome(a)
	ret := c.w.hist.now()
	if ctx.Err() != nil || out == smUnknown {
		out, ret = smUnknown, math.MaxInt64
	}
	c.w.hist.add(c.id, smInput{PID: pid, Kind: smCAS, Expect: expect}, smOutput{Outcome: out}, call, ret, a.header.Get(rsReplicaHeader))
	c.w.count(op, out.String())
	if out == smOther {
		c.w.problem("%s of %s: %s", op, pid, a)
	}
}

// updateSystemMetadata reads the system metadata, changes its fileName and
// sends it back: a write conditioned on the version read (the node compares
// dateSysMetadataModified).
func (c *rsClient) updateSystemMetadata(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	sm := c.readMeta(ctx, pid)
	if sm == nil {
		return
	}
	sm.FileName = fmt.Sprintf("c%d-%d.bin", c.id, c.rng.IntN(1<<20))
	call := c.w.hist.now()
	a := c.rs.send(ctx, http.MethodPut, c.base()+mnp(2, "/meta"), rsWriter, textPart("pid", pid), docPart("sysmeta", sm))
	c.record(ctx, "updateSystemMetadata", pid, sm.SerialVersion, a, call)
}

// setAccessPolicy reads the serialVersion and sets a policy conditioned on it.
func (c *rsClient) setAccessPolicy(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	sm := c.readMeta(ctx, pid)
	if sm == nil {
		return
	}
	rules := []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}
	if c.rng.IntN(2) == 0 {
		rules = append(rules, adapter.AccessRule{Subject: []string{rsOther}, Permission: []adapter.Permission{adapter.PermWrite}})
	}
	call := c.w.hist.now()
	a := c.rs.send(ctx, http.MethodPut, c.base()+mnp(2, "/accessRules/"+segment(pid)), rsWriter,
		textPart("serialVersion", strconv.FormatUint(sm.SerialVersion, 10)), docPart("accessPolicy", &adapter.AccessPolicy{Allow: rules}))
	c.record(ctx, "setAccessPolicy", pid, sm.SerialVersion, a, call)
}

// run draws operations until ctx ends.
func (c *rsClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		switch r := c.rng.IntN(100); {
		case r < 20:
			c.create(ctx)
		case r < 30:
			c.update(ctx)
		case r < 45:
			c.updateSystemMetadata(ctx)
		case r < 55:
			c.setAccessPolicy(ctx)
		case r < 70:
			if pid := c.w.pick(c.rng, false); pid != "" {
				c.readMeta(ctx, pid)
			}
		case r < 85:
			c.describe(ctx)
		default:
			c.get(ctx)
		}
	}
}

// --- the log, harvested as a CN does

// rsHarvester pages getLogRecords from a date on, as a CN harvests a member
// node's log: each pass asks fromDate = the latest dateLogged it has seen
// (inclusive, so the entries of that instant come again and are known by
// entryId), pages with start and count until a short page. An entry seen
// twice within one pass was repeated by the paging.
type rsHarvester struct {
	rs       *replicaSet
	base     string
	seen     map[string]adapter.LogEntry // by entryId
	from     adapter.Time
	passes   int
	repeats  []string // "entryId pid event" repeated within one pass
	failures int      // passes abandoned for an unavailable page
}

const rsLogPage = 500

// pass harvests once; false when a page could not be had (the pass is
// abandoned, its entries kept, the cursor left where it was).
func (h *rsHarvester) pass(ctx context.Context) bool {
	inPass := map[string]bool{}
	newest := h.from
	for start := 0; ; start += rsLogPage {
		q := fmt.Sprintf("?start=%d&count=%d", start, rsLogPage)
		if !h.from.IsZero() {
			q += "&fromDate=" + at(h.from)
		}
		a := h.rs.do(ctx, http.MethodGet, h.base+mnp(2, "/log")+q, nil, "", rsCN)
		if a.status != http.StatusOK {
			h.failures++
			return false
		}
		l := &adapter.Log{}
		if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
			h.failures++
			return false
		}
		for _, e := range l.LogEntry {
			if inPass[e.EntryID] {
				h.repeats = append(h.repeats, e.EntryID+" "+e.Identifier+" "+e.Event)
			}
			inPass[e.EntryID] = true
			h.seen[e.EntryID] = e
			if e.DateLogged.After(newest.Time) {
				newest = e.DateLogged
			}
		}
		if len(l.LogEntry) < rsLogPage {
			break
		}
	}
	h.from = newest
	h.passes++
	return true
}

// rsWriteEvents is "pid event" of every acknowledged write: the create of an
// object a create made, the update of the object an update obsoleted (an
// update is logged on the object it obsoletes).
func rsWriteEvents(w *rsWorld) map[string]bool {
	want := map[string]bool{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for pid := range w.acked {
		if strings.HasPrefix(pid, "rs-c-") {
			want[pid+" "+adapter.EventCreate] = true
		}
	}
	for old := range w.updates {
		want[old+" "+adapter.EventUpdate] = true
	}
	return want
}

// checkWriteEvents reports every acknowledged write whose event is missing
// or present more than once among entries.
func checkWriteEvents(t *testing.T, where string, w *rsWorld, entries []adapter.LogEntry) {
	t.Helper()
	want := rsWriteEvents(w)
	got := map[string]int{}
	for _, e := range entries {
		if k := e.Identifier + " " + e.Event; want[k] {
			got[k]++
		}
	}
	var missing, doubled []string
	for k := range want {
		switch n := got[k]; {
		case n == 0:
			w.mu.Lock()
			missing = append(missing, k+" ("+w.ackedBy[k]+")")
			w.mu.Unlock()
		case n > 1:
			doubled = append(doubled, fmt.Sprintf("%s (%d times)", k, n))
		}
	}
	slices.Sort(missing)
	slices.Sort(doubled)
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d acknowledged writes have no event: %s", where, len(missing), len(want), rsFirst(missing, 10))
	}
	if len(doubled) > 0 {
		t.Errorf("%s: %d acknowledged writes have more than one event: %s", where, len(doubled), rsFirst(doubled, 10))
	}
}

func rsFirst(s []string, n int) string {
	if len(s) > n {
		return strings.Join(s[:n], "; ") + fmt.Sprintf("; ... (%d more)", len(s)-n)
	}
	return strings.Join(s, "; ")
}

// --- the test

// TestReplicasChaos is issue 14's multi-replica test (see the file comment).
// D1BRIDGE_REPLICAS_DURATION (default 60s) is how long the clients run,
// D1BRIDGE_REPLICAS_CLIENTS (default 6) how many there are,
// D1BRIDGE_REPLICAS_KILLEVERY (default 15s) the mean time between kills.
func TestReplicasChaos(t *testing.T) {
	duration := rsDuration("D1BRIDGE_REPLICAS_DURATION", 60*time.Second)
	nClients := rsCount("D1BRIDGE_REPLICAS_CLIENTS", 6)
	killEvery := rsDuration("D1BRIDGE_REPLICAS_KILLEVERY", 15*time.Second)
	started := time.Now()
	rs := startReplicas(t, 3)
	t.Logf("3 replicas, PostgreSQL and versitygw up in %s; %d clients for %s, a kill every ~%s",
		time.Since(started).Round(time.Millisecond), nClients, duration, killEvery)

	// Every replica accepts the tokens, and the CN reads the log.
	for i := range 3 {
		if a := rs.do(t.Context(), http.MethodGet, rs.node(i).URL+"/d1/mn/v2/whoami", nil, "", rsWriter); a.status != http.StatusOK || !bytes.Contains(a.body, []byte("replicas writer")) {
			t.Fatalf("replica %d: whoami with the writer's token: %s", i, a)
		}
	}

	w := newRSWorld()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for i := range nClients {
		c := &rsClient{id: i, rs: rs, w: w, rng: rand.New(rand.NewPCG(uint64(i)+1, 14))}
		wg.Go(func() { c.run(ctx) })
	}
	// One more client harvests the log through the proxy as a CN would,
	// every two seconds.
	harv := &rsHarvester{rs: rs, base: rs.proxy.URL(), seen: map[string]adapter.LogEntry{}}
	wg.Go(func() {
		for ctx.Err() == nil {
			harv.pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	})

	// The chaos, on the test's goroutine: kill a random replica every
	// killEvery ± 20%, restart it a second later (on a new port, which the
	// proxy learns).
	rng := rand.New(rand.NewPCG(14, 14))
	end := time.Now().Add(duration)
	var kills []string
	for {
		wait := killEvery*4/5 + time.Duration(rng.Int64N(int64(killEvery*2/5)+1))
		if time.Now().Add(wait).After(end) {
			time.Sleep(time.Until(end))
			break
		}
		time.Sleep(wait)
		i := rng.IntN(3)
		t0 := time.Now()
		rs.killAndRestart(i, time.Second)
		kills = append(kills, fmt.Sprintf("replica %d at %.3fs (back in %s)", i, t0.Sub(w.hist.base).Seconds(), time.Since(t0).Round(time.Millisecond)))
	}
	cancel()
	wg.Wait()
	t.Logf("kills (on the history's clock): %s", strings.Join(kills, "; "))

	w.mu.Lock()
	keys := make([]string, 0, len(w.counts))
	for k := range w.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %-40s %d", k, w.counts[k])
	}
	t.Logf("outcomes (%d acknowledged objects, %d chains updated; proxy: %d retries, %d failures):%s",
		len(w.acked), len(w.updates), rs.proxy.retried.Load(), rs.proxy.failed.Load(), sb.String())
	for _, p := range w.problems {
		t.Errorf("during the chaos: %s", p)
	}
	w.mu.Unlock()
	if len(w.acked) < 10*nClients {
		t.Errorf("only %d acknowledged objects in %s: the replicas hardly served", len(w.acked), duration)
	}

	t.Run("ReadBack", func(t *testing.T) { rsCheckReadBack(t, rs, w) })
	t.Run("ListObjects", func(t *testing.T) { rsCheckList(t, rs, w) })
	t.Run("LogRecords", func(t *testing.T) { rsCheckLog(t, rs, w, harv) })
	t.Run("History", func(t *testing.T) { checkHistory(t, w.hist) })
	t.Run("Revocation", func(t *testing.T) { rsRevocation(t, rs) })
}

// rsCheckReadBack reads every acknowledged object from every replica directly
// and compares its SHA-256 with the one acknowledged.
func rsCheckReadBack(t *testing.T, rs *replicaSet, w *rsWorld) {
	w.mu.Lock()
	objs := make([]*rsObject, 0, len(w.acked))
	for _, o := range w.acked {
		objs = append(objs, o)
	}
	w.mu.Unlock()
	var mu sync.Mutex
	var bad []string
	for i := range 3 {
		s := rs.node(i)
		jobs := make(chan *rsObject)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for o := range jobs {
					a := rs.do(t.Context(), http.MethodGet, s.URL+objectPath(2, o.pid), nil, "", rsWriter)
					sum := sha256.Sum256(a.body)
					if a.status != http.StatusOK || hex.EncodeToString(sum[:]) != o.sum {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("replica %d: %s: %s", i, o.pid, a))
						mu.Unlock()
					}
				}
			})
		}
		for _, o := range objs {
			jobs <- o
		}
		close(jobs)
		wg.Wait()
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d of %d reads of acknowledged objects did not give their bytes: %s", len(bad), 3*len(objs), rsFirst(bad, 10))
	}
	t.Logf("%d acknowledged objects read back byte-identical (SHA-256) from each of the 3 replicas", len(objs)-len(bad)/3)
}

// rsCheckList pages listObjects of every replica, as the CN: every
// acknowledged object once, and nothing no client tried to create.
func rsCheckList(t *testing.T, rs *replicaSet, w *rsWorld) {
	for i := range 3 {
		s := rs.node(i)
		seen := map[string]int{}
		total := -1
		for start := 0; ; start += 1000 {
			a := rs.do(t.Context(), http.MethodGet, s.URL+mnp(2, "/object")+fmt.Sprintf("?start=%d&count=1000", start), nil, "", rsCN)
			if a.status != http.StatusOK {
				t.Fatalf("replica %d: listObjects start=%d: %s", i, start, a)
			}
			l := &adapter.ObjectList{}
			if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
				t.Fatalf("replica %d: listObjects: %v", i, err)
			}
			if total < 0 {
				total = l.Total
			} else if l.Total != total {
				t.Errorf("replica %d: listObjects total %d at start=%d, %d at start=0", i, l.Total, start, total)
			}
			for _, oi := range l.ObjectInfo {
				seen[oi.Identifier]++
			}
			if len(l.ObjectInfo) < 1000 {
				break
			}
		}
		w.mu.Lock()
		var missing, twice, phantom []string
		for pid := range w.acked {
			if seen[pid] == 0 {
				missing = append(missing, pid)
			}
		}
		n := 0
		for pid, k := range seen {
			n += k
			if k > 1 {
				twice = append(twice, pid)
			}
			if !w.attempted[pid] {
				phantom = append(phantom, pid)
			}
		}
		acked := len(w.acked)
		w.mu.Unlock()
		if len(missing) > 0 {
			t.Errorf("replica %d: listObjects lacks %d of %d acknowledged objects: %s", i, len(missing), acked, rsFirst(missing, 10))
		}
		if len(twice) > 0 {
			t.Errorf("replica %d: listObjects lists %d objects more than once: %s", i, len(twice), rsFirst(twice, 10))
		}
		if len(phantom) > 0 {
			t.Errorf("replica %d: listObjects lists %d objects no client created: %s", i, len(phantom), rsFirst(phantom, 10))
		}
		if n != total {
			t.Errorf("replica %d: listObjects total %d, but its pages hold %d entries", i, total, n)
		}
		t.Logf("replica %d: listObjects: %d objects (%d acknowledged, the rest writes whose answer was lost)", i, total, acked)
	}
}

// rsCheckLog pages getLogRecords of every replica as the CN, and checks the
// harvest made during the chaos: every acknowledged write's event exactly
// once, entry ids unique.
func rsCheckLog(t *testing.T, rs *replicaSet, w *rsWorld, harv *rsHarvester) {
	for i := range 3 {
		base := rs.node(i).URL
		var entries []adapter.LogEntry
		ids := map[string]int{}
		for start := 0; ; start += rsLogPage {
			a := rs.do(t.Context(), http.MethodGet, base+mnp(2, "/log")+fmt.Sprintf("?start=%d&count=%d", start, rsLogPage), nil, "", rsCN)
			if a.status != http.StatusOK {
				t.Fatalf("replica %d: getLogRecords start=%d: %s", i, start, a)
			}
			l := &adapter.Log{}
			if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
				t.Fatalf("replica %d: getLogRecords: %v", i, err)
			}
			for _, e := range l.LogEntry {
				ids[e.EntryID]++
			}
			entries = append(entries, l.LogEntry...)
			if len(l.LogEntry) < rsLogPage {
				break
			}
		}
		var dup []string
		for id, n := range ids {
			if n > 1 {
				dup = append(dup, id)
			}
		}
		if len(dup) > 0 {
			t.Errorf("replica %d: getLogRecords repeats %d entry ids over its pages: %s", i, len(dup), rsFirst(dup, 10))
		}
		checkWriteEvents(t, fmt.Sprintf("replica %d, getLogRecords paged", i), w, entries)
		t.Logf("replica %d: getLogRecords: %d entries", i, len(entries))
	}

	// The CN's harvest through the proxy: one last pass now that the writes
	// have stopped, then what it gathered pass after pass.
	if !harv.pass(t.Context()) {
		t.Fatal("the last harvest pass failed with every replica up")
	}
	entries := make([]adapter.LogEntry, 0, len(harv.seen))
	for _, e := range harv.seen {
		entries = append(entries, e)
	}
	t.Logf("the CN's harvest through the proxy: %d passes (%d abandoned), %d entries", harv.passes, harv.failures, len(entries))
	if len(harv.repeats) > 0 {
		t.Errorf("the harvest met %d entries twice within one pass (paging shifted): %s", len(harv.repeats), rsFirst(harv.repeats, 10))
	}
	checkWriteEvents(t, "the CN's harvest by fromDate during the chaos", w, entries)
}

// --- revocation

// rsRevocation times how long a revoked read stays granted on another
// replica: per trial, an object readable by rsReader is created through
// replica A and read through B with the reader's token (so that B has
// decided, and may have cached, the grant); the read is revoked through A;
// then B is polled with the reader's token until it refuses. The bound is
// issue 14's: p99 under 1 s over at least 100 trials.
func rsRevocation(t *testing.T, rs *replicaSet) {
	const (
		trials   = 100
		parallel = 5
		poll     = 25 * time.Millisecond
		giveUp   = 2 * time.Second // a trial still granted then counts as +Inf
	)
	lat := make([]time.Duration, trials)
	var mu sync.Mutex
	var errs []string
	fail := func(format string, a ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	ctx := t.Context()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for k := range jobs {
				lat[k] = time.Duration(math.MaxInt64)
				a, b := rs.node(k%3), rs.node((k+1)%3)
				pid := fmt.Sprintf("rs-revoke-%d", k)
				data := genBytes(uint64(k)+900, 512)
				sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
				sm.RightsHolder = rsWriter
				sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{rsReader}, Permission: []adapter.Permission{adapter.PermRead}}}}
				if r := rs.send(ctx, http.MethodPost, a.URL+mnp(2, "/object"), rsWriter, createParts(sm, bytes.NewReader(data), false)...); r.status != http.StatusOK {
					fail("trial %d: create through A: %s", k, r)
					continue
				}
				if r := rs.do(ctx, http.MethodGet, b.URL+metaPath(2, pid), nil, "", rsReader); r.status != http.StatusOK {
					fail("trial %d: the reader's read through B before the revocation: %s", k, r)
					continue
				}
				revoked := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{rsOther}, Permission: []adapter.Permission{adapter.PermRead}}}}
				if r := rs.send(ctx, http.MethodPut, a.URL+mnp(2, "/accessRules/"+segment(pid)), rsWriter,
					textPart("serialVersion", "1"), docPart("accessPolicy", revoked)); r.status != http.StatusOK {
					fail("trial %d: setAccessPolicy through A: %s", k, r)
					continue
				}
				t0 := time.Now()
				for time.Since(t0) < giveUp {
					r := rs.do(ctx, http.MethodGet, b.URL+metaPath(2, pid), nil, "", rsReader)
					if r.status == http.StatusOK {
						time.Sleep(poll)
						continue
					}
					if name, _ := r.exception(); r.status != http.StatusUnauthorized || name != "NotAuthorized" {
						fail("trial %d: B's refusal is %s, want 401 NotAuthorized", k, r)
					}
					lat[k] = time.Since(t0)
					break
				}
			}
		})
	}
	for k := range trials {
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	q := func(p float64) time.Duration { return sorted[int(math.Ceil(p*float64(len(sorted))))-1] }
	show := func(d time.Duration) string {
		if d == time.Duration(math.MaxInt64) {
			return fmt.Sprintf(">%s (still granted)", giveUp)
		}
		return d.Round(time.Millisecond).String()
	}
	late := 0
	for _, d := range lat {
		if d > time.Second {
			late++
		}
	}
	t.Logf("revocation through A seen by B: %d trials, p50 %s, p99 %s, max %s; %d over 1s (polling every %s)",
		trials, show(q(0.5)), show(q(0.99)), show(sorted[len(sorted)-1]), late, poll)
	if q(0.99) >= time.Second {
		t.Errorf("p99 of the revocation latency across replicas is %s, want under 1s (issue 14)", show(q(0.99)))
	}
}
