package main

// Several replicas of the binary on one catalog and one bucket (issue 14's
// Done-when): a real PostgreSQL (pgtest), a real S3 server (versitygw), three
// d1bridge processes with the same auth.signingKey behind a round-robin reverse
// proxy written here (rsProxy; the harness is in replicas_harness_test.go),
// clients creating, updating, changing system metadata and access policies,
// reading and harvesting the log (replicas_workload_test.go) while a random
// replica is killed with SIGKILL every ~15 s and restarted. Afterwards every
// acknowledged write is checked on every replica directly, access revocation is
// timed across replicas, and the clients' history of each identifier's
// serialVersion is checked for linearizability (replicas_history_test.go).
//
//	go test -run TestReplicasChaos -v ./cmd/d1bridge/
//	D1BRIDGE_REPLICAS_DURATION=120s D1BRIDGE_REPLICAS_CLIENTS=8 go test -run TestReplicasChaos -v ./cmd/d1bridge/
//
// What the test does not check yet: with the code as committed, accepted
// replication jobs are files in one replica's dataDir and every replica runs
// its own harvester (issue 14, item 2). Once jobs and leases live in the
// catalog, two more subtests belong here:
//   - ReplicationJobs: a source node whose CN role counts
//     setReplicationStatus calls (replicate_durable_test.go's pair);
//     replicate requests for N objects sent through the proxy during the
//     chaos; afterwards every job completed exactly once (one "completed"
//     per pid at the CN, one getReplica per pid in the source's log), the
//     bytes on every replica, none lost to a killed replica, none left
//     queued (the jobs table empty or all done).
//   - HarvestLease: an upstream that every replica harvests (an httptest
//     sitemap the test serves, harvest.interval of a second); during the
//     chaos the test reads the leases row from PostgreSQL every 100 ms: its
//     epoch never goes back and changes holder only after the holder was
//     killed or its lease expired; the source sees no two pages fetched
//     under one epoch by two replicas; afterwards each harvested record
//     exists exactly once and the checkpoint is the last page.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// rsDuration and rsCount read a setting of the test from the environment,
// with a default.
func rsDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
	}
	return def
}

