package node_test

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

const (
	replNodeID = "urn:node:t"
	replSource = "urn:node:source"
)

// replEnv is a member node on dir with a source node that serves objects (each
// request waits for gate, when set) and a CN that records notifications.
type replEnv struct {
	t      *testing.T
	dir    string
	n      *node.Node
	cat    *sqlcatalog.Catalog
	asked  chan string // the PIDs the source was asked for
	srcURL string
	cnURL  string

	mu       sync.Mutex
	objects  map[string][]byte
	gate     chan struct{}     // when set, the source answers once it is closed
	notified map[string]string // status by PID
	notices  map[string]int    // notifications by PID
	served   map[string]int    // answers by PID

	// wrap, when set, is the catalog the node is given around the real one.
	wrap func(*sqlcatalog.Catalog) node.Catalog
}

func (e *replEnv) setGate(g chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gate = g
}

func newReplEnv(t *testing.T, dir string) *replEnv {
	e := &replEnv{t: t, dir: dir, objects: map[string][]byte{}, asked: make(chan string, 16), notified: map[string]string{},
		notices: map[string]int{}, served: map[string]int{}}
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pid := strings.TrimPrefix(r.URL.Path, "/v2/replica/")
		e.asked <- pid
		e.mu.Lock()
		gate := e.gate
		e.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		e.mu.Lock()
		data, ok := e.objects[pid]
		e.served[pid]++
		first := e.served[pid] == 1
		e.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasPrefix(pid, "cut-") && first { // half the bytes, and the connection closes
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data[:len(data)/2])
			return
		}
		if strings.HasPrefix(pid, "stall-") { // half the bytes, then nothing
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Write(data)
	}))
	t.Cleanup(src.Close)
	cn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pid := strings.TrimPrefix(r.URL.Path, "/v2/replicaNotifications/")
		e.mu.Lock()
		e.notified[pid] = r.FormValue("status")
		e.notices[pid]++
		e.mu.Unlock()
	}))
	t.Cleanup(cn.Close)
	e.srcURL, e.cnURL = src.URL, cn.URL
	e.open(nil)
	return e
}

// open starts the node on e.dir with policy (nil: no limits).
func (e *replEnv) open(policy *adapter.NodeReplicationPolicy) {
	cat, err := sqlcatalog.OpenSQLite(filepath.Join(e.dir, "catalog.db"), sqlcatalog.WithNodeID(replNodeID))
	if err != nil {
		e.t.Fatal(err)
	}
	blobs, err := fsblobs.New(filepath.Join(e.dir, "objects"))
	if err != nil {
		e.t.Fatal(err)
	}
	var nc node.Catalog = cat
	if e.wrap != nil {
		nc = e.wrap(cat)
	}
	e.cat, e.n = cat, node.New(replNodeID, blobs, nc, nil)
	e.configure(true, policy)
}

func (e *replEnv) configure(accept bool, policy *adapter.NodeReplicationPolicy) {
	e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
		CNBaseURL: e.cnURL, Accept: accept, Policy: policy, JobsDir: e.jobsDir()})
}

func (e *replEnv) jobsDir() string { return filepath.Join(e.dir, "replication") }

// object puts data on the source and returns its system metadata.
func (e *replEnv) object(pid, formatID string, data []byte) *adapter.SystemMetadata {
	e.mu.Lock()
	e.objects[pid] = data
	e.mu.Unlock()
	sum := sha1.Sum(data)
	return &adapter.SystemMetadata{Identifier: pid, FormatID: formatID, Size: uint64(len(data)),
		Checksum: adapter.Checksum{Algorithm: "SHA-1", Value: hex.EncodeToString(sum[:])}, RightsHolder: "CN=owner",
		OriginMemberNode: replSource, AuthoritativeMemberNode: replSource}
}

func (e *replEnv) replicate(sm *adapter.SystemMetadata, source string) error {
	return e.n.Replicate(e.t.Context(), &adapter.Session{Subject: "CN=cn", Address: "192.0.2.1"}, sm, source)
}

