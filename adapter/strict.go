package adapter

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
)

// DecodeStrict is Decode for documents a client sends (system metadata, access
// and replication policies, replica metadata): an element the DataONE schema does
// not define, anywhere in the document, is refused with a description that names
// it and its place, where encoding/xml would drop it silently. So is an element
// the schema allows once that appears twice, and in a v1 document an element only
// v2 defines. It streams: each element is checked as the decoder reads it.
func DecodeStrict(r io.Reader, v any) error {
	return decode(r, v, true)
}

// elements is what the schema allows inside one element: each child by name, with
// what it allows in turn and whether it may repeat. A leaf (text, or a type with
// its own UnmarshalXML) allows no child.
type elements struct {
	children map[string]child
}

type child struct {
	el     *elements
	repeat bool
}

var (
	elementsMu    sync.Mutex
	elementsCache = map[reflect.Type]*elements{}
	unmarshaler   = reflect.TypeFor[xml.Unmarshaler]()
)

// v2Only are the children of v2 types that the v1 schema does not define.
var v2Only = map[reflect.Type][]string{
	reflect.TypeFor[SystemMetadata](): {"seriesId", "mediaType", "fileName"},
}

// elementsOf derives the allowed children of t from its xml struct tags, which
// follow the schema one field per element.
func elementsOf(t reflect.Type) *elements {
	elementsMu.Lock()
	defer elementsMu.Unlock()
	return elementsLocked(t)
}

func elementsLocked(t reflect.Type) *elements {
	if el, ok := elementsCache[t]; ok {
		return el
	}
	el := &elements{}
	elementsCache[t] = el // before the fields: a type that holds itself ends here
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshaler) {
		return el
	}
	el.children = map[string]child{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("xml")
			if f.Anonymous && tag == "" {
				walk(f.Type)
				continue
			}
			name, flags, _ := strings.Cut(tag, ",")
			if !f.IsExported() || name == "-" || f.Name == "XMLName" || strings.Contains(flags, "attr") ||
				strings.Contains(flags, "chardata") || strings.Contains(flags, "innerxml") || strings.Contains(flags, "comment") {
				continue
			}
			if name == "" {
				name = f.Name
			}
			ft, repeat := f.Type, false
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
				ft, repeat = ft.Elem(), true
			}
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			el.children[name] = child{el: elementsLocked(ft), repeat: repeat}
		}
	}
	walk(t)
	return el
}

// strictTokens is the token stream of one document, checked element by element
// against the schema of the type being decoded.
type strictTokens struct {
	d     *xml.Decoder
	first *xml.StartElement // the root, handed on first
	root  *elements
	skip  []string // v2-only children of the root, refused in a v1 document
	stack []frame
}

type frame struct {
	name string
	el   *elements
	seen map[string]bool
}

func (s *strictTokens) Token() (xml.Token, error) {
	if s.first != nil {
		se := *s.first
		s.first = nil
		s.stack = append(s.stack, frame{name: se.Name.Local, el: s.root})
		return se, nil
	}
	tok, err := s.d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case xml.StartElement:
		top := &s.stack[len(s.stack)-1]
		name := t.Name.Local
		c, ok := top.el.children[name]
		if ok && len(s.stack) == 1 && containsString(s.skip, name) {
			return nil, fmt.Errorf("element <%s> is defined by the v2 schema only, not in a v1 %s document", name, s.stack[0].name)
		}
		if !ok {
			return nil, fmt.Errorf("element <%s> in %s is not defined by the DataONE schema", name, s.path())
		}
		if !c.repeat {
			if top.seen[name] {
				return nil, fmt.Errorf("element <%s> appears more than once in %s; the schema allows it once", name, s.path())
			}
			if top.seen == nil {
				top.seen = map[string]bool{}
			}
			top.seen[name] = true
		}
		s.stack = append(s.stack, frame{name: name, el: c.el})
	case xml.EndElement:
		if len(s.stack) > 0 {
			s.stack = s.stack[:len(s.stack)-1]
		}
	}
	return xml.CopyToken(tok), nil
}

// path names the element being read, from the root: systemMetadata/accessPolicy/allow.
func (s *strictTokens) path() string {
	names := make([]string, len(s.stack))
	for i, f := range s.stack {
		names[i] = f.name
	}
	return "<" + strings.Join(names, "/") + ">"
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// decodeStrict decodes the element se, already read from d, into v through the
// checked token stream.
func decodeStrict(d *xml.Decoder, se xml.StartElement, v any) error {
	t := reflect.TypeOf(v).Elem()
	st := &strictTokens{d: d, first: &se, root: elementsOf(t)}
	if se.Name.Space == NSv1 {
		st.skip = v2Only[t]
	}
	err := xml.NewTokenDecoder(st).Decode(v)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}
