package dataone

// The fake upstream member node, in the style of woodpecker's forge fixtures:
// enough of the DataONE v2 REST API, in memory, on net/http, recording what
// it receives (paths as sent, queries, identity headers, multipart part names
// and the bytes of each part).

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/metrics"
	"go.yaml.in/yaml/v3"
)

// seen is one request the fake received.
type seen struct {
	Method, Path  string // Path as sent (escaped)
	RawQuery      string
	Query         url.Values
	Header        http.Header
	ContentLength int64
	Parts         []string          // multipart part names, in order
	Values        map[string]string // text parts
	Sizes         map[string]int64  // bytes of each part
	SHA1          map[string]string // SHA-1 of each part
}

type fakeObject struct {
	sm   *adapter.SystemMetadata
	data []byte // nil when the fake was told not to keep bytes
}

// fakeMN is the fake upstream. Its zero behaviour is a working member node;
// the fields below change it.
type fakeMN struct {
	URL string // the MN base URL: server + /mn

	mu      sync.Mutex
	objects map[string]*fakeObject
	sids    map[string]string
	reqs    []seen
	log     []adapter.LogEntry
	reports []*adapter.Exception

	// accessRules, when not 0, is the status PUT /accessRules answers, as a
	// node without it (404, 405, 501); notFoundDoc makes that 404 a DataONE
	// NotFound (as GMN answers an unknown path).
	accessRules int
	notFoundDoc bool
	// noRanges serves objects without Accept-Ranges.
	noRanges bool
	// dropBytes keeps no object bytes (large uploads).
	dropBytes bool
	// hook runs before every handler; true means it answered.
	hook func(w http.ResponseWriter, r *http.Request) bool

	srv *httptest.Server
}

func newFake(t testing.TB) *fakeMN {
	t.Helper()
	f := &fakeMN{objects: map[string]*fakeObject{}, sids: map[string]string{}}
	m := http.NewServeMux()
	v2 := func(pattern string, h func(w http.ResponseWriter, r *http.Request, s *seen)) {
		method, path, _ := strings.Cut(pattern, " ")
		m.HandleFunc(method+" /mn/v2"+path, f.wrap(h))
	}
	v2("GET /monitor/ping", func(w http.ResponseWriter, r *http.Request, s *seen) { io.WriteString(w, "OK") })
	v2("GET /log", f.getLog)
	m.HandleFunc("GET /mn/v1/log", f.wrap(f.getLog))
	v2("GET /object", f.listObjects)
	v2("GET /object/{id}", f.get)
	v2("GET /meta/{id}", f.getMeta)
	v2("GET /checksum/{id}", f.getChecksum)
	v2("POST /error", f.syncFailed)
	v2("PUT /accessRules/{id}", f.setAccess)
	v2("POST /dirtySystemMetadata", func(w http.ResponseWriter, r *http.Request, s *seen) {
		if f.readParts(w, r, s, nil) {
			io.WriteString(w, "OK")
		}
	})
	v2("POST /object", f.create)
	v2("PUT /object/{id}", f.update)
	v2("DELETE /object/{id}", f.delete)
	v2("PUT /archive/{id}", f.archive)
	v2("PUT /meta", f.updateMeta)
	v2("POST /generate", func(w http.ResponseWriter, r *http.Request, s *seen) {
		if f.readParts(w, r, s, nil) {
			f.xml(w, &adapter.Identifier{Value: s.Values["fragment"] + "generated-1"})
		}
	})
	f.srv = httptest.NewServer(m)
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL + "/mn"
	return f
}

func (f *fakeMN) wrap(h func(w http.ResponseWriter, r *http.Request, s *seen)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := &seen{Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Query: r.URL.Query(), Header: r.Header.Clone(),
			ContentLength: r.ContentLength, Values: map[string]string{}, Sizes: map[string]int64{}, SHA1: map[string]string{}}
		// The request is recorded before its answer starts: a client that has
		// its answer finds it recorded.
		rec := &recorder{ResponseWriter: w, commit: func() {
			f.mu.Lock()
			f.reqs = append(f.reqs, *s)
			f.mu.Unlock()
		}}
		defer rec.done()
		if hook := f.getHook(); hook != nil && hook(rec, r) {
			return
		}
		h(rec, r, s)
	}
}

// recorder calls commit once, before the first byte of the answer.
type recorder struct {
	http.ResponseWriter
	commit func()
	once   sync.Once
}

