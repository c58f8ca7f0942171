// Package sqlcatalog is the node.Catalog of the member node on database/sql:
// embedded SQLite by default (OpenSQLite), PostgreSQL with the same schema and
// queries (OpenPostgres).
//
// # Storage
//
// Each object is one row of objects: the columns that lists filter and sort on
// (pid, sid, format_id, size, checksum, rights_holder, archived, obsoletes,
// obsoleted_by, authoritative_mn, date_uploaded, date_modified, blob_key) and
// the whole system metadata once, as the JSON of what decoding its v2 XML
// document gives (meta), which Lookup decodes several times faster than the
// XML. Rows written before meta existed hold the XML in sysmeta, which newer
// rows leave "" (one copy per row: twice the rows per page). sums holds the
// checksums computed besides the system metadata's (at creation or later), so
// that a lookup reads one row; the table checksums, which held them before,
// is emptied into it when the schema is migrated.
// seq, assigned at insert and never reused, breaks ties between equal dates.
// Times are milliseconds since the Unix epoch, UTC, which is DataONE's
// precision. access holds one row per subject that may read the object: the
// rights holder at level 3 and every subject of the access policy at the level
// of its best permission (read 1, write 2, changePermission 3). events holds
// the event log. Every write is
// one transaction, and the indexed columns and access rows are rewritten from
// the system metadata each time, so they cannot drift from it. Queries use ?
// placeholders, rewritten to $n for PostgreSQL; only the DDL differs.
//
// # Paging
//
// listObjects and getLogRecords page by offset (start, count) over lists sorted
// by (date_modified, seq) and (date_logged, entry_id). Offsets cost in
// proportion to start, so the catalog pages by key internally: a cache maps each
// normalized filter to its total and to cursors, "the rows from position p on
// are those whose sort key is greater than k". After each page served, the
// cursor at the page's end is kept, so a harvester paging sequentially pays for
// one index range scan of count rows per page; a request at any other start
// seeks from the nearest cursor below it and skips the difference once, on the
// covering index of the sort key, and the cursor is kept for the next time.
// The filters of listObjects that the list blocks answer (blocks.go: dates,
// formatId, nodeId, replica status; unrestricted, public or signed-in
// readers) take their total, and a cursor within a block of any start, from
// the blocks, whose cost does not grow with the catalog; other totals are
// counted once per filter.
//
// Writes do not flush the cache. Every write describes the rows it changed
// (before and after), and each cached filter works out from that what the
// write did to it: the total moves by the number of rows that started or stopped
// matching, and only cursors at or after the lowest sort key touched are
// dropped. A create, whose date is now, therefore sorts after every cursor and
// leaves them all valid. A reader that computed a cursor or a total stores it
// only if no write since the reader began could have changed it (each write is
// logged before it commits), so the cache never holds a value older than the
// data it describes. The cache belongs to one Catalog value: it assumes that no
// other process writes the same database (true of SQLite here; several service
// instances on one PostgreSQL database would need WithCache(0, 0)).
package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/d1bridge/d1bridge/mappings/node"
)

// Catalog is a node.Catalog on a SQL database. It is safe for concurrent use.
type Catalog struct {
	db     *sql.DB
	lazy   *sql.DB // db, or on SQLite a connection whose commits do not wait for the disk (AddEvents)
	d      *dialect
	nodeID string
	now    func() time.Time

	// wmu serializes writes, so that SQLite never answers SQLITE_BUSY to this
	// process and the cache sees writes in commit order.
	wmu  sync.Mutex
	wqmu sync.Mutex      // guards wq
	wq   []*pendingWrite // writes waiting for a group commit (write)
	// newest is the newest dateSysMetadataModified of the catalog (millis),
	// once read in the transaction under way (newestRead); under wmu.
	newest     int64
	newestRead bool
	cache      *cache
	recs       *records // decoded records by PID; nil: off

	follow *follower // reads the change log others write; nil on SQLite
	// On SQLite: commits so far, and the checkpointer's stop (checkpoint).
	commits        atomic.Uint64
	stopCheckpoint func()
	jobs           atomic.Pointer[jobQueue]

	countLists     bool // count and skip, without blocks: the baseline of the benchmarks
	commitAlone    bool // every write commits alone: the baseline of BenchmarkInsert
	blockRows      int  // rows per list block when blocks are cut (blocks.go)
	maxGranted     int  // most access rows a signed-in list's seek reads (blockseek.go)
	pidIndexEvery  int  // events past the mark that insertEvents indexes (eventpids.go)
	sparseIDEvents int  // most events a query by identifier reads by their ids (eventpids.go)
}

