// Package config is d1bridge's configuration, applied in layers: Default, then a
// YAML file, then environment overrides (Load), then one validation that reports
// every problem (Validate).
//
// Every key can be overridden from the environment by a variable named
// D1BRIDGE_ plus the key's yaml path, upper-cased and joined with _
// (node.baseURL: D1BRIDGE_NODE_BASEURL), or by NAME_FILE, naming a file whose
// content, less trailing newlines, is the value (for secrets); setting both is
// an error, and an empty variable counts as unset. Booleans are true, false, 1
// or 0; durations use Go syntax (30s, 1m30s); lists are comma-separated, or a
// YAML flow sequence (["CN=a,DC=org", "CN=b,DC=org"]) when items hold commas.
//
// The mapping is derived from the yaml tags, so a field added to Config gets
// its variable without more code; lists of structs, maps and yaml.Node are
// file-only. A custom scalar type should implement encoding.TextUnmarshaler,
// which both the YAML decoder and the environment use.
package config

import (
	"net"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the whole configuration. The yaml names are the keys operators write;
// config/REFERENCE.md, generated from these types and their comments, documents
// each one.
type Config struct {
	// Listen is the address of the main listener, host:port; an empty host
	// (:8080) or 0.0.0.0 listens on every interface.
	Listen string `yaml:"listen"`
	// Svc is the first path segment of every DataONE path (the contract's svc):
	// the member node is served under /SVC/mn, the coordinating node under
	// /SVC/cn.
	Svc string `yaml:"svc"`
	// Roles lists which interfaces are served: mn, cn or both.
	Roles []string `yaml:"roles"`
	// MaxUploadSize is the largest object create and update accept, in bytes
	// (MAX_UPLOAD_SIZE in the DataONE contract); it is enforced while the object streams, and a
	// larger one is refused with InsufficientResources, nothing kept.
	MaxUploadSize int64 `yaml:"maxUploadSize"`
	// AuthCacheSize is the number of authorization decisions kept in memory;
	// 0 disables the cache.
	AuthCacheSize int `yaml:"authCacheSize"`
	// EnableSessionFromHeader accepts a subject forwarded by a trusted front
	// proxy in auth.proxy.subjectHeader, believed only with auth.proxy.secret
	// or from auth.proxy.trustedAddresses.
	EnableSessionFromHeader bool `yaml:"enableSessionFromHeader"`
	// EnableAppendLdapGroups adds the caller's groups, read from the LDAP
	// directory of the ldap section, to its session's subjects.
	EnableAppendLdapGroups bool `yaml:"enableAppendLdapGroups"`
	// ShutdownTimeout bounds the graceful drain on SIGTERM or SIGINT: requests
	// in flight get this long to finish.
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
	// DataDir is the directory of the embedded store: object bytes (objects/,
	// unless store names an upstream) and the SQLite catalog (catalog.db).
	// Replication jobs an earlier version kept there (replication/) are moved
	// into the catalog at start. Each instance needs its own, unless the
	// catalog is on PostgreSQL: a node on the embedded one refuses to start on
	// a directory another node runs on.
	DataDir string `yaml:"dataDir"`
	// ObjectCacheSize is how many bytes of small objects (16 KiB or less) of
	// the embedded store are kept in memory once read twice, outside the Go
	// heap (at least 32 MiB), the oldest out first; 0 keeps none. A get of
	// such an object is then served without opening its file.
	ObjectCacheSize int64 `yaml:"objectCacheSize"`
	// HeapFloor is the Go heap size below which the garbage collector lets
	// the heap grow: each collection's goal is the larger of twice what the
	// last one found live and this, in bytes. The node's live heap is small
	// (its caches are outside the Go heap), so this spares it most
	// collections under load. 0 leaves the runtime's pace (GOGC=100); GOGC
	// in the environment, when set, wins.
	HeapFloor int64 `yaml:"heapFloor"`

	// Node is the node's identity and policy, as its node document declares
	// them.
	Node Node `yaml:"node"`
	// Catalog is the database of system metadata, access policies and the
	// event log.
	Catalog Catalog `yaml:"catalog"`
	// Metrics is where the Prometheus metrics are served.
	Metrics Metrics `yaml:"metrics"`
	// AuthCacheTTL bounds how long an authorization decision is kept; changes made
	// through this instance invalidate at once, others (a shared catalog) after this.
	AuthCacheTTL time.Duration `yaml:"authCacheTTL"`
	// TLS makes d1bridge terminate TLS itself and accept client certificates;
	// without it, d1bridge serves plain HTTP (behind a proxy that terminates
	// TLS).
	TLS TLS `yaml:"tls"`
	// Auth is how bearer tokens are verified and issued, and which front
	// proxy is trusted.
	Auth Auth `yaml:"auth"`
	// LDAP is the directory the caller's groups are read from, with
	// enableAppendLdapGroups.
	LDAP LDAP `yaml:"ldap"`
	// Nodes is the coordinating node's registry of the federation's other nodes:
	// resolve points at them, isNodeAuthorized knows them by their subjects.
	Nodes []RegisteredNode `yaml:"nodes"`
	// Replication is how this member node fetches replicas from the nodes of
	// the registry and reports them to the coordinating node.
	Replication Replication `yaml:"replication"`
	// Upstreams are the existing stores and sources d1bridge fronts, each
	// named, and referred to by its name from store, mapping and identifiers.
	Upstreams []Upstream `yaml:"upstreams"`
	// Store names the upstream (of type s3, webdav or http) that holds object
	// bytes; empty keeps them as files under dataDir.
	Store string `yaml:"store"`
	// Mapping names the upstream (of type dataone) whose mapping serves the
	// member node; empty serves it from the catalog and the store.
	Mapping string `yaml:"mapping"`
	// Identifiers names the upstream (of type datacite) that mints and registers
	// DOIs: publish, publishIdentifier, updateIdMetadata and generate-id's DOI
	// scheme; empty: those answer NotImplemented or InvalidRequest.
	Identifiers string `yaml:"identifiers"`
	// Limits bound connections, headers, stalled bodies and uploads in flight.
	Limits Limits `yaml:"limits"`
	// CORS lets browser clients on other origins call the node; off by default.
	CORS CORS `yaml:"cors"`
	// Log sets the level and format of the node's log.
	Log Log `yaml:"log"`
}

// Upstream is one existing store, reached over HTTP through a client with
// timeouts, retries and a circuit breaker. Its type picks the mapping.
type Upstream struct {
	// Name identifies the upstream in store, mapping, identifiers, logs and
	// metrics; unique.
	Name string `yaml:"name"`
	// Type picks the mapping: s3, webdav, http (a repository's own REST API),
	// dataone (a member node), datacite (DOIs), or a harvest source: files (a
	// directory tree), oaipmh, sitemap, ocfl.
	Type string `yaml:"type"` // s3, webdav, http, dataone, datacite, files, oaipmh, sitemap, ocfl
	// BaseURL is the upstream's absolute http(s) URL; types files and ocfl
	// have none (their directory is in options).
	BaseURL string `yaml:"baseURL"`
	// DialTimeout bounds connecting, HeaderTimeout waiting for the answer's
	// headers; a body streams for as long as it flows.
	DialTimeout time.Duration `yaml:"dialTimeout"`
	// HeaderTimeout bounds the wait for an answer's headers once a request is
	// sent.
	HeaderTimeout time.Duration `yaml:"headerTimeout"`
	// Timeout bounds a whole call that carries no object bytes (metadata, lists).
	Timeout time.Duration `yaml:"timeout"`
	// MaxConns is the most connections open to the upstream at once.
	MaxConns int `yaml:"maxConns"`
	// Retry is how idempotent calls are retried.
	Retry Retry `yaml:"retry"`
	// Breaker is the upstream's circuit breaker.
	Breaker Breaker `yaml:"breaker"`
	// TLS is how d1bridge verifies the upstream and which client certificate
	// it presents to it (mutual TLS).
	TLS UpstreamTLS `yaml:"tls"`
	// Harvest registers the upstream's own holdings in the catalog: as data
	// packages (files grouped into datasets, records of an OAI-PMH endpoint or
	// a sitemap, OCFL objects), or as single objects (type http).
	Harvest Harvest `yaml:"harvest"`
	// Options are the mapping's own settings, which it decodes strictly (an
	// unknown option is an error); their keys depend on type.
	Options yaml.Node `yaml:"options"`
}

// Harvest pages through an upstream's list in the background and registers
// new and changed objects in the catalog. System metadata the upstream does
// not give comes from these defaults; a checksum it does not give is computed
// by reading the object once.
type Harvest struct {
	// Interval between passes; 0 turns harvesting off.
	Interval time.Duration `yaml:"interval"`
	// FullInterval is how often a pass over a dataset source walks
	// everything, so that what the source withdrew is archived (other
	// passes ask only for what changed); 0: 24h.
	FullInterval time.Duration `yaml:"fullInterval"`
	// FormatID, RightsHolder and Submitter fill what the upstream lacks.
	FormatID string `yaml:"formatId"`
	// RightsHolder is the rights holder of harvested objects whose upstream
	// names none; empty: the node's id.
	RightsHolder string `yaml:"rightsHolder"`
	// Submitter is the submitter of harvested objects; empty: the rights
	// holder.
	Submitter string `yaml:"submitter"`
	// Readers are granted read on harvested objects (public makes them open).
	Readers []string `yaml:"readers"`
	// ChecksumAlgorithm is used when the upstream gives no checksum.
	ChecksumAlgorithm string `yaml:"checksumAlgorithm"`
	// LeaseTTL is how long an instance's hold on the upstream's harvest lease
	// lasts without a renewal (renewed every third of it) when instances share
	// the catalog: one that dies in a pass is replaced after about that long.
	// 0: 30s.
	LeaseTTL time.Duration `yaml:"leaseTTL"`
	// Depth groups a file tree (types s3, webdav, files) into datasets: each
	// folder Depth levels below the holdings root is one dataset. 0 (type
	// http) registers each object alone.
	Depth int `yaml:"depth"`
	// PIDPrefix goes before each dataset's identifier in the source to make
	// the identifiers of its package; each dataset source needs its own (an
	// empty one counts), or two sources' datasets of one id would be one
	// package.
	PIDPrefix string `yaml:"pidPrefix"`
	// Publisher and Contact (a name) with ContactEmail fill generated EML
	// where the repository's records say nothing.
	Publisher string `yaml:"publisher"`
	// Contact is the name of the contact in generated EML, where the
	// repository's records name none.
	Contact string `yaml:"contact"`
	// ContactEmail is the contact's e-mail address in generated EML.
	ContactEmail string `yaml:"contactEmail"`
}

// Retry retries idempotent calls (GET, HEAD) before any body byte is read.
type Retry struct {
	// Max is the number of retries after the first attempt; with minBackoff
	// also 0, the defaults apply.
	Max int `yaml:"max"`
	// MinBackoff is the wait before the first retry; it doubles with each
	// retry, jittered into its upper half, and an upstream's Retry-After
	// raises it up to maxBackoff.
	MinBackoff time.Duration `yaml:"minBackoff"`
	// MaxBackoff caps the wait between retries.
	MaxBackoff time.Duration `yaml:"maxBackoff"`
}

// UpstreamTLS configures the TLS client of one upstream.
type UpstreamTLS struct {
	// CA is a PEM file of the certificate authorities trusted for the
	// upstream's server certificate, instead of the system's.
	CA string `yaml:"ca"`
	// Cert and Key are PEM files of the client certificate presented to the
	// upstream; both or neither.
	Cert string `yaml:"cert"`
	// Key is the PEM file of the private key of cert.
	Key string `yaml:"key"`
}

// Breaker opens after Failures consecutive failures (network errors, timeouts,
// 5xx, 429) and lets a trial call through after OpenFor.
type Breaker struct {
	// Failures is the number of consecutive failures (network errors,
	// timeouts, 5xx, 429; not a 404) that open the breaker; while open, calls
	// fail at once with a ServiceFailure naming the upstream.
	Failures uint32 `yaml:"failures"`
	// OpenFor is how long the breaker stays open before it lets a trial call
	// through.
	OpenFor time.Duration `yaml:"openFor"`
}

// Upstream types.
const (
	UpstreamS3      = "s3"
	UpstreamWebDAV  = "webdav"
	UpstreamHTTP    = "http"
	UpstreamDataONE = "dataone"
	// UpstreamDataCite is DataCite's REST API, an identifier service.
	UpstreamDataCite = "datacite"
	// Harvest sources: a local directory tree (no baseURL; options.root), an
	// OAI-PMH endpoint, a sitemap of schema.org Dataset pages, an OCFL
	// storage root (options.root, or options.upstream and prefix).
	UpstreamFiles   = "files"
	UpstreamOAIPMH  = "oaipmh"
	UpstreamSitemap = "sitemap"
	UpstreamOCFL    = "ocfl"
)

// Datasets tells whether the upstream is harvested into data packages.
func (u Upstream) Datasets() bool {
	switch u.Type {
	case UpstreamOAIPMH, UpstreamSitemap, UpstreamOCFL:
		return true
	case UpstreamS3, UpstreamWebDAV, UpstreamFiles:
		return u.Harvest.Depth > 0
	}
	return false
}

// Local tells whether the upstream has no URL of its own: a directory, or
// an OCFL storage root read through a directory or another upstream.
func (u Upstream) Local() bool { return u.Type == UpstreamFiles || u.Type == UpstreamOCFL }

// UpstreamDefaults fills the zero settings of an upstream.
func UpstreamDefaults(u Upstream) Upstream {
	if u.DialTimeout == 0 {
		u.DialTimeout = 5 * time.Second
	}
	if u.HeaderTimeout == 0 {
		u.HeaderTimeout = 30 * time.Second
	}
	if u.Timeout == 0 {
		u.Timeout = time.Minute
	}
	if u.MaxConns == 0 {
		u.MaxConns = 64
	}
	if u.Retry.Max == 0 && u.Retry.MinBackoff == 0 {
		u.Retry = Retry{Max: 2, MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}
	}
	if u.Breaker.Failures == 0 {
		u.Breaker.Failures = 5
	}
	if u.Breaker.OpenFor == 0 {
		u.Breaker.OpenFor = 10 * time.Second
	}
	if u.Harvest.FormatID == "" {
		u.Harvest.FormatID = "application/octet-stream"
	}
	if u.Harvest.ChecksumAlgorithm == "" {
		u.Harvest.ChecksumAlgorithm = "SHA-256"
	}
	return u
}

// RegisteredNode is a member node the CN role knows.
type RegisteredNode struct {
	// ID is the node's DataONE identifier (urn:node:NAME).
	ID string `yaml:"id"`
	// BaseURL is the node's MN base URL (…/mn), without the version.
	BaseURL string `yaml:"baseURL"`
	// Subjects are the node's certificate subjects, by which
	// isNodeAuthorized knows it.
	Subjects []string `yaml:"subjects"`
}

// Replication configures the member node's replicate operation.
type Replication struct {
	// Token is the bearer token this node presents to source nodes when it
	// pulls a replica (use D1BRIDGE_REPLICATION_TOKEN_FILE).
	Token string `yaml:"token"`
	// CNBaseURL is the coordinating node (…/cn) to notify of each replica's
	// outcome; empty: no notification.
	CNBaseURL string `yaml:"cnBaseURL"`
	// MaxAttempts is how many times an accepted replica's copy is tried
	// before the job ends failed (and the CN is told): a failure of the
	// source node or the network is tried again, one the source or the
	// system metadata causes (not found, not authorized, a wrong checksum)
	// is not. A copy cut short by a shutdown does not count.
	MaxAttempts int `yaml:"maxAttempts"`
	// RetryBackoff is the wait before a copy's second attempt; it doubles
	// with every attempt, up to an hour.
	RetryBackoff time.Duration `yaml:"retryBackoff"`
	// RescueAfter is the lease of a running job (a replica's copy, a range of
	// a batch reindex) in the catalog's queue, which every instance sharing
	// the catalog works: the instance running it renews the lease every
	// third of it, and once it has expired (the instance died) another
	// instance, or this one restarted, takes the job over. Long copies keep
	// their lease as long as their instance lives. Applied at start.
	RescueAfter time.Duration `yaml:"rescueAfter"`
}

// TLS makes d1bridge terminate TLS itself, and read client certificates.
type TLS struct {
	// Cert and Key are PEM files of the server certificate; both or neither.
	// They are read again on SIGHUP, so a renewed certificate is served
	// without a restart.
	Cert string `yaml:"cert"`
	// Key is the PEM file of the private key of cert.
	Key string `yaml:"key"`
	// ClientCAs is a PEM file of the authorities whose client certificates are
	// accepted as credentials (DataONE's CILogon and DataONE CAs, say).
	ClientCAs string `yaml:"clientCAs"`
}

// Auth says which credentials establish a session besides client certificates.
type Auth struct {
	// TokenKeys are PEM files (certificates or public keys) whose RSA keys verify
	// bearer tokens (RS256 JWTs issued by the CN).
	TokenKeys []string `yaml:"tokenKeys"`
	// Proxy is the trusted front proxy, used when enableSessionFromHeader is on.
	Proxy Proxy `yaml:"proxy"`
	// SigningKey is a PEM file of an RSA private key: the token operation
	// issues RS256 tokens signed with it, which this node also accepts. Empty:
	// token answers NotImplemented.
	SigningKey string `yaml:"signingKey"`
	// TokenLifetime is how long an issued token is valid.
	TokenLifetime time.Duration `yaml:"tokenLifetime"`
}

// Proxy is a front proxy that terminates TLS and forwards the client's subject.
type Proxy struct {
	// SubjectHeader is the request header that carries the client's subject
	// (its certificate DN).
	SubjectHeader string `yaml:"subjectHeader"`
	// VerifyHeader, when set, is the header that must carry SUCCESS (the
	// proxy verified the client certificate).
	VerifyHeader string `yaml:"verifyHeader"`
	// SecretHeader is the header that carries the shared secret.
	SecretHeader string `yaml:"secretHeader"`
	// Secret is shared with the proxy (use D1BRIDGE_AUTH_PROXY_SECRET_FILE).
	Secret string `yaml:"secret"`
	// TrustedAddresses are the addresses or CIDR ranges the proxy connects
	// from; a forwarded subject from elsewhere is refused. With secret, at
	// least one is required when enableSessionFromHeader is on.
	TrustedAddresses []string `yaml:"trustedAddresses"`
}

// LDAP is the directory enableAppendLdapGroups reads groups from.
type LDAP struct {
	// URL is the directory's ldap:// or ldaps:// URL.
	URL string `yaml:"url"`
	// BindDN is the service account's DN; empty binds anonymously.
	BindDN string `yaml:"bindDN"`
	// BindPassword is the service account's password (a secret: use
	// D1BRIDGE_LDAP_BINDPASSWORD_FILE).
	BindPassword string `yaml:"bindPassword"`
	// UserBaseDN and UserFilter find the caller; {subject} is the session subject,
	// {uid} the value of its first RDN when it is a DN.
	UserBaseDN string `yaml:"userBaseDN"`
	// UserFilter is the search filter that finds the caller's entry under
	// userBaseDN; {subject} and {uid} are replaced, escaped.
	// When it finds several entries, the caller gets the groups of the one
	// whose DN is its subject, or none: {uid} alone cannot tell two people apart.
	UserFilter string `yaml:"userFilter"`
	// GroupBaseDN and GroupFilter find its groups; {dn} is the user's entry DN.
	GroupBaseDN string `yaml:"groupBaseDN"`
	// GroupFilter is the search filter that finds the caller's groups under
	// groupBaseDN; {dn} is the user's entry DN, {uid} and {subject} as in
	// userFilter.
	GroupFilter string `yaml:"groupFilter"`
	// GroupSubject names a group as a subject: dn, or an attribute such as cn.
	GroupSubject string `yaml:"groupSubject"`
	// MemberOf also reads the user entry's memberOf attribute.
	MemberOf bool `yaml:"memberOf"`
	// Timeout bounds dialing and each directory operation.
	Timeout time.Duration `yaml:"timeout"`
	// MaxConnections is the most pooled connections to the directory.
	MaxConnections int `yaml:"maxConnections"`
	// CacheTTL is how long a subject's groups are believed before they are
	// searched again.
	CacheTTL time.Duration `yaml:"cacheTTL"`
	// Backoff is how long a failed directory is left alone.
	Backoff time.Duration `yaml:"backoff"`
	// OnError is degrade (the session goes on without groups) or fail
	// (ServiceFailure).
	OnError string `yaml:"onError"`
}

// Node is the identity the node documents declare.
type Node struct {
	// ID is the DataONE node identifier, such as urn:node:EXAMPLE.
	ID string `yaml:"id"`
	// Name and Description are the human-readable name and summary.
	Name string `yaml:"name"`
	// Description is the node's one-sentence human-readable summary.
	Description string `yaml:"description"`
	// BaseURL is the node's public URL up to and including the svc segment
	// (https://repo.example.org/d1), without the role: the MN base URL is
	// BASEURL/mn and the CN one BASEURL/cn. Empty derives it from listen and
	// svc (http://LISTEN/SVC, a wildcard host shown as localhost), which no
	// other machine can reach: set it on any node others call.
	BaseURL string `yaml:"baseURL"`
	// Subjects are the node's own subjects; they hold every right on its objects.
	Subjects []string `yaml:"subjects"`
	// ContactSubjects are the administrative contacts (at least one).
	ContactSubjects []string `yaml:"contactSubjects"`
	// Administrators may call the node's administrative operations.
	Administrators []string `yaml:"administrators"`
	// CNSubjects are the coordinating nodes' subjects: trusted infrastructure.
	CNSubjects []string `yaml:"cnSubjects"`
	// Submitters may create objects; symbolic subjects such as authenticatedUser work.
	Submitters []string `yaml:"submitters"`
	// Replicate advertises that the node accepts replicas; off, the catalog's
	// member node refuses replicate (InvalidRequest, as GMN does).
	Replicate bool `yaml:"replicate"`
	// ReplicationPolicy limits the replicas accepted; advertised in the node
	// document (nodeReplicationPolicy) and enforced by replicate.
	ReplicationPolicy ReplicationPolicy `yaml:"replicationPolicy"`
	// Synchronize asks coordinating nodes to harvest this node.
	Synchronize bool `yaml:"synchronize"`
	// ClientCert and ClientKey are PEM files of the certificate this node
	// presents as a client to coordinating nodes (register) and other nodes;
	// both or neither.
	ClientCert string `yaml:"clientCert"`
	// ClientKey is the PEM file of the private key of clientCert.
	ClientKey string `yaml:"clientKey"`
}

// ReplicationPolicy is the node's replication policy. Zero sizes and empty
// lists set no limit.
type ReplicationPolicy struct {
	// MaxObjectSize is the largest object accepted as a replica, in bytes.
	MaxObjectSize int64 `yaml:"maxObjectSize"`
	// SpaceAllocated bounds the bytes of all replicas held, with those being
	// copied.
	SpaceAllocated int64 `yaml:"spaceAllocated"`
	// AllowedNodes are the source nodes replicas may come from.
	AllowedNodes []string `yaml:"allowedNodes"`
	// AllowedObjectFormats are the format ids replicas may have.
	AllowedObjectFormats []string `yaml:"allowedObjectFormats"`
}

// Catalog says where system metadata, chains, access policies and the event log live.
type Catalog struct {
	// Driver is sqlite (embedded, under dataDir) or postgres.
	Driver string `yaml:"driver"`
	// DSN is the database address (required for postgres); for sqlite, empty
	// means dataDir/catalog.db. Being a secret, it is best given as
	// D1BRIDGE_CATALOG_DSN_FILE.
	DSN string `yaml:"dsn"`
	// CacheSize is SQLite's page cache per connection, in bytes (sqlite only).
	CacheSize int64 `yaml:"cacheSize"`
	// MmapSize is how much of the SQLite file is read through a memory map, in
	// bytes (sqlite only; 0: none; SQLite caps it near 2 GiB). A map costs
	// address space, not memory, and its reads make no system calls.
	MmapSize int64 `yaml:"mmapSize"`
	// RecordCacheSize is how many bytes of records (system metadata, checksums,
	// where the bytes are) are kept in memory, compact, once read or created,
	// most recent first, so that reading them again skips the database (sqlite only; 0:
	// none; in steps of 32 MiB; a record takes about 600 bytes).
	RecordCacheSize int64 `yaml:"recordCacheSize"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen, when set, serves metrics on its own listener instead of the main
	// one; it must differ from the main listen address.
	Listen string `yaml:"listen"`
	// Path is where metrics are served; it starts with /. On the main listener
	// it is none of /, /healthz and /readyz.
	Path string `yaml:"path"`
}

// Role names.
const (
	RoleMN = "mn"
	RoleCN = "cn"
)

// Catalog drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// HasRole reports whether role is served.
func (c *Config) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// BaseURL is the node's public URL up to and including the svc segment, with no
// trailing slash: node.baseURL when set, otherwise http://LISTEN/SVC, where a
// wildcard listen host ("", 0.0.0.0, ::) is shown as localhost. The MN base URL
// is BaseURL()+"/mn", the CN one BaseURL()+"/cn".
func (c *Config) BaseURL() string {
	if c.Node.BaseURL != "" {
		return strings.TrimRight(c.Node.BaseURL, "/")
	}
	hostPort := c.Listen
	if host, port, err := net.SplitHostPort(c.Listen); err == nil {
		if isWildcard(host) {
			host = "localhost"
		}
		hostPort = net.JoinHostPort(host, port)
	}
	return "http://" + hostPort + "/" + c.Svc
}

// Default is the configuration with no file and no environment: a complete MN and
// CN on the embedded store in ./data.
func Default() *Config {
	return &Config{
		Listen:          "127.0.0.1:8080",
		Svc:             "d1",
		Roles:           []string{RoleMN, RoleCN},
		MaxUploadSize:   1_000_000_000,
		AuthCacheSize:   10_000,
		ShutdownTimeout: 30 * time.Second,
		DataDir:         "./data",
		ObjectCacheSize: 32 << 20,
		HeapFloor:       64 << 20,
		Node: Node{
			ID:              "urn:node:d1bridge",
			Name:            "d1bridge",
			Description:     "A DataONE member and coordinating node served by d1bridge",
			ContactSubjects: []string{"CN=d1bridge administrator,DC=dataone,DC=org"},
			Submitters:      []string{"authenticatedUser"},
			Synchronize:     true,
		},
		Catalog:      Catalog{Driver: DriverSQLite, CacheSize: 8 << 20, MmapSize: 2 << 30, RecordCacheSize: 64 << 20},
		Replication:  Replication{MaxAttempts: 5, RetryBackoff: 30 * time.Second, RescueAfter: 2 * time.Minute},
		Metrics:      Metrics{Path: "/metrics"},
		AuthCacheTTL: time.Minute,
		Auth: Auth{Proxy: Proxy{
			SubjectHeader: "Ssl-Client-Subject-Dn", VerifyHeader: "Ssl-Client-Verify", SecretHeader: "X-Proxy-Key",
		}, TokenLifetime: 18 * time.Hour},
		LDAP: LDAP{
			UserFilter:   "(uid={uid})",
			GroupFilter:  "(|(&(objectClass=groupOfNames)(member={dn}))(&(objectClass=posixGroup)(memberUid={uid})))",
			GroupSubject: "dn", Timeout: 3 * time.Second, MaxConnections: 4, CacheTTL: 5 * time.Minute,
			Backoff: 10 * time.Second, OnError: "degrade",
		},
		Limits: DefaultLimits(),
		CORS:   DefaultCORS(),
		Log:    DefaultLog(),
	}
}
