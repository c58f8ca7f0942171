package main

// The workload of TestReplicasChaos (replicas_test.go): what the clients know,
// the operations they draw while replicas are killed, the log harvested
// through the proxy as a CN does, and the background work the replicas share:
// dataset folders written into a source they all harvest (with the harvest
// lease watched in the catalog), and replicate requests sent as a CN, whose
// copies come from one more node.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// --- the workload

// rsObject is an object a create or update acknowledged.
type rsObject struct {
	pid  string
	size int
	sum  string // SHA-256
}

// rsWorld is what the clients know: every identifier they tried to create,
// the ones acknowledged, the heads of chains, and counts of outcomes.
type rsWorld struct {
	mu        sync.Mutex
	attempted map[string]bool
	acked     map[string]*rsObject
	ackedPIDs []string
	heads     []string          // acknowledged, and not known to be obsoleted
	updates   map[string]string // old pid -> new pid, acknowledged updates
	ackedBy   map[string]string // "pid event" of an acknowledged write -> "replica R at T"
	counts    map[string]int    // "op outcome" -> how many
	problems  []string          // consistency violations seen by clients
	hist      *history
}

func newRSWorld() *rsWorld {
	return &rsWorld{attempted: map[string]bool{}, acked: map[string]*rsObject{}, updates: map[string]string{},
		ackedBy: map[string]string{}, counts: map[string]int{}, hist: newHistory()}
}

func (w *rsWorld) count(op, outcome string) {
	w.mu.Lock()
	w.counts[op+" "+outcome]++
	w.mu.Unlock()
}

func (w *rsWorld) problem(format string, a ...any) {
	w.mu.Lock()
	w.problems = append(w.problems, fmt.Sprintf(format, a...))
	w.mu.Unlock()
}

// pick is a random acknowledged pid, or "" when there is none; heads only
// picks among the heads of chains.
func (w *rsWorld) pick(rng *rand.Rand, heads bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	from := w.ackedPIDs
	if heads {
		from = w.heads
	}
	if len(from) == 0 {
		return ""
	}
	return from[rng.IntN(len(from))]
}

func (w *rsWorld) dropHead(pid string) {
	if i := slices.Index(w.heads, pid); i >= 0 {
		w.heads = slices.Delete(w.heads, i, i+1)
	}
}

// rsClient is one client of the chaos test.
type rsClient struct {
	id  int
	rs  *replicaSet
	w   *rsWorld
	rng *rand.Rand
	seq int
}

func (c *rsClient) base() string { return c.rs.proxy.URL() }

// where says which replica acknowledged a, and when (on the history's clock).
func (c *rsClient) where(a rsAnswer) string {
	return fmt.Sprintf("acknowledged by replica %s at %.3fs", a.header.Get(rsReplicaHeader), float64(c.w.hist.now())/1e9)
}

// newObject makes the bytes and system metadata of a new object pid.
func (c *rsClient) newObject(pid string) ([]byte, *adapter.SystemMetadata) {
	data := genBytes(c.rng.Uint64(), 1+c.rng.IntN(16<<10))
	sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
	sm.RightsHolder = rsWriter
	return data, sm
}

func (c *rsClient) nextPID(kind string) string {
	c.seq++
	return fmt.Sprintf("rs-%s-%d-%d", kind, c.id, c.seq)
}

func (c *rsClient) create(ctx context.Context) {
	pid := c.nextPID("c")
	data, sm := c.newObject(pid)
	c.w.mu.Lock()
	c.w.attempted[pid] = true
	c.w.mu.Unlock()
	a := c.rs.send(ctx, http.MethodPost, c.base()+mnp(2, "/object"), rsWriter, createParts(sm, bytes.NewReader(data), false)...)
	if ctx.Err() != nil {
		return
	}
	switch {
	case a.status == http.StatusOK:
		c.w.count("create", "ok")
		c.w.mu.Lock()
		c.w.acked[pid] = &rsObject{pid: pid, size: len(data), sum: sm.Checksum.Value}
		c.w.ackedPIDs = append(c.w.ackedPIDs, pid)
		c.w.heads = append(c.w.heads, pid)
		c.w.ackedBy[pid+" "+adapter.EventCreate] = c.where(a)
		c.w.mu.Unlock()
	case a.unknown():
		c.w.count("create", "unknown")
	default:
		c.w.count("create", "refused")
		c.w.problem("create %s refused: %s", pid, a)
	}
}

