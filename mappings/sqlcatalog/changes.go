package sqlcatalog

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d1bridge/d1bridge/adapter"
)

// Several instances may share a PostgreSQL catalog. Each write then also
// appends the PIDs it changed to the changes table, in its own transaction,
// and notifies changesChannel; every instance follows that log (Follow) to
// forget what it cached about those PIDs. Every write transaction takes one
// advisory lock first and holds it until commit (commitGroup), so events and
// change rows become visible in the order of their ids (and, for events, of
// their dateLogged), and objects in the order of their dates (orderDate): a
// reader that has seen id n has seen every id below it, so neither a CN
// paging the log or the objects by date nor a follower reading changes by id
// ever skips a row another instance commits late.

const (
	changesChannel = "d1bridge_changes"
	// pollEvery bounds how late a change is seen when no notification comes
	// (a transaction-pooling proxy, an engine without LISTEN).
	pollEvery = 500 * time.Millisecond
	// keepChanges is how long change rows stay; an instance out of touch for
	// longer forgets everything it cached instead.
	keepChanges = 10 * time.Minute
	// redialEvery paces the attempts to open the listening connection.
	redialEvery = 2 * time.Second
)

// logChange appends ch's events and, when instances share the catalog, its
// change rows, at the end of the write transaction tx.
func (c *Catalog) logChange(ctx context.Context, tx *sql.Tx, ch *change) error {
	var pids []string
	if c.d.changeLog {
		pids = slices.Compact(slices.Sorted(slices.Values(ch.pids())))
	}
	if len(ch.logged) == 0 && len(pids) == 0 {
		return nil
	}
	if err := c.insertEvents(ctx, tx, ch); err != nil {
		return err
	}
	if len(pids) == 0 {
		return nil
	}
	at := millis(adapter.NewTime(c.now()))
	args := make([]any, 0, 2*len(pids))
	for _, p := range pids {
		args = append(args, p, at)
	}
	values := slices.Repeat([]string{"(?, ?)"}, len(pids))
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO changes (pid, at) VALUES `+strings.Join(values, ", ")), args...); err != nil {
		return fmt.Errorf("sqlcatalog: logging a change: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify('`+changesChannel+`', '')`); err != nil {
		return fmt.Errorf("sqlcatalog: notifying a change: %w", err)
	}
	return nil
}

// everything is the PID of a change row that stands for every PID: Load
// writes it, having replaced the whole catalog under the other instances.
// No object has it: an identifier is never empty.
const everything = ""

// logReset tells the instances sharing the catalog, at the end of tx, that
// anything may have changed.
func (c *Catalog) logReset(ctx context.Context, tx *sql.Tx) error {
	if !c.d.changeLog {
		return nil
	}
	at := millis(adapter.NewTime(c.now()))
	if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO changes (pid, at) VALUES (?, ?)`), everything, at); err != nil {
		return fmt.Errorf("sqlcatalog: logging the load: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify('`+changesChannel+`', '')`); err != nil {
		return fmt.Errorf("sqlcatalog: notifying the load: %w", err)
	}
	return nil
}

