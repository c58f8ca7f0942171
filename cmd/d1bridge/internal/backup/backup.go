package backup

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// A backup directory holds:
//
//	BACKUP.json          the manifest (Manifest), written last: a directory
//	                     without it is an incomplete backup
//	catalog.jsonl.gz     the catalog, every table, as a sqlcatalog dump
//	                     (gzip'd JSON lines, the same from SQLite and PostgreSQL)
//	blobs/<aa>/<bb>/<h>  with the embedded store, the bytes of every object the
//	                     catalog names, h the hex SHA-256 of its store key (the
//	                     embedded store's own layout below dataDir/objects/objects)
//
// The catalog and the bytes are of one moment. Every file of the store is
// captured (hard-linked, or copied across filesystems) first; then the
// catalog's snapshot is taken and dumped; then the bytes of objects created
// in between are captured, each object's bytes are checked against its
// checksum, and the files the snapshot does not name are removed. A delete
// removes the catalog row before the bytes, so an object deleted after the
// first pass is either out of the snapshot or already captured; one created
// after the first pass and deleted before its capture makes the backup take
// a new snapshot.

// Manifest is BACKUP.json.
type Manifest struct {
	Format        string           `json:"format"` // ManifestFormat
	Version       int              `json:"version"`
	Created       time.Time        `json:"created"`
	NodeID        string           `json:"nodeId"`
	Driver        string           `json:"driver"` // the catalog's database: sqlite or postgres
	SchemaVersion int              `json:"schemaVersion"`
	Catalog       string           `json:"catalog"` // the dump's file name
	CatalogSHA256 string           `json:"catalogSha256"`
	Rows          map[string]int64 `json:"rows"` // by table
	// Blobs tells whether blobs/ holds the objects' bytes (the embedded
	// store); false: they are in Store, which needs a backup of its own.
	Blobs bool   `json:"blobs"`
	Store string `json:"store,omitempty"`
	// Objects counts the objects; Files and Bytes the files in blobs/;
	// Elsewhere the objects whose bytes are not in the store (catalog
	// documents, harvest sources, system metadata only); Linked the files
	// hard-linked rather than copied.
	Objects   int64 `json:"objects"`
	Files     int64 `json:"files"`
	Bytes     int64 `json:"bytes"`
	Elsewhere int64 `json:"elsewhere"`
	Linked    int64 `json:"linked"`
}

const (
	// ManifestFormat names a backup's manifest, ManifestName its file.
	ManifestFormat = "d1bridge-backup"
	ManifestName   = "BACKUP.json"
	catalogName    = "catalog.jsonl.gz"
)

// Options are what Backup, Export and the restores work on.
type Options struct {
	Catalog *sqlcatalog.Catalog
	// Files is the embedded store's root (dataDir/objects); "" when the bytes
	// are in an external store, named Store.
	Files  string
	Store  string
	NodeID string
	// Blobs is the node's store: the embedded one, or the external one
	// that Export reads and the restores write and verify through.
	Blobs node.Blobs
	// Verify hashes every object's bytes against its system metadata.
	Verify bool
	// Log receives progress lines and the summary.
	Log io.Writer
}

// Test hooks: after the first pass over the store's files, and after the
// snapshot is taken.
var testHookCaptured, testHookSnapshot func()

// Backup writes a backup of the node to dir, which must be empty or absent.
func Backup(ctx context.Context, dir string, o Options) (*Manifest, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := emptyDir(dir); err != nil {
		return nil, err
	}
	m := &Manifest{Format: ManifestFormat, Version: 1, NodeID: o.NodeID, Catalog: catalogName, Blobs: o.Files != "", Store: o.Store}
	live, blobs, staged := filepath.Join(o.Files, "objects"), filepath.Join(dir, "blobs"), filepath.Join(dir, stagedName)
	for attempt := 1; ; attempt++ {
		if m.Blobs {
			// What an earlier attempt's snapshot kept is where this one starts.
			if err := os.Rename(blobs, staged); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("backup: %w", err)
			}
			fmt.Fprintf(o.Log, "backup: capturing the store's files (%s)\n", live)
			err := walkFiles(ctx, live, func(rel string) error {
				_, err := capture(filepath.Join(live, rel), filepath.Join(staged, rel))
				if errors.Is(err, fs.ErrNotExist) {
					return nil // deleted meanwhile: not in the snapshot either
				}
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("backup: capturing the store: %w", err)
			}
		}
		if testHookCaptured != nil {
			testHookCaptured()
		}
		missing, err := snapshot(ctx, dir, m, o)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			break
		}
		if attempt == 3 {
			return nil, fmt.Errorf("backup: the bytes of %d objects vanished after three snapshots (the first: %q)", len(missing), missing[0])
		}
		fmt.Fprintf(o.Log, "backup: %d objects were deleted before their bytes were captured; taking a new snapshot\n", len(missing))
	}
	m.Created = time.Now().UTC()
	if err := writeJSON(filepath.Join(dir, ManifestName), m); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "backup: done: %d objects, %d files (%s; %d hard links), %d objects with their bytes elsewhere; catalog rows: %s\n",
		m.Objects, m.Files, humanBytes(m.Bytes), m.Linked, m.Elsewhere, RowCounts(m.Rows))
	return m, nil
}

