package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one reading of the node's resources; -1 is unknown.
type sample struct {
	T          float64 `json:"t"`          // seconds since the run started
	RSS        int64   `json:"rss"`        // resident memory, bytes
	FDs        int64   `json:"fds"`        // open files
	Goroutines int64   `json:"goroutines"` // go_goroutines
	Rate       float64 `json:"rate"`       // answers a second since the previous sample
	Errors     int64   `json:"errors"`     // unsuccessful answers so far
	Err        string  `json:"err,omitempty"`
}

// sampler reads the node's resources every -sample while the run goes on.
type sampler struct {
	o      *options
	out    io.Writer
	client *http.Client
	count  func() (done, bad int64)

	t0       time.Time
	lastDone int64
	lastT    time.Time
	samples  []sample
	stopc    chan struct{}
	wg       sync.WaitGroup
}

func newSampler(o *options, out io.Writer, count func() (done, bad int64)) *sampler {
	return &sampler{o: o, out: out, count: count, client: &http.Client{Timeout: 5 * time.Second}, stopc: make(chan struct{})}
}

// start takes the first sample (before any load of the run) and then one every
// interval until stop.
func (s *sampler) start(ctx context.Context) {
	s.t0 = time.Now()
	s.lastT = s.t0
	s.lastDone, _ = s.count()
	if s.o.sample <= 0 {
		return
	}
	s.take(ctx)
	s.wg.Go(func() {
		t := time.NewTicker(s.o.sample)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.take(ctx)
			case <-s.stopc:
				return
			case <-ctx.Done():
				return
			}
		}
	})
}

// stop takes a last sample and returns them all.
func (s *sampler) stop(ctx context.Context) []sample {
	close(s.stopc)
	s.wg.Wait()
	if s.o.sample > 0 {
		// The last sample is taken even after an interrupt: it is the end figure.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s.take(c)
	}
	return s.samples
}

func (s *sampler) take(ctx context.Context) {
	now := time.Now()
	done, bad := s.count()
	sm := sample{T: now.Sub(s.t0).Seconds(), RSS: -1, FDs: -1, Goroutines: -1, Errors: bad}
	if d := now.Sub(s.lastT).Seconds(); d > 0 {
		sm.Rate = float64(done-s.lastDone) / d
	}
	s.lastDone, s.lastT = done, now
	var errs []string
	if s.o.metricsURL != "" {
		m, err := s.scrape(ctx, "go_goroutines", "process_resident_memory_bytes", "process_open_fds")
		if err != nil {
			errs = append(errs, err.Error())
		}
		sm.Goroutines = m["go_goroutines"]
		if s.o.pid == 0 {
			sm.RSS, sm.FDs = m["process_resident_memory_bytes"], m["process_open_fds"]
		}
	}
	if s.o.pid > 0 {
		var err error
		if sm.RSS, err = procRSS(s.o.pid); err != nil {
			errs = append(errs, err.Error())
		}
		if sm.FDs, err = procFDs(s.o.pid); err != nil {
			errs = append(errs, err.Error())
		}
	}
	sm.Err = strings.Join(errs, "; ")
	s.samples = append(s.samples, sm)
	fmt.Fprintln(s.out, "sample", sm)
}

func (sm sample) String() string {
	v := func(n int64) string {
		if n < 0 {
			return "?"
		}
		return strconv.FormatInt(n, 10)
	}
	rss := "?"
	if sm.RSS >= 0 {
		rss = fmt.Sprintf("%.1fMiB", float64(sm.RSS)/(1<<20))
	}
	s := fmt.Sprintf("t=%.0fs rss=%s fds=%s goroutines=%s rate=%.1f/s errors=%d", sm.T, rss, v(sm.FDs), v(sm.Goroutines), sm.Rate, sm.Errors)
	if sm.Err != "" {
		s += " (" + sm.Err + ")"
	}
	return s
}

// scrape reads the named unlabelled series from the Prometheus text format;
// a series not found is -1.
func (s *sampler) scrape(ctx context.Context, names ...string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, n := range names {
		out[n] = -1
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.metricsURL, nil)
	if err != nil {
		return out, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := s.client.Do(req)
	if err != nil {
		return out, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("metrics: status %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body, out), nil
}

func parseMetrics(r io.Reader, want map[string]int64) map[string]int64 {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " ")
		if _, wanted := want[name]; !ok || !wanted {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err == nil {
			want[name] = int64(f)
		}
	}
	return want
}

// procRSS is VmRSS of /proc/pid/status, in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v) // "28672 kB"
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return -1, fmt.Errorf("VmRSS %q: %v", v, err)
			}
			return n << 10, nil
		}
	}
	return -1, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// procFDs counts the entries of /proc/pid/fd.
func procFDs(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return -1, err
	}
	return int64(len(names)), nil
}

