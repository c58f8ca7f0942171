package sqlcatalog

import (
	"context"
	"database/sql/driver"
	"errors"

	"modernc.org/sqlite"
)

// The SQLite driver parses every query it is given afresh; parsing is a third
// of the CPU of a write (measured in BenchmarkHarvestDatasets). Each
// connection therefore keeps the statements it ran, and runs the same query
// again on its prepared statement.

// stmtCacheSize bounds the statements one connection keeps; when it is
// full, they are all dropped and the cache fills again with what is used
// (queries built for a policy's size or a listing's filter vary).
const stmtCacheSize = 256

// cachingConnector opens SQLite connections that keep their statements.
type cachingConnector struct {
	dsn string
	drv *sqlite.Driver
}

func (c cachingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	base, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, errors.New("sqlcatalog: the SQLite driver's connection lacks the methods the statement cache needs")
	}
	return &cachingConn{sqliteConn: base, stmts: map[string]*cachedStmt{}}, nil
}

func (c cachingConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is what database/sql uses of the driver's connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is used by one goroutine at a time (database/sql's rule), so
// its map needs no lock. A statement whose rows are open is busy: the same
// query meanwhile runs uncached.
type cachingConn struct {
	sqliteConn
	stmts map[string]*cachedStmt
}

type cachedStmt struct {
	stmt interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	busy bool
}

// statement is the cached statement of query, prepared now if need be; nil
// when it is busy or cannot be prepared alone (the query then runs as the
// driver would run it).
func (c *cachingConn) statement(ctx context.Context, query string) *cachedStmt {
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil
		}
		return s
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	prepared, ok := st.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		st.Close()
		return nil
	}
	if len(c.stmts) >= stmtCacheSize {
		c.drop()
	}
	s := &cachedStmt{stmt: prepared}
	c.stmts[query] = s
	return s
}

// forget closes the statement of query after a failure: the next use
// prepares it again.
func (c *cachingConn) forget(query string, s *cachedStmt) {
	delete(c.stmts, query)
	s.stmt.Close()
}

// drop closes every statement that is not busy (a busy one is closed with
// its rows).
func (c *cachingConn) drop() {
	for q, s := range c.stmts {
		delete(c.stmts, q)
		if !s.busy {
			s.stmt.Close()
		} else {
			s.busy = false // closeRows sees it gone and closes it
		}
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s := c.statement(ctx, query)
	if s == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	res, err := s.stmt.ExecContext(ctx, args)
	if err != nil {
		c.forget(query, s)
	}
	return res, err
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s := c.statement(ctx, query)
	if s == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		c.forget(query, s)
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, conn: c, query: query, s: s}, nil
}

func (c *cachingConn) Close() error {
	for q, s := range c.stmts {
		delete(c.stmts, q)
		s.stmt.Close()
	}
	return c.sqliteConn.Close()
}

// cachedRows frees its statement when closed.
type cachedRows struct {
	driver.Rows
	conn  *cachingConn
	query string
	s     *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	if r.conn.stmts[r.query] == r.s {
		r.s.busy = false
		if err != nil {
			r.conn.forget(r.query, r.s)
		}
	} else {
		r.s.stmt.Close() // dropped while busy
	}
	return err
}
