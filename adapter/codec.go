package adapter

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// root names the element a document is rendered as, in each API version.
type root struct {
	local  string
	v2Only bool // the v2 namespace exists for this type; v1 renders a v1 view
	ns     string
}

func rootOf(v any) (root, error) {
	switch v.(type) {
	case *SystemMetadata:
		return root{local: "systemMetadata", v2Only: true}, nil
	case *Node:
		return root{local: "node", v2Only: true}, nil
	case *NodeList:
		return root{local: "nodeList", v2Only: true}, nil
	case *Log:
		return root{local: "log", v2Only: true}, nil
	case *ObjectFormat:
		return root{local: "objectFormat", v2Only: true}, nil
	case *ObjectFormatList:
		return root{local: "objectFormatList", v2Only: true}, nil
	case *OptionList:
		return root{local: "optionList", ns: NSv2}, nil
	case *QueryEngineList:
		return root{local: "queryEngineList", ns: NSv11}, nil
	case *ObjectList:
		return root{local: "objectList", ns: NSv1}, nil
	case *Identifier:
		return root{local: "identifier", ns: NSv1}, nil
	case *Checksum:
		return root{local: "checksum", ns: NSv1}, nil
	case *ChecksumAlgorithmList:
		return root{local: "checksumAlgorithmList", ns: NSv1}, nil
	case *ObjectLocationList:
		return root{local: "objectLocationList", ns: NSv1}, nil
	case *AccessPolicy:
		return root{local: "accessPolicy", ns: NSv1}, nil
	case *ReplicationPolicy:
		return root{local: "replicationPolicy", ns: NSv1}, nil
	case *Replica:
		return root{local: "replica", ns: NSv1}, nil
	case *SubjectInfo:
		return root{local: "subjectInfo", ns: NSv1}, nil
	case *SubjectList:
		return root{local: "subjectList", ns: NSv1}, nil
	case *SessionDoc:
		return root{local: "session", ns: NSv1}, nil
	case *Person:
		return root{local: "person", ns: NSv1}, nil
	case *Group:
		return root{local: "group", ns: NSv1}, nil
	}
	return root{}, fmt.Errorf("adapter: %T is not a DataONE document", v)
}

// ViewV1 returns the v1 view of a v2 document: the fields v1 lacks are dropped.
// Documents that are the same in both versions are returned as they are.
func ViewV1(v any) any {
	switch d := v.(type) {
	case *SystemMetadata:
		c := *d
		c.SeriesID, c.MediaType, c.FileName = "", nil, ""
		return &c
	case *Node:
		c := *d
		c.Property = nil
		return &c
	case *NodeList:
		c := NodeList{Node: make([]Node, len(d.Node))}
		for i := range d.Node {
			c.Node[i] = *ViewV1(&d.Node[i]).(*Node)
		}
		return &c
	case *ObjectFormat:
		c := *d
		c.MediaType, c.Extension = nil, ""
		return &c
	case *ObjectFormatList:
		c := *d
		c.ObjectFormat = make([]ObjectFormat, len(d.ObjectFormat))
		for i := range d.ObjectFormat {
			c.ObjectFormat[i] = *ViewV1(&d.ObjectFormat[i]).(*ObjectFormat)
		}
		return &c
	}
	return v
}

var prefixes = map[string]string{NSv1: "d1", NSv11: "d1_1", NSv2: "d2"}

// Encode writes v as a complete XML document of API version 1 or 2: the root is
// qualified with a prefix, the children are unqualified, as the schemas require.
func Encode(w io.Writer, v any, version int) error {
	r, err := rootOf(v)
	if err != nil {
		return err
	}
	ns := r.ns
	if r.v2Only {
		ns = NSv2
		if version == 1 {
			ns = NSv1
		}
	}
	p := prefixes[ns]
	if write := writer(v, p, ns); write != nil {
		return writeDocIn(buffersFor(v), w, func(bw *bufio.Writer) error { write(bw); return nil })
	}
	if ns == NSv1 && r.v2Only {
		v = ViewV1(v)
	}
	start := xml.StartElement{
		Name: xml.Name{Local: p + ":" + r.local},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns:" + p}, Value: ns}},
	}
	return writeDoc(w, encodeXML(func(enc *xml.Encoder) error { return enc.EncodeElement(v, start) }))
}

