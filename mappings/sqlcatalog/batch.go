package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

var errAlreadyArchived = errors.New("archived already")

// Apply writes b in one transaction: a harvested dataset version costs one
// commit (one fsync), not one per object.
func (c *Catalog) Apply(ctx context.Context, b *node.Batch) ([]string, error) {
	archived := make([]string, len(b.Archive))
	err := c.write(ctx, func(ctx context.Context, tx *sql.Tx) (*change, error) {
		clear(archived)
		var all change
		for _, key := range slices.Sorted(maps.Keys(b.Documents)) {
			if _, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO documents (key, body) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`), key, b.Documents[key]); err != nil {
				return nil, fmt.Errorf("sqlcatalog: storing the document %q: %w", key, err)
			}
		}
		for _, rec := range b.Records {
			ch, err := c.insertTx(ctx, tx, rec)
			if err != nil {
				return nil, err
			}
			all.merge(ch)
		}
		for _, rec := range b.Kept {
			ch, err := c.keepTx(ctx, tx, rec.Meta.Identifier, rec.BlobKey, rec.Checksums)
			if err != nil {
				return nil, err
			}
			all.merge(ch)
		}
		for i, id := range b.Archive {
			ch, sm, err := c.modifyTx(ctx, tx, id, func(sm *adapter.SystemMetadata) error {
				if sm.Archived {
					return errAlreadyArchived
				}
				sm.Archived = true
				sm.SerialVersion++
				sm.DateSysMetadataModified = adapter.Now()
				return nil
			})
			switch {
			case errors.Is(err, errAlreadyArchived), adapter.IsKind(err, adapter.NotFound):
				continue
			case err != nil:
				return nil, err
			}
			all.merge(ch)
			archived[i] = sm.Identifier
		}
		return &all, nil
	})
	if err != nil {
		return nil, err
	}
	return archived, nil
}

// Document reads a document Apply stored.
func (c *Catalog) Document(ctx context.Context, key string) ([]byte, error) {
	var body []byte
	err := c.db.QueryRowContext(ctx, c.d.q(`SELECT body FROM documents WHERE key = ?`), key).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, adapter.Errorf(adapter.NotFound, "no document is stored under %q", key)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: reading the document %q: %w", key, err)
	}
	return body, nil
}

// merge adds what o changed to ch.
func (ch *change) merge(o *change) {
	if o == nil {
		return
	}
	ch.rows = append(ch.rows, o.rows...)
	ch.events = append(ch.events, o.events...)
	ch.touched = append(ch.touched, o.touched...)
	ch.logged = append(ch.logged, o.logged...)
	ch.created = append(ch.created, o.created...)
}
