// Package heapfloor paces the garbage collector of a process whose live heap
// is small and whose garbage is fast (issue 17): the node, and the load tool
// that measures it on the same CPUs.
//
// With GOGC=100 the runtime collects each time the heap has grown by what the
// last collection found live. A node's live heap is small (6-10 MB: what
// grows with the catalog or the traffic is kept off the heap), so at 30,000
// small requests a second it collected 45 times a second, a tenth of the CPU.
// A floor sets the goal of each cycle to the larger of that and the floor, as
// a JVM's initial heap does: below the floor the heap grows without
// collecting, above it GOGC=100 holds.
//
// The runtime has no such setting, so after every collection the floor
// computes the GOGC that puts the next goal at the floor, from what the
// collection found live (runtime/metrics). A GOGC in the environment is the
// operator's choice and wins.
package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

var active sync.Mutex // one floor per process: GOGC is global

// Start keeps the collector's goal at floor bytes or more until stop
// is called, which gives GOGC back its value from before. floor 0, a GOGC in
// the environment or a floor already running: nothing is done.
func Start(floor int64, getenv func(string) string) (stop func()) {
	if floor <= 0 || getenv("GOGC") != "" || !active.TryLock() {
		return func() {}
	}
	before := debug.SetGCPercent(100)
	var (
		mu      sync.Mutex // a collection's pace is never set past stop
		stopped bool
	)
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	// A cleanup runs after the collection that finds its object unreachable:
	// each one sets the pace and arms the next.
	type sentinel struct{ _ [32]byte } // not tiny: the tiny allocator shares blocks
	var arm func()
	arm = func() {
		runtime.AddCleanup(new(sentinel), func(struct{}) {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			metrics.Read(samples)
			debug.SetGCPercent(gcPercentFor(uint64(floor), samples[0].Value.Uint64(), samples[1].Value.Uint64()+samples[2].Value.Uint64()))
			arm()
		}, struct{}{})
	}
	arm()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			stopped = true
			debug.SetGCPercent(before)
			mu.Unlock()
			active.Unlock()
		})
	}
}

// gcPercentFor is the GOGC whose goal is floor for a heap that has live bytes
// live and roots (stacks, globals) of roots bytes: the runtime's goal is
// live + (live + roots) × GOGC/100. Never below 100, the runtime's default.
func gcPercentFor(floor, live, roots uint64) int {
	if live+roots == 0 || floor <= 2*live+roots {
		return 100
	}
	return int((floor - live) * 100 / (live + roots))
}