// encodeXML is a writeDoc body that encodes with encoding/xml: the encoder
// writes into the pooled buffer (xml.NewEncoder adds none of its own over a
// *bufio.Writer of the default size) and must not be kept.
func encodeXML(encode func(*xml.Encoder) error) func(*bufio.Writer) error {
	return func(bw *bufio.Writer) error {
		enc := xml.NewEncoder(bw)
		if err := encode(enc); err != nil {
			return err
		}
		return enc.Close()
	}
}

// docWriters buffer the documents written: a buffer of its own would be 4 KiB
// of garbage per response, half of what a getSystemMetadata allocates.
// pageWriters buffer long pages: 4 KiB at a time, a page of 1,000 objects
// (230 KB) took over a hundred writes to the socket.
var (
	docWriters  = sync.Pool{New: func() any { return bufio.NewWriter(nil) }}
	pageWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}
)

// buffersFor is the pool of buffers to write v through.
func buffersFor(v any) *sync.Pool {
	const long = 16 // entries; a page of fewer fits in a few writes of 4 KiB
	switch d := v.(type) {
	case *ObjectList:
		if len(d.ObjectInfo) > long {
			return &pageWriters
		}
	case *Log:
		if len(d.LogEntry) > long {
			return &pageWriters
		}
	}
	return &docWriters
}

// writeDoc writes the XML declaration, what encode writes, and a newline to w
// through a pooled buffer, which encode must not keep.
func writeDoc(w io.Writer, encode func(*bufio.Writer) error) error {
	return writeDocIn(&docWriters, w, encode)
}

// writeDocIn is writeDoc through a buffer of pool.
func writeDocIn(pool *sync.Pool, w io.Writer, encode func(*bufio.Writer) error) error {
	bw := pool.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil) // keeps no reference to w
		pool.Put(bw)
	}()
	bw.WriteString(xml.Header)
	if err := encode(bw); err != nil {
		return err
	}
	bw.WriteByte('\n')
	return bw.Flush()
}

// Decode reads one DataONE document into v, checking that its root element is the
// one v's type is rendered as, in the v1 or v2 namespace. The description of the
// error says what was wrong, for the client.
func Decode(r io.Reader, v any) error {
	return decode(r, v, false)
}

func decode(r io.Reader, v any, strict bool) error {
	want, err := rootOf(v)
	if err != nil {
		return err
	}
	d := xml.NewDecoder(r)
	for {
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("expected a %s document, got an empty body", want.local)
			}
			return fmt.Errorf("the %s document is not well-formed XML: %v", want.local, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local != want.local {
			return fmt.Errorf("expected a %s document, got <%s>", want.local, se.Name.Local)
		}
		if !acceptableNS(se.Name.Space, want) {
			return fmt.Errorf("the %s element is in namespace %q, not a DataONE types namespace", want.local, se.Name.Space)
		}
		if strict {
			err = decodeStrict(d, se, v)
		} else {
			err = d.DecodeElement(v, &se)
		}
		if err != nil {
			return fmt.Errorf("the %s document is invalid: %v", want.local, err)
		}
		return nil
	}
}

func acceptableNS(space string, want root) bool {
	switch space {
	case NSv1, NSv2:
		return want.ns == "" || want.ns == NSv1 || want.ns == NSv2 || space == want.ns
	case NSv11:
		return want.ns == NSv11
	}
	return false
}

// errorDoc is the <error> document (dataoneErrors.xsd 1.3.0): no namespace, and the
// identifier attribute is "identifier", never "pid".
type errorDoc struct {
	XMLName          xml.Name  `xml:"error"`
	Name             string    `xml:"name,attr"`
	ErrorCode        int       `xml:"errorCode,attr"`
	DetailCode       string    `xml:"detailCode,attr"`
	Identifier       string    `xml:"identifier,attr,omitempty"`
	NodeID           string    `xml:"nodeId,attr,omitempty"`
	Description      string    `xml:"description,omitempty"`
	TraceInformation traceInfo `xml:"traceInformation,omitempty"`
}

