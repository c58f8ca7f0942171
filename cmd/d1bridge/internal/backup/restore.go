package backup

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// Kind tells what a directory holds: "backup", "export", or "" (neither).
func Kind(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
		return "backup"
	}
	if _, err := os.Stat(filepath.Join(dir, hashstoreConfig)); err == nil {
		return "export"
	}
	return ""
}

// RestoreOptions are Options plus what a restore may overwrite.
type RestoreOptions struct {
	Options
	// Force restores into a catalog that holds rows: a backup replaces them
	// (and the store's files it holds), an export adds to them (objects
	// already there with the same checksum are skipped).
	Force bool
}

// Summary is what a restore did.
type Summary struct {
	Kind     string
	Rows     map[string]int64 // a backup: rows loaded, by table
	Objects  int64            // objects restored (an export) or verified (a backup)
	Bytes    int64
	Skipped  int64 // an export: already there with the same checksum
	Linked   int64 // files hard-linked rather than copied
	Failures []string
}

// RestoreBackup brings the backup in dir back into an empty catalog (and,
// when the backup holds them, the bytes into the embedded store), then
// verifies every object's bytes against its size and checksum.
func RestoreBackup(ctx context.Context, dir string, o RestoreOptions) (*Summary, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("restore: %w (an incomplete backup has no manifest)", err)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Format != ManifestFormat || m.Version != 1 {
		return nil, fmt.Errorf("restore: %s is not a d1bridge backup manifest of version 1 (%v)", ManifestName, err)
	}
	if m.Blobs && o.Files == "" {
		return nil, fmt.Errorf("restore: the backup holds the embedded store's bytes, but this node keeps its bytes in the store %q: "+
			"restore into a node without store:", o.Store)
	}
	if m.NodeID != o.NodeID {
		fmt.Fprintf(o.Log, "restore: warning: the backup is of node %q, this node is %q: the restored records name %q as their authoritative node\n", m.NodeID, o.NodeID, m.NodeID)
	}
	if !m.Blobs {
		fmt.Fprintf(o.Log, "restore: the backup holds the catalog only; the bytes must be in the store %q already (they are verified there)\n", m.Store)
	}
	catalog := filepath.Join(dir, m.Catalog)
	if err := checkSHA256(catalog, m.CatalogSHA256); err != nil {
		return nil, err
	}
	empty, err := o.Catalog.Empty(ctx)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if !empty && !o.Force {
		return nil, errors.New("restore: the catalog is not empty; restore into a new one, or give --force to replace what it holds")
	}
	s := &Summary{Kind: "backup"}
	if m.Blobs {
		if err := restoreBlobs(ctx, dir, o.Options, &m, s); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(catalog)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("restore: %s: %w", catalog, err)
	}
	fmt.Fprintf(o.Log, "restore: loading the catalog (%s, schema version %d, from %s)\n", m.Catalog, m.SchemaVersion, m.Driver)
	s.Rows, err = o.Catalog.Load(ctx, zr, sqlcatalog.LoadOptions{Replace: o.Force, Progress: func(table string, rows int64) {
		fmt.Fprintf(o.Log, "restore: catalog table %s: %d rows\n", table, rows)
	}})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	for t, n := range m.Rows {
		if s.Rows[t] != n {
			return nil, fmt.Errorf("restore: table %s: %d rows loaded, the manifest says %d", t, s.Rows[t], n)
		}
	}
	if err := Verify(ctx, o.Options, s); err != nil {
		return s, err
	}
	syncAll()
	fmt.Fprintf(o.Log, "restore: done: %d objects verified (%s), %d files hard-linked; catalog rows: %s\n", s.Objects, humanBytes(s.Bytes), s.Linked, RowCounts(s.Rows))
	return s, nil
}

// restoreBlobs puts every file of the backup's blobs/ into the embedded
// store, in place of the store's file of the same name unless that is the
// backup's own (a hard link).
func restoreBlobs(ctx context.Context, dir string, o Options, m *Manifest, s *Summary) error {
	blobs, live := filepath.Join(dir, "blobs"), filepath.Join(o.Files, "objects")
	p := newProgress(o.Log, "restore: bytes", m.Files)
	err := walkFiles(ctx, blobs, func(rel string) error {
		linked, err := restoreFile(filepath.Join(blobs, rel), filepath.Join(live, rel))
		if err != nil {
			return err
		}
		if linked {
			s.Linked++
		}
		p.add(0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore: the bytes: %w", err)
	}
	p.done()
	return nil
}

// Verify reads the bytes of every object of the catalog held by the node's
// store (the embedded one, or o.Blobs) and checks them against its size and
// checksum; failures are counted and the first named.
func Verify(ctx context.Context, o Options, s *Summary) error {
	if o.Files == "" && o.Blobs == nil {
		return nil
	}
	snap, err := o.Catalog.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer snap.Close()
	p := newProgress(o.Log, "verify", 0)
	var failed int
	err = snap.Objects(ctx, func(r sqlcatalog.ObjectRow) error {
		if !ownBytes(r.BlobKey) {
			return nil
		}
		n, err := verifyObject(ctx, o, r)
		if err != nil {
			failed++
			if len(s.Failures) < 20 {
				s.Failures = append(s.Failures, err.Error())
			}
			return nil
		}
		s.Objects++
		s.Bytes += n
		p.add(n)
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	p.done()
	if failed > 0 {
		return fmt.Errorf("verify: %d objects failed; the first: %v", failed, s.Failures)
	}
	return nil
}

// verifyObject checks one object's bytes in the node's store.
func verifyObject(ctx context.Context, o Options, r sqlcatalog.ObjectRow) (int64, error) {
	what := fmt.Sprintf("the bytes of %q", r.PID)
	if o.Files != "" {
		return checkFile(filepath.Join(o.Files, "objects", keyPath(r.BlobKey)), r.Checksum, r.Size, what)
	}
	rc, err := o.Blobs.Get(ctx, r.BlobKey)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer rc.Close()
	n, err := checkSum(rc, r.Checksum, what)
	if err == nil && n != r.Size {
		err = fmt.Errorf("%s: %d bytes, the system metadata says %d", what, n, r.Size)
	}
	return n, err
}

// checkSHA256 compares a file's SHA-256 with want.
func checkSHA256(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("restore: %s has SHA-256 %s, the manifest says %s: the backup is damaged", path, got, want)
	}
	return nil
}
