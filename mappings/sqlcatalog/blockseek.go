package sqlcatalog

// Reading the list blocks (blocks.go): a filter's total and a cursor near
// any start, from the counts of the blocks in its window.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// rangePart is one index range of a key range: a condition and its arguments.
type rangePart struct {
	cond string // "" for no condition
	args []any
}

// keyRange returns the index ranges on (keyT, keyID) whose union is the keys
// in [lo, hi); nil for no bound, and lowest is no bound too. Each is a range
// of the sort key's index even when many rows share a date (see selectAfter).
func keyRange(keyT, keyID string, lo, hi *sortKey) []rangePart {
	if lo != nil && *lo == lowest {
		lo = nil
	}
	switch {
	case lo == nil && hi == nil:
		return []rangePart{{}}
	case lo != nil && hi != nil && lo.t == hi.t:
		return []rangePart{{keyT + " = ? AND " + keyID + " >= ? AND " + keyID + " < ?", []any{lo.t, lo.id, hi.id}}}
	}
	var parts []rangePart
	var mid []string
	var midArgs []any
	if lo != nil {
		parts = append(parts, rangePart{keyT + " = ? AND " + keyID + " >= ?", []any{lo.t, lo.id}})
		mid, midArgs = append(mid, keyT+" > ?"), append(midArgs, lo.t)
	}
	if hi != nil {
		mid, midArgs = append(mid, keyT+" < ?"), append(midArgs, hi.t)
	}
	parts = append(parts, rangePart{strings.Join(mid, " AND "), midArgs})
	if hi != nil {
		parts = append(parts, rangePart{keyT + " = ? AND " + keyID + " < ?", []any{hi.t, hi.id}})
	}
	return parts
}

// blockFilter is the part of a list filter that block counts answer: the
// conditions on the groups of object_blocks and reader_blocks and their
// arguments, whether only public objects count, and the readers besides the
// public whose other objects are added to the counts.
type blockFilter struct {
	conds  []string
	args   []any
	public bool
	others []string
}

// blockFilter returns the block filter of f; false when blocks cannot answer
// it (identifiers, readers that do not include the public).
//
// A signed-in caller reads the public objects and those granted to its
// subjects (its own, its groups', authenticatedUser's): the blocks count the
// first, and the others are found through the access index, or counted by
// the reader blocks (grants).
func (f listFilter) blockFilter() (blockFilter, bool) {
	var bf blockFilter
	switch {
	case f.ident != "":
		return bf, false
	case f.readers != "":
		ss := splitSubjects(f.readers)
		i, public := slices.BinarySearch(ss, adapter.SubjectPublic)
		if !public {
			return bf, false
		}
		bf.public, bf.others = true, slices.Delete(ss, i, i+1)
	}
	if f.format != "" {
		bf.conds, bf.args = append(bf.conds, "format_id = ?"), append(bf.args, f.format)
	}
	if f.auth != "" {
		bf.conds, bf.args = append(bf.conds, "authoritative_mn = ?"), append(bf.args, f.auth)
	}
	return bf, true
}

