//go:build !linux

package fsblobs

import "errors"

// Without sync_file_range, the fsync at the end of Put writes everything.

func startWriteback(fd uintptr, off, n int64) {}

func awaitWriteback(fd uintptr, off, n int64) {}

// Without O_DIRECT, Put writes through the page cache with write-behind.
func setDirect(fd uintptr, on bool) error { return errors.ErrUnsupported }
