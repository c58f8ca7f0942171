package sqlcatalog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// Blocks: totals and positions of listObjects without counting.
//
// The objects in list order, (date_modified, seq), are cut into blocks of a
// few thousand rows. object_blocks holds, per block (named by its lowest key:
// the block holds the keys from it up to the next block's), how many of its
// rows have each (format_id, authoritative_mn, public) combination. A write
// updates the counts of the blocks its rows left and entered in its own
// transaction, and cuts a block that has grown past twice blockRows into blocks of
// blockRows; a block whose rows are all gone disappears, the one before it
// taking over its (empty) range.
//
// A filter on dates, formatId, nodeId or replica status, readable by anyone,
// by the public, or by a signed-in caller (the public and its subjects), then
// has its total as the sum of the blocks inside its date window plus a count
// of the rows of the two blocks at the window's edges, and its row at position
// start is found by adding block counts up to the block holding it and
// skipping less than a block from that block's start. Both cost the number of
// blocks in the window, read from a small table, and a few thousand index
// entries, not the number of matching rows; a signed-in caller's list adds
// the non-public objects its subjects may read, found through the access
// index (blockseek.go), or counted per block for the subject given the most
// (readerblocks.go). Identifier filters select a few rows and are counted
// directly; readers without the public are counted and skipped as before.

const (
	blockRows = 2048 // rows per block when blocks are cut (Catalog.blockRows; tests use fewer)
)

// blocksVersion is the schema version that adds object_blocks, filled from
// the objects in Go once the DDL has run.
const blocksVersion = 5

// group is the part of an object that block counts are kept by.
type group struct {
	format, auth string
	public       bool
}

func groupOf(r *rowInfo) group {
	_, public := slices.BinarySearch(r.readers, adapter.SubjectPublic)
	return group{r.format, r.auth, public}
}

type blockGroup struct {
	block sortKey
	g     group
}

// updateBlocks applies to object_blocks what ch did to the objects, inside
// the transaction that did it.
func (c *Catalog) updateBlocks(ctx context.Context, tx *sql.Tx, ch *change) error {
	if len(ch.rows) == 0 {
		return nil
	}
	var keys []sortKey
	for _, rc := range ch.rows {
		for _, r := range []*rowInfo{rc.before, rc.after} {
			if r != nil {
				keys = append(keys, r.key)
			}
		}
	}
	blocks, err := c.blocksOf(ctx, tx, keys)
	if err != nil {
		return err
	}
	delta := map[blockGroup]int{}
	for _, rc := range ch.rows {
		if r := rc.before; r != nil {
			delta[blockGroup{blocks[r.key], groupOf(r)}]--
		}
		if r := rc.after; r != nil {
			delta[blockGroup{blocks[r.key], groupOf(r)}]++
		}
	}
	readers := map[readerGroup]int{}
	readerDeltas(readers, ch, blocks)
	if err := c.applyReaderDeltas(ctx, tx, readers); err != nil {
		return err
	}
	var grown []sortKey
	for _, bg := range slices.SortedFunc(maps.Keys(delta), func(a, b blockGroup) int {
		return cmp.Or(cmp.Compare(a.block.t, b.block.t), cmp.Compare(a.block.id, b.block.id),
			strings.Compare(a.g.format, b.g.format), strings.Compare(a.g.auth, b.g.auth))
	}) {
		d := delta[bg]
		if d == 0 {
			continue
		}
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO object_blocks (low_date, low_seq, format_id, authoritative_mn, public, n)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (low_date, low_seq, format_id, authoritative_mn, public) DO UPDATE SET n = object_blocks.n + excluded.n`),
			bg.block.t, bg.block.id, bg.g.format, bg.g.auth, boolInt(bg.g.public), d)
		if err == nil && d < 0 {
			_, err = tx.ExecContext(ctx, c.d.q(`DELETE FROM object_blocks WHERE low_date = ? AND low_seq = ?
				AND format_id = ? AND authoritative_mn = ? AND public = ? AND n <= 0`),
				bg.block.t, bg.block.id, bg.g.format, bg.g.auth, boolInt(bg.g.public))
		}
		if err != nil {
			return fmt.Errorf("sqlcatalog: counting the list blocks: %w", err)
		}
		if d > 0 && (len(grown) == 0 || grown[len(grown)-1] != bg.block) {
			grown = append(grown, bg.block)
		}
	}
	for _, b := range grown {
		var n int
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT COALESCE(SUM(n), 0) FROM object_blocks WHERE low_date = ? AND low_seq = ?`), b.t, b.id).Scan(&n)
		if err != nil {
			return fmt.Errorf("sqlcatalog: counting the list blocks: %w", err)
		}
		if n > 2*c.blockRows { // a block with more rows is cut
			if err := c.cutBlocks(ctx, tx, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// blocksOf returns the block of each of keys: one query per key for a few,
// else the blocks from the lowest key's to the highest's in one.
func (c *Catalog) blocksOf(ctx context.Context, q querier, keys []sortKey) (map[sortKey]sortKey, error) {
	out := make(map[sortKey]sortKey, len(keys))
	if len(keys) <= 8 {
		for _, k := range keys {
			b, err := c.blockOf(ctx, q, k)
			if err != nil {
				return nil, err
			}
			out[k] = b
		}
		return out, nil
	}
	slices.SortFunc(keys, func(a, b sortKey) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.id, b.id)) })
	first, err := c.blockOf(ctx, q, keys[0])
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, c.d.q(`SELECT DISTINCT low_date, low_seq FROM object_blocks
		WHERE low_date >= ? AND low_date <= ? ORDER BY low_date, low_seq`), first.t, keys[len(keys)-1].t)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: finding the list blocks: %w", err)
	}
	lows := []sortKey{first}
	for rows.Next() {
		var b sortKey
		if err := rows.Scan(&b.t, &b.id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlcatalog: finding the list blocks: %w", err)
		}
		if first.less(b) {
			lows = append(lows, b)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlcatalog: finding the list blocks: %w", err)
	}
	i := 0
	for _, k := range keys {
		for i+1 < len(lows) && !k.less(lows[i+1]) {
			i++
		}
		out[k] = lows[i]
	}
	return out, nil
}

