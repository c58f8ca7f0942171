package fsblobs

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A large Put leaves the page cache alone past its first buffer: the bytes
// went to the disk directly (where the filesystem takes direct I/O and does
// not keep what it writes in the page cache, as tmpfs does).
func TestLargePutBypassesPageCache(t *testing.T) {
	s, dir := newStore(t)
	probe, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if err := setDirect(probe.Fd(), true); err != nil {
		t.Skipf("the filesystem of %s refuses direct I/O (%v): Put writes through the page cache there", dir, err)
	}
	if err := writeDirect(probe, *alignedBuf(directChunk), 0); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, probe, directChunk); n > 0 {
		t.Skipf("the filesystem of %s keeps direct writes in the page cache (%d pages of 1 MiB)", dir, n)
	}
	const size = 32<<20 + 12345
	if _, err := s.Put(t.Context(), "big", &patterned{n: size}); err != nil {
		t.Fatal(err)
	}
	_, file := s.path("big")
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := os.Getpagesize()
	if resident, limit := residentPages(t, f, size), (bufSize+page-1)/page+1; resident > limit {
		t.Errorf("%d of the object's %d pages are in the page cache after Put, more than the %d of its first buffer and tail",
			resident, (size+page-1)/page, limit)
	}
}

// residentPages is how many pages of f's first size bytes are in the page cache.
func residentPages(t *testing.T, f *os.File, size int) int {
	t.Helper()
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	page := os.Getpagesize()
	vec := make([]byte, (size+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident
}
