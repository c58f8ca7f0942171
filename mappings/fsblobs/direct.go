package fsblobs

// Past its first buffer, Put writes an object with direct I/O where the
// filesystem allows it: from its buffers to the disk, around the page cache. A
// buffered write costs the kernel a page-cache page for every 4 KiB, which is
// most of its time on a VM whose host takes free memory back (2.6 s of system
// time a GiB here, against 0.14 s direct), then the disk writes them all again
// before the fsync returns; direct writes go at the disk's speed, leave the
// fsync only the tail and the metadata, and leave the page cache to the
// objects being read.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/d1bridge/d1bridge/mappings/node"
)

const (
	directChunk  = 1 << 20 // one direct write
	directChunks = 4       // an upload's buffers: one filling while the others are written
	directAlign  = 4096    // of a direct write's offset, length and buffer address
)

var directPool = sync.Pool{New: func() any { return alignedBuf(directChunk) }}

// alignedBuf makes a buffer of n bytes whose address is a multiple of directAlign.
func alignedBuf(n int) *[]byte {
	b := make([]byte, n+directAlign)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (directAlign - 1))
	b = b[off : off+n : off+n]
	return &b
}

// copyDirect copies r into f from off (a multiple of directAlign) on, with
// direct I/O turned on; it returns the bytes copied. A goroutine writes each
// full chunk while the next one is read; the last chunk's unaligned tail goes
// through the page cache, direct I/O off again. A filesystem that takes the
// flag but refuses a direct write gets that write and the rest buffered.
func copyDirect(ctx context.Context, f *os.File, r io.Reader, off int64) (n int64, err error) {
	type chunk struct {
		buf *[]byte
		off int64
	}
	chunks := make(chan chunk, directChunks)
	free := make(chan *[]byte, directChunks)
	failed := make(chan struct{}) // closed on the writer's first error
	var werr error
	var writer sync.WaitGroup
	writer.Go(func() {
		for c := range chunks {
			if werr == nil {
				if werr = writeDirect(f, *c.buf, c.off); werr != nil {
					close(failed)
				}
			}
			free <- c.buf
		}
	})
	stopped := false
	stop := func(err error) (int64, error) {
		if !stopped {
			stopped = true
			close(chunks)
			writer.Wait()
		}
		if werr != nil {
			return n, werr
		}
		return n, err
	}
	var bufs []*[]byte
	defer func() {
		stop(nil) // first: a reader that panicked leaves the writer with buffers
		for _, b := range bufs {
			directPool.Put(b)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return stop(err)
		}
		var buf *[]byte
		if len(bufs) < directChunks {
			buf = directPool.Get().(*[]byte)
			bufs = append(bufs, buf)
		} else {
			select {
			case buf = <-free:
			case <-failed:
				return stop(nil)
			}
		}
		// The writer closes failed before it hands back the buffer it could
		// not write, and select picks at random among ready cases: without
		// this a failed write could be noticed chunks later.
		select {
		case <-failed:
			return stop(nil)
		default:
		}
		m, rerr := node.ReadChunk(r, *buf)
		if rerr == nil {
			chunks <- chunk{buf, off + n}
			n += int64(m)
			continue
		}
		if rerr != io.EOF {
			return stop(rerr)
		}
		// The last chunk, once the others are on the disk: its aligned part
		// direct, the rest buffered.
		if _, err := stop(nil); err != nil {
			return n, err
		}
		last := (*buf)[:m]
		aligned := m &^ (directAlign - 1)
		if err := writeDirect(f, last[:aligned], off+n); err != nil {
			return n, err
		}
		n += int64(aligned)
		if aligned < m {
			if err := setDirect(f.Fd(), false); err != nil {
				return n, fmt.Errorf("fsblobs: %w", err)
			}
			k, err := f.WriteAt(last[aligned:], off+n)
			n += int64(k)
			if err != nil {
				return n, fmt.Errorf("fsblobs: %w", err)
			}
		}
		return n, nil
	}
}

// writeDirect writes b at off; refused as direct I/O (EINVAL: the
// filesystem's alignment is not ours), it turns direct I/O off and writes b
// buffered.
func writeDirect(f *os.File, b []byte, off int64) error {
	_, err := f.WriteAt(b, off)
	if errors.Is(err, syscall.EINVAL) {
		if err = setDirect(f.Fd(), false); err == nil {
			_, err = f.WriteAt(b, off)
		}
	}
	if err != nil {
		return fmt.Errorf("fsblobs: %w", err)
	}
	return nil
}