// update makes a new version of a head of a chain.
func (c *rsClient) update(ctx context.Context) {
	old := c.w.pick(c.rng, true)
	if old == "" {
		return
	}
	pid := c.nextPID("u")
	data, sm := c.newObject(pid)
	c.w.mu.Lock()
	c.w.attempted[pid] = true
	c.w.mu.Unlock()
	call := c.w.hist.now()
	a := c.rs.send(ctx, http.MethodPut, c.base()+objectPath(2, old), rsWriter,
		textPart("newPid", pid), filePart("object", "content.bin", bytes.NewReader(data)), docPart("sysmeta", sm))
	if ctx.Err() != nil {
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smUnknown}, call, math.MaxInt64, "")
		return
	}
	ret := c.w.hist.now()
	name, desc := a.exception()
	switch {
	case a.status == http.StatusOK:
		c.w.count("update", "ok")
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smOK}, call, ret, a.header.Get(rsReplicaHeader))
		c.w.mu.Lock()
		c.w.acked[pid] = &rsObject{pid: pid, size: len(data), sum: sm.Checksum.Value}
		c.w.ackedPIDs = append(c.w.ackedPIDs, pid)
		c.w.dropHead(old)
		c.w.heads = append(c.w.heads, pid)
		c.w.updates[old] = pid
		c.w.ackedBy[old+" "+adapter.EventUpdate] = c.where(a)
		c.w.mu.Unlock()
	case a.unknown():
		c.w.count("update", "unknown")
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smUnknown}, call, math.MaxInt64, a.header.Get(rsReplicaHeader))
	case name == "InvalidRequest" && strings.Contains(desc, "obsolete"):
		// Another client updated it first.
		c.w.count("update", "refused (obsoleted)")
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smRefused}, call, ret, a.header.Get(rsReplicaHeader))
		c.w.mu.Lock()
		c.w.dropHead(old)
		c.w.mu.Unlock()
	default:
		c.w.count("update", "refused")
		c.w.problem("update of %s refused: %s", old, a)
		c.w.hist.add(c.id, smInput{PID: old, Kind: smBump}, smOutput{Outcome: smRefused}, call, ret, a.header.Get(rsReplicaHeader))
	}
}

// readMeta is getSystemMetadata of pid through the proxy, recorded as a read
// of its serialVersion.
func (c *rsClient) readMeta(ctx context.Context, pid string) *adapter.SystemMetadata {
	call := c.w.hist.now()
	a := c.rs.do(ctx, http.MethodGet, c.base()+metaPath(2, pid), nil, "", rsWriter)
	ret := c.w.hist.now()
	if ctx.Err() != nil {
		return nil
	}
	if a.status != http.StatusOK {
		c.readFailed("getSystemMetadata", pid, a)
		return nil
	}
	sm := &adapter.SystemMetadata{}
	if err := adapter.Decode(bytes.NewReader(a.body), sm); err != nil {
		c.w.problem("getSystemMetadata %s: %v", pid, err)
		return nil
	}
	c.w.count("getSystemMetadata", "ok")
	c.w.hist.add(c.id, smInput{PID: pid, Kind: smRead}, smOutput{Outcome: smOK, Seen: sm.SerialVersion}, call, ret, a.header.Get(rsReplicaHeader))
	return sm
}

// readFailed counts a failed read of an acknowledged object: no answer or a
// 5xx is the chaos, anything else (NotFound above all) a violation.
func (c *rsClient) readFailed(op, pid string, a rsAnswer) {
	if a.unknown() {
		c.w.count(op, "unavailable")
		return
	}
	c.w.count(op, "failed")
	c.w.problem("%s of the acknowledged %s: %s", op, pid, a)
}

