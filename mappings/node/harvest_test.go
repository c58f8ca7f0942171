package node_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// countingBlobs is the file store, counting the opens of bytes; with a gate,
// Get waits for it (or the context) first.
type countingBlobs struct {
	*fsblobs.Store
	gets       atomic.Int64
	gate       chan struct{}
	failDelete atomic.Bool // Delete fails, keeping the bytes
}

func (b *countingBlobs) Delete(ctx context.Context, key string) error {
	if b.failDelete.Load() {
		return adapter.Errorf(adapter.ServiceFailure, "the store is read-only for now")
	}
	return b.Store.Delete(ctx, key)
}

func (b *countingBlobs) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	b.gets.Add(1)
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.Store.Get(ctx, key)
}

// fakeLister is a store's list of objects, in memory, paged pageSize at a time
// with the offset as the cursor. failPage (1-based) fails that page; from
// stallPage on, List waits for its context to end.
type fakeLister struct {
	mu        sync.Mutex
	objs      []node.Found
	pageSize  int
	sinces    []time.Time // the since of each pass (first page)
	failPage  int
	stallPage int
	stalled   chan struct{}       // closed when List first stalls
	onList    func(cursor string) // called first by List, unlocked
}

func (l *fakeLister) List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error) {
	if l.onList != nil {
		l.onList(cursor)
	}
	l.mu.Lock()
	start, _ := strconv.Atoi(cursor)
	if cursor == "" {
		l.sinces = append(l.sinces, since)
	}
	page := start/l.pageSize + 1
	if l.stallPage > 0 && page >= l.stallPage {
		l.mu.Unlock()
		select {
		case <-l.stalled:
		default:
			close(l.stalled)
		}
		<-ctx.Done()
		return nil, "", ctx.Err()
	}
	defer l.mu.Unlock()
	if page == l.failPage {
		return nil, "", adapter.Errorf(adapter.ServiceFailure, "the upstream is down")
	}
	var match []node.Found
	for _, f := range l.objs {
		if since.IsZero() || !f.Modified.Before(since) {
			match = append(match, f)
		}
	}
	end := min(start+l.pageSize, len(match))
	next := ""
	if end < len(match) {
		next = strconv.Itoa(end)
	}
	return slices.Clone(match[start:end]), next, nil
}

func (l *fakeLister) Stat(ctx context.Context, key string) (*node.Found, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.objs {
		if f.Key == key {
			return &f, nil
		}
	}
	return nil, adapter.Errorf(adapter.NotFound, "no object under %q", key)
}

// set adds or replaces the object under f.Key.
func (l *fakeLister) set(f node.Found) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.objs {
		if l.objs[i].Key == f.Key {
			l.objs[i] = f
			return
		}
	}
	l.objs = append(l.objs, f)
}

func (l *fakeLister) lastSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sinces[len(l.sinces)-1]
}

// hookedCatalog is the SQLite catalog, with hooks that can fail SetChecksum
// or act before a Lookup.
type hookedCatalog struct {
	*sqlcatalog.Catalog
	mu          sync.Mutex
	setChecksum func(pid, algorithm string) error
	lookup      func(id string)
}

