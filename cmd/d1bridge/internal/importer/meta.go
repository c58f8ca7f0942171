package importer

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
)

// PID schemes: how an item without a pid in the manifest is named.
const (
	PIDPath     = "path"     // its path (relative path, URL, key under the prefix)
	PIDName     = "name"     // its file name
	PIDChecksum = "checksum" // the hex digest of its bytes (costs a read before the upload)
)

// Defaults are the system metadata of items the manifest says nothing of.
type Defaults struct {
	PIDScheme    string // PIDPath, PIDName or PIDChecksum
	PIDPrefix    string // put before every default pid
	RightsHolder string
	Access       *adapter.AccessPolicy // nil: the rights holder only
	Algorithm    string                // checksum algorithm (a DataONE label)
	Formats      *adapter.Formats      // the format ids the node accepts
}

// pid is the default identifier of it; sum is its digest when known.
func (d *Defaults) pid(it Item, sum string) string {
	switch d.PIDScheme {
	case PIDName:
		return d.PIDPrefix + it.Name
	case PIDChecksum:
		return d.PIDPrefix + sum
	}
	return d.PIDPrefix + it.Path
}

// headSize is how much of an object's start the format is guessed from.
const headSize = 64 << 10

// digest is what reading an object computed.
type digest struct {
	alg, sum string
	size     int64
	head     []byte
}

// hasher hashes what is written to it, counts it and keeps its first
// headSize bytes.
type hasher struct {
	alg  string
	h    hash.Hash
	size int64
	head []byte
}

func newHasher(alg string) (*hasher, error) {
	h := adapter.NewHash(alg)
	if h == nil {
		return nil, fmt.Errorf("no checksum algorithm %q (%s)", alg, strings.Join(adapter.ChecksumAlgorithms, ", "))
	}
	return &hasher{alg: alg, h: h}, nil
}

func (w *hasher) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.size += int64(len(p))
	if n := headSize - len(w.head); n > 0 {
		w.head = append(w.head, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

func (w *hasher) digest() *digest {
	return &digest{alg: w.alg, sum: hex.EncodeToString(w.h.Sum(nil)), size: w.size, head: w.head}
}

// hashItem reads it once, whole, computing its digest with alg.
func hashItem(ctx context.Context, it Item, alg string, count func(int64)) (*digest, error) {
	w, err := newHasher(alg)
	if err != nil {
		return nil, err
	}
	rc, err := it.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if _, err := io.Copy(w, &countingReader{r: rc, count: count}); err != nil {
		return nil, err
	}
	return w.digest(), nil
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r     io.Reader
	count func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.count(int64(n))
	}
	return n, err
}

// GuessFormat is the DataONE format of an object named name starting with
// head: a metadata document known by its content (EML, ISO 19139, FGDC, …),
// else the format of its extension, else the media type its first bytes
// show when the format list has it, else application/octet-stream. Only
// formats in formats are answered.
func GuessFormat(formats *adapter.Formats, name string, head []byte) string {
	known := func(id string) bool {
		_, ok := formats.Lookup(id)
		return id != "" && ok
	}
	if id := datapackage.Sniff(name, head); known(id) {
		return id
	}
	if id := datapackage.FormatForName(name); id != "application/octet-stream" && known(id) {
		return id
	}
	if ext := strings.ToLower(path.Ext(name)); ext != "" {
		if mt, _, err := mime.ParseMediaType(mime.TypeByExtension(ext)); err == nil && known(mt) {
			return mt
		}
	}
	if len(head) > 0 {
		if mt, _, err := mime.ParseMediaType(http.DetectContentType(head)); err == nil && known(mt) {
			return mt
		}
	}
	return "application/octet-stream"
}

// sysmeta is the system metadata of it under pid: the manifest's entry e
// (nil: none) over the defaults, with the size, checksum and format from dg.
func (d *Defaults) sysmeta(it Item, e *Entry, pid string, dg *digest) *adapter.SystemMetadata {
	sm := &adapter.SystemMetadata{
		Identifier: pid, Size: uint64(dg.size),
		Checksum:     adapter.Checksum{Algorithm: dg.alg, Value: dg.sum},
		RightsHolder: d.RightsHolder, AccessPolicy: d.Access, FileName: it.Name,
	}
	if e != nil {
		sm.FormatID = e.FormatID
		if e.RightsHolder != "" {
			sm.RightsHolder = e.RightsHolder
		}
		if e.Access != nil {
			sm.AccessPolicy = e.Access
		}
	}
	if sm.FormatID == "" {
		sm.FormatID = GuessFormat(d.Formats, it.Name, dg.head)
	}
	return sm
}
