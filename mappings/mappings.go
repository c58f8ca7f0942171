// Package mappings builds the node a configuration describes: the catalog
// (embedded SQLite or PostgreSQL) with object bytes in files, S3 or WebDAV, and,
// when `mapping` names one, an upstream whose mapping serves the member node.
// Only cmd imports it.
package mappings

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/datacite"
	"github.com/d1bridge/d1bridge/mappings/dataone"
	"github.com/d1bridge/d1bridge/mappings/fsblobs"
	"github.com/d1bridge/d1bridge/mappings/httpapi"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/oaipmh"
	"github.com/d1bridge/d1bridge/mappings/s3"
	"github.com/d1bridge/d1bridge/mappings/sitemap"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/d1bridge/d1bridge/mappings/webdav"
	"github.com/d1bridge/d1bridge/metrics"
)

// Nodes is what the configuration's stores and mappings give the binary.
type Nodes struct {
	// Catalog is the node over the catalog and the store. It serves the CN role,
	// and the MN role unless a mapping does.
	Catalog *node.Node
	// MN serves the member node role: Catalog, or the mapping `mapping` names.
	MN adapter.MemberNode
	// Upstreams are the clients of the configured upstreams, in config order.
	Upstreams []*upstream.Client
	types     map[string]string
	// checks are the upstreams' own readiness checks (a store's, a mapping's,
	// a source's Ping), by upstream name; Status asks the others' base URL.
	checks  map[string]func(context.Context) error
	follow  follower       // nil: no other instance writes the catalog
	objects *fsblobs.Store // the embedded store; nil with another
	records recordMemory   // the catalog's record cache; nil: none
}

// recordMemory is a catalog that keeps records in memory
// (sqlcatalog.Catalog.RecordMemory).
type recordMemory interface {
	RecordMemory() (kept int64, hits, misses uint64)
}

// follower is a catalog that other instances may write: it tells of the PIDs
// they change.
type follower interface {
	Follow(fn func(pids []string))
	FollowFailures() int64
}

// Follow calls fn with the PIDs whose system metadata any instance sharing
// the catalog changes, nil when anything may have changed, so that caches
// outside the catalog forget them. Nothing happens on a catalog no other
// instance writes.
func (ns *Nodes) Follow(fn func(pids []string)) {
	if ns.follow != nil {
		ns.follow.Follow(fn)
	}
}

// FollowFailures is how many reads of the shared catalog's change log failed.
func (ns *Nodes) FollowFailures() int64 {
	if ns.follow == nil {
		return 0
	}
	return ns.follow.FollowFailures()
}

// ObjectMemory tells what the embedded store keeps of small objects in
// memory (fsblobs.Store.MemoryStats); zeros with another store.
func (ns *Nodes) ObjectMemory() (kept int64, hits, misses uint64) {
	if ns.objects == nil {
		return 0, 0, 0
	}
	return ns.objects.MemoryStats()
}

// RecordMemory tells what the catalog keeps of records in their compact
// form (sqlcatalog.Catalog.RecordMemory); zeros with none.
func (ns *Nodes) RecordMemory() (kept int64, hits, misses uint64) {
	if ns.records == nil {
		return 0, 0, 0
	}
	return ns.records.RecordMemory()
}

// pinger is a store, source or mapping with its own readiness check.
type pinger interface {
	Ping(ctx context.Context) error
}

// UpstreamStatus is one upstream as the monitoring endpoints report it.
type UpstreamStatus struct {
	Name, Type, Breaker string
	Up                  bool
	Error               string
}