// status waits for the CN's notification of pid.
func (e *replEnv) status(pid string) string {
	e.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		st, ok := e.notified[pid]
		e.mu.Unlock()
		if ok {
			return st
		}
	}
	e.t.Fatalf("no notification of %q in 20s", pid)
	return ""
}

// jobFiles are the names in the jobs directory.
func (e *replEnv) jobFiles() []string {
	entries, _ := os.ReadDir(e.jobsDir())
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	return names
}

func u64(v uint64) *uint64 { return &v }

// TestReplicatePolicy: node.replicate and each limit of the replication policy
// refuse with their kind and say what was wrong; spaceAllocated counts the
// replicas held and the copies under way, not the node's own objects.
func TestReplicatePolicy(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	small := e.object("small", "text/csv", []byte("a,b\n1,2\n"))

	e.configure(false, nil)
	err := e.replicate(small, replSource)
	wantKind(t, "node.replicate off", err, adapter.InvalidRequest, "")
	if err != nil && !strings.Contains(adapter.AsException(err).Description, "node.replicate") {
		t.Errorf("node.replicate off: %v does not say why", err)
	}

	policy := &adapter.NodeReplicationPolicy{MaxObjectSize: u64(100), SpaceAllocated: u64(150),
		AllowedNode: []string{replSource}, AllowedObjectFormat: []string{"text/csv"}}
	e.configure(true, policy)
	// The node's own object does not count against the space for replicas.
	own := e.object("own", "text/csv", make([]byte, 1000))
	own.AuthoritativeMemberNode = replNodeID
	if err := e.cat.Insert(t.Context(), &node.Record{Meta: own, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	held := e.object("held", "text/csv", make([]byte, 60))
	if err := e.cat.Insert(t.Context(), &node.Record{Meta: held, BlobKey: "k"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		sm     *adapter.SystemMetadata
		source string
		kind   adapter.Kind
		says   []string
	}{
		{"too large", e.object("large", "text/csv", make([]byte, 101)), replSource, adapter.InsufficientResources, []string{"101 bytes", "at most 100 bytes"}},
		{"source not allowed", small, "urn:node:other", adapter.InvalidRequest, []string{"urn:node:other", replSource}},
		{"format not allowed", e.object("plain", "text/plain", []byte("x")), replSource, adapter.UnsupportedType, []string{`"text/plain"`, "text/csv"}},
		{"space allocated", e.object("big", "text/csv", make([]byte, 91)), replSource, adapter.InsufficientResources, []string{"91 bytes", "use 60 of the 150 bytes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := e.replicate(c.sm, c.source)
			wantKind(t, c.name, err, c.kind, c.sm.Identifier)
			for _, s := range c.says {
				if err != nil && !strings.Contains(adapter.AsException(err).Description, s) {
					t.Errorf("%q does not say %q", adapter.AsException(err).Description, s)
				}
			}
		})
	}

	// A copy under way holds its bytes: 60 held + 80 copying leave 10.
	gate := make(chan struct{})
	e.setGate(gate)
	copying := e.object("copying", "text/csv", make([]byte, 80))
	if err := e.replicate(copying, replSource); err != nil {
		t.Fatal(err)
	}
	<-e.asked
	err = e.replicate(e.object("eleven", "text/csv", make([]byte, 11)), replSource)
	wantKind(t, "space with a copy under way", err, adapter.InsufficientResources, "eleven")
	if err != nil && !strings.Contains(adapter.AsException(err).Description, "140 of the 150 bytes allocated to them (spaceAllocated), 80 of those in copies under way") {
		t.Errorf("space with a copy under way: %v", err)
	}
	close(gate)
	if st := e.status("copying"); st != adapter.ReplicaCompleted {
		t.Fatalf("copying: %s", st)
	}
	if err := e.replicate(e.object("ten", "text/csv", make([]byte, 10)), replSource); err != nil {
		t.Errorf("10 bytes in the last 10: %v", err)
	}
	if st := e.status("ten"); st != adapter.ReplicaCompleted {
		t.Fatalf("ten: %s", st)
	}
}

// legacyJobFile writes the job file an earlier version kept for sm in the
// jobs directory, and returns its name.
func (e *replEnv) legacyJobFile(sm *adapter.SystemMetadata) string {
	e.t.Helper()
	var doc bytes.Buffer
	if err := adapter.Encode(&doc, sm, 2); err != nil {
		e.t.Fatal(err)
	}
	data, err := json.Marshal(map[string]any{"sourceNode": replSource, "subject": "CN=cn", "address": "192.0.2.1",
		"accepted": time.Now().UTC(), "systemMetadata": doc.String()})
	if err != nil {
		e.t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(sm.Identifier))
	name := hex.EncodeToString(sum[:]) + ".json"
	if err := os.MkdirAll(e.jobsDir(), 0o750); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.jobsDir(), name), data, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return name
}

// replJob is the queue's replication job of pid.
func (e *replEnv) replJob(pid string) sqlcatalog.JobRow {
	e.t.Helper()
	rows, err := e.cat.Jobs(e.t.Context(), "replicate")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range rows {
		if r.Key == replNodeID+" "+pid {
			return r
		}
	}
	e.t.Fatalf("no replication job of %q in %+v", pid, rows)
	return sqlcatalog.JobRow{}
}

// TestReplicationJobsResume: an accepted job is in the catalog's queue until
// it ends; the shutdown puts it back without telling the CN (the attempt not
// counted), and the next start resumes it. The job files of an earlier version
// are moved into the queue and removed, once; unreadable ones are set aside,
// half-written ones removed.
func TestReplicationJobsResume(t *testing.T) {
	dir := t.TempDir()
	e := newReplEnv(t, dir)
	data := []byte("the bytes of a resumed replica\n")
	sm := e.object("resumed", "text/csv", data)
	e.setGate(make(chan struct{}))
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	<-e.asked
	if j := e.replJob("resumed"); j.State != "running" || j.Attempt != 1 {
		t.Fatalf("the job while it runs: %+v", j)
	}
	if err := e.replicate(sm, replSource); !adapter.IsKind(err, adapter.IdentifierNotUnique) {
		t.Errorf("a replicate of a PID being replicated: %v, want IdentifierNotUnique", err)
	}
	if err := e.n.Close(); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	st, told := e.notified["resumed"]
	e.mu.Unlock()
	if told {
		t.Fatalf("the CN was told %q of a job cut short by the shutdown", st)
	}

	legacyData := []byte("a job an earlier version kept in a file\n")
	legacy := e.object("legacy", "text/csv", legacyData)
	legacyFile := e.legacyJobFile(legacy)
	for name, content := range map[string]string{
		"broken.json":       "{not json",
		"badsysmeta.json":   `{"sourceNode": "urn:node:source", "systemMetadata": "<nope/>"}`,
		".tmp-123":          "half written",
		"notes.txt":         "not a job",
		"old.json" + ".bad": "set aside before",
	} {
		if err := os.WriteFile(filepath.Join(e.jobsDir(), name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.setGate(nil)
	e.open(nil)
	defer e.n.Close()
	if j := e.replJob("resumed"); j.State != "queued" || j.Attempt != 0 {
		t.Fatalf("the job after the shutdown: %+v, want queued, no attempt counted", j)
	}
	if k := e.n.StartWork(); k != 1 {
		t.Errorf("StartWork moved %d job files, want 1", k)
	}
	if k := e.n.StartWork(); k != 0 {
		t.Errorf("a second StartWork moved %d job files, want 0", k)
	}
	for _, c := range []struct {
		pid  string
		data []byte
	}{{"resumed", data}, {"legacy", legacyData}} {
		if st := e.status(c.pid); st != adapter.ReplicaCompleted {
			t.Fatalf("the job of %s ended %q", c.pid, st)
		}
		rec, err := e.cat.Lookup(t.Context(), c.pid)
		if err != nil || rec.Meta.Size != uint64(len(c.data)) {
			t.Fatalf("the replica of %s: %+v %v", c.pid, rec, err)
		}
		waitJob(t, e, c.pid, "done")
		if j := e.replJob(c.pid); j.Attempt != 1 {
			t.Errorf("the job of %s: %+v, want done at its first attempt", c.pid, j)
		}
	}
	want := []string{"badsysmeta.json.bad", "broken.json.bad", "notes.txt", "old.json.bad"}
	if got := e.jobFiles(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("job files: %v, want %v (%s moved)", got, want, legacyFile)
	}
}

// waitJob waits for the job of pid to be in state.
func waitJob(t *testing.T, e *replEnv, pid, state string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.replJob(pid).State != state; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job of %s: %+v, want %s", pid, e.replJob(pid), state)
		}
	}
}

// TestReplicationJobFilesOnly: job files moved at start leave no directory
// behind once it is empty.
func TestReplicationJobFilesOnly(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	e.legacyJobFile(e.object("only", "text/csv", []byte("only\n")))
	if k := e.n.StartWork(); k != 1 {
		t.Fatalf("StartWork moved %d job files, want 1", k)
	}
	if st := e.status("only"); st != adapter.ReplicaCompleted {
		t.Fatalf("the moved job ended %q", st)
	}
	if _, err := os.Stat(e.jobsDir()); !os.IsNotExist(err) {
		t.Errorf("the jobs directory is still there: %v (%v)", e.jobFiles(), err)
	}
}

// TestReplicateVersionChain: the versions of a series arrive as replicas in
// any order, with the chain the CN sent, though this node holds no other
// member or only some.
func TestReplicateVersionChain(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	v2 := e.object("chain-v2", "text/csv", []byte("version 2\n"))
	v2.SeriesID, v2.Obsoletes = "chain", "chain-v1"
	v1 := e.object("chain-v1", "text/csv", []byte("version 1\n"))
	v1.SeriesID, v1.ObsoletedBy = "chain", "chain-v2"
	for _, sm := range []*adapter.SystemMetadata{v2, v1} {
		if err := e.replicate(sm, replSource); err != nil {
			t.Fatalf("replicate %s: %v", sm.Identifier, err)
		}
		if st := e.status(sm.Identifier); st != adapter.ReplicaCompleted {
			t.Fatalf("replica of %s: the CN was told %q", sm.Identifier, st)
		}
	}
	head, err := e.n.SystemMetadata(t.Context(), adapter.PublicSession(), "chain")
	if err != nil || head.Identifier != "chain-v2" {
		t.Fatalf("head of the series: %v %v", head, err)
	}
	old, err := e.cat.Lookup(t.Context(), "chain-v1")
	if err != nil || old.Meta.ObsoletedBy != "chain-v2" {
		t.Fatalf("chain-v1: %+v %v", old, err)
	}
}

// TestReplicateStalledSource: a source that stops sending midway fails the
// copy after the stall timeout and keeps nothing; the copy is tried again
// after the backoff, and once the attempts are spent the job ends failed,
// frees the slot and tells the CN.
func TestReplicateStalledSource(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
		CNBaseURL: e.cnURL, Accept: true, JobsDir: e.jobsDir(), StallTimeout: 200 * time.Millisecond,
		MaxAttempts: 2, RetryBackoff: 300 * time.Millisecond})
	sm := e.object("stall-1", "text/csv", bytes.Repeat([]byte("x"), 1<<20))
	start := time.Now()
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	if st := e.status("stall-1"); st != adapter.ReplicaFailed {
		t.Fatalf("the CN was told %q, want failed", st)
	}
	if d := time.Since(start); d > 5*time.Second || d < 600*time.Millisecond {
		t.Errorf("the stalled copy took %s to fail, want two stalls and a backoff", d)
	}
	if asked := len(e.asked); asked != 2 {
		t.Errorf("the source was asked %d times, want 2 (two attempts)", asked)
	}
	waitJob(t, e, "stall-1", "failed")
	if j := e.replJob("stall-1"); j.Attempt != 2 || !strings.Contains(j.Error, "sent nothing") {
		t.Errorf("the job: %+v", j)
	}
	if _, err := e.cat.Lookup(t.Context(), "stall-1"); !adapter.IsKind(err, adapter.NotFound) {
		t.Errorf("the stalled replica was stored: %v", err)
	}
	// The slot is free: a healthy replica after it completes.
	ok := e.object("after-stall", "text/csv", []byte("fine\n"))
	if err := e.replicate(ok, replSource); err != nil {
		t.Fatal(err)
	}
	if st := e.status("after-stall"); st != adapter.ReplicaCompleted {
		t.Errorf("the next replica: %q", st)
	}
}

// TestReplicateCutSource: a source whose answer ends before its
// Content-Length is a network fault, retried, not a replica of the wrong
// size refused for good.
func TestReplicateCutSource(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	defer e.n.Close()
	e.n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
		CNBaseURL: e.cnURL, Accept: true, JobsDir: e.jobsDir(), MaxAttempts: 2, RetryBackoff: 10 * time.Millisecond})
	data := bytes.Repeat([]byte("cut "), 1<<18)
	sm := e.object("cut-1", "text/plain", data)
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	if st := e.status("cut-1"); st != adapter.ReplicaCompleted {
		t.Fatalf("the CN was told %q, want completed on the second attempt", st)
	}
	if got := e.read("cut-1"); !bytes.Equal(got, data) {
		t.Errorf("the replica holds %d bytes, want the %d of the source", len(got), len(data))
	}
}

