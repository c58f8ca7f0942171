// Package fsblobs keeps object bytes as files under one directory: the default
// node.Blobs of the member node.
//
// A key is never used as a path. It is hashed with SHA-256, and the object lives
// at <dir>/objects/<h[0:2]>/<h[2:4]>/<h>, where h is the hex digest: any key
// string is safe (no traversal, no length or character limits), and the files
// spread over 65,536 directories.
//
// Put writes into a temporary directory of its own store instance under
// <dir>/tmp (same filesystem), fsyncs the file, renames it into place and
// fsyncs the directory, so a reader sees either no object or the whole object,
// and an acknowledged Put survives a crash. The bytes go to the disk while they
// arrive, not all at the fsync: past its first buffer, a large object is
// written with direct I/O (direct.go), around the page cache; on a filesystem
// that refuses it, every writebackWindow written Put asks the kernel to start
// writing that window out (sync_file_range) and waits for the windows older
// than writebackAhead of them. Either way a large object is written at the
// disk's speed in one pass, its fsync finds little left to write, and an
// upload holds a bounded amount of memory whatever its size. Each
// instance holds a flock on its temporary directory's lock file, which the
// kernel releases when the process ends however it ends; New removes the
// temporary directories no live process holds, so a crash leaves nothing behind
// and instances sharing a directory never remove each other's uploads.
// WithMemory keeps the bytes of small objects read often in memory (memory.go).
package fsblobs

import (
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
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/durable"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// bufSize is the copy buffer of Put.
const bufSize = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

// Store is a node.Blobs on a local filesystem. It is safe for concurrent use.
type Store struct {
	objects string      // <dir>/objects
	dirFD   int         // objects, open: Get opens files relative to it (open)
	noATime atomic.Bool // Get opens with O_NOATIME, until refused (open)
	tmp     string      // <dir>/tmp/<instance>, this instance's
	lock    *os.File    // holds the flock on tmp/.lock while the store lives
	mem     *memory     // small objects' bytes (WithMemory); nil: none

	// synced has a bit per fan-out leaf directory ("ab/cd": 65,536, 8 KiB)
	// that this instance knows is on disk, with its parents' entries.
	synced [1 << 16 / 64]atomic.Uint64
	// syncDir makes a directory's entries durable (a test watches it).
	syncDir func(dir string) error
}

var _ node.Blobs = (*Store)(nil)

// New opens (creating it if needed) a store rooted at dir and removes the
// temporary files of Puts that a crash interrupted.
func New(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, errors.New("fsblobs: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fsblobs: %w", err)
	}
	tmpRoot := filepath.Join(abs, "tmp")
	s := &Store{objects: filepath.Join(abs, "objects")}
	for _, o := range opts {
		o(s)
	}
	for _, d := range []string{abs, s.objects, tmpRoot} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("fsblobs: %w", err)
		}
	}
	// One store at a time sweeps and makes its directory, which it locks
	// before the next one sweeps: otherwise one removed the other's
	// directory between its making and its locking.
	startup, err := lockDir(tmpRoot, true)
	if err != nil {
		return nil, err
	}
	defer startup.Close()
	if err := removeStale(tmpRoot); err != nil {
		return nil, err
	}
	if s.tmp, err = os.MkdirTemp(tmpRoot, "i-"); err != nil {
		return nil, fmt.Errorf("fsblobs: %w", err)
	}
	if s.lock, err = lockDir(s.tmp, true); err != nil {
		return nil, err
	}
	if err := syncDir(abs); err != nil {
		return nil, err
	}
	s.syncDir = syncDir
	if s.dirFD, err = syscall.Open(s.objects, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("fsblobs: opening %s: %w", s.objects, err)
	}
	s.noATime.Store(noATime != 0)
	return s, nil
}

// lockDir takes the flock of dir's lock file; wait false fails at once when a
// live process holds it (errLocked).
func lockDir(dir string, wait bool) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("fsblobs: %w", err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("fsblobs: locking %s: %w", dir, err)
	}
	return f, nil
}

