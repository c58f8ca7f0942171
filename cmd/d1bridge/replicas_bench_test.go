//go:build linux

package main

// BenchmarkReplicas: describe (HEAD) and get (GET) of one 1 KiB public object
// through the test's round-robin proxy (replicas_harness_test.go) over 1, 2 and 3
// replicas of one replica set (PostgreSQL catalog, versitygw bucket), in the
// same run on the same machine, from parallel keep-alive anonymous clients
// (16 goroutines per GOMAXPROCS; bench_test.go's client).
//
//	go test -run '^$' -bench BenchmarkReplicas -benchtime 5s ./cmd/d1bridge/
//
// Metrics: req/s; x-1replica, req/s over the 1-replica figure of the same
// operation; and where the CPU went, in ms per request: srv-cpu-ms/op (the
// replicas in use), pg-cpu-ms/op (the PostgreSQL cluster: postmaster and its
// backends), s3-cpu-ms/op (versitygw), self-cpu-ms/op (this process: the
// clients and the proxy); busy-% is the whole machine's CPU use during the
// loop (100 = every core busy, whoever used it).

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func BenchmarkReplicas(b *testing.B) {
	rs := startReplicas(b, 3)
	const pid = "rs-bench-1KiB"
	data := genBytes(14, 1<<10)
	sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
	sm.RightsHolder = rsWriter
	if a := rs.send(b.Context(), http.MethodPost, rs.node(0).URL+mnp(2, "/object"), rsWriter, createParts(sm, bytes.NewReader(data), false)...); a.status != http.StatusOK {
		b.Fatalf("create: %s", a)
	}
	c := benchNewClient()
	u := rs.proxy.URL() + objectPath(2, pid)
	pgPort := rsPort(rs.dsn)
	s3Addr := strings.TrimPrefix(rs.s3.Endpoint, "http://")
	one := map[string]float64{}
	for _, op := range []struct{ name, method string }{{"describe", http.MethodHead}, {"get", http.MethodGet}} {
		for k := 1; k <= 3; k++ {
			b.Run(fmt.Sprintf("%s/replicas=%d", op.name, k), func(b *testing.B) {
				rs.proxy.limit.Store(int32(k))
				defer rs.proxy.limit.Store(0)
				for range 2 * k { // every replica in use has answered once
					if n, err := benchFetch(c, op.method, u, nil); err != nil || op.method == http.MethodGet && n != int64(len(data)) {
						b.Fatalf("%s: %d bytes, %v", op.name, n, err)
					}
				}
				srv0 := rsReplicaCPU(b, rs, k)
				pg0 := rsProcCPU(func(args []string) bool {
					return filepath.Base(args[0]) == "postgres" && rsHasArgs(args, "-p", pgPort)
				})
				s30 := rsProcCPU(func(args []string) bool {
					return filepath.Base(args[0]) == "versitygw" && rsHasArgs(args, "--port", s3Addr)
				})
				self0 := rsSelfCPU()
				busy0, total0 := rsMachineCPU()
				b.SetParallelism(16)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := benchFetch(c, op.method, u, nil); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				n := float64(b.N)
				perOp := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / n }
				rps := n / b.Elapsed().Seconds()
				b.ReportMetric(rps, "req/s")
				if k == 1 {
					one[op.name] = rps
				} else if base := one[op.name]; base > 0 {
					b.ReportMetric(rps/base, "x-1replica")
				}
				b.ReportMetric(perOp(rsReplicaCPU(b, rs, k)-srv0), "srv-cpu-ms/op")
				b.ReportMetric(perOp(rsProcCPU(func(args []string) bool {
					return filepath.Base(args[0]) == "postgres" && rsHasArgs(args, "-p", pgPort)
				})-pg0), "pg-cpu-ms/op")
				b.ReportMetric(perOp(rsProcCPU(func(args []string) bool {
					return filepath.Base(args[0]) == "versitygw" && rsHasArgs(args, "--port", s3Addr)
				})-s30), "s3-cpu-ms/op")
				b.ReportMetric(perOp(rsSelfCPU()-self0), "self-cpu-ms/op")
				busy1, total1 := rsMachineCPU()
				if total1 > total0 {
					b.ReportMetric(100*float64(busy1-busy0)/float64(total1-total0), "busy-%")
				}
			})
		}
	}
}

// rsPort is the port of a pgx URL DSN.
func rsPort(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	return u.Port()
}

func rsHasArgs(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

// rsReplicaCPU is the CPU time the first k replicas have used.
func rsReplicaCPU(tb testing.TB, rs *replicaSet, k int) time.Duration {
	var d time.Duration
	for i := range k {
		d += benchCPU(tb, rs.node(i))
	}
	return d
}

// rsProcCPU is the CPU time (user and system) of the processes whose command
// line match accepts and of their live children (PostgreSQL's backends).
func rsProcCPU(match func(args []string) bool) time.Duration {
	ents, _ := os.ReadDir("/proc")
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}
	var roots []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		procs[pid] = proc{ppid, ut + stime}
		if cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && len(cl) > 0 {
			if args := strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00"); match(args) {
				roots = append(roots, pid)
			}
		}
	}
	var ticks int64
	for _, r := range roots {
		ticks += procs[r].ticks
		for _, p := range procs {
			if p.ppid == r {
				ticks += p.ticks
			}
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// rsSelfCPU is this process's CPU time.
func rsSelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rsMachineCPU is the machine's busy and total CPU ticks (/proc/stat).
func rsMachineCPU() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is counted in user already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}
