package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/rest"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/cmd/internal/heapfloor"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func serve(ctx context.Context, cfg *config.Config, path string, getenv func(string) string) error {
	// From the start: a SIGHUP's default is to end the process, and opening
	// the catalog may take a minute (migrations); one that comes meanwhile
	// (systemctl reload right after start) is a reload once the node serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log := newLogger(cfg.Log, os.Stderr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, version)
	for _, w := range startWarnings(cfg) {
		log.Warn(w)
	}
	defer heapfloor.Start(cfg.HeapFloor, getenv)()

	shared := cfg.Catalog.Driver == config.DriverPostgres
	unlock, err := lockDataDir(cfg.DataDir, !shared)
	if err != nil {
		if shared {
			return err
		}
		return fmt.Errorf("%w: a node on the embedded catalog needs a data directory of its own (replicas share one on a PostgreSQL catalog)", err)
	}
	defer unlock()
	n, err := mappings.New(cfg, log, m)
	if err != nil {
		return err
	}
	defer n.Close()

	// The engine is rebuilt on SIGHUP and swapped in atomically; requests in
	// flight finish on the engine they started on.
	var current atomic.Pointer[engine]
	// The bound on uploads in flight is shared by the engines a reload swaps
	// in, so that it holds across them.
	uploads := rest.NewUploads(cfg.Limits.MaxUploads, cfg.Limits.MaxUploadsPerClient)
	eng, err := newEngine(cfg, n, m, log, uploads)
	if err != nil {
		return err
	}
	current.Store(eng)
	// The node works the catalog's job queue (replication and reindex, shared
	// by every instance on the catalog) from here: newEngine has given the
	// replication jobs the registry, token and CN. Job files an earlier
	// version kept in dataDir move into the queue first.
	if k := n.Catalog.StartWork(); k > 0 {
		log.Info("replication job files moved into the catalog's queue", "jobs", k)
	}
	// A change made through another instance sharing the catalog ends the
	// decisions this one holds on those objects.
	n.Follow(func(pids []string) {
		if pids == nil {
			current.Load().authz.InvalidateAll()
			return
		}
		current.Load().authz.Invalidate(pids...)
	})
	storedGauges(reg, n)
	metrics.GaugeFunc(reg, "d1bridge_auth_cache_entries", "Authorization decisions held in the cache.",
		func() float64 { return float64(current.Load().authz.CachedDecisions()) })
	metrics.CounterFunc(reg, "d1bridge_change_log_read_failures_total", "Reads of the shared catalog's change log that failed: meanwhile changes made through other instances reach this one's authorization cache only as it expires (authCacheTTL).",
		func() float64 { return float64(n.FollowFailures()) })
	metrics.GaugeFunc(reg, "d1bridge_object_memory_bytes", "Bytes of small objects the embedded store keeps in memory (objectCacheSize bounds them).",
		func() float64 { kept, _, _ := n.ObjectMemory(); return float64(kept) })
	metrics.CounterFunc(reg, "d1bridge_object_memory_hits_total", "Reads of the embedded store served from memory.",
		func() float64 { _, hits, _ := n.ObjectMemory(); return float64(hits) })
	metrics.CounterFunc(reg, "d1bridge_object_memory_misses_total", "Reads of the embedded store that opened the object's file.",
		func() float64 { _, _, misses := n.ObjectMemory(); return float64(misses) })
	metrics.GaugeFunc(reg, "d1bridge_record_memory_bytes", "Bytes of records the embedded catalog keeps in memory, compact (catalog.recordCacheSize bounds them).",
		func() float64 { kept, _, _ := n.RecordMemory(); return float64(kept) })
	metrics.CounterFunc(reg, "d1bridge_record_memory_hits_total", "Lookups of records served from the catalog's compact memory (those of the most recent records, kept decoded, are not counted).",
		func() float64 { _, hits, _ := n.RecordMemory(); return float64(hits) })
	metrics.CounterFunc(reg, "d1bridge_record_memory_misses_total", "Lookups of records that read the catalog.",
		func() float64 { _, _, misses := n.RecordMemory(); return float64(misses) })
	metrics.CounterFunc(reg, "d1bridge_read_events_dropped_total", "Read events not logged: the event queue was full (the catalog wrote events slower than reads came).",
		func() float64 { return float64(n.Catalog.DroppedEvents()) })
	defer func() { current.Load().close() }()

	readiness := &readiness{cfg: cfg, n: n}
	m.SetReadiness(func() bool { status, _ := readiness.current(context.Background()); return status == http.StatusOK })
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	probes := map[string]http.HandlerFunc{
		"/healthz": func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") },
		"/readyz":  readiness.serveHTTP,
	}
	if cfg.Metrics.Listen == "" {
		probes[cfg.Metrics.Path] = metricsHandler.ServeHTTP
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().api.ServeHTTP(w, r) })
	front := &http.Server{Addr: cfg.Listen, Handler: stallLimit(withProbes(probes, api), cfg.Limits.BodyStallTimeout),
		ReadHeaderTimeout: 30 * time.Second, IdleTimeout: cfg.Limits.IdleTimeout, MaxHeaderBytes: headerLimit(cfg.Limits.MaxHeaderBytes),
		ConnContext: auth.ConnContext}
	// The certificate, key and client CAs are read again on SIGHUP and swapped
	// in: each handshake takes the current ones.
	var liveTLS atomic.Pointer[tls.Config]
	tc, err := tlsConfig(cfg)
	if err != nil {
		return err
	}
	if tc != nil {
		liveTLS.Store(tc)
		front.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12,
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return liveTLS.Load(), nil }}
	}
	servers := []*http.Server{front}
	if cfg.Metrics.Listen != "" {
		mm := http.NewServeMux()
		mm.Handle(cfg.Metrics.Path, metricsHandler)
		servers = append(servers, &http.Server{Addr: cfg.Metrics.Listen, Handler: stallLimit(mm, cfg.Limits.BodyStallTimeout),
			ReadHeaderTimeout: 30 * time.Second, IdleTimeout: cfg.Limits.IdleTimeout, MaxHeaderBytes: headerLimit(cfg.Limits.MaxHeaderBytes)})
	}

	errc := make(chan error, len(servers))
	for _, srv := range servers {
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return err
		}
		if srv == front {
			log.Info("listening", "addr", ln.Addr().String(), "baseURL", cfg.BaseURL(), "roles", cfg.Roles, "version", version)
		} else {
			log.Info("metrics listening", "addr", ln.Addr().String(), "path", cfg.Metrics.Path)
		}
		if srv.TLSConfig != nil {
			ln = tls.NewListener(ln, srv.TLSConfig)
		}
		go func() { errc <- srv.Serve(ln) }()
	}

	running := cfg // the configuration in effect: cfg with the reloads applied
	for {
		select {
		case err := <-errc:
			return err
		case <-hup:
			rl, err := reload(cfg, running, path, getenv, n, m, log, uploads)
			if err != nil {
				log.Error("configuration not reloaded", "err", err)
				continue
			}
			if rl.tls != nil {
				liveTLS.Store(rl.tls)
			}
			old := current.Swap(rl.engine)
			time.AfterFunc(cfg.ShutdownTimeout, old.close) // after the requests it serves are done
			running = rl.cfg
			for _, c := range n.Upstreams {
				if err := c.ReloadTLS(); err != nil {
					log.Error("upstream TLS files not reloaded; the previous certificate stays", "upstream", c.Name(), "err", err)
				}
			}
			if len(rl.restart) > 0 {
				log.Warn("changed keys take effect at the next restart", "keys", rl.restart)
			}
			log.Info("configuration reloaded", "applied", rl.applied, "tlsReloaded", rl.tls != nil)
			continue
		case <-ctx.Done():
		}
		break
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("graceful shutdown: %w", err)
		}
	}
	return nil
}