var errLocked = errors.New("locked by a live process")

// removeStale removes the temporary directories (and loose files) that no live
// store holds: what crashed Puts left.
func removeStale(tmpRoot string) error {
	entries, err := os.ReadDir(tmpRoot)
	if err != nil {
		return fmt.Errorf("fsblobs: reading %s: %w", tmpRoot, err)
	}
	for _, e := range entries {
		if e.Name() == ".lock" {
			continue // the startup lock (New)
		}
		p := filepath.Join(tmpRoot, e.Name())
		if e.IsDir() {
			lock, err := lockDir(p, false)
			if errors.Is(err, errLocked) {
				continue // a running instance's uploads
			}
			if err != nil {
				return err
			}
			lock.Close()
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("fsblobs: removing a stale temporary file: %w", err)
		}
	}
	return nil
}

// Close releases the instance's temporary directory.
func (s *Store) Close() error {
	s.mem.close()
	os.RemoveAll(s.tmp)
	syscall.Close(s.dirFD)
	return s.lock.Close()
}

// name is the file that holds key relative to the objects directory:
// "ab/cd/abcd…", the hex SHA-256 of key under two levels of its first bytes.
func name(key string) string {
	sum := sha256.Sum256([]byte(key))
	var b [6 + 2*sha256.Size]byte
	hex.Encode(b[6:], sum[:])
	copy(b[0:2], b[6:8])
	copy(b[3:5], b[8:10])
	b[2], b[5] = '/', '/'
	return string(b[:])
}

// path returns the directory and file that hold key.
func (s *Store) path(key string) (dir, file string) {
	file = filepath.Join(s.objects, name(key))
	return filepath.Dir(file), file
}

// Put stores r under key, durably; on any error (including ctx ending between
// chunks) the temporary file is removed and key is left as it was.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (n int64, err error) {
	if key == "" {
		return 0, errors.New("fsblobs: empty key")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	defer func() {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			err = adapter.Wrap(adapter.InsufficientResources, err, "the node's store has no space left for the object")
		}
	}()
	// The fan-out directories are made (and their parents synced) while the
	// bytes arrive, not after.
	dir, file := s.path(key)
	dirs := make(chan error, 1)
	go func() { dirs <- s.mkdirs(dir) }()
	dirsDone := false
	defer func() {
		if !dirsDone {
			<-dirs // Put never returns with the store still changing
		}
	}()
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return 0, fmt.Errorf("fsblobs: %w", err)
	}
	tmp := f.Name()
	placed := false
	defer func() {
		if !placed { // an error, or a panic of the body's reader
			f.Close()
			os.Remove(tmp)
		}
	}()
	if n, err = copyInto(ctx, f, r); err != nil {
		return 0, err
	}
	if err = f.Sync(); err != nil {
		return 0, fmt.Errorf("fsblobs: %w", err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("fsblobs: %w", err)
	}
	dirsDone = true
	if err = <-dirs; err != nil {
		return 0, err
	}
	if err = os.Rename(tmp, file); err != nil {
		return 0, fmt.Errorf("fsblobs: %w", err)
	}
	placed = true
	s.mem.forget(key) // after the rename: what is read from now on is the new file
	// The object is in place but not yet durable: if the directory cannot be
	// synced, take it back out so that the error leaves nothing under key.
	if err = s.syncDir(dir); err != nil {
		os.Remove(file)
		return 0, err
	}
	return n, nil
}

