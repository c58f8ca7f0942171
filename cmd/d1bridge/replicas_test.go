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
// The background work the replicas share runs through the chaos too:
//   - HarvestLease: the replicas harvest one files upstream as datasets
//     (every second, leaseTTL 3s) while the test adds folders to it; the
//     lease's row in PostgreSQL is read every 100 ms, and its fencing epoch
//     must never go back; afterwards each folder is registered exactly once
//     (one create event per identifier of its package, listed once, its
//     files read back), and nothing else under the source's prefix.
//   - ReplicationJobs: one more d1bridge is a source member node; the test,
//     as the CN, asks the replicas through the proxy to replicate each of its
//     objects (again after an answer lost with a replica); the source holds
//     every getReplica 2 s. Afterwards each replica is stored exactly once
//     (one create event, listed once, its bytes on every replica), the jobs
//     table holds one done job per object and nothing queued, running or
//     failed, the source was asked no more often than the job ran, and the
//     CN heard completed at least once and at most once per attempt.
//
// Every other kill is aimed: at a replica running a replication copy, or at
// the holder of the dataset lease (waiting up to 2 s for one), so that a
// job's rescue and a lease's takeover happen in every run.
//
//	go test -run TestReplicasChaos -v ./cmd/d1bridge/
//	D1BRIDGE_REPLICAS_DURATION=120s D1BRIDGE_REPLICAS_CLIENTS=8 go test -run TestReplicasChaos -v ./cmd/d1bridge/

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	const (
		nReplObjects  = 30 // the source's objects, each replicated during the chaos
		nDatasets     = 24 // folders added to the harvested source during the chaos
		firstDatasets = 3  // folders there before the replicas start
	)
	started := time.Now()
	w := newRSWorld()
	ds := &rsDatasets{root: t.TempDir()}
	for range firstDatasets {
		if err := ds.add(w); err != nil {
			t.Fatal(err)
		}
	}
	repl := newRSReplication(t, nReplObjects)
	rs := startReplicas(t, 3, ds.options(), repl.options())
	repl.rs = rs
	t.Logf("3 replicas, PostgreSQL and versitygw up (and the source node with %d objects) in %s; %d clients for %s, a kill every ~%s",
		nReplObjects, time.Since(started).Round(time.Millisecond), nClients, duration, killEvery)

	// Every replica accepts the tokens, and the CN reads the log.
	for i := range 3 {
		if a := rs.do(t.Context(), http.MethodGet, rs.node(i).URL+"/d1/mn/v2/whoami", nil, "", rsWriter); a.status != http.StatusOK || !bytes.Contains(a.body, []byte("replicas writer")) {
			t.Fatalf("replica %d: whoami with the writer's token: %s", i, a)
		}
	}

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
	// The background work: folders added to the harvested source, the
	// harvest lease watched (until its check), replicates asked as a CN.
	wg.Go(func() {
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(duration / nDatasets):
			}
			if err := ds.add(w); err != nil {
				w.problem("adding a dataset folder: %v", err)
				return
			}
		}
	})
	lw := newRSLeaseWatch(rs, "datasets:"+rsDatasetSource)
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	var watching sync.WaitGroup
	watching.Go(func() { lw.run(watchCtx) })
	wg.Go(func() { repl.drive(t.Context(), ctx, w, duration*9/10/nReplObjects) })

	// The chaos, on the test's goroutine: kill a replica every killEvery ±
	// 20%, restart it a second later (on a new port, which the proxy
	// learns). The replica is drawn at random; every other kill is then
	// aimed, at one running a replication copy (even kills) or at the
	// holder of the dataset lease (odd kills), when there is one.
	rng := rand.New(rand.NewPCG(14, 14))
	end := time.Now().Add(duration)
	var kills []string
	for k := 0; ; k++ {
		wait := killEvery*4/5 + time.Duration(rng.Int64N(int64(killEvery*2/5)+1))
		if time.Now().Add(wait).After(end) {
			time.Sleep(time.Until(end))
			break
		}
		time.Sleep(wait)
		i := rng.IntN(3)
		why := "at random"
		if k%2 == 0 {
			if j, pid := repl.runningOn(ctx, 2*time.Second); j >= 0 {
				i, why = j, "copying "+pid
			}
		} else if j, epoch := lw.heldBy(ctx, rs, 2*time.Second); j >= 0 {
			i, why = j, fmt.Sprintf("holding the dataset lease at epoch %d", epoch)
		}
		t0 := time.Now()
		victim := rs.node(i).cmd.Process.Pid
		rs.killAndRestart(i, time.Second)
		// Its jobs stay running under its holder until their lease
		// expires (5s): read them now.
		if err := repl.killed(t.Context(), victim); err != nil {
			t.Errorf("reading the jobs of the killed replica %d: %v", i, err)
		}
		kills = append(kills, fmt.Sprintf("replica %d %s at %.3fs (back in %s)", i, why, t0.Sub(w.hist.base).Seconds(), time.Since(t0).Round(time.Millisecond)))
	}
	cancel()
	wg.Wait()
	t.Logf("kills (on the history's clock): %s", strings.Join(kills, "; "))

	// What the chaos left of the shared work: the replication jobs drain
	// (a job rescued from a killed replica waits out its 5s lease), the
	// harvest registers the last folders.
	drained := repl.drain(t.Context(), 30*time.Second)
	settled, unsettled := ds.settle(t.Context(), rs, 30*time.Second)
	t.Logf("after the chaos: the replication jobs drained in %s, the harvest had every folder in %s (still missing: %v)",
		drained.Round(time.Millisecond), settled.Round(time.Millisecond), unsettled)

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

	pages := &rsPages{rs: rs}
	t.Run("ReadBack", func(t *testing.T) { rsCheckReadBack(t, rs, w) })
	t.Run("ListObjects", func(t *testing.T) { rsCheckList(t, pages, w) })
	t.Run("LogRecords", func(t *testing.T) { rsCheckLog(t, pages, w, harv) })
	t.Run("HarvestLease", func(t *testing.T) {
		stopWatch()
		watching.Wait()
		rsCheckHarvest(t, pages, ds, lw)
	})
	t.Run("ReplicationJobs", func(t *testing.T) { rsCheckReplication(t, pages, repl) })
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