var _ node.Catalog = (*Catalog)(nil)

// Option configures a Catalog.
type Option func(*config)

type config struct {
	nodeID                string
	maxFilters, maxCurs   int
	records               int
	recordBytes           int64
	pageCache, mmap       int64
	blockRows, maxGranted int
	pidIndexEvery         int
	sparseIDEvents        int
	pollOnly              bool // follow the change log without LISTEN (tests)
	schemaAsIs            bool // WithSchemaAsIs
}

// WithSchemaAsIs opens a catalog without migrating it: one whose schema is
// not this program's version is refused. For the tools that read the
// catalog of a node that serves (backup, export): a newer binary run before
// the upgrade would otherwise upgrade the serving node's catalog under it,
// and the backup taken for a rollback would be of the new schema.
func WithSchemaAsIs() Option { return func(c *config) { c.schemaAsIs = true } }

// WithNodeID sets the identifier of the local node. ListQuery.ExcludeReplicas
// keeps only objects whose authoritativeMemberNode is this node, and AddEvent
// fills in an empty NodeIdentifier with it. Without it, ExcludeReplicas has no
// effect.
func WithNodeID(id string) Option { return func(c *config) { c.nodeID = id } }

// WithCache sizes the paging cache: filters is how many distinct filters keep a
// total and cursors (least recently used first out; default 256), cursors how
// many cursors each keeps (default 2048). Zero for either disables the cache,
// so that every page is counted and skipped to from the start.
func WithCache(filters, cursors int) Option {
	return func(c *config) { c.maxFilters, c.maxCurs = filters, cursors }
}

// WithRecordCache sizes the cache of decoded records by PID (default 4096; 0
// disables it, with its second tier, WithRecordMemory). Like the paging cache it belongs to one process: instances
// sharing a PostgreSQL catalog need WithRecordCache(0).
func WithRecordCache(records int) Option { return func(c *config) { c.records = records } }

// WithRecordMemory sizes the record cache's second tier: up to bytes of
// records in their compact form (about 600 bytes each), outside the Go heap
// (default 64 MiB; 0: none; rounded up to a multiple of 32 MiB). A lookup it
// answers decodes the record instead of querying the catalog.
func WithRecordMemory(bytes int64) Option { return func(c *config) { c.recordBytes = bytes } }

// WithSQLiteMemory sizes the memory of an SQLite catalog: cache is the page
// cache of each connection in bytes (SQLite's default is 2 MiB), mmap how
// much of the database file is read through a memory map, its pages shared
// with the operating system's cache instead of copied (0: none; SQLite caps
// it at 2 GiB). The defaults are an 8 MiB cache and a map of the whole file
// up to that cap: a map costs address space, not memory, and reads of a
// mapped catalog make no system calls.
func WithSQLiteMemory(cache, mmap int64) Option {
	return func(c *config) { c.pageCache, c.mmap = cache, mmap }
}

