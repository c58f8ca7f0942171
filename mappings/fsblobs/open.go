package fsblobs

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// open opens file; one of at most MemoryObjectMax bytes comes back read
// whole into buf (small), with the file closed, in four system calls (open, fstat,
// read, close). os.Open offers a regular file to the poller, which refuses it
// (three more calls), and serving it then seeks and reads again.
func open(file string, buf []byte) (f *os.File, small []byte, err error) {
	var fd int
	for {
		fd, err = syscall.Open(file, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: file, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Size > MemoryObjectMax {
		// Not pollable (blocking): NewFile keeps it out of the poller.
		return os.NewFile(uintptr(fd), file), nil, nil
	}
	defer syscall.Close(fd)
	small = slices.Grow(buf[:0], int(st.Size))[:st.Size]
	for n := 0; n < len(small); {
		k, err := syscall.Read(fd, small[n:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, nil, &fs.PathError{Op: "read", Path: file, Err: err}
		case k == 0:
			return nil, nil, fmt.Errorf("%s: %d bytes where fstat said %d", file, n, len(small))
		}
		n += k
	}
	return nil, small, nil
}
