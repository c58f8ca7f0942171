package main

// backup, export and restore open the catalog and the store the
// configuration names themselves, not through mappings.New: they need the
// catalog's snapshot and load (sqlcatalog), and must not start what a serving
// node starts (harvests, replication). Opening the catalog directly is safe
// while the node serves: SQLite in WAL mode lets another process read one
// snapshot while the node writes (the backup only reads, and refuses a
// catalog of another schema version rather than migrate it), and PostgreSQL
// is a server. restore writes,
// so it refuses a catalog that holds anything unless --force.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/d1bridge/d1bridge/cmd/d1bridge/internal/backup"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/httpapi"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/s3"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/mappings/webdav"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// backupCmd is `d1bridge backup DIR`: a consistent snapshot of the catalog
// and, with the embedded store, of the object bytes.
func backupCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("backup")
	fs.String("config", "", "YAML configuration file of the node")
	verify := fs.Bool("verify", true, "hash every object's bytes against its system metadata")
	dir, cfg, err := dirCommand(fs, args, getenv, stdout)
	if dir == "" || err != nil {
		return err
	}
	cat, err := openCatalogFor(cfg, false)
	if err != nil {
		return err
	}
	defer cat.Close()
	o := backup.Options{Catalog: cat, NodeID: cfg.Node.ID, Verify: *verify, Log: stderr}
	if cfg.Store == "" {
		o.Files = filepath.Join(cfg.DataDir, "objects")
	} else {
		o.Store = cfg.Store
		fmt.Fprintf(stderr, "backup: the bytes are in the store %q, which needs a backup (or versioning) of its own; this backup holds the catalog\n", cfg.Store)
	}
	m, err := backup.Backup(ctx, dir, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backup %s: %d objects, %d files (%d bytes), catalog rows: %s\n", dir, m.Objects, m.Files, m.Bytes, backup.RowCounts(m.Rows))
	return nil
}

// exportCmd is `d1bridge export DIR`: every object's bytes and system
// metadata as a hashstore.
func exportCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("export")
	fs.String("config", "", "YAML configuration file of the node")
	dir, cfg, err := dirCommand(fs, args, getenv, stdout)
	if dir == "" || err != nil {
		return err
	}
	opts, closeAll, err := openForBackup(cfg, false, stderr)
	if err != nil {
		return err
	}
	defer closeAll()
	m, err := backup.Export(ctx, dir, backup.ExportOptions{Options: opts})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "export %s: %d objects, %d files (%d bytes), %d metadata only\n", dir, m.Objects, m.Files, m.Bytes, m.MetadataOnly+m.Elsewhere+int64(len(m.Vanished)))
	return nil
}

// restoreCmd is `d1bridge restore DIR`: a backup or an export back into an
// empty node, verified.
func restoreCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("restore")
	fs.String("config", "", "YAML configuration file of the node to restore into (stopped)")
	force := fs.Bool("force", false, "restore into a catalog that is not empty: a backup replaces it, an export adds to it")
	dir, cfg, err := dirCommand(fs, args, getenv, stdout)
	if dir == "" || err != nil {
		return err
	}
	kind := backup.Kind(dir)
	if kind == "" {
		return fmt.Errorf("restore: %s holds neither a backup (%s) nor an export (hashstore.yaml)", dir, backup.ManifestName)
	}
	unlock, err := lockDataDir(cfg.DataDir, true)
	if err != nil {
		return fmt.Errorf("restore: %w: stop it first", err)
	}
	defer unlock()
	opts, closeAll, err := openForBackup(cfg, true, stderr)
	if err != nil {
		return err
	}
	defer closeAll()
	o := backup.RestoreOptions{Options: opts, Force: *force}
	var s *backup.Summary
	if kind == "backup" {
		s, err = backup.RestoreBackup(ctx, dir, o)
	} else {
		s, err = backup.RestoreExport(ctx, dir, o)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restore %s (%s): %d objects verified (%d bytes), %d skipped, catalog rows: %s\n", dir, s.Kind, s.Objects, s.Bytes, s.Skipped, backup.RowCounts(s.Rows))
	return nil
}

