package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// opID names an operation of the mix; the order is the order of the report.
type opID int

const (
	opCreate opID = iota
	opGet
	opDescribe
	opMeta
	opList
	opLog
	opAccess
	nOps
)

var opNames = [nOps]string{"create", "get", "describe", "meta", "list", "log", "access"}

// reads are the operations that need an existing object.
func (id opID) needsObject() bool {
	return id == opGet || id == opDescribe || id == opMeta || id == opAccess
}

const defaultMix = "create=10,get=30,describe=20,meta=15,list=10,log=5,access=10"

// mix is the weight of each operation.
type mix [nOps]int

func parseMix(s string) (mix, error) {
	var m mix
	total := 0
	for item := range strings.SplitSeq(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(item), "=")
		i := slices.Index(opNames[:], name)
		if !ok || i < 0 {
			return m, fmt.Errorf("%q is not op=weight with op one of %s", item, strings.Join(opNames[:], ", "))
		}
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 {
			return m, fmt.Errorf("the weight of %s must be a non-negative integer, got %q", name, w)
		}
		m[i] = n
		total += n
	}
	if total == 0 {
		return m, errors.New("every weight is 0")
	}
	return m, nil
}

func (m mix) String() string {
	var parts []string
	for i, w := range m {
		if w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", opNames[i], w))
		}
	}
	return strings.Join(parts, ",")
}

// object is one object this run created.
type object struct {
	id     string
	mu     sync.Mutex // held by an access change, which needs the current serialVersion
	serial uint64
	policy int // which of the two policies it has
}

// pool holds the objects created so far (and those of -pids); reads pick
// from it uniformly.
type pool struct {
	mu      sync.RWMutex
	objs    []*object
	created []string // the identifiers this run created, for -pids-out
}

func (p *pool) add(o *object) {
	p.mu.Lock()
	p.objs = append(p.objs, o)
	p.created = append(p.created, o.id)
	p.mu.Unlock()
}

func (p *pool) len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.objs)
}

func (p *pool) random() *object {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if len(p.objs) == 0 {
		return nil
	}
	return p.objs[mrand.N(len(p.objs))]
}

// cursor pages a listing the way a harvester does: start advances by the page
// size while pages are full; a short page (or the end of the total) moves
// fromDate to the last date seen and start back to 0.
type cursor struct {
	mu    sync.Mutex
	from  time.Time
	start int
}

func (c *cursor) next(page int) (time.Time, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	from, start := c.from, c.start
	c.start += page
	return from, start
}

func (c *cursor) done(from time.Time, start, page, got, total int, last time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.from.Equal(from) || (got == page && start+got < total) {
		return // another request moved the cursor, or there are more pages
	}
	if !last.IsZero() {
		c.from = last
	}
	c.start = 0
}

// errInvalid marks a 2xx answer whose body was not what was asked for.
var errInvalid = errors.New("invalid answer")

// op is one operation: do sends one request and reads the whole answer,
// returning its HTTP status (0 when none came) and an error for a transport
// failure or an invalid answer.
type op struct {
	id opID
	do func(ctx context.Context) (int, error)
}

// workload sends the requests of the mix to one node.
type workload struct {
	o       *options
	node    *wire
	creds   *credentials
	base    string // the path of .../mn/v2
	subject string // the caller, the rights holder of what it creates
	runID   string
	seq     atomic.Int64
	ops     [nOps]*op
	weights []opID // one entry per unit of weight
	objects pool
	urls    []target // -urls: what gets fetch
	list    cursor
	log     cursor
	// done and bad count every request and every unsuccessful one, across
	// phases, for the resource samples.
	done, bad atomic.Int64
}

// target is one of -urls: the server and the request's path and query.
type target struct {
	wire *wire
	path string
}

