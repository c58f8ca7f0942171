package config

import (
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		errs   []string // empty: valid
	}{
		{"default", func(*Config) {}, nil},
		{"listen on every interface", func(c *Config) { c.Listen = ":8080" }, nil},
		{"listen on IPv6", func(c *Config) { c.Listen = "[::1]:8080" }, nil},
		{"listen on a name and port 0", func(c *Config) { c.Listen = "localhost:0" }, nil},
		{"listen without port", func(c *Config) { c.Listen = "127.0.0.1" }, []string{`listen: "127.0.0.1" is not a host:port address`}},
		{"listen with a URL", func(c *Config) { c.Listen = "http://localhost:8080" }, []string{`listen: "http://localhost:8080" is not`}},
		{"listen with a named port", func(c *Config) { c.Listen = "localhost:http" }, []string{`listen: "localhost:http" is not`}},
		{"listen port too large", func(c *Config) { c.Listen = ":65536" }, []string{`listen: ":65536" is not`}},
		{"svc with URL-safe punctuation", func(c *Config) { c.Svc = "d1-v2.x_y~z" }, nil},
		{"svc empty", func(c *Config) { c.Svc = "" }, []string{"svc: required"}},
		{"svc with a slash", func(c *Config) { c.Svc = "/d1" }, []string{`svc: "/d1" is not one path segment`}},
		{"svc with a space", func(c *Config) { c.Svc = "d 1" }, []string{`svc: "d 1" is not one path segment`}},
		{"svc dot-dot", func(c *Config) { c.Svc = ".." }, []string{`svc: ".." is not one path segment`}},
		{"roles cn only", func(c *Config) { c.Roles = []string{"cn"} }, nil},
		{"roles empty", func(c *Config) { c.Roles = nil }, []string{"roles: at least one of mn or cn is required"}},
		{"roles wrong case", func(c *Config) { c.Roles = []string{"MN"} }, []string{`roles[0]: "MN" is not mn or cn`}},
		{"roles duplicate", func(c *Config) { c.Roles = []string{"cn", "cn"} }, []string{`roles[1]: "cn" is listed twice`}},
		{"maxUploadSize negative", func(c *Config) { c.MaxUploadSize = -1 }, []string{"maxUploadSize: must be greater than 0, got -1"}},
		{"authCacheSize 0 disables", func(c *Config) { c.AuthCacheSize = 0 }, nil},
		{"authCacheSize negative", func(c *Config) { c.AuthCacheSize = -5 }, []string{"authCacheSize: must be 0 (no cache) or more, got -5"}},
		{"shutdownTimeout negative", func(c *Config) { c.ShutdownTimeout = -time.Second }, []string{"shutdownTimeout: must be greater than 0, got -1s"}},
		{"sqlite without dataDir", func(c *Config) { c.DataDir = "" }, []string{"dataDir: required when catalog.driver is sqlite"}},
		{"postgres without dataDir", func(c *Config) {
			c.DataDir, c.Catalog = "", Catalog{Driver: "postgres", DSN: "postgres://db/x"}
		}, nil},
		{"postgres without dsn", func(c *Config) { c.Catalog.Driver = "postgres" }, []string{"catalog.dsn: required when catalog.driver is postgres"}},
		{"driver empty", func(c *Config) { c.Catalog.Driver = "" }, []string{"catalog.driver: required: sqlite or postgres"}},
		{"driver unknown", func(c *Config) { c.Catalog.Driver = "SQLite" }, []string{`catalog.driver: "SQLite" is not sqlite or postgres`}},
		{"log text at debug", func(c *Config) { c.Log = Log{Level: "debug", Format: "text"} }, nil},
		{"log level and format unknown", func(c *Config) { c.Log = Log{Level: "verbose", Format: "xml"} },
			[]string{`log.level: "verbose" is not debug, info, warn or error`, `log.format: "xml" is not json or text`}},
		{"node client certificate without key", func(c *Config) { c.Node.ClientCert = "/etc/node.crt" },
			[]string{"node.clientCert: node.clientCert and node.clientKey go together"}},
		{"upstream client key without certificate", func(c *Config) {
			c.Upstreams = []Upstream{{Name: "gmn", Type: "dataone", BaseURL: "https://gmn.example.org/mn", TLS: UpstreamTLS{Key: "/k.pem"}}}
		}, []string{"upstreams[0].tls: cert and key go together"}},
		{"dataset sources with one pidPrefix", func(c *Config) {
			c.Upstreams = []Upstream{
				{Name: "tree", Type: UpstreamFiles, Harvest: Harvest{Depth: 1}},
				{Name: "oai", Type: UpstreamOAIPMH, BaseURL: "https://repo.example.org/oai"},
				{Name: "bucket", Type: UpstreamS3, BaseURL: "https://s3.example.org", Harvest: Harvest{Depth: 1, PIDPrefix: "b:"}},
				{Name: "flat", Type: UpstreamS3, BaseURL: "https://s3.example.org"}, // not a dataset source
			}
		}, []string{`upstreams[1].harvest.pidPrefix: "" is also the pidPrefix of upstreams[0], another dataset source`}},
		{"node.id empty", func(c *Config) { c.Node.ID = "" }, []string{"node.id: required"}},
		{"node.id with a tab", func(c *Config) { c.Node.ID = "urn:node:a\tb" }, []string{`node.id: "urn:node:a\tb" contains whitespace`}},
		{"node.name blank", func(c *Config) { c.Node.Name = " " }, []string{"node.name: required"}},
		{"node.description empty", func(c *Config) { c.Node.Description = "" }, []string{"node.description: required"}},
		{"baseURL https with path", func(c *Config) { c.Node.BaseURL = "https://repo.example.org/d1/" }, nil},
		{"baseURL http with port", func(c *Config) { c.Node.BaseURL = "http://localhost:8080/d1" }, nil},
		{"baseURL relative", func(c *Config) { c.Node.BaseURL = "repo.example.org/d1" }, []string{`node.baseURL: "repo.example.org/d1" is not an absolute http or https URL`}},
		{"baseURL no host", func(c *Config) { c.Node.BaseURL = "https:///d1" }, []string{`node.baseURL: "https:///d1" is not an absolute`}},
		{"baseURL unparsable", func(c *Config) { c.Node.BaseURL = "http://[::1/d1" }, []string{`node.baseURL: "http://[::1/d1" is not an absolute`}},
		{"baseURL with fragment", func(c *Config) { c.Node.BaseURL = "https://x.org/d1#top" }, []string{`node.baseURL: "https://x.org/d1#top" must not have a query or a fragment`}},
		{"baseURL with empty query", func(c *Config) { c.Node.BaseURL = "https://x.org/d1?" }, []string{`must not have a query or a fragment`}},
		{"baseURL with empty fragment", func(c *Config) { c.Node.BaseURL = "https://x.org/d1#" }, []string{`must not have a query or a fragment`}},
		{"contactSubjects empty", func(c *Config) { c.Node.ContactSubjects = nil }, []string{"node.contactSubjects: at least one subject is required"}},
		{"contactSubjects with a blank entry", func(c *Config) { c.Node.ContactSubjects = append(c.Node.ContactSubjects, " ") }, []string{"node.contactSubjects[1]: empty subject"}},
		{"every subject list", func(c *Config) {
			c.Node.Subjects = []string{""}
			c.Node.Administrators = []string{"a", ""}
			c.Node.CNSubjects = []string{"x "}
			c.Node.Submitters = []string{""}
		}, []string{
			"node.subjects[0]: empty subject",
			"node.administrators[1]: empty subject",
			`node.cnSubjects[0]: "x " has leading or trailing whitespace`,
			"node.submitters[0]: empty subject",
		}},
		{"metrics.path relative", func(c *Config) { c.Metrics.Path = "metrics" }, []string{`metrics.path: "metrics" does not start with /`}},
		{"metrics.path empty", func(c *Config) { c.Metrics.Path = "" }, []string{`metrics.path: "" does not start with /`}},
		{"metrics.path under svc", func(c *Config) { c.Metrics.Path = "/d1" }, []string{`metrics.path: "/d1" is under the DataONE prefix /d1 on the main listener`}},
		{"metrics.path beside svc", func(c *Config) { c.Metrics.Path = "/d1metrics" }, nil},
		// The probes and the status page share the metrics' table of paths:
		// /readyz answered the metrics, ready whatever the upstreams.
		{"metrics.path is /readyz", func(c *Config) { c.Metrics.Path = "/readyz" }, []string{`metrics.path: "/readyz" is a probe or the status page on the main listener`}},
		{"metrics.path is /healthz", func(c *Config) { c.Metrics.Path = "/healthz" }, []string{`metrics.path: "/healthz" is a probe`}},
		{"metrics.path is /", func(c *Config) { c.Metrics.Path = "/" }, []string{`metrics.path: "/" is a probe`}},
		{"metrics.path /readyz on its own listener", func(c *Config) { c.Metrics.Path, c.Metrics.Listen = "/readyz", "127.0.0.1:9100" }, nil},
		{"metrics.path under svc on its own listener", func(c *Config) {
			c.Metrics = Metrics{Listen: "127.0.0.1:9090", Path: "/d1/metrics"}
		}, nil},
		{"metrics.listen on another port", func(c *Config) { c.Metrics.Listen = "127.0.0.1:9090" }, nil},
		{"metrics.listen same port, other host", func(c *Config) { c.Metrics.Listen = "10.0.0.1:8080" }, nil},
		{"metrics.listen both port 0", func(c *Config) { c.Listen, c.Metrics.Listen = "127.0.0.1:0", "127.0.0.1:0" }, nil},
		{"metrics.listen equal to listen", func(c *Config) { c.Metrics.Listen = c.Listen }, []string{`metrics.listen: "127.0.0.1:8080" is the same address as listen`}},
		{"metrics.listen wildcard on listen's port", func(c *Config) { c.Metrics.Listen = "[::]:8080" }, []string{`metrics.listen: "[::]:8080" is the same address as listen`}},
		{"metrics.listen not host:port", func(c *Config) { c.Metrics.Listen = "9090" }, []string{`metrics.listen: "9090" is not a host:port address`}},
		{"many problems at once", func(c *Config) {
			c.Listen, c.Svc, c.Roles, c.MaxUploadSize = "", "", nil, 0
			c.Node = Node{}
			c.Catalog.Driver = "postgres"
			c.Metrics = Metrics{}
		}, []string{
			`listen: "" is not a host:port address`,
			"svc: required",
			"roles: at least one",
			"maxUploadSize: must be greater than 0",
			"catalog.dsn: required",
			"node.id: required",
			"node.name: required",
			"node.description: required",
			"node.contactSubjects: at least one subject is required",
			`metrics.path: "" does not start with /`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tc.change(c)
			checkErrors(t, c.Validate(), tc.errs)
		})
	}
}

