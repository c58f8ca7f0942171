package sqlcatalog

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/d1bridge/d1bridge/adapter"
)

// sortKey is a row's place in a list: (date_modified, seq) of an object,
// (date_logged, entry_id) of an event.
type sortKey struct{ t, id int64 }

func (a sortKey) less(b sortKey) bool { return a.t < b.t || (a.t == b.t && a.id < b.id) }

// lowest sorts before every row.
var lowest = sortKey{math.MinInt64, math.MinInt64}

// millis is t in milliseconds since the Unix epoch; t is already at DataONE
// precision.
func millis(t adapter.Time) int64 { return t.UnixMilli() }

// rowInfo is what the filters of listObjects can see of an object.
type rowInfo struct {
	key                    sortKey
	pid, sid, format, auth string
	readers                []string // subjects with level ≥ 1, sorted
}

// eventGroup is what the filters of getLogRecords can see of the events of
// one type and date a write appended, without looking at objects: how many,
// and the first and last of them. The events of a batch share their date
// and mostly their type, so a write's events take a group or two, however
// many there are (the listing cache keeps the last ringSize writes).
type eventGroup struct {
	low   sortKey // the first event's
	last  int64   // the last event's entry id
	event string
	n     int
}

// addEvent counts the event at k of type event into gs.
func addEvent(gs []eventGroup, k sortKey, event string) []eventGroup {
	for i := range gs {
		if g := &gs[i]; g.low.t == k.t && g.event == event {
			g.low.id, g.last, g.n = min(g.low.id, k.id), max(g.last, k.id), g.n+1
			return gs
		}
	}
	return append(gs, eventGroup{low: k, last: k.id, event: event, n: 1})
}

// change is what one write did: the object rows it changed (before and after;
// nil where there was, or is, no row) or the event it appended.
type change struct {
	rows    []rowChange
	events  []eventGroup
	touched []string           // PIDs changed in ways rows do not show (their checksums)
	logged  []adapter.LogEntry // events to append, by logChange, which fills events
	created []*stored          // rows of new objects, kept by the record cache once committed
	wide    bool               // too many rows to keep: it may have changed every list (cache.begin)
}

// pids are the PIDs whose records the change may have altered.
func (ch *change) pids() []string {
	out := append([]string(nil), ch.touched...)
	for _, rc := range ch.rows {
		for _, r := range []*rowInfo{rc.before, rc.after} {
			if r != nil {
				out = append(out, r.pid)
			}
		}
	}
	return out
}

type rowChange struct{ before, after *rowInfo }

// effect is what a change did to the rows a filter selects.
type effect struct {
	moved   bool    // rows at or after low may have entered, left or moved
	low     sortKey // meaningful when moved
	delta   int     // rows gained, less rows lost
	unknown bool    // the total changed by an amount the filter cannot tell
}

// filter is a normalized, comparable list query without its paging.
type filter interface {
	effect(ch *change) effect
}

// listFilter is a normalized adapter.ListQuery.
type listFilter struct {
	hasFrom, hasTo bool
	from, to       int64
	format         string
	ident          string // a PID, or a SID for every PID of its series
	auth           string // authoritative member node, when not ""
	readers        string // sorted subjects joined by \x00; "" for no restriction
	none           bool   // the query cannot match anything
}

func newListFilter(q adapter.ListQuery, nodeID string) listFilter {
	f := listFilter{format: q.FormatID, ident: q.Identifier, auth: q.NodeID}
	if !q.FromDate.IsZero() {
		f.hasFrom, f.from = true, millis(q.FromDate)
	}
	if !q.ToDate.IsZero() {
		f.hasTo, f.to = true, millis(q.ToDate)
	}
	if q.ExcludeReplicas && nodeID != "" {
		if f.auth != "" && f.auth != nodeID {
			f.none = true
		}
		f.auth = nodeID
	}
	if f.hasFrom && f.hasTo && f.from >= f.to {
		f.none = true
	}
	if !utf8.ValidString(f.ident) {
		f.none = true // identifiers are UTF-8 (adapter.CheckIdentifier)
	}
	f.readers = joinSubjects(q.ReadableBy)
	return f
}

// joinSubjects normalizes a subject set into a comparable string.
func joinSubjects(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	s := slices.Clone(ss)
	slices.Sort(s)
	s = slices.Compact(s)
	return strings.Join(s, "\x00")
}

func splitSubjects(s string) []string { return strings.Split(s, "\x00") }

// where returns the SQL conditions of f on objects o, and their arguments.
func (f listFilter) where(fromBound bool) (string, []any) {
	var conds []string
	var args []any
	if f.hasFrom && fromBound {
		conds, args = append(conds, "o.date_modified >= ?"), append(args, f.from)
	}
	if f.hasTo {
		conds, args = append(conds, "o.date_modified < ?"), append(args, f.to)
	}
	if f.format != "" {
		conds, args = append(conds, "o.format_id = ?"), append(args, f.format)
	}
	if f.ident != "" {
		conds, args = append(conds, "(o.pid = ? OR o.sid = ?)"), append(args, f.ident, f.ident)
	}
	if f.auth != "" {
		conds, args = append(conds, "o.authoritative_mn = ?"), append(args, f.auth)
	}
	if f.readers != "" {
		ss := splitSubjects(f.readers)
		// Probed row by row on the access index (a scalar subquery): the
		// blocks' seek bounds a page's rows. As EXISTS, PostgreSQL may join
		// instead and read every access row of the subjects (for a last page
		// of the public's list over 1M objects, a parallel hash join over
		// 333,334 rows: 70 ms, against 5 ms of probes).
		conds = append(conds, "(SELECT 1 FROM access a WHERE a.pid = o.pid AND a.subject IN ("+placeholders(len(ss))+") LIMIT 1) IS NOT NULL")
		for _, s := range ss {
			args = append(args, s)
		}
	}
	return strings.Join(conds, " AND "), args
}