func newWorkload(o *options, creds *credentials) (*workload, error) {
	base, err := url.Parse(o.url)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	node, err := newWire(base, o.connections(), o.timeout)
	if err != nil {
		return nil, fmt.Errorf("-url: %w", err)
	}
	now := time.Now().UTC()
	w := &workload{
		o: o, creds: creds, node: node,
		base: strings.TrimSuffix(base.EscapedPath(), "/") + "/v2", subject: adapter.SubjectPublic,
		runID: now.Format("20060102T150405") + "-" + strconv.Itoa(mrand.IntN(1e6)),
		list:  cursor{from: now}, log: cursor{from: now},
	}
	w.ops = [nOps]*op{
		{opCreate, w.create}, {opGet, w.get}, {opDescribe, w.describe}, {opMeta, w.meta},
		{opList, w.listObjects}, {opLog, w.logRecords}, {opAccess, w.setAccess},
	}
	for id, n := range o.mix {
		for range n {
			w.weights = append(w.weights, opID(id))
		}
	}
	return w, nil
}

// connections is how many connections a server gets: -conns, or one per
// request that can be in flight.
func (o *options) connections() int {
	if o.conns > 0 {
		return o.conns
	}
	return max(o.maxInflight, o.workers, o.capacityWorkers)
}

// pick draws the next operation from the mix; an operation on an object while
// there is none yet is a create.
func (w *workload) pick() *op {
	id := w.weights[mrand.N(len(w.weights))]
	if id.needsObject() && w.objects.len() == 0 && !(id == opGet && len(w.urls) > 0) {
		id = opCreate
	}
	return w.ops[id]
}

// send sends one request to the node with the credential (unless anon); read
// gets the answer's body (nil: it is drained). It returns the status and the
// body's length.
func (w *workload) send(ctx context.Context, method, path string, body []byte, ctype string, anon bool, read func(int, io.Reader) error) (int, int64, error) {
	req := &request{method: method, target: w.base + path, ctype: ctype, body: body}
	if !anon {
		auth, err := w.creds.authorization()
		if err != nil {
			return 0, 0, err
		}
		req.auth = auth
	}
	return w.node.do(ctx, req, read)
}

// simple sends a request whose answer is only checked for its status.
func (w *workload) simple(ctx context.Context, method, path string, anon bool) (int, int64, error) {
	return w.send(ctx, method, path, nil, "", anon, nil)
}

// ping checks the node answers and learns the caller's subject (whoami), which
// becomes the rights holder of the objects created.
func (w *workload) ping(ctx context.Context) (string, error) {
	if st, _, err := w.simple(ctx, http.MethodGet, "/monitor/ping", true); err != nil || st != http.StatusOK {
		return "", fmt.Errorf("GET %s/monitor/ping: status %d, %v", w.o.url+"/v2", st, err)
	}
	var s adapter.SessionDoc
	_, _, err := w.send(ctx, http.MethodGet, "/whoami", nil, "", false, func(status int, body io.Reader) error {
		if status != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(body, 4096))
			return fmt.Errorf("status %d: %s", status, b)
		}
		return adapter.Decode(body, &s)
	})
	if err != nil {
		return "", fmt.Errorf("whoami: %w", err)
	}
	if auth, _ := w.creds.authorization(); auth != "" && s.Subject == adapter.SubjectPublic {
		return "", errors.New("whoami: the node took the credential for public")
	}
	w.subject = s.Subject
	return s.Subject, nil
}

func (w *workload) anon() bool { return w.o.anon > 0 && mrand.Float64() < w.o.anon }

// policy is one of the two access policies access changes alternate between.
func (w *workload) policy(i int) *adapter.AccessPolicy {
	rules := []adapter.AccessRule{{Subject: []string{adapter.SubjectPublic}, Permission: []adapter.Permission{adapter.PermRead}}}
	if w.o.private {
		rules = []adapter.AccessRule{{Subject: []string{w.o.peer}, Permission: []adapter.Permission{adapter.PermRead}}}
	}
	if i == 1 {
		rules = append(rules, adapter.AccessRule{Subject: []string{w.o.peer}, Permission: []adapter.Permission{adapter.PermWrite}})
	}
	return &adapter.AccessPolicy{Allow: rules}
}

// part is one part of a multipart body.
type part struct {
	name, filename, ctype string
	body                  []byte
}

func multipartBody(parts ...part) ([]byte, string, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		d := fmt.Sprintf(`form-data; name="%s"`, p.name)
		if p.filename != "" {
			d += fmt.Sprintf(`; filename="%s"`, p.filename)
		}
		h.Set("Content-Disposition", d)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		pw, err := mw.CreatePart(h)
		if err != nil {
			return nil, "", err
		}
		pw.Write(p.body)
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return b.Bytes(), mw.FormDataContentType(), nil
}

