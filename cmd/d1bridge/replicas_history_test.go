package main

// The history check of issue 14: per identifier, the system metadata writes
// and reads the clients of TestReplicasChaos made through the proxy, with the
// time of each call and return, must be linearizable on serialVersion: there
// is one order of the operations, each taking effect at an instant between
// its call and its return, in which every read sees the serialVersion the
// writes before it left. The checker is github.com/anishathalye/porcupine.
//
// The model (serialVersionModel) is a register per identifier holding its
// serialVersion, 1 once the create is acknowledged (clients touch an object
// only after that):
//   - smRead: getSystemMetadata or describe (DataONE-SerialVersion) saw Seen;
//   - smCAS: updateSystemMetadata or setAccessPolicy conditioned on the
//     version Expect the client read (setAccessPolicy sends serialVersion;
//     updateSystemMetadata sends the dateSysMetadataModified it read, which
//     names that version): accepted, it goes from Expect to Expect+1;
//     refused (VersionMismatch, or InvalidRequest for a stale
//     dateSysMetadataModified), the register did not hold Expect;
//   - smBump: an update (PUT /object/{pid} with newPid) obsoleted it, which
//     adds one to its serialVersion; refused (already obsoleted), no change.
// A write without an answer (the replica was killed, or the proxy answered
// 5xx) may have happened or not, at any time after its call: its return time
// is the end of time and the model lets it take effect or not.

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

type smKind uint8

const (
	smRead smKind = iota
	smCAS
	smBump
)

type smOutcome uint8

const (
	smOK      smOutcome = iota
	smRefused           // refused because the version was not the expected one, or (bump) already obsoleted
	smUnknown           // no answer: the write may have happened, at any time after its call
	smOther             // refused for another reason: nothing changed
)

func (o smOutcome) String() string {
	return [...]string{"ok", "refused", "unknown", "refused (other)"}[o]
}

// smInput is what a client asked of one identifier.
type smInput struct {
	PID    string
	Kind   smKind
	Expect uint64 // smCAS: the serialVersion the write is conditioned on
}

// smOutput is what it got.
type smOutput struct {
	Outcome smOutcome
	Seen    uint64 // smRead
}

// serialVersionModel is the register of one identifier's serialVersion (see
// the file comment); histories are partitioned by identifier.
var serialVersionModel = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			pid := op.Input.(smInput).PID
			by[pid] = append(by[pid], op)
		}
		out := make([][]porcupine.Operation, 0, len(by))
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []any { return []any{uint64(1)} },
	Step: func(state, input, output any) []any {
		v, in, out := state.(uint64), input.(smInput), output.(smOutput)
		switch in.Kind {
		case smRead:
			if out.Seen == v {
				return []any{v}
			}
			return nil
		case smCAS:
			switch out.Outcome {
			case smOK:
				if v == in.Expect {
					return []any{v + 1}
				}
				return nil
			case smRefused:
				if v != in.Expect {
					return []any{v}
				}
				return nil
			case smUnknown:
				if v == in.Expect {
					return []any{v, v + 1}
				}
			}
			return []any{v}
		case smBump:
			switch out.Outcome {
			case smOK:
				return []any{v + 1}
			case smUnknown:
				return []any{v, v + 1}
			}
			return []any{v}
		}
		return nil
	},
	Hash: func(s any) uint64 { return s.(uint64) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(smInput), output.(smOutput)
		switch in.Kind {
		case smRead:
			return fmt.Sprintf("read %s -> %d", in.PID, out.Seen)
		case smCAS:
			return fmt.Sprintf("write %s if %d -> %s", in.PID, in.Expect, out.Outcome)
		}
		return fmt.Sprintf("obsolete %s -> %s", in.PID, out.Outcome)
	},
	DescribeState: func(s any) string { return fmt.Sprint(s) },
}).ToModel()

// history records the clients' operations, timed on one monotonic clock.
type history struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
}

func newHistory() *history { return &history{base: time.Now()} }

// now is the time since the history began, in ns (monotonic).
func (h *history) now() int64 { return int64(time.Since(h.base)) }

// add records an operation; replica names the replica that answered ("" when
// none did).
func (h *history) add(client int, in smInput, out smOutput, call, ret int64, replica string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret, Metadata: replica})
}

