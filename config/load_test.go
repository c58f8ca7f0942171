package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"go.yaml.in/yaml/v3"
)

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// loadAndValidate is what the binary does: Load, then Validate.
func loadAndValidate(path string, getenv func(string) string) (*Config, error) {
	c, err := Load(path, getenv)
	if err != nil {
		return nil, err
	}
	return c, c.Validate()
}

// problemCount is the number of problems an error reports: the number of errors
// joined in it, or 1.
func problemCount(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// checkErrors fails unless err reports exactly the problems in want, each
// matched by a substring.
func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error:\n%v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q; got:\n%v", w, err)
		}
	}
	if n := problemCount(err); n != len(want) {
		t.Errorf("error reports %d problems, want %d; got:\n%v", n, len(want), err)
	}
}

func TestDefaultValidates(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate():\n%v", err)
	}
}

func TestLoadNoFileIsDefault(t *testing.T) {
	c, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("Load(\"\", nil) = %+v, want Default()", c)
	}
}

func TestLoadGoodFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d good files, want at least minimal and full", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			if _, err := loadAndValidate(f, noEnv); err != nil {
				t.Fatalf("%v", err)
			}
		})
	}
}

func TestLoadMinimalKeepsDefaults(t *testing.T) {
	c, err := Load("testdata/minimal.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Node.ID = "urn:node:EXAMPLE"
	want.Node.Name = "Example Repository"
	want.Node.Description = "Research data from the Example Institute"
	// A list in the file replaces the default list; it does not extend it.
	want.Node.ContactSubjects = []string{"CN=Jane Admin,O=Example Institute,C=US,DC=cilogon,DC=org"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestLoadFull(t *testing.T) {
	c, err := Load("testdata/full.good.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	admin := "CN=Jane Admin,O=Example Institute,C=US,DC=cilogon,DC=org"
	want := &Config{
		Listen:                  "0.0.0.0:9443",
		Svc:                     "dataone",
		Roles:                   []string{"mn"},
		MaxUploadSize:           5368709120,
		AuthCacheSize:           0,
		EnableSessionFromHeader: true,
		EnableAppendLdapGroups:  true,
		ShutdownTimeout:         90 * time.Second,
		DataDir:                 "/var/lib/d1bridge",
		ObjectCacheSize:         0,
		HeapFloor:               128 << 20,
		Node: Node{
			ID:              "urn:node:EXAMPLE",
			Name:            "Example Repository",
			Description:     "Research data from the Example Institute",
			BaseURL:         "https://repo.example.org/dataone/",
			Subjects:        []string{"CN=urn:node:EXAMPLE,DC=dataone,DC=org"},
			ContactSubjects: []string{admin, "http://orcid.org/0000-0002-1825-0097"},
			Administrators:  []string{admin},
			CNSubjects:      []string{"CN=urn:node:CN,DC=dataone,DC=org"},
			Submitters:      []string{"CN=example-submitters,DC=dataone,DC=org"},
			Replicate:       true,
			ReplicationPolicy: ReplicationPolicy{MaxObjectSize: 1 << 30, SpaceAllocated: 10 << 40,
				AllowedNodes:         []string{"urn:node:OTHER", "urn:node:THIRD"},
				AllowedObjectFormats: []string{"text/csv", "eml://ecoinformatics.org/eml-2.1.1"}},
			Synchronize: false,
			ClientCert:  "/etc/d1bridge/node-client.crt", ClientKey: "/etc/d1bridge/node-client.key",
		},
		Catalog: Catalog{Driver: "postgres", DSN: "postgres://d1bridge@db.example.org/d1bridge?sslmode=verify-full",
			CacheSize: 16 << 20, MmapSize: 1 << 30, RecordCacheSize: 256 << 20},
		Metrics:      Metrics{Listen: "127.0.0.1:9090", Path: "/internal/metrics"},
		AuthCacheTTL: 2 * time.Minute,
		TLS:          TLS{Cert: "/etc/d1bridge/server.crt", Key: "/etc/d1bridge/server.key", ClientCAs: "/etc/d1bridge/client-cas.pem"},
		Auth: Auth{TokenKeys: []string{"/etc/d1bridge/cn.crt"}, Proxy: Proxy{
			SubjectHeader: "X-Client-Dn", VerifyHeader: "X-Client-Verify", SecretHeader: "X-Shared-Secret",
			Secret: "s3cret", TrustedAddresses: []string{"10.0.0.0/8", "192.0.2.7"},
		}, SigningKey: "/etc/d1bridge/token-signing.key", TokenLifetime: 8 * time.Hour},
		LDAP: LDAP{
			URL: "ldaps://ldap.example.org", BindDN: "cn=d1bridge,ou=services,dc=example,dc=org", BindPassword: "hunter2",
			UserBaseDN: "ou=People,dc=example,dc=org", UserFilter: "(mail={subject})",
			GroupBaseDN: "ou=Groups,dc=example,dc=org", GroupFilter: "(member={dn})", GroupSubject: "cn",
			MemberOf: true, Timeout: time.Second, MaxConnections: 8, CacheTTL: 10 * time.Minute,
			Backoff: 30 * time.Second, OnError: "fail",
		},
		Nodes: []RegisteredNode{{ID: "urn:node:OTHER", BaseURL: "https://other.example.org/d1/mn",
			Subjects: []string{"CN=urn:node:OTHER,DC=dataone,DC=org"}}},
		Replication: Replication{Token: "eyJhbGciOiJSUzI1NiJ9.replica.token", CNBaseURL: "https://cn.example.org/cn",
			MaxAttempts: 8, RetryBackoff: time.Minute, RescueAfter: 5 * time.Minute},
		Upstreams: []Upstream{{Name: "bucket", Type: "s3", BaseURL: "https://s3.example.org", DialTimeout: 2 * time.Second,
			HeaderTimeout: 20 * time.Second, Timeout: 45 * time.Second, MaxConns: 32,
			Retry:   Retry{Max: 3, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
			Breaker: Breaker{Failures: 7, OpenFor: 20 * time.Second}},
			{Name: "metacat", Type: "dataone", BaseURL: "https://metacat.example.org/metacat/d1/mn", TLS: UpstreamTLS{
				CA: "/etc/d1bridge/metacat-ca.pem", Cert: "/etc/d1bridge/node-client.crt", Key: "/etc/d1bridge/node-client.key"}},
			{Name: "legacy", Type: "http", BaseURL: "https://legacy.example.org/api", Harvest: Harvest{
				Interval: 15 * time.Minute, FormatID: "text/csv", RightsHolder: admin,
				Submitter: "CN=urn:node:EXAMPLE,DC=dataone,DC=org", Readers: []string{"public"}, ChecksumAlgorithm: "MD5", LeaseTTL: 45 * time.Second}},
			{Name: "archive", Type: "files", Harvest: Harvest{Interval: time.Hour, FullInterval: 12 * time.Hour, Depth: 2, PIDPrefix: "archive:",
				Publisher: "Example Institute", Contact: "Data Manager", ContactEmail: "data@example.org"}},
			{Name: "doi", Type: "datacite", BaseURL: "https://api.test.datacite.org"}},
		Store:       "bucket",
		Mapping:     "metacat",
		Identifiers: "doi",
		Limits: Limits{IdleTimeout: 45 * time.Second, MaxHeaderBytes: 32 << 10, BodyStallTimeout: 2 * time.Minute,
			MaxUploads: 16, MaxUploadsPerClient: 4},
		CORS: CORS{AllowedOrigins: []string{"https://search.example.org", "https://portal.example.org:8443"},
			AllowedMethods: []string{"GET", "HEAD", "POST"}, AllowedHeaders: []string{"Authorization", "Content-Type"},
			ExposedHeaders: []string{"X-Request-Id", "DataONE-Checksum"}, AllowCredentials: true, MaxAge: time.Hour},
		Log: Log{Level: "debug", Format: "text"},
	}
	// Options stay raw YAML for the mapping to decode; compare their content.
	if len(c.Upstreams) == 5 {
		var opts map[string]string
		if err := c.Upstreams[0].Options.Decode(&opts); err != nil || opts["bucket"] != "d1bridge" || opts["region"] != "us-east-1" {
			t.Errorf("upstream options: %v %v", opts, err)
		}
		if err := c.Upstreams[3].Options.Decode(&opts); err != nil || opts["root"] != "/srv/archive" {
			t.Errorf("files upstream options: %v %v", opts, err)
		}
		want.Upstreams[0].Options = c.Upstreams[0].Options
		want.Upstreams[3].Options = c.Upstreams[3].Options
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if got, want := c.BaseURL(), "https://repo.example.org/dataone"; got != want {
		t.Errorf("BaseURL() = %q, want %q", got, want)
	}
}

// TestFullCoversEveryKey keeps full.good.yaml complete: a key added to Config
// must be added there too.
func TestFullCoversEveryKey(t *testing.T) {
	data, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	inFile := map[string]bool{}
	var walkDoc func(n *yaml.Node, key string)
	walkDoc = func(n *yaml.Node, key string) {
		inFile[key] = true
		switch n.Kind {
		case yaml.DocumentNode:
			walkDoc(n.Content[0], key)
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walkDoc(n.Content[i+1], strings.TrimPrefix(key+"."+n.Content[i].Value, "."))
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walkDoc(c, key+"[]")
			}
		}
	}
	walkDoc(&root, "")

	for _, key := range KeyPaths() {
		if !inFile[key] {
			t.Errorf("testdata/full.good.yaml does not set %s", key)
		}
	}
}

func TestLoadBadFiles(t *testing.T) {
	// Each bad file with the problems it must report, all of them at once.
	type badFile struct {
		file string
		errs []string
	}
	expectedErrors := []badFile{
		{
			file: "upstreams.bad.yaml",
			errs: []string{
				`upstreams[0].type: "ftp" is not s3, webdav, http, dataone, datacite, files, oaipmh, sitemap or ocfl`,
				`upstreams[0].baseURL: "ftp://files.example.org" is not an absolute http(s) URL`,
				`upstreams[1].name: "a" is also the name of upstreams[0]`,
				`upstreams[1].timeout: must not be negative, got -1s`,
				`store: upstream "a" is of type ftp; object bytes can be kept on s3, webdav or http`,
				`upstreams[2].harvest.depth: must not be negative, got -1`,
				`upstreams[3].harvest.depth: a files upstream is harvested as datasets: set depth (1: each top folder is a dataset)`,
				`upstreams[3].baseURL: an upstream of type files is a directory (options.root), not a URL`,
				`upstreams[4].harvest.interval: must not be negative, got -1m0s`,
				`mapping: upstream "legacy" is of type http; a mapping serves the node from a dataone upstream`,
				`identifiers: upstream "bucket" is of type s3; identifiers are minted by a datacite upstream`,
				`auth.tokenLifetime: must be greater than 0, got -1h0m0s`,
			},
		},
		{
			file: "auth.bad.yaml",
			errs: []string{
				`authCacheTTL: must be greater than 0, got 0s`,
				`tls: cert and key go together`,
				`auth.proxy.trustedAddresses[0]: "10.0.0.300" is not an IP address or CIDR range`,
				`ldap.url: an ldap:// or ldaps:// URL is required`,
				`ldap.groupFilter: required unless ldap.memberOf is on`,
				`ldap.userBaseDN: required when enableAppendLdapGroups is on`,
				`ldap.maxConnections: must be at least 1, got 0`,
				`ldap.onError: must be degrade or fail, got "panic"`,
			},
		},
		{
			file: "values.bad.yaml",
			errs: []string{
				`listen: "localhost" is not a host:port address`,
				`svc: "d1/v2" is not one path segment`,
				`roles[1]: "xn" is not mn or cn`,
				`roles[2]: "mn" is listed twice`,
				`maxUploadSize: must be greater than 0, got 0`,
				`authCacheSize: must be 0 (no cache) or more, got -1`,
				`objectCacheSize: must be 0 (no cache) or more, got -5`,
				`heapFloor: must be 0 (the runtime's pace) or more, got -1`,
				`shutdownTimeout: must be greater than 0, got 0s`,
				`node.id: "urn:node:my repo" contains whitespace`,
				`node.name: required`,
				`node.description: required`,
				`node.baseURL: "ftp://repo.example.org/d1" is not an absolute http or https URL`,
				`node.contactSubjects[0]: empty subject`,
				`node.submitters[1]: " public" has leading or trailing whitespace`,
				`node.replicationPolicy.maxObjectSize: must be 0 (no limit) or more, got -1`,
				`node.replicationPolicy.spaceAllocated: must be 0 (no limit) or more, got -10`,
				`node.replicationPolicy.allowedNodes[1]: "" is empty or contains whitespace`,
				`node.replicationPolicy.allowedObjectFormats[0]: "text/ csv" is empty or contains whitespace`,
				`metrics.path: "metrics" does not start with /`,
				`limits.idleTimeout: must be greater than 0, got 0s`,
				`limits.maxHeaderBytes: must be at least 4096, got 100`,
				`limits.bodyStallTimeout: must be greater than 0, got -1s`,
				`limits.maxUploadsPerClient: must be at most limits.maxUploads (2), got 3`,
			},
		},
		{
			file: "cors.bad.yaml",
			errs: []string{
				`cors.allowedOrigins[0]: "*" cannot go with cors.allowCredentials: name the origins`,
				`cors.allowedOrigins[1]: "https://portal.example.org/search" is not an origin (scheme://host[:port]) or *`,
				`cors.allowedOrigins[2]: "ftp://files.example.org" is not an origin (scheme://host[:port]) or *`,
				`cors.allowedMethods[1]: "patch" is not an upper-case HTTP method`,
				`cors.allowedHeaders[0]: "Content Type" is not a header name`,
				`cors.exposedHeaders[0]: "X:Request" is not a header name`,
				`cors.maxAge: must not be negative, got -1s`,
			},
		},
		{
			file: "catalog.bad.yaml",
			errs: []string{
				`svc: required`,
				`roles: at least one of mn or cn is required`,
				`catalog.dsn: required when catalog.driver is postgres`,
				`catalog: cacheSize, mmapSize and recordCacheSize must not be negative, got 8388608, 2147483648 and -1`,
				`node.id: required`,
				`node.baseURL: "https://repo.example.org/d1?x=1" must not have a query or a fragment`,
				`node.contactSubjects: at least one subject is required`,
				`replication.maxAttempts: must be at least 1, got 0`,
				`replication.retryBackoff: must be greater than 0, got -1s`,
				`replication.rescueAfter: must be at least 3s (the lease is renewed every third of it), got 1s`,
				`metrics.listen: "0.0.0.0:8080" is the same address as listen`,
			},
		},
		{
			file: "driver.bad.yaml",
			errs: []string{
				`catalog.driver: "mysql" is not sqlite or postgres`,
				`node.baseURL: "/d1" is not an absolute http or https URL`,
				`metrics.listen: "nowhere" is not a host:port address`,
			},
		},
		{
			file: "sqlite.bad.yaml",
			errs: []string{
				`dataDir: required when catalog.driver is sqlite`,
				`metrics.path: "/d1/metrics" is under the DataONE prefix /d1`,
			},
		},
		{
			file: "unknown.bad.yaml",
			errs: []string{
				`testdata/unknown.bad.yaml:2: unknown key colour`,
				`testdata/unknown.bad.yaml:5: unknown key node.sbmitters; did you mean node.submitters?`,
				`testdata/unknown.bad.yaml:6: unknown key node.baseurl; did you mean node.baseURL?`,
			},
		},
		{
			file: "types.bad.yaml",
			errs: []string{
				"testdata/types.bad.yaml:1: maxUploadSize: cannot unmarshal !!str `lots`",
				"testdata/types.bad.yaml:2: shutdownTimeout: cannot unmarshal !!int `30` into time.Duration",
				"testdata/types.bad.yaml:3: roles: cannot unmarshal !!str `mn`",
				"testdata/types.bad.yaml:5: node.replicate: cannot unmarshal !!str `maybe`",
			},
		},
		{
			file: "duplicate.bad.yaml",
			errs: []string{`testdata/duplicate.bad.yaml:3: listen: mapping key "listen" already defined at line 1`},
		},
		{
			file: "syntax.bad.yaml",
			errs: []string{`testdata/syntax.bad.yaml: yaml: line`},
		},
		{
			file: "twodocs.bad.yaml",
			errs: []string{`testdata/twodocs.bad.yaml:2: a second YAML document`},
		},
	}
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.ContainsFunc(expectedErrors, func(e badFile) bool { return e.file == filepath.Base(f) }) {
			t.Errorf("%s has no entry in expectedErrors", f)
		}
	}
	for _, tc := range expectedErrors {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			_, err := loadAndValidate(filepath.Join("testdata", tc.file), noEnv)
			checkErrors(t, err, tc.errs)
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.yaml", "")
	comments := write("comments.yaml", "# nothing set yet\n")
	flow := write("flow.yaml", "node: {id: urn:node:X, colour: blue}\n")
	missing := filepath.Join(dir, "missing.yaml")

	t.Run("empty file keeps defaults", func(t *testing.T) {
		for _, p := range []string{empty, comments} {
			c, err := Load(p, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, Default()) {
				t.Errorf("%s: got %+v, want Default()", p, c)
			}
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(missing, noEnv)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
			t.Errorf("got %v, want a not-exist error naming %s", err, missing)
		}
	})
	t.Run("unknown key in a flow mapping", func(t *testing.T) {
		_, err := Load(flow, noEnv)
		checkErrors(t, err, []string{flow + ":1: unknown key node.colour"})
	})
}

// TestDefaultCORSExposesExceptionHeaders: a page's script can read every
// DataONE-Exception-* header a HEAD's error carries; ErrorCode, Identifier,
// NodeID and TraceInformation were not exposed.
func TestDefaultCORSExposesExceptionHeaders(t *testing.T) {
	e := adapter.Errorf(adapter.NotFound, "no object").WithPID("p")
	e.NodeID, e.TraceInformation = "urn:node:X", "trace"
	exposed := DefaultCORS().ExposedHeaders
	for name := range adapter.ExceptionHeaders(e) {
		if !slices.Contains(exposed, name) {
			t.Errorf("%s is not in the default cors.exposedHeaders %v", name, exposed)
		}
	}
}

// TestDefaultCORSAllowsConditionalHeaders: a page may send every precondition
// get and describe evaluate (RFC 9110 §13.1); If-Modified-Since,
// If-Unmodified-Since and If-Range failed the preflight.
func TestDefaultCORSAllowsConditionalHeaders(t *testing.T) {
	allowed := DefaultCORS().AllowedHeaders
	for _, h := range []string{"Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range"} {
		if !slices.Contains(allowed, h) {
			t.Errorf("%s is not in the default cors.allowedHeaders %v", h, allowed)
		}
	}
}