// copyInto copies r into f, a new file, checking ctx between chunks: an
// object that fits in one buffer in one write, a larger one's bytes past the
// first buffer with direct I/O (direct.go) where the filesystem takes it, else
// through the page cache with write-behind.
func copyInto(ctx context.Context, f *os.File, r io.Reader) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	w := newWriteBehind(f)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		// Once, after the first buffer (n only grows): direct I/O from here.
		if n == int64(len(buf)) {
			if setDirect(w.fd, true) == nil {
				k, err := copyDirect(ctx, f, r, n)
				return n + k, err
			}
		}
		// Fill the buffer: multipart parts arrive in 4 KiB reads, and a write
		// per read would be 262,144 writes per GiB.
		m, rerr := node.ReadChunk(r, buf)
		if m > 0 {
			k, werr := w.Write(buf[:m])
			n += int64(k)
			if werr != nil {
				return n, fmt.Errorf("fsblobs: %w", werr)
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

const (
	// writebackWindow is the unit of the writes Put starts while it copies.
	writebackWindow = 8 << 20
	// writebackAhead is how many windows may be under writeback (or dirty)
	// before Put waits for the oldest: the disk always has work queued, and
	// one upload never holds more than about 40 MiB of dirty pages.
	writebackAhead = 4
)

// writeBehind writes to a file and starts the writeback of each full window.
type writeBehind struct {
	f       *os.File
	fd      uintptr
	n       int64 // bytes written
	started int64 // writeback started for [0, started)
	waited  int64 // written out for [0, waited)
}

func newWriteBehind(f *os.File) *writeBehind { return &writeBehind{f: f, fd: f.Fd()} }

func (w *writeBehind) Write(p []byte) (int, error) {
	k, err := w.f.Write(p)
	w.n += int64(k)
	if w.n-w.started >= writebackWindow {
		startWriteback(w.fd, w.started, w.n-w.started)
		w.started = w.n
		if behind := w.started - writebackAhead*writebackWindow; behind > w.waited {
			awaitWriteback(w.fd, w.waited, behind-w.waited)
			w.waited = behind
		}
	}
	return k, err
}

// mkdirs makes the two fan-out levels of dir, and their entries in their
// parents durable, once per instance: a directory that exists may be another
// Put's, made but not yet synced, and an object renamed into it must not be
// acknowledged before it is.
func (s *Store) mkdirs(dir string) error {
	mid := filepath.Dir(dir)
	leaf, err := strconv.ParseUint(filepath.Base(mid)+filepath.Base(dir), 16, 16)
	if err != nil {
		return fmt.Errorf("fsblobs: %s is not a fan-out directory", dir)
	}
	word, bit := &s.synced[leaf/64], uint64(1)<<(leaf%64)
	if word.Load()&bit != 0 {
		return nil
	}
	for _, d := range []string{mid, dir} {
		if err := os.Mkdir(d, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("fsblobs: %w", err)
		}
		if err := s.syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	word.Or(bit)
	return nil
}

// Get opens the bytes under key, or reads them from memory; what it returns
// also seeks (an *os.File, or bytes). A small object's bytes are read whole
// at once (open), and kept when memory wants them.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	buf := smallBufs.Get().(*[]byte)
	var keep bool
	var mark uint64
	if s.mem != nil {
		var hit bool
		if hit, keep, mark = s.mem.lookup(key, buf); hit {
			return newInMemory(buf), nil
		}
	}
	f, small, err := s.open(name(key), (*buf)[:0])
	if f != nil || err != nil {
		smallBufs.Put(buf)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, adapter.Errorf(adapter.NotFound, "no bytes are stored under key %q", key)
	}
	if err != nil {
		return nil, fmt.Errorf("fsblobs: %w", err)
	}
	if f != nil {
		return f, nil
	}
	if keep {
		s.mem.put(key, small, mark)
	}
	*buf = small
	return newInMemory(buf), nil
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mem.forget(key)
	dir, file := s.path(key)
	err := os.Remove(file)
	s.mem.forget(key) // a get that read the file before it went may have kept it since
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fsblobs: %w", err)
	}
	return s.syncDir(dir)
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	if err := durable.SyncDir(dir); err != nil {
		return fmt.Errorf("fsblobs: %w", err)
	}
	return nil
}