// startWarnings are the settings that start but make the node document
// untrue to the clients and the CN reading it.
func startWarnings(cfg *config.Config) []string {
	var out []string
	if host, _, err := net.SplitHostPort(cfg.Listen); cfg.Node.BaseURL == "" && err == nil {
		if a, err := netip.ParseAddr(host); host == "" || err == nil && a.IsUnspecified() {
			out = append(out, fmt.Sprintf("node.baseURL is empty on the wildcard listen %s: the node document advertises %s, "+
				"which no other machine can reach; set node.baseURL to the address clients use", cfg.Listen, cfg.BaseURL()))
		}
	}
	// A node that is also the coordinating node (the default: both roles on
	// one catalog) has no other CN to be known to.
	if cfg.HasRole(config.RoleMN) && !cfg.HasRole(config.RoleCN) && cfg.Node.Synchronize && len(cfg.Node.Subjects) == 0 {
		out = append(out, fmt.Sprintf("node.synchronize is on but node.subjects is empty: the node document names the placeholder "+
			"subject CN=%s,DC=dataone,DC=org, and a coordinating node cannot match this node's certificate to it; "+
			"set node.subjects to the subject of the node's client certificate", cfg.Node.ID))
	}
	return out
}

// engine is what a configuration reload replaces: the API with its sessions and
// authorization. Stores, listeners and metrics stay.
type engine struct {
	api   http.Handler
	authz *auth.Authorizer
	close func()
}

