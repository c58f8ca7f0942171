package sqlcatalog

// Several instances on one PostgreSQL catalog: each hears of the others'
// changes through the change log (changes.go), and the event log is seen in
// the order of its dates and ids whoever wrote it.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/sqlcatalogtest"
)

func TestPostgresChangeLog(t *testing.T) {
	t.Parallel()
	pgtest.Start(t)
	t.Run("Heard", func(t *testing.T) { t.Parallel(); testChangesHeard(t, false) })
	t.Run("HeardByPolling", func(t *testing.T) { t.Parallel(); testChangesHeard(t, true) })
	t.Run("Reconnect", func(t *testing.T) { t.Parallel(); testChangesReconnect(t) })
	t.Run("Pruned", func(t *testing.T) { t.Parallel(); testChangesPruned(t) })
	t.Run("EventsInOrder", func(t *testing.T) { t.Parallel(); testEventsInOrder(t) })
	t.Run("FailuresCounted", func(t *testing.T) { t.Parallel(); testChangesFailuresCounted(t) })
	t.Run("Loaded", func(t *testing.T) { t.Parallel(); testChangesLoaded(t) })
}

// heard collects what Follow tells.
type heard struct {
	mu     sync.Mutex
	pids   []string
	resets int
	ch     chan struct{}
}

func follow(c *Catalog) *heard {
	h := &heard{ch: make(chan struct{}, 1000)}
	c.Follow(func(pids []string) {
		h.mu.Lock()
		if pids == nil {
			h.resets++
		}
		h.pids = append(h.pids, pids...)
		h.mu.Unlock()
		h.ch <- struct{}{}
	})
	return h
}

// waitFor waits until h has heard of pid, and returns how long that took.
func (h *heard) waitFor(t *testing.T, pid string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		h.mu.Lock()
		ok := slices.Contains(h.pids, pid)
		h.mu.Unlock()
		if ok {
			return time.Since(start)
		}
		select {
		case <-h.ch:
		case <-deadline:
			t.Fatalf("not told of %s within %v", pid, within)
		}
	}
}

func (h *heard) resetCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resets
}