func (c *hookedCatalog) hooks() (func(pid, algorithm string) error, func(id string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setChecksum, c.lookup
}

func (c *hookedCatalog) SetChecksum(ctx context.Context, pid, algorithm, value string) error {
	if h, _ := c.hooks(); h != nil {
		if err := h(pid, algorithm); err != nil {
			return err
		}
	}
	return c.Catalog.SetChecksum(ctx, pid, algorithm, value)
}

func (c *hookedCatalog) Lookup(ctx context.Context, id string) (*node.Record, error) {
	if _, h := c.hooks(); h != nil {
		h(id)
	}
	return c.Catalog.Lookup(ctx, id)
}

// harvestEnv is a node over a counting file store and a SQLite catalog (with
// hooks), with a fake lister and metrics in a registry of its own.
type harvestEnv struct {
	t      *testing.T
	dir    string
	n      *node.Node
	cat    *sqlcatalog.Catalog
	hooked *hookedCatalog
	blobs  *countingBlobs
	lister *fakeLister
	reg    *prometheus.Registry
	m      *metrics.Metrics
	closed bool
}

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

const harvestOwner = "CN=harvest owner,DC=example,DC=org"

func newHarvestEnv(t *testing.T, dir string) *harvestEnv {
	t.Helper()
	return newHarvestEnvLeases(t, dir, true)
}

// plainCatalog is a catalog without the optional interfaces (Leases).
type plainCatalog struct{ node.Catalog }

// newHarvestEnvLeases is newHarvestEnv whose node sees the catalog's Leases
// only when leases is true.
func newHarvestEnvLeases(t *testing.T, dir string, leases bool) *harvestEnv {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(dir, "catalog.db"), sqlcatalog.WithNodeID("urn:node:t"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fsblobs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	e := &harvestEnv{t: t, dir: dir, cat: cat, blobs: &countingBlobs{Store: fs},
		lister: &fakeLister{pageSize: 3, stalled: make(chan struct{})}, reg: prometheus.NewRegistry()}
	e.m = metrics.New(e.reg, "test")
	e.hooked = &hookedCatalog{Catalog: cat}
	var c node.Catalog = e.hooked
	if !leases {
		c = plainCatalog{c}
	}
	e.n = node.New("urn:node:t", e.blobs, c, nil)
	e.n.SetReindexMetrics(e.m)
	t.Cleanup(e.close)
	return e
}

func (e *harvestEnv) close() {
	if !e.closed {
		e.closed = true
		if err := e.n.Close(); err != nil {
			e.t.Error(err)
		}
	}
}

func (e *harvestEnv) start(interval time.Duration) {
	e.n.StartHarvest(e.lister, node.HarvestOptions{Interval: interval, RightsHolder: harvestOwner,
		Readers: []string{adapter.SubjectPublic}, Metrics: e.m})
}

// put stores data under key and lists it as f (Key and, unless set, Size -1).
func (e *harvestEnv) put(f node.Found, data []byte) {
	e.t.Helper()
	if _, err := e.blobs.Put(context.Background(), f.Key, bytes.NewReader(data)); err != nil {
		e.t.Fatal(err)
	}
	if f.Size == 0 && f.Checksum.Value == "" {
		f.Size = -1
	}
	e.lister.set(f)
}

func (e *harvestEnv) once() node.HarvestReport {
	e.t.Helper()
	rep, err := e.n.HarvestOnce(context.Background())
	if err != nil {
		e.t.Fatalf("harvest pass: %v", err)
	}
	return rep
}

func (e *harvestEnv) meta(id string) *adapter.SystemMetadata {
	e.t.Helper()
	sm, err := e.n.SystemMetadata(context.Background(), adapter.PublicSession(), id)
	if err != nil {
		e.t.Fatalf("system metadata of %q: %v", id, err)
	}
	return sm
}

func (e *harvestEnv) counter(name, outcome string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && lp.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
			if outcome == "" && m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func md5Hex(b []byte) string    { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func report(reg, upd, unch, failed int) node.HarvestReport {
	return node.HarvestReport{Registered: reg, Updated: upd, Unchanged: unch, Failed: failed}
}

func counts(r node.HarvestReport) node.HarvestReport {
	return report(r.Registered, r.Updated, r.Unchanged, r.Failed)
}

// TestHarvestRegistersIncrementally: the first pass registers every object,
// reading the bytes of those the store gives no checksum for; the next reads
// nothing and registers nothing; a changed object is updated; the log shows
// both.
func TestHarvestRegistersIncrementally(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	data := map[string][]byte{}
	for i := range 7 {
		key := fmt.Sprintf("k%d", i)
		data[key] = bytes.Repeat([]byte{byte('a' + i)}, 100+i)
		f := node.Found{Key: key, Modified: t0.Add(time.Duration(i) * time.Hour)}
		switch i {
		case 0:
			f.PID, f.FormatID, f.FileName = "doi:10.5072/x0", "text/csv", "x0.csv"
		case 1: // the store gives size and checksum: never read
			f.Size, f.Checksum = int64(len(data[key])), adapter.Checksum{Algorithm: "md5", Value: strings.ToUpper(md5Hex(data[key]))}
		case 2:
			f.Uploaded = t0.Add(-time.Hour)
		}
		e.put(f, data[key])
	}

	rep := e.once()
	if counts(rep) != report(7, 0, 0, 0) {
		t.Fatalf("first pass %+v, want 7 registered", rep)
	}
	if !rep.Since.IsZero() {
		t.Errorf("the first pass asked for objects since %v, want everything", rep.Since)
	}
	if got := e.blobs.gets.Load(); got != 6 {
		t.Errorf("the first pass opened %d objects, want 6 (one has its checksum listed)", got)
	}
	sm := e.meta("doi:10.5072/x0")
	if sm.FormatID != "text/csv" || sm.FileName != "x0.csv" || sm.Size != 100 ||
		sm.Checksum != (adapter.Checksum{Algorithm: "SHA-256", Value: sha256Hex(data["k0"])}) {
		t.Errorf("x0: %+v", sm)
	}
	sm = e.meta("k1")
	if sm.Checksum != (adapter.Checksum{Algorithm: "MD5", Value: md5Hex(data["k1"])}) || sm.Size != 101 {
		t.Errorf("k1 checksum %+v size %d, want the listed MD5", sm.Checksum, sm.Size)
	}
	sm = e.meta("k3")
	if sm.SerialVersion != 1 || sm.RightsHolder != harvestOwner || sm.Submitter != harvestOwner ||
		sm.FormatID != "application/octet-stream" || sm.OriginMemberNode != "urn:node:t" || sm.AuthoritativeMemberNode != "urn:node:t" ||
		!sm.DateUploaded.Equal(t0.Add(3*time.Hour)) || sm.DateSysMetadataModified.IsZero() ||
		sm.AccessPolicy == nil || sm.AccessPolicy.Allow[0].Subject[0] != adapter.SubjectPublic {
		t.Errorf("k3: %+v", sm)
	}
	if sm := e.meta("k2"); !sm.DateUploaded.Equal(t0.Add(-time.Hour)) {
		t.Errorf("k2 dateUploaded %v, want the store's upload time", sm.DateUploaded)
	}
	s := adapter.PublicSession()
	if l, err := e.n.ListObjects(ctx, s, adapter.ListQuery{Count: 100}); err != nil || l.Total != 7 {
		t.Fatalf("listObjects: %v %v", l, err)
	}
	lg, err := e.n.LogRecords(ctx, s, adapter.LogQuery{Event: adapter.EventCreate, Count: 100})
	if err != nil || lg.Total != 7 || lg.LogEntry[0].UserAgent != "harvest" || lg.LogEntry[0].Subject != "urn:node:t" {
		t.Fatalf("create events after the first pass: %+v %v", lg, err)
	}

	rep = e.once()
	if counts(rep) != report(0, 0, 1, 0) || e.blobs.gets.Load() != 6 {
		t.Fatalf("second pass %+v with %d opens, want k6 (within the overlap) unchanged and no read", rep, e.blobs.gets.Load())
	}
	mark := t0.Add(6 * time.Hour)
	if since := e.lister.lastSince(); since.IsZero() || !since.Before(mark) || mark.Sub(since) > 5*time.Minute {
		t.Errorf("the second pass asked for objects since %v; the mark is %v", since, mark)
	}

	// Only what changed since the mark (and k6, within the overlap) is listed.
	e.put(node.Found{Key: "k9", Modified: t0.Add(10 * time.Hour)}, []byte("late"))
	e.put(node.Found{Key: "k2", Modified: t0.Add(10 * time.Hour), Uploaded: t0.Add(-time.Hour)}, []byte("new bytes of k2"))
	if rep := e.once(); counts(rep) != report(1, 1, 1, 0) {
		t.Fatalf("third pass %+v, want k9 registered, k2 updated, k6 unchanged", rep)
	}
	sm = e.meta("k2")
	if sm.SerialVersion != 2 || sm.Size != 15 || sm.Checksum.Value != sha256Hex([]byte("new bytes of k2")) {
		t.Errorf("k2 after a change: serialVersion %d size %d checksum %s", sm.SerialVersion, sm.Size, sm.Checksum.Value)
	}
	lg, err = e.n.LogRecords(ctx, s, adapter.LogQuery{Event: adapter.EventUpdate, Count: 100})
	if err != nil || lg.Total != 1 || lg.LogEntry[0].Identifier != "k2" {
		t.Fatalf("update events: %+v %v", lg, err)
	}

	// Touched without a change: read once, system metadata unchanged, then
	// not read again.
	gets := e.blobs.gets.Load()
	e.lister.set(node.Found{Key: "k9", Size: -1, Modified: t0.Add(11 * time.Hour)})
	if rep := e.once(); rep.Updated != 0 || e.blobs.gets.Load() != gets+1 {
		t.Fatalf("touched object: %+v, %d reads", rep, e.blobs.gets.Load()-gets)
	}
	if sm := e.meta("k9"); sm.SerialVersion != 1 {
		t.Errorf("an object touched without a change has serialVersion %d", sm.SerialVersion)
	}
	if e.once(); e.blobs.gets.Load() != gets+1 {
		t.Errorf("a touched object was read again")
	}
	if got := e.counter("d1bridge_harvest_records_total", "registered"); got != 8 {
		t.Errorf("registered records counted %v, want 8", got)
	}
	if got := e.counter("d1bridge_harvest_passes_total", "ok"); got != 5 {
		t.Errorf("ok passes counted %v, want 5", got)
	}
	if got := e.counter("d1bridge_harvest_last_success_timestamp_seconds", ""); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last success %v", got)
	}
}

// TestHarvestChecksumCaches: a changed object's checksums computed later for
// getChecksum are computed again, and an object whose listed checksum its
// bytes contradict (read for want of a size) is not registered.
func TestHarvestChecksumCaches(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	e.put(node.Found{Key: "c1", Modified: t0}, []byte("one"))
	e.put(node.Found{Key: "bad", Modified: t0, Size: -1, Checksum: adapter.Checksum{Algorithm: "MD5", Value: md5Hex([]byte("not it"))}}, []byte("xyz"))
	if rep := e.once(); counts(rep) != report(1, 0, 0, 1) {
		t.Fatalf("pass %+v, want one registered, one failed", rep)
	}
	if _, err := e.n.SystemMetadata(ctx, adapter.PublicSession(), "bad"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("an object whose listing contradicts its bytes is registered (%v)", err)
	}
	if c, err := e.n.Checksum(ctx, adapter.PublicSession(), "c1", "MD5"); err != nil || c.Value != md5Hex([]byte("one")) {
		t.Fatalf("MD5 of c1: %v %v", c, err)
	}
	e.put(node.Found{Key: "c1", Modified: t0.Add(time.Minute)}, []byte("two!"))
	if rep := e.once(); rep.Updated != 1 {
		t.Fatalf("pass %+v, want c1 updated", rep)
	}
	if c, err := e.n.Checksum(ctx, adapter.PublicSession(), "c1", "MD5"); err != nil || c.Value != md5Hex([]byte("two!")) {
		t.Errorf("MD5 of c1 after its change: %v %v, want %s", c, err, md5Hex([]byte("two!")))
	}
}

// TestHarvestFailingPass: a pass whose listing fails leaves what it registered
// whole and the mark where it was; the next pass resumes from the page that
// failed (with Leases, which keep the checkpoint) or lists again from the old
// mark (without). A record that fails alone holds the mark back until it
// succeeds.
func TestHarvestFailingPass(t *testing.T) {
	for _, leases := range []bool{true, false} {
		t.Run(fmt.Sprint("leases=", leases), func(t *testing.T) { testHarvestFailingPass(t, leases) })
	}
}

func testHarvestFailingPass(t *testing.T, leases bool) {
	e := newHarvestEnvLeases(t, "", leases)
	e.start(0)
	var mu sync.Mutex
	var cursors []string
	e.lister.onList = func(cursor string) {
		mu.Lock()
		cursors = append(cursors, cursor)
		mu.Unlock()
	}
	for i := range 8 {
		e.put(node.Found{Key: fmt.Sprintf("f%d", i), Modified: t0.Add(time.Duration(i) * time.Hour)}, []byte(fmt.Sprint("bytes ", i)))
	}
	e.lister.failPage = 2
	rep, err := e.n.HarvestOnce(context.Background())
	if !adapter.IsKind(err, adapter.ServiceFailure) || counts(rep) != report(3, 0, 0, 0) || !rep.Mark.IsZero() {
		t.Fatalf("failing pass: %+v, %v; want 3 registered, ServiceFailure, no mark", rep, err)
	}
	for i := range 3 {
		if sm := e.meta(fmt.Sprintf("f%d", i)); sm.Checksum.Value != sha256Hex([]byte(fmt.Sprint("bytes ", i))) {
			t.Errorf("f%d registered by the failing pass: %+v", i, sm)
		}
	}
	if got := e.counter("d1bridge_harvest_passes_total", "failed"); got != 1 {
		t.Errorf("failed passes counted %v", got)
	}

	e.lister.failPage = 0
	e.blobs.Delete(context.Background(), "f5") // its bytes are gone: f5 fails alone
	mu.Lock()
	cursors = nil
	mu.Unlock()
	rep = e.once()
	mu.Lock()
	first := cursors[0]
	mu.Unlock()
	switch {
	case leases && (first != "3" || !rep.Resumed || !rep.Since.IsZero() || counts(rep) != report(4, 0, 0, 1)):
		t.Fatalf("retried pass %+v from cursor %q; want the pass resumed at the page that failed (3): 4 registered, 1 failed", rep, first)
	case !leases && (first != "" || rep.Resumed || !e.lister.lastSince().IsZero() || counts(rep) != report(4, 0, 3, 1)):
		t.Fatalf("retried pass %+v since %v from cursor %q; want a full pass: 4 registered, 3 unchanged, 1 failed", rep, e.lister.lastSince(), first)
	}
	if !rep.Mark.Equal(t0.Add(5 * time.Hour)) {
		t.Errorf("mark %v after f5 (modified %v) failed", rep.Mark, t0.Add(5*time.Hour))
	}
	if got := e.counter("d1bridge_harvest_passes_total", "partial"); got != 1 {
		t.Errorf("partial passes counted %v", got)
	}
	e.put(node.Found{Key: "f5", Modified: t0.Add(5 * time.Hour)}, []byte("back"))
	rep = e.once()
	if counts(rep) != report(1, 0, 2, 0) || !rep.Mark.Equal(t0.Add(7*time.Hour)) {
		t.Fatalf("pass after f5's bytes came back: %+v", rep)
	}
	if sm := e.meta("f5"); sm.Size != 4 {
		t.Errorf("f5: %+v", sm)
	}
}

// TestHarvestBackgroundAndStop: StartHarvest runs a pass at once; closing the
// node during a pass stops it and waits for it, and what the pass registered
// is whole after a reopen.
func TestHarvestBackgroundAndStop(t *testing.T) {
	dir := t.TempDir()
	e := newHarvestEnv(t, dir)
	for i := range 5 {
		e.put(node.Found{Key: fmt.Sprintf("s%d", i), Modified: t0.Add(time.Duration(i) * time.Second)}, []byte(fmt.Sprint("stop ", i)))
	}
	e.lister.stallPage = 2
	e.start(time.Hour)
	select {
	case <-e.lister.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the background pass did not start")
	}
	closed := make(chan struct{})
	go func() { e.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the pass")
	}
	if _, err := e.n.HarvestOnce(context.Background()); !adapter.IsKind(err, adapter.ServiceFailure) {
		t.Errorf("a pass after Close: %v, want ServiceFailure", err)
	}

	e2 := newHarvestEnv(t, dir)
	ctx := context.Background()
	l, err := e2.n.ListObjects(ctx, adapter.PublicSession(), adapter.ListQuery{Count: 100})
	if err != nil || l.Total != 3 {
		t.Fatalf("after the stopped pass, %v objects (%v), want the first page's 3", l, err)
	}
	for _, oi := range l.ObjectInfo {
		i, _ := strconv.Atoi(strings.TrimPrefix(oi.Identifier, "s"))
		if oi.Checksum.Value != sha256Hex([]byte(fmt.Sprint("stop ", i))) {
			t.Errorf("%s: %+v", oi.Identifier, oi)
		}
	}

	// The interval loop: passes go on until the node closes.
	e2.lister = e.lister
	e2.lister.mu.Lock()
	e2.lister.stallPage = 0
	e2.lister.mu.Unlock()
	e2.n.StartHarvest(e2.lister, node.HarvestOptions{Interval: 20 * time.Millisecond, Metrics: e2.m})
	deadline := time.Now().Add(10 * time.Second)
	for e2.counter("d1bridge_harvest_passes_total", "ok") < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the background harvest does not run every interval")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l, _ := e2.n.ListObjects(ctx, adapter.PublicSession(), adapter.ListQuery{Count: 100}); l.Total != 5 {
		t.Errorf("%d objects after background passes, want 5", l.Total)
	}
}

// TestHarvestMarkStopsAtPassStart: the mark is never later than the start of
// the pass, so an object changed during a pass after its page was listed,
// while another is dated ahead of the clock, is listed by the next pass.
func TestHarvestMarkStopsAtPassStart(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	for i := range 6 {
		e.put(node.Found{Key: fmt.Sprintf("m%d", i), Modified: t0.Add(time.Duration(i) * time.Minute)}, []byte(fmt.Sprint("m ", i)))
	}
	var once sync.Once
	e.lister.onList = func(cursor string) {
		if cursor != "3" {
			return
		}
		once.Do(func() { // while the second page is asked for
			e.put(node.Found{Key: "m0", Modified: time.Now()}, []byte("m0, changed during the pass"))
			e.lister.set(node.Found{Key: "m5", Size: -1, Modified: time.Now().Add(time.Hour)})
		})
	}
	if rep := e.once(); counts(rep) != report(6, 0, 0, 0) || rep.Mark.After(time.Now()) {
		t.Fatalf("first pass %+v: want 6 registered and a mark not in the future", rep)
	}
	if rep := e.once(); rep.Updated != 1 {
		t.Fatalf("second pass %+v (since %v): want m0, changed during the first pass, updated", rep, e.lister.lastSince())
	}
	if sm := e.meta("m0"); sm.Checksum.Value != sha256Hex([]byte("m0, changed during the pass")) {
		t.Errorf("m0: %+v", sm)
	}
}

// roundLister answers each cursor with a page it is given; an unknown cursor
// n answers the page of "n" (a page number the store ignores).
type roundLister struct {
	pages map[string]roundPage
}

type roundPage struct {
	keys []string
	next string
}

func (l roundLister) List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error) {
	p, ok := l.pages[cursor]
	if !ok {
		n, _ := strconv.Atoi(cursor)
		p = roundPage{l.pages["n"].keys, strconv.Itoa(n + 1)}
	}
	var out []node.Found
	for _, k := range p.keys {
		out = append(out, node.Found{Key: k, Size: -1, Modified: t0})
	}
	return out, p.next, nil
}

func (roundLister) Stat(ctx context.Context, key string) (*node.Found, error) {
	return nil, adapter.Errorf(adapter.NotImplemented, "no stat")
}

// TestHarvestPagingGoesRound: a store whose cursors come back, or whose
// pages do not move (it ignores the page number), fails the pass instead of
// looping for ever.
func TestHarvestPagingGoesRound(t *testing.T) {
	for name, l := range map[string]roundLister{
		"cursors come back": {map[string]roundPage{"": {[]string{"a"}, "x"}, "x": {[]string{"b"}, "y"}, "y": {[]string{"c"}, "x"}}},
		"pages do not move": {map[string]roundPage{"": {[]string{"a", "b"}, "2"}, "n": {[]string{"a", "b"}, ""}}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newHarvestEnv(t, "")
			for _, k := range []string{"a", "b", "c"} {
				if _, err := e.blobs.Put(context.Background(), k, strings.NewReader(k)); err != nil {
					t.Fatal(err)
				}
			}
			e.n.StartHarvest(l, node.HarvestOptions{Metrics: e.m})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rep, err := e.n.HarvestOnce(ctx)
			if e := adapter.AsException(err); err == nil || e.Kind != adapter.ServiceFailure || !strings.Contains(e.Description, "paging") {
				t.Fatalf("pass: %+v, %v; want a ServiceFailure about the store's paging", rep, err)
			}
			if !rep.Mark.IsZero() {
				t.Errorf("the failed pass moved the mark to %v", rep.Mark)
			}
		})
	}
}