// rsPages are each replica's listObjects and getLogRecords, paged as the CN
// once the chaos is over, for every check that reads them.
type rsPages struct {
	rs    *replicaSet
	mu    sync.Mutex
	lists map[int]*rsListing
	logs  map[int][]adapter.LogEntry
}

// rsListing is one replica's listObjects, paged.
type rsListing struct {
	seen  map[string]int // pid -> how many times listed
	total int            // the total the first page gave
	n     int            // entries over the pages
	errs  []string       // totals that changed from page to page
}

// list is replica i's listObjects, paged 1000 at a time.
func (p *rsPages) list(t *testing.T, i int) *rsListing {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.lists[i]; l != nil {
		return l
	}
	s := p.rs.node(i)
	out := &rsListing{seen: map[string]int{}, total: -1}
	for start := 0; ; start += 1000 {
		a := p.rs.do(t.Context(), http.MethodGet, s.URL+mnp(2, "/object")+fmt.Sprintf("?start=%d&count=1000", start), nil, "", rsCN)
		if a.status != http.StatusOK {
			t.Fatalf("replica %d: listObjects start=%d: %s", i, start, a)
		}
		l := &adapter.ObjectList{}
		if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
			t.Fatalf("replica %d: listObjects: %v", i, err)
		}
		if out.total < 0 {
			out.total = l.Total
		} else if l.Total != out.total {
			out.errs = append(out.errs, fmt.Sprintf("listObjects total %d at start=%d, %d at start=0", l.Total, start, out.total))
		}
		for _, oi := range l.ObjectInfo {
			out.seen[oi.Identifier]++
			out.n++
		}
		if len(l.ObjectInfo) < 1000 {
			break
		}
	}
	if p.lists == nil {
		p.lists = map[int]*rsListing{}
	}
	p.lists[i] = out
	return out
}

