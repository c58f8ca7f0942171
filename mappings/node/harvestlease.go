package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// Lease is a named lease as a Leases catalog holds it.
type Lease struct {
	Name string
	// Epoch grows by one with every Acquire and never goes back; 0: never
	// taken.
	Epoch int64
	// Holder is the instance holding it; "" when released.
	Holder string
	// Expires is when it expires, by the catalog's clock; zero when released.
	Expires time.Time
	// State is the last checkpoint, whichever holder wrote it.
	State string
}

// ErrLeaseLost is what Leases answer a holder whose epoch is no longer the
// lease's: another instance took it (after it expired), or it was released.
var ErrLeaseLost = errors.New("the lease is held at another epoch now")

// ErrHarvestBusy is the cause of HarvestOnce's error when another instance
// sharing the catalog holds the harvest's lease.
var ErrHarvestBusy = errors.New("another instance sharing the catalog is harvesting this upstream")

// Leases are named leases with a fencing epoch, kept by a catalog that several
// instances share, so that work one instance at a time may do (the harvest of
// one upstream) passes from one to another: a holder that stalls past its
// expiry loses the lease, and every write it tries afterwards fails. A
// Catalog may implement it; the harvest then runs on one instance at a time
// and keeps its mark and its page cursor in the lease's state.
type Leases interface {
	// Acquire takes the lease name for holder until ttl from now when nobody
	// holds it (never taken, released, expired) or holder does; its epoch
	// grows by one. ok false: another holder has it, and the lease returned is
	// theirs.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (l Lease, ok bool, err error)
	// Renew extends the lease held at epoch until ttl from now;
	// ErrLeaseLost when its epoch is another now.
	Renew(ctx context.Context, name string, epoch int64, ttl time.Duration) error
	// Checkpoint is Renew that also stores state, in the same write.
	Checkpoint(ctx context.Context, name string, epoch int64, state string, ttl time.Duration) error
	// Release frees the lease held at epoch for anyone to take at once; its
	// epoch and state stay. ErrLeaseLost when its epoch is another now.
	Release(ctx context.Context, name string, epoch int64) error
}

const (
	// defaultLeaseTTL is HarvestOptions.LeaseTTL's default: a holder renews
	// every third of it, and the instance that dies holding it is replaced
	// within about twice that.
	defaultLeaseTTL = 30 * time.Second
	// maxListFailures is how many times in a row the listing of a
	// checkpointed page may fail before the pass starts over from the mark:
	// a store may forget its cursors (an OAI-PMH resumption token expires).
	maxListFailures = 3
)

// harvestState is the harvest's progress, kept in its lease's state.
type harvestState struct {
	// Mark is the high-water mark of the last complete pass.
	Mark time.Time `json:"mark,omitzero"`
	// Ended is when the last complete pass ended: the instances run one
	// background pass per interval between them.
	Ended time.Time `json:"ended,omitzero"`
	// Full is when the last complete walk of everything began (dataset
	// sources, which walk everything every FullInterval).
	Full time.Time `json:"full,omitzero"`
	// Pass is the pass in progress, which the next pass resumes; nil: none.
	Pass *passCheckpoint `json:"pass,omitempty"`
}

// passCheckpoint is how far a pass got: the page to list next and what the
// pages before it give the pass's mark.
type passCheckpoint struct {
	Since time.Time `json:"since,omitzero"`
	// Start is when the pass began; its mark never passes it.
	Start  time.Time `json:"start"`
	Cursor string    `json:"cursor"`
	Pages  int       `json:"pages"`
	// High, LowFailed and UndatedFailed are the pass's passMarks so far.
	High          time.Time `json:"high,omitzero"`
	LowFailed     time.Time `json:"lowFailed,omitzero"`
	UndatedFailed bool      `json:"undatedFailed,omitempty"`
	// Failures counts the listings of Cursor that failed in a row.
	Failures int `json:"failures,omitempty"`
}

func (p *passCheckpoint) marks() passMarks {
	return passMarks{high: p.High, lowFailed: p.LowFailed, undatedFailed: p.UndatedFailed}
}

func (p *passCheckpoint) setMarks(m passMarks) {
	p.High, p.LowFailed, p.UndatedFailed = m.high, m.lowFailed, m.undatedFailed
}

// pass is the pass to run: the one in progress, unless a full pass is asked
// for and it is not one, or its page failed too often; else a new one.
func (st *harvestState) pass(full bool) (p *passCheckpoint, resumed bool) {
	if p := st.Pass; p != nil && (!full || p.Since.IsZero()) && p.Failures < maxListFailures {
		return p, true
	}
	p = &passCheckpoint{Start: time.Now()}
	if !st.Mark.IsZero() && !full {
		p.Since = st.Mark.Add(-harvestOverlap)
	}
	st.Pass = p
	return p, false
}

