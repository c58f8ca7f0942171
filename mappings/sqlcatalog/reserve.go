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
func (c *Catalog) Reserve(ctx context.Context, id, subject string) error {
	return c.write(ctx, func(tx *sql.Tx) (*change, error) {
		var holder string
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT subject FROM reservations WHERE id = ?`), id).Scan(&holder)
		switch {
		case err == nil && holder == subject:
			return &change{}, nil
		case err == nil:
			return nil, adapter.Errorf(adapter.IdentifierNotUnique, "identifier %q is reserved by another subject", id).WithPID(id)
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("sqlcatalog: reading a reservation: %w", err)
		}
		if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO reservations (id, subject, reserved) VALUES (?, ?, ?)`),
			id, subject, c.now().UnixMilli()); err != nil {
			return nil, fmt.Errorf("sqlcatalog: reserving %q: %w", id, err)
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