// testChangesHeard: a change through a reaches b's subscribers and b's record
// cache, at once with notifications and within pollEvery without them.
func testChangesHeard(t *testing.T, polling bool) {
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a := openPostgres(t, dsn)
	var opts []Option
	if polling {
		opts = append(opts, withoutNotifications())
	}
	b := openPostgres(t, dsn, opts...)
	h := follow(b)
	var took []time.Duration
	for i := range 20 {
		pid := fmt.Sprintf("heard-%d", i)
		if err := insertAs(a, ctx, "a", pid, "", ""); err != nil {
			t.Fatal(err)
		}
		h.waitFor(t, pid, 5*time.Second)
		rec, err := b.Lookup(ctx, pid) // now in b's record cache
		if err != nil {
			t.Fatal(err)
		}
		if rec.Meta.Archived {
			t.Fatal("archived before archive")
		}
		start := time.Now()
		if _, err := a.Modify(ctx, pid, func(sm *adapter.SystemMetadata) error { sm.Archived = true; return nil }); err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := b.Lookup(ctx, pid)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Meta.Archived {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: b still reads the record from before a's change", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	// The median: a loaded machine (CI runs with -race beside other
	// packages) stalls one change now and then; each was seen within 5s.
	slices.Sort(took)
	median := took[len(took)/2]
	limit := 250 * time.Millisecond // a notification
	if polling {
		limit = pollEvery + 250*time.Millisecond
	}
	t.Logf("changes seen by the other instance: median %v, slowest %v (polling only: %v)", median, took[len(took)-1], polling)
	if median > limit {
		t.Errorf("the other instance saw half the changes after %v or more, want within %v", median, limit)
	}
}

// testChangesLoaded: a restore (Load with Replace) through a, while b runs on
// the same database, makes b forget everything it cached, and b still hears
// of the changes written after it. Load used to replace the change log with
// the dump's (an empty one here) and restart its numbering below what b had
// read: b went on serving the records from before the load, and never heard
// of a change again.
func testChangesLoaded(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	h := follow(b)
	for i := range 10 {
		must(t, insertAs(a, ctx, "a", fmt.Sprintf("before-%d", i), "", ""))
	}
	h.waitFor(t, "before-9", 5*time.Second)
	if rec, err := b.Lookup(ctx, "before-0"); err != nil || rec.Meta.Archived {
		t.Fatalf("b's lookup before the load: %+v, %v", rec, err)
	}

	src := openSQLiteT(t)
	sm := sqlcatalogtest.SM("before-0", adapter.NewTime(time.Now()))
	sm.Archived = true
	must(t, src.Insert(ctx, &node.Record{Meta: sm, BlobKey: "restored"}))
	dump, _ := fullDumpOf(t, src)
	_, err := a.Load(ctx, dump, LoadOptions{Replace: true})
	must(t, err)

	deadline := time.Now().Add(5 * time.Second)
	for h.resetCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b was not told that the load changed everything")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec, err := b.Lookup(ctx, "before-0"); err != nil || !rec.Meta.Archived {
		t.Errorf("b after the load: %+v, %v; want the loaded, archived record", rec, err)
	}
	if rec, _ := b.Lookup(ctx, "before-5"); rec != nil {
		t.Errorf("b still finds before-5, which the load replaced")
	}
	must(t, insertAs(a, ctx, "a", "after-load", "", ""))
	h.waitFor(t, "after-load", 5*time.Second)
}

// testChangesReconnect: when b's listening connection is cut, b forgets
// everything once it is back, and still hears of later changes.
func testChangesReconnect(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a := openPostgres(t, dsn)
	b := openPostgres(t, dsn+"&application_name=follower-b")
	h := follow(b)
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := insertAs(a, ctx, "a", "before-cut", "", ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "before-cut", 5*time.Second)
	var cut int
	if err := raw.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'follower-b' AND query LIKE 'LISTEN%'`).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("cutting b's listening connection: %d cut, %v", cut, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.resetCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b did not forget its caches after its connection came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The median of five, as in testChangesHeard: a loaded machine stalls one
	// now and then, and polling would take pollEvery.
	var took []time.Duration
	for i := range 5 {
		pid := fmt.Sprintf("after-cut-%d", i)
		if err := insertAs(a, ctx, "a", pid, "", ""); err != nil {
			t.Fatal(err)
		}
		took = append(took, h.waitFor(t, pid, 5*time.Second))
	}
	slices.Sort(took)
	if median := took[len(took)/2]; median > 250*time.Millisecond {
		t.Errorf("after the reconnect changes took %v to arrive, want notifications", took)
	}
}

// testChangesPruned: an instance whose next change was pruned before it read
// it forgets everything, as it cannot tell what it missed.
func testChangesPruned(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a := openPostgres(t, dsn)
	b := openPostgres(t, dsn, withoutNotifications())
	h := follow(b)
	if err := insertAs(a, ctx, "a", "p1", "", ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "p1", 5*time.Second)
	b.follow.stop() // out of reach while a writes and the log is pruned
	for _, pid := range []string{"p2", "p3"} {
		if err := insertAs(a, ctx, "a", pid, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.db.ExecContext(ctx, `DELETE FROM changes WHERE pid IN ('p1', 'p2')`); err != nil {
		t.Fatal(err)
	}
	b.follow.done = make(chan struct{})
	fctx, cancel := context.WithCancel(context.Background())
	b.follow.cancel = cancel
	go b.follow.run(fctx)
	deadline := time.Now().Add(5 * time.Second)
	for h.resetCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("b did not forget everything when the changes it missed were gone")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testChangesFailuresCounted: reads of the change log that fail are counted
// (the metric d1bridge_change_log_read_failures_total), and following goes on
// once the log can be read again.
func testChangesFailuresCounted(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a := openPostgres(t, dsn)
	b := openPostgres(t, dsn)
	h := follow(b)
	if b.FollowFailures() != 0 {
		t.Fatalf("%d failures before any", b.FollowFailures())
	}
	if _, err := a.db.ExecContext(ctx, `ALTER TABLE changes RENAME TO changes_away`); err != nil {
		t.Fatal(err)
	}
	wait := time.Now().Add(5 * time.Second)
	for b.FollowFailures() == 0 {
		if time.Now().After(wait) {
			t.Fatal("no failure counted while the change log could not be read")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := a.db.ExecContext(ctx, `ALTER TABLE changes_away RENAME TO changes`); err != nil {
		t.Fatal(err)
	}
	if err := insertAs(a, ctx, "a", "after-failures", "", ""); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "after-failures", 5*time.Second)
}

// testEventsInOrder: two instances, one with its clock two seconds ahead,
// log events at once while a reader reads the whole log again and again. Each
// read must be a prefix of the final log in (dateLogged, entryId) order, and
// dates grow with ids: a harvester paging by date never misses an entry that
// another instance committed late.
func testEventsInOrder(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Start(t)
	a := openPostgres(t, dsn)
	b := openPostgres(t, dsn)
	b.now = func() time.Time { return time.Now().Add(2 * time.Second) }
	const writers, batches = 4, 40
	var wg sync.WaitGroup
	for w := range writers {
		c := []*Catalog{a, b}[w%2]
		wg.Go(func() {
			for i := range batches {
				es := []adapter.LogEntry{{Identifier: fmt.Sprintf("w%d-%d", w, i), Event: adapter.EventRead}}
				if err := c.AddEvents(ctx, es); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	stop, done := make(chan struct{}), make(chan struct{})
	var reads [][]string
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			log, err := a.Events(ctx, adapter.LogQuery{Count: 10000})
			if err != nil {
				t.Error(err)
				return
			}
			reads = append(reads, entryIDs(log))
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	final, err := a.Events(ctx, adapter.LogQuery{Count: 10000})
	if err != nil {
		t.Fatal(err)
	}
	all := entryIDs(final)
	if len(all) != writers*batches {
		t.Fatalf("%d events logged, want %d", len(all), writers*batches)
	}
	for i, e := range final.LogEntry[1:] {
		prev := final.LogEntry[i]
		if e.DateLogged.Before(prev.DateLogged.Time) || !idBefore(prev.EntryID, e.EntryID) {
			t.Fatalf("entry %s (%v) sorts after %s (%v): dates do not grow with ids", e.EntryID, e.DateLogged, prev.EntryID, prev.DateLogged)
		}
	}
	for i, r := range reads {
		if !slices.Equal(r, all[:len(r)]) {
			t.Fatalf("read %d of %d saw %v, not a prefix of the final log %v", i, len(reads), r, all[:len(r)])
		}
	}
	t.Logf("%d reads, each a prefix of the final log", len(reads))
}

// withoutNotifications makes a catalog follow the change log by polling
// alone, as behind a transaction-pooling proxy.
func withoutNotifications() Option { return func(c *config) { c.pollOnly = true } }

func entryIDs(l *adapter.Log) []string {
	var out []string
	for _, e := range l.LogEntry {
		out = append(out, e.EntryID)
	}
	return out
}

func idBefore(a, b string) bool {
	var x, y int
	fmt.Sscan(a, &x)
	fmt.Sscan(b, &y)
	return x < y
}