func rsCount(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// rsWriteEvents is "pid event" of every acknowledged write: the create of an
// object a create made, the update of the object an update obsoleted (an
// update is logged on the object it obsoletes).
func rsWriteEvents(w *rsWorld) map[string]bool {
	want := map[string]bool{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for pid := range w.acked {
		if strings.HasPrefix(pid, "rs-c-") {
			want[pid+" "+adapter.EventCreate] = true
		}
	}
	for old := range w.updates {
		want[old+" "+adapter.EventUpdate] = true
	}
	return want
}

// checkWriteEvents reports every acknowledged write whose event is missing
// or present more than once among entries.
func checkWriteEvents(t *testing.T, where string, w *rsWorld, entries []adapter.LogEntry) {
	t.Helper()
	want := rsWriteEvents(w)
	got := map[string]int{}
	for _, e := range entries {
		if k := e.Identifier + " " + e.Event; want[k] {
			got[k]++
		}
	}
	var missing, doubled []string
	for k := range want {
		switch n := got[k]; {
		case n == 0:
			w.mu.Lock()
			missing = append(missing, k+" ("+w.ackedBy[k]+")")
			w.mu.Unlock()
		case n > 1:
			doubled = append(doubled, fmt.Sprintf("%s (%d times)", k, n))
		}
	}
	slices.Sort(missing)
	slices.Sort(doubled)
	if len(missing) > 0 {
		t.Errorf("%s: %d of %d acknowledged writes have no event: %s", where, len(missing), len(want), rsFirst(missing, 10))
	}
	if len(doubled) > 0 {
		t.Errorf("%s: %d acknowledged writes have more than one event: %s", where, len(doubled), rsFirst(doubled, 10))
	}
}

func rsFirst(s []string, n int) string {
	if len(s) > n {
		return strings.Join(s[:n], "; ") + fmt.Sprintf("; ... (%d more)", len(s)-n)
	}
	return strings.Join(s, "; ")
}

// --- the test

// TestReplicasChaos is issue 14's multi-replica test (see the file comment).
// D1BRIDGE_REPLICAS_DURATION (default 60s) is how long the clients run,
// D1BRIDGE_REPLICAS_CLIENTS (default 6) how many there are,
// D1BRIDGE_REPLICAS_KILLEVERY (default 15s) the mean time between kills.
func TestReplicasChaos(t *testing.T) {
	duration := rsDuration("D1BRIDGE_REPLICAS_DURATION", 60*time.Second)
	nClients := rsCount("D1BRIDGE_REPLICAS_CLIENTS", 6)
	killEvery := rsDuration("D1BRIDGE_REPLICAS_KILLEVERY", 15*time.Second)
	started := time.Now()
	rs := startReplicas(t, 3)
	t.Logf("3 replicas, PostgreSQL and versitygw up in %s; %d clients for %s, a kill every ~%s",
		time.Since(started).Round(time.Millisecond), nClients, duration, killEvery)

	// Every replica accepts the tokens, and the CN reads the log.
	for i := range 3 {
		if a := rs.do(t.Context(), http.MethodGet, rs.node(i).URL+"/d1/mn/v2/whoami", nil, "", rsWriter); a.status != http.StatusOK || !bytes.Contains(a.body, []byte("replicas writer")) {
			t.Fatalf("replica %d: whoami with the writer's token: %s", i, a)
		}
	}

	w := newRSWorld()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for i := range nClients {
		c := &rsClient{id: i, rs: rs, w: w, rng: rand.New(rand.NewPCG(uint64(i)+1, 14))}
		wg.Go(func() { c.run(ctx) })
	}
	// One more client harvests the log through the proxy as a CN would,
	// every two seconds.
	harv := &rsHarvester{rs: rs, base: rs.proxy.URL(), seen: map[string]adapter.LogEntry{}}
	wg.Go(func() {
		for ctx.Err() == nil {
			harv.pass(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	})

	// The chaos, on the test's goroutine: kill a random replica every
	// killEvery ± 20%, restart it a second later (on a new port, which the
	// proxy learns).
	rng := rand.New(rand.NewPCG(14, 14))
	end := time.Now().Add(duration)
	var kills []string
	for {
		wait := killEvery*4/5 + time.Duration(rng.Int64N(int64(killEvery*2/5)+1))
		if time.Now().Add(wait).After(end) {
			time.Sleep(time.Until(end))
			break
		}
		time.Sleep(wait)
		i := rng.IntN(3)
		t0 := time.Now()
		rs.killAndRestart(i, time.Second)
		kills = append(kills, fmt.Sprintf("replica %d at %.3fs (back in %s)", i, t0.Sub(w.hist.base).Seconds(), time.Since(t0).Round(time.Millisecond)))
	}
	cancel()
	wg.Wait()
	t.Logf("kills (on the history's clock): %s", strings.Join(kills, "; "))

	w.mu.Lock()
	keys := make([]string, 0, len(w.counts))
	for k := range w.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %-40s %d", k, w.counts[k])
	}
	t.Logf("outcomes (%d acknowledged objects, %d chains updated; proxy: %d retries, %d failures):%s",
		len(w.acked), len(w.updates), rs.proxy.retried.Load(), rs.proxy.failed.Load(), sb.String())
	for _, p := range w.problems {
		t.Errorf("during the chaos: %s", p)
	}
	w.mu.Unlock()
	if len(w.acked) < 10*nClients {
		t.Errorf("only %d acknowledged objects in %s: the replicas hardly served", len(w.acked), duration)
	}

	t.Run("ReadBack", func(t *testing.T) { rsCheckReadBack(t, rs, w) })
	t.Run("ListObjects", func(t *testing.T) { rsCheckList(t, rs, w) })
	t.Run("LogRecords", func(t *testing.T) { rsCheckLog(t, rs, w, harv) })
	t.Run("History", func(t *testing.T) { checkHistory(t, w.hist) })
	t.Run("Revocation", func(t *testing.T) { rsRevocation(t, rs) })
}

// rsCheckReadBack reads every acknowledged object from every replica directly
// and compares its SHA-256 with the one acknowledged.
func rsCheckReadBack(t *testing.T, rs *replicaSet, w *rsWorld) {
	w.mu.Lock()
	objs := make([]*rsObject, 0, len(w.acked))
	for _, o := range w.acked {
		objs = append(objs, o)
	}
	w.mu.Unlock()
	var mu sync.Mutex
	var bad []string
	for i := range 3 {
		s := rs.node(i)
		jobs := make(chan *rsObject)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for o := range jobs {
					a := rs.do(t.Context(), http.MethodGet, s.URL+objectPath(2, o.pid), nil, "", rsWriter)
					sum := sha256.Sum256(a.body)
					if a.status != http.StatusOK || hex.EncodeToString(sum[:]) != o.sum {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("replica %d: %s: %s", i, o.pid, a))
						mu.Unlock()
					}
				}
			})
		}
		for _, o := range objs {
			jobs <- o
		}
		close(jobs)
		wg.Wait()
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d of %d reads of acknowledged objects did not give their bytes: %s", len(bad), 3*len(objs), rsFirst(bad, 10))
	}
	t.Logf("%d acknowledged objects read back byte-identical (SHA-256) from each of the 3 replicas", len(objs)-len(bad)/3)
}