func (c *rsClient) describe(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	call := c.w.hist.now()
	a := c.rs.do(ctx, http.MethodHead, c.base()+objectPath(2, pid), nil, "", rsWriter)
	ret := c.w.hist.now()
	if ctx.Err() != nil {
		return
	}
	if a.status != http.StatusOK {
		c.readFailed("describe", pid, a)
		return
	}
	v, err := strconv.ParseUint(a.header.Get("DataONE-SerialVersion"), 10, 64)
	if err != nil {
		c.w.problem("describe %s: DataONE-SerialVersion %q", pid, a.header.Get("DataONE-SerialVersion"))
		return
	}
	c.w.count("describe", "ok")
	c.w.hist.add(c.id, smInput{PID: pid, Kind: smRead}, smOutput{Outcome: smOK, Seen: v}, call, ret, a.header.Get(rsReplicaHeader))
}

func (c *rsClient) get(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	a := c.rs.do(ctx, http.MethodGet, c.base()+objectPath(2, pid), nil, "", rsWriter)
	if ctx.Err() != nil {
		return
	}
	if a.status != http.StatusOK {
		c.readFailed("get", pid, a)
		return
	}
	c.w.mu.Lock()
	o := c.w.acked[pid]
	c.w.mu.Unlock()
	if sum := sha256.Sum256(a.body); hex.EncodeToString(sum[:]) != o.sum {
		c.w.problem("get %s: %d bytes, not the %d acknowledged", pid, len(a.body), o.size)
		return
	}
	c.w.count("get", "ok")
}

// casOutcome classifies the answer of a write conditioned on a version.
func casOutcome(a rsAnswer) smOutcome {
	name, desc := a.exception()
	switch {
	case a.status == http.StatusOK:
		return smOK
	case a.unknown():
		return smUnknown
	case name == "VersionMismatch",
		name == "InvalidRequest" && strings.Contains(desc, "dateSysMetadataModified"):
		return smRefused
	}
	return smOther
}

func (c *rsClient) record(ctx context.Context, op, pid string, expect uint64, a rsAnswer, call int64) {
	out := casOutcome(a)
	ret := c.w.hist.now()
	if ctx.Err() != nil || out == smUnknown {
		out, ret = smUnknown, math.MaxInt64
	}
	c.w.hist.add(c.id, smInput{PID: pid, Kind: smCAS, Expect: expect}, smOutput{Outcome: out}, call, ret, a.header.Get(rsReplicaHeader))
	c.w.count(op, out.String())
	if out == smOther {
		c.w.problem("%s of %s: %s", op, pid, a)
	}
}

// updateSystemMetadata reads the system metadata, changes its fileName and
// sends it back: a write conditioned on the version read (the node compares
// dateSysMetadataModified).
func (c *rsClient) updateSystemMetadata(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	sm := c.readMeta(ctx, pid)
	if sm == nil {
		return
	}
	sm.FileName = fmt.Sprintf("c%d-%d.bin", c.id, c.rng.IntN(1<<20))
	call := c.w.hist.now()
	a := c.rs.send(ctx, http.MethodPut, c.base()+mnp(2, "/meta"), rsWriter, textPart("pid", pid), docPart("sysmeta", sm))
	c.record(ctx, "updateSystemMetadata", pid, sm.SerialVersion, a, call)
}

// setAccessPolicy reads the serialVersion and sets a policy conditioned on it.
func (c *rsClient) setAccessPolicy(ctx context.Context) {
	pid := c.w.pick(c.rng, false)
	if pid == "" {
		return
	}
	sm := c.readMeta(ctx, pid)
	if sm == nil {
		return
	}
	rules := []adapter.AccessRule{{Subject: []string{"public"}, Permission: []adapter.Permission{adapter.PermRead}}}
	if c.rng.IntN(2) == 0 {
		rules = append(rules, adapter.AccessRule{Subject: []string{rsOther}, Permission: []adapter.Permission{adapter.PermWrite}})
	}
	call := c.w.hist.now()
	a := c.rs.send(ctx, http.MethodPut, c.base()+mnp(2, "/accessRules/"+segment(pid)), rsWriter,
		textPart("serialVersion", strconv.FormatUint(sm.SerialVersion, 10)), docPart("accessPolicy", &adapter.AccessPolicy{Allow: rules}))
	c.record(ctx, "setAccessPolicy", pid, sm.SerialVersion, a, call)
}

