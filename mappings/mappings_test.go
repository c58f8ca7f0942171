package mappings_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings"
	"github.com/d1bridge/d1bridge/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// secretRef is a secret file the examples name; they are not on a test
// machine, so TestCheckExamples puts them in a directory of its own.
var secretRef = regexp.MustCompile(`/run/secrets/[A-Za-z0-9._-]+`)

// rootRef is a directory an example harvests (options.root); TestCheckExamples
// makes an empty one in its place.
var rootRef = regexp.MustCompile(`(?m)^(\s+root: )(/\S+)`)

// TestCheckExamples: every example configuration passes Check once the
// secret files it names exist, and between them the examples cover every
// upstream type.
func TestCheckExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../config/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	types := map[string]bool{}
	for _, f := range files {
		cfg := loadExample(t, f)
		if err := mappings.Check(cfg); err != nil {
			t.Errorf("%s:\n%v", filepath.Base(f), err)
		}
		for _, u := range cfg.Upstreams {
			types[u.Type] = true
		}
	}
	for _, typ := range []string{config.UpstreamS3, config.UpstreamWebDAV, config.UpstreamHTTP, config.UpstreamDataONE, config.UpstreamDataCite,
		config.UpstreamFiles, config.UpstreamOAIPMH, config.UpstreamSitemap, config.UpstreamOCFL} {
		if !types[typ] {
			t.Errorf("no example has an upstream of type %s", typ)
		}
	}
}

// loadExample loads and validates the example at path with each
// /run/secrets/NAME it names replaced by a file NAME in a temporary directory
// (holding "secret").
func loadExample(t *testing.T, path string) *config.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := secretRef.ReplaceAllStringFunc(string(b), func(ref string) string {
		p := filepath.Join(dir, filepath.Base(ref))
		if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	})
	text = rootRef.ReplaceAllStringFunc(text, func(line string) string {
		m := rootRef.FindStringSubmatch(line)
		p := filepath.Join(dir, "root", filepath.Base(m[2]))
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
		return m[1] + p
	})
	return loadConfig(t, text)
}

// loadConfig loads and validates text as a configuration file.
func loadConfig(t *testing.T, text string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "d1bridge.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("invalid configuration:\n%v", err)
	}
	return cfg
}

