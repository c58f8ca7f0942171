package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// histogram counts latencies in microseconds with a relative error under
// 1/64: values below 128 µs have a bucket each; above, each power of two is
// cut into 64 buckets (the shape of an HDR histogram). It holds any duration
// up to hours in 2,048 counters, so a 30-minute run needs no samples kept.
type histogram struct {
	counts [2048]uint64
	n      uint64
	max    time.Duration
}

const subBuckets = 64

func bucketOf(us uint64) int {
	if us < 2*subBuckets {
		return int(us)
	}
	shift := bits.Len64(us) - 7 // us>>shift is in [64, 128)
	i := 2*subBuckets + (shift-1)*subBuckets + int(us>>shift) - subBuckets
	return min(i, len(histogram{}.counts)-1)
}

// valueOf is the middle of bucket i, in microseconds.
func valueOf(i int) float64 {
	if i < 2*subBuckets {
		return float64(i)
	}
	shift := (i-2*subBuckets)/subBuckets + 1
	top := uint64((i-2*subBuckets)%subBuckets + subBuckets)
	lo := top << shift
	return float64(lo) + float64(uint64(1)<<shift)/2
}

func (h *histogram) add(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	h.counts[bucketOf(uint64(us))]++
	h.n++
	h.max = max(h.max, d)
}

// quantile is the q-quantile (0 < q <= 1) as a duration.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(valueOf(i)*float64(time.Microsecond)), h.max)
		}
	}
	return h.max
}

// opStats collects one operation's answers in a phase.
type opStats struct {
	hist   histogram
	errors map[string]int64
}

// phase is one part of a run (preload, capacity, run) and its report.
type phase struct {
	Name       string   `json:"name"`
	Mode       string   `json:"mode"`                    // closed or open
	Workers    int      `json:"workers"`                 // closed: workers; open: most in flight
	TargetRate float64  `json:"targetRate"`              // open loop: requests a second asked for
	Seconds    float64  `json:"seconds"`                 // wall time, including the requests in flight at the end
	Requests   int64    `json:"requests"`                // answers counted
	Rate       float64  `json:"rate"`                    // Requests / Seconds
	OKRate     float64  `json:"okRate"`                  // successful answers a second
	Missed     int64    `json:"missed"`                  // open loop: requests due that were never sent (the node fell behind)
	Late       int64    `json:"late"`                    // open loop: requests started over 10 ms after their due time
	StartP99ms float64  `json:"startP99ms,omitempty"`    // open loop: p99 of the start delays (see openLoop)
	MachineCPU float64  `json:"machineCPUPct,omitempty"` // how busy the machine's CPUs were, % of all of them (Linux)
	ClientCPU  float64  `json:"clientCPUPct,omitempty"`  // d1load's own part of it, % of all the CPUs
	Ops        []opLine `json:"ops"`                     // one per operation that ran
	Errors     []string `json:"errors,omitempty"`        // "status op=count", as printed

	cpu0   cpuTime // at the start
	mu     sync.Mutex
	late   int64
	starts histogram // open loop: start delays
	ops    [nOps]opStats
}

// opLine is one operation's figures in a phase.
type opLine struct {
	Op     string           `json:"op"`
	Count  int64            `json:"count"`
	Rate   float64          `json:"rate"`
	P50ms  float64          `json:"p50ms"`
	P99ms  float64          `json:"p99ms"`
	MaxMs  float64          `json:"maxms"`
	Errors map[string]int64 `json:"errors,omitempty"` // by outcome: HTTP status, net, invalid
}

func newPhase(name, mode string, workers int, rate float64) *phase {
	return &phase{Name: name, Mode: mode, Workers: workers, TargetRate: rate, cpu0: readCPUTime()}
}

// started counts the start delay of an open loop's request.
func (p *phase) started(delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts.add(delay)
	if delay > lateAfter {
		p.late++
	}
}

func (p *phase) record(id opID, d time.Duration, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.ops[id]
	s.hist.add(d)
	if key != "" {
		if s.errors == nil {
			s.errors = map[string]int64{}
		}
		s.errors[key]++
	}
}

