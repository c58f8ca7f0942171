package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/cmd/d1bridge/internal/d1client"
)

// Options are one import.
type Options struct {
	Node     *d1client.Client
	Items    []Item
	Manifest map[string]*Entry // by Item.Path; nil: none
	Defaults Defaults
	Jobs     int // uploads at once
	Progress *Progress
}

// Failure is an item not imported, and why.
type Failure struct {
	Path, PID string
	Err       error
}

// Summary is what an import did.
type Summary struct {
	Created, Skipped int
	Bytes            int64 // object bytes uploaded
	Elapsed          time.Duration
	Failures         []Failure
}

// Run imports every item, Jobs at a time, and answers what it did. Each
// item is described on the node first: absent, it is created; present with
// the same checksum (computed again with the node's algorithm), skipped;
// present with another, a failure (IdentifierNotUnique), never overwritten.
// Manifest entries that name no item are failures too. Run starts no more
// uploads once ctx ends.
func Run(ctx context.Context, o Options) *Summary {
	start := time.Now()
	sum := &Summary{}
	var mu sync.Mutex
	failed := func(path, pid string, err error) {
		o.Progress.Printf("failed: %s (pid %s): %s", path, pid, describeErr(err))
		mu.Lock()
		sum.Failures = append(sum.Failures, Failure{Path: path, PID: pid, Err: err})
		mu.Unlock()
	}
	seen := make(map[string]bool, len(o.Items))
	for _, it := range o.Items {
		seen[it.Path] = true
	}
	for p, e := range o.Manifest {
		if !seen[p] {
			failed(p, e.PID, adapter.Errorf(adapter.InvalidRequest, "the manifest (line %d) names %q, which no source holds", e.line, p))
		}
	}
	work := make(chan Item)
	var wg sync.WaitGroup
	for range max(o.Jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				pid, created, n, err := one(ctx, &o, it)
				switch {
				case err != nil:
					o.Progress.failed.Add(1)
					failed(it.Path, pid, err)
				case created:
					o.Progress.created.Add(1)
					mu.Lock()
					sum.Created++
					sum.Bytes += n
					mu.Unlock()
				default:
					o.Progress.skipped.Add(1)
					mu.Lock()
					sum.Skipped++
					mu.Unlock()
				}
			}
		}()
	}
	o.Progress.Start()
feed:
	for _, it := range o.Items {
		select {
		case work <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	o.Progress.Stop()
	sum.Elapsed = time.Since(start)
	sort.Slice(sum.Failures, func(i, j int) bool { return sum.Failures[i].Path < sum.Failures[j].Path })
	return sum
}

// one imports it: its pid, whether it was created (else skipped), its size.
func one(ctx context.Context, o *Options, it Item) (pid string, created bool, n int64, err error) {
	e := o.Manifest[it.Path]
	d := &o.Defaults
	bytes := o.Progress.item(it.Local || d.PIDScheme == PIDChecksum)
	defer func() {
		if err == nil {
			bytes.done(n)
		}
	}()
	var pre *digest // the item's digest, when read before the upload
	switch {
	case e != nil && e.PID != "":
		pid = e.PID
	case d.PIDScheme == PIDChecksum:
		if pre, err = hashItem(ctx, it, d.Algorithm, bytes.add); err != nil {
			return "", false, 0, err
		}
		pid = d.pid(it, pre.sum)
	default:
		pid = d.pid(it, "")
	}
	have, err := o.Node.Describe(ctx, pid)
	switch {
	case err == nil:
		return pid, false, have.Size, same(ctx, it, pid, have, pre, bytes.add)
	case !adapter.IsKind(err, adapter.NotFound):
		return pid, false, 0, err
	}
	if it.Local || pre != nil {
		// Hashed first (a second read of a local file costs little), then
		// sent with the system metadata first: the node hashes it once.
		if pre == nil {
			if pre, err = hashItem(ctx, it, d.Algorithm, bytes.add); err != nil {
				return pid, false, 0, err
			}
		}
	}
	for wait := busyWait; ; wait *= 2 {
		n, err = upload(ctx, o, it, e, pid, pre, bytes.add)
		// A node at its bound on uploads in flight (limits.maxUploads,
		// maxUploadsPerClient) refused it before keeping anything: again.
		if !adapter.IsKind(err, adapter.InsufficientResources) || wait > maxBusyWait {
			return pid, err == nil, n, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return pid, false, n, err
		}
	}
}

// How long an upload the node refused as busy waits before it is sent
// again: busyWait, doubled each time, until maxBusyWait.
const (
	busyWait    = 250 * time.Millisecond
	maxBusyWait = 30 * time.Second
)

// upload creates it under pid: sent with its system metadata first when
// its digest pre is known, else read once, hashed as it is sent, with the
// system metadata after it. It answers the bytes sent.
func upload(ctx context.Context, o *Options, it Item, e *Entry, pid string, pre *digest, count func(int64)) (int64, error) {
	d := &o.Defaults
	rc, err := it.Open(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if pre != nil {
		sm := d.sysmeta(it, e, pid, pre)
		err := o.Node.Create(ctx, pid, &countingReader{r: rc, count: count}, func() (*adapter.SystemMetadata, error) { return sm, nil }, true)
		return pre.size, err
	}
	h, err := newHasher(d.Algorithm)
	if err != nil {
		return 0, err
	}
	body := io.TeeReader(&countingReader{r: rc, count: count}, h)
	err = o.Node.Create(ctx, pid, body, func() (*adapter.SystemMetadata, error) {
		return d.sysmeta(it, e, pid, h.digest()), nil
	}, false)
	return h.size, err
}

// same checks that the object the node holds under pid is it: the same
// checksum (in the node's algorithm) and size. pre is its digest when known.
func same(ctx context.Context, it Item, pid string, have *d1client.Description, pre *digest, count func(int64)) error {
	dg := pre
	if dg == nil || dg.alg != have.Checksum.Algorithm {
		var err error
		if dg, err = hashItem(ctx, it, have.Checksum.Algorithm, count); err != nil {
			return err
		}
	}
	if dg.sum == have.Checksum.Value && dg.size == have.Size {
		return nil
	}
	return adapter.Errorf(adapter.IdentifierNotUnique,
		"the node holds %q with %s %s (%d bytes), and the source's is %s (%d bytes): not overwritten",
		pid, have.Checksum.Algorithm, have.Checksum.Value, have.Size, dg.sum, dg.size).WithPID(pid)
}

// describeErr is an error for the summary: a DataONE error's name and
// description, else the error.
func describeErr(err error) string {
	var ex *adapter.Exception
	if errors.As(err, &ex) {
		return ex.Kind.String() + ": " + strings.TrimSpace(ex.Description)
	}
	return err.Error()
}

// Print writes the summary: the counts and rates, then each failure.
func (s *Summary) Print(w io.Writer) {
	secs := max(s.Elapsed.Seconds(), 1e-3)
	fmt.Fprintf(w, "imported %d objects (%s), skipped %d already there, %d failed, in %s (%.1f objects/s, %s/s)\n",
		s.Created, size(s.Bytes), s.Skipped, len(s.Failures), s.Elapsed.Round(time.Millisecond),
		float64(s.Created+s.Skipped)/secs, size(int64(float64(s.Bytes)/secs)))
	if len(s.Failures) == 0 {
		return
	}
	fmt.Fprintln(w, "failed:")
	for _, f := range s.Failures {
		fmt.Fprintf(w, "  %s (pid %s): %s\n", f.Path, f.PID, describeErr(f.Err))
	}
}
