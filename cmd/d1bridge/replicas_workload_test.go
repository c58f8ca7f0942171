package main

// The workload of TestReplicasChaos (replicas_test.go): what the clients know,
// the operations they draw while replicas are killed, and the log harvested
// through the proxy as a CN does.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

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