func encodeDoc(doc any) ([]byte, error) {
	var b bytes.Buffer
	err := adapter.Encode(&b, doc, 2)
	return b.Bytes(), err
}

// create: POST /object with pid, object and sysmeta, the order the DataONE
// Python client sends them in.
func (w *workload) create(ctx context.Context) (int, error) {
	pid := fmt.Sprintf("d1load/%s/%d", w.runID, w.seq.Add(1))
	data := make([]byte, w.o.size)
	rand.Read(data)
	sum := sha256.Sum256(data)
	sm := &adapter.SystemMetadata{
		Identifier: pid, FormatID: "application/octet-stream", Size: uint64(len(data)),
		Checksum:     adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])},
		RightsHolder: w.subject, AccessPolicy: w.policy(0),
	}
	doc, err := encodeDoc(sm)
	if err != nil {
		return 0, err
	}
	body, ctype, err := multipartBody(
		part{name: "pid", body: []byte(pid)},
		part{name: "object", filename: "object.bin", ctype: "application/octet-stream", body: data},
		part{name: "sysmeta", filename: "sysmeta.xml", ctype: "text/xml", body: doc})
	if err != nil {
		return 0, err
	}
	status, _, err := w.send(ctx, http.MethodPost, "/object", body, ctype, false, nil)
	if err == nil && status == http.StatusOK {
		w.objects.add(&object{id: pid, serial: 1})
	}
	return status, err
}

func objectPath(prefix string, o *object) string { return prefix + url.PathEscape(o.id) }

// readLists reads -pids into the pool and -urls, the first -hot lines of each.
func (w *workload) readLists() error {
	if w.o.pidsFile != "" {
		ids, err := readLines(w.o.pidsFile, w.o.hot)
		if err != nil {
			return fmt.Errorf("-pids: %w", err)
		}
		w.objects.objs = make([]*object, 0, len(ids))
		for _, id := range ids {
			w.objects.objs = append(w.objects.objs, &object{id: id, serial: 1})
		}
	}
	if w.o.urlsFile != "" {
		urls, err := readLines(w.o.urlsFile, w.o.hot)
		if err != nil {
			return fmt.Errorf("-urls: %w", err)
		}
		wires := map[string]*wire{}
		for _, u := range urls {
			pu, err := url.Parse(u)
			if err != nil || pu.Host == "" {
				return fmt.Errorf("-urls: %q is not an absolute URL", u)
			}
			key := pu.Scheme + "://" + pu.Host
			if wires[key] == nil {
				if wires[key], err = newWire(pu, w.o.connections(), w.o.timeout); err != nil {
					return fmt.Errorf("-urls: %w", err)
				}
			}
			w.urls = append(w.urls, target{wires[key], pu.RequestURI()})
		}
	}
	return nil
}

// readLines reads the non-empty lines of a file, the first limit of them (all
// for 0); a file without any is an error.
func readLines(path string, limit int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
			if limit > 0 && len(lines) == limit {
				break
			}
		}
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s lists nothing", path)
	}
	return lines, nil
}

// writeCreated writes the identifiers of the objects this run created, one a line.
func (w *workload) writeCreated(path string) error {
	w.objects.mu.RLock()
	defer w.objects.mu.RUnlock()
	var b strings.Builder
	for _, id := range w.objects.created {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("-pids-out: %w", err)
	}
	return nil
}

// getURL fetches one of -urls, without a credential.
func (w *workload) getURL(ctx context.Context) (int, error) {
	t := w.urls[mrand.N(len(w.urls))]
	st, n, err := t.wire.do(ctx, &request{method: http.MethodGet, target: t.path}, nil)
	if err == nil && st == http.StatusOK && n != int64(w.o.size) {
		err = fmt.Errorf("%w: %d bytes, want %d", errInvalid, n, w.o.size)
	}
	return st, err
}

func (w *workload) get(ctx context.Context) (int, error) {
	if len(w.urls) > 0 {
		return w.getURL(ctx)
	}
	st, n, err := w.simple(ctx, http.MethodGet, objectPath("/object/", w.objects.random()), w.anon())
	if err == nil && st == http.StatusOK && n != int64(w.o.size) {
		err = fmt.Errorf("%w: %d bytes, want %d", errInvalid, n, w.o.size)
	}
	return st, err
}