// blockOf returns the block that holds key k: the one with the greatest low
// key not above k, or the lowest key when there is none (no rows sort before
// the first block, so the first row of a new list may start one there).
func (c *Catalog) blockOf(ctx context.Context, q querier, k sortKey) (sortKey, error) {
	var b sortKey
	err := q.QueryRowContext(ctx, c.d.q(`SELECT low_date, low_seq FROM object_blocks WHERE low_date <= ?
		ORDER BY low_date DESC, low_seq DESC LIMIT 1`), k.t).Scan(&b.t, &b.id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return lowest, nil
	case err != nil:
		return sortKey{}, fmt.Errorf("sqlcatalog: finding a list block: %w", err)
	case !k.less(b):
		return b, nil
	}
	// The last block of k's date starts after k: look among that date's.
	b = sortKey{t: k.t}
	err = q.QueryRowContext(ctx, c.d.q(`SELECT low_seq FROM object_blocks WHERE low_date = ? AND low_seq <= ?
		ORDER BY low_seq DESC LIMIT 1`), k.t, k.id).Scan(&b.id)
	if errors.Is(err, sql.ErrNoRows) {
		err = q.QueryRowContext(ctx, c.d.q(`SELECT low_date, low_seq FROM object_blocks WHERE low_date < ?
			ORDER BY low_date DESC, low_seq DESC LIMIT 1`), k.t).Scan(&b.t, &b.id)
		if errors.Is(err, sql.ErrNoRows) {
			return lowest, nil
		}
	}
	if err != nil {
		return sortKey{}, fmt.Errorf("sqlcatalog: finding a list block: %w", err)
	}
	return b, nil
}

// nextBlock returns the low key of the block after b; nil when b is the last.
func (c *Catalog) nextBlock(ctx context.Context, q querier, b sortKey) (*sortKey, error) {
	n := sortKey{t: b.t}
	err := q.QueryRowContext(ctx, c.d.q(`SELECT low_seq FROM object_blocks WHERE low_date = ? AND low_seq > ?
		ORDER BY low_seq LIMIT 1`), b.t, b.id).Scan(&n.id)
	if errors.Is(err, sql.ErrNoRows) {
		err = q.QueryRowContext(ctx, c.d.q(`SELECT low_date, low_seq FROM object_blocks WHERE low_date > ?
			ORDER BY low_date, low_seq LIMIT 1`), b.t).Scan(&n.t, &n.id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: finding a list block: %w", err)
	}
	return &n, nil
}

// cutBlocks counts again the rows of block b, cutting them into blocks of
// blockRows, and their reader blocks; b = lowest with no block rows yet
// builds every block.
func (c *Catalog) cutBlocks(ctx context.Context, tx *sql.Tx, b sortKey) error {
	hi, err := c.nextBlock(ctx, tx, b)
	if err != nil {
		return err
	}
	var conds []string
	var args []any
	for _, p := range keyRange("o.date_modified", "o.seq", &b, hi) {
		conds, args = append(conds, p.cond), append(args, p.args...)
	}
	sel := `SELECT o.date_modified, o.seq, o.format_id, o.authoritative_mn,
		CASE WHEN EXISTS (SELECT 1 FROM access a WHERE a.pid = o.pid AND a.subject = 'public') THEN 1 ELSE 0 END
		FROM objects o`
	var parts []string
	for _, cond := range conds {
		if cond == "" {
			parts = append(parts, sel)
		} else {
			parts = append(parts, sel+" WHERE "+cond)
		}
	}
	rows, err := tx.QueryContext(ctx, c.d.q(strings.Join(parts, " UNION ALL ")+" ORDER BY 1, 2"), args...)
	if err != nil {
		return fmt.Errorf("sqlcatalog: cutting a list block: %w", err)
	}
	type cut struct {
		low    sortKey
		counts map[group]int
	}
	cuts := []cut{{low: b, counts: map[group]int{}}}
	n := 0
	for rows.Next() {
		var k sortKey
		var g group
		var public int
		if err := rows.Scan(&k.t, &k.id, &g.format, &g.auth, &public); err != nil {
			rows.Close()
			return fmt.Errorf("sqlcatalog: cutting a list block: %w", err)
		}
		g.public = public != 0
		if n == c.blockRows {
			cuts, n = append(cuts, cut{low: k, counts: map[group]int{}}), 0
		}
		cuts[len(cuts)-1].counts[g]++
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlcatalog: cutting a list block: %w", err)
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM object_blocks WHERE low_date = ? AND low_seq = ?`), b.t, b.id); err != nil {
		return fmt.Errorf("sqlcatalog: cutting a list block: %w", err)
	}
	lows := make([]sortKey, len(cuts))
	for i, ct := range cuts {
		lows[i] = ct.low
		for g, n := range ct.counts {
			_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO object_blocks (low_date, low_seq, format_id, authoritative_mn, public, n)
				VALUES (?, ?, ?, ?, ?, ?)`), ct.low.t, ct.low.id, g.format, g.auth, boolInt(g.public), n)
			if err != nil {
				return fmt.Errorf("sqlcatalog: cutting a list block: %w", err)
			}
		}
	}
	return c.countReaders(ctx, tx, lows, hi)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