// TestHarvestCutShortRefreshesChecksums: an update cut short (a checksum
// computed for getChecksum could not be stored) leaves the record to be read
// again by the next pass, even though the store lists the size and checksum
// the record then has; the update is logged once.
func TestHarvestCutShortRefreshesChecksums(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	listed := func(data []byte, at time.Time) node.Found {
		return node.Found{Key: "c1", Modified: at, Size: int64(len(data)), Checksum: adapter.Checksum{Algorithm: "MD5", Value: md5Hex(data)}}
	}
	e.put(listed([]byte("one"), t0), []byte("one"))
	e.once()
	if c, err := e.n.Checksum(ctx, adapter.PublicSession(), "c1", "SHA-256"); err != nil || c.Value != sha256Hex([]byte("one")) {
		t.Fatalf("SHA-256 of c1: %v %v", c, err)
	}
	e.put(listed([]byte("two!"), t0.Add(time.Minute)), []byte("two!"))
	e.hooked.mu.Lock()
	e.hooked.setChecksum = func(pid, alg string) error {
		if alg == "SHA-256" {
			return adapter.Errorf(adapter.ServiceFailure, "the catalog is full")
		}
		return nil
	}
	e.hooked.mu.Unlock()
	if rep := e.once(); rep.Failed != 1 {
		t.Fatalf("pass %+v, want c1 failed", rep)
	}
	e.hooked.mu.Lock()
	e.hooked.setChecksum = nil
	e.hooked.mu.Unlock()
	e.once()
	if sm := e.meta("c1"); sm.Size != 4 || sm.Checksum.Value != md5Hex([]byte("two!")) {
		t.Errorf("c1 after the change: %+v", sm)
	}
	if c, err := e.n.Checksum(ctx, adapter.PublicSession(), "c1", "SHA-256"); err != nil || c.Value != sha256Hex([]byte("two!")) {
		t.Errorf("SHA-256 of c1 after the change: %v %v, want %s", c, err, sha256Hex([]byte("two!")))
	}
	lg, err := e.n.LogRecords(ctx, adapter.PublicSession(), adapter.LogQuery{Event: adapter.EventUpdate, Count: 10})
	if err != nil || lg.Total != 1 {
		t.Errorf("update events: %+v, %v; want one", lg, err)
	}
}

