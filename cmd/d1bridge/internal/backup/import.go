package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// RestoreExport re-creates every object of the hashstore in dir (Export's
// layout): its bytes, checked against the system metadata's size and
// checksum and against their content id, go into the node's store (o.Blobs)
// under a new key, and its system metadata into the catalog as it was
// exported (identifier, series, chain, dates, serial version, access policy,
// replicas). The catalog must be empty unless o.Force; then objects already
// there with the same checksum are skipped. A failed object is named in the
// summary and the restore goes on; the restore fails if any did.
func RestoreExport(ctx context.Context, dir string, o RestoreOptions) (*Summary, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	cfg, err := os.ReadFile(filepath.Join(dir, hashstoreConfig))
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	for _, want := range []string{"store_depth: 3", "store_width: 2", `store_algorithm: "SHA-256"`, SysmetaNamespace} {
		if !bytes.Contains(cfg, []byte(want)) {
			return nil, fmt.Errorf("restore: %s: this program reads hashstores with %s", hashstoreConfig, want)
		}
	}
	manifest, err := exportManifestOf(dir)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	vanished := map[string]bool{}
	if manifest != nil {
		for _, pid := range manifest.Vanished {
			vanished[pid] = true
		}
	}
	empty, err := o.Catalog.Empty(ctx)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if !empty && !o.Force {
		return nil, errors.New("restore: the catalog is not empty; restore into a new one, or give --force to add to what it holds")
	}
	s := &Summary{Kind: "export"}
	p := newProgress(o.Log, "restore", 0)
	var failed int
	fail := func(err error) {
		failed++
		if len(s.Failures) < 20 {
			s.Failures = append(s.Failures, err.Error())
		}
		fmt.Fprintf(o.Log, "restore: %v\n", err)
	}
	// Records are written in batches of one transaction each; a batch that
	// fails is written again one record at a time, to find the one at fault.
	var batch []*node.Record
	var sizes []int64
	insert := func(rec *node.Record, size int64) {
		skipped, err := commit(ctx, o, rec)
		switch {
		case err != nil:
			fail(err)
		case skipped:
			s.Skipped++
		default:
			s.Objects++
			s.Bytes += size
			p.add(size)
		}
	}
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := o.Catalog.Apply(ctx, &node.Batch{Records: batch}); err == nil {
			for i := range batch {
				s.Objects++
				s.Bytes += sizes[i]
				p.add(sizes[i])
			}
		} else {
			for i, rec := range batch {
				insert(rec, sizes[i])
			}
		}
		batch, sizes = batch[:0], sizes[:0]
	}
	meta := filepath.Join(dir, "metadata")
	var listed, withBytes int64 // what the export holds, to check against its manifest
	err = walkMetadata(ctx, dir, func(rel string) error {
		listed++
		b, err := os.ReadFile(filepath.Join(meta, rel))
		if err != nil {
			return err
		}
		sm := new(adapter.SystemMetadata)
		if err := adapter.Decode(bytes.NewReader(b), sm); err != nil {
			fail(fmt.Errorf("metadata/%s: %w", rel, err))
			return nil
		}
		if filepath.Join("metadata", rel) != metadataPath(sm.Identifier) {
			fail(fmt.Errorf("metadata/%s holds the system metadata of %q, whose place is %s", rel, sm.Identifier, metadataPath(sm.Identifier)))
			return nil
		}
		if vanished[sm.Identifier] {
			return nil // deleted while the export ran
		}
		rec, size, err := prepare(ctx, dir, o, sm)
		if err != nil {
			fail(err)
			return nil
		}
		if rec.BlobKey != "" {
			withBytes++
		}
		batch, sizes = append(batch, rec), append(sizes, size)
		if len(batch) == restoreBatch {
			flush()
		}
		return nil
	})
	flush()
	if err != nil {
		return s, fmt.Errorf("restore: %w", err)
	}
	// A copy of the export cut short (its pid list, or refs/ left out) would
	// otherwise restore less than it holds, or objects without their bytes.
	if m := manifest; m != nil && failed == 0 {
		if want := m.Objects - m.MetadataOnly - m.Elsewhere - int64(len(m.Vanished)); listed != m.Objects || withBytes != want {
			return s, fmt.Errorf("restore: the export is not whole: its manifest counts %d objects, %d of them with bytes here; "+
				"it lists %d, and %d have their bytes: copy it whole, or export again", m.Objects, want, listed, withBytes)
		}
	}
	p.done()
	syncAll()
	if err := Verify(ctx, o.Options, &Summary{}); err != nil {
		return s, err
	}
	fmt.Fprintf(o.Log, "restore: done: %d objects restored (%s), %d already there, %d failed\n", s.Objects, humanBytes(s.Bytes), s.Skipped, failed)
	if failed > 0 {
		return s, fmt.Errorf("restore: %d objects failed; the first: %v", failed, s.Failures)
	}
	return s, nil
}

