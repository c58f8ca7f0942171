package dataone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// encodeQuery is q encoded with spaces as %20, as the specification asks
// (API.md §1.3); a '+' in a value is %2B.
func encodeQuery(q url.Values) string {
	return strings.ReplaceAll(q.Encode(), "+", "%20")
}

// setTime sets a date parameter unless t is zero.
func setTime(q url.Values, name string, t adapter.Time) {
	if !t.IsZero() {
		q.Set(name, t.Format())
	}
}

// setPaging sets start and count.
func setPaging(q url.Values, start, count int) {
	q.Set("start", strconv.Itoa(start))
	q.Set("count", strconv.Itoa(count))
}

// logQuery is getLogRecords' query string (v2 idFilter, or v1 pidFilter).
func logQuery(q adapter.LogQuery) url.Values {
	v := url.Values{}
	setTime(v, "fromDate", q.FromDate)
	setTime(v, "toDate", q.ToDate)
	if q.Event != "" {
		v.Set("event", q.Event)
	}
	if q.IDFilter != "" {
		if q.PIDsOnly {
			v.Set("pidFilter", q.IDFilter)
		} else {
			v.Set("idFilter", q.IDFilter)
		}
	}
	setPaging(v, q.Start, q.Count)
	return v
}

// listQuery is listObjects' query string.
func listQuery(q adapter.ListQuery) url.Values {
	v := url.Values{}
	setTime(v, "fromDate", q.FromDate)
	setTime(v, "toDate", q.ToDate)
	if q.FormatID != "" {
		v.Set("formatId", q.FormatID)
	}
	if q.Identifier != "" {
		v.Set("identifier", q.Identifier)
	}
	if q.ExcludeReplicas {
		v.Set("replicaStatus", "false")
	}
	setPaging(v, q.Start, q.Count)
	return v
}

// --- requests

// request is one call of the upstream's REST API.
type request struct {
	op     string // the DataONE operation, the upstream metrics' label
	method string
	path   string // escaped, below the version segment
	v1     bool   // under /v1 instead of /v2
	query  url.Values
	header http.Header // more request headers (Range)
	form   *form
	what   string // what is asked for, in messages: `object "x"`
	stream bool   // object bytes travel: no overall timeout
	// public: forward none, for a caller the front does not trust: sent
	// without the bridge's credential (client certificate, token), so that
	// the upstream answers what it answers the public.
	public bool
}

func (r request) url(base string) string {
	v := "/v2"
	if r.v1 {
		v = "/v1"
	}
	u := base + v + r.path
	if len(r.query) > 0 {
		u += "?" + encodeQuery(r.query)
	}
	return u
}

// do sends r as the caller s and returns a successful (2xx) answer; any other
// answer or failure is an exception (errors.go).
func (n *Node) do(ctx context.Context, s *adapter.Session, r request) (*http.Response, error) {
	ctx = upstream.WithOperation(ctx, r.op)
	if r.public {
		ctx = upstream.Anonymous(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url(n.base), nil)
	if err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "a request to upstream %q for %s cannot be made", n.c.Name(), r.what)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if !r.public {
		if err := n.identify(req.Header, s); err != nil {
			return nil, err
		}
	}
	if s != nil {
		if s.UserAgent != "" && validHeaderValue(s.UserAgent) {
			req.Header.Set("User-Agent", s.UserAgent) // the upstream's event log names the client
		}
		if s.Address != "" && validHeaderValue(s.Address) {
			req.Header.Set("X-Forwarded-For", s.Address)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "d1bridge")
	}
	var body io.ReadCloser
	if r.form != nil {
		if body, err = r.form.open(); err != nil {
			return nil, err
		}
		req.Body, req.GetBody, req.ContentLength = body, r.form.open, r.form.length
		req.Header.Set("Content-Type", r.form.ctype)
	}
	resp, err := n.http.Do(req)
	if err != nil {
		if body != nil {
			body.Close() // a RoundTripper that refused the call may not have
		}
		return nil, n.c.Error(err, r.what)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := n.fail(resp, r)
		if adapter.IsKind(err, adapter.InvalidToken) && !r.public && n.ownCredential(req.Header) {
			// This node's own credential (or its proxy headers) was refused,
			// not the client's: the operator's to fix.
			return nil, adapter.Wrap(adapter.ServiceFailure, err, "upstream %q refused this node's own credential for %s (forward: %s; the client's is not sent): "+
				"the node needs one the upstream accepts (a token, a certificate, the proxy secret)", n.c.Name(), r.what, n.o.Forward)
		}
		return nil, err
	}
	return resp, nil
}

// ownCredential tells whether the identity a request with header h sent is
// this node's: always with forward none, with forward proxy when it named a
// subject (the upstream took the headers, or their secret, for no one's).
func (n *Node) ownCredential(h http.Header) bool {
	switch n.o.Forward {
	case ForwardNone:
		return true
	case ForwardProxy:
		return h.Get(n.o.SubjectHeader) != ""
	}
	return false
}

