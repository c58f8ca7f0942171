package main

// The writes that run through a node's API while it is backed up, and what
// the restored node must show of them.

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

type loadMark int

const (
	markStart loadMark = iota // the backup command starts
	markEnd                   // it has exited
)

// metaVersion is one state of an object's system metadata: the write that made
// it began at start and was acknowledged at ack.
type metaVersion struct {
	meta       []byte
	start, ack time.Time
}

type loadObj struct {
	pid      string
	data     []byte
	versions []metaVersion
	// deleteStart is when a delete of the object was sent, deleteAck when it
	// was acknowledged; zero when never.
	deleteStart, deleteAck time.Time
}

// load runs workers that each create objects, change the access policy of
// their last one, update it (a new version obsoleting it) and delete older
// ones, recording every acknowledged state.
type load struct {
	n          *backupNode
	mu         sync.Mutex
	objs       []*loadObj
	start, end time.Time
	ops        int
	errs       []error
	quit       chan struct{}
	wg         sync.WaitGroup
	final      []adapter.LogEntry
}

func startLoad(n *backupNode, workers int) *load {
	l := &load{n: n, quit: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go l.work(w)
	}
	return l
}

func (l *load) mark(m loadMark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m == markStart {
		l.start = time.Now()
	} else {
		l.end = time.Now()
	}
}

func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

// waitFor waits until k writes have been acknowledged.
func (l *load) waitFor(t *testing.T, k int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for l.acked() < k {
		if time.Now().After(deadline) {
			t.Fatalf("the load acknowledged %d writes in 2 minutes, want %d (%v)", l.acked(), k, l.errs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the workers, fails the test on their errors and reads the
// node's whole log.
func (l *load) stop(t *testing.T) {
	t.Helper()
	close(l.quit)
	l.wg.Wait()
	for _, err := range l.errs {
		t.Errorf("load: %v", err)
	}
	l.final = l.n.fullLog(t)
	t.Logf("load: %d writes acknowledged, %d objects", l.ops, len(l.objs))
}

func (l *load) finalLog() []adapter.LogEntry { return l.final }

func (l *load) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

// record notes the state of objs after a write that began at start.
func (l *load) record(start time.Time, objs ...*loadObj) error {
	ack := time.Now()
	for _, o := range objs {
		m, err := l.n.meta(o.pid)
		if err != nil {
			return err
		}
		l.mu.Lock()
		o.versions = append(o.versions, metaVersion{meta: m, start: start, ack: ack})
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.ops++
	l.mu.Unlock()
	return nil
}

func (l *load) work(w int) {
	defer l.wg.Done()
	// mine are the worker's objects; the first few are never deleted, so that
	// some objects acknowledged before the backup stay whatever its length.
	var mine, deletable []*loadObj
	keep := func(o *loadObj) {
		mine = append(mine, o)
		if len(mine) > 4 {
			deletable = append(deletable, o)
		}
	}
	for i := 0; ; i++ {
		select {
		case <-l.quit:
			return
		default:
		}
		var (
			o   *loadObj
			err error
		)
		switch {
		case i%7 == 6 && len(deletable) > 2:
			err = l.remove(deletable[0])
			deletable = deletable[1:]
		case i%5 == 4 && len(mine) > 0:
			if o, err = l.update(mine[len(mine)-1], fmt.Sprintf("load-%d-%d-next", w, i)); err == nil {
				keep(o)
			}
		case i%3 == 2 && len(mine) > 0:
			err = l.share(mine[len(mine)-1], i)
		default:
			if o, err = l.create(fmt.Sprintf("load-%d-%d", w, i), uint64(w*100000+i)); err == nil {
				keep(o)
			}
		}
		if err != nil {
			l.fail(err)
			return
		}
	}
}

func loadSysmeta(pid string, d []byte) *adapter.SystemMetadata {
	return newSysmeta(pid, "application/octet-stream", "SHA-256", d, adapter.PermChangePermission)
}

func (l *load) create(pid string, seed uint64) (*loadObj, error) {
	o := &loadObj{pid: pid, data: genBytes(seed, 2000+int(seed%50000))}
	start := time.Now()
	code, b, err := l.n.call(http.MethodPost, mnp(2, "/object"), "", createParts(loadSysmeta(pid, o.data), bytes.NewReader(o.data), false)...)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("create %s: %d %v %s", pid, code, err, b)
	}
	l.mu.Lock()
	l.objs = append(l.objs, o)
	l.mu.Unlock()
	return o, l.record(start, o)
}

func (l *load) update(old *loadObj, pid string) (*loadObj, error) {
	o := &loadObj{pid: pid, data: genBytes(uint64(len(pid))*7, 3000)}
	start := time.Now()
	code, b, err := l.n.call(http.MethodPut, objectPath(2, old.pid), "", textPart("newPid", pid),
		filePart("object", "o", bytes.NewReader(o.data)), docPart("sysmeta", loadSysmeta(pid, o.data)))
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("update %s: %d %v %s", old.pid, code, err, b)
	}
	l.mu.Lock()
	l.objs = append(l.objs, o)
	l.mu.Unlock()
	return o, l.record(start, old, o)
}

// share changes o's access policy: public keeps changePermission, and one
// more subject may read.
func (l *load) share(o *loadObj, i int) error {
	l.mu.Lock()
	last := o.versions[len(o.versions)-1].meta
	l.mu.Unlock()
	sm := &adapter.SystemMetadata{}
	if err := adapter.Decode(bytes.NewReader(last), sm); err != nil {
		return err
	}
	policy := &adapter.AccessPolicy{Allow: []adapter.AccessRule{
		{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermChangePermission}},
		{Subject: []string{fmt.Sprintf("CN=reader %d,DC=example,DC=org", i)}, Permission: []adapter.Permission{adapter.PermRead}},
	}}
	start := time.Now()
	code, b, err := l.n.call(http.MethodPut, mnp(2, "/accessRules/"+segment(o.pid)), "",
		textPart("serialVersion", fmt.Sprint(sm.SerialVersion)), docPart("accessPolicy", policy))
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("setAccessPolicy %s: %d %v %s", o.pid, code, err, b)
	}
	return l.record(start, o)
}

func (l *load) remove(o *loadObj) error {
	start := time.Now()
	l.mu.Lock()
	o.deleteStart = start
	last := o.versions[len(o.versions)-1].meta
	l.mu.Unlock()
	code, b, err := l.n.call(http.MethodDelete, objectPath(2, o.pid), l.n.root)
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("delete %s: %d %v %s", o.pid, code, err, b)
	}
	l.mu.Lock()
	o.deleteAck = time.Now()
	l.ops++
	l.mu.Unlock()
	// The delete closed the chain over the gap: its neighbours (the worker's
	// own objects) have new system metadata, acknowledged with it.
	sm := &adapter.SystemMetadata{}
	if err := adapter.Decode(bytes.NewReader(last), sm); err != nil {
		return err
	}
	for _, pid := range []string{sm.Obsoletes, sm.ObsoletedBy} {
		if nb := l.byPID(pid); nb != nil {
			m, err := l.n.meta(pid)
			if err != nil {
				return err
			}
			l.mu.Lock()
			nb.versions = append(nb.versions, metaVersion{meta: m, start: start, ack: time.Now()})
			l.mu.Unlock()
		}
	}
	return nil
}

