package fsblobs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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

// TestPutSyncsTheFanOutItFinds: a Put into fan-out directories that exist
// (another Put made them, and may not have synced their entries yet) syncs
// those entries before it answers, once per directory and instance.
func TestPutSyncsTheFanOutItFinds(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	synced := map[string]int{}
	s.syncDir = func(dir string) error {
		mu.Lock()
		synced[dir]++
		mu.Unlock()
		return syncDir(dir)
	}
	leaf, _ := s.path("found")
	if err := os.MkdirAll(leaf, 0o750); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Put(t.Context(), "found", bytes.NewReader([]byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	mid := filepath.Dir(leaf)
	if synced[s.objects] != 1 || synced[mid] != 1 || synced[leaf] != 2 {
		t.Errorf("directory syncs %v, want %s and %s once (their entries), %s twice (each object's)", synced, s.objects, mid, leaf)
	}
}
