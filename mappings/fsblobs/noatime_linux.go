package fsblobs

import "syscall"

// noATime is the flag that opens a file without updating its access time.
const noATime = syscall.O_NOATIME
