package node_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestGetDuringDeleteIsNotServiceFailure gets an object while it is
// deleted. Each get must see the object whole or not at all (NotFound). Get
// finds the record (view), then opens its bytes; a Delete between the two
// removes the row and then the file, and Get answered ServiceFailure "the
// bytes of %q are missing from the store", the answer of a damaged store,
// for an object that was simply deleted.
func TestGetDuringDeleteIsNotServiceFailure(t *testing.T) {
	dir := t.TempDir()
	cat := openCatalog(t, dir)
	n := newNode(t, dir, cat, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { n.Close() })
	ctx := t.Context()
	s := &adapter.Session{Subject: harvestOwner}
	data := []byte("some bytes to read while they are deleted")
	for i := range 40 {
		pid := fmt.Sprintf("gd-%d", i)
		createText(t, n, pid, data)
		var stop atomic.Bool
		var failure atomic.Value
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					o, err := n.Get(ctx, s, pid)
					if err == nil {
						io.Copy(io.Discard, o.Body)
						o.Body.Close()
						continue
					}
					if adapter.IsKind(err, adapter.NotFound) {
						return
					}
					failure.Store(err)
					return
				}
			}()
		}
		time.Sleep(100 * time.Microsecond)
		if _, err := n.Delete(ctx, s, pid); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		if err, ok := failure.Load().(error); ok {
			t.Fatalf("iteration %d: a get of %q during its delete answered %s: %v",
				i, pid, adapter.AsException(err).Kind, err)
		}
	}
}
