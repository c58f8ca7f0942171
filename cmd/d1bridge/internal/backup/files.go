// Package backup writes and reads back the node's backups and exports:
//
//   - Backup: a consistent snapshot of the catalog (every table, as a
//     sqlcatalog dump) and, with the embedded store, the object bytes,
//     hard-linked where the filesystem allows, copied otherwise, and
//     verified against their checksums.
//   - Export: every object's bytes and v2 system metadata in the hashstore
//     layout DataONE's Metacat uses, readable without this program.
//   - RestoreBackup, RestoreExport: either of them back into an empty node,
//     verified.
//
// The layouts are documented in backup.go and export.go.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// keyPath is where the embedded store (fsblobs) keeps key below its
// objects/ directory, and where a backup keeps it below blobs/:
// <h[0:2]>/<h[2:4]>/<h>, h the hex SHA-256 of the key.
func keyPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(h[0:2], h[2:4], h)
}

// ownBytes reports whether key names bytes in the node's store: not a
// catalog document (doc-…) nor a harvest source's object (@source/…).
func ownBytes(key string) bool {
	return key != "" && !strings.HasPrefix(key, node.DocumentKeyPrefix) && !strings.HasPrefix(key, "@")
}

// capture makes dst a hard link to src, or a copy of it when links are
// refused (another filesystem); it reports whether dst is a link to src. A
// missing src is fs.ErrNotExist. dst's directory is created. An existing dst
// is kept: in a backup it is what the first pass captured of src.
func capture(src, dst string) (linked bool, err error) {
	if existing, err := os.Lstat(dst); err == nil {
		return sameFile(src, existing), nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return false, err
	}
	err = os.Link(src, dst)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return err == nil, err
	}
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	return false, writeFile(dst, in)
}

// restoreFile is capture for a restore: an existing dst that is not src's
// own file is replaced, since the store's file may have been damaged or
// rewritten since the backup. The link or copy is made under a temporary name
// beside dst and renamed over it, so dst is never missing nor partly written.
func restoreFile(src, dst string) (linked bool, err error) {
	if existing, err := os.Lstat(dst); err == nil && sameFile(src, existing) {
		return true, nil
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	tmp, err := linkBeside(src, dir)
	if err == nil {
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return false, err
		}
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	in, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer in.Close()
	return false, writeFile(dst, in)
}

// sameFile reports whether path is the file existing describes: one of its
// hard links.
func sameFile(path string, existing fs.FileInfo) bool {
	fi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, existing)
}

// linkBeside hard-links src to a new temporary name in dir and returns the
// name; it begins with a dot, as writeFile's do, so walkFiles skips it.
func linkBeside(src, dir string) (string, error) {
	for {
		tmp := filepath.Join(dir, ".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		if err := os.Link(src, tmp); !errors.Is(err, fs.ErrExist) {
			return tmp, err
		}
	}
}

// writeFile writes r to path through a temporary file beside it, renamed into
// place. It does not sync: syncAll, before a manifest is written and at the
// end of a restore, makes everything written durable at once.
func writeFile(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// writeJSON writes a manifest, v, to path once everything written before it
// is durable, and makes it durable.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	syncAll()
	if err := writeFile(path, strings.NewReader(string(b)+"\n")); err != nil {
		return err
	}
	syncAll()
	return nil
}

// syncAll writes every file system's dirty data to disk (sync(2)): one call
// for the thousands of files and links a backup or restore writes.
func syncAll() { syscall.Sync() }

// checkSum hashes r with the checksum's algorithm and compares; it returns
// the number of bytes read.
func checkSum(r io.Reader, want adapter.Checksum, what string) (int64, error) {
	alg, ok := adapter.CanonicalAlgorithm(want.Algorithm)
	if !ok {
		return 0, fmt.Errorf("%s: unknown checksum algorithm %q", what, want.Algorithm)
	}
	h := adapter.NewHasher([]string{alg})
	n, err := io.Copy(h, r)
	if err != nil {
		h.Close()
		return n, fmt.Errorf("%s: %w", what, err)
	}
	if got := h.Sums()[alg]; got != strings.ToLower(strings.TrimSpace(want.Value)) {
		return n, fmt.Errorf("%s: the %s checksum is %s, the system metadata says %s", what, alg, got, want.Value)
	}
	return n, nil
}

// checkFile is checkSum of a file, also checking its size.
func checkFile(path string, want adapter.Checksum, size int64, what string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	n, err := checkSum(f, want, what)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, the system metadata says %d", what, n, size)
	}
	return n, err
}

// progress prints a line at most every interval, and once at the end: what
// is being done, the count, bytes, rate and time taken.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	what     string
	start    time.Time
	last     time.Time
	interval time.Duration
	n, total int64
	bytes    int64
}

func newProgress(w io.Writer, what string, total int64) *progress {
	if w == nil {
		w = io.Discard
	}
	now := time.Now()
	return &progress{w: w, what: what, total: total, start: now, last: now, interval: 2 * time.Second}
}

// add counts one object of size bytes.
func (p *progress) add(size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.bytes += size
	if time.Since(p.last) >= p.interval {
		p.printLocked()
	}
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printLocked()
}

func (p *progress) printLocked() {
	p.last = time.Now()
	el := time.Since(p.start)
	rate := 0.0
	if el > 0 {
		rate = float64(p.bytes) / el.Seconds() / 1e6
	}
	of := ""
	if p.total > 0 {
		of = fmt.Sprintf("/%d", p.total)
	}
	fmt.Fprintf(p.w, "%s: %d%s objects, %s, %.1f MB/s, %s\n", p.what, p.n, of, humanBytes(p.bytes), rate, el.Round(time.Millisecond))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// walkFiles calls fn with the path relative to root of every regular file
// under root (none when root does not exist), skipping names that begin with
// a dot (temporary files).
func walkFiles(ctx context.Context, root string, fn func(rel string) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking, or no root
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return fn(rel)
	})
}

// emptyDir creates dir, or accepts it when it is empty.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(es) > 0 {
		return fmt.Errorf("%s is not empty: give a new directory", dir)
	}
	return nil
}