func (w *workload) describe(ctx context.Context) (int, error) {
	st, _, err := w.simple(ctx, http.MethodHead, objectPath("/object/", w.objects.random()), w.anon())
	return st, err
}

func (w *workload) meta(ctx context.Context) (int, error) {
	st, _, err := w.simple(ctx, http.MethodGet, objectPath("/meta/", w.objects.random()), w.anon())
	return st, err
}

// harvest reads the next page of a listing into doc and moves the cursor.
func (w *workload) harvest(ctx context.Context, c *cursor, path string, doc any, page func() (got, total int, last time.Time)) (int, error) {
	from, start := c.next(w.o.page)
	q := url.Values{"fromDate": {from.UTC().Format("2006-01-02T15:04:05.000Z")},
		"start": {strconv.Itoa(start)}, "count": {strconv.Itoa(w.o.page)}}
	status, _, err := w.send(ctx, http.MethodGet, path+"?"+q.Encode(), nil, "", w.anon(), func(status int, body io.Reader) error {
		if status != http.StatusOK {
			return nil
		}
		if err := adapter.Decode(body, doc); err != nil {
			return fmt.Errorf("%w: %v", errInvalid, err)
		}
		got, total, last := page()
		c.done(from, start, w.o.page, got, total, last)
		return nil
	})
	return status, err
}

func (w *workload) listObjects(ctx context.Context) (int, error) {
	var l adapter.ObjectList
	return w.harvest(ctx, &w.list, "/object", &l, func() (int, int, time.Time) {
		var last time.Time
		if n := len(l.ObjectInfo); n > 0 {
			last = l.ObjectInfo[n-1].DateSysMetadataModified.Time
		}
		return len(l.ObjectInfo), l.Total, last
	})
}

func (w *workload) logRecords(ctx context.Context) (int, error) {
	var l adapter.Log
	return w.harvest(ctx, &w.log, "/log", &l, func() (int, int, time.Time) {
		var last time.Time
		if n := len(l.LogEntry); n > 0 {
			last = l.LogEntry[n-1].DateLogged.Time
		}
		return len(l.LogEntry), l.Total, last
	})
}

// setAccess switches an object to its other policy, sending the serialVersion
// it has; the object is held meanwhile so that two changes never race.
func (w *workload) setAccess(ctx context.Context) (int, error) {
	var o *object
	for range 8 {
		if o = w.objects.random(); o.mu.TryLock() {
			break
		}
		o = nil
	}
	if o == nil {
		o = w.objects.random()
		o.mu.Lock()
	}
	defer o.mu.Unlock()
	next := 1 - o.policy
	doc, err := encodeDoc(w.policy(next))
	if err != nil {
		return 0, err
	}
	body, ctype, err := multipartBody(
		part{name: "accessPolicy", filename: "accessPolicy.xml", ctype: "text/xml", body: doc},
		part{name: "serialVersion", body: []byte(strconv.FormatUint(o.serial, 10))})
	if err != nil {
		return 0, err
	}
	status, _, err := w.send(ctx, http.MethodPut, objectPath("/accessRules/", o), body, ctype, false, nil)
	if err == nil && status == http.StatusOK {
		o.serial++
		o.policy = next
	}
	return status, err
}

// record counts one answer in the phase. A request canceled by an interrupt is
// not counted: the node did nothing wrong.
func (w *workload) record(ph *phase, id opID, d time.Duration, status int, err error) {
	if err != nil && status == 0 && errors.Is(err, context.Canceled) {
		return
	}
	w.done.Add(1)
	key := outcome(status, err)
	if key != "" {
		w.bad.Add(1)
	}
	ph.record(id, d, key)
}

// outcome is "" for a success, else the error's key in the report: the HTTP
// status, "net" for a transport error, "invalid" for a bad 2xx answer.
func outcome(status int, err error) string {
	switch {
	case status == 0:
		return "net"
	case status < 200 || status > 299:
		return strconv.Itoa(status)
	case err != nil:
		return "invalid"
	}
	return ""
}