// log is replica i's getLogRecords, paged rsLogPage at a time.
func (p *rsPages) log(t *testing.T, i int) []adapter.LogEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.logs[i]; ok {
		return l
	}
	base := p.rs.node(i).URL
	var entries []adapter.LogEntry
	for start := 0; ; start += rsLogPage {
		a := p.rs.do(t.Context(), http.MethodGet, base+mnp(2, "/log")+fmt.Sprintf("?start=%d&count=%d", start, rsLogPage), nil, "", rsCN)
		if a.status != http.StatusOK {
			t.Fatalf("replica %d: getLogRecords start=%d: %s", i, start, a)
		}
		l := &adapter.Log{}
		if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
			t.Fatalf("replica %d: getLogRecords: %v", i, err)
		}
		entries = append(entries, l.LogEntry...)
		if len(l.LogEntry) < rsLogPage {
			break
		}
	}
	if p.logs == nil {
		p.logs = map[int][]adapter.LogEntry{}
	}
	p.logs[i] = entries
	return entries
}

// rsCheckList pages listObjects of every replica, as the CN: every
// acknowledged object once, and nothing no client tried to create (the
// clients', the harvested folders' and the replicas' identifiers).
func rsCheckList(t *testing.T, pages *rsPages, w *rsWorld) {
	for i := range 3 {
		l := pages.list(t, i)
		for _, e := range l.errs {
			t.Errorf("replica %d: %s", i, e)
		}
		w.mu.Lock()
		var missing, twice, phantom []string
		for pid := range w.acked {
			if l.seen[pid] == 0 {
				missing = append(missing, pid)
			}
		}
		for pid, k := range l.seen {
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
		if l.n != l.total {
			t.Errorf("replica %d: listObjects total %d, but its pages hold %d entries", i, l.total, l.n)
		}
		t.Logf("replica %d: listObjects: %d objects (%d acknowledged client writes; the rest harvested, replicas, or writes whose answer was lost)", i, l.total, acked)
	}
}

// rsCheckLog pages getLogRecords of every replica as the CN, and checks the
// harvest made during the chaos: every acknowledged write's event exactly
// once, entry ids unique.
func rsCheckLog(t *testing.T, pages *rsPages, w *rsWorld, harv *rsHarvester) {
	for i := range 3 {
		entries := pages.log(t, i)
		ids := map[string]int{}
		for _, e := range entries {
			ids[e.EntryID]++
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

// rsCreates counts the create events of each identifier among entries.
func rsCreates(entries []adapter.LogEntry) map[string]int {
	n := map[string]int{}
	for _, e := range entries {
		if e.Event == adapter.EventCreate {
			n[e.Identifier]++
		}
	}
	return n
}

// rsExactlyOnce reports the identifiers of want that are not counted
// exactly once in got.
func rsExactlyOnce(want []string, got map[string]int) []string {
	var bad []string
	for _, pid := range want {
		if n := got[pid]; n != 1 {
			bad = append(bad, fmt.Sprintf("%s (%d times)", pid, n))
		}
	}
	slices.Sort(bad)
	return bad
}

// --- shared background work

// rsCheckHarvest checks the dataset source every replica harvested: the
// lease's epoch never went back while the test read it, and every folder
// written is registered exactly once (each identifier of its package created
// once in the log and listed once, on every replica), nothing else under
// the source's prefix, and its files read back from every replica.
func rsCheckHarvest(t *testing.T, pages *rsPages, ds *rsDatasets, lw *rsLeaseWatch) {
	lw.mu.Lock()
	orphaned := slices.Sorted(maps.Keys(lw.orphaned))
	t.Logf("the lease %s read %d times (every %s): epochs %d to %d (%d of them seen), %d holders, %d read failures; held by a dead or stalled holder past its expiry at epochs %v",
		lw.name, lw.reads, rsLeasePoll, lw.first.epoch, lw.last.epoch, lw.epochs, len(lw.holders), len(lw.failures), orphaned)
	if len(lw.backwards) > 0 {
		t.Errorf("the lease's fencing epoch went back or changed holder in place %d times: %s", len(lw.backwards), rsFirst(lw.backwards, 10))
	}
	if len(lw.failures) > 0 {
		t.Errorf("%d reads of the lease failed: %s", len(lw.failures), rsFirst(lw.failures, 3))
	}
	if lw.reads == 0 || lw.last.epoch-lw.first.epoch < 3 {
		t.Errorf("the lease went from epoch %d to %d over %d reads: the replicas hardly harvested", lw.first.epoch, lw.last.epoch, lw.reads)
	}
	lw.mu.Unlock()

	sets := ds.all()
	var want []string
	expected := map[string]bool{}
	for _, d := range sets {
		want = append(want, d.pids...)
		for _, pid := range d.pids {
			expected[pid] = true
		}
	}
	harvested := func(pid string) bool {
		return strings.HasPrefix(pid, rsDatasetPrefix) || strings.HasPrefix(pid, "resource_map_"+rsDatasetPrefix)
	}
	for i := range 3 {
		l := pages.list(t, i)
		creates := rsCreates(pages.log(t, i))
		if bad := rsExactlyOnce(want, creates); len(bad) > 0 {
			t.Errorf("replica %d: %d of the %d identifiers of the folders' packages have not exactly one create event: %s", i, len(bad), len(want), rsFirst(bad, 10))
		}
		if bad := rsExactlyOnce(want, l.seen); len(bad) > 0 {
			t.Errorf("replica %d: %d of the %d identifiers of the folders' packages are not listed exactly once: %s", i, len(bad), len(want), rsFirst(bad, 10))
		}
		var extra []string
		for pid := range l.seen {
			if harvested(pid) && !expected[pid] {
				extra = append(extra, pid)
			}
		}
		for pid := range creates {
			if harvested(pid) && !expected[pid] && l.seen[pid] == 0 {
				extra = append(extra, pid+" (logged)")
			}
		}
		if len(extra) > 0 {
			slices.Sort(extra)
			t.Errorf("replica %d: %d identifiers under the source's prefix belong to no folder's first version: %s", i, len(extra), rsFirst(extra, 10))
		}
		var unread []string
		for _, d := range sets {
			for name, b := range d.files {
				pid := rsDatasetPrefix + d.name + "@v1/" + name
				if a := pages.rs.do(t.Context(), http.MethodGet, pages.rs.node(i).URL+objectPath(2, pid), nil, "", rsCN); a.status != http.StatusOK || !bytes.Equal(a.body, b) {
					unread = append(unread, fmt.Sprintf("%s: %s", pid, a))
				}
			}
		}
		if len(unread) > 0 {
			t.Errorf("replica %d: %d harvested files do not read back: %s", i, len(unread), rsFirst(unread, 10))
		}
	}
	t.Logf("%d dataset folders, %d identifiers: each created and listed once on every replica, its files read back", len(sets), len(want))
}

// rsCheckReplication checks the replicate requests accepted during the
// chaos: each replica stored exactly once (one create event, listed once,
// byte-identical on every replica), one job per object in the jobs table,
// done, none queued, running or failed; the source asked for it no more
// often than its job ran, and the CN told completed at least once and at
// most once per attempt, never failed.
func rsCheckReplication(t *testing.T, pages *rsPages, r *rsReplication) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.problems {
		t.Error(p)
	}
	for _, p := range r.badNotices {
		t.Errorf("the CN endpoint got %s", p)
	}
	var accepted []string
	lost := 0
	for _, o := range r.objs {
		how, ok := r.accepted[o.pid]
		if !ok {
			t.Errorf("replicate %s: no answer decided", o.pid)
			continue
		}
		accepted = append(accepted, o.pid)
		if strings.HasPrefix(how, "accepted by a try before") {
			lost++
		}
	}
	t.Logf("%d replicate requests sent for %d objects, %d answered by no decision (a replica killed), %d accepted (%d of them by a try whose answer was lost)",
		r.calls, len(r.objs), r.unknown, len(accepted), lost)

	jobs, err := r.jobs(t.Context())
	if err != nil {
		t.Fatalf("reading the jobs table: %v", err)
	}
	byPID := map[string][]rsJobRow{}
	states := map[string]int{}
	for _, j := range jobs {
		states[j.state]++
		pid, ok := strings.CutPrefix(j.key, testNodeID+" ")
		if !ok {
			t.Errorf("a replicate job with key %q, not %q and a pid", j.key, testNodeID)
			continue
		}
		byPID[pid] = append(byPID[pid], j)
	}
	attempts := map[int]int{}
	rescues, fetches, completed := 0, 0, 0
	for _, pid := range accepted {
		js := byPID[pid]
		delete(byPID, pid)
		if len(js) != 1 {
			t.Errorf("%s: %d replicate jobs, want 1: %+v", pid, len(js), js)
			continue
		}
		j := js[0]
		attempts[j.attempt]++
		rescues += j.attempt - 1
		if j.state != "done" || j.attempt < 1 || j.attempt > j.limit {
			t.Errorf("%s: its job is %s after %d of %d attempts (%s), want done", pid, j.state, j.attempt, j.limit, j.err)
		}
		// A job runs again only when the replica running it was killed.
		if k := r.orphaned[pid]; j.attempt-1 > k {
			t.Errorf("%s: its job ran %d times, and a replica running it was killed %d times", pid, j.attempt, k)
		}
		f := r.fetches[pid]
		fetches += f
		if f < 1 || f > j.attempt {
			t.Errorf("%s: the source was asked for the replica %d times by a job that ran %d times", pid, f, j.attempt)
		}
		n := 0
		for _, st := range r.notices[pid] {
			if st == adapter.ReplicaCompleted {
				n++
			} else {
				t.Errorf("%s: the CN was told %q", pid, st)
			}
		}
		completed += n
		if n < 1 || n > j.attempt {
			t.Errorf("%s: the CN was told completed %d times by a job that ran %d times", pid, n, j.attempt)
		}
	}
	for pid, js := range byPID {
		t.Errorf("%s: %d replicate jobs for no accepted replicate: %+v", pid, len(js), js)
	}
	orphaned := 0
	for _, k := range r.orphaned {
		orphaned += k
	}
	t.Logf("replicate jobs: %v by state; attempts %v (attempts: jobs), %d rescues of the %d jobs a kill cut short; %d getReplica requests at the source; %d completed reports at the CN",
		states, attempts, rescues, orphaned, fetches, completed)
	if rescues == 0 {
		t.Logf("no replication job was rescued in this run: no kill found a copy in flight")
	}

	for i := range 3 {
		l := pages.list(t, i)
		creates := rsCreates(pages.log(t, i))
		if bad := rsExactlyOnce(accepted, creates); len(bad) > 0 {
			t.Errorf("replica %d: %d of %d replicas have not exactly one create event: %s", i, len(bad), len(accepted), rsFirst(bad, 10))
		}
		if bad := rsExactlyOnce(accepted, l.seen); len(bad) > 0 {
			t.Errorf("replica %d: %d of %d replicas are not listed exactly once: %s", i, len(bad), len(accepted), rsFirst(bad, 10))
		}
		for _, e := range pages.log(t, i) {
			if e.Event == adapter.EventReplicationFailed {
				t.Errorf("replica %d: %s logged for %s", i, e.Event, e.Identifier)
			}
		}
		var bad []string
		for _, o := range r.objs {
			if _, ok := r.accepted[o.pid]; !ok {
				continue
			}
			a := pages.rs.do(t.Context(), http.MethodGet, pages.rs.node(i).URL+objectPath(2, o.pid), nil, "", rsCN)
			sum := sha256.Sum256(a.body)
			if a.status != http.StatusOK || hex.EncodeToString(sum[:]) != o.sum {
				bad = append(bad, fmt.Sprintf("%s: %s", o.pid, a))
			}
		}
		if len(bad) > 0 {
			t.Errorf("replica %d: %d replicas do not read back byte-identical: %s", i, len(bad), rsFirst(bad, 10))
		}
	}
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

// TestGetReplicaV1SeriesID: on /v1/ a series id names nothing (API.md §10
// rule 15), for getReplica as for get; getReplica served the head of the
// series and logged a replicate event on it.
func TestGetReplicaV1SeriesID(t *testing.T) {
	s := startServer(t, "", adminEnv)
	data := []byte("the head of a series\n")
	sm := newSysmeta("rv-sid-head", "text/plain", "MD5", data)
	sm.SeriesID = "rv-sid"
	if r := s.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(data), false)...); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	wantError(t, s.get(t, mnp(1, "/object/rv-sid")), http.StatusNotFound, "NotFound")
	wantError(t, s.get(t, mnp(1, "/replica/rv-sid")), http.StatusNotFound, "NotFound")
}

// TestGetReplicaByRegisteredNode: getReplica is called by the target member
// node with its own subject (API.md §3.6, §9 step 2). A node of the registry
// reads a public object as a replica; it was refused unless made a CN
// subject, which hands it every right on every object.
func TestGetReplicaByRegisteredNode(t *testing.T) {
	certPath, _, _, _ := authTokenKeyFiles(t)
	cfgDir := t.TempDir()
	const targetID, targetSubject = "urn:node:rvTarget", "CN=urn:node:rvTarget,DC=dataone,DC=org"
	srcCfg := authWrite(t, cfgDir, "source.yaml", fmt.Appendf(nil, `node:
  cnSubjects: [%q]
auth:
  tokenKeys: [%q]
nodes:
  - id: %s
    baseURL: http://127.0.0.1:1/d1/mn
    subjects: [%q]
`, replCNSubject, certPath, targetID, targetSubject))
	src := startServerConfig(t, "", srcCfg, "D1BRIDGE_NODE_ID="+replSource)

	data := []byte("a public object a registered node replicates\n")
	sm := newSysmeta("rv-public-replica", "application/octet-stream", "SHA-1", data)
	if r := src.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(data), false)...); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	if r := src.get(t, mnp(2, "/object/"+segment(sm.Identifier))); !wantStatus(t, r, http.StatusOK) {
		t.Fatalf("the object is not public")
	}
	target := []string{"Authorization", "Bearer " + authToken(t, authCNKey(), targetSubject)}
	r := src.get(t, mnp(2, "/replica/"+segment(sm.Identifier)), target...)
	if wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
		t.Errorf("getReplica served %q", r.Body)
	}
}

