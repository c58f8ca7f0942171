package sqlcatalog

// # Dumps
//
// A dump is the whole catalog as JSON lines, the same from SQLite and from
// PostgreSQL, and loadable into either (Load). Lines that begin with { are
// control lines, lines that begin with [ are rows:
//
//	{"format":"d1bridge-catalog","version":1,"schemaVersion":4,"driver":"sqlite"}
//	{"table":"objects","columns":["seq","pid",...],"types":["int","text",...]}
//	[1,"pid-1",...]                        one line per row, in column order
//	{"end":"objects","rows":1}             the table's row count
//	...                                    every other table the same way
//	{"end":"catalog","tables":6}
//
// Types are int (a JSON number), bool, text (a JSON string) and blob (a base64
// JSON string); null is NULL. Every table of the catalog is written except
// catalog_schema, whose version is schemaVersion, and the change log of
// instances sharing the database (changes.go): objects first (the other
// tables reference it), then the others by name. A dump is read from one
// read transaction (Snapshot), so it is consistent while the catalog serves.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// DumpFormat and DumpVersion name the dump format of this package.
const (
	DumpFormat  = "d1bridge-catalog"
	DumpVersion = 1
)

// DumpHeader is the first line of a dump.
type DumpHeader struct {
	Format        string `json:"format"`
	Version       int    `json:"version"`
	SchemaVersion int    `json:"schemaVersion"`
	Driver        string `json:"driver"`
}

// control is any control line of a dump.
type control struct {
	Table   string   `json:"table,omitempty"`
	Columns []string `json:"columns,omitempty"`
	Types   []string `json:"types,omitempty"`
	End     string   `json:"end,omitempty"`
	Rows    *int64   `json:"rows,omitempty"`
	Tables  *int     `json:"tables,omitempty"`
}

// Snapshot is one consistent view of the whole catalog: one read transaction
// (SQLite: a WAL snapshot, which writers do not block; PostgreSQL: REPEATABLE
// READ). Close it when done: on SQLite an open snapshot keeps the WAL from
// being checkpointed past it.
type Snapshot struct {
	c  *Catalog
	tx *sql.Tx
	// SchemaVersion is the catalog's schema version.
	SchemaVersion int
}

// Snapshot begins a snapshot and pins it: what any later read of it sees is
// the catalog as of this call.
func (c *Catalog) Snapshot(ctx context.Context) (*Snapshot, error) {
	tx, err := c.db.BeginTx(ctx, c.d.readTx)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	s := &Snapshot{c: c, tx: tx}
	// SQLite takes a deferred transaction's snapshot at its first read.
	if err := tx.QueryRowContext(ctx, `SELECT version FROM catalog_schema`).Scan(&s.SchemaVersion); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("sqlcatalog: reading the schema version: %w", err)
	}
	return s, nil
}

// Driver names the catalog's database: sqlite or postgres.
func (s *Snapshot) Driver() string { return s.c.d.name }

// Close ends the snapshot.
func (s *Snapshot) Close() error { return s.tx.Rollback() }

// Tables are the catalog's tables in dump order.
func (s *Snapshot) Tables(ctx context.Context) ([]string, error) { return s.c.tables(ctx, s.tx) }

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (c *Catalog) tables(ctx context.Context, q querier) ([]string, error) {
	query := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if c.d == postgresDialect {
		query = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: listing the tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("sqlcatalog: %w", err)
		}
		// The change log tells the instances sharing this database what to
		// forget; elsewhere it means nothing, and it is pruned in minutes.
		if name != "catalog_schema" && name != "changes" && tableName.MatchString(name) {
			out = append(out, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	slices.SortFunc(out, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "objects":
			return -1
		case b == "objects":
			return 1
		}
		return strings.Compare(a, b)
	})
	return out, nil
}

// WriteDump writes the snapshot to w in the dump format; progress, when not
// nil, is called after each table with its row count. It returns the row
// counts by table.
func (s *Snapshot) WriteDump(ctx context.Context, w io.Writer, progress func(table string, rows int64)) (map[string]int64, error) {
	tables, err := s.Tables(ctx)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(DumpHeader{Format: DumpFormat, Version: DumpVersion, SchemaVersion: s.SchemaVersion, Driver: s.c.d.name}); err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for _, t := range tables {
		n, err := s.dumpTable(ctx, enc, t)
		if err != nil {
			return nil, fmt.Errorf("sqlcatalog: dumping %s: %w", t, err)
		}
		counts[t] = n
		if progress != nil {
			progress(t, n)
		}
	}
	k := len(tables)
	if err := enc.Encode(control{End: "catalog", Tables: &k}); err != nil {
		return nil, err
	}
	return counts, bw.Flush()
}

