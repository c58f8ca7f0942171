package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// An export directory is a hashstore, the layout of DataONE's hashstore
// library (which Metacat 3 uses): objects by the SHA-256 of their bytes (the
// content id, cid), system metadata by identifier, and reference files
// between them, every name a SHA-256 digest split into three levels of two
// characters (shard(h) = h[0:2]/h[2:4]/h[4:6]/h[6:]):
//
//	hashstore.yaml                                  the store's settings
//	objects/<shard(cid)>                            an object's bytes
//	metadata/<shard(sha256(pid))>/<sha256(pid+ns)>  its v2 system metadata, as getSystemMetadata
//	                                                returns it; ns is SysmetaNamespace
//	refs/pids/<shard(sha256(pid))>                  the cid of pid's bytes
//	refs/cids/<shard(cid)>                          the pids with those bytes, one a line
//	d1bridge-export.json                            what was exported (ExportManifest), written
//	                                                last with hashstore.yaml
//	d1bridge-pids.txt                               the pids in the catalog's order, one a line
//
// An object registered without bytes (system metadata only) has metadata and
// no refs; so has one whose bytes a harvest source holds (counted apart).
// The event log is not part of an export.

// SysmetaNamespace is the hashstore format id of DataONE v2 system metadata.
const SysmetaNamespace = "https://ns.dataone.org/service/types/v2.0#SystemMetadata"

const (
	hashstoreConfig = "hashstore.yaml"
	exportManifest  = "d1bridge-export.json"
	pidList         = "d1bridge-pids.txt"
	storeDepth      = 3
	storeWidth      = 2
)

const hashstoreYAML = `# A hashstore (https://github.com/DataONEorg/hashstore) written by d1bridge export.
store_depth: 3
store_width: 2
store_algorithm: "SHA-256"
store_metadata_namespace: "` + SysmetaNamespace + `"
store_default_algo_list:
  - "MD5"
  - "SHA-1"
  - "SHA-256"
  - "SHA-384"
  - "SHA-512"
`

// ExportManifest is d1bridge-export.json.
type ExportManifest struct {
	Format       string    `json:"format"` // d1bridge-export
	Version      int       `json:"version"`
	Created      time.Time `json:"created"`
	NodeID       string    `json:"nodeId"`
	Objects      int64     `json:"objects"`      // system metadata documents
	Files        int64     `json:"files"`        // distinct files in objects/
	Bytes        int64     `json:"bytes"`        // of the objects with bytes
	MetadataOnly int64     `json:"metadataOnly"` // registered without bytes
	Elsewhere    int64     `json:"elsewhere"`    // bytes held by a harvest source: metadata only
	Vanished     []string  `json:"vanished,omitempty"`
}

