package main

// The two ways a phase sends its requests: closed loop (each worker waits for
// its answer) and open loop (requests due at a fixed rate, answered or not).

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// closedLoop runs workers that each send the next request when the previous
// one is answered, for dur, or until count requests were sent (count > 0).
func (w *workload) closedLoop(ctx context.Context, name string, workers int, dur time.Duration, count int, pick func() *op) *phase {
	ph := newPhase(name, "closed", workers, 0)
	var sent atomic.Int64
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if count > 0 && sent.Add(1) > int64(count) || count == 0 && !time.Now().Before(deadline) {
					return
				}
				o := pick()
				t0 := time.Now()
				st, err := o.do(ctx)
				w.record(ph, o.id, time.Since(t0), st, err)
			}
		})
	}
	wg.Wait()
	ph.finish(time.Since(start))
	return ph
}

// lateAfter is how far behind its due time a request may start before it
// counts as late: the client (not the node) held it back.
const lateAfter = 10 * time.Millisecond

// openLoop sends rate requests a second at fixed intervals for dur, with at
// most maxInflight outstanding, and waits for those in flight at the end.
// Each of maxInflight workers takes the next request due, waits for its time
// and sends it: a request due while all are out waits for the first one free
// (no goroutine a request, whose start and end cost the client more than a
// small request costs the node). Latency counts from each request's due time,
// so it includes the client's own start delay (its timer wakes late, or
// maxInflight are out), which the phase reports apart (StartP99ms): the part
// of a p99 the node did not cause.
func (w *workload) openLoop(ctx context.Context, name string, rate float64, maxInflight int, dur time.Duration) *phase {
	ph := newPhase(name, "open", maxInflight, rate)
	due := int64(math.Ceil(dur.Seconds() * rate)) // requests due before the end
	var next, sent atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range maxInflight {
		wg.Go(func() {
			timer := time.NewTimer(0)
			defer timer.Stop()
			<-timer.C
			for {
				i := next.Add(1) - 1
				if i >= due {
					return
				}
				at := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
				if d := time.Until(at); d > 0 {
					timer.Reset(d)
					select {
					case <-timer.C:
					case <-ctx.Done():
						return
					}
				}
				if ctx.Err() != nil || time.Since(start) >= dur {
					// The node fell so far behind that requests due before
					// the end could not be sent by then: they are missed,
					// not sent late, so that the run ends on time.
					return
				}
				sent.Add(1)
				delay := time.Since(at)
				ph.started(delay)
				o := w.pick()
				st, err := o.do(ctx)
				w.record(ph, o.id, time.Since(at), st, err)
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		ph.Missed = due - sent.Load()
	}
	ph.finish(time.Since(start))
	return ph
}
