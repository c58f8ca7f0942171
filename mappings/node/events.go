package node

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// EventBatcher is the catalog's optional way to append many events in one
// transaction.
type EventBatcher interface {
	AddEvents(ctx context.Context, es []adapter.LogEntry) error
}

// eventLog writes events with group commit: one goroutine takes everything
// queued while its previous batch committed and writes it in one transaction.
// A read thus does not wait for a commit of its own (except on a shared
// catalog, where it waits for the one it shares), and under load one commit
// serves many requests. Reading the log first flushes it (flush), so a client
// reads its own events; an abrupt kill may lose the events of the batch in
// flight, never an object.
//
// The queue is bounded and a read never waits on it: what a read costs is an
// append under a mutex. Should the catalog write events slower than
// reads come for long enough to fill the queue, a read's event is dropped and
// counted (Node.DroppedEvents, and a warning at most every dropLogEvery)
// rather than slowing every read to the catalog's pace.
type eventLog struct {
	cat Catalog
	log *slog.Logger

	mu      sync.Mutex
	queued  []adapter.LogEntry // what the writer takes next
	room    *sync.Cond         // on mu: the writer took the queue
	closed  bool
	wake    chan struct{} // 1-buffered: events were queued
	full    chan struct{} // 1-buffered: a batch's worth is queued, or the log closes
	flushes chan chan struct{}
	done    chan struct{}

	linger   time.Duration // how long a batch waits for more events
	awaited  bool          // an event is committed before add returns (shared catalog)
	dropped  atomic.Uint64 // read events the full queue turned away
	warnedAt atomic.Int64  // when a drop was last logged (UnixNano)
}

type eventsKey struct{}

type givenDatesKey struct{}

// WithGivenDates returns ctx for a catalog write that stores system metadata
// whose dates are another node's (a replica's, as its coordinating node
// gives it): the catalog keeps its dateSysMetadataModified as it is, even
// when the list's order of commits would move it (Catalog).
func WithGivenDates(ctx context.Context) context.Context {
	return context.WithValue(ctx, givenDatesKey{}, true)
}

// GivenDates reports whether ctx is WithGivenDates's.
func GivenDates(ctx context.Context) bool {
	given, _ := ctx.Value(givenDatesKey{}).(bool)
	return given
}

// WithEvents returns ctx carrying events for the catalog write made with it,
// which appends them in its own transaction (Catalog). The events of the
// writes already carried are replaced.
func WithEvents(ctx context.Context, es ...adapter.LogEntry) context.Context {
	return context.WithValue(ctx, eventsKey{}, es)
}

// EventsOf returns the events ctx carries for a catalog write.
func EventsOf(ctx context.Context) []adapter.LogEntry {
	es, _ := ctx.Value(eventsKey{}).([]adapter.LogEntry)
	return es
}

const (
	maxEventBatch = 4096
	// eventLinger is how long a batch waits for more events before it is
	// written, unless a flush asks for it. Reads never wait on it. Long,
	// because each commit costs every read after it: on SQLite a reader
	// that finds the log changed drops its page cache and memory map
	// (random gets over 200k objects: 1.1x faster than with 50 ms).
	// A crash loses at most this long of read events.
	eventLinger = 500 * time.Millisecond
	// dropLogEvery is the shortest time between two warnings of dropped events.
	dropLogEvery = 10 * time.Second
)

// eventQueueSize bounds the events waiting for the writer: eight batches.
// The queue is a slice that grows as events come, not a channel: a channel's
// buffer of this many entries (4.4 MB of strings' pointers) is scanned by
// every garbage collection whether it holds anything or not.
var eventQueueSize = 8 * maxEventBatch

// SharedCatalog is the catalog's optional way to tell that other instances
// read and write it too (a PostgreSQL catalog behind several replicas).
type SharedCatalog interface {
	Shared() bool
}

func newEventLog(cat Catalog, log *slog.Logger) *eventLog {
	l := &eventLog{cat: cat, log: log, wake: make(chan struct{}, 1), full: make(chan struct{}, 1),
		flushes: make(chan chan struct{}), done: make(chan struct{}), linger: eventLinger}
	l.room = sync.NewCond(&l.mu)
	if s, ok := cat.(SharedCatalog); ok && s.Shared() {
		// Another instance's log read cannot flush this one's queue: there
		// add waits for its event's commit (still shared with the events of
		// concurrent reads), so that a client that has its answer finds the
		// event in the log of every replica.
		l.linger, l.awaited = 0, true
	}
	go l.run()
	return l
}