func newConfig(opts []Option) config {
	c := config{maxFilters: 256, maxCurs: 2048, records: 4096, recordBytes: 64 << 20, pageCache: 8 << 20, mmap: 2 << 30, blockRows: blockRows, maxGranted: maxGranted, pidIndexEvery: pidIndexEvery, sparseIDEvents: sparseIDEvents}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// OpenSQLite opens, creating and migrating it if needed, the catalog in the
// SQLite database file path: WAL journal, synchronous=FULL (an acknowledged
// write survives a crash), foreign keys on, a busy timeout for other
// processes, and the memory of WithSQLiteMemory; writes of this process are
// serialized.
func OpenSQLite(path string, opts ...Option) (*Catalog, error) {
	if path == "" {
		return nil, errors.New("sqlcatalog: no database path given")
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	cfg := newConfig(opts)
	dsn := func(sync string) string {
		return "file:" + esc + "?_txlock=immediate" +
			"&_pragma=busy_timeout(10000)" +
			"&_pragma=journal_mode(WAL)" +
			"&_pragma=synchronous(" + sync + ")" +
			"&_pragma=foreign_keys(1)" +
			"&_pragma=temp_store(2)" + // statement journals in memory, not in temporary files
			fmt.Sprintf("&_pragma=cache_size(%d)", -max(cfg.pageCache>>10, 1)) +
			fmt.Sprintf("&_pragma=mmap_size(%d)", max(cfg.mmap, 0))
	}
	db := sql.OpenDB(cachingConnector{dsn: dsn("FULL"), drv: &sqlite.Driver{}})
	n := min(max(2*runtime.GOMAXPROCS(0), 4), 16)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	c, err := open(db, sqliteDialect, opts)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: opening %s: %w", path, err)
	}
	// In WAL mode, synchronous=NORMAL commits without an fsync: the WAL
	// is synced at the next checkpoint or durable commit, so a power failure
	// may lose these commits but never corrupts the database.
	c.lazy = sql.OpenDB(cachingConnector{dsn: dsn("NORMAL"), drv: &sqlite.Driver{}})
	c.lazy.SetMaxOpenConns(1)
	c.stopCheckpoint = c.checkpoint()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		db.Close()
		return nil, fmt.Errorf("sqlcatalog: %s is not in WAL mode (journal_mode %q, %v)", path, mode, err)
	}
	return c, nil
}

// OpenPostgres opens the catalog in the PostgreSQL database dsn names (pgx
// syntax, e.g. "postgres://user@host:5432/db"), creating and migrating the
// schema if needed.
func OpenPostgres(dsn string, opts ...Option) (*Catalog, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	c, err := open(db, postgresDialect, opts)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: opening the PostgreSQL catalog: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.startFollowing(ctx, dsn, newConfig(opts).pollOnly); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	return c, nil
}

