package httpapi

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/html/charset"
)

// path is where a value is in an answer: "." for the document (or item)
// itself, "header:Name" for an answer header, else dotted segments. In JSON a
// segment is an object member or an array index; in XML, paths start at the
// root element, a segment selects child elements by local name (namespaces
// ignored), an index picks one of them, and a last "@name" is an attribute.
type path struct {
	raw    string
	header string   // an answer header's name
	segs   []string // nil for "."
}

func parsePath(s string) (path, error) {
	p := path{raw: s}
	switch {
	case s == ".":
		return p, nil
	case strings.HasPrefix(s, "header:"):
		p.header = http.CanonicalHeaderKey(strings.TrimPrefix(s, "header:"))
		if p.header == "" {
			return p, fmt.Errorf("%q names no header", s)
		}
		return p, nil
	}
	p.segs = strings.Split(s, ".")
	for i, seg := range p.segs {
		switch {
		case seg == "":
			return p, fmt.Errorf("%q has an empty segment (use . alone for the whole document)", s)
		case strings.HasPrefix(seg, "@") && i != len(p.segs)-1:
			return p, fmt.Errorf("%q: an attribute (%s) can only be the last segment", s, seg)
		}
	}
	return p, nil
}

// element is an XML element with what paths can reach.
type element struct {
	name string
	attr []xml.Attr
	text strings.Builder
	kids []*element
}

// maxDepth bounds the nesting of an XML answer.
const maxDepth = 256

// decode reads an answer: JSON into a value (numbers kept as written), XML
// into its root element.
func decode(format string, r io.Reader) (any, error) {
	if format == formatJSON {
		d := json.NewDecoder(r)
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		return v, nil
	}
	d := xml.NewDecoder(r)
	d.CharsetReader = charset.NewReaderLabel // legacy answers in ISO-8859-1 and such
	doc := &element{}
	stack := []*element{doc}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not XML: %w", err)
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > maxDepth {
				return nil, fmt.Errorf("XML nested deeper than %d elements", maxDepth)
			}
			e := &element{name: t.Name.Local, attr: t.Attr}
			top.kids = append(top.kids, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.text.Write(t)
		}
	}
	if len(doc.kids) != 1 {
		return nil, errors.New("not XML: no root element")
	}
	return doc.kids[0], nil
}

// at follows segs from v (a JSON value or an XML element). XML gives the
// matching elements, or the attribute's value as a string; nil when nothing
// matches.
func at(v any, segs []string) any {
	if e, ok := v.(*element); ok {
		set := []*element{e}
		for _, seg := range segs {
			if name, ok := strings.CutPrefix(seg, "@"); ok {
				for _, a := range set[0].attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return nil
			}
			if i, err := strconv.Atoi(seg); err == nil {
				if i < 0 || i >= len(set) {
					return nil
				}
				set = set[i : i+1]
				continue
			}
			var next []*element
			for _, e := range set {
				for _, k := range e.kids {
					if k.name == seg {
						next = append(next, k)
					}
				}
			}
			if set = next; len(set) == 0 {
				return nil
			}
		}
		return set
	}
	for _, seg := range segs {
		switch t := v.(type) {
		case map[string]any:
			v = t[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

// items is the list at p in doc. In JSON it must be an array (null is an
// empty one); in XML it is every element p matches, and only the last
// segment may match none.
func items(doc any, p path) ([]any, error) {
	if root, ok := doc.(*element); ok {
		if len(p.segs) > 1 && at(root, p.segs[:len(p.segs)-1]) == nil {
			return nil, fmt.Errorf("the answer has no %s", strings.Join(p.segs[:len(p.segs)-1], "."))
		}
		var out []any
		if set, ok := at(root, p.segs).([]*element); ok {
			for _, e := range set {
				out = append(out, e)
			}
		}
		return out, nil
	}
	v := at(doc, p.segs)
	switch t := v.(type) {
	case []any:
		return t, nil
	case nil:
		if len(p.segs) > 0 {
			if obj, ok := at(doc, p.segs[:len(p.segs)-1]).(map[string]any); ok {
				if _, present := obj[p.segs[len(p.segs)-1]]; present {
					return nil, nil // null: no items
				}
			}
		}
		return nil, fmt.Errorf("the answer has no %q", p.raw)
	}
	return nil, fmt.Errorf("%q is %s, not a list", p.raw, kindOf(v))
}

// field is the text at p in item (or in the answer's headers); ok is false
// when it is absent, null or empty.
func field(item any, h http.Header, p path) (s string, ok bool, err error) {
	if p.header != "" {
		s = strings.TrimSpace(h.Get(p.header))
		return s, s != "", nil
	}
	switch v := at(item, p.segs).(type) {
	case nil:
		return "", false, nil
	case string:
		s = v
	case json.Number:
		s = v.String()
	case bool:
		s = strconv.FormatBool(v)
	case []*element:
		s = v[0].text.String()
	default:
		return "", false, fmt.Errorf("is %s, not a single value", kindOf(v))
	}
	s = strings.TrimSpace(s)
	return s, s != "", nil
}

// kindOf names a JSON value's type for errors.
func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "a value"
}