// checkHistory checks each identifier's history on its own (the model's
// partition, done here so that a failure names the identifiers), and writes
// porcupine's visualization of the first illegal one under the module's tmp/.
func checkHistory(t *testing.T, h *history) {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	by := map[string][]porcupine.Operation{}
	kinds := map[string]int{}
	for _, op := range ops {
		in, out := op.Input.(smInput), op.Output.(smOutput)
		by[in.PID] = append(by[in.PID], op)
		switch in.Kind {
		case smRead:
			kinds["reads"]++
		case smCAS:
			kinds["conditional writes "+out.Outcome.String()]++
		case smBump:
			kinds["obsoleting updates "+out.Outcome.String()]++
		}
	}
	t.Logf("history: %d operations on %d identifiers: %v", len(ops), len(by), kinds)
	if len(ops) == 0 {
		t.Fatal("no operations recorded")
	}
	start := time.Now()
	var illegal, unknown []string
	for _, pid := range slices.Sorted(mapKeys(by)) {
		res, info := porcupine.CheckOperationsVerbose(serialVersionModel, by[pid], 10*time.Second)
		switch res {
		case porcupine.Illegal:
			if len(illegal) == 0 {
				if root, err := moduleRoot(); err == nil {
					p := filepath.Join(root, "tmp", "replicas-history.html")
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil && porcupine.VisualizePath(serialVersionModel, info, p) == nil {
						t.Logf("porcupine's visualization of %s: %s", pid, p)
					}
				}
			}
			illegal = append(illegal, pid)
			if len(illegal) <= 5 {
				t.Errorf("the history of %s is not linearizable on serialVersion:\n%s", pid, describeOps(by[pid]))
			}
		case porcupine.Unknown:
			unknown = append(unknown, pid)
		}
	}
	t.Logf("checked in %s", time.Since(start).Round(time.Millisecond))
	if len(illegal) > 0 {
		t.Errorf("%d of %d identifiers have a history that is not linearizable: %s", len(illegal), len(by), rsFirst(illegal, 20))
	}
	if len(unknown) > 0 {
		t.Errorf("porcupine could not decide within 10s for %d identifiers: %s", len(unknown), rsFirst(unknown, 20))
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// describeOps lists operations by call time, one a line.
func describeOps(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	ms := func(ns int64) string {
		if ns == math.MaxInt64 {
			return "never"
		}
		return fmt.Sprintf("%.3fs", float64(ns)/1e9)
	}
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "  client %d [%s, %s] %s", op.ClientId, ms(op.Call), ms(op.Return),
			serialVersionModel.DescribeOperation(op.Input, op.Output))
		if r, _ := op.Metadata.(string); r != "" {
			fmt.Fprintf(&b, " (replica %s)", r)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSerialVersionModel: the model accepts linearizable histories and
// refuses the ones a replica with a stale view would produce.
func TestSerialVersionModel(t *testing.T) {
	t.Parallel()
	never := int64(math.MaxInt64)
	read := func(pid string, seen uint64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: smInput{PID: pid, Kind: smRead}, Output: smOutput{Seen: seen}, Call: call, Return: ret}
	}
	cas := func(pid string, expect uint64, o smOutcome, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: smInput{PID: pid, Kind: smCAS, Expect: expect}, Output: smOutput{Outcome: o}, Call: call, Return: ret}
	}
	bump := func(pid string, o smOutcome, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 2, Input: smInput{PID: pid, Kind: smBump}, Output: smOutput{Outcome: o}, Call: call, Return: ret}
	}
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"a write then reads", []porcupine.Operation{read("a", 1, 0, 5), cas("a", 1, smOK, 10, 20), read("a", 2, 30, 40)}, true},
		{"a read concurrent with the write sees either", []porcupine.Operation{cas("a", 1, smOK, 10, 20), read("a", 1, 12, 15), read("a", 2, 13, 16)}, true},
		{"a stale read after an acknowledged write", []porcupine.Operation{cas("a", 1, smOK, 10, 20), read("a", 1, 30, 40)}, false},
		{"a read going back", []porcupine.Operation{cas("a", 1, smOK, 10, 20), read("a", 2, 12, 25), read("a", 1, 30, 40)}, false},
		{"two writes from the same version both accepted (a lost update)", []porcupine.Operation{cas("a", 1, smOK, 0, 10), cas("a", 1, smOK, 20, 30)}, false},
		{"two concurrent writes from one version, one refused", []porcupine.Operation{cas("a", 1, smOK, 0, 10), cas("a", 1, smRefused, 5, 15), read("a", 2, 20, 30)}, true},
		{"a write refused at the version it names", []porcupine.Operation{read("a", 1, 0, 5), cas("a", 1, smRefused, 10, 20)}, false},
		{"a write with no answer that happened", []porcupine.Operation{cas("a", 1, smUnknown, 0, never), read("a", 2, 10, 20)}, true},
		{"a write with no answer that did not happen", []porcupine.Operation{cas("a", 1, smUnknown, 0, never), read("a", 1, 10, 20), cas("a", 1, smOK, 30, 40), read("a", 2, 50, 60)}, true},
		{"a write with no answer cannot happen twice", []porcupine.Operation{cas("a", 1, smUnknown, 0, never), read("a", 2, 10, 20), read("a", 3, 30, 40)}, false},
		{"a write refused for another reason changes nothing", []porcupine.Operation{cas("a", 1, smOther, 0, 10), read("a", 1, 20, 30)}, true},
		{"an update obsoletes", []porcupine.Operation{bump("a", smOK, 0, 10), read("a", 2, 20, 30), cas("a", 2, smOK, 40, 50), read("a", 3, 60, 70)}, true},
		{"a read after the update that obsoleted it, stale", []porcupine.Operation{bump("a", smOK, 0, 10), read("a", 1, 20, 30)}, false},
		{"identifiers are independent", []porcupine.Operation{cas("a", 1, smOK, 0, 10), read("b", 1, 20, 30), read("a", 2, 20, 30)}, true},
		{"one identifier's violation is found among others", []porcupine.Operation{cas("a", 1, smOK, 0, 10), read("b", 1, 20, 30), read("a", 1, 20, 30)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(serialVersionModel, c.ops); got != c.ok {
				t.Errorf("linearizable: %v, want %v\n%s", got, c.ok, describeOps(c.ops))
			}
		})
	}
}
