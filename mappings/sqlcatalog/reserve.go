package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

var _ node.Reservations = (*Catalog)(nil)

// Reserve records that subject reserved id. Reserving again by the same subject
// succeeds; another subject's reservation is IdentifierNotUnique.
//
// The row is inserted unless one exists, then read: a reservation another
// process inserts at the same moment makes the insert wait for that
// transaction and then do nothing, so the read sees the winner, never a
// unique violation (PostgreSQL; SQLite transactions are serialized).
func (c *Catalog) Reserve(ctx context.Context, id, subject string) error {
	return c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO reservations (id, subject, reserved) VALUES (?, ?, ?)
			ON CONFLICT (id) DO NOTHING`), id, subject, c.now().UnixMilli()); err != nil {
			return nil, fmt.Errorf("sqlcatalog: reserving %q: %w", id, err)
		}
		var holder string
		if err := tx.QueryRowContext(ctx, c.d.q(`SELECT subject FROM reservations WHERE id = ?`), id).Scan(&holder); err != nil {
			return nil, fmt.Errorf("sqlcatalog: reading a reservation: %w", err)
		}
		if holder != subject {
			return nil, adapter.Errorf(adapter.IdentifierNotUnique, "identifier %q is reserved by another subject", id).WithPID(id)
		}
		return &change{}, nil
	})
}

// Reservation is the subject holding id's reservation; NotFound when none.
func (c *Catalog) Reservation(ctx context.Context, id string) (string, error) {
	var holder string
	err := c.db.QueryRowContext(ctx, c.d.q(`SELECT subject FROM reservations WHERE id = ?`), id).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return "", adapter.Errorf(adapter.NotFound, "identifier %q is not reserved", id).WithPID(id)
	}
	if err != nil {
		return "", fmt.Errorf("sqlcatalog: reading a reservation: %w", err)
	}
	return holder, nil
}

// Hold gives id's reservation to subject, whoever held it.
func (c *Catalog) Hold(ctx context.Context, id, subject string) error {
	return c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO reservations (id, subject, reserved) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET subject = excluded.subject, reserved = excluded.reserved`), id, subject, c.now().UnixMilli()); err != nil {
			return nil, fmt.Errorf("sqlcatalog: holding %q: %w", id, err)
		}
		return &change{}, nil
	})
}
