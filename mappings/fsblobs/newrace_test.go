package fsblobs

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentNewSameDir opens two stores on one directory at once, as
// two instances sharing a data directory start ("instances sharing a directory
// never remove each other's uploads"). New made its temporary directory
// (MkdirTemp) and only then locked it; in between, the other New's
// removeStale found it unlocked and removed it. A New that returns nil must
// give a store whose Puts work.
func TestConcurrentNewSameDir(t *testing.T) {
	ctx := t.Context()
	for i := range 300 {
		dir := t.TempDir()
		var stores [2]*Store
		var errs [2]error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				stores[j], errs[j] = New(dir)
			}()
		}
		close(start)
		wg.Wait()
		for j, s := range stores {
			if errs[j] != nil {
				t.Fatalf("iteration %d: New %d: %v", i, j, errs[j])
			}
			_, err := s.Put(ctx, fmt.Sprintf("key-%d", j), bytes.NewReader([]byte("x")))
			if err != nil {
				t.Fatalf("iteration %d: store %d opened, but its Put fails: %v", i, j, err)
			}
		}
		for _, s := range stores {
			s.Close()
		}
	}
}
