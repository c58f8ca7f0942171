package rest

// The member node's reads of one object: get, describe, getSystemMetadata and
// getChecksum, and the headers get and describe answer.

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

func (h *mnHandlers) get(r *request) error {
	obj, err := h.node.Get(r, r.session, r.pid)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	sm := obj.Meta
	h.objectHeaders(r, sm)
	hd := r.Writer.Header()
	hd["Content-Disposition"] = []string{contentDisposition(sm, h.e.opts.Formats)}
	r.Writer = copyingWriter(r.Writer, sm.Size)
	if rs, seekable := obj.Body.(io.ReadSeeker); seekable {
		// Ranges and conditional requests come with a seekable store (RFC 9110: see
		// serveRanged), which sets Content-Length to what it sends.
		return serveObject(r, sm, rs)
	}
	r.DataFromReader(http.StatusOK, int64(sm.Size), r.Writer.Header().Get("Content-Type"), obj.Body, nil)
	return nil
}

// serveObject answers a GET, or a HEAD, of the object sm from rs, through
// serveRanged.
func serveObject(r *request, sm *adapter.SystemMetadata, rs io.ReadSeeker) error {
	hd := r.Writer.Header()
	delete(hd, "Content-Length")
	if err := serveRanged(r.Writer, r.Request, sm.DateSysMetadataModified.Time, rs); err != nil {
		// A refusal is a DataONE error, not the object: none of its headers but the validators.
		for _, k := range []string{"Content-Disposition", hFormatID, hObjectFormat, hChecksum, hSerialVersion, hSeriesID, hObsoletes, hObsoletedBy} {
			delete(hd, k)
		}
		return err
	}
	return nil
}

// bodiless stands for an object's bytes in a HEAD's serveRanged: ServeContent
// learns the size by seeking, and reads nothing for a HEAD.
type bodiless struct{ size, off int64 }

func (b *bodiless) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += b.off
	case io.SeekEnd:
		off += b.size
	}
	if off < 0 {
		return 0, errors.New("rest: seek before the start of the object")
	}
	b.off = off
	return off, nil
}

func (*bodiless) Read([]byte) (int, error) { return 0, errors.New("rest: a HEAD reads no bytes") }