// TestHarvestSkipsObjectsCreatedHere: a store that lists its objects also
// lists those created through the node, under the keys the node chose; the
// harvest must not register them again (as public objects named by their key).
func TestHarvestSkipsObjectsCreatedHere(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	key := e.createObject("private-1", "text/plain", []byte("mine only"))
	e.lister.set(node.Found{Key: key, Size: 9, Modified: t0})
	e.put(node.Found{Key: "legacy-1", Modified: t0}, []byte("theirs"))
	rep := e.once()
	if rep.Registered != 1 || rep.Unchanged != 1 {
		t.Errorf("report %+v: want the legacy object registered and the created one left alone", rep)
	}
	l, err := e.n.ListObjects(context.Background(), adapter.PublicSession(), adapter.ListQuery{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 2 {
		t.Errorf("%d objects listed, want 2 (private-1 and legacy-1)", l.Total)
	}
	if _, err := e.n.SystemMetadata(context.Background(), adapter.PublicSession(), key); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("the created object's bytes were registered under their key %q: %v", key, err)
	}
}

// TestHarvestLeavesCreatesUnderWay: bytes a create staged in the store,
// listed by the store before the create commits, are left alone: they were
// registered under their key, a second record of the create's bytes (and,
// had the create failed, a record of bytes then deleted).
func TestHarvestLeavesCreatesUnderWay(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		data := []byte(fmt.Sprintf("staged, commit %v", commit))
		u, err := e.n.Stage(ctx, bytes.NewReader(data), []string{"SHA-256"})
		if err != nil {
			t.Fatal(err)
		}
		e.lister.set(node.Found{Key: u.Ref, Size: int64(len(data)), Modified: t0})
		if rep := e.once(); rep.Registered != 0 {
			t.Errorf("commit %v: report %+v: the bytes of a create under way were registered", commit, rep)
		}
		pid := fmt.Sprintf("created-%v", commit)
		if commit {
			sm := &adapter.SystemMetadata{Identifier: pid, FormatID: "text/plain", Size: uint64(len(data)),
				Checksum: adapter.Checksum{Algorithm: "SHA-256", Value: sha256Hex(data)}, RightsHolder: harvestOwner}
			if _, err := e.n.Create(ctx, &adapter.Session{Subject: harvestOwner}, sm, u); err != nil {
				t.Fatal(err)
			}
		} else if err := e.n.Discard(ctx, u); err != nil {
			t.Fatal(err)
		}
		if _, err := e.n.SystemMetadata(ctx, adapter.PublicSession(), u.Ref); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("commit %v: the staged bytes were registered under their key %q: %v", commit, u.Ref, err)
		}
	}
}