// run draws operations until ctx ends.
func (c *rsClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		switch r := c.rng.IntN(100); {
		case r < 20:
			c.create(ctx)
		case r < 30:
			c.update(ctx)
		case r < 45:
			c.updateSystemMetadata(ctx)
		case r < 55:
			c.setAccessPolicy(ctx)
		case r < 70:
			if pid := c.w.pick(c.rng, false); pid != "" {
				c.readMeta(ctx, pid)
			}
		case r < 85:
			c.describe(ctx)
		default:
			c.get(ctx)
		}
	}
}

// --- the log, harvested as a CN does

// rsHarvester pages getLogRecords from a date on, as a CN harvests a member
// node's log: each pass asks fromDate = the latest dateLogged it has seen
// (inclusive, so the entries of that instant come again and are known by
// entryId), pages with start and count until a short page. An entry seen
// twice within one pass was repeated by the paging.
type rsHarvester struct {
	rs       *replicaSet
	base     string
	seen     map[string]adapter.LogEntry // by entryId
	from     adapter.Time
	passes   int
	repeats  []string // "entryId pid event" repeated within one pass
	failures int      // passes abandoned for an unavailable page
}

const rsLogPage = 500

// pass harvests once; false when a page could not be had (the pass is
// abandoned, its entries kept, the cursor left where it was).
func (h *rsHarvester) pass(ctx context.Context) bool {
	inPass := map[string]bool{}
	newest := h.from
	for start := 0; ; start += rsLogPage {
		q := fmt.Sprintf("?start=%d&count=%d", start, rsLogPage)
		if !h.from.IsZero() {
			q += "&fromDate=" + at(h.from)
		}
		a := h.rs.do(ctx, http.MethodGet, h.base+mnp(2, "/log")+q, nil, "", rsCN)
		if a.status != http.StatusOK {
			h.failures++
			return false
		}
		l := &adapter.Log{}
		if err := adapter.Decode(bytes.NewReader(a.body), l); err != nil {
			h.failures++
			return false
		}
		for _, e := range l.LogEntry {
			if inPass[e.EntryID] {
				h.repeats = append(h.repeats, e.EntryID+" "+e.Identifier+" "+e.Event)
			}
			inPass[e.EntryID] = true
			h.seen[e.EntryID] = e
			if e.DateLogged.After(newest.Time) {
				newest = e.DateLogged
			}
		}
		if len(l.LogEntry) < rsLogPage {
			break
		}
	}
	h.from = newest
	h.passes++
	return true
}

// --- shared background work: a dataset source every replica harvests

// rsDatasetSource is the files upstream every replica harvests as datasets
// (depth 1: each folder under its root is one), under the lease
// "datasets:"+rsDatasetSource; rsDatasetPrefix is its harvest.pidPrefix.
const (
	rsDatasetSource = "holdings"
	rsDatasetPrefix = "hv:"
)

// rsDatasets writes dataset folders into the root of the files upstream while
// the replicas harvest it. Each folder is written under a dot name, which the
// harvest leaves out, and renamed into place, so that a pass sees it whole or
// not at all: each is registered once, as version 1, or the harvest did wrong.
type rsDatasets struct {
	root string
	mu   sync.Mutex
	sets []*rsDataset
}

// rsDataset is a folder written and the identifiers its package gets (README,
// "Fronting a repository": D@v1 the science metadata, resource_map_D@v1, D@v1/
// and the file's name each data file, D the folder behind the pidPrefix).
type rsDataset struct {
	name  string
	files map[string][]byte
	pids  []string
	at    time.Time // when it was renamed into place
}

// options are the upstream every replica harvests, every second, with
// a lease TTL of 3s (renewed every second): a replica killed in a pass is
// replaced after at most that.
func (d *rsDatasets) options() rsOptions {
	return rsOptions{upstreams: fmt.Sprintf(`  - name: %s
    type: files
    options: {root: %q}
    harvest: {interval: 1s, leaseTTL: 3s, depth: 1, pidPrefix: %q}
`, rsDatasetSource, d.root, rsDatasetPrefix)}
}