// byPID is the object pid of the load; nil for none.
func (l *load) byPID(pid string) *loadObj {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.objs {
		if pid != "" && o.pid == pid && o.deleteStart.IsZero() {
			return o
		}
	}
	return nil
}

// check compares the restored node r with the writes: what was acknowledged
// before the backup began is there (or, deleted then, is not), with its bytes
// and with the system metadata of a state no older than the last one
// acknowledged before the backup and written before it ended; what began
// after the backup ended is not.
func (l *load) check(t *testing.T, r *backupNode) {
	t.Helper()
	var there, gone, atStart int
	for _, o := range l.objs {
		created := o.versions[0]
		code, meta, err := r.call(http.MethodGet, metaPath(2, o.pid), r.root)
		if err != nil {
			t.Fatal(err)
		}
		present := code == http.StatusOK
		mustBe := created.ack.Before(l.start) && (o.deleteStart.IsZero() || o.deleteStart.After(l.end))
		mustNot := created.start.After(l.end) || !o.deleteAck.IsZero() && o.deleteAck.Before(l.start)
		switch {
		case mustBe && !present:
			t.Errorf("%s, acknowledged before the backup, is not back (%d %s)", o.pid, code, meta)
			continue
		case mustNot && present:
			t.Errorf("%s is back, but was created after the backup or deleted before it", o.pid)
			continue
		case !present:
			gone++
			continue
		}
		there++
		if mustBe {
			atStart++
		}
		floor := -1
		for i, v := range o.versions {
			if v.ack.Before(l.start) {
				floor = i
			}
		}
		match := -1
		for i, v := range o.versions {
			if bytes.Equal(v.meta, meta) {
				match = i
			}
		}
		switch {
		case match < 0:
			t.Errorf("%s: the restored system metadata is none the node acknowledged:\n%s", o.pid, meta)
		case match < floor:
			t.Errorf("%s: the restored system metadata is version %d, older than version %d acknowledged before the backup", o.pid, match, floor)
		case o.versions[match].start.After(l.end):
			t.Errorf("%s: the restored system metadata was written after the backup ended", o.pid)
		}
		if code, b, err := r.call(http.MethodGet, objectPath(2, o.pid), r.root); code != http.StatusOK || !bytes.Equal(b, o.data) {
			t.Errorf("%s: get answers %d (%v) with %d bytes, want its %d bytes", o.pid, code, err, len(b), len(o.data))
		}
	}
	t.Logf("load objects: %d back (%d acknowledged before the backup), %d not", there, atStart, gone)
	if atStart == 0 {
		t.Error("no load object was acknowledged before the backup: the test checked nothing")
	}
}
