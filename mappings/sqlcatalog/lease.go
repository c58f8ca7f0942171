package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/mappings/node"
)

var _ node.Leases = (*Catalog)(nil)

// ErrLeaseLost is node.ErrLeaseLost: a lease's epoch is no longer the
// caller's.
var ErrLeaseLost = node.ErrLeaseLost

// Leases (schema version 8, table leases) let instances sharing the catalog
// take turns at background work: one row per name, never deleted, whose epoch
// grows by one with every Acquire and never goes back. A holder writes (Renew,
// Checkpoint, Release) only WHERE the epoch is still the one it acquired, in
// one statement, so that a holder that lost its lease (it stalled past its
// expiry and another instance took it) can change nothing: its writes find no
// row and answer ErrLeaseLost.
//
// Expiry times are the database's clock (milliseconds since the Unix epoch),
// written and compared by the same statements, so that the instances' clocks
// need not agree. A holder must stop its work before its lease may have
// expired by its own clock: the time it sent the statement that renewed it
// plus ttl is early enough, whatever its clock's offset.

// leaseNow is the database's clock in milliseconds since the Unix epoch, the
// same within a statement.
func (c *Catalog) leaseNow() string {
	if c.d == postgresDialect {
		return `CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)`
}

// leaseSQL is query with {{now}} the database's clock, in the dialect.
func (c *Catalog) leaseSQL(query string) string {
	return c.d.q(strings.ReplaceAll(query, "{{now}}", c.leaseNow()))
}

// Acquire takes the lease name for holder until ttl from now when nobody holds
// it (never taken, released, expired) or holder does: its epoch grows by one.
// ok is false when another holder has it; the lease returned then is theirs.
// The state is the last one checkpointed, whoever wrote it.
func (c *Catalog) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (node.Lease, bool, error) {
	if holder == "" {
		return node.Lease{}, false, errors.New("sqlcatalog: a lease needs a holder")
	}
	l := node.Lease{Name: name}
	var expires int64
	err := c.leaseWrite(func() error {
		return c.db.QueryRowContext(ctx, c.leaseSQL(`INSERT INTO leases (name, epoch, holder, expires, state)
			VALUES (?, 1, ?, {{now}} + ?, '')
			ON CONFLICT (name) DO UPDATE SET epoch = leases.epoch + 1, holder = excluded.holder, expires = excluded.expires
			WHERE leases.expires <= {{now}} OR leases.holder = '' OR leases.holder = excluded.holder
			RETURNING epoch, holder, expires, state`), name, holder, ttlMillis(ttl)).Scan(&l.Epoch, &l.Holder, &expires, &l.State)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		l, err := c.Lease(ctx, name)
		return l, false, err
	case err != nil:
		return node.Lease{}, false, fmt.Errorf("sqlcatalog: acquiring the lease %q: %w", name, err)
	}
	l.Expires = time.UnixMilli(expires)
	return l, true, nil
}

// Renew extends the lease held at epoch until ttl from now; ErrLeaseLost when
// its epoch is another now. It renews a lease that expired and that nobody
// took since: no other holder can have worked under it.
func (c *Catalog) Renew(ctx context.Context, name string, epoch int64, ttl time.Duration) error {
	return c.leaseUpdate(ctx, name, epoch, "renewing", `UPDATE leases SET expires = {{now}} + ? WHERE name = ? AND epoch = ? AND holder <> ''`,
		ttlMillis(ttl), name, epoch)
}

// Checkpoint is Renew that also stores state, the holder's progress that the
// next holder starts from.
func (c *Catalog) Checkpoint(ctx context.Context, name string, epoch int64, state string, ttl time.Duration) error {
	return c.leaseUpdate(ctx, name, epoch, "checkpointing", `UPDATE leases SET expires = {{now}} + ?, state = ? WHERE name = ? AND epoch = ? AND holder <> ''`,
		ttlMillis(ttl), state, name, epoch)
}

// Release frees the lease held at epoch for anyone to take at once; its epoch
// and state stay. ErrLeaseLost when its epoch is another now.
func (c *Catalog) Release(ctx context.Context, name string, epoch int64) error {
	return c.leaseUpdate(ctx, name, epoch, "releasing", `UPDATE leases SET expires = 0, holder = '' WHERE name = ? AND epoch = ? AND holder <> ''`,
		name, epoch)
}

// Lease is the lease name as it is now; a lease never taken has epoch 0.
func (c *Catalog) Lease(ctx context.Context, name string) (node.Lease, error) {
	l := node.Lease{Name: name}
	var expires int64
	err := c.db.QueryRowContext(ctx, c.d.q(`SELECT epoch, holder, expires, state FROM leases WHERE name = ?`), name).
		Scan(&l.Epoch, &l.Holder, &expires, &l.State)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return l, nil
	case err != nil:
		return node.Lease{}, fmt.Errorf("sqlcatalog: reading the lease %q: %w", name, err)
	}
	if expires > 0 {
		l.Expires = time.UnixMilli(expires)
	}
	return l, nil
}

// leaseUpdate runs an UPDATE of the row of name at epoch: ErrLeaseLost when
// it changed none.
func (c *Catalog) leaseUpdate(ctx context.Context, name string, epoch int64, what, query string, args ...any) error {
	var n int64
	err := c.leaseWrite(func() error {
		res, err := c.db.ExecContext(ctx, c.leaseSQL(query), args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlcatalog: %s the lease %q: %w", what, name, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlcatalog: %s the lease %q at epoch %d: %w", what, name, epoch, ErrLeaseLost)
	}
	return nil
}

// leaseWrite runs one statement that writes, serialized with the other
// writes of this process (SQLite would otherwise answer SQLITE_BUSY).
func (c *Catalog) leaseWrite(fn func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return fn()
}

// ttlMillis is ttl in milliseconds, at least 1.
func ttlMillis(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }
