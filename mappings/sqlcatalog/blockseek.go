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
// conditions on object_blocks' groups and their arguments, and the readers
// besides the public whose other objects are added to the counts.
type blockFilter struct {
	conds  []string
	args   []any
	others []string
}

// blockFilter returns the block filter of f; false when blocks cannot answer
// it (identifiers, readers that do not include the public).
//
// A signed-in caller reads the public objects and those granted to its
// subjects (its own, its groups', authenticatedUser's): the blocks count the
// first, and the others, which do not grow with the catalog but with what
// those subjects were given, are found through the access index.
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
		bf.conds, bf.others = append(bf.conds, "public = 1"), slices.Delete(ss, i, i+1)
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
	sum := "SUM(n)"
	if len(bf.conds) > 0 {
		sum = "SUM(CASE WHEN " + strings.Join(bf.conds, " AND ") + " THEN n ELSE 0 END)"
	}
	q := "SELECT low_date, low_seq, " + sum + " FROM object_blocks WHERE low_date >= ?"
	args := append(slices.Clone(bf.args), first.t)
	if f.hasTo {
		q, args = q+" AND low_date < ?", append(args, f.to)
	}
	rows, err := tx.QueryContext(ctx, c.d.q(q+" GROUP BY low_date, low_seq ORDER BY low_date, low_seq"), args...)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("sqlcatalog: reading the list blocks: %w", err)
	}
	type block struct {
		low sortKey
		n   int
	}
	var blocks []block
	for rows.Next() {
		var b block
		if err := rows.Scan(&b.low.t, &b.low.id, &b.n); err != nil {
			rows.Close()
			return 0, 0, nil, fmt.Errorf("sqlcatalog: reading the list blocks: %w", err)
		}
		if !b.low.less(first) {
			blocks = append(blocks, b)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, nil, fmt.Errorf("sqlcatalog: reading the list blocks: %w", err)
	}
	granted, err := c.grantedKeys(ctx, tx, pq, f, bf.others)
	if err != nil {
		return 0, 0, nil, err
	}
	// The rows of an edge block inside the window are counted on the key
	// range of both, without the window's bounds in the query: SQLite ranges
	// on one lower and one upper bound, and might take the window's.
	g := f
	g.hasFrom, g.hasTo = false, false
	rest, restArgs := g.where(false)
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

// maxGranted bounds the access rows of a signed-in caller's subjects on
// objects that are not public that a seek reads (about 7 µs each): above it,
// counting and skipping costs less.
const maxGranted = 1 << 16

// errNoSeek says that the blocks would cost more than counting this list.
var errNoSeek = errors.New("sqlcatalog: the list is counted")

// grantedKeys returns, in order, the keys of the objects of f that are not
// public and that some of others may read; none for no others. The access
// index leads, so the cost is that of what others were given; errNoSeek when
// they were given more than maxGranted.
func (c *Catalog) grantedKeys(ctx context.Context, tx *sql.Tx, pq pageQuery, f listFilter, others []string) ([]sortKey, error) {
	if len(others) == 0 {
		return nil, nil
	}
	var subjects []any
	for _, s := range others {
		subjects = append(subjects, s)
	}
	var n int
	if err := tx.QueryRowContext(ctx, c.d.q(`SELECT COUNT(*) FROM (SELECT 1 FROM access WHERE subject IN (`+
		placeholders(len(others))+`) AND public = 0 LIMIT ?) AS granted`), append(slices.Clone(subjects), c.maxGranted+1)...).Scan(&n); err != nil {
		return nil, fmt.Errorf("sqlcatalog: counting what the caller was granted: %w", err)
	}
	if n > c.maxGranted {
		return nil, errNoSeek
	}
	g := f
	g.readers = ""
	where, whereArgs := g.where(true)
	q := "SELECT DISTINCT " + pq.keyT + ", " + pq.keyID + " FROM access g JOIN " + pq.table + " ON o.pid = g.pid" +
		" WHERE g.subject IN (" + placeholders(len(others)) + ") AND g.public = 0 AND " + joinConds([]string{where}) +
		" ORDER BY " + pq.keyT + ", " + pq.keyID
	args := append(subjects, whereArgs...)
	rows, err := tx.QueryContext(ctx, c.d.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: listing what the caller was granted: %w", err)
	}
	defer rows.Close()
	var keys []sortKey
	for rows.Next() {
		var k sortKey
		if err := rows.Scan(&k.t, &k.id); err != nil {
			return nil, fmt.Errorf("sqlcatalog: listing what the caller was granted: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlcatalog: listing what the caller was granted: %w", err)
	}
	return keys, nil
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