// TestHarvestLeavesBytesNoObjectNames: the store lists bytes the node wrote
// that no record names, and will not: those of another instance's create under
// way or of an instance that crashed before its commit (the set of creates
// under way is per instance), and those of a delete that could not remove
// them. Registered under their key, they became objects nobody created (a
// deleted object back under a new name).
func TestHarvestLeavesBytesNoObjectNames(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	ctx := context.Background()
	other := node.New("urn:node:t", e.blobs, e.hooked, nil)
	defer other.Close()
	staged, err := other.Stage(ctx, strings.NewReader("never committed"), []string{"SHA-256"})
	if err != nil {
		t.Fatal(err)
	}
	e.lister.set(node.Found{Key: staged.Ref, Size: 15, Modified: t0})

	deleted := e.createObject("deleted-1", "text/plain", []byte("deleted, bytes kept"))
	e.blobs.failDelete.Store(true)
	if _, err := e.n.Delete(ctx, &adapter.Session{Subject: harvestOwner}, "deleted-1"); err != nil {
		t.Fatal(err)
	}
	e.blobs.failDelete.Store(false)
	e.lister.set(node.Found{Key: deleted, Size: 19, Modified: t0})
	e.put(node.Found{Key: "legacy-1", Modified: t0}, []byte("theirs"))
	// The repository's own record of a name like the node's keys is its own.
	e.put(node.Found{Key: "d1bridge-notes", Modified: t0}, []byte("theirs too"))
	// A key chosen before the prefix (a bare UUID) is known by its record.
	bare := uuid.NewString()
	e.put(node.Found{Key: bare, Size: 3, Modified: t0}, []byte("old"))
	e.insert("created-before", "text/plain", bare, 3, sha256Hex([]byte("old")), t0)

	if rep := e.once(); rep.Registered != 2 || rep.Failed != 0 {
		t.Errorf("report %+v: want legacy-1 and d1bridge-notes registered, nothing else", rep)
	}
	e.meta("d1bridge-notes")
	for _, key := range []string{staged.Ref, deleted, bare} {
		if _, err := e.n.SystemMetadata(ctx, adapter.PublicSession(), key); !adapter.IsKind(err, adapter.NotFound) {
			t.Errorf("bytes the node wrote were registered under their key %q: %v", key, err)
		}
	}
}

// TestHarvestUnreadableRecordAlone: an object the store describes in a way
// that cannot be read fails alone; the objects after it are registered.
func TestHarvestUnreadableRecordAlone(t *testing.T) {
	e := newHarvestEnv(t, "")
	e.start(0)
	e.put(node.Found{Key: "good-1", Modified: t0}, []byte("one"))
	e.put(node.Found{Key: "bad", Problem: errors.New(`item 1: options.fields.modified ("updated"): "0000-00-00 00:00:00" is not a date`)}, []byte("bytes"))
	e.put(node.Found{Key: "good-2", Modified: t0}, []byte("two"))
	e.put(node.Found{Key: "good-3", Modified: t0}, []byte("three"))
	rep := e.once()
	if rep.Registered != 3 || rep.Failed != 1 {
		t.Errorf("report %+v: want 3 registered and the unreadable one failed", rep)
	}
	e.meta("good-3")
	if _, err := e.n.SystemMetadata(context.Background(), adapter.PublicSession(), "bad"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("the unreadable record was registered: %v", err)
	}
}