func (r *recorder) done()                { r.once.Do(r.commit) }
func (r *recorder) WriteHeader(code int) { r.done(); r.ResponseWriter.WriteHeader(code) }
func (r *recorder) Write(b []byte) (int, error) {
	r.done()
	return r.ResponseWriter.Write(b)
}
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// set changes the fake's behaviour under its lock.
func (f *fakeMN) set(fn func(f *fakeMN)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

// flags reads the behaviour fields under the lock.
func (f *fakeMN) flags() (accessRules int, notFoundDoc, noRanges, dropBytes bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accessRules, f.notFoundDoc, f.noRanges, f.dropBytes
}

func (f *fakeMN) getHook() func(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hook
}

func (f *fakeMN) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

// requests returns what the fake received, and forgets it.
func (f *fakeMN) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// last is the last request with method and a path starting with prefix.
func (f *fakeMN) last(t testing.TB, method, prefix string) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.reqs) - 1; i >= 0; i-- {
		if r := f.reqs[i]; r.Method == method && strings.HasPrefix(r.Path, prefix) {
			return r
		}
	}
	t.Fatalf("the fake received no %s %s…; it received %v", method, prefix, f.reqs)
	return seen{}
}

// put stores an object directly.
func (f *fakeMN) put(pid, sid string, data []byte) *adapter.SystemMetadata {
	sum := sha1.Sum(data)
	now := adapter.Now()
	sm := &adapter.SystemMetadata{
		SerialVersion: 1, Identifier: pid, FormatID: "application/octet-stream", Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-1", Value: hex.EncodeToString(sum[:])}, RightsHolder: "CN=owner",
		AccessPolicy: &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{"read"}}}},
		DateUploaded: now, DateSysMetadataModified: now, SeriesID: sid,
		AuthoritativeMemberNode: "urn:node:fake", OriginMemberNode: "urn:node:fake",
	}
	f.mu.Lock()
	f.objects[pid] = &fakeObject{sm: sm, data: data}
	if sid != "" {
		f.sids[sid] = pid
	}
	f.mu.Unlock()
	return sm
}

func (f *fakeMN) lookup(id string) (*fakeObject, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pid, ok := f.sids[id]; ok {
		id = pid
	}
	o, ok := f.objects[id]
	return o, ok
}

// --- answers

func (f *fakeMN) xml(w http.ResponseWriter, doc any) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	adapter.Encode(w, doc, 2)
}

// fail answers a DataONE error document.
func fail(w http.ResponseWriter, k adapter.Kind, pid, format string, a ...any) {
	e := adapter.Errorf(k, format, a...).WithPID(pid)
	e.DetailCode, e.NodeID = "1234", "urn:node:fake"
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(e.HTTPStatus())
	adapter.EncodeException(w, e)
}

func (f *fakeMN) object(w http.ResponseWriter, r *http.Request) (*fakeObject, bool) {
	id := r.PathValue("id")
	o, ok := f.lookup(id)
	if !ok {
		fail(w, adapter.NotFound, id, "no object %q here", id)
	}
	return o, ok
}

func (f *fakeMN) getLog(w http.ResponseWriter, r *http.Request, s *seen) {
	f.mu.Lock()
	l := &adapter.Log{LogEntry: slices.Clone(f.log)}
	f.mu.Unlock()
	l.Count, l.Total = len(l.LogEntry), len(l.LogEntry)
	l.Start, _ = strconv.Atoi(r.URL.Query().Get("start"))
	f.xml(w, l)
}

func (f *fakeMN) listObjects(w http.ResponseWriter, r *http.Request, s *seen) {
	f.mu.Lock()
	l := &adapter.ObjectList{}
	for _, o := range f.objects {
		l.ObjectInfo = append(l.ObjectInfo, adapter.ObjectInfo{Identifier: o.sm.Identifier, FormatID: o.sm.FormatID,
			Checksum: o.sm.Checksum, DateSysMetadataModified: o.sm.DateSysMetadataModified, Size: o.sm.Size})
	}
	f.mu.Unlock()
	slices.SortFunc(l.ObjectInfo, func(a, b adapter.ObjectInfo) int { return strings.Compare(a.Identifier, b.Identifier) })
	l.Count, l.Total = len(l.ObjectInfo), len(l.ObjectInfo)
	f.xml(w, l)
}