// finish computes the report once the phase has ended.
func (p *phase) finish(elapsed time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Seconds = elapsed.Seconds()
	p.MachineCPU, p.ClientCPU = cpuShare(p.cpu0, readCPUTime())
	p.Late = p.late
	if p.starts.n > 0 {
		p.StartP99ms = ms(p.starts.quantile(0.99))
	}
	var ok int64
	byKey := map[string][]string{}
	for i := range p.ops {
		s := &p.ops[i]
		if s.hist.n == 0 {
			continue
		}
		l := opLine{Op: opNames[i], Count: int64(s.hist.n), Rate: float64(s.hist.n) / p.Seconds,
			P50ms: ms(s.hist.quantile(0.5)), P99ms: ms(s.hist.quantile(0.99)), MaxMs: ms(s.hist.max), Errors: s.errors}
		p.Ops = append(p.Ops, l)
		p.Requests += l.Count
		ok += l.Count
		for k, n := range s.errors {
			ok -= n
			byKey[k] = append(byKey[k], fmt.Sprintf("%s=%d", opNames[i], n))
		}
	}
	p.Rate = float64(p.Requests) / p.Seconds
	p.OKRate = float64(ok) / p.Seconds
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		p.Errors = append(p.Errors, k+" "+strings.Join(byKey[k], " "))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// failures says what in this phase fails the run: any 5xx, transport error
// or invalid answer, more than max4xx answers in 4xx, and an open loop that
// missed more than the fraction maxMissed of its requests (the node did not
// sustain the rate).
func (p *phase) failures(max4xx int, maxMissed float64) []string {
	var out []string
	var n4xx int64
	for _, l := range p.Ops {
		for k, n := range l.Errors {
			if st, err := strconv.Atoi(k); err == nil && st >= 400 && st < 500 {
				n4xx += n
				continue
			}
			out = append(out, fmt.Sprintf("%s: %d %s answers to %s", p.Name, n, k, l.Op))
		}
	}
	if due := p.Requests + p.Missed; p.Missed > 0 && float64(p.Missed) > maxMissed*float64(due) {
		out = append(out, fmt.Sprintf("%s: the node fell behind the rate: %d of %d requests due were never sent", p.Name, p.Missed, due))
	}
	if n4xx > int64(max4xx) {
		out = append(out, fmt.Sprintf("%s: %d answers in 4xx (at most %d allowed)", p.Name, n4xx, max4xx))
	}
	slices.Sort(out)
	return out
}

func (p *phase) print(w io.Writer) {
	target := ""
	if p.Mode == "open" {
		target = fmt.Sprintf(" at %.1f req/s (at most %d in flight, %d late, %d missed, started %.2f ms after due at p99)",
			p.TargetRate, p.Workers, p.Late, p.Missed, p.StartP99ms)
	} else {
		target = fmt.Sprintf(" with %d workers", p.Workers)
	}
	fmt.Fprintf(w, "\n== %s: %s loop%s: %d requests in %.1fs, %.1f req/s (%.1f ok/s)\n",
		p.Name, p.Mode, target, p.Requests, p.Seconds, p.Rate, p.OKRate)
	fmt.Fprintf(w, "%-9s %9s %9s %9s %9s %9s %7s\n", "op", "count", "req/s", "p50 ms", "p99 ms", "max ms", "errors")
	for _, l := range p.Ops {
		var e int64
		for _, n := range l.Errors {
			e += n
		}
		fmt.Fprintf(w, "%-9s %9d %9.1f %9.2f %9.2f %9.1f %7d\n", l.Op, l.Count, l.Rate, l.P50ms, l.P99ms, l.MaxMs, e)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(w, "errors %s\n", e)
	}
	if p.MachineCPU > 0 {
		fmt.Fprintf(w, "machine CPU busy %.0f%% (d1load itself %.0f%%)\n", p.MachineCPU, p.ClientCPU)
	}
}

// report is what -json writes.
type report struct {
	URL      string   `json:"url"`
	Mix      string   `json:"mix"`
	Capacity float64  `json:"capacity,omitempty"` // measured successful req/s, with -capacity
	Phases   []*phase `json:"phases"`
	Samples  []sample `json:"samples"`
	Growth   []growth `json:"growth"`
	Failures []string `json:"failures"`
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