// TestCheck: a good configuration of each upstream type passes, and New
// opens it; bad options of each give every problem, one a line, each naming
// its upstream, and when the bad upstream is the store, mapping or
// identifiers, New fails at start on the first of them.
func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// upstreams is the configuration's upstreams list, rest its other
		// top-level keys (store, mapping, identifiers).
		upstreams, rest string
		// want are the lines of Check's error, in order (each line is a
		// part of its line); none: no problem.
		want []string
	}{
		{name: "good s3", upstreams: `
  - {name: bucket, type: s3, baseURL: "https://s3.example.org",
     options: {bucket: dataone-objects, accessKey: AK, secretKeyFile: ` + secret + `, partSize: 8388608}}`,
			rest: "store: bucket"},
		{name: "good webdav", upstreams: `
  - {name: files, type: webdav, baseURL: "https://files.example.org/dav/",
     options: {prefix: dataone, username: d1bridge, passwordFile: ` + secret + `}}`,
			rest: "store: files"},
		{name: "good http", upstreams: `
  - {name: legacy, type: http, baseURL: "https://archive.example.org",
     options: {headerFiles: {Authorization: ` + secret + `}, pid: "archive:{key}",
               get: {url: "/api/records/{key}/content"}, stat: {url: "/api/records/{key}", fields: {size: size}}}}`,
			rest: "store: legacy"},
		{name: "good dataone", upstreams: `
  - {name: metacat, type: dataone, baseURL: "https://metacat.example.org/metacat/d1/mn",
     options: {forward: proxy, secretFile: ` + secret + `, spoolDir: ` + filepath.Join(dir, "spool") + `}}`,
			rest: "mapping: metacat"},
		{name: "good datacite", upstreams: `
  - {name: datacite, type: datacite, baseURL: "https://api.test.datacite.org",
     options: {prefix: "10.5072", username: EXAMPLE.REPO, passwordFile: ` + secret + `}}`,
			rest: "identifiers: datacite"},

		{name: "s3 unknown option", upstreams: `
  - {name: bucket, type: s3, baseURL: "https://s3.example.org", options: {bucket: dataone-objects, bukket: x}}`,
			rest: "store: bucket",
			want: []string{`s3: upstream "bucket": options (from line 4 of the file): yaml: unmarshal errors:`,
				"field bukket not found in type s3.Options"}},
		{name: "s3 every problem", upstreams: `
  - {name: bucket, type: s3, baseURL: "https://s3.example.org/path",
     options: {partSize: 1000, accessKey: AK, secretKeyFile: /nonexistent/s3-secret}}`,
			rest: "store: bucket",
			want: []string{`s3: upstream "bucket": options.bucket is required`,
				`s3: upstream "bucket": options.partSize 1000 is outside [5242880, 5368709120] (5 MiB to 5 GiB)`,
				`s3: upstream "bucket": baseURL "https://s3.example.org/path" has a path; give the bucket as options.bucket`,
				`s3: upstream "bucket": options.secretKeyFile: open /nonexistent/s3-secret: no such file or directory`}},
		{name: "webdav", upstreams: `
  - {name: files, type: webdav, baseURL: "https://files.example.org/dav/",
     options: {prefix: a/../b, passwordFile: /nonexistent/dav-password}}`,
			rest: "store: files",
			want: []string{`webdav: upstream "files": options.prefix "a/../b" has a ".." segment`,
				`webdav: upstream "files": options.passwordFile: open /nonexistent/dav-password: no such file or directory`}},
		{name: "http templates", upstreams: `
  - {name: legacy, type: http, baseURL: "https://archive.example.org",
     options: {pid: "archive:{kye}", put: {url: "/o/{key"}, list: {url: "/r?p={page}", paging: page, items: records}}}`,
			rest: "store: legacy",
			want: []string{`http: upstream "legacy": options.pid: unknown placeholder {kye}; this template can use {key}`,
				`http: upstream "legacy": options.get: required: the request that reads an object's bytes`,
				`http: upstream "legacy": options.put.url: "/o/{key" has a { without its }`,
				`http: upstream "legacy": options.list.pageSize: required with paging page`,
				`http: upstream "legacy": options.fields.key: required for list`}},
		{name: "dataone", upstreams: `
  - {name: metacat, type: dataone, baseURL: "https://metacat.example.org/metacat/d1/mn",
     options: {forward: token, token: x, secretFile: /nonexistent/proxy-key}}`,
			rest: "mapping: metacat",
			want: []string{`dataone: upstream "metacat": options.secretFile: open /nonexistent/proxy-key: no such file or directory`,
				`dataone: upstream "metacat": options.token is the bridge's own identity, used only with forward: none (forward is token)`}},
		{name: "datacite", upstreams: `
  - {name: datacite, type: datacite, baseURL: "https://api.test.datacite.org",
     options: {prefix: "11.5072", username: R, passwordFile: /nonexistent/pw, landingPage: "https://x.example.org/"}}`,
			rest: "identifiers: datacite",
			want: []string{`datacite: upstream "datacite": options.prefix "11.5072" is not a DOI prefix such as 10.5072`,
				`datacite: upstream "datacite": options.passwordFile: open /nonexistent/pw: no such file or directory`,
				`datacite: upstream "datacite": options.landingPage "https://x.example.org/" has no {pid}`}},
		{name: "every upstream, named or not", upstreams: `
  - {name: spare, type: s3, baseURL: "https://s3.example.org", options: {bucket: b}}
  - {name: files, type: webdav, baseURL: "https://files.example.org/dav/", options: {password: p}}`,
			rest: "store: files",
			want: []string{`s3: upstream "spare": options.bucket "b": Bucket name cannot be shorter than 3 characters`,
				`webdav: upstream "files": options.password is set without options.username`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := t.TempDir()
			cfg := loadConfig(t, "node: {id: urn:node:TEST, name: Test Repository, baseURL: https://repo.example.org/d1}\n"+
				"dataDir: "+data+"\nupstreams:"+tc.upstreams+"\n"+tc.rest+"\n")
			err := mappings.Check(cfg)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Check:\n%v", err)
				}
				n, err := mappings.New(cfg, slog.New(slog.DiscardHandler), metrics.New(prometheus.NewRegistry(), "test"))
				if err != nil {
					t.Fatalf("New after a clean Check: %v", err)
				}
				n.Close()
				return
			}
			if err == nil {
				t.Fatal("Check found no problem")
			}
			lines := strings.Split(err.Error(), "\n")
			if !matchLines(lines, tc.want) {
				t.Errorf("Check:\n%v\nwant lines holding:\n%s", err, strings.Join(tc.want, "\n"))
			}
			for _, l := range lines {
				if !strings.Contains(l, `: upstream "`) && !strings.HasPrefix(l, "  line ") {
					t.Errorf("a line names no upstream: %q", l)
				}
			}
			// At start, New fails on the first problem of the upstream the
			// node uses (here, always the last one).
			if tc.name == "every upstream, named or not" {
				return
			}
			n, err := mappings.New(cfg, slog.New(slog.DiscardHandler), metrics.New(prometheus.NewRegistry(), "test"))
			if err == nil {
				n.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want[0]) {
				t.Errorf("New: %v\nwant an error holding %q", err, tc.want[0])
			}
		})
	}
}

// matchLines reports whether there are as many lines as want, the n-th line
// holding the n-th want.
func matchLines(lines, want []string) bool {
	if len(lines) != len(want) {
		return false
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			return false
		}
	}
	return true
}
