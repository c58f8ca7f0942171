// Package mappings builds the node a configuration describes: the embedded default
// store, or (later) a mapping to an existing repository. Only cmd imports it.
package mappings

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
)

// New opens the stores cfg names and returns the node over them.
func New(cfg *config.Config, log *slog.Logger) (*node.Node, error) {
	cat, err := openCatalog(cfg)
	if err != nil {
		return nil, err
	}
	blobs, err := fsblobs.New(filepath.Join(cfg.DataDir, "objects"))
	if err != nil {
		cat.Close()
		return nil, fmt.Errorf("opening the object store: %w", err)
	}
	return node.New(cfg.Node.ID, blobs, cat, log), nil
}

func openCatalog(cfg *config.Config) (node.Catalog, error) {
	switch cfg.Catalog.Driver {
	case config.DriverPostgres:
		// Several instances may share the database; the paging cache belongs to
		// one process, so it is off and pages pay for their offset.
		return sqlcatalog.OpenPostgres(cfg.Catalog.DSN, sqlcatalog.WithNodeID(cfg.Node.ID), sqlcatalog.WithCache(0, 0))
	default:
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("creating the data directory: %w", err)
		}
		path := cfg.Catalog.DSN // for sqlite, a file path
		if path == "" {
			path = filepath.Join(cfg.DataDir, "catalog.db")
		}
		return sqlcatalog.OpenSQLite(path, sqlcatalog.WithNodeID(cfg.Node.ID))
	}
}