func newEngine(cfg *config.Config, n *mappings.Nodes, m *metrics.Metrics, log *slog.Logger, uploads *rest.Uploads) (_ *engine, err error) {
	var issuer *auth.Issuer
	if cfg.Auth.SigningKey != "" {
		if issuer, err = auth.LoadIssuer(cfg.Auth.SigningKey, cfg.Node.ID, cfg.Auth.TokenLifetime); err != nil {
			return nil, fmt.Errorf("auth.signingKey: %w", err)
		}
	}
	authn, closeAuth, err := authenticator(cfg, issuer, m, log)
	if err != nil {
		return nil, err
	}
	trusted := append(append(append([]string{}, cfg.Node.Subjects...), cfg.Node.Administrators...), cfg.Node.CNSubjects...)
	var registry []adapter.NodeRef
	nodeSubjects := map[string][]string{}
	for _, rn := range cfg.Nodes {
		registry = append(registry, adapter.NodeRef{ID: rn.ID, BaseURL: strings.TrimSuffix(rn.BaseURL, "/"), Subjects: rn.Subjects})
		nodeSubjects[rn.ID] = rn.Subjects
	}
	opts := rest.Options{
		Svc: cfg.Svc,
		Node: rest.NodeInfo{
			ID: cfg.Node.ID, Name: cfg.Node.Name, Description: cfg.Node.Description,
			BaseURL: cfg.BaseURL(), Subjects: cfg.Node.Subjects, ContactSubjects: cfg.Node.ContactSubjects,
			Replicate: cfg.Node.Replicate, Synchronize: cfg.Node.Synchronize,
			ReplicationPolicy: replicationPolicy(cfg.Node.ReplicationPolicy),
		},
		Formats: adapter.OfficialFormats(),
		Authorizer: auth.NewAuthorizer(auth.Policy{Trusted: trusted, Submitters: cfg.Node.Submitters, Nodes: nodeSubjects,
			CacheSize: cfg.AuthCacheSize, CacheTTL: cfg.AuthCacheTTL}),
		Sessions:       authn.Session,
		Metrics:        m,
		Logger:         log,
		MaxUploadSize:  cfg.MaxUploadSize,
		Uploads:        uploads,
		Version:        version,
		TrustedProxies: cfg.Auth.Proxy.TrustedAddresses,
		Upstreams:      upstreamStatus(n),
	}
	if issuer != nil {
		opts.Tokens = issuer.Issue
	}
	if c := cfg.CORS; len(c.AllowedOrigins) > 0 {
		opts.CORS = &rest.CORS{AllowedOrigins: c.AllowedOrigins, AllowedMethods: c.AllowedMethods, AllowedHeaders: c.AllowedHeaders,
			ExposedHeaders: c.ExposedHeaders, AllowCredentials: c.AllowCredentials, MaxAge: c.MaxAge}
	}
	// The catalog's member node pulls replicas from the registry's nodes; a
	// reload replaces the settings (those of the job queue apply at start).
	n.Catalog.SetReplication(node.Replication{Registry: registry, Token: cfg.Replication.Token,
		CNBaseURL: cfg.Replication.CNBaseURL, Metrics: m, Accept: cfg.Node.Replicate,
		Policy: opts.Node.ReplicationPolicy, JobsDir: replicationJobsDir(cfg),
		MaxAttempts: cfg.Replication.MaxAttempts, RetryBackoff: cfg.Replication.RetryBackoff, RescueAfter: cfg.Replication.RescueAfter,
		Changed: opts.Authorizer.Invalidate})
	if cfg.HasRole(config.RoleMN) {
		opts.MN = n.MN
	}
	if cfg.HasRole(config.RoleCN) {
		// resolve points at this node's get: the MN's, or the CN's own
		// (CNRead.get) when the node has no MN role.
		self := adapter.NodeRef{ID: cfg.Node.ID, BaseURL: cfg.BaseURL() + "/mn", Subjects: cfg.Node.Subjects}
		if !cfg.HasRole(config.RoleMN) {
			self.BaseURL = cfg.BaseURL() + "/cn"
		}
		opts.CN = node.NewCN(n.Catalog, self, registry)
	}
	return &engine{api: rest.New(opts), authz: opts.Authorizer, close: closeAuth}, nil
}