// TestGetReplicaPrivateAskedOfCN: a node of the registry may read a private
// object as a replica when the CN says it asked it for one (isNodeAuthorized
// answers 200), and not when the CN says no (401).
func TestGetReplicaPrivateAskedOfCN(t *testing.T) {
	certPath, _, _, _ := authTokenKeyFiles(t)
	const targetID, targetSubject = "urn:node:rvTarget", "CN=urn:node:rvTarget,DC=dataone,DC=org"
	var allowed atomic.Bool
	var asked atomic.Value
	cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.EscapedPath() + "?" + r.URL.RawQuery)
		if allowed.Load() && r.URL.Query().Get("targetNodeSubject") == targetSubject {
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `<error name="NotAuthorized" errorCode="401" detailCode="4871"><description>no</description></error>`)
	}))
	defer cn.Close()
	srcCfg := authWrite(t, t.TempDir(), "source.yaml", fmt.Appendf(nil, `node:
  cnSubjects: [%q]
auth:
  tokenKeys: [%q]
nodes:
  - id: %s
    baseURL: http://127.0.0.1:1/d1/mn
    subjects: [%q]
replication:
  cnBaseURL: %s
`, replCNSubject, certPath, targetID, targetSubject, cn.URL))
	src := startServerConfig(t, "", srcCfg, "D1BRIDGE_NODE_ID="+replSource)

	data := []byte("a private object the CN asked a node to replicate\n")
	sm := newSysmeta("rv-private+replica", "application/octet-stream", "SHA-1", data)
	sm.AccessPolicy = nil
	if r := src.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(data), false)...); !wantStatus(t, r, http.StatusOK) {
		t.FailNow()
	}
	target := []string{"Authorization", "Bearer " + authToken(t, authCNKey(), targetSubject)}
	if r := src.get(t, mnp(2, "/meta/"+segment(sm.Identifier))); r.Status != http.StatusUnauthorized {
		t.Fatalf("the object is not private: %d\n%s", r.Status, r.Body)
	}
	if r := src.get(t, mnp(2, "/replica/"+segment(sm.Identifier)), target...); r.Status != http.StatusUnauthorized || !bytes.Contains(r.Body, []byte(`name="NotAuthorized"`)) {
		t.Errorf("getReplica of a private object the CN did not ask for: %d\n%s", r.Status, r.Body)
	}
	allowed.Store(true)
	if r := src.get(t, mnp(2, "/replica/"+segment(sm.Identifier)), target...); wantStatus(t, r, http.StatusOK) && !bytes.Equal(r.Body, data) {
		t.Errorf("getReplica served %q", r.Body)
	}
	if got, _ := asked.Load().(string); !strings.HasPrefix(got, "/v2/replicaAuthorizations/rv-private%2Breplica?targetNodeSubject=") {
		t.Errorf("the CN was asked %q", got)
	}
}