// openForBackup opens the catalog (made when create) and the store cfg names,
// as export and restore use them; closeAll closes both.
func openForBackup(cfg *config.Config, create bool, log io.Writer) (o backup.Options, closeAll func(), err error) {
	cat, err := openCatalogFor(cfg, create)
	if err != nil {
		return o, nil, err
	}
	blobs, files, closeBlobs, err := openStoreFor(cfg)
	if err != nil {
		cat.Close()
		return o, nil, err
	}
	o = backup.Options{Catalog: cat, Files: files, Store: cfg.Store, Blobs: blobs, NodeID: cfg.Node.ID, Verify: true, Log: log}
	return o, func() { closeBlobs(); cat.Close() }, nil
}

// dirCommand parses a subcommand's flags (with --config) and its one DIR
// argument, and loads the configuration; dir is "" after --help.
func dirCommand(fs *flag.FlagSet, args []string, getenv func(string) string, stdout io.Writer) (string, *config.Config, error) {
	if help, err := parseFlags(fs, args, stdout); help || err != nil {
		return "", nil, err
	}
	if fs.NArg() != 1 {
		return "", nil, fmt.Errorf("%s: one directory is needed (d1bridge %s --help)", fs.Name(), fs.Name())
	}
	cfg, err := loadConfig(fs.Lookup("config").Value.String(), getenv)
	if err != nil {
		return "", nil, err
	}
	return fs.Arg(0), cfg, nil
}

// openCatalogFor opens the catalog cfg names, as the node does; without
// create, a SQLite catalog must exist already, and its schema must be this
// program's: backup and export read a serving node's catalog, which they
// must not migrate.
func openCatalogFor(cfg *config.Config, create bool) (*sqlcatalog.Catalog, error) {
	opts := []sqlcatalog.Option{sqlcatalog.WithNodeID(cfg.Node.ID), sqlcatalog.WithCache(0, 0), sqlcatalog.WithRecordCache(0)}
	if !create {
		opts = append(opts, sqlcatalog.WithSchemaAsIs())
	}
	if cfg.Catalog.Driver == config.DriverPostgres {
		return sqlcatalog.OpenPostgres(cfg.Catalog.DSN, opts...)
	}
	path := cfg.Catalog.DSN
	if path == "" {
		path = filepath.Join(cfg.DataDir, "catalog.db")
	}
	if create {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the catalog: %w", err)
	}
	return sqlcatalog.OpenSQLite(path, opts...)
}

// openStoreFor opens the store cfg names, as mappings.New does; files is the
// embedded store's root, "" for an external store.
func openStoreFor(cfg *config.Config) (blobs node.Blobs, files string, closeFn func(), err error) {
	if cfg.Store == "" {
		files = filepath.Join(cfg.DataDir, "objects")
		st, err := fsblobs.New(files)
		if err != nil {
			return nil, "", nil, err
		}
		return st, files, func() { st.Close() }, nil
	}
	var u config.Upstream
	for _, x := range cfg.Upstreams {
		if x.Name == cfg.Store {
			u = x
		}
	}
	c := upstream.New(u, metrics.New(prometheus.NewRegistry(), version))
	switch u.Type {
	case config.UpstreamS3:
		blobs, err = s3.New(u, c)
	case config.UpstreamWebDAV:
		blobs, err = webdav.New(u, c)
	case config.UpstreamHTTP:
		blobs, err = httpapi.New(u, c)
	default:
		err = fmt.Errorf("store %q: upstreams of type %s cannot hold object bytes", u.Name, u.Type)
	}
	if err != nil {
		return nil, "", nil, err
	}
	return blobs, "", func() {
		if cl, ok := blobs.(io.Closer); ok {
			cl.Close()
		}
	}, nil
}