// seekBlocks returns the total of the list pq (whose filter f blocks answer
// through bf) and a cursor at or below start: its position and the key before
// the first row at that position (nil at position 0). It runs in tx, the
// snapshot the page is read from.
func (c *Catalog) seekBlocks(ctx context.Context, tx *sql.Tx, pq pageQuery, f listFilter, bf blockFilter, start int) (total, pos int, key *sortKey, err error) {
	first := lowest
	if f.hasFrom {
		if first, err = c.blockOf(ctx, tx, sortKey{f.from, math.MinInt64}); err != nil {
			return 0, 0, nil, err
		}
	}
	g, err := c.grants(ctx, tx, pq, f, bf.others)
	if err != nil {
		return 0, 0, nil, err
	}
	conds := bf.conds
	if bf.public {
		conds = append(slices.Clip(conds), "public = 1")
	}
	blocks, err := c.blockCounts(ctx, tx, "object_blocks", conds, nil, bf.args, f, first)
	if err != nil {
		return 0, 0, nil, err
	}
	if g.heavy != "" {
		// Every block with rows has object_blocks rows, so every one of
		// reader_blocks is among those.
		given, err := c.blockCounts(ctx, tx, "reader_blocks", nil, append(slices.Clip(bf.conds), "subject = ?"), append(slices.Clip(bf.args), g.heavy), f, first)
		if err != nil {
			return 0, 0, nil, err
		}
		for i, j := 0, 0; i < len(blocks) && j < len(given); i++ {
			if blocks[i].low == given[j].low {
				blocks[i].n += given[j].n
				j++
			}
		}
	}
	granted := g.keys
	// The rows of an edge block inside the window are counted on the key
	// range of both, without the window's bounds in the query: SQLite ranges
	// on one lower and one upper bound, and might take the window's.
	unbounded := f
	unbounded.hasFrom, unbounded.hasTo = false, false
	rest, restArgs := unbounded.where(false)
	for i := range blocks {
		lo := blocks[i].low
		var hi *sortKey
		if i+1 < len(blocks) {
			hi = &blocks[i+1].low
		}
		blocks[i].n += keysIn(granted, lo, hi)
		inside := (!f.hasFrom || lo.t >= f.from) && (!f.hasTo || (hi != nil && hi.t < f.to))
		if !inside && blocks[i].n > 0 {
			clo, chi := lo, hi
			if f.hasFrom && clo.less(sortKey{f.from, math.MinInt64}) {
				clo = sortKey{f.from, math.MinInt64}
			}
			if f.hasTo && (chi == nil || (sortKey{f.to, math.MinInt64}).less(*chi)) {
				chi = &sortKey{f.to, math.MinInt64}
			}
			if blocks[i].n, err = c.countIn(ctx, tx, pq.table, rest, restArgs, pq.keyT, pq.keyID, &clo, chi); err != nil {
				return 0, 0, nil, err
			}
		}
		if blocks[i].n > 0 && total <= start && i > 0 {
			pos, key = total, &sortKey{lo.t, lo.id - 1}
		}
		total += blocks[i].n
	}
	return total, pos, key, nil
}

// block is a list block's low key and a count of its rows.
type block struct {
	low sortKey
	n   int
}