// rsCheckList pages listObjects of every replica, as the CN: every
// acknowledged object once, and nothing no client tried to create.
func rsCheckList(t *testing.T, rs *replicaSet, w *rsWorld) {
	for i := range 3 {
		s := rs.node(i)
		seen := map[string]int{}
		total := -1
		for start := 0; ; start += 1000 {
			a := rs.do(t.Context(), http.MethodGet, s.URL+mnp(2, "/object")+fmt.Sprintf("?start=%d&count=1000", start), nil, "", rsCN)
			if a.status != http.StatusOK {
				t.Fatalf("replica %d: listObjects start=%d: %s", i, start, a)
			}
			l := &adapter.ObjectList{}
			if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
				t.Fatalf("replica %d: listObjects: %v", i, err)
			}
			if total < 0 {
				total = l.Total
			} else if l.Total != total {
				t.Errorf("replica %d: listObjects total %d at start=%d, %d at start=0", i, l.Total, start, total)
			}
			for _, oi := range l.ObjectInfo {
				seen[oi.Identifier]++
			}
			if len(l.ObjectInfo) < 1000 {
				break
			}
		}
		w.mu.Lock()
		var missing, twice, phantom []string
		for pid := range w.acked {
			if seen[pid] == 0 {
				missing = append(missing, pid)
			}
		}
		n := 0
		for pid, k := range seen {
			n += k
			if k > 1 {
				twice = append(twice, pid)
			}
			if !w.attempted[pid] {
				phantom = append(phantom, pid)
			}
		}
		acked := len(w.acked)
		w.mu.Unlock()
		if len(missing) > 0 {
			t.Errorf("replica %d: listObjects lacks %d of %d acknowledged objects: %s", i, len(missing), acked, rsFirst(missing, 10))
		}
		if len(twice) > 0 {
			t.Errorf("replica %d: listObjects lists %d objects more than once: %s", i, len(twice), rsFirst(twice, 10))
		}
		if len(phantom) > 0 {
			t.Errorf("replica %d: listObjects lists %d objects no client created: %s", i, len(phantom), rsFirst(phantom, 10))
		}
		if n != total {
			t.Errorf("replica %d: listObjects total %d, but its pages hold %d entries", i, total, n)
		}
		t.Logf("replica %d: listObjects: %d objects (%d acknowledged, the rest writes whose answer was lost)", i, total, acked)
	}
}

// rsCheckLog pages getLogRecords of every replica as the CN, and checks the
// harvest made during the chaos: every acknowledged write's event exactly
// once, entry ids unique.
func rsCheckLog(t *testing.T, rs *replicaSet, w *rsWorld, harv *rsHarvester) {
	for i := range 3 {
		base := rs.node(i).URL
		var entries []adapter.LogEntry
		ids := map[string]int{}
		for start := 0; ; start += rsLogPage {
			a := rs.do(t.Context(), http.MethodGet, base+mnp(2, "/log")+fmt.Sprintf("?start=%d&count=%d", start, rsLogPage), nil, "", rsCN)
			if a.status != http.StatusOK {
				t.Fatalf("replica %d: getLogRecords start=%d: %s", i, start, a)
			}
			l := &adapter.Log{}
			if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
				t.Fatalf("replica %d: getLogRecords: %v", i, err)
			}
			for _, e := range l.LogEntry {
				ids[e.EntryID]++
			}
			entries = append(entries, l.LogEntry...)
			if len(l.LogEntry) < rsLogPage {
				break
			}
		}
		var dup []string
		for id, n := range ids {
			if n > 1 {
				dup = append(dup, id)
			}
		}
		if len(dup) > 0 {
			t.Errorf("replica %d: getLogRecords repeats %d entry ids over its pages: %s", i, len(dup), rsFirst(dup, 10))
		}
		checkWriteEvents(t, fmt.Sprintf("replica %d, getLogRecords paged", i), w, entries)
		t.Logf("replica %d: getLogRecords: %d entries", i, len(entries))
	}

	// The CN's harvest through the proxy: one last pass now that the writes
	// have stopped, then what it gathered pass after pass.
	if !harv.pass(t.Context()) {
		t.Fatal("the last harvest pass failed with every replica up")
	}
	entries := make([]adapter.LogEntry, 0, len(harv.seen))
	for _, e := range harv.seen {
		entries = append(entries, e)
	}
	t.Logf("the CN's harvest through the proxy: %d passes (%d abandoned), %d entries", harv.passes, harv.failures, len(entries))
	if len(harv.repeats) > 0 {
		t.Errorf("the harvest met %d entries twice within one pass (paging shifted): %s", len(harv.repeats), rsFirst(harv.repeats, 10))
	}
	checkWriteEvents(t, "the CN's harvest by fromDate during the chaos", w, entries)
}

