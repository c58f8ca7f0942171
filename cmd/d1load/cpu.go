package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The client usually shares the machine with the node it measures, and a
// latency tail measured on a busy machine is partly the machine's: at half
// of a node's closed-loop capacity, the client and the node together kept
// two CPUs 83% busy, the client taking as much as the node (issue 17). So
// each phase reports how busy the machine's CPUs were and d1load's own part.

// cpuTime is the machine's CPU time (all CPUs, from /proc/stat) and this
// process's, at one instant.
type cpuTime struct {
	busy, all time.Duration // machine; all is 0 where /proc/stat is missing
	self      time.Duration // user and system time of d1load
}

// clockTick is USER_HZ, the unit of /proc/stat: 100 on every Linux ABI Go
// supports.
const clockTick = 10 * time.Millisecond

func readCPUTime() cpuTime {
	var c cpuTime
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	f, err := os.Open("/proc/stat")
	if err != nil {
		return c
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return c
	}
	c.busy, c.all = parseCPULine(line)
	return c
}

// parseCPULine reads the first line of /proc/stat ("cpu user nice system
// idle iowait irq softirq steal ..."): the time all CPUs were busy, and in all.
func parseCPULine(line string) (busy, all time.Duration) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	var t [8]int64
	for i := range t {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return 0, 0
		}
		t[i] = n
	}
	idle := t[3] + t[4] // idle, iowait
	total := t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7]
	return time.Duration(total-idle) * clockTick, time.Duration(total) * clockTick
}

// cpuShare is what the phase from a to b cost: the percentage of the
// machine's CPU time that was busy, and the percentage d1load took
// (0, 0 where the machine's time is unknown).
func cpuShare(a, b cpuTime) (machinePct, clientPct float64) {
	all := b.all - a.all
	if a.all == 0 || all <= 0 {
		return 0, 0
	}
	return 100 * float64(b.busy-a.busy) / float64(all), 100 * float64(b.self-a.self) / float64(all)
}
