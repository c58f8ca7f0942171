package fsblobs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// open opens the object file name (relative to the objects directory); one
// of at most MemoryObjectMax bytes comes back read whole into buf (small),
// with the file closed, in four system calls (open, fstat, read, close).
// os.Open offers a regular file to the poller, which refuses it (three more
// calls), and serving it then seeks and reads again. Opening relative to
// the directory's descriptor spares the kernel the walk of its path (an
// eighth of the calls' time over 200,000 objects), and O_NOATIME the
// inode's write at the first read of each object after it changed (and
// daily after that, under relatime): a journal write for every object a
// harvester reads. Only the files' owner may ask for it: refused, the store
// stops asking.
func (s *Store) open(name string, buf []byte) (f *os.File, small []byte, err error) {
	var fd int
	for {
		flags := syscall.O_RDONLY | syscall.O_CLOEXEC
		if s.noATime.Load() {
			flags |= noATime
		}
		fd, err = unix.Openat(s.dirFD, name, flags, 0)
		if err == syscall.EPERM && flags&noATime != 0 {
			s.noATime.Store(false)
			continue
		}
		if err != syscall.EINTR {
			break
		}
	}
	file := func() string { return filepath.Join(s.objects, name) } // for messages
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: file(), Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Size > MemoryObjectMax {
		// Not pollable (blocking): NewFile keeps it out of the poller.
		return os.NewFile(uintptr(fd), file()), nil, nil
	}
	defer syscall.Close(fd)
	small = slices.Grow(buf[:0], int(st.Size))[:st.Size]
	for n := 0; n < len(small); {
		k, err := syscall.Read(fd, small[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, nil, &fs.PathError{Op: "read", Path: file(), Err: err}
		case k == 0:
			return nil, nil, fmt.Errorf("%s: %d bytes where fstat said %d", file(), n, len(small))
		}
		n += k
	}
	return nil, small, nil
}
