// Package config is d1bridge's configuration: defaults, then a YAML file, then
// environment overrides, then one validation that reports every problem.
package config

import "time"

// Config is the whole configuration. The yaml names are the keys operators write;
// the README documents each one.
type Config struct {
	// Listen is the address of the main listener.
	Listen string `yaml:"listen"`
	// Svc is the first path segment of every DataONE path (the seed's svc).
	Svc string `yaml:"svc"`
	// Roles lists which interfaces are served: mn, cn or both.
	Roles []string `yaml:"roles"`
	// MaxUploadSize is the seed's MAX_UPLOAD_SIZE: the largest object create and
	// update accept, in bytes.
	MaxUploadSize int64 `yaml:"maxUploadSize"`
	// AuthCacheSize is the number of authorization decisions kept (the seed's authCacheSize).
	AuthCacheSize int `yaml:"authCacheSize"`
	// EnableSessionFromHeader accepts a subject forwarded by a trusted front proxy.
	EnableSessionFromHeader bool `yaml:"enableSessionFromHeader"`
	// EnableAppendLdapGroups adds the caller's directory groups to its subjects.
	EnableAppendLdapGroups bool `yaml:"enableAppendLdapGroups"`
	// ShutdownTimeout bounds the graceful drain on SIGTERM or SIGINT.
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
	// DataDir holds the embedded store: object bytes and the catalog database.
	DataDir string `yaml:"dataDir"`

	Node    Node    `yaml:"node"`
	Catalog Catalog `yaml:"catalog"`
	Metrics Metrics `yaml:"metrics"`
}

// Node is the identity the node documents declare.
type Node struct {
	ID          string `yaml:"id"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// BaseURL is the node's public base URL, up to and including the svc segment
	// and the role (…/d1/mn); empty derives it from the listen address.
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
	// Replicate advertises that the node accepts replicas.
	Replicate bool `yaml:"replicate"`
	// Synchronize asks coordinating nodes to harvest this node.
	Synchronize bool `yaml:"synchronize"`
}

// Catalog says where system metadata, chains, access policies and the event log live.
type Catalog struct {
	// Driver is sqlite (embedded, under dataDir) or postgres.
	Driver string `yaml:"driver"`
	// DSN is the database address; for sqlite, empty means dataDir/catalog.db.
	DSN string `yaml:"dsn"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen, when set, serves /metrics on its own listener instead of the main one.
	Listen string `yaml:"listen"`
	// Path is where metrics are served.
	Path string `yaml:"path"`
}

// Role names.
const (
	RoleMN = "mn"
	RoleCN = "cn"
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
		Node: Node{
			ID:              "urn:node:d1bridge",
			Name:            "d1bridge",
			Description:     "A DataONE member and coordinating node served by d1bridge",
			ContactSubjects: []string{"CN=d1bridge administrator,DC=dataone,DC=org"},
			Submitters:      []string{"authenticatedUser"},
			Synchronize:     true,
		},
		Catalog: Catalog{Driver: "sqlite"},
		Metrics: Metrics{Path: "/metrics"},
	}
}
