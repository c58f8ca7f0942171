package sqlcatalog

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// LoadOptions tune Load.
type LoadOptions struct {
	// Replace empties a catalog that holds rows first; without it Load
	// refuses such a catalog (ErrNotEmpty).
	Replace bool
	// Progress, when not nil, is called after each table with its row count.
	Progress func(table string, rows int64)
}

// ErrNotEmpty is Load's answer for a catalog that already holds rows.
var ErrNotEmpty = errors.New("sqlcatalog: the catalog is not empty")

// loadBatch is how many rows one INSERT carries.
const loadBatch = 200

// Empty reports whether no table of the catalog holds a row.
func (c *Catalog) Empty(ctx context.Context) (bool, error) {
	return c.empty(ctx, c.db)
}

func (c *Catalog) empty(ctx context.Context, q querier) (bool, error) {
	tables, err := c.tables(ctx, q)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		var one int
		err := q.QueryRowContext(ctx, `SELECT 1 FROM `+t+` LIMIT 1`).Scan(&one)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("sqlcatalog: %w", err)
		}
	}
	return true, nil
}

// Load writes a dump (WriteDump's format, from either database) into the
// catalog, in one transaction: all of it or nothing. The dump's schema
// version must not be newer than the catalog's; its tables and columns must
// exist here (a newer schema's added columns take their defaults). Identity
// counters (objects.seq, events.entry_id) continue after the loaded rows. It
// returns the row counts by table, each checked against the dump's own.
func (c *Catalog) Load(ctx context.Context, r io.Reader, opts LoadOptions) (map[string]int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	defer c.recs.purge() // every record may have changed
	defer c.cache.reset()
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var h DumpHeader
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("sqlcatalog: reading the dump header: %w", err)
	}
	if h.Format != DumpFormat || h.Version != DumpVersion {
		return nil, fmt.Errorf("sqlcatalog: not a catalog dump of version %d (format %q, version %d)", DumpVersion, h.Format, h.Version)
	}
	if h.SchemaVersion > len(migrations) {
		return nil, fmt.Errorf("sqlcatalog: the dump has schema version %d; this program knows versions up to %d", h.SchemaVersion, len(migrations))
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	defer tx.Rollback()
	empty, err := c.empty(ctx, tx)
	if err != nil {
		return nil, err
	}
	if !empty {
		if !opts.Replace {
			return nil, ErrNotEmpty
		}
		if err := c.clear(ctx, tx); err != nil {
			return nil, err
		}
	}
	counts := map[string]int64{}
	for {
		var line json.RawMessage
		if err := dec.Decode(&line); err != nil {
			return nil, fmt.Errorf("sqlcatalog: reading the dump: %w (is it cut short?)", err)
		}
		var ctl control
		if err := json.Unmarshal(line, &ctl); err != nil {
			return nil, fmt.Errorf("sqlcatalog: a row outside a table, or a bad control line: %.80s", line)
		}
		if ctl.End == "catalog" {
			if ctl.Tables == nil || *ctl.Tables != len(counts) {
				return nil, fmt.Errorf("sqlcatalog: the dump ends with %v tables, %d were read", ctl.Tables, len(counts))
			}
			break
		}
		n, err := c.loadTable(ctx, tx, dec, ctl)
		if err != nil {
			return nil, fmt.Errorf("sqlcatalog: loading %s: %w", ctl.Table, err)
		}
		counts[ctl.Table] = n
		if opts.Progress != nil {
			opts.Progress(ctl.Table, n)
		}
	}
	if h.SchemaVersion < blocksVersion {
		// A dump from before the list blocks: count them from the objects.
		if err := c.cutBlocks(ctx, tx, lowest); err != nil {
			return nil, err
		}
	} else if h.SchemaVersion < readersVersion {
		// A dump from before the reader blocks: count them.
		if err := c.countAllReaders(ctx, tx); err != nil {
			return nil, err
		}
	}
	if h.SchemaVersion < sumsVersion {
		// A dump from before sums: its checksums rows go into the objects.
		if err := c.moveChecksums(ctx, tx); err != nil {
			return nil, err
		}
	}
	if h.SchemaVersion < pidsVersion {
		// A dump from before event_pids: index its log.
		if err := c.indexEventPIDs(ctx, tx, -1); err != nil {
			return nil, err
		}
	} else if h.SchemaVersion < runsVersion {
		// A dump from before runs: its event_pids rows are run 0.
		if err := registerRunZero(ctx, tx); err != nil {
			return nil, err
		}
	}
	if err := c.resetIdentities(ctx, tx); err != nil {
		return nil, err
	}
	if err := c.logReset(ctx, tx); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlcatalog: commit: %w", err)
	}
	return counts, nil
}

