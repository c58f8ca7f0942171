package importer

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress reports an import as it goes: on a terminal one line redrawn in
// place (a bar, the count, the bytes, the rate and the time left), else a
// plain line every interval. Messages (failures) are printed on lines of
// their own. It is safe for concurrent use.
type Progress struct {
	w     io.Writer
	tty   bool
	every time.Duration
	start time.Time
	// totals: items, and bytes when every item's size is known (else -1)
	items int64
	bytes int64

	created, skipped, failed atomic.Int64
	// halves counts the object bytes done in half bytes: a byte read in
	// one of an item's two reads (hash, then upload) is one, a byte of an
	// item read once is two.
	halves atomic.Int64

	mu   sync.Mutex
	drew bool // the terminal line shows a bar
	stop chan struct{}
	done chan struct{}
}

// NewProgress reports on w the import of items.
func NewProgress(w io.Writer, tty bool, every time.Duration, items []Item) *Progress {
	p := &Progress{w: w, tty: tty, every: every, items: int64(len(items)), start: time.Now()}
	for _, it := range items {
		if it.Size < 0 {
			p.bytes = -1
			break
		}
		p.bytes += it.Size
	}
	if tty {
		p.every = 200 * time.Millisecond
	}
	if p.every <= 0 {
		p.every = 10 * time.Second
	}
	return p
}

// Start reports until Stop.
func (p *Progress) Start() {
	p.start = time.Now()
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.report()
			}
		}
	}()
}

// Stop reports a last time and ends the terminal line.
func (p *Progress) Stop() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.report()
	p.mu.Lock()
	if p.tty && p.drew {
		fmt.Fprintln(p.w)
		p.drew = false
	}
	p.mu.Unlock()
}

// Printf prints a message line (under the bar's line, which is redrawn).
func (p *Progress) Printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drew {
		fmt.Fprint(p.w, "\r\033[K")
		p.drew = false
	}
	fmt.Fprintf(p.w, format+"\n", a...)
}

// itemBytes counts the bytes of one item's reads.
type itemBytes struct {
	p      *Progress
	weight int64 // half bytes per byte read: 1 when the item is read twice, 2 when once
	halves int64
}

// item counts the reads of an item of size bytes read twice or once.
func (p *Progress) item(twice bool) *itemBytes {
	w := int64(2)
	if twice {
		w = 1
	}
	return &itemBytes{p: p, weight: w}
}

func (c *itemBytes) add(n int64) {
	c.halves += c.weight * n
	c.p.halves.Add(c.weight * n)
}

// done counts the bytes not read of an item of size bytes that is done (a
// read it did not need: an object found on the node is not uploaded).
func (c *itemBytes) done(size int64) {
	if left := 2*size - c.halves; left > 0 {
		c.halves += left
		c.p.halves.Add(left)
	}
}

func (p *Progress) report() {
	line := p.line(time.Since(p.start))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K"+line)
		p.drew = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// line is the progress: count, bytes, rates and time left after elapsed.
func (p *Progress) line(elapsed time.Duration) string {
	created, skipped, failed := p.created.Load(), p.skipped.Load(), p.failed.Load()
	done, sent := created+skipped+failed, p.halves.Load()/2
	frac := 1.0
	switch {
	case p.bytes > 0:
		frac = min(float64(sent)/float64(p.bytes), 1)
	case p.items > 0:
		frac = float64(done) / float64(p.items)
	}
	secs := max(elapsed.Seconds(), 1e-3)
	var b strings.Builder
	if p.tty {
		const width = 24
		n := int(frac * width)
		b.WriteString("[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "] ")
	}
	fmt.Fprintf(&b, "%d/%d objects (%d created, %d skipped, %d failed)  %s", done, p.items, created, skipped, failed, size(sent))
	if p.bytes >= 0 {
		fmt.Fprintf(&b, " of %s", size(p.bytes))
	}
	fmt.Fprintf(&b, "  %s/s  %.1f objects/s", size(int64(float64(sent)/secs)), float64(done)/secs)
	switch {
	case done == p.items:
		fmt.Fprintf(&b, "  %s", elapsed.Round(time.Second))
	case frac > 0:
		left := time.Duration(float64(elapsed) * (1 - frac) / frac)
		fmt.Fprintf(&b, "  about %s left", left.Round(time.Second))
	}
	return b.String()
}

// size is n bytes for people: 1.5 MB, 3.2 GB (powers of 1000).
func size(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
