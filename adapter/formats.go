package adapter

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
)

//go:embed objectFormatList.xml
var officialFormats []byte

// Formats is the object format registry: the official list shipped in the binary,
// or a list an operator supplies.
type Formats struct {
	list  ObjectFormatList
	index map[string]int
}

// OfficialFormats parses the embedded official DataONE object format list.
func OfficialFormats() *Formats {
	f, err := ParseFormats(bytes.NewReader(officialFormats))
	if err != nil {
		panic("adapter: the embedded format list is broken: " + err.Error())
	}
	return f
}

// ParseFormats reads an objectFormatList document.
func ParseFormats(r io.Reader) (*Formats, error) {
	var l ObjectFormatList
	if err := Decode(r, &l); err != nil {
		return nil, err
	}
	f := &Formats{list: l, index: make(map[string]int, len(l.ObjectFormat))}
	for i, o := range l.ObjectFormat {
		if _, dup := f.index[o.FormatID]; dup {
			return nil, fmt.Errorf("format %q is listed twice", o.FormatID)
		}
		f.index[o.FormatID] = i
	}
	f.list.Slice = Slice{Count: len(l.ObjectFormat), Start: 0, Total: len(l.ObjectFormat)}
	return f, nil
}

// List returns every format.
func (f *Formats) List() *ObjectFormatList { return &f.list }

// Lookup finds a format by id.
func (f *Formats) Lookup(id string) (*ObjectFormat, bool) {
	i, ok := f.index[id]
	if !ok {
		return nil, false
	}
	return &f.list.ObjectFormat[i], true
}

// MediaType is the media type to serve objects of a format with.
func (f *Formats) MediaType(id string) string {
	if o, ok := f.Lookup(id); ok && o.MediaType != nil && o.MediaType.Name != "" {
		return o.MediaType.Name
	}
	return "application/octet-stream"
}