// headerLimit is http.Server's MaxHeaderBytes for a header block of at most
// n bytes: net/http reads 4,096 bytes beyond it before it answers 431.
func headerLimit(n int) int { return max(n-4096, 1) }

// withProbes serves GET and HEAD of the probes' exact paths (health,
// readiness, metrics), and everything else with api. A ServeMux did this
// before, at 1% of a small request's CPU, and redirected a path with "." or
// ".." segments or doubled slashes to its cleaned form: a request for
// /object/x/../y went to the object y. The API answers such a path NotFound.
func withProbes(probes map[string]http.HandlerFunc, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probe, ok := probes[r.URL.Path]; ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			probe(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// stallLimit ends a request body whose bytes stop flowing (limits.bodyStallTimeout):
// before each read of the body the connection's read deadline is set gap ahead,
// so a client that stalls mid-body has its read failed, and the handler fails
// the call and discards what it staged. It bounds the wait for the next bytes,
// not the whole body, so a slow link keeps going as long as bytes come; once
// the body is read the deadline is lifted, so a long handler is not cut short.
func stallLimit(h http.Handler, gap time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &stallReader{body: r.Body, rc: http.NewResponseController(w), gap: gap}
		}
		h.ServeHTTP(w, r)
	})
}

// stallReader is a request body read under limits.bodyStallTimeout.
type stallReader struct {
	body io.ReadCloser
	rc   *http.ResponseController
	gap  time.Duration
	eof  bool
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.eof {
		return 0, io.EOF
	}
	// http.ErrNotSupported (a writer that cannot set deadlines) leaves the
	// body unbounded, as before; the server's own writers all can.
	s.rc.SetReadDeadline(time.Now().Add(s.gap))
	n, err := s.body.Read(p)
	switch {
	case err == io.EOF:
		s.eof = true
		s.rc.SetReadDeadline(time.Time{})
	case err != nil && isTimeout(err):
		err = adapter.Wrap(adapter.InvalidRequest, err, "the request body stalled: no bytes came for %s", s.gap)
	}
	return n, err
}

func (s *stallReader) Close() error { return s.body.Close() }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// replicationPolicy is the node document's nodeReplicationPolicy: zero sizes
// and empty lists (no limit) are left out.
func replicationPolicy(p config.ReplicationPolicy) *adapter.NodeReplicationPolicy {
	out := &adapter.NodeReplicationPolicy{AllowedNode: p.AllowedNodes, AllowedObjectFormat: p.AllowedObjectFormats}
	if p.MaxObjectSize > 0 {
		v := uint64(p.MaxObjectSize)
		out.MaxObjectSize = &v
	}
	if p.SpaceAllocated > 0 {
		v := uint64(p.SpaceAllocated)
		out.SpaceAllocated = &v
	}
	return out
}

// replicationJobsDir is where earlier versions kept the accepted replication
// jobs; StartWork moves them into the catalog.
func replicationJobsDir(cfg *config.Config) string {
	if cfg.DataDir == "" {
		return ""
	}
	return filepath.Join(cfg.DataDir, "replication")
}

// reloadable are the keys a reload applies, with every key under them; every
// other key waits for a restart, a key added later too until it is listed
// here. node.id stays (the catalog records it), and tls is applied only while
// TLS stays on: turning it on or off changes the listener.
var reloadable = []string{"svc", "roles", "maxUploadSize", "authCacheSize", "authCacheTTL",
	"enableSessionFromHeader", "enableAppendLdapGroups", "node", "auth", "ldap", "nodes", "replication", "tls", "cors"}

// queueKeys are replication keys the job queue takes once, when its workers
// start: they wait for a restart, the rest of replication does not.
var queueKeys = []string{"replication.rescueAfter", "replication.retryBackoff"}

// under reports whether key is prefix or a key below it.
func under(key, prefix string) bool {
	return key == prefix || strings.HasPrefix(key, prefix+".") || strings.HasPrefix(key, prefix+"[")
}

