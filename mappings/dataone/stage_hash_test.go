package dataone

import (
	"bytes"
	"errors"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestStageStopsHashing: a spool that fails midway leaves none of the
// goroutines that hash the speculative algorithms in parallel. Not parallel:
// it counts goroutines, and turns the collector off so that Stage must stop
// them itself, not leave them to the cleanup of a collected Hasher.
func TestStageStopsHashing(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	n := open(t, upstreamConfig(t, "http://127.0.0.1:1/mn", ""), nil)
	gone := errors.New("client gone")
	if _, err := n.Stage(t.Context(), &failingReader{n: 3 << 20, err: gone}, adapter.SpeculativeAlgorithms); !errors.Is(err, gone) {
		t.Errorf("Stage = %v, want %v", err, gone)
	}
	buf := make([]byte, 4<<20)
	left := 0
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) { // ends as soon as they are gone
		left = bytes.Count(buf[:runtime.Stack(buf, true)], []byte("adapter.startCrew.func"))
		if left == 0 || time.Now().After(deadline) {
			break
		}
	}
	if left != 0 {
		t.Errorf("%d hashing goroutines left", left)
	}
}