// match is where in Go: whether the row r is selected.
func (f listFilter) match(r *rowInfo) bool {
	switch {
	case r == nil || f.none:
		return false
	case f.hasFrom && r.key.t < f.from, f.hasTo && r.key.t >= f.to:
		return false
	case f.format != "" && r.format != f.format:
		return false
	case f.ident != "" && r.pid != f.ident && r.sid != f.ident:
		return false
	case f.auth != "" && r.auth != f.auth:
		return false
	case f.readers != "":
		for _, s := range splitSubjects(f.readers) {
			if _, ok := slices.BinarySearch(r.readers, s); ok {
				return true
			}
		}
		return false
	}
	return true
}

func (f listFilter) effect(ch *change) effect {
	var e effect
	for _, rc := range ch.rows {
		mb, ma := f.match(rc.before), f.match(rc.after)
		if mb {
			e.delta--
			e.lower(rc.before.key)
		}
		if ma {
			e.delta++
			e.lower(rc.after.key)
		}
	}
	return e
}

// lower records that rows from k on may have moved.
func (e *effect) lower(k sortKey) {
	if !e.moved || k.less(e.low) {
		e.moved, e.low = true, k
	}
}

// eventFilter is a normalized adapter.LogQuery.
type eventFilter struct {
	hasFrom, hasTo bool
	from, to       int64
	event          string
	id             string // a PID prefix, or a SID for every PID of its series
	pidsOnly       bool   // id is a PID prefix only
	readers        string
	none           bool
}

func newEventFilter(q adapter.LogQuery) eventFilter {
	f := eventFilter{event: q.Event, id: q.IDFilter, pidsOnly: q.PIDsOnly, readers: joinSubjects(q.ReadableBy)}
	if !q.FromDate.IsZero() {
		f.hasFrom, f.from = true, millis(q.FromDate)
	}
	if !q.ToDate.IsZero() {
		f.hasTo, f.to = true, millis(q.ToDate)
	}
	if f.hasFrom && f.hasTo && f.from >= f.to {
		f.none = true
	}
	if !utf8.ValidString(f.id) {
		f.none = true // identifiers are UTF-8 (adapter.CheckIdentifier)
	}
	return f
}

// where is the condition of f's events; byID says how a query by identifier
// finds them (eventpids.go): by their ids, or by checking each event's PID.
func (f eventFilter) where(fromBound, byID bool) (string, []any) {
	var conds []string
	var args []any
	if f.hasFrom && fromBound {
		conds, args = append(conds, "e.date_logged >= ?"), append(args, f.from)
	}
	if f.hasTo {
		conds, args = append(conds, "e.date_logged < ?"), append(args, f.to)
	}
	if f.event != "" {
		conds, args = append(conds, "e.event = ?"), append(args, f.event)
	}
	switch {
	case f.id != "" && byID:
		q, qargs := f.idEvents()
		conds, args = append(conds, "e.entry_id IN ("+q+")"), append(args, qargs...)
	case f.id != "":
		cond, cargs := f.pidCond("e.pid")
		conds, args = append(conds, cond), append(args, cargs...)
	}
	if f.readers != "" {
		ss := splitSubjects(f.readers)
		conds = append(conds, "EXISTS (SELECT 1 FROM access a WHERE a.pid = e.pid AND a.subject IN ("+placeholders(len(ss))+"))")
		for _, s := range ss {
			args = append(args, s)
		}
	}
	return strings.Join(conds, " AND "), args
}

// dependsOnObjects reports whether which events f selects depends on the objects
// table (series membership, access), which an event alone does not tell.
func (f eventFilter) dependsOnObjects() bool { return f.id != "" || f.readers != "" }

// matchEvent is where in Go, for filters that do not depend on objects.
func (f eventFilter) matchEvent(e *eventGroup) bool {
	switch {
	case f.none:
		return false
	case f.hasFrom && e.low.t < f.from, f.hasTo && e.low.t >= f.to:
		return false
	case f.event != "" && e.event != f.event:
		return false
	}
	return true
}

func (f eventFilter) effect(ch *change) effect {
	var e effect
	for i := range ch.events {
		g := &ch.events[i]
		switch {
		case f.dependsOnObjects():
			e.lower(g.low)
			e.unknown = true
		case f.matchEvent(g):
			e.lower(g.low)
			e.delta += g.n
		}
	}
	if len(ch.rows) == 0 || !f.dependsOnObjects() {
		return e
	}
	for _, rc := range ch.rows {
		// Access changes move events of that PID anywhere in the log; series
		// membership changes when a row enters or leaves the series.
		if f.readers != "" || inSeries(rc.before, f.id) || inSeries(rc.after, f.id) {
			e.lower(lowest)
			e.unknown = true
		}
	}
	return e
}

func inSeries(r *rowInfo, sid string) bool { return r != nil && r.sid == sid }

// prefixEnd returns the least string greater than every string that starts
// with p, in byte (and so code point) order: p with its last character
// incremented, after dropping trailing U+10FFFF. There is none when p is all
// U+10FFFF, and then every valid string >= p starts with p. p is valid UTF-8.
func prefixEnd(p string) (string, bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			r = 0xE000 // skip the surrogates, which UTF-8 cannot hold
		default:
			r++
		}
		return p + string(r), true
	}
	return "", false
}