// add writes the next folder; its identifiers are recorded in w as
// attempted before it appears.
func (d *rsDatasets) add(w *rsWorld) error {
	d.mu.Lock()
	k := len(d.sets)
	d.mu.Unlock()
	ds := &rsDataset{name: fmt.Sprintf("ds%03d", k), files: map[string][]byte{}}
	var csv strings.Builder
	csv.WriteString("site,value\n")
	for i := range 20 + 10*k {
		fmt.Fprintf(&csv, "s%d,%d\n", i, (i*7919+k)%1000)
	}
	ds.files["data.csv"] = []byte(csv.String())
	ds.files["README.txt"] = fmt.Appendf(nil, "dataset %d of the replicas' harvest\n", k)
	id := rsDatasetPrefix + ds.name
	ds.pids = []string{id + "@v1", "resource_map_" + id + "@v1"}
	for _, f := range slices.Sorted(maps.Keys(ds.files)) {
		ds.pids = append(ds.pids, id+"@v1/"+f)
	}
	w.mu.Lock()
	for _, pid := range ds.pids {
		w.attempted[pid] = true
	}
	w.mu.Unlock()
	tmp := filepath.Join(d.root, "."+ds.name)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	for name, b := range ds.files {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, filepath.Join(d.root, ds.name)); err != nil {
		return err
	}
	ds.at = time.Now()
	d.mu.Lock()
	d.sets = append(d.sets, ds)
	d.mu.Unlock()
	return nil
}

func (d *rsDatasets) all() []*rsDataset {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.sets)
}

