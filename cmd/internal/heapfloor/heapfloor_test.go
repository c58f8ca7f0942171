package heapfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live, roots uint64
		want               int
	}{
		{64 * mib, 6 * mib, 0, 966},       // goal 6 + 6 × 9.66 = 64 MiB
		{64 * mib, 6 * mib, 2 * mib, 725}, // the roots count toward the goal as the runtime counts them
		{64 * mib, 32 * mib, 0, 100},      // twice the live heap is the floor already
		{64 * mib, 40 * mib, 0, 100},      // above the floor: the runtime's default
		{64 * mib, 0, 0, 100},             // nothing measured yet
	} {
		if got := gcPercentFor(c.floor, c.live, c.roots); got != c.want {
			t.Errorf("gcPercentFor(%d, %d, %d) = %d, want %d", c.floor, c.live, c.roots, got, c.want)
		}
	}
}

// gogc reads the runtime's current GOGC.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

func TestHeapFloorSetsThePace(t *testing.T) {
	before := gogc()
	noEnv := func(string) string { return "" }
	stop := Start(1<<30, noEnv)
	// A second floor, or one under an operator's GOGC, changes nothing.
	Start(1<<20, noEnv)()
	Start(1<<20, func(k string) string { return map[string]string{"GOGC": "50"}[k] })()

	// After a collection the pace is the one that puts the goal at 1 GiB:
	// far above the default for this test's small heap.
	deadline := time.Now().Add(10 * time.Second)
	for gogc() <= 1000 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("GOGC is %d after collections, want the floor's (above 1000 for a 1 GiB floor)", gogc())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	stop() // twice is once
	if got := gogc(); got != before {
		t.Errorf("GOGC after stop = %d, want %d as before", got, before)
	}
	// Stopped, it no longer sets the pace, and a new floor may start.
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if got := gogc(); got != before {
		t.Errorf("GOGC after a collection past stop = %d, want %d", got, before)
	}
	stop = Start(1<<30, noEnv)
	defer stop()
	for gogc() <= 1000 {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("a floor started after another stopped does not set the pace (GOGC %d)", gogc())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