// --- revocation

// rsRevocation times how long a revoked read stays granted on another
// replica: per trial, an object readable by rsReader is created through
// replica A and read through B with the reader's token (so that B has
// decided, and may have cached, the grant); the read is revoked through A;
// then B is polled with the reader's token until it refuses. The bound is
// issue 14's: p99 under 1 s over at least 100 trials.
func rsRevocation(t *testing.T, rs *replicaSet) {
	const (
		trials   = 100
		parallel = 5
		poll     = 25 * time.Millisecond
		giveUp   = 2 * time.Second // a trial still granted then counts as +Inf
	)
	lat := make([]time.Duration, trials)
	var mu sync.Mutex
	var errs []string
	fail := func(format string, a ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	ctx := t.Context()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for k := range jobs {
				lat[k] = time.Duration(math.MaxInt64)
				a, b := rs.node(k%3), rs.node((k+1)%3)
				pid := fmt.Sprintf("rs-revoke-%d", k)
				data := genBytes(uint64(k)+900, 512)
				sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
				sm.RightsHolder = rsWriter
				sm.AccessPolicy = &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{rsReader}, Permission: []adapter.Permission{adapter.PermRead}}}}
				if r := rs.send(ctx, http.MethodPost, a.URL+mnp(2, "/object"), rsWriter, createParts(sm, bytes.NewReader(data), false)...); r.status != http.StatusOK {
					fail("trial %d: create through A: %s", k, r)
					continue
				}
				if r := rs.do(ctx, http.MethodGet, b.URL+metaPath(2, pid), nil, "", rsReader); r.status != http.StatusOK {
					fail("trial %d: the reader's read through B before the revocation: %s", k, r)
					continue
				}
				revoked := &adapter.AccessPolicy{Allow: []adapter.AccessRule{{Subject: []string{rsOther}, Permission: []adapter.Permission{adapter.PermRead}}}}
				if r := rs.send(ctx, http.MethodPut, a.URL+mnp(2, "/accessRules/"+segment(pid)), rsWriter,
					textPart("serialVersion", "1"), docPart("accessPolicy", revoked)); r.status != http.StatusOK {
					fail("trial %d: setAccessPolicy through A: %s", k, r)
					continue
				}
				t0 := time.Now()
				for time.Since(t0) < giveUp {
					r := rs.do(ctx, http.MethodGet, b.URL+metaPath(2, pid), nil, "", rsReader)
					if r.status == http.StatusOK {
						time.Sleep(poll)
						continue
					}
					if name, _ := r.exception(); r.status != http.StatusUnauthorized || name != "NotAuthorized" {
						fail("trial %d: B's refusal is %s, want 401 NotAuthorized", k, r)
					}
					lat[k] = time.Since(t0)
					break
				}
			}
		})
	}
	for k := range trials {
		jobs <- k
	}
	close(jobs)
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	q := func(p float64) time.Duration { return sorted[int(math.Ceil(p*float64(len(sorted))))-1] }
	show := func(d time.Duration) string {
		if d == time.Duration(math.MaxInt64) {
			return fmt.Sprintf(">%s (still granted)", giveUp)
		}
		return d.Round(time.Millisecond).String()
	}
	late := 0
	for _, d := range lat {
		if d > time.Second {
			late++
		}
	}
	t.Logf("revocation through A seen by B: %d trials, p50 %s, p99 %s, max %s; %d over 1s (polling every %s)",
		trials, show(q(0.5)), show(q(0.99)), show(sorted[len(sorted)-1]), late, poll)
	if q(0.99) >= time.Second {
		t.Errorf("p99 of the revocation latency across replicas is %s, want under 1s (issue 14)", show(q(0.99)))
	}
}