func TestBaseURL(t *testing.T) {
	tests := []struct {
		name    string
		listen  string
		svc     string
		baseURL string
		want    string
	}{
		{"default", "127.0.0.1:8080", "d1", "", "http://127.0.0.1:8080/d1"},
		{"empty host", ":8080", "d1", "", "http://localhost:8080/d1"},
		{"IPv4 wildcard", "0.0.0.0:8080", "d1", "", "http://localhost:8080/d1"},
		{"IPv6 wildcard", "[::]:8080", "dataone", "", "http://localhost:8080/dataone"},
		{"IPv6 loopback", "[::1]:8080", "d1", "", "http://[::1]:8080/d1"},
		{"host name", "repo.internal:80", "d1", "", "http://repo.internal:80/d1"},
		{"configured", ":8080", "d1", "https://repo.example.org/d1", "https://repo.example.org/d1"},
		{"configured with trailing slashes", ":8080", "d1", "https://repo.example.org/d1//", "https://repo.example.org/d1"},
		{"configured other path", ":8080", "d1", "https://repo.example.org/dataone/", "https://repo.example.org/dataone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			c.Listen, c.Svc, c.Node.BaseURL = tc.listen, tc.svc, tc.baseURL
			if got := c.BaseURL(); got != tc.want {
				t.Errorf("BaseURL() = %q, want %q", got, tc.want)
			}
		})
	}
}