// add queues events. A read's event (read, replicate: a GET of the bytes)
// never waits: when the queue is full it is dropped and counted. The others
// record changes (create, update, delete, failures reported to the node), are
// few, and wait for room, as their operation has already waited on a catalog
// write of its own. The catalog dates the event when it appends it, so that
// the log's dates follow its order. On a shared catalog add returns once the
// events are committed (or ctx ends).
func (l *eventLog) add(ctx context.Context, es ...adapter.LogEntry) {
	dropped := 0
	l.mu.Lock()
	for _, e := range es {
		read := e.Event == adapter.EventRead || e.Event == adapter.EventReplicate
		for len(l.queued) >= eventQueueSize && !read && !l.closed {
			l.room.Wait()
		}
		switch {
		case l.closed: // the node is closing: not written
		case len(l.queued) >= eventQueueSize:
			dropped++
		default:
			l.queued = append(l.queued, e)
		}
	}
	queued := len(l.queued)
	l.mu.Unlock()
	for range dropped {
		l.drop()
	}
	signal(l.wake)
	if queued >= maxEventBatch {
		signal(l.full)
	}
	if l.awaited {
		l.flush(ctx) // failing only as ctx ends: the event is still queued
	}
}

// signal wakes the writer waiting on c, if it is not awake already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// drop counts a read event the full queue turned away, and says so in the log
// at most once every dropLogEvery.
func (l *eventLog) drop() {
	n := l.dropped.Add(1)
	now, last := time.Now().UnixNano(), l.warnedAt.Load()
	if now-last < int64(dropLogEvery) || !l.warnedAt.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("read events dropped: the event queue is full, the catalog writes events slower than reads come",
		"dropped", n, "queue", eventQueueSize)
}

// DroppedEvents is the number of read events not logged since the node
// started, because the catalog could not keep up with the reads.
func (n *Node) DroppedEvents() uint64 { return n.events.dropped.Load() }

// flush returns once every event queued before it is written.
func (l *eventLog) flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case l.flushes <- done:
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close writes what is queued and stops the writer; events added after it
// are not written.
func (l *eventLog) close() {
	l.mu.Lock()
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
	signal(l.wake)
	signal(l.full)
	<-l.done
}

// take returns what is queued, leaving spare (emptied) to queue into, and
// whether the log is closed.
func (l *eventLog) take(spare []adapter.LogEntry) ([]adapter.LogEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	batch := l.queued
	l.queued = spare[:0]
	l.room.Broadcast()
	return batch, l.closed
}

func (l *eventLog) run() {
	defer close(l.done)
	var spare []adapter.LogEntry
	var waiters []chan struct{} // flushes to answer once the queue is written
	linger := time.NewTimer(eventLinger)
	linger.Stop()
	for {
		select {
		case <-l.wake:
		case w := <-l.flushes:
			waiters = append(waiters, w)
		}
		// While nobody waits on a flush, events keep joining for eventLinger:
		// under load one commit then carries the events of many reads, where
		// writing whatever was queued would commit a handful at a time.
		if len(waiters) == 0 && l.linger > 0 {
			linger.Reset(l.linger)
			select {
			case <-l.full:
			case w := <-l.flushes:
				waiters = append(waiters, w)
			case <-linger.C:
			}
			linger.Stop()
		}
		// A flush received by now came after its caller's events were
		// queued: the batch holds them all.
		batch, closed := l.take(spare)
		for rest := batch; len(rest) > 0; {
			n := min(len(rest), maxEventBatch)
			l.write(rest[:n])
			rest = rest[n:]
		}
		release(waiters)
		waiters = nil
		if closed {
			return
		}
		// Cleared, not to keep the written events' strings (and the records
		// they slice) alive; dropped after a burst, not to keep its size.
		clear(batch)
		if spare = batch[:0]; cap(spare) > 2*maxEventBatch {
			spare = nil
		}
	}
}

func release(ws []chan struct{}) {
	for _, w := range ws {
		close(w)
	}
}

// write appends a batch; a failure is logged, as the operations it records have
// already happened.
func (l *eventLog) write(batch []adapter.LogEntry) {
	if len(batch) == 0 {
		return
	}
	ctx := context.Background()
	var err error
	if b, ok := l.cat.(EventBatcher); ok {
		err = b.AddEvents(ctx, batch)
	} else {
		for _, e := range batch {
			if err = l.cat.AddEvent(ctx, e); err != nil {
				break
			}
		}
	}
	if err != nil {
		l.log.Error("recording events", "events", len(batch), "err", err)
	}
}