func (f *fakeMN) get(w http.ResponseWriter, r *http.Request, s *seen) {
	o, ok := f.object(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("DataONE-Checksum", o.sm.Checksum.Algorithm+","+o.sm.Checksum.Value)
	if _, _, noRanges, _ := f.flags(); noRanges {
		w.Header().Set("Content-Length", strconv.Itoa(len(o.data)))
		w.Write(o.data)
		return
	}
	w.Header().Set("ETag", `"`+o.sm.Checksum.Value+`"`)
	http.ServeContent(w, r, "", o.sm.DateSysMetadataModified.Time, bytes.NewReader(o.data))
}

func (f *fakeMN) getMeta(w http.ResponseWriter, r *http.Request, s *seen) {
	if o, ok := f.object(w, r); ok {
		f.xml(w, o.sm)
	}
}

func (f *fakeMN) getChecksum(w http.ResponseWriter, r *http.Request, s *seen) {
	o, ok := f.object(w, r)
	if !ok {
		return
	}
	alg := r.URL.Query().Get("checksumAlgorithm")
	if alg == "" {
		f.xml(w, &o.sm.Checksum)
		return
	}
	h := adapter.NewHasher([]string{alg})
	h.Write(o.data)
	v, ok := adapter.ChecksumOf(h.Sums(), alg)
	if !ok {
		fail(w, adapter.InvalidRequest, o.sm.Identifier, "algorithm %q is not supported", alg)
		return
	}
	f.xml(w, &adapter.Checksum{Algorithm: alg, Value: v})
}

func (f *fakeMN) syncFailed(w http.ResponseWriter, r *http.Request, s *seen) {
	var report *adapter.Exception
	ok := f.readParts(w, r, s, func(name string, p io.Reader) error {
		var err error
		if name == "message" {
			report, err = adapter.DecodeException(p)
		}
		return err
	})
	if !ok {
		return
	}
	f.mu.Lock()
	f.reports = append(f.reports, report)
	f.mu.Unlock()
	io.WriteString(w, "OK")
}

func (f *fakeMN) setAccess(w http.ResponseWriter, r *http.Request, s *seen) {
	accessRules, notFoundDoc, _, _ := f.flags()
	switch {
	case accessRules == http.StatusNotFound && notFoundDoc:
		fail(w, adapter.NotFound, "", "no such path")
		return
	case accessRules == http.StatusBadRequest: // Metacat's unknown path
		fail(w, adapter.InvalidRequest, "", "No resource matched")
		return
	case accessRules != 0:
		http.Error(w, "no such thing", accessRules)
		return
	}
	o, ok := f.object(w, r)
	if !ok {
		return
	}
	var policy adapter.AccessPolicy
	ok = f.readParts(w, r, s, func(name string, p io.Reader) error {
		if name == "accessPolicy" {
			return adapter.Decode(p, &policy)
		}
		return nil
	})
	if !ok {
		return
	}
	f.mu.Lock()
	o.sm.AccessPolicy = &policy
	f.mu.Unlock()
	io.WriteString(w, "OK")
}

// store reads a create or update body and keeps the object under the sysmeta
// it came with, checking size and checksum.
func (f *fakeMN) store(w http.ResponseWriter, r *http.Request, s *seen, pidPart string) (*adapter.SystemMetadata, bool) {
	var sm adapter.SystemMetadata
	var data bytes.Buffer
	_, _, _, dropBytes := f.flags()
	ok := f.readParts(w, r, s, func(name string, p io.Reader) error {
		switch name {
		case "sysmeta":
			return adapter.Decode(p, &sm)
		case "object":
			if dropBytes {
				_, err := io.Copy(io.Discard, p)
				return err
			}
			_, err := io.Copy(&data, p)
			return err
		}
		return nil
	})
	if !ok {
		return nil, false
	}
	pid := s.Values[pidPart]
	if pid != sm.Identifier {
		fail(w, adapter.InvalidSystemMetadata, pid, "the %s part %q is not the sysmeta identifier %q", pidPart, pid, sm.Identifier)
		return nil, false
	}
	if uint64(s.Sizes["object"]) != sm.Size || (sm.Checksum.Algorithm == "SHA-1" && s.SHA1["object"] != sm.Checksum.Value) {
		fail(w, adapter.InvalidSystemMetadata, pid, "size or checksum mismatch")
		return nil, false
	}
	var b []byte
	if !dropBytes {
		b = data.Bytes()
	}
	sm.DateSysMetadataModified = adapter.Now()
	f.mu.Lock() // no answer is written under the lock: the recorder takes it
	_, dup := f.objects[pid]
	if !dup {
		f.objects[pid] = &fakeObject{sm: &sm, data: b}
	}
	f.mu.Unlock()
	if dup {
		fail(w, adapter.IdentifierNotUnique, pid, "%q is taken", pid)
		return nil, false
	}
	return &sm, true
}

func (f *fakeMN) create(w http.ResponseWriter, r *http.Request, s *seen) {
	if sm, ok := f.store(w, r, s, "pid"); ok {
		f.xml(w, &adapter.Identifier{Value: sm.Identifier})
	}
}

func (f *fakeMN) update(w http.ResponseWriter, r *http.Request, s *seen) {
	old, ok := f.object(w, r)
	if !ok {
		return
	}
	if sm, ok := f.store(w, r, s, "newPid"); ok {
		f.mu.Lock()
		old.sm.ObsoletedBy = sm.Identifier
		f.mu.Unlock()
		f.xml(w, &adapter.Identifier{Value: sm.Identifier})
	}
}

func (f *fakeMN) delete(w http.ResponseWriter, r *http.Request, s *seen) {
	o, ok := f.object(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	delete(f.objects, o.sm.Identifier)
	f.mu.Unlock()
	f.xml(w, &adapter.Identifier{Value: o.sm.Identifier})
}

func (f *fakeMN) archive(w http.ResponseWriter, r *http.Request, s *seen) {
	o, ok := f.object(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	o.sm.Archived = true
	f.mu.Unlock()
	f.xml(w, &adapter.Identifier{Value: o.sm.Identifier})
}

func (f *fakeMN) updateMeta(w http.ResponseWriter, r *http.Request, s *seen) {
	var sm adapter.SystemMetadata
	ok := f.readParts(w, r, s, func(name string, p io.Reader) error {
		if name == "sysmeta" {
			return adapter.Decode(p, &sm)
		}
		return nil
	})
	if !ok {
		return
	}
	o, found := f.lookup(s.Values["pid"])
	if !found {
		fail(w, adapter.InvalidRequest, s.Values["pid"], "no object to update")
		return
	}
	if !sm.DateSysMetadataModified.Equal(o.sm.DateSysMetadataModified.Time) {
		fail(w, adapter.InvalidRequest, sm.Identifier, "dateSysMetadataModified is not the stored one")
		return
	}
	f.mu.Lock()
	sm.DateSysMetadataModified = adapter.NewTime(time.Now().Add(time.Millisecond))
	o.sm = &sm
	f.mu.Unlock()
	io.WriteString(w, "OK")
}

// readParts reads a multipart/form-data body, recording every part's name,
// size and SHA-1 (and value, for parts without a filename), and hands each
// part to fn if set. It answers InvalidRequest and returns false on a body
// that is not one.
func (f *fakeMN) readParts(w http.ResponseWriter, r *http.Request, s *seen, fn func(name string, p io.Reader) error) bool {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		fail(w, adapter.InvalidRequest, "", "the body is %q, not multipart/form-data", r.Header.Get("Content-Type"))
		return false
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return true
		}
		if err != nil {
			fail(w, adapter.InvalidRequest, "", "bad multipart body: %v", err)
			return false
		}
		name := p.FormName()
		s.Parts = append(s.Parts, name)
		h := sha1.New()
		var val bytes.Buffer
		var rd io.Reader = io.TeeReader(p, h)
		if p.FileName() == "" {
			rd = io.TeeReader(rd, &val)
		}
		cr := &countReader{r: rd}
		if fn != nil {
			if err := fn(name, cr); err != nil {
				fail(w, adapter.InvalidRequest, "", "part %s: %v", name, err)
				return false
			}
		}
		io.Copy(io.Discard, cr)
		s.Sizes[name], s.SHA1[name] = cr.n, hex.EncodeToString(h.Sum(nil))
		if p.FileName() == "" {
			s.Values[name] = val.String()
		}
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// --- the node under test

// upstreamConfig is a dataone upstream named "up" at baseURL with options
// (YAML), with short timeouts.
func upstreamConfig(t testing.TB, baseURL, options string) config.Upstream {
	t.Helper()
	u := config.Upstream{Name: "up", Type: config.UpstreamDataONE, BaseURL: baseURL,
		DialTimeout: time.Second, HeaderTimeout: 2 * time.Second, Timeout: 3 * time.Second,
		Retry:   config.Retry{Max: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		Breaker: config.Breaker{Failures: 3, OpenFor: 300 * time.Millisecond}}
	if options != "" {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(options), &doc); err != nil {
			t.Fatal(err)
		}
		u.Options = *doc.Content[0]
	}
	return u
}

// open builds the node for u, with its own spool directory unless the options
// name one.
func open(t testing.TB, u config.Upstream, m *metrics.Metrics) *Node {
	t.Helper()
	if u.Options.IsZero() || !strings.Contains(fmt.Sprint(optionKeys(u)), "spoolDir") {
		addOption(t, &u, "spoolDir", t.TempDir())
	}
	c := upstream.New(u, m)
	t.Cleanup(c.Close)
	n, err := New(u, c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func optionKeys(u config.Upstream) []string {
	var ks []string
	for i := 0; i+1 < len(u.Options.Content); i += 2 {
		ks = append(ks, u.Options.Content[i].Value)
	}
	return ks
}

func addOption(t testing.TB, u *config.Upstream, key, value string) {
	t.Helper()
	if u.Options.IsZero() {
		u.Options = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	u.Options.Content = append(u.Options.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

// session is a caller with subject and bearer token.
func session(subject, token string) *adapter.Session {
	return &adapter.Session{Subject: subject, Subjects: []string{subject, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic},
		Token: token, Address: "192.0.2.7", UserAgent: "pytest/1"}
}