// exportManifestOf reads the manifest of d1bridge's export in dir (nil for a
// hashstore another program wrote, which has neither its pid list nor its
// manifest); one of d1bridge's with the list and no manifest is an export
// that did not finish, which restores nothing.
func exportManifestOf(dir string) (*ExportManifest, error) {
	var m ExportManifest
	b, err := os.ReadFile(filepath.Join(dir, exportManifest))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(filepath.Join(dir, pidList)); err == nil {
			return nil, fmt.Errorf("%s has %s but no %s: an export that did not finish; export again", dir, pidList, exportManifest)
		}
		return nil, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Format != "d1bridge-export" {
		return nil, fmt.Errorf("%s: not a d1bridge export manifest (%v)", exportManifest, err)
	}
	return &m, nil
}

// walkMetadata calls fn with the path below metadata/ of every system
// metadata document: in the order of d1bridge-pids.txt when the export has
// it (the catalog's order, which breaks ties between equal dates in
// listObjects), else as the directory tree lists them.
func walkMetadata(ctx context.Context, dir string, fn func(rel string) error) error {
	f, err := os.Open(filepath.Join(dir, pidList))
	if errors.Is(err, os.ErrNotExist) {
		return walkFiles(ctx, filepath.Join(dir, "metadata"), fn)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// Read a line at a time: the list has a line per object of the catalog.
	r := bufio.NewReader(f)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if pid := strings.TrimSuffix(line, "\n"); pid != "" {
			rel, _ := filepath.Rel("metadata", metadataPath(pid))
			if err := fn(rel); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// restoreBatch is how many records one transaction of RestoreExport writes.
const restoreBatch = 200

// prepare stores one exported object's bytes, when refs/pids names them,
// under a new key, and returns its record.
func prepare(ctx context.Context, dir string, o RestoreOptions, sm *adapter.SystemMetadata) (*node.Record, int64, error) {
	pid := sm.Identifier
	// A replica's record is stored as given: the chain is the export's, and
	// the objects of a chain may come in any order.
	rec := &node.Record{Meta: sm, Replica: true}
	ref, err := os.ReadFile(filepath.Join(dir, pidRefPath(pid)))
	switch {
	case errors.Is(err, os.ErrNotExist): // system metadata only
		return rec, 0, nil
	case err != nil:
		return nil, 0, err
	}
	cid := strings.TrimSpace(string(ref))
	if _, err := hex.DecodeString(cid); err != nil || len(cid) != 64 || strings.ToLower(cid) != cid {
		return nil, 0, fmt.Errorf("%s: not a SHA-256 content id: %q", pidRefPath(pid), cid)
	}
	rec.BlobKey = node.NewStoreKey()
	size, err := putBytes(ctx, filepath.Join(dir, "objects", shard(cid)), cid, o, rec)
	if err != nil {
		return nil, 0, err
	}
	return rec, size, nil
}

// commit inserts one record; with o.Force, an object already there with the
// same checksum is skipped. The bytes of a record not inserted are removed.
func commit(ctx context.Context, o RestoreOptions, rec *node.Record) (skipped bool, err error) {
	err = o.Catalog.Insert(ctx, rec)
	if err == nil {
		return false, nil
	}
	if rec.BlobKey != "" {
		o.Blobs.Delete(context.WithoutCancel(ctx), rec.BlobKey)
	}
	pid := rec.Meta.Identifier
	if o.Force && adapter.IsKind(err, adapter.IdentifierNotUnique) {
		if old, lerr := o.Catalog.Lookup(ctx, pid); lerr == nil && old.Meta.Identifier == pid &&
			strings.EqualFold(old.Meta.Checksum.Value, rec.Meta.Checksum.Value) {
			return true, nil
		}
	}
	return false, fmt.Errorf("%q: %w", pid, err)
}

// putBytes puts the file at path into the node's store under rec.BlobKey,
// checked against rec's size and checksum and against cid: into the embedded
// store as a hard link (or copy) once checked, into any other through
// blobs.Put, checked as it streams (a wrong one fails the Put).
func putBytes(ctx context.Context, path, cid string, o RestoreOptions, rec *node.Record) (int64, error) {
	sm := rec.Meta
	what := fmt.Sprintf("the bytes of %q (objects/%s)", sm.Identifier, shard(cid))
	check := func(r io.Reader) (int64, error) {
		h := sha256.New()
		n, err := checkSum(io.TeeReader(r, h), sm.Checksum, what)
		if err != nil {
			return n, err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != cid {
			return n, fmt.Errorf("%s: SHA-256 %s, its content id is %s", what, got, cid)
		}
		if n != int64(sm.Size) {
			return n, fmt.Errorf("%s: %d bytes, the system metadata says %d", what, n, sm.Size)
		}
		return n, nil
	}
	// A link would be linked into the store as a link, to bytes outside it.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file (%s)", what, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	if o.Files != "" {
		n, err := check(f)
		if err != nil {
			return n, err
		}
		_, err = capture(path, filepath.Join(o.Files, "objects", keyPath(rec.BlobKey)))
		return n, err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var n int64
	go func() {
		var err error
		n, err = check(io.TeeReader(f, pw))
		pw.CloseWithError(err) // nil: EOF for Put; else Put fails before it stores
		done <- err
	}()
	_, perr := o.Blobs.Put(ctx, rec.BlobKey, pr)
	pr.CloseWithError(errors.New("the store stopped reading"))
	if err := <-done; err != nil {
		return n, err
	}
	if perr != nil {
		return 0, fmt.Errorf("%s: storing: %w", what, perr)
	}
	return n, nil
}