// shard is a digest's path: three levels of two characters, then the rest.
func shard(h string) string {
	parts := make([]string, 0, storeDepth+1)
	for i := range storeDepth {
		parts = append(parts, h[i*storeWidth:(i+1)*storeWidth])
	}
	return filepath.Join(append(parts, h[storeDepth*storeWidth:])...)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// metadataPath and pidRefPath are pid's files, relative to the store.
func metadataPath(pid string) string {
	return filepath.Join("metadata", shard(sha256Hex(pid)), sha256Hex(pid+SysmetaNamespace))
}

func pidRefPath(pid string) string { return filepath.Join("refs", "pids", shard(sha256Hex(pid))) }

// ExportOptions are what Export works on: Options.Blobs is read when the
// bytes are not in the embedded store.
type ExportOptions struct {
	Options
}

// Export writes every object of one snapshot of the catalog, bytes and
// system metadata, into dir (empty or absent) as a hashstore. The bytes are
// checked against each object's size and checksum on the way.
func Export(ctx context.Context, dir string, o ExportOptions) (*ExportManifest, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := emptyDir(dir); err != nil {
		return nil, err
	}
	snap, err := o.Catalog.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer snap.Close()
	m := &ExportManifest{Format: "d1bridge-export", Version: 1, NodeID: o.NodeID}
	tmp := filepath.Join(dir, "tmp")
	p := newProgress(o.Log, "export", 0)
	n := 0
	err = snap.Objects(ctx, func(r sqlcatalog.ObjectRow) error {
		var doc bytes.Buffer
		if err := adapter.Encode(&doc, r.Meta, 2); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, metadataPath(r.PID)), &doc); err != nil {
			return err
		}
		if err := appendLine(filepath.Join(dir, pidList), r.PID); err != nil {
			return err
		}
		m.Objects++
		switch {
		case r.BlobKey == "":
			m.MetadataOnly++
			return nil
		case strings.HasPrefix(r.BlobKey, "@"):
			m.Elsewhere++
			return nil
		}
		n++
		staged := filepath.Join(tmp, strconv.Itoa(n))
		cid, err := stage(ctx, snap, o, r, staged)
		if errors.Is(err, fs.ErrNotExist) || adapter.IsKind(err, adapter.NotFound) {
			fmt.Fprintf(o.Log, "export: %q was deleted while the export ran: its system metadata only\n", r.PID)
			m.Vanished = append(m.Vanished, r.PID)
			return nil
		}
		if err != nil {
			return err
		}
		obj := filepath.Join(dir, "objects", shard(cid))
		if _, err := os.Stat(obj); err == nil {
			os.Remove(staged) // the same bytes under another pid
		} else {
			if err := os.MkdirAll(filepath.Dir(obj), 0o750); err != nil {
				return err
			}
			if err := os.Rename(staged, obj); err != nil {
				return err
			}
			m.Files++
		}
		if err := writeFile(filepath.Join(dir, pidRefPath(r.PID)), strings.NewReader(cid)); err != nil {
			return err
		}
		if err := appendLine(filepath.Join(dir, "refs", "cids", shard(cid)), r.PID); err != nil {
			return err
		}
		m.Bytes += r.Size
		p.add(r.Size)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	p.done()
	os.RemoveAll(tmp)
	m.Created = time.Now().UTC()
	// The manifest, then the settings that make the directory an export
	// (Kind): an export cut short is neither, and is not restored.
	if err := writeJSON(filepath.Join(dir, exportManifest), m); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, hashstoreConfig), strings.NewReader(hashstoreYAML)); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "export: done: %d objects (%d files, %s), %d with system metadata only, %d held by harvest sources (metadata only), %d deleted meanwhile\n",
		m.Objects, m.Files, humanBytes(m.Bytes), m.MetadataOnly, m.Elsewhere, len(m.Vanished))
	return m, nil
}

// stage puts the bytes of r at path, checked against its size and checksum,
// and returns their SHA-256: a hard link to the embedded store's file where it
// can, a copy otherwise.
func stage(ctx context.Context, snap *sqlcatalog.Snapshot, o ExportOptions, r sqlcatalog.ObjectRow, path string) (cid string, err error) {
	what := fmt.Sprintf("the bytes of %q", r.PID)
	var src io.Reader
	switch {
	case strings.HasPrefix(r.BlobKey, node.DocumentKeyPrefix):
		b, err := snap.Document(ctx, r.BlobKey)
		if err != nil {
			return "", err
		}
		src = bytes.NewReader(b)
	case o.Files != "":
		if _, err := capture(filepath.Join(o.Files, "objects", keyPath(r.BlobKey)), path); err != nil {
			return "", err
		}
	default:
		rc, err := o.Blobs.Get(ctx, r.BlobKey)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		src = rc
	}
	if src != nil {
		if err := writeFile(path, src); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	size, err := checkSum(io.TeeReader(f, h), r.Checksum, what)
	if err != nil {
		return "", err
	}
	if size != r.Size {
		return "", fmt.Errorf("%s: %d bytes, the system metadata says %d", what, size, r.Size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// appendLine adds a line to the file at path, creating it.
func appendLine(path, line string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, line+"\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
