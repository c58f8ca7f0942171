package fsblobs

import "golang.org/x/sys/unix"

// startWriteback asks the kernel to start writing the dirty pages of
// [off, off+n) of fd to the disk, without waiting for it. It is a hint:
// durability comes from the fsync that follows, which reports any error.
func startWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// awaitWriteback waits until the pages of [off, off+n) of fd that were
// dirty are written (starting the writing of any that is not under way).
func awaitWriteback(fd uintptr, off, n int64) {
	_ = unix.SyncFileRange(int(fd), off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

// setDirect turns direct I/O on fd on or off: while on, a write goes from its
// buffer to the disk without passing through (and filling) the page cache.
func setDirect(fd uintptr, on bool) error {
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		fl |= unix.O_DIRECT
	} else {
		fl &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, fl)
	return err
}