func open(db *sql.DB, d *dialect, opts []Option) (*Catalog, error) {
	cfg := newConfig(opts)
	c := &Catalog{db: db, lazy: db, d: d, nodeID: cfg.nodeID, now: time.Now, cache: newCache(cfg.maxFilters, cfg.maxCurs),
		recs: newRecords(cfg.records, cfg.recordBytes), blockRows: cfg.blockRows, maxGranted: cfg.maxGranted, pidIndexEvery: cfg.pidIndexEvery, sparseIDEvents: cfg.sparseIDEvents}
	c.jobs.Store(newJobQueue(c))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := c.migrate
	if cfg.schemaAsIs {
		check = c.schemaIsThis
	}
	if err := check(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}

const (
	// checkpointEvery is how often the WAL of an SQLite catalog written to
	// since is copied into the database file (checkpoint).
	checkpointEvery = time.Second
)

// checkpoint starts copying the WAL into the database file every
// checkpointEvery while there are commits, and returns its stop. Otherwise
// the commit that fills 1,000 pages of WAL (SQLite's default, still the
// bound) does it, and a request waits for it. A passive checkpoint lets
// writers go on.
func (c *Catalog) checkpoint() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(checkpointEvery)
		defer tick.Stop()
		var last uint64
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if n := c.commits.Load(); n != last {
				last = n
				c.db.Exec("PRAGMA wal_checkpoint(PASSIVE)") // failing now, it runs again at the next tick or commit
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// Ping checks that the database answers.
func (c *Catalog) Ping(ctx context.Context) error {
	if err := c.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlcatalog: %w", err)
	}
	return nil
}

// Close closes the database.
func (c *Catalog) Close() error {
	if c.follow != nil {
		c.follow.stop()
	}
	if c.stopCheckpoint != nil {
		c.stopCheckpoint()
	}
	if c.d == sqliteDialect {
		c.db.Exec("PRAGMA optimize")
	}
	if c.lazy != c.db {
		c.lazy.Close()
	}
	c.recs.close()
	return c.db.Close()
}

// dialect is what differs between the databases: DDL words, placeholders, the
// read transaction and how a unique violation looks.
type dialect struct {
	name     string
	dollar   bool // placeholders are $1, $2, ...
	ddl      *strings.Replacer
	readTx   *sql.TxOptions
	isUnique func(error) bool
	isFull   func(error) bool // the disk (or quota) is full
	// forUpdate ends a SELECT of a row that the transaction will change, so that
	// another process's transaction waits (SQLite locks the whole database).
	forUpdate string
	// migrateLock, when not "", is the first statement of the migration
	// transaction: it makes other processes migrating the same database wait
	// (SQLite's immediate transactions already do).
	migrateLock string
	// claimLock, when not "", takes a transaction-scoped lock on one int64
	// key (jobs.go).
	claimLock string
	// logLock, when not "", takes the transaction-scoped lock every write
	// transaction takes first (commitGroup): other processes sharing the
	// database write one at a time, which the checks of identifiers, the
	// list blocks and the order of events, changes and dates rely on.
	logLock string
	// lazyCommit, when not "", starts a transaction whose commit need not
	// wait for the disk (AddEvents).
	lazyCommit string
	// groupCommit: concurrent writes share a commit (write).
	groupCommit bool
	// changeLog: other processes may write the database, so writes append
	// to the change log they follow.
	changeLog bool
	// inProcess: queries are calls into this process that no network can
	// stall, so a read by index need not be interruptible (lookup).
	inProcess bool
	rebound   sync.Map // query with ? -> query with $n
}

var sqliteDialect = &dialect{
	name:        "sqlite",
	groupCommit: true,
	inProcess:   true,
	ddl: strings.NewReplacer(
		"{{pk}}", "INTEGER PRIMARY KEY AUTOINCREMENT",
		"{{bin}}", "",
		"{{norowid}}", " WITHOUT ROWID",
		"{{blob}}", "BLOB",
	),
	// A deferred transaction is one consistent WAL snapshot.
	readTx: &sql.TxOptions{ReadOnly: true},
	isUnique: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
	},
	isFull: func(err error) bool {
		var e *sqlite.Error
		return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_FULL
	},
}

var postgresDialect = &dialect{
	name:   "postgres",
	dollar: true,
	ddl: strings.NewReplacer(
		"{{pk}}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
		// Byte order, as in SQLite, so that a PID prefix is a key range.
		"{{bin}}", ` COLLATE "C"`,
		"{{norowid}}", "",
		"{{blob}}", "BYTEA",
	),
	readTx:    &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead},
	forUpdate: " FOR UPDATE OF o",
	// Two processes creating the schema at once would otherwise both create
	// catalog_schema, and one fail on PostgreSQL's catalog (pg_type) unique index.
	migrateLock: `SELECT pg_advisory_xact_lock(hashtext('d1bridge sqlcatalog migrate'))`,
	claimLock:   `SELECT pg_advisory_xact_lock($1)`,
	logLock:     `SELECT pg_advisory_xact_lock(hashtext('d1bridge sqlcatalog log ' || current_schema()))`,
	changeLog:   true,
	lazyCommit:  `SET LOCAL synchronous_commit TO off`,
	isUnique: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505"
	},
	isFull: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "53100" // disk_full
	},
}

// q returns query in the dialect's placeholder syntax. Queries never hold a ?
// inside a string literal.
func (d *dialect) q(query string) string {
	if !d.dollar {
		return query
	}
	if r, ok := d.rebound.Load(query); ok {
		return r.(string)
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	r := b.String()
	d.rebound.Store(query, r)
	return r
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