// due tells whether a background pass is due: one is in progress, or none
// ended within interval.
func (st *harvestState) due(interval time.Duration) bool {
	return st.Pass != nil || st.Ended.IsZero() || time.Since(st.Ended) >= interval
}

// passSkipped is why a background pass did not run, and when to try again.
type passSkipped struct {
	retry time.Duration
	why   string
}

func (s *passSkipped) Error() string { return "harvest pass skipped: " + s.why }

// defaultHolder names this instance in the leases it holds: host, process
// and a random part, since a restarted container has the same host name and
// process id.
func defaultHolder() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return cmp.Or(host, "localhost") + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b)
}

// heldLease is a harvest's lease (of the store, of a dataset source) while a
// pass runs under it.
type heldLease struct {
	leases Leases
	name   string
	epoch  int64
	ttl    time.Duration
	n      *Node
	held   func(held bool, epoch int64) // the metrics
	st     harvestState

	// ctx is the pass's: it ends, with ErrLeaseLost as its cause, when the
	// lease is lost or may have expired (timer, at the deadline).
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed to stop the renewals
	done   chan struct{} // closed when they have stopped

	mu sync.Mutex
	// deadline is when, by this process's clock, the lease may have
	// expired, less a margin: the time the last renewal was sent plus
	// most of the TTL. No record is written after it: timer ends ctx then,
	// which also stops a catalog write in flight.
	deadline time.Time
	timer    *time.Timer
}

// leaseTerms are the lease a pass runs under and where it is reported.
type leaseTerms struct {
	name, holder string
	ttl          time.Duration
	// held records that this instance took (true, at epoch) or let go of the
	// lease; elsewhere, the end of the last complete pass, whichever
	// instance ran it, read from the lease's state.
	held      func(held bool, epoch int64)
	elsewhere func(ended time.Time)
}

// takeLease takes the lease of t from ls, and returns it with the state it
// holds, renewed every third of its TTL until release. The error's cause is
// ErrHarvestBusy when another instance holds it.
func (n *Node) takeLease(ctx context.Context, ls Leases, t leaseTerms) (*heldLease, error) {
	sent := time.Now()
	l, ok, err := ls.Acquire(ctx, t.name, t.holder, t.ttl)
	if err != nil {
		return nil, adapter.Wrap(adapter.ServiceFailure, err, "taking the harvest lease %q", t.name)
	}
	var st harvestState
	if l.State != "" {
		if err := json.Unmarshal([]byte(l.State), &st); err != nil {
			if !ok {
				return nil, adapter.Wrap(adapter.ServiceFailure, ErrHarvestBusy, "%s holds the harvest lease %q", l.Holder, t.name)
			}
			n.log.Warn("harvest: the lease's state cannot be read; the pass lists everything", "lease", t.name, "err", err)
			st = harvestState{}
		}
	}
	// The holder's last pass tells this instance the harvest is not stalled.
	t.elsewhere(st.Ended)
	if !ok {
		return nil, adapter.Wrap(adapter.ServiceFailure, ErrHarvestBusy,
			"%s holds the harvest lease %q (epoch %d) until %s", l.Holder, t.name, l.Epoch, l.Expires.UTC().Format(time.RFC3339))
	}
	hl := &heldLease{leases: ls, name: t.name, epoch: l.Epoch, ttl: t.ttl, n: n, held: t.held, st: st,
		stop: make(chan struct{}), done: make(chan struct{}), deadline: sent.Add(t.ttl - t.ttl/5)}
	hl.ctx, hl.cancel = context.WithCancelCause(ctx)
	hl.timer = time.AfterFunc(time.Until(hl.deadline), hl.expired)
	t.held(true, l.Epoch)
	n.log.Debug("harvest lease taken", "lease", t.name, "epoch", l.Epoch, "resumes", st.Pass != nil)
	go hl.renewals()
	return hl, nil
}

// takeHarvestLease takes the harvest's lease when the catalog has Leases,
// and returns it with the state it holds (the mark, the pass in progress). A
// catalog without them gives a nil lease and the mark in memory. The
// error's cause is ErrHarvestBusy when another instance holds the lease.
func (n *Node) takeHarvestLease(ctx context.Context, o HarvestOptions) (*heldLease, *harvestState, error) {
	h := n.harvest
	ls, ok := n.cat.(Leases)
	if !ok {
		return nil, &harvestState{Mark: h.mark}, nil
	}
	hl, err := n.takeLease(ctx, ls, leaseTerms{name: "harvest:" + cmp.Or(o.Name, "store"), holder: cmp.Or(o.Holder, h.holder),
		ttl: cmp.Or(o.LeaseTTL, defaultLeaseTTL), held: o.Metrics.SetHarvestLease, elsewhere: o.Metrics.ObserveHarvestElsewhere})
	if err != nil {
		return nil, nil, err
	}
	if h.mark.After(hl.st.Mark) {
		hl.st.Mark = h.mark
	}
	h.mark = hl.st.Mark
	return hl, &hl.st, nil
}