// snapshot takes the catalog's snapshot, dumps it, captures the bytes it
// names that the first pass did not, checks them and removes the files it
// does not name. It returns the PIDs whose bytes had vanished.
func snapshot(ctx context.Context, dir string, m *Manifest, o Options) (missing []string, err error) {
	snap, err := o.Catalog.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer snap.Close()
	if testHookSnapshot != nil {
		testHookSnapshot()
	}
	fmt.Fprintf(o.Log, "backup: snapshot taken (%s, schema version %d); writing the catalog\n", snap.Driver(), snap.SchemaVersion)
	if err := dumpCatalog(ctx, snap, filepath.Join(dir, catalogName), m, o.Log); err != nil {
		return nil, err
	}
	m.Objects, m.Files, m.Bytes, m.Elsewhere, m.Linked = 0, 0, 0, 0, 0
	if !m.Blobs {
		m.Objects = m.Rows["objects"]
		return nil, nil
	}
	live, blobs, staged := filepath.Join(o.Files, "objects"), filepath.Join(dir, "blobs"), filepath.Join(dir, stagedName)
	p := newProgress(o.Log, "backup: bytes", m.Rows["objects"])
	err = snap.Objects(ctx, func(r sqlcatalog.ObjectRow) error {
		m.Objects++
		if !ownBytes(r.BlobKey) {
			m.Elsewhere++
			return nil
		}
		rel := keyPath(r.BlobKey)
		dst := filepath.Join(blobs, rel)
		if _, err := os.Lstat(dst); err == nil {
			return nil // blobs/ holds what this snapshot named: a key named twice
		}
		linked, err := claim(filepath.Join(staged, rel), filepath.Join(live, rel), dst)
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, r.PID)
			return nil
		}
		if err != nil {
			return err
		}
		if o.Verify {
			if _, err := checkFile(dst, r.Checksum, r.Size, fmt.Sprintf("the bytes of %q", r.PID)); err != nil {
				return err
			}
		}
		m.Files++
		m.Bytes += r.Size
		if linked {
			m.Linked++
		}
		p.add(r.Size)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	p.done()
	// What the first pass captured and the snapshot did not name (objects
	// deleted before it, creates not committed at it) is not of this moment.
	return missing, os.RemoveAll(staged)
}

// stagedName holds, below a backup's directory, what the first pass captures
// before the snapshot names it: each object the snapshot names moves from
// there into blobs/, and what is left is removed, so that no set of the
// names (a map of every object) is held in memory.
const stagedName = ".blobs.pass1"

// claim puts the bytes of an object the snapshot names at dst: the first
// pass's capture, moved, or else the store's file, captured now (a create
// after the first pass). It reports whether dst is a link to the store's file.
func claim(staged, live, dst string) (linked bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return false, err
	}
	switch err := os.Rename(staged, dst); {
	case err == nil:
		fi, err := os.Lstat(dst)
		return err == nil && sameFile(live, fi), err
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	return capture(live, dst)
}

// dumpCatalog writes the snapshot's dump to path, gzip'd, noting its SHA-256.
func dumpCatalog(ctx context.Context, snap *sqlcatalog.Snapshot, path string, m *Manifest, log io.Writer) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	zw := gzip.NewWriter(io.MultiWriter(f, h))
	m.Rows, err = snap.WriteDump(ctx, zw, func(table string, rows int64) {
		fmt.Fprintf(log, "backup: catalog table %s: %d rows\n", table, rows)
	})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	m.SchemaVersion, m.Driver = snap.SchemaVersion, snap.Driver()
	m.CatalogSHA256 = hex.EncodeToString(h.Sum(nil))
	return f.Close()
}

// RowCounts writes rows by table for a person: "access 6, events 56,
// objects 46" (tables without rows left out), or "no rows".
func RowCounts(rows map[string]int64) string {
	var parts []string
	for t, n := range rows {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", t, n))
		}
	}
	if len(parts) == 0 {
		return "no rows"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