// traceInfo keeps the text of traceInformation, whose schema type is anyType.
type traceInfo struct {
	Text string
}

// UnmarshalXML reads the character data of traceInformation and of any element in
// it, with entities and CDATA sections resolved, so that the text written by
// MarshalXML reads back unchanged.
func (t *traceInfo) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	var b strings.Builder
	for depth := 0; ; {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case xml.CharData:
			b.Write(tok)
		case xml.StartElement:
			depth++
		case xml.EndElement:
			if depth == 0 {
				t.Text = b.String()
				return nil
			}
			depth--
		}
	}
}

func (t traceInfo) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	if t.Text == "" {
		return nil
	}
	return e.EncodeElement(struct {
		S string `xml:",chardata"`
	}{t.Text}, start)
}

// EncodeException writes e as an <error> document.
func EncodeException(w io.Writer, e *Exception) error {
	detail := e.DetailCode
	if detail == "" {
		detail = "0"
	}
	doc := errorDoc{
		Name: e.Kind.String(), ErrorCode: e.HTTPStatus(), DetailCode: detail,
		Identifier: e.PID, NodeID: e.NodeID, Description: e.Description,
		TraceInformation: traceInfo{e.TraceInformation},
	}
	return writeDoc(w, encodeXML(func(enc *xml.Encoder) error { return enc.Encode(doc) }))
}

// DecodeException reads an <error> document, such as a synchronizationFailed report
// or an upstream node's answer. An unknown name reads as ServiceFailure, as the
// DataONE clients do.
func DecodeException(r io.Reader) (*Exception, error) {
	var doc errorDoc
	if err := xml.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a DataONE error document: %v", err)
	}
	if doc.XMLName.Local != "error" {
		return nil, fmt.Errorf("not a DataONE error document: root is <%s>", doc.XMLName.Local)
	}
	k, _ := KindByName(doc.Name)
	return &Exception{
		Kind: k, DetailCode: doc.DetailCode, PID: doc.Identifier, NodeID: doc.NodeID,
		Description: doc.Description, TraceInformation: strings.TrimSpace(doc.TraceInformation.Text),
	}, nil
}

// ExceptionHeaders are the DataONE-Exception-* headers that carry e on HEAD, where
// there is no body. Both -Identifier (GMN, the Python client) and -PID (the spec,
// Metacat) are sent.
func ExceptionHeaders(e *Exception) map[string]string {
	detail := e.DetailCode
	if detail == "" {
		detail = "0"
	}
	h := map[string]string{
		"DataONE-Exception-Name":        e.Kind.String(),
		"DataONE-Exception-ErrorCode":   strconv.Itoa(e.HTTPStatus()),
		"DataONE-Exception-DetailCode":  detail,
		"DataONE-Exception-Description": headerSafe(e.Description),
	}
	if e.PID != "" {
		h["DataONE-Exception-Identifier"] = headerSafe(e.PID)
		h["DataONE-Exception-PID"] = headerSafe(e.PID)
	}
	if e.NodeID != "" {
		h["DataONE-Exception-NodeID"] = headerSafe(e.NodeID)
	}
	if e.TraceInformation != "" {
		h["DataONE-Exception-TraceInformation"] = headerSafe(e.TraceInformation)
	}
	return h
}

// headerSafe flattens text into one header line of at most 1024 bytes, as GMN does;
// non-ASCII is percent-escaped so the value stays a valid header.
func headerSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r':
			b.WriteString(" / ")
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		case r > 0x7e:
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		default:
			b.WriteRune(r)
		}
		if b.Len() >= 1024 {
			break
		}
	}
	out := b.String()
	if len(out) > 1024 {
		out = out[:1024]
	}
	return out
}

// ReadFailure is R that keeps the first error other than EOF R gave, in Err:
// a document that does not decode because its body failed (a stall, a cut)
// is the body's failure, not the document's.
type ReadFailure struct {
	R   io.Reader
	Err error
}

func (f *ReadFailure) Read(p []byte) (int, error) {
	n, err := f.R.Read(p)
	if err != nil && err != io.EOF && f.Err == nil {
		f.Err = err
	}
	return n, err
}