// blockCounts returns, in order, the blocks of table (object_blocks or
// reader_blocks) from first within f's window whose rows meet where, each
// with the sum of the counts of its rows that meet counted; args are those of
// counted, then those of where.
func (c *Catalog) blockCounts(ctx context.Context, tx *sql.Tx, table string, counted, where []string, args []any, f listFilter, first sortKey) ([]block, error) {
	sum := "SUM(n)"
	if len(counted) > 0 {
		sum = "SUM(CASE WHEN " + strings.Join(counted, " AND ") + " THEN n ELSE 0 END)"
	}
	where = append(slices.Clip(where), "low_date >= ?")
	args = append(slices.Clip(args), first.t)
	if f.hasTo {
		where, args = append(where, "low_date < ?"), append(args, f.to)
	}
	q := "SELECT low_date, low_seq, " + sum + " FROM " + table + " WHERE " + strings.Join(where, " AND ")
	rows, err := tx.QueryContext(ctx, c.d.q(q+" GROUP BY low_date, low_seq ORDER BY low_date, low_seq"), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: reading the list blocks: %w", err)
	}
	defer rows.Close()
	var blocks []block
	for rows.Next() {
		var b block
		if err := rows.Scan(&b.low.t, &b.low.id, &b.n); err != nil {
			return nil, fmt.Errorf("sqlcatalog: reading the list blocks: %w", err)
		}
		if !b.low.less(first) {
			blocks = append(blocks, b)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlcatalog: reading the list blocks: %w", err)
	}
	return blocks, nil
}

// maxGranted bounds the access rows on objects that are not public that a
// seek reads one by one (about 7 µs each) for the subjects of a signed-in
// caller other than the one given the most: above it, counting and skipping
// costs less.
const maxGranted = 1 << 16

// errNoSeek says that the blocks would cost more than counting this list.
var errNoSeek = errors.New("sqlcatalog: the list is counted")

// granted is how a seek counts what a signed-in caller's subjects besides
// the public were given: the subject given the most through reader_blocks
// when they were given more than maxGranted ("" when not), and the keys
// that the others were given besides, in order.
type granted struct {
	heavy string
	keys  []sortKey
}

// grants returns the granted of others for the list pq of filter f;
// errNoSeek when the subjects other than the one given the most were given
// more than maxGranted.
func (c *Catalog) grants(ctx context.Context, tx *sql.Tx, pq pageQuery, f listFilter, others []string) (granted, error) {
	var g granted
	if len(others) == 0 {
		return g, nil
	}
	counts, err := c.readerCounts(ctx, tx, others)
	if err != nil {
		return g, err
	}
	sum, most := 0, 0
	for s, n := range counts {
		sum += n
		if n > most || (n == most && s < g.heavy) {
			g.heavy, most = s, n
		}
	}
	switch {
	case sum == 0:
		return g, nil
	case sum <= c.maxGranted:
		g.heavy = ""
	case sum-most > c.maxGranted:
		return g, errNoSeek
	}
	var subjects []any
	for _, s := range others {
		if s != g.heavy {
			subjects = append(subjects, s)
		}
	}
	if len(subjects) == 0 {
		return g, nil
	}
	unread := f
	unread.readers = ""
	where, whereArgs := unread.where(true)
	conds := []string{"g.subject IN (" + placeholders(len(subjects)) + ")", "g.public = 0", where}
	args := append(subjects, whereArgs...)
	if g.heavy != "" {
		// What the heavy subject was given too is in its reader blocks.
		conds, args = append(conds, "NOT EXISTS (SELECT 1 FROM access h WHERE h.pid = g.pid AND h.subject = ?)"), append(args, g.heavy)
	}
	q := "SELECT DISTINCT " + pq.keyT + ", " + pq.keyID + " FROM access g JOIN " + pq.table + " ON o.pid = g.pid" +
		" WHERE " + joinConds(conds) + " ORDER BY " + pq.keyT + ", " + pq.keyID
	rows, err := tx.QueryContext(ctx, c.d.q(q), args...)
	if err != nil {
		return g, fmt.Errorf("sqlcatalog: listing what the caller was granted: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k sortKey
		if err := rows.Scan(&k.t, &k.id); err != nil {
			return g, fmt.Errorf("sqlcatalog: listing what the caller was granted: %w", err)
		}
		g.keys = append(g.keys, k)
	}
	if err := rows.Err(); err != nil {
		return g, fmt.Errorf("sqlcatalog: listing what the caller was granted: %w", err)
	}
	return g, nil
}

// keysIn counts the keys (in order) in [lo, hi); hi nil for no bound.
func keysIn(keys []sortKey, lo sortKey, hi *sortKey) int {
	cmp := func(a, b sortKey) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	}
	from, _ := slices.BinarySearchFunc(keys, lo, cmp)
	to := len(keys)
	if hi != nil {
		to, _ = slices.BinarySearchFunc(keys, *hi, cmp)
	}
	return max(to-from, 0)
}

// countIn counts the rows of table that where selects whose key (keyT,
// keyID) is in [lo, hi).
func (c *Catalog) countIn(ctx context.Context, tx *sql.Tx, table, where string, whereArgs []any, keyT, keyID string, lo, hi *sortKey) (int, error) {
	var parts []string
	var args []any
	for _, p := range keyRange(keyT, keyID, lo, hi) {
		parts = append(parts, "(SELECT COUNT(*) FROM "+table+" WHERE "+joinConds([]string{where, p.cond})+")")
		args = append(append(args, whereArgs...), p.args...)
	}
	var n int
	if err := tx.QueryRowContext(ctx, c.d.q("SELECT "+strings.Join(parts, " + ")), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlcatalog: counting a list block: %w", err)
	}
	return n, nil
}

// joinConds joins the non-empty conditions with AND; "1 = 1" for none.
func joinConds(conds []string) string {
	conds = slices.DeleteFunc(slices.Clone(conds), func(s string) bool { return s == "" })
	if len(conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(conds, " AND ")
}
