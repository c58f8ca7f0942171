// Command d1load drives a running d1bridge member node with a mixed DataONE
// workload, reports latency and throughput per operation, and watches the
// node's resources for leaks. It is the soak test of .ci/soak and the load
// generator for benchmarks.
//
//	d1load -url http://127.0.0.1:8080/d1/mn -key soak.key -subject CN=d1load,DC=dataone,DC=org \
//	       -metrics http://127.0.0.1:9090/metrics -pid $(pidof d1bridge) \
//	       -capacity 10s -duration 30m
//
// # Workload
//
// Each request is one MN v2 operation drawn at random from -mix (weights):
//
//	create    POST /object: a new object of -size random bytes with a v2 system metadata
//	          document (SHA-256 checksum, rightsHolder the caller, public read unless -private)
//	get       GET /object/{id} of a random object this run created; the body is read and its size checked
//	describe  HEAD /object/{id}
//	meta      GET /meta/{id} (getSystemMetadata)
//	list      GET /object?fromDate=&start=&count=-page: listObjects paged the way a harvester
//	          pages, start advancing by the page size until a short page, then fromDate moves
//	          to the last date seen and start returns to 0
//	log       GET /log?fromDate=&start=&count=-page: getLogRecords, harvested the same way
//	access    PUT /accessRules/{id} (setAccessPolicy) with the object's serialVersion, which
//	          alternates the policy between public (or -peer) read and read plus -peer write
//
// Reads need objects: -preload creates that many first (closed loop, -workers
// at a time), and a read drawn while none exists is a create. -anon sends that
// fraction of reads without a credential (the objects must then be public).
//
// # Existing objects, other servers, loading only
//
// -pids FILE reads objects from a list of identifiers (one a line) that exist
// on the node, such as the -pids-out FILE of an earlier run, which lists the
// objects a run created. -hot K reads only the first K of them: gets over a
// small hot set, or spread over all N. -urls FILE makes every get a GET of a
// URL of the file (one a line, absolute, sent without a credential, the body's
// size checked against -size), drawn at random among the first -hot: the same
// client on any server, such as nginx serving the files a node stores, for
// the ratios of .ci/bench; with -urls the target need not be a node, and the
// mix must be get alone. With -pids or -urls, -preload is 0 unless given.
// -duration 0 with -preload N only loads: N creates, then the report (their
// rate tells how long loading took), and no run.
//
// # Load
//
// Closed loop (the default): -workers goroutines each send the next request as
// soon as the previous answer is read. Open loop: -rate N/s sends N requests a
// second at fixed intervals whatever the node does, with at most -max-inflight
// outstanding; latency is measured from the time a request was due, not from
// when it could be sent, so a node that falls behind is seen in the
// percentiles (no coordinated omission). That latency includes d1load's own
// start delay (its timer wakes late, or -max-inflight are out), whose p99 the
// report gives apart ("started N ms after due at p99", startP99ms in -json):
// on a machine shared with the node it is a part of every p99 the node did
// not cause. Requests still in flight when
// -duration ends are waited for; requests that fell so far behind that they
// were not sent by the end are "missed", and more than -max-missed (1%) of
// them fails the run (the node did not sustain the rate). -conns caps the connections: requests beyond
// it wait for one in d1load (their wait counts in their latency), so that a
// burst of slow answers does not open connections the node then holds; the
// soak uses it to keep the node's connection count, and with it its
// goroutines and open files, independent of its latency.
//
// -capacity D first measures the node's capacity for the mix: a closed loop of
// -capacity-workers for D, whose successful req/s, times -capacity-fraction
// (0.7), becomes the rate of the open-loop run that follows. This is how the
// soak runs at about 70% of capacity on any machine.
//
// # Credentials
//
// A bearer token comes from -token, or the D1LOAD_TOKEN environment variable,
// or is signed by d1load itself: -key names a PEM RSA private key (PKCS#1 or
// PKCS#8) whose public half is in the node's auth.tokenKeys, and d1load signs
// RS256 tokens for -subject, valid for an hour and renewed before they expire.
// The least privilege that lets the soak work is a node whose node.submitters
// lists only -subject: it creates objects as their rights holder, and so may
// read them and change their access policy; it is not trusted.
//
// # Report and exit status
//
// At the end of each phase (preload, capacity, run) d1load prints, per
// operation, the count, req/s, p50, p99 and max latency, and the answers that
// were not a success counted by HTTP status ("net" for a transport error). The
// run fails (exit 1) on any 5xx or transport error, on more than -max-4xx
// answers in 4xx, on more than -max-missed in open loop, or when the node's
// goroutines or open files grow (below).
// -json FILE also writes the report as JSON.
//
// # Resource samples and the growth rule
//
// Every -sample (10s), and once at the start and end of the run, d1load reads
// the node's goroutines (go_goroutines from -metrics, the node's Prometheus
// endpoint: the main listener's /metrics, or metrics.listen) and its resident
// memory and open files (from /proc/<-pid>/status and /proc/<-pid>/fd; without
// -pid, process_resident_memory_bytes and process_open_fds from -metrics), and
// prints a line per sample. At the end it prints the first and last sample and
// judges goroutines and open files over the samples taken under load (at least
// 6, so a 2-minute run at 10 s is enough): a series grows without bound when
// both
//
//   - the smallest value of the last third exceeds the largest value of the
//     first third by more than the allowance, max(-growth-slack, -growth-tolerance
//     × that largest value), so that a level that was reached early or a
//     passing spike is not growth: the whole last third sits above the whole
//     first; and
//   - the least-squares line through all the samples rises by more than the
//     allowance over the run, so that the rise is a trend, not a step.
//
// Resident memory is reported and judged by the same rule only as a warning:
// caches and the Go heap settle at a size of their own.
//
// # Flags
//
//	-url URL              the member node base URL, up to /mn (default http://127.0.0.1:8080/d1/mn)
//	-token T              bearer token (or $D1LOAD_TOKEN)
//	-key FILE             sign tokens with this RSA private key instead
//	-subject S            the subject of signed tokens (default CN=d1load,DC=dataone,DC=org)
//	-duration D           length of the run (default 1m)
//	-workers N            closed-loop workers, and the preload's concurrency (default 16)
//	-rate N/s             open loop at N requests a second (also N, N/m)
//	-max-inflight N       open loop: most requests outstanding (default 512)
//	-conns N              most connections to the node (default 0: one per request in flight)
//	-capacity D           measure capacity for D first and run open loop at a fraction of it
//	-capacity-workers N   workers of the capacity measurement (default 16)
//	-capacity-fraction F  the fraction of capacity to run at (default 0.7)
//	-mix SPEC             op=weight,... (default create=10,get=30,describe=20,meta=15,list=10,log=5,access=10)
//	-size N               object size in bytes (default 1024)
//	-preload N            objects to create before the run (default 100; 0 with -pids or -urls)
//	-pids FILE            identifiers of existing objects to read (one a line)
//	-pids-out FILE        write the identifiers of the objects this run created
//	-urls FILE            gets are GETs of these URLs (one a line), without a credential
//	-hot K                read only the first K of -pids or -urls (default 0: all)
//	-page N               count of listObjects and getLogRecords pages (default 100)
//	-private              objects readable by their owner and -peer only, not public
//	-peer S               the subject access changes grant to (default CN=d1load-peer,DC=dataone,DC=org)
//	-anon F               fraction of reads sent without a credential (default 0)
//	-timeout D            per-request timeout (default 30s)
//	-sample D             resource sample interval (default 10s; 0 disables sampling)
//	-metrics URL          the node's Prometheus endpoint
//	-pid N                the node's process id, for /proc
//	-growth-tolerance F   relative allowance of the growth rule (default 0.1)
//	-growth-slack N       absolute allowance of the growth rule (default 10)
//	-max-4xx N            4xx answers tolerated (default 0)
//	-max-missed F         open loop: fraction of due requests that may go unsent (default 0.01)
//	-json FILE            write the report as JSON
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/d1bridge/d1bridge/cmd/internal/heapfloor"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "d1load:", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	url, token, keyFile, subject string
	duration                     time.Duration
	workers                      int
	rate                         float64 // requests a second; 0 is closed loop
	maxInflight                  int
	conns                        int
	capacity                     time.Duration
	capacityWorkers              int
	capacityFraction             float64
	mix                          mix
	size, preload, page          int
	private                      bool
	peer                         string
	anon                         float64
	timeout, sample              time.Duration
	metricsURL                   string
	pid                          int
	growthTolerance              float64
	growthSlack                  float64
	max4xx                       int
	maxMissed                    float64
	jsonFile                     string
	pidsFile, pidsOut, urlsFile  string
	hot                          int
}