// maxDoc bounds a DataONE document read from the upstream.
const maxDoc = 64 << 20

// call sends r and decodes the answer into out, a DataONE document, or reads
// and drops it when out is nil (the boolean operations). Unless r streams, the
// whole call is bounded by the upstream's timeout.
func (n *Node) call(ctx context.Context, s *adapter.Session, r request, out any) error {
	if !r.stream {
		var cancel context.CancelFunc
		ctx, cancel = n.c.WithTimeout(ctx)
		defer cancel()
	}
	resp, err := n.do(ctx, s, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body := &errReader{r: io.LimitReader(resp.Body, maxDoc)}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(body, 64<<10))
		return nil
	}
	if err := adapter.Decode(body, out); err != nil {
		if body.err != nil {
			return n.c.Error(body.err, r.what) // cut off, or too slow
		}
		return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q answered %s with an invalid document: %v", n.c.Name(), r.what, err)
	}
	return nil
}

// errReader remembers the first error other than EOF of the reader it wraps, so
// that a body cut off is told from a document that is wrong.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}

// identifier calls r and returns the identifier the upstream answered.
func (n *Node) identifier(ctx context.Context, s *adapter.Session, r request) (string, error) {
	var id adapter.Identifier
	if err := n.call(ctx, s, r, &id); err != nil {
		return "", err
	}
	if id.Value == "" {
		return "", adapter.Errorf(adapter.ServiceFailure, "upstream %q answered %s with an empty identifier", n.c.Name(), r.what)
	}
	return id.Value, nil
}

// --- multipart bodies

// form is a multipart/form-data body whose parts are held in memory, except
// file parts (the spooled object), which are read from their file when the
// body is sent; its length is known in advance.
type form struct {
	segs   []segment
	ctype  string
	length int64
}

// segment is a run of the body: bytes, or a whole file.
type segment struct {
	b    []byte
	path string
	size int64
}

// formPart is one part: a value, a document or a file.
type formPart struct {
	name, filename, ctype string
	data                  []byte
	path                  string // a file's bytes, of size bytes
	size                  int64
}

func textPart(name, value string) formPart { return formPart{name: name, data: []byte(value)} }

// docPart is a DataONE document, encoded in API version 2.
func docPart(name string, doc any) (formPart, error) {
	var b bytes.Buffer
	if err := adapter.Encode(&b, doc, 2); err != nil {
		return formPart{}, adapter.Wrap(adapter.ServiceFailure, err, "encoding the %s part", name)
	}
	return formPart{name: name, filename: name + ".xml", ctype: "text/xml; charset=utf-8", data: b.Bytes()}, nil
}

func filePart(name, filename, path string, size int64) formPart {
	return formPart{name: name, filename: filename, ctype: "application/octet-stream", path: path, size: size}
}

// newForm lays the parts out. The multipart writer writes straight through,
// so what it has written when a file part's header is done precedes the file,
// and what it writes next follows it.
func newForm(parts ...formPart) (*form, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	f := &form{ctype: mw.FormDataContentType()}
	flush := func() {
		if buf.Len() > 0 {
			f.segs = append(f.segs, segment{b: bytes.Clone(buf.Bytes())})
			f.length += int64(buf.Len())
			buf.Reset()
		}
	}
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		d := fmt.Sprintf(`form-data; name="%s"`, quoteEscaper.Replace(p.name))
		if p.filename != "" {
			d += fmt.Sprintf(`; filename="%s"`, quoteEscaper.Replace(p.filename))
		}
		h.Set("Content-Disposition", d)
		if p.ctype != "" {
			h.Set("Content-Type", p.ctype)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			return nil, err
		}
		if p.path != "" {
			flush()
			f.segs = append(f.segs, segment{path: p.path, size: p.size})
			f.length += p.size
			continue
		}
		w.Write(p.data)
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	flush()
	return f, nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// open returns the body from its start (also http.Request.GetBody).
func (f *form) open() (io.ReadCloser, error) {
	mr := &multiReadCloser{}
	var rs []io.Reader
	for _, s := range f.segs {
		if s.path == "" {
			rs = append(rs, bytes.NewReader(s.b))
			continue
		}
		fh, err := os.Open(s.path)
		if err != nil {
			mr.Close()
			return nil, adapter.Wrap(adapter.ServiceFailure, err, "the staged object is gone")
		}
		mr.files = append(mr.files, fh)
		// A file that changed size would not fill its Content-Length.
		rs = append(rs, &exactReader{r: fh, left: s.size})
	}
	mr.Reader = io.MultiReader(rs...)
	return mr, nil
}

type multiReadCloser struct {
	io.Reader
	files []*os.File
}

func (m *multiReadCloser) Close() error {
	for _, f := range m.files {
		f.Close()
	}
	m.files = nil
	return nil
}

// exactReader yields exactly left bytes of r, or fails.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if errors.Is(err, io.EOF) && e.left > 0 {
		err = io.ErrUnexpectedEOF
	} else if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}