// objectHeaders are describe's headers (API.md §5.2), also sent on get. They
// are stored in the map as they are spelled on the wire (see hChecksum).
func (h *mnHandlers) objectHeaders(r *request, sm *adapter.SystemMetadata) {
	hd := r.Writer.Header()
	// Every value in one backing array: one allocation, not one per header.
	vals := make([]string, 0, 11)
	set := func(name, v string) {
		vals = append(vals, v)
		hd[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set("Content-Type", mediaType(sm, h.e.opts.Formats))
	set("Content-Length", strconv.FormatUint(sm.Size, 10))
	set("Last-Modified", sm.DateSysMetadataModified.UTC().Format(http.TimeFormat))
	set(hFormatID, sm.FormatID)
	set(hObjectFormat, sm.FormatID)
	set(hChecksum, sm.Checksum.Algorithm+","+sm.Checksum.Value)
	set(hSerialVersion, strconv.FormatUint(sm.SerialVersion, 10))
	set(hETag, `"`+strings.ToLower(sm.Checksum.Value)+`"`)
	if sm.SeriesID != "" && r.version > 1 {
		set(hSeriesID, idHeader(sm.SeriesID))
	}
	if sm.Obsoletes != "" {
		set(hObsoletes, idHeader(sm.Obsoletes))
	}
	if sm.ObsoletedBy != "" {
		set(hObsoletedBy, idHeader(sm.ObsoletedBy))
	}
}

// idHeader is an identifier as a header value: as it is when it is printable
// ASCII without spaces, as GMN sends it (a DOI keeps its slash), else
// percent-encoded from its UTF-8 bytes, as in a path: a header carries no
// other characters.
func idHeader(id string) string {
	if adapter.VisibleASCII(id) {
		return id
	}
	return url.PathEscape(id)
}

var acceptBytes = []string{"bytes"} // read only

// The names of describe's DataONE headers as the API spells them, which is
// how they go on the wire: net/http writes a name as the map holds it, and
// the Java libclient (the CN's) looks them up case-sensitively, where
// Header.Set would store Go's "Dataone-Objectformat". Set them by assigning
// to the map, never with Set or Add.
const (
	hFormatID      = "DataONE-FormatId"
	hObjectFormat  = "DataONE-ObjectFormat"
	hChecksum      = "DataONE-Checksum"
	hSerialVersion = "DataONE-SerialVersion"
	hSeriesID      = "DataONE-SeriesId"
	hObsoletes     = "DataONE-Obsoletes"
	hObsoletedBy   = "DataONE-ObsoletedBy"
	hETag          = "Etag" // Go's canonical form, which net/http's own code reads
)

// mediaType is the object's media type: sysmeta v2 mediaType (with a charset
// property), else the format's, else application/octet-stream (as Metacat).
func mediaType(sm *adapter.SystemMetadata, f *adapter.Formats) string {
	if sm.MediaType != nil && sm.MediaType.Name != "" {
		mt := sm.MediaType.Name
		for _, p := range sm.MediaType.Property {
			if strings.EqualFold(p.Name, "charset") && p.Value != "" {
				mt += "; charset=" + p.Value
			}
		}
		return mt
	}
	return f.MediaType(sm.FormatID)
}

// contentDisposition names the download: the sysmeta fileName, else the PID with
// the format's extension.
func contentDisposition(sm *adapter.SystemMetadata, f *adapter.Formats) string {
	name := sm.FileName
	if name == "" {
		name = sm.Identifier
		if o, ok := f.Lookup(sm.FormatID); ok && o.Extension != "" {
			name += "." + o.Extension
		}
	}
	// mime.FormatMediaType quotes an ASCII name and RFC 2231-encodes any other,
	// escaping what a token may not hold. url.PathEscape is not that encoding:
	// it leaves ':', '=' and '@' bare, so "urn:uuid:…" made a header that
	// strict parsers (Go's mime, Python's email) reject.
	if cd, ok := printableAttachment(name); ok {
		return cd
	}
	if cd := mime.FormatMediaType("attachment", map[string]string{"filename": name}); cd != "" {
		return cd
	}
	return "attachment"
}

// printableAttachment is what mime.FormatMediaType makes of a name of
// printable ASCII (most PIDs and file names), without the map and the
// sorting that were a tenth of a small get's handler: the name as a token,
// else quoted. ok is false for any other name.
func printableAttachment(name string) (cd string, ok bool) {
	const prefix = "attachment; filename="
	token := name != ""
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c < ' ' || c > '~':
			return "", false
		case c == ' ' || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0:
			token = false
		}
	}
	if token {
		return prefix + name, true
	}
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + 8)
	b.WriteString(prefix + `"`)
	for i := 0; i < len(name); i++ {
		if name[i] == '"' || name[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	b.WriteByte('"')
	return b.String(), true
}

func (h *mnHandlers) describe(r *request) error {
	sm, err := r.object()
	if err != nil {
		return err
	}
	h.objectHeaders(r, sm)
	// What get sends (RFC 9110 §9.3.2), as GMN's describe does, with ranges
	// and conditional requests answered as a get from a store that seeks
	// (every store but the http one's) answers them.
	hd := r.Writer.Header()
	hd["Content-Disposition"] = []string{contentDisposition(sm, h.e.opts.Formats)}
	if hasConditions(r.Request) || r.Request.Header.Get("Range") != "" {
		return serveObject(r, sm, &bodiless{size: int64(sm.Size)})
	}
	hd["Accept-Ranges"] = acceptBytes // as ServeContent sends with a 200
	r.Status(http.StatusOK)
	r.Writer.WriteHeaderNow()
	return nil
}

func (h *mnHandlers) getSystemMetadata(r *request) error {
	sm, err := r.object()
	if err != nil {
		return err
	}
	return r.xml(sm)
}

func (h *mnHandlers) getChecksum(r *request) error {
	alg := r.Query("checksumAlgorithm")
	if alg != "" {
		canon, ok := adapter.CanonicalAlgorithm(alg)
		if !ok {
			return invalid("checksumAlgorithm %q is not supported; supported: %s", alg, strings.Join(adapter.ChecksumAlgorithms, ", "))
		}
		alg = canon
	}
	c, err := h.node.Checksum(r, r.session, r.pid, alg)
	if err != nil {
		return err
	}
	return r.xml(c)
}