func parseFlags(args []string, getenv func(string) string, out io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("d1load", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080/d1/mn", "member node base URL, up to /mn")
	fs.StringVar(&o.token, "token", "", "bearer token (default $D1LOAD_TOKEN)")
	fs.StringVar(&o.keyFile, "key", "", "PEM RSA private key to sign RS256 tokens with")
	fs.StringVar(&o.subject, "subject", "CN=d1load,DC=dataone,DC=org", "subject of signed tokens")
	fs.DurationVar(&o.duration, "duration", time.Minute, "length of the run")
	fs.IntVar(&o.workers, "workers", 16, "closed-loop workers (and the preload's concurrency)")
	rate := fs.String("rate", "", "open loop: requests per second (N, N/s or N/m)")
	fs.IntVar(&o.maxInflight, "max-inflight", 512, "open loop: most requests outstanding")
	fs.IntVar(&o.conns, "conns", 0, "most connections to the node (0: as many as requests in flight)")
	fs.DurationVar(&o.capacity, "capacity", 0, "measure closed-loop capacity for this long, then run open loop at -capacity-fraction of it")
	fs.IntVar(&o.capacityWorkers, "capacity-workers", 16, "workers of the capacity measurement")
	fs.Float64Var(&o.capacityFraction, "capacity-fraction", 0.7, "fraction of the measured capacity to run at")
	mixSpec := fs.String("mix", defaultMix, "operation weights, op=weight,...")
	fs.IntVar(&o.size, "size", 1024, "object size in bytes")
	fs.IntVar(&o.preload, "preload", 100, "objects to create before the run")
	fs.IntVar(&o.page, "page", 100, "page size (count) of listObjects and getLogRecords")
	fs.BoolVar(&o.private, "private", false, "objects readable by their owner and -peer only")
	fs.StringVar(&o.peer, "peer", "CN=d1load-peer,DC=dataone,DC=org", "subject that access changes grant to")
	fs.Float64Var(&o.anon, "anon", 0, "fraction of reads sent without a credential")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.DurationVar(&o.sample, "sample", 10*time.Second, "resource sample interval (0: none)")
	fs.StringVar(&o.metricsURL, "metrics", "", "the node's Prometheus endpoint (go_goroutines)")
	fs.IntVar(&o.pid, "pid", 0, "the node's process id (RSS and open files from /proc)")
	fs.Float64Var(&o.growthTolerance, "growth-tolerance", 0.1, "growth rule: relative allowance")
	fs.Float64Var(&o.growthSlack, "growth-slack", 10, "growth rule: absolute allowance")
	fs.IntVar(&o.max4xx, "max-4xx", 0, "4xx answers tolerated before the run fails")
	fs.Float64Var(&o.maxMissed, "max-missed", 0.01, "open loop: fraction of due requests that may go unsent")
	fs.StringVar(&o.jsonFile, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&o.pidsFile, "pids", "", "identifiers of existing objects to read, one a line")
	fs.StringVar(&o.pidsOut, "pids-out", "", "write the identifiers of the objects created to this file")
	fs.StringVar(&o.urlsFile, "urls", "", "gets are GETs of these URLs (one a line), without a credential")
	fs.IntVar(&o.hot, "hot", 0, "read only the first K of -pids or -urls (0: all)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	preloadSet := false
	fs.Visit(func(f *flag.Flag) { preloadSet = preloadSet || f.Name == "preload" })
	if !preloadSet && (o.pidsFile != "" || o.urlsFile != "") {
		o.preload = 0
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var problems []error
	var err error
	if o.mix, err = parseMix(*mixSpec); err != nil {
		problems = append(problems, fmt.Errorf("-mix: %w", err))
	}
	if *rate != "" {
		if o.rate, err = parseRate(*rate); err != nil {
			problems = append(problems, fmt.Errorf("-rate: %w", err))
		}
	}
	if o.token == "" {
		o.token = getenv("D1LOAD_TOKEN")
	}
	switch {
	case o.token != "" && o.keyFile != "":
		problems = append(problems, errors.New("-token (or D1LOAD_TOKEN) and -key exclude each other"))
	case o.rate > 0 && o.capacity > 0:
		problems = append(problems, errors.New("-rate and -capacity exclude each other: -capacity sets the rate"))
	case o.urlsFile != "" && o.pidsFile != "":
		problems = append(problems, errors.New("-urls and -pids exclude each other"))
	case o.urlsFile != "" && (o.mix != mix{opGet: o.mix[opGet]} || o.preload > 0):
		problems = append(problems, errors.New("-urls needs -mix get=1 (gets alone) and no -preload"))
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"-duration must be positive (or 0 with -preload: loading only)", o.duration > 0 || o.duration == 0 && o.preload > 0},
		{"-hot must not be negative", o.hot >= 0},
		{"-workers must be at least 1", o.workers >= 1},
		{"-max-inflight must be at least 1", o.maxInflight >= 1},
		{"-conns must not be negative", o.conns >= 0},
		{"-capacity-workers must be at least 1", o.capacityWorkers >= 1},
		{"-capacity-fraction must be in (0, 1]", o.capacityFraction > 0 && o.capacityFraction <= 1},
		{"-size must be between 1 and 64 MiB", o.size >= 1 && o.size <= 64<<20},
		{"-preload must not be negative", o.preload >= 0},
		{"-page must be between 1 and 10000", o.page >= 1 && o.page <= 10000},
		{"-anon must be in [0, 1]", o.anon >= 0 && o.anon <= 1},
		{"-anon needs public objects (not -private)", !(o.anon > 0 && o.private)},
		{"-timeout must be positive", o.timeout > 0},
		{"-sample must not be negative", o.sample >= 0},
		{"-growth-tolerance must not be negative", o.growthTolerance >= 0},
		{"-growth-slack must not be negative", o.growthSlack >= 0},
		{"-pid must not be negative", o.pid >= 0},
		{"-max-missed must be in [0, 1]", o.maxMissed >= 0 && o.maxMissed <= 1},
	} {
		if !c.ok {
			problems = append(problems, errors.New(c.name))
		}
	}
	o.url = strings.TrimSuffix(o.url, "/")
	return o, errors.Join(problems...)
}

// parseRate reads "200", "200/s" or "12000/m" as requests a second.
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(s, "/")
	per := 1.0
	switch unit {
	case "", "s":
	case "m", "min":
		per = 60
	default:
		return 0, fmt.Errorf("unit %q: use /s or /m", unit)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive rate", s)
	}
	return n / per, nil
}

// run is the whole command: preload, the optional capacity measurement, the run
// with its resource samples, and the verdict.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseFlags(args, getenv, out)
	if err != nil {
		return err
	}
	// The client's own collections fall into the latencies it measures and
	// take CPU from the node beside it: with the runtime's pace a few-MB heap
	// was collected 28 times a second at 13,000 requests a second.
	defer heapfloor.Start(64<<20, getenv)()
	creds, err := newCredentials(o)
	if err != nil {
		return err
	}
	w, err := newWorkload(o, creds)
	if err != nil {
		return err
	}
	if err := w.readLists(); err != nil {
		return err
	}
	rep := &report{URL: o.url, Mix: o.mix.String()}
	// Requests are never canceled by the end of a phase, only by a signal.
	// With -urls the target may be any HTTP server.
	if o.urlsFile == "" {
		if _, err := w.ping(ctx); err != nil {
			return fmt.Errorf("the node does not answer ping: %w", err)
		}
	}

	if o.preload > 0 {
		ph := w.closedLoop(ctx, "preload", o.workers, 0, o.preload, func() *op { return w.ops[opCreate] })
		ph.print(out)
		rep.Phases = append(rep.Phases, ph)
	}
	if o.pidsOut != "" {
		if err := w.writeCreated(o.pidsOut); err != nil {
			return err
		}
	}
	if o.duration == 0 {
		return finish(ctx, o, rep, out)
	}
	rate := o.rate
	if o.capacity > 0 && ctx.Err() == nil {
		ph := w.closedLoop(ctx, "capacity", o.capacityWorkers, o.capacity, 0, w.pick)
		ph.print(out)
		rep.Phases = append(rep.Phases, ph)
		rep.Capacity = ph.OKRate
		if ph.OKRate <= 0 {
			return errors.New("capacity: no request succeeded")
		}
		rate = ph.OKRate * o.capacityFraction
		fmt.Fprintf(out, "capacity %.1f req/s with %d workers; running open loop at %.0f%%: %.1f req/s\n",
			ph.OKRate, o.capacityWorkers, 100*o.capacityFraction, rate)
	}

	s := newSampler(o, out, func() (int64, int64) { return w.done.Load(), w.bad.Load() })
	s.start(ctx)
	var ph *phase
	if rate > 0 {
		ph = w.openLoop(ctx, "run", rate, o.maxInflight, o.duration)
	} else {
		ph = w.closedLoop(ctx, "run", o.workers, o.duration, 0, w.pick)
	}
	samples := s.stop(ctx)
	ph.print(out)
	rep.Phases = append(rep.Phases, ph)
	rep.Samples = samples
	rep.Growth = judge(samples, o, out)
	if o.pidsOut != "" {
		if err := w.writeCreated(o.pidsOut); err != nil {
			return err
		}
	}
	return finish(ctx, o, rep, out)
}

// finish judges the phases and the growth of the resources, writes the JSON
// report, and prints the verdict.
func finish(ctx context.Context, o *options, rep *report, out io.Writer) error {
	var failures []string
	for _, p := range rep.Phases {
		failures = append(failures, p.failures(o.max4xx, o.maxMissed)...)
	}
	for _, g := range rep.Growth {
		if g.Grows && !g.WarnOnly {
			failures = append(failures, fmt.Sprintf("%s grow without bound: %s", g.Series, g.Why))
		}
	}
	if ctx.Err() != nil {
		failures = append(failures, "interrupted")
	}
	rep.Failures = failures
	if o.jsonFile != "" {
		if err := rep.writeJSON(o.jsonFile); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		fmt.Fprintln(out, "FAIL")
		return errors.New(strings.Join(failures, "; "))
	}
	fmt.Fprintln(out, "PASS")
	return nil
}