// growth is the verdict of the growth rule on one series.
type growth struct {
	Series    string  `json:"series"`
	Judged    bool    `json:"judged"`
	Samples   int     `json:"samples"`
	FirstMax  float64 `json:"firstThirdMax"`
	LastMin   float64 `json:"lastThirdMin"`
	Allowance float64 `json:"allowance"`
	FitRise   float64 `json:"fitRise"` // rise of the least-squares line over the run
	Grows     bool    `json:"grows"`
	WarnOnly  bool    `json:"warnOnly"` // resident memory: reported, never a failure
	Why       string  `json:"why"`
}

// minSamples is the fewest samples under load the growth rule judges: two per
// third.
const minSamples = 6

// grows applies the growth rule (see the package documentation) to the values
// v at times t: the last third must sit wholly above the first third's peak by
// more than the allowance, and the fitted line must rise by more than it too.
// A leak of r per second over a run of T seconds lifts the last third's
// minimum about r·T/3 above the first third's maximum, so the 2-minute CI run
// catches a leak of one goroutine or file every 4 s (with the default
// allowance of 10), and a 30-minute run one every minute; a level reached
// early (the connections of a steady load), or a spike that passes, does not
// count.
func grows(t, v []float64, tolerance, slack float64) growth {
	g := growth{Samples: len(v)}
	if len(v) < minSamples {
		g.Why = fmt.Sprintf("not judged: %d samples under load, %d needed", len(v), minSamples)
		return g
	}
	g.Judged = true
	k := len(v) / 3
	g.FirstMax = v[0]
	for _, x := range v[:k] {
		g.FirstMax = max(g.FirstMax, x)
	}
	g.LastMin = v[len(v)-k]
	for _, x := range v[len(v)-k:] {
		g.LastMin = min(g.LastMin, x)
	}
	g.Allowance = max(slack, tolerance*g.FirstMax)
	// Least squares: slope = Σ(t-t̄)(v-v̄) / Σ(t-t̄)².
	var tm, vm float64
	for i := range v {
		tm += t[i]
		vm += v[i]
	}
	tm /= float64(len(v))
	vm /= float64(len(v))
	var num, den float64
	for i := range v {
		num += (t[i] - tm) * (v[i] - vm)
		den += (t[i] - tm) * (t[i] - tm)
	}
	if den > 0 {
		g.FitRise = num / den * (t[len(t)-1] - t[0])
	}
	step := g.LastMin - g.FirstMax
	g.Grows = step > g.Allowance && g.FitRise > g.Allowance
	verdict := "bounded"
	if g.Grows {
		verdict = "GROWS"
	}
	g.Why = fmt.Sprintf("%s: last third min %.0f - first third max %.0f = %+.0f, fitted rise %+.1f over %.0fs; allowance %.0f",
		verdict, g.LastMin, g.FirstMax, step, g.FitRise, t[len(t)-1]-t[0], g.Allowance)
	return g
}

// judge prints the first and last samples and applies the growth rule to the
// samples taken under load (all but the one before the run started).
func judge(samples []sample, o *options, out io.Writer) []growth {
	if len(samples) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nfirst sample", samples[0])
	fmt.Fprintln(out, "last sample ", samples[len(samples)-1])
	series := []struct {
		name string
		get  func(sample) int64
		warn bool
		used bool
	}{
		{"goroutines", func(s sample) int64 { return s.Goroutines }, false, o.metricsURL != ""},
		{"open files", func(s sample) int64 { return s.FDs }, false, o.pid > 0 || o.metricsURL != ""},
		{"resident memory (MiB)", func(s sample) int64 { return s.RSS >> 20 }, true, o.pid > 0 || o.metricsURL != ""},
	}
	var out2 []growth
	for _, s := range series {
		if !s.used {
			continue
		}
		var t, v []float64
		for _, sm := range samples[1:] {
			if x := s.get(sm); x >= 0 {
				t, v = append(t, sm.T), append(v, float64(x))
			}
		}
		g := grows(t, v, o.growthTolerance, o.growthSlack)
		if s.warn {
			// Memory in MiB: a slack of at least 32 MiB and 50%.
			g = grows(t, v, max(o.growthTolerance, 0.5), max(o.growthSlack, 32))
		}
		g.Series, g.WarnOnly = s.name, s.warn
		// A run long enough for the rule that still has too few samples lost
		// its source (the node or its metrics went away): that fails too.
		if !g.Judged && !s.warn && o.sample > 0 && o.duration >= minSamples*o.sample {
			g.Grows, g.Why = true, g.Why+" (samples were lost)"
		}
		label := s.name
		if s.warn && g.Grows {
			label += " (warning only)"
		}
		fmt.Fprintf(out, "%s: %s\n", label, g.Why)
		out2 = append(out2, g)
	}
	return out2
}
