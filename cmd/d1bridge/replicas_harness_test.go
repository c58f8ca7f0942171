package main

// The harness of the replica tests (replicas_test.go, replicas_bench_test.go):
// PostgreSQL, versitygw and the replicas started, killed and restarted, the
// round-robin proxy in front of them, and the HTTP exchanges with them.

import (
	"context"
	"crypto/x509"
	"database/sql"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	// rsTarget is the replicas' subject at a source node they pull replicas
	// from (their replication.token's).
	rsTarget = "CN=urn:node:REPLICAS,DC=dataone,DC=org"
)

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

	dbOnce sync.Once
	dbPool *sql.DB // the catalog, for checks that read its tables
}

// rsOptions add to the replicas' configuration: upstreams are items of its
// upstreams list, node lines of its node block, top top-level keys; each
// line indented as in the file.
type rsOptions struct {
	upstreams, node, top string
}

// startReplicas starts PostgreSQL (a schema of pgtest's shared cluster),
// versitygw and n replicas, each a `serve --config` of the same file (with
// opts, when given), and the proxy over them.
func startReplicas(t testing.TB, n int, opts ...rsOptions) *replicaSet {
	t.Helper()
	dsn := pgtest.Start(t)
	s3 := servers.VersityGW(t)
	dir := t.TempDir()
	key := authWrite(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(authCNKey())}))
	var o rsOptions
	for _, x := range opts {
		o.upstreams += x.upstreams
		o.node += x.node
		o.top += x.top
	}
	cfg := fmt.Sprintf(`upstreams:
  - name: bucket
    type: s3
    baseURL: %s
    options: {bucket: %s, accessKey: %s, secretKey: %s, prefix: replicas/}
%sstore: bucket
catalog:
  driver: postgres
  dsn: %q
auth:
  signingKey: %s
node:
  cnSubjects: [%q]
%slog:
  level: error
%s`, s3.Endpoint, s3.Bucket, s3.AccessKey, s3.Secret, o.upstreams, dsn, key, rsCN, o.node, o.top)
	rs := &replicaSet{
		t: t, cfgPath: authWrite(t, dir, "d1bridge.yaml", []byte(cfg)),
		env:    []string{"D1BRIDGE_NODE_SUBMITTERS=authenticatedUser"},
		tokens: map[string]string{}, dsn: dsn, s3: s3,
	}
	for _, sub := range []string{rsWriter, rsReader, rsOther, rsCN, rsTarget} {
		rs.tokens[sub] = authToken(t, authCNKey(), sub)
	}
	for range n {
		rs.nodes = append(rs.nodes, startServerConfig(t, "", rs.cfgPath, rs.env...))
	}
	rs.proxy = newRSProxy(t, rs.urls())
	return rs
}

// db is a connection pool to the replicas' catalog, for the checks that read
// its tables (leases, jobs) directly.
func (rs *replicaSet) db() *sql.DB {
	rs.dbOnce.Do(func() {
		db, err := sql.Open("pgx", rs.dsn)
		if err != nil {
			rs.t.Fatalf("opening the catalog: %v", err)
		}
		db.SetMaxOpenConns(4)
		rs.t.Cleanup(func() { db.Close() })
		rs.dbPool = db
	})
	return rs.dbPool
}

// holderPID is the process id in what names a lease's holder
// ("host:pid:random") or a job's ("host/pid/random"); 0 when there is none.
func holderPID(holder string) int {
	f := strings.FieldsFunc(holder, func(r rune) bool { return r == ':' || r == '/' })
	if len(f) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[1])
	return pid
}

// replicaOf is the replica whose process holder names (holderPID); -1 when
// no running replica has that pid.
func (rs *replicaSet) replicaOf(holder string) int {
	pid := holderPID(holder)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, s := range rs.nodes {
		if pid != 0 && s.cmd.Process.Pid == pid {
			return i
		}
	}
	return -1
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
		// A body cut short (the replica killed while it answered) is no
		// answer, whatever the status said: the outcome is unknown.
		return rsAnswer{err: fmt.Errorf("status %d, then reading the body: %w", resp.StatusCode, err)}
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