func (s *Snapshot) dumpTable(ctx context.Context, enc *json.Encoder, table string) (int64, error) {
	head := control{Table: table}
	var err error
	if head.Columns, head.Types, err = s.c.columnKinds(ctx, s.tx, table); err != nil {
		return 0, err
	}
	rows, err := s.tx.QueryContext(ctx, `SELECT `+strings.Join(head.Columns, ", ")+` FROM `+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	if err := enc.Encode(head); err != nil {
		return 0, err
	}
	cts := head.Columns
	vals := make([]any, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	out := make([]any, len(cts))
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, v := range vals {
			if out[i], err = dumpValue(head.Types[i], v); err != nil {
				return n, fmt.Errorf("row %d, column %s: %w", n+1, head.Columns[i], err)
			}
		}
		if err := enc.Encode(out); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, enc.Encode(control{End: table, Rows: &n})
}

// columnKinds are the columns of table, in their order, and their dump types
// from their declared types.
func (c *Catalog) columnKinds(ctx context.Context, q querier, table string) (names, kinds []string, err error) {
	query := `SELECT name, type FROM pragma_table_info(?) ORDER BY cid`
	if c.d == postgresDialect {
		query = `SELECT column_name, data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`
	}
	rows, err := q.QueryContext(ctx, c.d.q(query), table)
	if err != nil {
		return nil, nil, fmt.Errorf("the columns of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, nil, err
		}
		if !tableName.MatchString(name) {
			return nil, nil, fmt.Errorf("a column named %q", name)
		}
		names, kinds = append(names, name), append(kinds, columnKind(typ))
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("no table %s", table)
	}
	return names, kinds, nil
}

// columnKind is the dump type of a column from its database type name
// (SQLite's declared type, PostgreSQL's type).
func columnKind(dbType string) string {
	t := strings.ToUpper(dbType)
	switch {
	case strings.Contains(t, "INT"):
		return "int"
	case strings.Contains(t, "BOOL"):
		return "bool"
	case strings.Contains(t, "BLOB"), strings.Contains(t, "BYTEA"):
		return "blob"
	}
	return "text"
}

// dumpValue is v, as the driver scanned it, in the dump's JSON form.
func dumpValue(kind string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch kind {
	case "int":
		switch x := v.(type) {
		case int64:
			return x, nil
		case int32:
			return int64(x), nil
		}
	case "bool":
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			return x != 0, nil
		}
	case "blob":
		switch x := v.(type) {
		case []byte:
			return base64.StdEncoding.EncodeToString(x), nil
		case string:
			return base64.StdEncoding.EncodeToString([]byte(x)), nil
		}
	case "text":
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		default:
			return nil, fmt.Errorf("a %T in a text column", v)
		}
		// Only the event log ever held text that is not UTF-8 (a client's
		// User-Agent, before the node cleaned it): such bytes become U+FFFD
		// here, as JSON would, rather than failing every backup.
		return strings.ToValidUTF8(s, "\uFFFD"), nil
	}
	return nil, fmt.Errorf("a %T in a %s column", v, kind)
}

// ObjectRow is what Objects reads of each object.
type ObjectRow struct {
	PID, BlobKey string
	Size         int64
	Checksum     adapter.Checksum
	// Meta is the stored system metadata, as Lookup decodes it.
	Meta *adapter.SystemMetadata
}

// objectsPage is how many rows Objects reads before it hands them to fn.
const objectsPage = 500

// Objects calls fn with every object of the snapshot, in the order of their
// rows (seq). An error from fn ends the walk and is returned.
//
// The rows are read a page at a time, and each page's query is closed before
// fn sees its rows: fn may read the snapshot itself (Document), which
// PostgreSQL refuses while another query of the transaction is open, and
// memory holds one page whatever the catalog's size.
func (s *Snapshot) Objects(ctx context.Context, fn func(ObjectRow) error) error {
	after := int64(math.MinInt64)
	for {
		page, last, err := s.objectsAfter(ctx, after)
		if err != nil {
			return err
		}
		for _, o := range page {
			if err := fn(o); err != nil {
				return err
			}
		}
		if len(page) < objectsPage {
			return nil
		}
		after = last
	}
}

// objectsAfter reads the page of objects whose seq follows after, and
// returns the last seq it read.
func (s *Snapshot) objectsAfter(ctx context.Context, after int64) (page []ObjectRow, last int64, err error) {
	rows, err := s.tx.QueryContext(ctx, s.c.d.q(`SELECT seq, pid, blob_key, size, checksum_algorithm, checksum_value, COALESCE(meta, sysmeta)
		FROM objects WHERE seq > ? ORDER BY seq LIMIT ?`), after, objectsPage)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlcatalog: %w", err)
	}
	defer rows.Close()
	page = make([]ObjectRow, 0, objectsPage)
	for rows.Next() {
		var o ObjectRow
		var st stored
		var doc string
		if err := rows.Scan(&st.seq, &o.PID, &o.BlobKey, &o.Size, &o.Checksum.Algorithm, &o.Checksum.Value, &doc); err != nil {
			return nil, 0, fmt.Errorf("sqlcatalog: %w", err)
		}
		if err := st.decode(doc, sql.NullString{}); err != nil {
			return nil, 0, err
		}
		o.Meta = st.meta
		page, last = append(page, o), st.seq
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlcatalog: %w", err)
	}
	return page, last, nil
}

// Document reads a document of the snapshot; unknown: NotFound.
func (s *Snapshot) Document(ctx context.Context, key string) ([]byte, error) {
	var b []byte
	err := s.tx.QueryRowContext(ctx, s.c.d.q(`SELECT body FROM documents WHERE key = ?`), key).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, adapter.Errorf(adapter.NotFound, "no document %q", key)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	return b, nil
}