// clear deletes every row, tables that reference objects first.
func (c *Catalog) clear(ctx context.Context, tx *sql.Tx) error {
	tables, err := c.tables(ctx, tx)
	if err != nil {
		return err
	}
	slices.Reverse(tables) // objects last
	for _, t := range tables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t); err != nil {
			return fmt.Errorf("sqlcatalog: emptying %s: %w", t, err)
		}
	}
	return nil
}

// loadTable inserts the rows of the table ctl begins, up to its end line.
func (c *Catalog) loadTable(ctx context.Context, tx *sql.Tx, dec *json.Decoder, ctl control) (int64, error) {
	if !tableName.MatchString(ctl.Table) || len(ctl.Columns) == 0 || len(ctl.Columns) != len(ctl.Types) {
		return 0, fmt.Errorf("a bad table line (table %q, %d columns, %d types)", ctl.Table, len(ctl.Columns), len(ctl.Types))
	}
	have, _, err := c.columnKinds(ctx, tx, ctl.Table)
	if err != nil {
		return 0, err
	}
	for _, col := range ctl.Columns {
		if !tableName.MatchString(col) || !slices.Contains(have, col) {
			return 0, fmt.Errorf("the catalog has no column %q", col)
		}
	}
	// Dumps written before the change log was left out of them hold its
	// rows: read, counted, not loaded (another database's log).
	keep := ctl.Table != "changes"
	prefix := `INSERT INTO ` + ctl.Table + ` (` + strings.Join(ctl.Columns, ", ") + `) VALUES `
	one := `(` + placeholders(len(ctl.Columns)) + `)`
	var (
		args []any
		rows int
		n    int64
	)
	flush := func() error {
		if rows == 0 || !keep {
			args, rows = args[:0], 0
			return nil
		}
		q := prefix + strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
		if _, err := tx.ExecContext(ctx, c.d.q(q), args...); err != nil {
			return err
		}
		args, rows = args[:0], 0
		return nil
	}
	for {
		var line json.RawMessage
		if err := dec.Decode(&line); err != nil {
			return n, fmt.Errorf("reading row %d: %w", n+1, err)
		}
		if t := bytes.TrimLeft(line, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			var end control
			if err := json.Unmarshal(line, &end); err != nil || end.End != ctl.Table || end.Rows == nil {
				return n, fmt.Errorf("the table does not end where it should: %.80s", line)
			}
			if *end.Rows != n {
				return n, fmt.Errorf("the dump says %d rows, it holds %d", *end.Rows, n)
			}
			return n, flush()
		}
		var vals []any
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&vals); err != nil || len(vals) != len(ctl.Columns) {
			return n, fmt.Errorf("row %d: not %d values (%v)", n+1, len(ctl.Columns), err)
		}
		for i, v := range vals {
			a, err := loadValue(ctl.Types[i], v)
			if err != nil {
				return n, fmt.Errorf("row %d, column %s: %w", n+1, ctl.Columns[i], err)
			}
			args = append(args, a)
		}
		rows++
		n++
		if rows == loadBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
}

// loadValue is a dump value as an argument of the driver.
func loadValue(kind string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch kind {
	case "int":
		if n, ok := v.(json.Number); ok {
			return n.Int64()
		}
	case "bool":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "blob":
		if s, ok := v.(string); ok {
			return base64.StdEncoding.DecodeString(s)
		}
	case "text":
		if s, ok := v.(string); ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("a %T is not a %s value", v, kind)
}

// resetIdentities makes PostgreSQL's identity columns continue after the
// loaded rows (SQLite's AUTOINCREMENT follows explicit values by itself).
func (c *Catalog) resetIdentities(ctx context.Context, tx *sql.Tx) error {
	if c.d != postgresDialect {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return fmt.Errorf("sqlcatalog: %w", err)
	}
	var cols [][2]string
	for rows.Next() {
		var t, col string
		if err := rows.Scan(&t, &col); err != nil {
			rows.Close()
			return fmt.Errorf("sqlcatalog: %w", err)
		}
		cols = append(cols, [2]string{t, col})
	}
	rows.Close()
	for _, tc := range cols {
		if !tableName.MatchString(tc[0]) || !tableName.MatchString(tc[1]) || tc[0] == "changes" {
			continue // not loaded; followers read it by its seq, which must only grow
		}
		q := `SELECT setval(pg_get_serial_sequence($1, $2), COALESCE((SELECT MAX(` + tc[1] + `) FROM ` + tc[0] + `), 0) + 1, false)`
		if _, err := tx.ExecContext(ctx, q, tc[0], tc[1]); err != nil {
			return fmt.Errorf("sqlcatalog: resetting %s.%s: %w", tc[0], tc[1], err)
		}
	}
	return nil
}