// New opens the stores cfg names and returns the nodes over them.
func New(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (*Nodes, error) {
	ns := &Nodes{types: map[string]string{}, checks: map[string]func(context.Context) error{}}
	clients := map[string]*upstream.Client{}
	for _, u := range cfg.Upstreams {
		c, err := upstream.Open(u, m)
		if err != nil {
			for _, c := range ns.Upstreams {
				c.Close()
			}
			return nil, err
		}
		clients[u.Name], ns.types[u.Name] = c, u.Type
		ns.Upstreams = append(ns.Upstreams, c)
	}
	cat, err := openCatalog(cfg)
	if err != nil {
		return nil, err
	}
	blobs, err := openBlobs(cfg, clients)
	if err != nil {
		cat.Close()
		return nil, err
	}
	if p, ok := blobs.(pinger); ok && cfg.Store != "" {
		ns.checks[cfg.Store] = p.Ping
	}
	ns.objects, _ = blobs.(*fsblobs.Store)
	ns.Catalog = node.New(cfg.Node.ID, blobs, cat, log)
	ns.follow, _ = cat.(follower)
	ns.records, _ = cat.(recordMemory)
	ns.Catalog.SetReindexMetrics(m)
	ns.MN = ns.Catalog
	if cfg.Identifiers != "" {
		u := upstreamNamed(cfg, cfg.Identifiers)
		ids, err := datacite.New(u, clients[u.Name], cfg.BaseURL()+"/mn", cfg.Node.Name)
		if err != nil {
			ns.Close()
			return nil, fmt.Errorf("identifiers %q: %w", u.Name, err)
		}
		ns.Catalog.SetIdentifiers(ids)
	}
	if cfg.Mapping != "" {
		u := upstreamNamed(cfg, cfg.Mapping)
		if ns.MN, err = serving(u, clients[u.Name], log); err != nil {
			ns.Close()
			return nil, fmt.Errorf("mapping %q: %w", u.Name, err)
		}
		ns.checks[u.Name] = ns.MN.Ping
	}
	// A store whose objects appear on their own (type http) is harvested into
	// the catalog every harvest.interval, each object alone; with no
	// interval, its options still serve the harvest pass of a reindex of all
	// objects. When its records name their dataset (fields.dataset), it is
	// harvested as datasets instead (openSources).
	// File stores (s3, webdav) list too, but only as datasets (harvest.depth).
	if l, ok := blobs.(node.Lister); ok && upstreamNamed(cfg, cfg.Store).Type == config.UpstreamHTTP && !groupsRecords(upstreamNamed(cfg, cfg.Store)) {
		u := upstreamNamed(cfg, cfg.Store)
		ns.Catalog.StartHarvest(l, harvestOptions(u.Name, config.UpstreamDefaults(u).Harvest, m))
	}
	// Holdings harvested as data packages: file trees, OAI-PMH, sitemaps,
	// OCFL, repository APIs whose records name their dataset.
	sources, err := openSources(cfg, clients, blobs, m)
	if err != nil {
		ns.Close()
		return nil, err
	}
	for _, s := range sources {
		ns.Catalog.StartDatasets(s.src, s.opts)
		if p, ok := s.opts.Reader.(pinger); ok && ns.checks[s.name] == nil {
			ns.checks[s.name] = p.Ping
		}
	}
	return ns, nil
}

// Check reports every problem of the upstreams' options (and the mapping's
// view of their baseURL) that New would fail on, joined, each line naming its
// upstream: every upstream is checked by its type's mapping, whether or not
// store, mapping or identifiers names it. It contacts no upstream and writes
// nothing; it reads the secret files the options name, so a missing one is a
// problem. cfg has passed Validate.
func Check(cfg *config.Config) error {
	var errs []error
	for _, u := range cfg.Upstreams {
		if _, err := upstream.LoadTLS(u); err != nil {
			errs = append(errs, err)
		}
		switch u.Type {
		case config.UpstreamS3:
			errs = append(errs, s3.CheckOptions(u))
		case config.UpstreamWebDAV:
			errs = append(errs, webdav.CheckOptions(u))
		case config.UpstreamHTTP:
			errs = append(errs, httpapi.CheckOptions(u))
		case config.UpstreamDataONE:
			errs = append(errs, dataone.CheckOptions(u))
		case config.UpstreamDataCite:
			errs = append(errs, datacite.CheckOptions(u, cfg.BaseURL()+"/mn", cfg.Node.Name))
		case config.UpstreamOAIPMH:
			errs = append(errs, oaipmh.CheckOptions(u))
		case config.UpstreamSitemap:
			errs = append(errs, sitemap.CheckOptions(u))
		case config.UpstreamFiles:
			if _, err := openTree(u); err != nil {
				errs = append(errs, fmt.Errorf("upstream %q: %w", u.Name, err))
			}
		case config.UpstreamOCFL:
			if err := checkOCFL(cfg, u); err != nil {
				errs = append(errs, fmt.Errorf("upstream %q: %w", u.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// harvestOptions are the node's harvest options from the configuration, for
// the upstream named name.
func harvestOptions(name string, h config.Harvest, m *metrics.Metrics) node.HarvestOptions {
	return node.HarvestOptions{Name: name, Interval: h.Interval, FormatID: h.FormatID, RightsHolder: h.RightsHolder,
		Submitter: h.Submitter, Readers: h.Readers, ChecksumAlgorithm: h.ChecksumAlgorithm, LeaseTTL: h.LeaseTTL, Metrics: m}
}

// serving is the member node a mapping upstream provides.
func serving(u config.Upstream, c *upstream.Client, log *slog.Logger) (adapter.MemberNode, error) {
	switch u.Type {
	case config.UpstreamDataONE:
		return dataone.New(u, c, dataone.WithLogger(log))
	}
	return nil, fmt.Errorf("upstreams of type %s cannot serve the member node in this build", u.Type)
}

func upstreamNamed(cfg *config.Config, name string) config.Upstream {
	for _, u := range cfg.Upstreams {
		if u.Name == name {
			return u
		}
	}
	return config.Upstream{} // validated: does not happen
}

func openBlobs(cfg *config.Config, clients map[string]*upstream.Client) (node.Blobs, error) {
	if cfg.Store == "" {
		b, err := fsblobs.New(filepath.Join(cfg.DataDir, "objects"), fsblobs.WithMemory(cfg.ObjectCacheSize))
		if err != nil {
			return nil, fmt.Errorf("opening the object store: %w", err)
		}
		return b, nil
	}
	u := upstreamNamed(cfg, cfg.Store)
	switch u.Type {
	case config.UpstreamS3:
		return s3.New(u, clients[u.Name])
	case config.UpstreamWebDAV:
		return webdav.New(u, clients[u.Name])
	case config.UpstreamHTTP:
		return httpapi.New(u, clients[u.Name])
	}
	return nil, fmt.Errorf("store %q: upstreams of type %s cannot hold object bytes", u.Name, u.Type)
}

func openCatalog(cfg *config.Config) (node.Catalog, error) {
	switch cfg.Catalog.Driver {
	case config.DriverPostgres:
		// Several instances may share the database: every read asks it, so
		// that a write acknowledged by one instance is read back from any
		// other (the record cache, which the change log empties only after
		// the write, would serve the old version meanwhile). The paging cache,
		// which every create elsewhere would flush, is off too: list totals
		// and offsets come from the catalog's list blocks.
		return sqlcatalog.OpenPostgres(cfg.Catalog.DSN, sqlcatalog.WithNodeID(cfg.Node.ID), sqlcatalog.WithCache(0, 0), sqlcatalog.WithRecordCache(0))
	default:
		if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("creating the data directory: %w", err)
		}
		path := cfg.Catalog.DSN // for sqlite, a file path
		if path == "" {
			path = filepath.Join(cfg.DataDir, "catalog.db")
		}
		return sqlcatalog.OpenSQLite(path, sqlcatalog.WithNodeID(cfg.Node.ID),
			sqlcatalog.WithSQLiteMemory(cfg.Catalog.CacheSize, cfg.Catalog.MmapSize),
			sqlcatalog.WithRecordMemory(cfg.Catalog.RecordCacheSize))
	}
}

// Ping checks the catalog and the node that serves the MN role.
func (ns *Nodes) Ping(ctx context.Context) error {
	err := ns.Catalog.Ping(ctx)
	if ns.MN != adapter.MemberNode(ns.Catalog) {
		err = errors.Join(err, ns.MN.Ping(ctx))
	}
	return err
}

// Status asks every upstream whether it can serve, through its client and so
// its breaker: a store, mapping or source by its own check (S3: the bucket
// exists and the credentials are accepted; WebDAV: the collection answers
// PROPFIND; http: the probe of its options; dataone: its ping; files: the root
// reads), any other upstream by a HEAD of its base URL answered below 500.
// Error is the reason, naming the upstream.
func (ns *Nodes) Status(ctx context.Context) []UpstreamStatus {
	out := make([]UpstreamStatus, 0, len(ns.Upstreams))
	for _, c := range ns.Upstreams {
		st := UpstreamStatus{Name: c.Name(), Type: ns.types[c.Name()], Up: true}
		if check := ns.checks[c.Name()]; check != nil {
			if err := check(upstream.WithOperation(ctx, "status")); err != nil {
				st.Up, st.Error = false, reason(err)
			}
			st.Breaker = c.State()
			out = append(out, st)
			continue
		}
		cctx, cancel := c.WithTimeout(upstream.WithOperation(ctx, "status"))
		req, err := http.NewRequestWithContext(cctx, http.MethodHead, c.Config().BaseURL, nil)
		if err == nil {
			var resp *http.Response
			if resp, err = c.HTTP().Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode >= 500 {
					err = c.StatusError(resp.StatusCode, "a HEAD of its base URL", nil)
				}
			} else {
				// The client's description, not the transport's: the status
				// endpoints are public, and a transport error names hosts and ports.
				err = c.Error(err, "a HEAD of its base URL")
			}
		}
		cancel()
		if err != nil {
			st.Up, st.Error = false, reason(err)
		}
		st.Breaker = c.State()
		out = append(out, st)
	}
	return out
}

// reason is what a failed check says: an exception's description (which names
// the upstream), else the error.
func reason(err error) string {
	var e *adapter.Exception
	if errors.As(err, &e) && e.Description != "" {
		return e.Description
	}
	return err.Error()
}

// Close closes the catalog and the upstream clients.
func (ns *Nodes) Close() error {
	for _, c := range ns.Upstreams {
		c.Close()
	}
	return ns.Catalog.Close()
}
