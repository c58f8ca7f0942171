// Package files is a read-only harvest source over a local directory tree: a
// collection that sits on a disk (or a mounted share) becomes listable and
// readable by the node without being copied.
//
// List walks the tree in lexical order (filepath.WalkDir's: each directory's
// entries sorted by name), lists regular files only, does not follow
// symbolic links (a link is not listed), and skips every name starting with a
// dot, files and directories alike. Each file is a Found whose Key is "/"
// followed by its slash-separated path relative to the root (FileName is that
// path), with its size and modification time; no checksum (the harvest
// computes it by reading the file once). Pages hold at most 1,000 files; the
// cursor is the path of the last file listed, and the next page walks again
// from the top, skipping without reading every directory before the cursor.
//
// Get opens a file by its key, through an os.Root: no key reaches outside
// the root, not with ".." segments nor through a symbolic link. The *os.File
// it returns seeks, so ranges are served. Put and Delete are refused: the
// node never writes a source.
package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// PageSize is how many files one List call lists at most.
const PageSize = 1000

// Tree is a directory tree, read-only. It is safe for concurrent use.
type Tree struct {
	dir      string
	root     *os.Root
	pageSize int
}

var (
	_ node.Lister = (*Tree)(nil)
	_ node.Reader = (*Tree)(nil)
	_ node.Blobs  = (*Tree)(nil)
)

// New opens the tree at root, which must be a directory. Close releases it.
func New(root string) (*Tree, error) {
	if root == "" {
		return nil, errors.New("files: the root is required")
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("files: root %s is not a directory", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	return &Tree{dir: root, root: r, pageSize: PageSize}, nil
}

// Close releases the root directory.
func (t *Tree) Close() error { return t.root.Close() }

// Ping checks that the root can be read, for readiness.
func (t *Tree) Ping(ctx context.Context) error {
	f, err := t.root.Open(".")
	if err == nil {
		_, err = f.ReadDir(1)
		f.Close()
	}
	if err != nil && err != io.EOF {
		// The status endpoints are public: the directory is in the cause, which
		// is logged, not in the description.
		return adapter.Wrap(adapter.ServiceFailure, err, "the files source's directory cannot be read")
	}
	return nil
}

// errPageFull stops a walk whose page is full.
var errPageFull = errors.New("the page is full")

// List returns one page of the tree's files; since is ignored (each file's
// date is in its Found, and the harvest compares).
func (t *Tree) List(ctx context.Context, _ time.Time, cursor string) ([]node.Found, string, error) {
	var cur []string
	if cursor != "" {
		cur = strings.Split(cursor, "/")
	}
	var page []node.Found
	last := ""
	err := fs.WalkDir(t.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if p == "." {
			return err // an unreadable root fails the page
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		segs := strings.Split(p, "/")
		if strings.HasPrefix(d.Name(), ".") || done(segs, d.IsDir(), cur) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err != nil {
			// A directory that cannot be read (permissions, removed since):
			// listed as a problem, then skipped.
			page = append(page, node.Found{Size: -1, FileName: p, Problem: fmt.Errorf("files: %w", err)})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // directories are walked; links, devices and sockets are not listed
		}
		if len(page) >= t.pageSize {
			return errPageFull
		}
		f := node.Found{Key: "/" + p, FileName: p, Size: -1}
		if fi, err := d.Info(); err == nil {
			f.Size, f.Modified = fi.Size(), fi.ModTime()
		} else if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since its directory was read
		} else {
			f.Problem = fmt.Errorf("files: %w", err)
		}
		page = append(page, f)
		last = p
		return nil
	})
	switch {
	case errors.Is(err, errPageFull):
		return page, last, nil
	case err != nil:
		return nil, "", adapter.Wrap(adapter.ServiceFailure, err, "listing the files source's directory")
	}
	return page, "", nil
}

// done says whether the path segs is at or before the cursor cur: a file
// listed by an earlier page, or a directory all of whose files were. A
// directory holding the cursor is not done.
func done(segs []string, dir bool, cur []string) bool {
	if cur == nil {
		return false
	}
	if dir && len(cur) > len(segs) && slices.Equal(cur[:len(segs)], segs) {
		return false
	}
	return slices.Compare(segs, cur) <= 0
}

// Stat describes the file under key again.
func (t *Tree) Stat(ctx context.Context, key string) (*node.Found, error) {
	p, err := t.path(key)
	if err != nil {
		return nil, err
	}
	fi, err := t.root.Lstat(p)
	if err != nil {
		return nil, t.fail(err, key)
	}
	if !fi.Mode().IsRegular() {
		return nil, adapter.Errorf(adapter.NotFound, "the files source holds no file %q", key)
	}
	return &node.Found{Key: key, FileName: p, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// Get opens the file under key: an *os.File, which seeks.
func (t *Tree) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := t.path(key)
	if err != nil {
		return nil, err
	}
	// A symbolic link is not a file of the source, as List has it; os.Root
	// keeps one swapped in after this check inside the root.
	if fi, err := t.root.Lstat(p); err != nil {
		return nil, t.fail(err, key)
	} else if !fi.Mode().IsRegular() {
		return nil, adapter.Errorf(adapter.NotFound, "the files source holds no file %q", key)
	}
	f, err := t.root.Open(p)
	if err != nil {
		return nil, t.fail(err, key)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, t.fail(err, key)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, adapter.Errorf(adapter.NotFound, "the files source holds no file %q", key)
	}
	return f, nil
}

// Put is refused: the source is read-only.
func (t *Tree) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	return 0, adapter.Errorf(adapter.InvalidRequest, "the files source is read-only")
}

// Delete is refused: the source is read-only.
func (t *Tree) Delete(ctx context.Context, key string) error {
	return adapter.Errorf(adapter.InvalidRequest, "the files source is read-only")
}

// path is the slash-separated path under the root of key: "/" and a path of
// segments that are not empty, ".", ".." or hidden (dot) names.
func (t *Tree) path(key string) (string, error) {
	p, ok := strings.CutPrefix(key, "/")
	if !ok || !fs.ValidPath(p) || p == "." {
		return "", adapter.Errorf(adapter.InvalidRequest, "key %q names no file of the files source", key)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if strings.HasPrefix(seg, ".") {
			return "", adapter.Errorf(adapter.NotFound, "the files source holds no file %q", key)
		}
	}
	return p, nil
}

// fail translates an error of the file system about key.
func (t *Tree) fail(err error, key string) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return adapter.Wrap(adapter.NotFound, err, "the files source holds no file %q", key)
	case strings.Contains(err.Error(), "path escapes from parent"):
		// os.Root refuses a symbolic link that leads outside the root.
		return adapter.Wrap(adapter.NotFound, err, "the files source holds no file %q", key)
	case errors.Is(err, fs.ErrPermission):
		return adapter.Wrap(adapter.ServiceFailure, err, "the node may not read %q in the files source", key)
	}
	return adapter.Wrap(adapter.ServiceFailure, err, "reading %q from the files source", key)
}
