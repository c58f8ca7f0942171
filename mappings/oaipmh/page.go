package oaipmh

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// maxPage bounds one answer of the endpoint.
const maxPage = 64 << 20

var errPageTooLarge = fmt.Errorf("the answer is larger than %d MiB", maxPage>>20)

// maxDepth bounds the nesting of an answer's elements: each open element is
// searched for namespace declarations, so a hostile page nested 100,000 deep
// took seconds per megabyte (and memory per level).
const maxDepth = 256

var errTooDeep = errors.New("the answer is nested too deeply")

// limited reads at most maxPage bytes, then fails with errPageTooLarge.
type limited struct {
	r io.Reader
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			return 0, errPageTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// recorder keeps the bytes read through it from offset base on, so that the
// exact bytes of an element can be cut out of the stream; trim drops what is
// no longer needed.
type recorder struct {
	r    io.Reader
	buf  []byte // the bytes from base
	base int64
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// trim forgets the bytes before off.
func (r *recorder) trim(off int64) {
	if d := off - r.base; d > 0 && d <= int64(len(r.buf)) {
		r.buf = append(r.buf[:0], r.buf[d:]...)
		r.base = off
	}
}

// slice is a copy of the bytes from off to end.
func (r *recorder) slice(off, end int64) ([]byte, error) {
	if off < r.base || end > r.base+int64(len(r.buf)) || off > end {
		return nil, errors.New("oaipmh: cut outside the recorded bytes")
	}
	return bytes.Clone(r.buf[off-r.base : end-r.base]), nil
}

// page reads an OAI-PMH answer token by token, without translating
// namespaces (so that an element's prefixes stay as written), keeping the
// open elements and the namespace declarations of each.
type page struct {
	d     *xml.Decoder
	rec   *recorder
	stack []frame
	errs  []oaiError // the answer's error elements, read by next
}

// oaiError is an error element of an answer.
type oaiError struct{ code, message string }

type frame struct {
	name  xml.Name   // as written: Space is the prefix
	decls []xml.Attr // xmlns and xmlns:p attributes
}

func newPage(body io.Reader) *page {
	rec := &recorder{r: &limited{r: body, n: maxPage}}
	d := xml.NewDecoder(rec)
	return &page{d: d, rec: rec}
}

// next is the next token, and the offset where it starts. A StartElement is
// pushed and an EndElement popped; io.EOF ends a complete document. The
// answer's error elements are read into errs, not returned.
func (p *page) next() (xml.Token, int64, error) {
	for {
		t, off, err := p.token()
		if err != nil {
			return nil, off, err
		}
		if start, ok := t.(xml.StartElement); ok && len(p.stack) == 2 && start.Name.Local == "error" {
			e := oaiError{}
			for _, a := range start.Attr {
				if a.Name.Space == "" && a.Name.Local == "code" {
					e.code = a.Value
				}
			}
			if e.message, err = p.text(); err != nil {
				return nil, off, err
			}
			p.errs = append(p.errs, e)
			continue
		}
		return t, off, nil
	}
}

// token is next without the reading of errors.
func (p *page) token() (xml.Token, int64, error) {
	off := p.d.InputOffset()
	t, err := p.d.RawToken()
	if err == io.EOF {
		if len(p.stack) > 0 || off == 0 {
			return nil, off, io.ErrUnexpectedEOF
		}
		return nil, off, io.EOF
	}
	if err != nil {
		return nil, off, err
	}
	switch t := t.(type) {
	case xml.StartElement:
		if len(p.stack) >= maxDepth {
			return nil, off, fmt.Errorf("%w: elements nested deeper than %d", errTooDeep, maxDepth)
		}
		f := frame{name: t.Name}
		for _, a := range t.Attr {
			if a.Name.Space == "xmlns" || a.Name.Space == "" && a.Name.Local == "xmlns" {
				f.decls = append(f.decls, a)
			}
		}
		p.stack = append(p.stack, f)
	case xml.EndElement:
		if len(p.stack) == 0 || p.stack[len(p.stack)-1].name != t.Name {
			return nil, off, &xml.SyntaxError{Msg: fmt.Sprintf("element </%s> closes no open element", qname(t.Name))}
		}
		p.stack = p.stack[:len(p.stack)-1]
	}
	return t, off, nil
}

// text is the text in the element just started, up to its end, trimmed.
func (p *page) text() (string, error) {
	depth := len(p.stack)
	var b strings.Builder
	for len(p.stack) >= depth {
		t, _, err := p.next()
		if err != nil {
			return "", err
		}
		if c, ok := t.(xml.CharData); ok {
			b.Write(c)
		}
	}
	return strings.TrimSpace(b.String()), nil
}

// skip reads past the end of the element just started.
func (p *page) skip() error {
	depth := len(p.stack)
	for len(p.stack) >= depth {
		if _, _, err := p.next(); err != nil {
			return err
		}
	}
	return nil
}

// resolve is the namespace prefix is bound to, and the index of the frame
// that binds it (-1: unbound).
func (p *page) resolve(prefix string) (string, int) {
	for i := len(p.stack) - 1; i >= 0; i-- {
		for _, a := range p.stack[i].decls {
			if prefix == "" && a.Name.Space == "" || prefix != "" && a.Name.Space == "xmlns" && a.Name.Local == prefix {
				return a.Value, i
			}
		}
	}
	return "", -1
}

// element is an element cut out of the page as a document of its own.
type element struct {
	body        []byte // an XML declaration, then the element's bytes
	space       string // the root's namespace
	identifiers []string
}

// cut reads the element just started (start, at offset off) to its end and
// returns its bytes, with the namespace declarations it uses but inherits
// added to its root. The text of its elements named identifier (oai_dc,
// DataCite, ISO...) is kept, in order.
func (p *page) cut(start xml.StartElement, off int64) (*element, error) {
	depth := len(p.stack)
	root := depth - 1
	inherited := map[string]string{}
	var unbound string // a prefix no declaration binds: the page is not namespace-well-formed
	use := func(prefix string) {
		if prefix == "xml" || prefix == "xmlns" {
			return
		}
		uri, at := p.resolve(prefix)
		switch {
		case at >= 0 && at < root:
			inherited[prefix] = uri
		case at < 0 && prefix != "" && unbound == "":
			unbound = prefix
		}
	}
	el := &element{}
	el.space, _ = p.resolve(start.Name.Space)
	var id *strings.Builder
	idDepth := 0
	t := xml.Token(start)
	for {
		switch t := t.(type) {
		case xml.StartElement:
			use(t.Name.Space)
			for _, a := range t.Attr {
				if a.Name.Space != "" {
					use(a.Name.Space)
				}
			}
			if id == nil && (t.Name.Local == "identifier" || t.Name.Local == "alternateIdentifier") {
				id, idDepth = &strings.Builder{}, len(p.stack)
			}
		case xml.CharData:
			if id != nil {
				id.Write(t)
			}
		case xml.EndElement:
			if id != nil && len(p.stack) < idDepth {
				if s := strings.TrimSpace(id.String()); s != "" {
					el.identifiers = append(el.identifiers, s)
				}
				id = nil
			}
		}
		if len(p.stack) < depth {
			break
		}
		var err error
		if t, _, err = p.next(); err != nil {
			return nil, err
		}
	}
	if unbound != "" {
		return nil, fmt.Errorf("element <%s> uses the prefix %q, which no namespace declaration binds", qname(start.Name), unbound)
	}
	raw, err := p.rec.slice(off, p.d.InputOffset())
	if err != nil {
		return nil, err
	}
	head := "<" + qname(start.Name)
	if !bytes.HasPrefix(raw, []byte(head)) {
		return nil, fmt.Errorf("element <%s> is not where the parser says", qname(start.Name))
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(head)
	prefixes := make([]string, 0, len(inherited))
	for prefix := range inherited {
		prefixes = append(prefixes, prefix)
	}
	sort.Strings(prefixes)
	for _, prefix := range prefixes {
		if prefix == "" {
			b.WriteString(` xmlns="`)
		} else {
			b.WriteString(` xmlns:` + prefix + `="`)
		}
		xml.EscapeText(&b, []byte(inherited[prefix]))
		b.WriteString(`"`)
	}
	b.Write(raw[len(head):])
	el.body = b.Bytes()
	return el, nil
}

func qname(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}