// insertEvents appends ch.logged. An event without a date is dated now, or
// at the newest date in the log when the clock is behind it (another
// instance's clock, or a step back), so that dates never go backwards.
func (c *Catalog) insertEvents(ctx context.Context, tx *sql.Tx, ch *change) error {
	if len(ch.logged) == 0 {
		return nil
	}
	now := millis(adapter.NewTime(c.now()))
	if slices.ContainsFunc(ch.logged, func(e adapter.LogEntry) bool { return e.DateLogged.IsZero() }) {
		var newest int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(date_logged), 0) FROM events`).Scan(&newest); err != nil {
			return fmt.Errorf("sqlcatalog: reading the log: %w", err)
		}
		now = max(now, newest)
	}
	ch.events = nil
	for rest := ch.logged; len(rest) > 0; {
		// Rows go in by statements of a power of two of them, so that a
		// connection prepares at most eight shapes of this statement.
		n := 1 << (bits.Len(uint(min(len(rest), maxEventRows))) - 1)
		if err := c.insertEventRows(ctx, tx, ch, rest[:n], now); err != nil {
			return err
		}
		rest = rest[n:]
	}
	newest := int64(0)
	for _, g := range ch.events {
		newest = max(newest, g.last)
	}
	return c.indexEventPIDs(ctx, tx, newest)
}

// maxEventRows is the most events one INSERT appends (8 parameters each).
const maxEventRows = 128

// insertEventRows appends es, those without a date dated now, in one
// statement, and adds what the filters see of them to ch.events.
func (c *Catalog) insertEventRows(ctx context.Context, tx *sql.Tx, ch *change, es []adapter.LogEntry, now int64) error {
	date := func(e *adapter.LogEntry) int64 {
		if e.DateLogged.IsZero() {
			return now
		}
		return millis(e.DateLogged)
	}
	args := make([]any, 0, 8*len(es))
	for i := range es {
		e := &es[i]
		node := e.NodeIdentifier
		if node == "" {
			node = c.nodeID
		}
		var ref any
		if e.EntryID != "" {
			ref = e.EntryID
		}
		args = append(args, ref, e.Identifier, e.IPAddress, e.UserAgent, e.Subject, e.Event, date(e), node)
	}
	insert := `INSERT INTO events
		(entry_ref, pid, ip, user_agent, subject, event, date_logged, node_id)
		VALUES ` + strings.Repeat(", (?, ?, ?, ?, ?, ?, ?, ?)", len(es))[2:]
	if c.d == sqliteDialect {
		// One writer, and AUTOINCREMENT: the rows take the ids after the last
		// one, in the order of VALUES. Without RETURNING's row for each, an
		// event costs a fifth less (BenchmarkAddEvents).
		res, err := tx.ExecContext(ctx, c.d.q(insert), args...)
		if err != nil {
			return fmt.Errorf("sqlcatalog: logging an event: %w", err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("sqlcatalog: logging an event: %w", err)
		}
		for i := range es {
			k := sortKey{id: last - int64(len(es)-1-i), t: date(&es[i])}
			ch.events = addEvent(ch.events, k, es[i].Event)
		}
		return nil
	}
	// The rows come back in no promised order: each brings what ch.events
	// needs of it.
	rows, err := tx.QueryContext(ctx, c.d.q(insert+` RETURNING entry_id, date_logged, event`), args...)
	if err != nil {
		return fmt.Errorf("sqlcatalog: logging an event: %w", err)
	}
	defer rows.Close()
	var event sql.RawBytes // valid until Next: the type is named by one of es's
	for rows.Next() {
		var k sortKey
		if err := rows.Scan(&k.id, &k.t, &event); err != nil {
			return fmt.Errorf("sqlcatalog: logging an event: %w", err)
		}
		ch.events = addEvent(ch.events, k, eventName(es, event))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlcatalog: logging an event: %w", err)
	}
	return nil
}

// eventName is the type of es named by b, without a copy of b's bytes for
// every event.
func eventName(es []adapter.LogEntry, b []byte) string {
	for i := range es {
		if es[i].Event == string(b) {
			return es[i].Event
		}
	}
	return string(b)
}

// Shared tells whether other instances may write the catalog too: true on
// PostgreSQL (node.SharedCatalog).
func (c *Catalog) Shared() bool { return c.d.changeLog }

// Follow calls fn with the PIDs of the changes committed to the catalog by
// any instance (this one included), in commit order: at once where
// PostgreSQL notifications arrive, within pollEvery otherwise. fn(nil) means
// that anything may have changed: the catalog was out of reach for longer
// than change rows are kept. The catalog's own record cache follows the same
// log. On SQLite, which one process owns, fn is never called.
func (c *Catalog) Follow(fn func(pids []string)) {
	if c.follow == nil {
		return
	}
	c.follow.mu.Lock()
	c.follow.subs = append(c.follow.subs, fn)
	c.follow.mu.Unlock()
}

// FollowFailures is how many reads of the change log failed: while they do,
// changes made through other instances are forgotten only as caches expire.
func (c *Catalog) FollowFailures() int64 {
	if c.follow == nil {
		return 0
	}
	return c.follow.failures.Load()
}

// follower reads the change log for one Catalog.
type follower struct {
	c        *Catalog
	dsn      string
	pollOnly bool
	cancel   context.CancelFunc
	done     chan struct{}

	mu   sync.Mutex
	subs []func(pids []string)

	last     int64 // the id of the last change read
	pruned   time.Time
	failures atomic.Int64 // reads of the log that failed
}

// startFollowing starts the follower of a catalog that others may write.
func (c *Catalog) startFollowing(ctx context.Context, dsn string, pollOnly bool) error {
	f := &follower{c: c, dsn: dsn, pollOnly: pollOnly, done: make(chan struct{})}
	// Changes from before start concern nothing this instance has cached.
	if err := c.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&f.last); err != nil {
		return fmt.Errorf("reading the change log: %w", err)
	}
	ctx, f.cancel = context.WithCancel(context.Background())
	c.follow = f
	go f.run(ctx)
	return nil
}

func (f *follower) stop() {
	f.cancel()
	<-f.done
}

// run waits for notifications on a connection of its own, and reads the log
// when one comes and every pollEvery regardless.
func (f *follower) run(ctx context.Context) {
	defer close(f.done)
	woken := make(chan struct{}, 1)
	lost := make(chan struct{}, 1)
	listening, dialed := false, false
	var nextDial time.Time
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if !listening && !f.pollOnly && time.Now().After(nextDial) {
			nextDial = time.Now().Add(redialEvery)
			if conn, err := f.listen(ctx); err == nil {
				if dialed {
					// Back after losing the connection: whatever the log
					// says, start afresh.
					f.tell(nil)
				}
				listening, dialed = true, true
				go f.wait(ctx, conn, woken, lost)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-woken:
		case <-tick.C:
		case <-lost:
			// Notifications sent while the connection is down are lost; the
			// log keeps the changes, which the reads every pollEvery find.
			listening = false
		}
		f.read(ctx)
	}
}

func (f *follower) listen(ctx context.Context) (*pgx.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(dctx, f.dsn)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(dctx, "LISTEN "+changesChannel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// wait signals woken on every notification, and lost when the connection
// breaks.
func (f *follower) wait(ctx context.Context, conn *pgx.Conn, woken, lost chan<- struct{}) {
	defer conn.Close(context.Background())
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() == nil {
				lost <- struct{}{}
			}
			return
		}
		select {
		case woken <- struct{}{}:
		default: // a read is already due
		}
	}
}

// read tells the subscribers of the changes after the last one read. When
// the log no longer holds the change after it (pruned while this instance
// was out of reach), it tells them that anything may have changed.
func (f *follower) read(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		pids, last, err := f.page(rctx)
		if err != nil {
			f.failures.Add(1)
			return // out of reach: read again at the next tick
		}
		if pids != nil || last != f.last {
			f.tell(pids)
			f.last = last
		}
		if len(pids) < 1000 {
			break
		}
	}
	f.prune(rctx)
}

// page reads up to 1,000 changes after f.last. A nil slice with a new last
// means that anything may have changed: the changes after f.last were
// pruned, or the page holds a load's reset.
func (f *follower) page(ctx context.Context) ([]string, int64, error) {
	c := f.c
	rows, err := c.db.QueryContext(ctx, c.d.q(`SELECT seq, pid FROM changes WHERE seq > ? ORDER BY seq LIMIT 1000`), f.last)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var pids []string
	last, first := f.last, int64(0)
	reset := false
	for rows.Next() {
		var pid string
		if err := rows.Scan(&last, &pid); err != nil {
			return nil, 0, err
		}
		if first == 0 {
			first = last
		}
		reset = reset || pid == everything
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if reset {
		return nil, last, nil
	}
	if len(pids) > 0 && f.last > 0 && first > f.last+1 {
		// A gap after f.last is a rolled back write, or rows pruned: they
		// were pruned if nothing at or before f.last is left.
		var kept bool
		if err := c.db.QueryRowContext(ctx, c.d.q(`SELECT EXISTS (SELECT 1 FROM changes WHERE seq <= ?)`), f.last).Scan(&kept); err != nil {
			return nil, 0, err
		}
		if !kept {
			return nil, last, nil
		}
	}
	return pids, last, nil
}

func (f *follower) tell(pids []string) {
	f.c.recs.forget(pids...)
	if pids == nil {
		f.c.recs.purge()
	}
	f.mu.Lock()
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, fn := range subs {
		fn(pids)
	}
}

// prune removes change rows older than keepChanges, once a minute; every
// instance does, harmlessly.
func (f *follower) prune(ctx context.Context) {
	if time.Since(f.pruned) < time.Minute {
		return
	}
	f.pruned = time.Now()
	old := millis(adapter.NewTime(f.c.now().Add(-keepChanges)))
	f.c.db.ExecContext(ctx, f.c.d.q(`DELETE FROM changes WHERE at < ?`), old)
}