// authenticator builds the session source the configuration describes; it
// accepts the tokens issuer signs, when there is one.
func authenticator(cfg *config.Config, issuer *auth.Issuer, m *metrics.Metrics, log *slog.Logger) (*auth.Authenticator, func(), error) {
	keys, err := auth.LoadTokenKeys(cfg.Auth.TokenKeys)
	if err != nil {
		return nil, nil, fmt.Errorf("auth.tokenKeys: %w", err)
	}
	if issuer != nil {
		keys = append(keys, issuer.PublicKey())
	}
	o := auth.AuthenticatorOptions{TokenKeys: keys, Log: log}
	switch {
	case cfg.TLS.Cert != "" && cfg.TLS.ClientCAs != "":
		if o.ClientCAs, err = clientCAs(cfg.TLS.ClientCAs); err != nil {
			return nil, nil, err
		}
	case cfg.TLS.Cert != "":
		// No client certificates: a connection a reload finds open with one
		// (tls.clientCAs removed) is no longer signed in by it.
		o.ClientCAs = x509.NewCertPool()
	}
	if cfg.EnableSessionFromHeader {
		px := cfg.Auth.Proxy
		p := &auth.ProxyTrust{SubjectHeader: px.SubjectHeader, VerifyHeader: px.VerifyHeader,
			SecretHeader: px.SecretHeader, Secret: px.Secret}
		for _, a := range px.TrustedAddresses {
			n, _ := config.ParseCIDR(a) // validated
			p.Addresses = append(p.Addresses, n)
		}
		o.Proxy = p
	}
	closeAuth := func() {}
	if cfg.EnableAppendLdapGroups {
		l := cfg.LDAP
		dir := auth.NewLDAPDirectory(auth.LDAPOptions{
			URL: l.URL, BindDN: l.BindDN, BindPassword: l.BindPassword,
			UserBaseDN: l.UserBaseDN, UserFilter: l.UserFilter, GroupBaseDN: l.GroupBaseDN, GroupFilter: l.GroupFilter,
			GroupSubject: l.GroupSubject, MemberOf: l.MemberOf, Timeout: l.Timeout, MaxConnections: l.MaxConnections,
			CacheSize: max(cfg.AuthCacheSize, 1000), CacheTTL: l.CacheTTL, Backoff: l.Backoff,
			Observe: m.ObserveLDAPSearch,
		})
		o.Groups, o.FailOnDirectoryError = dir, l.OnError == "fail"
		closeAuth = func() { dir.Close() }
	}
	return auth.NewAuthenticator(o), closeAuth, nil
}

// tlsConfig is nil when d1bridge serves plain HTTP (behind a proxy); with
// tls.clientCAs, client certificates signed by those authorities are credentials.
func tlsConfig(cfg *config.Config) (*tls.Config, error) {
	if cfg.TLS.Cert == "" {
		return nil, nil
	}
	var errs []error
	cert, err := tls.LoadX509KeyPair(cfg.TLS.Cert, cfg.TLS.Key)
	if err != nil {
		errs = append(errs, fmt.Errorf("tls: %w", err))
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLS.ClientCAs != "" {
		pool, err := clientCAs(cfg.TLS.ClientCAs)
		if err != nil {
			errs = append(errs, err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tc, nil
}

// clientCAs reads the authorities whose client certificates are credentials
// (tls.clientCAs): the handshake verifies with them, and so does the
// Authenticator on connections a reload finds open.
func clientCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls.clientCAs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls.clientCAs: no certificate in %s", path)
	}
	return pool, nil
}

// storedGauges export the objects and bytes the catalog holds, read at most
// every 30 s so that a scrape never counts the catalog more often than that.
func storedGauges(reg prometheus.Registerer, n *mappings.Nodes) {
	var (
		mu    sync.Mutex
		at    time.Time
		stats adapter.ObjectStats
	)
	read := func() adapter.ObjectStats {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > 30*time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if st, err := n.Catalog.ObjectStatistics(ctx, adapter.StatsQuery{}); err == nil {
				stats, at = *st, time.Now()
			}
		}
		return stats
	}
	metrics.GaugeFunc(reg, "d1bridge_objects_stored", "Objects in the catalog.", func() float64 { return float64(read().Objects) })
	metrics.GaugeFunc(reg, "d1bridge_bytes_stored", "Bytes of the objects in the catalog.", func() float64 { return float64(read().Bytes) })
}

// dataDirLock is the file in the data directory that running nodes and
// restore lock: a restore under a running node left it answering from caches
// of what was no longer there, and so did a second node on the same embedded
// catalog (SQLite is one process's: nothing tells the other what changed).
const dataDirLock = ".d1bridge.lock"

// lockDataDir takes dir's lock, shared (nodes on a PostgreSQL catalog, which
// replicas share with the directory) or exclusive (a node on the embedded
// catalog, restore), and returns its release. A lock is never waited for:
// one held the other way is an error that says so.
func lockDataDir(dir string, exclusive bool) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, dataDirLock)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("a node or a restore is using the data directory %s (it holds %s)", dir, path)
		}
		return nil, fmt.Errorf("data directory: locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