// settle waits up to limit for replica 0 to describe every folder's resource
// map (the harvest registered it); it returns how long that took and the
// folders still missing.
func (d *rsDatasets) settle(ctx context.Context, rs *replicaSet, limit time.Duration) (time.Duration, []string) {
	t0 := time.Now()
	missing := d.all()
	for {
		var still []*rsDataset
		for _, ds := range missing {
			a := rs.do(ctx, http.MethodHead, rs.node(0).URL+objectPath(2, "resource_map_"+rsDatasetPrefix+ds.name+"@v1"), nil, "", rsCN)
			if a.status != http.StatusOK {
				still = append(still, ds)
			}
		}
		missing = still
		if len(missing) == 0 || time.Since(t0) > limit || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	var names []string
	for _, ds := range missing {
		names = append(names, ds.name)
	}
	return time.Since(t0), names
}

// rsLeaseWatch reads a lease's row in the catalog every rsLeasePoll while the
// test runs. Its epoch must never go back: it is the fencing epoch, which
// grows with every holder. A row still naming a holder after it expired is a
// lease whose holder died (or stalled) holding it.
type rsLeaseWatch struct {
	db   *sql.DB
	name string

	mu        sync.Mutex
	reads     int // of the row, once it existed
	failures  []string
	first     rsLeaseRow
	last      rsLeaseRow
	epochs    int             // distinct epochs seen
	holders   map[string]bool // distinct holders seen
	orphaned  map[int64]bool  // epochs seen expired with their holder still named
	backwards []string
}

const rsLeasePoll = 100 * time.Millisecond

// rsLeaseRow is a lease as the catalog holds it, with the catalog's clock
// when it was read (milliseconds since the Unix epoch).
type rsLeaseRow struct {
	epoch        int64
	holder       string
	expires, now int64
}

func newRSLeaseWatch(rs *replicaSet, name string) *rsLeaseWatch {
	return &rsLeaseWatch{db: rs.db(), name: name, holders: map[string]bool{}, orphaned: map[int64]bool{}}
}

// read is the row now; false when the lease was never taken.
func (lw *rsLeaseWatch) read(ctx context.Context) (rsLeaseRow, bool, error) {
	var r rsLeaseRow
	err := lw.db.QueryRowContext(ctx, `SELECT epoch, holder, expires, CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)
FROM leases WHERE name = $1`, lw.name).Scan(&r.epoch, &r.holder, &r.expires, &r.now)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// run reads the row every rsLeasePoll until ctx ends.
func (lw *rsLeaseWatch) run(ctx context.Context) {
	tick := time.NewTicker(rsLeasePoll)
	defer tick.Stop()
	for {
		r, ok, err := lw.read(ctx)
		if ctx.Err() != nil {
			return
		}
		lw.observe(r, ok, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (lw *rsLeaseWatch) observe(r rsLeaseRow, ok bool, err error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	switch {
	case err != nil:
		lw.failures = append(lw.failures, err.Error())
		return
	case !ok:
		return
	}
	lw.reads++
	switch {
	case lw.reads == 1:
		lw.first, lw.epochs = r, 1
	case r.epoch < lw.last.epoch:
		lw.backwards = append(lw.backwards, fmt.Sprintf("epoch %d (held by %q) read after epoch %d (held by %q)", r.epoch, r.holder, lw.last.epoch, lw.last.holder))
	case r.epoch > lw.last.epoch:
		lw.epochs++
	case r.holder != lw.last.holder && r.holder != "":
		// Acquire always moves the epoch on: a new holder at the same
		// epoch is two holders under one fencing token.
		lw.backwards = append(lw.backwards, fmt.Sprintf("epoch %d held by %q, then by %q", r.epoch, lw.last.holder, r.holder))
	}
	if r.holder != "" {
		lw.holders[r.holder] = true
		if r.expires < r.now {
			lw.orphaned[r.epoch] = true
		}
	}
	lw.last = r
}

// heldBy waits up to limit for the lease to be held (named holder, not
// expired) by a running replica, and returns that replica and the epoch;
// -1 when none held it.
func (lw *rsLeaseWatch) heldBy(ctx context.Context, rs *replicaSet, limit time.Duration) (int, int64) {
	for t0 := time.Now(); time.Since(t0) < limit && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
		r, ok, err := lw.read(ctx)
		if err != nil || !ok || r.holder == "" || r.expires <= r.now {
			continue
		}
		if i := rs.replicaOf(r.holder); i >= 0 {
			return i, r.epoch
		}
	}
	return -1, 0
}

// --- shared background work: replication jobs

const (
	// rsSourceNode is the member node the replicas pull replicas from.
	rsSourceNode    = "urn:node:rsSource"
	rsSourceSubject = "CN=urn:node:rsSource,DC=dataone,DC=org"
	// rsCopyDelay holds every getReplica this long before the source
	// answers, so that the kills find copies in flight.
	rsCopyDelay = 2 * time.Second
)

// rsReplication is the test acting as the CN for replication: a source member
// node (one more d1bridge, embedded catalog) holding objects; in front of it a
// proxy that counts the getReplica requests and holds each rsCopyDelay; a CN
// endpoint that records setReplicationStatus; and replicate requests sent to
// the replicas through their proxy.
type rsReplication struct {
	rs    *replicaSet
	src   *server
	front *httptest.Server // the source's member node, as the replicas reach it
	cn    *httptest.Server // …/cn/v2/replicaNotifications/{pid}
	token string           // the replicas' replication.token (rsTarget's)
	objs  []*rsReplObject

	mu         sync.Mutex
	fetches    map[string]int      // pid -> getReplica requests the source received
	notices    map[string][]string // pid -> statuses reported to the CN, in order
	badNotices []string
	accepted   map[string]string // pid -> the answer that accepted its replicate
	orphaned   map[string]int    // pid -> kills of a replica while it ran the job
	calls      int               // replicate requests sent
	unknown    int               // of those, answered by no decision (no answer, 5xx)
	problems   []string
}

// rsReplObject is an object of the source.
type rsReplObject struct {
	pid  string
	sm   *adapter.SystemMetadata // as the source holds it
	sum  string                  // SHA-256 of its bytes
	size int
}

// newRSReplication starts the source with n objects of a few KiB, the proxy in
// front of it and the CN endpoint.
func newRSReplication(t *testing.T, n int) *rsReplication {
	t.Helper()
	dir := t.TempDir()
	key := authWrite(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(authCNKey())}))
	// The source trusts the CN and the replicas (cnSubjects), so the
	// replicas' token may call getReplica there.
	cfg := authWrite(t, dir, "source.yaml", fmt.Appendf(nil, `node:
  cnSubjects: [%q, %q]
auth:
  signingKey: %s
log:
  level: error
`, rsCN, rsTarget, key))
	r := &rsReplication{src: startServerConfig(t, "", cfg, "D1BRIDGE_NODE_ID="+rsSourceNode),
		token: authToken(t, authCNKey(), rsTarget), fetches: map[string]int{}, notices: map[string][]string{}, accepted: map[string]string{},
		orphaned: map[string]int{}}
	for k := range n {
		pid := fmt.Sprintf("rs-repl-%02d", k)
		data := genBytes(uint64(k)+7000, 1024+k*211)
		sm := newSysmeta(pid, "application/octet-stream", "SHA-256", data)
		if a := r.src.send(t, http.MethodPost, mnp(2, "/object"), false, createParts(sm, bytes.NewReader(data), false)...); !wantStatus(t, a, http.StatusOK) {
			t.FailNow()
		}
		a := r.src.get(t, metaPath(2, pid))
		if !wantStatus(t, a, http.StatusOK) {
			t.FailNow()
		}
		stored := &adapter.SystemMetadata{}
		decode(t, a, stored)
		r.objs = append(r.objs, &rsReplObject{pid: pid, sm: stored, sum: sm.Checksum.Value, size: len(data)})
	}

	srcURL, err := url.Parse(r.src.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(srcURL)
	r.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if esc, ok := strings.CutPrefix(req.URL.EscapedPath(), "/d1/mn/v2/replica/"); ok && req.Method == http.MethodGet {
			pid, _ := url.PathUnescape(esc)
			r.mu.Lock()
			r.fetches[pid]++
			r.mu.Unlock()
			select {
			case <-req.Context().Done():
				return // the replica died waiting
			case <-time.After(rsCopyDelay):
			}
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(r.front.Close)
	r.cn = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		esc, ok := strings.CutPrefix(req.URL.EscapedPath(), "/cn/v2/replicaNotifications/")
		pid, _ := url.PathUnescape(esc)
		bad := func(format string, a ...any) {
			r.mu.Lock()
			r.badNotices = append(r.badNotices, fmt.Sprintf("%s %s: ", req.Method, req.URL.Path)+fmt.Sprintf(format, a...))
			r.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
		}
		switch {
		case !ok || req.Method != http.MethodPut:
			bad("not setReplicationStatus")
			return
		case req.Header.Get("Authorization") != "Bearer "+r.token:
			bad("without the replicas' token")
			return
		}
		if err := req.ParseMultipartForm(1 << 20); err != nil {
			bad("%v", err)
			return
		}
		if ref := req.FormValue("nodeRef"); ref != testNodeID {
			bad("nodeRef %q, want %s", ref, testNodeID)
			return
		}
		r.mu.Lock()
		r.notices[pid] = append(r.notices[pid], req.FormValue("status"))
		r.mu.Unlock()
	}))
	t.Cleanup(r.cn.Close)
	return r
}

// options make the replicas accept replicas (node.replicate), know the source
// (nodes), pull with rsTarget's token and report to the CN endpoint; a job
// whose replica died is taken over after 5s (rescueAfter), a failed attempt
// retried after 1s.
func (r *rsReplication) options() rsOptions {
	return rsOptions{node: "  replicate: true\n", top: fmt.Sprintf(`nodes:
  - id: %s
    baseURL: %s/d1/mn
    subjects: [%q]
replication:
  token: %s
  cnBaseURL: %s/cn
  rescueAfter: 5s
  retryBackoff: 1s
`, rsSourceNode, r.front.URL, rsSourceSubject, r.token, r.cn.URL)}
}

// drive asks for the replica of every object, one every `every`, until run
// ends (then the rest at once); the calls themselves run under ctx.
func (r *rsReplication) drive(ctx, run context.Context, w *rsWorld, every time.Duration) {
	for _, o := range r.objs {
		w.mu.Lock()
		w.attempted[o.pid] = true
		w.mu.Unlock()
		r.replicate(ctx, o)
		select {
		case <-run.Done():
		case <-time.After(every):
		}
	}
}

// replicate asks the replicas, through the proxy, to replicate o, as the CN
// does: again after an answer that decides nothing (no answer, a 5xx: the
// replica may have died before or after queuing the job), until one decides.
// IdentifierNotUnique after such an answer is the job an earlier try queued,
// accepted then (the jobs table must have it); on the first try it is wrong.
func (r *rsReplication) replicate(ctx context.Context, o *rsReplObject) {
	for try := 1; ctx.Err() == nil; try++ {
		a := r.rs.send(ctx, http.MethodPost, r.rs.proxy.URL()+mnp(2, "/replicate"), rsCN,
			docPart("sysmeta", o.sm), textPart("sourceNode", rsSourceNode))
		name, desc := a.exception()
		r.mu.Lock()
		r.calls++
		switch {
		case ctx.Err() != nil:
		case a.status == http.StatusOK:
			r.accepted[o.pid] = fmt.Sprintf("accepted on try %d", try)
		case a.unknown() && try < 40:
			r.unknown++
			r.mu.Unlock()
			time.Sleep(250 * time.Millisecond)
			continue
		case try > 1 && name == "IdentifierNotUnique" && strings.Contains(desc, "already"):
			r.accepted[o.pid] = fmt.Sprintf("accepted by a try before try %d, which answered %s", try, a)
		default:
			r.problems = append(r.problems, fmt.Sprintf("replicate %s, try %d: %s", o.pid, try, a))
		}
		r.mu.Unlock()
		return
	}
}

// rsJobRow is a row of the catalog's jobs table.
type rsJobRow struct {
	id             int64
	key, state     string
	attempt, limit int
	holder, err    string
	expires        int64
}

// jobs are the rows of the replicate jobs, oldest first.
func (r *rsReplication) jobs(ctx context.Context) ([]rsJobRow, error) {
	rows, err := r.rs.db().QueryContext(ctx, `SELECT id, key, state, attempt, max_attempts, holder, error, expires FROM jobs WHERE kind = 'replicate' ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rsJobRow
	for rows.Next() {
		var j rsJobRow
		if err := rows.Scan(&j.id, &j.key, &j.state, &j.attempt, &j.limit, &j.holder, &j.err, &j.expires); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// runningOn waits up to limit for a replicate job running under a lease
// not expired, and returns the replica running it and its pid; -1 when none.
func (r *rsReplication) runningOn(ctx context.Context, limit time.Duration) (int, string) {
	for t0 := time.Now(); time.Since(t0) < limit && ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		jobs, err := r.jobs(ctx)
		if err != nil {
			continue
		}
		for _, j := range jobs {
			if j.state == "running" && j.expires > time.Now().UnixMilli() {
				if i := r.rs.replicaOf(j.holder); i >= 0 {
					return i, strings.TrimPrefix(j.key, testNodeID+" ")
				}
			}
		}
	}
	return -1, ""
}

// killed records the jobs that the process pid, just killed, was running:
// their lease is left to expire, and another attempt rescues them.
func (r *rsReplication) killed(ctx context.Context, pid int) error {
	jobs, err := r.jobs(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range jobs {
		if j.state == "running" && holderPID(j.holder) == pid {
			r.orphaned[strings.TrimPrefix(j.key, testNodeID+" ")]++
		}
	}
	return nil
}

// drain waits up to limit for the replicate jobs to end: none queued or
// running, and as many as replicates accepted. It returns how long it took.
func (r *rsReplication) drain(ctx context.Context, limit time.Duration) time.Duration {
	t0 := time.Now()
	for time.Since(t0) < limit && ctx.Err() == nil {
		jobs, err := r.jobs(ctx)
		active, ended := 0, 0
		for _, j := range jobs {
			if j.state == "queued" || j.state == "running" {
				active++
			} else {
				ended++
			}
		}
		r.mu.Lock()
		want := len(r.accepted)
		r.mu.Unlock()
		if err == nil && active == 0 && ended >= want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(t0)
}
