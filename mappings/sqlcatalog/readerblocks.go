package sqlcatalog

// Reader blocks: the list blocks (blocks.go) of the objects that are not
// public, per subject that may read them.
//
// reader_blocks holds, per subject, block and (format_id, authoritative_mn),
// how many of the block's objects that are not public the subject may read
// (it has an access row on them). A signed-in caller's list adds to the
// public's counts what its subjects were given (blockseek.go): listed one by
// one through the access index while that is little, and from these counts
// for the subject given the most (a curator's group, authenticatedUser on a
// catalog readable by anyone signed in, the owner of the private objects),
// so that its cost stays that of the blocks however much it was given.
// The counts change in the write's transaction, with the blocks'.

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// readersVersion is the schema version that adds reader_blocks, filled from
// the objects and their access rows once created.
const readersVersion = 16

// readerGroup is the part of a non-public object's access row that reader
// blocks are kept by.
type readerGroup struct {
	subject string
	block   sortKey
	format  string
	auth    string
}

// readerDeltas adds to delta what rc's before (-1) and after (+1) change in
// the reader blocks, given each row's block.
func readerDeltas(delta map[readerGroup]int, ch *change, blocks map[sortKey]sortKey) {
	add := func(r *rowInfo, d int) {
		if r == nil || groupOf(r).public {
			return
		}
		for _, s := range r.readers {
			delta[readerGroup{s, blocks[r.key], r.format, r.auth}] += d
		}
	}
	for _, rc := range ch.rows {
		add(rc.before, -1)
		add(rc.after, 1)
	}
}

// applyReaderDeltas writes delta into reader_blocks, in a fixed order so that
// concurrent writers on PostgreSQL take the rows' locks in the same order.
func (c *Catalog) applyReaderDeltas(ctx context.Context, tx *sql.Tx, delta map[readerGroup]int) error {
	for _, rg := range slices.SortedFunc(maps.Keys(delta), func(a, b readerGroup) int {
		return cmp.Or(strings.Compare(a.subject, b.subject), cmp.Compare(a.block.t, b.block.t), cmp.Compare(a.block.id, b.block.id),
			strings.Compare(a.format, b.format), strings.Compare(a.auth, b.auth))
	}) {
		d := delta[rg]
		if d == 0 {
			continue
		}
		args := []any{rg.subject, rg.block.t, rg.block.id, rg.format, rg.auth}
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO reader_blocks (subject, low_date, low_seq, format_id, authoritative_mn, n)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (subject, low_date, low_seq, format_id, authoritative_mn) DO UPDATE SET n = reader_blocks.n + excluded.n`),
			append(args, d)...)
		if err == nil && d < 0 {
			_, err = tx.ExecContext(ctx, c.d.q(`DELETE FROM reader_blocks WHERE subject = ? AND low_date = ? AND low_seq = ?
				AND format_id = ? AND authoritative_mn = ? AND n <= 0`), args...)
		}
		if err != nil {
			return fmt.Errorf("sqlcatalog: counting the reader blocks: %w", err)
		}
	}
	return nil
}

// countReaders counts again the reader blocks of the blocks lows (in order,
// the last one's range ending at hi; nil for no end).
func (c *Catalog) countReaders(ctx context.Context, tx *sql.Tx, lows []sortKey, hi *sortKey) error {
	if len(lows) == 0 {
		return nil
	}
	for _, p := range keyRange("low_date", "low_seq", &lows[0], hi) {
		if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM reader_blocks WHERE `+joinConds([]string{p.cond})), p.args...); err != nil {
			return fmt.Errorf("sqlcatalog: counting the reader blocks: %w", err)
		}
	}
	sel := `SELECT o.date_modified, o.seq, o.format_id, o.authoritative_mn, a.subject
		FROM objects o JOIN access a ON a.pid = o.pid WHERE a.public = 0`
	var parts []string
	var args []any
	for _, p := range keyRange("o.date_modified", "o.seq", &lows[0], hi) {
		parts, args = append(parts, sel+" AND "+joinConds([]string{p.cond})), append(args, p.args...)
	}
	rows, err := tx.QueryContext(ctx, c.d.q(strings.Join(parts, " UNION ALL ")+" ORDER BY 1, 2"), args...)
	if err != nil {
		return fmt.Errorf("sqlcatalog: counting the reader blocks: %w", err)
	}
	counts := map[readerGroup]int{}
	i := 0
	for rows.Next() {
		var k sortKey
		var rg readerGroup
		if err := rows.Scan(&k.t, &k.id, &rg.format, &rg.auth, &rg.subject); err != nil {
			rows.Close()
			return fmt.Errorf("sqlcatalog: counting the reader blocks: %w", err)
		}
		for i+1 < len(lows) && !k.less(lows[i+1]) {
			i++
		}
		rg.block = lows[i]
		counts[rg]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlcatalog: counting the reader blocks: %w", err)
	}
	return c.applyReaderDeltas(ctx, tx, counts)
}

// countAllReaders fills reader_blocks from the blocks there are.
func (c *Catalog) countAllReaders(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT low_date, low_seq FROM object_blocks ORDER BY low_date, low_seq`)
	if err != nil {
		return fmt.Errorf("sqlcatalog: finding the list blocks: %w", err)
	}
	var lows []sortKey
	for rows.Next() {
		var k sortKey
		if err := rows.Scan(&k.t, &k.id); err != nil {
			rows.Close()
			return fmt.Errorf("sqlcatalog: finding the list blocks: %w", err)
		}
		lows = append(lows, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlcatalog: finding the list blocks: %w", err)
	}
	return c.countReaders(ctx, tx, lows, nil)
}

// readerCounts returns, per subject of subjects, how many access rows it has
// on objects that are not public.
func (c *Catalog) readerCounts(ctx context.Context, tx *sql.Tx, subjects []string) (map[string]int, error) {
	args := make([]any, len(subjects))
	for i, s := range subjects {
		args[i] = s
	}
	rows, err := tx.QueryContext(ctx, c.d.q(`SELECT subject, SUM(n) FROM reader_blocks WHERE subject IN (`+
		placeholders(len(subjects))+`) GROUP BY subject`), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: counting what the caller was granted: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("sqlcatalog: counting what the caller was granted: %w", err)
		}
		out[s] = n
	}
	return out, rows.Err()
}