// TestReplicaWhoseCommitAnswerIsLost: a replica whose commit happened though
// the catalog answered an error keeps its bytes: the CN is told completed and
// the replica can be read.
func TestReplicaWhoseCommitAnswerIsLost(t *testing.T) {
	e := newReplEnv(t, t.TempDir())
	e.n.Close()
	e.wrap = func(c *sqlcatalog.Catalog) node.Catalog { return lostCommit{c} }
	e.open(nil)
	defer e.n.Close()
	data := []byte("a replica whose commit's answer is lost\n")
	sm := e.object("lost-replica", "text/plain", data)
	if err := e.replicate(sm, replSource); err != nil {
		t.Fatal(err)
	}
	if st := e.status("lost-replica"); st != adapter.ReplicaCompleted {
		t.Fatalf("the CN was told %q, want completed", st)
	}
	if got := e.read("lost-replica"); !bytes.Equal(got, data) {
		t.Errorf("the replica reads %q, want %q", got, data)
	}
}

// read is the bytes of the replica pid, read as its rights holder.
func (e *replEnv) read(pid string) []byte {
	e.t.Helper()
	o, err := e.n.Get(e.t.Context(), &adapter.Session{Subject: "CN=owner", Subjects: []string{"CN=owner"}}, pid)
	if err != nil {
		e.t.Fatalf("get of the replica %q: %v", pid, err)
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	if err != nil {
		e.t.Fatalf("reading the replica %q: %v", pid, err)
	}
	return b
}

var closed sync.Map // *node.Node -> struct{}

// closeOnce closes n unless it was.
func closeOnce(n *node.Node) {
	if _, done := closed.LoadOrStore(n, struct{}{}); !done {
		n.Close()
	}
}

// TestReplicateSharedCatalog: two nodes on one PostgreSQL catalog (and one
// store), as two replicas; the one that accepted a job stops mid-copy, and
// the other finishes the job: at once after a shutdown, once the lease has
// expired after the first lost its database (it stops its copy itself first).
// The replica is stored once, and the CN is told once.
func TestReplicateSharedCatalog(t *testing.T) {
	pgtest.Start(t)
	e := newReplEnv(t, t.TempDir())
	e.n.Close()
	// Long enough that a renewal late by a second (CI, with -race) keeps it.
	const lease = 3 * time.Second
	for _, c := range []struct {
		name     string
		stop     func(n *node.Node, cat *sqlcatalog.Catalog)
		attempts int
	}{
		{"shut down", func(n *node.Node, _ *sqlcatalog.Catalog) { closeOnce(n) }, 1},
		{"database lost", func(_ *node.Node, cat *sqlcatalog.Catalog) { cat.Close() }, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn, store := pgtest.Start(t), t.TempDir()
			open := func() (*node.Node, *sqlcatalog.Catalog) {
				cat, err := sqlcatalog.OpenPostgres(dsn, sqlcatalog.WithNodeID(replNodeID), sqlcatalog.WithCache(0, 0), sqlcatalog.WithRecordCache(0))
				if err != nil {
					t.Fatal(err)
				}
				blobs, err := fsblobs.New(store)
				if err != nil {
					t.Fatal(err)
				}
				n := node.New(replNodeID, blobs, cat, nil)
				n.SetReplication(node.Replication{Registry: []adapter.NodeRef{{ID: replSource, BaseURL: e.srcURL}},
					CNBaseURL: e.cnURL, Accept: true, RescueAfter: lease, Poll: 100 * time.Millisecond})
				t.Cleanup(func() { closeOnce(n) })
				return n, cat
			}
			a, catA := open()
			b, catB := open()
			pid := "shared-" + strings.ReplaceAll(c.name, " ", "-")
			data := bytes.Repeat([]byte("a replica two replicas share\n"), 1000)
			sm := e.object(pid, "text/csv", data)
			for len(e.asked) > 0 {
				<-e.asked
			}
			e.setGate(make(chan struct{})) // never opened: the first copy hangs
			if err := a.Replicate(t.Context(), &adapter.Session{Subject: "CN=cn"}, sm, replSource); err != nil {
				t.Fatal(err)
			}
			if got := <-e.asked; got != pid {
				t.Fatalf("the source was asked for %q", got)
			}
			b.StartWork()
			err := b.Replicate(t.Context(), &adapter.Session{Subject: "CN=cn"}, sm, replSource)
			wantKind(t, "replicate through the other replica", err, adapter.IdentifierNotUnique, pid)
			time.Sleep(lease + time.Second) // B does not take a job A holds and renews
			jobs, err := catB.Jobs(t.Context(), "replicate")
			if err != nil || len(jobs) != 1 || jobs[0].State != "running" || jobs[0].Attempt != 1 {
				t.Fatalf("the job while A copies: %+v %v", jobs, err)
			}
			holderA := jobs[0].Holder

			e.setGate(nil)
			c.stop(a, catA)
			stopped := time.Now()
			if st := e.status(pid); st != adapter.ReplicaCompleted {
				t.Fatalf("the CN was told %q", st)
			}
			t.Logf("B finished the job %s after A stopped", time.Since(stopped).Round(time.Millisecond))
			rec, err := catB.Lookup(t.Context(), pid)
			if err != nil || rec.Meta.Size != uint64(len(data)) {
				t.Fatalf("the replica: %+v %v", rec, err)
			}
			body, err := b.Get(t.Context(), adapter.PublicSession(), pid)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(body.Body)
			body.Body.Close()
			if !bytes.Equal(got, data) {
				t.Errorf("the replica's bytes differ")
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if jobs, err = catB.Jobs(t.Context(), "replicate"); err == nil && len(jobs) == 1 && jobs[0].State == "done" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the job: %+v %v", jobs, err)
				}
			}
			if j := jobs[0]; j.Attempt != c.attempts || j.Holder == holderA {
				t.Errorf("the job: %+v, want done by B at attempt %d", j, c.attempts)
			}
			time.Sleep(lease + time.Second) // whatever A would still do
			e.mu.Lock()
			notices := e.notices[pid]
			e.mu.Unlock()
			if notices != 1 {
				t.Errorf("the CN was told %d times", notices)
			}
			l, err := b.LogRecords(t.Context(), adapter.PublicSession(), adapter.LogQuery{IDFilter: pid, Event: adapter.EventCreate, Count: 10})
			if err != nil || l.Total != 1 {
				t.Errorf("create events of the replica: %+v %v, want one", l, err)
			}
			if files, _ := os.ReadDir(store); len(files) == 0 {
				t.Errorf("the store holds nothing")
			}
		})
	}
}
