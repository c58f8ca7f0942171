package adapter

import (
	"bufio"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The documents clients ask for most, system metadata (getSystemMetadata),
// object lists and logs (the pages harvesters walk), are written directly:
// encoding/xml's reflection was a quarter of the CPU of answering
// getSystemMetadata and 2.7 ms of a page of 1,000 objects. Each writer writes
// the very bytes encoding/xml writes for the struct's tags
// (TestWritersMatchEncodingXML and the FuzzWriters targets hold them equal).

// writer is a document's direct writer, or nil for one encoding/xml writes.
func writer(v any, prefix, ns string) func(*bufio.Writer) {
	switch d := v.(type) {
	case *SystemMetadata:
		return func(w *bufio.Writer) { writeSystemMetadata(w, d, prefix, ns, ns == NSv2) }
	case *ObjectList:
		return func(w *bufio.Writer) { writeObjectList(w, d, prefix, ns) }
	case *Log:
		return func(w *bufio.Writer) { writeLog(w, d, prefix, ns) }
	}
	return nil
}

// writeSystemMetadata writes sm as the root element name declaring ns under
// prefix; v2 false leaves out the fields v1 lacks.
func writeSystemMetadata(w *bufio.Writer, sm *SystemMetadata, prefix, ns string, v2 bool) {
	x := xmlWriter{w}
	x.root(prefix, "systemMetadata", ns)
	w.WriteByte('>')
	x.uint("serialVersion", sm.SerialVersion)
	x.elem("identifier", sm.Identifier)
	x.elem("formatId", sm.FormatID)
	x.uint("size", sm.Size)
	w.WriteString(`<checksum algorithm="`)
	x.text(sm.Checksum.Algorithm)
	w.WriteString(`">`)
	x.text(sm.Checksum.Value)
	w.WriteString("</checksum>")
	x.optional("submitter", sm.Submitter)
	x.elem("rightsHolder", sm.RightsHolder)
	if ap := sm.AccessPolicy; ap != nil {
		w.WriteString("<accessPolicy>")
		for _, rule := range ap.Allow {
			w.WriteString("<allow>")
			for _, s := range rule.Subject {
				x.elem("subject", s)
			}
			for _, p := range rule.Permission {
				x.elem("permission", string(p))
			}
			w.WriteString("</allow>")
		}
		w.WriteString("</accessPolicy>")
	}
	if rp := sm.ReplicationPolicy; rp != nil {
		w.WriteString("<replicationPolicy")
		if rp.ReplicationAllowed != nil {
			w.WriteString(` replicationAllowed="`)
			w.WriteString(strconv.FormatBool(*rp.ReplicationAllowed))
			w.WriteByte('"')
		}
		if rp.NumberReplicas != nil {
			w.WriteString(` numberReplicas="`)
			x.int(int64(*rp.NumberReplicas))
			w.WriteByte('"')
		}
		w.WriteByte('>')
		for _, n := range rp.PreferredMemberNode {
			x.elem("preferredMemberNode", n)
		}
		for _, n := range rp.BlockedMemberNode {
			x.elem("blockedMemberNode", n)
		}
		w.WriteString("</replicationPolicy>")
	}
	x.optional("obsoletes", sm.Obsoletes)
	x.optional("obsoletedBy", sm.ObsoletedBy)
	x.elem("archived", strconv.FormatBool(sm.Archived))
	x.time("dateUploaded", sm.DateUploaded)
	x.time("dateSysMetadataModified", sm.DateSysMetadataModified)
	x.optional("originMemberNode", sm.OriginMemberNode)
	x.optional("authoritativeMemberNode", sm.AuthoritativeMemberNode)
	for _, r := range sm.Replica {
		w.WriteString("<replica>")
		x.elem("replicaMemberNode", r.ReplicaMemberNode)
		x.elem("replicationStatus", r.ReplicationStatus)
		x.time("replicaVerified", r.ReplicaVerified)
		w.WriteString("</replica>")
	}
	if v2 {
		x.optional("seriesId", sm.SeriesID)
		if mt := sm.MediaType; mt != nil {
			w.WriteString(`<mediaType name="`)
			x.text(mt.Name)
			w.WriteString(`">`)
			for _, p := range mt.Property {
				w.WriteString(`<property name="`)
				x.text(p.Name)
				w.WriteString(`">`)
				x.text(p.Value)
				w.WriteString("</property>")
			}
			w.WriteString("</mediaType>")
		}
		x.optional("fileName", sm.FileName)
	}
	x.endRoot(prefix, "systemMetadata")
}

// writeObjectList writes l as the root element objectList.
func writeObjectList(w *bufio.Writer, l *ObjectList, prefix, ns string) {
	x := xmlWriter{w}
	x.root(prefix, "objectList", ns)
	x.slice(l.Slice)
	for i := range l.ObjectInfo {
		o := &l.ObjectInfo[i]
		w.WriteString("<objectInfo>")
		x.elem("identifier", o.Identifier)
		x.elem("formatId", o.FormatID)
		w.WriteString(`<checksum algorithm="`)
		x.text(o.Checksum.Algorithm)
		w.WriteString(`">`)
		x.text(o.Checksum.Value)
		w.WriteString("</checksum>")
		x.time("dateSysMetadataModified", o.DateSysMetadataModified)
		x.uint("size", o.Size)
		w.WriteString("</objectInfo>")
	}
	x.endRoot(prefix, "objectList")
}

// writeLog writes l as the root element log.
func writeLog(w *bufio.Writer, l *Log, prefix, ns string) {
	x := xmlWriter{w}
	x.root(prefix, "log", ns)
	x.slice(l.Slice)
	for i := range l.LogEntry {
		e := &l.LogEntry[i]
		w.WriteString("<logEntry>")
		x.elem("entryId", e.EntryID)
		x.elem("identifier", e.Identifier)
		x.elem("ipAddress", e.IPAddress)
		x.elem("userAgent", e.UserAgent)
		x.elem("subject", e.Subject)
		x.elem("event", e.Event)
		x.time("dateLogged", e.DateLogged)
		x.elem("nodeIdentifier", e.NodeIdentifier)
		w.WriteString("</logEntry>")
	}
	x.endRoot(prefix, "log")
}

// xmlWriter writes elements and escaped text to a buffered writer, whose
// first error its Flush reports.
type xmlWriter struct{ w *bufio.Writer }

// root opens the root element prefix:local declaring ns, and leaves its start
// tag open for attributes.
func (x xmlWriter) root(prefix, local, ns string) {
	x.w.WriteByte('<')
	x.w.WriteString(prefix)
	x.w.WriteByte(':')
	x.w.WriteString(local)
	x.w.WriteString(" xmlns:")
	x.w.WriteString(prefix)
	x.w.WriteString(`="`)
	x.text(ns)
	x.w.WriteByte('"')
}

func (x xmlWriter) endRoot(prefix, local string) {
	x.w.WriteString("</")
	x.w.WriteString(prefix)
	x.w.WriteByte(':')
	x.w.WriteString(local)
	x.w.WriteByte('>')
}

// slice writes a page's attributes and ends the root's start tag.
func (x xmlWriter) slice(s Slice) {
	x.w.WriteString(` count="`)
	x.int(int64(s.Count))
	x.w.WriteString(`" start="`)
	x.int(int64(s.Start))
	x.w.WriteString(`" total="`)
	x.int(int64(s.Total))
	x.w.WriteString(`">`)
}

func (x xmlWriter) elem(name, value string) {
	x.open(name)
	x.text(value)
	x.close(name)
}

// open and close write a tag; written in parts, as a concatenation would
// allocate.
func (x xmlWriter) open(name string) {
	x.w.WriteByte('<')
	x.w.WriteString(name)
	x.w.WriteByte('>')
}

func (x xmlWriter) close(name string) {
	x.w.WriteString("</")
	x.w.WriteString(name)
	x.w.WriteByte('>')
}

// optional is elem for a field tagged omitempty.
func (x xmlWriter) optional(name, value string) {
	if value != "" {
		x.elem(name, value)
	}
}

func (x xmlWriter) uint(name string, v uint64) {
	x.open(name)
	x.w.Write(strconv.AppendUint(x.w.AvailableBuffer(), v, 10))
	x.close(name)
}

func (x xmlWriter) int(v int64) {
	x.w.Write(strconv.AppendInt(x.w.AvailableBuffer(), v, 10))
}

// time is Time.MarshalXML's element: none for the zero time.
func (x xmlWriter) time(name string, t Time) {
	if t.IsZero() {
		return
	}
	x.open(name)
	x.w.Write(t.UTC().AppendFormat(x.w.AvailableBuffer(), timeFormat))
	x.close(name)
}

// text writes s escaped as encoding/xml escapes text and attribute values:
// the five markup characters and tab, newline and carriage return as
// references, and what XML cannot hold (invalid UTF-8, characters outside
// XML's range) as U+FFFD.
func (x xmlWriter) text(s string) {
	last := 0
	for i := 0; i < len(s); {
		r, width := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, width = utf8.DecodeRuneInString(s[i:])
		} else if r > '>' || escapeFree[r] {
			i++ // the common case: ASCII with nothing to escape
			continue
		}
		i += width
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !xmlChar(r) || (r == utf8.RuneError && width == 1) {
				esc = "\uFFFD"
				break
			}
			continue
		}
		x.w.WriteString(s[last : i-width])
		x.w.WriteString(esc)
		last = i
	}
	x.w.WriteString(s[last:])
}

// escapeFree marks the ASCII up to '>' that text writes as it is.
var escapeFree = func() (m ['>' + 1]bool) {
	for c := ' '; c <= '>'; c++ {
		m[c] = !strings.ContainsRune(`"'&<>`, c)
	}
	return m
}()

// xmlChar tells whether XML 1.0 can hold r (its Char production).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