// renewals renew the lease every third of its TTL until stopped or lost.
func (hl *heldLease) renewals() {
	defer close(hl.done)
	every := hl.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-hl.stop:
			return
		case <-hl.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(hl.ctx, every)
		sent := time.Now()
		err := hl.leases.Renew(ctx, hl.name, hl.epoch, hl.ttl)
		cancel()
		hl.renewed(sent, err)
	}
}

// renewed moves the deadline after a renewal sent at sent succeeded, and ends
// the pass when the lease is lost, or may have expired.
func (hl *heldLease) renewed(sent time.Time, err error) {
	switch {
	case err == nil:
		hl.mu.Lock()
		if d := sent.Add(hl.ttl - hl.ttl/5); d.After(hl.deadline) {
			hl.deadline = d
			hl.timer.Reset(time.Until(d))
		}
		hl.mu.Unlock()
	case errors.Is(err, ErrLeaseLost):
		hl.cancel(fmt.Errorf("%w: %v", ErrLeaseLost, err))
	case hl.ctx.Err() != nil:
	default:
		hl.n.log.Warn("harvest: renewing the lease failed; trying again", "lease", hl.name, "epoch", hl.epoch, "err", err)
		hl.check(hl.ctx)
	}
}

// check is nil while the lease holds and ctx has not ended: before each
// record. Past the deadline, the pass ends: another instance may hold the
// lease by now.
func (hl *heldLease) check(ctx context.Context) error {
	if hl == nil {
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	hl.mu.Lock()
	late := time.Now().After(hl.deadline)
	hl.mu.Unlock()
	if late {
		hl.expired()
		return hl.ctx.Err()
	}
	return nil
}

// expired ends the pass: the lease was not renewed in time, and another
// instance may hold it by now.
func (hl *heldLease) expired() {
	hl.cancel(fmt.Errorf("%w: it was not renewed in time", ErrLeaseLost))
}

// checkpoint writes the state; a lost lease ends the pass. A failure to write
// is logged: the pass goes on while the lease holds, and the next
// checkpoint writes it.
func (hl *heldLease) checkpoint() {
	b, err := json.Marshal(&hl.st)
	if err != nil {
		panic(err) // times, strings and numbers
	}
	sent := time.Now()
	err = hl.leases.Checkpoint(hl.ctx, hl.name, hl.epoch, string(b), hl.ttl)
	hl.renewed(sent, err)
}

// pageDone records that the pass listed and handled its pages up to next.
func (hl *heldLease) pageDone(p *passCheckpoint, next string, marks passMarks) {
	if hl == nil {
		return
	}
	p.Cursor, p.Failures = next, 0
	p.Pages++
	p.setMarks(marks)
	hl.checkpoint()
}

// listFailed records that listing the checkpointed page failed once more;
// after maxListFailures the next pass starts over.
func (hl *heldLease) listFailed(p *passCheckpoint) {
	if hl == nil || hl.ctx.Err() != nil {
		return
	}
	p.Failures++
	hl.checkpoint()
}

// dropPass forgets the pass in progress: the store's paging went wrong, and
// the next pass starts over.
func (hl *heldLease) dropPass() {
	if hl == nil || hl.ctx.Err() != nil {
		return
	}
	hl.st.Pass = nil
	hl.checkpoint()
}

// passDone records the pass's end and the mark it reached.
func (hl *heldLease) passDone(mark time.Time) {
	if hl == nil {
		return
	}
	hl.st.Mark, hl.st.Ended, hl.st.Pass = mark, time.Now(), nil
	hl.checkpoint()
}

// lost is the reason the lease was lost, or nil.
func (hl *heldLease) lost() error {
	if hl == nil {
		return nil
	}
	if err := context.Cause(hl.ctx); errors.Is(err, ErrLeaseLost) {
		return err
	}
	return nil
}

// release stops the renewals and frees the lease for the next pass, on
// whichever instance; a lease lost is left as it is.
func (hl *heldLease) release() {
	if hl == nil {
		return
	}
	close(hl.stop)
	<-hl.done
	hl.timer.Stop()
	hl.held(false, hl.epoch)
	if hl.lost() == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(hl.ctx), 10*time.Second)
		if err := hl.leases.Release(ctx, hl.name, hl.epoch); err != nil {
			hl.n.log.Warn("harvest: releasing the lease failed; it expires on its own", "lease", hl.name, "epoch", hl.epoch, "err", err)
		}
		cancel()
	}
	hl.cancel(nil)
}

// epochOf is the epoch of hl; 0 without a lease.
func (hl *heldLease) epochOf() int64 {
	if hl == nil {
		return 0
	}
	return hl.epoch
}
