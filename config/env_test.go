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

	"go.yaml.in/yaml/v3"
)

// envFrom serves a map as the environment, with "{dir}" in values replaced by
// dir.
func envFrom(m map[string]string, dir string) func(string) string {
	return func(k string) string { return strings.ReplaceAll(m[k], "{dir}", dir) }
}

// writeFiles writes name-to-content files into a new temporary directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEnvOverrides(t *testing.T) {
	admin := "CN=Jane Admin,O=Example,C=US,DC=cilogon,DC=org"
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  func(c *Config) // applied to Default() to get the expected result
	}{
		{
			name: "string",
			env:  map[string]string{"D1BRIDGE_LISTEN": ":9000", "D1BRIDGE_SVC": "dataone"},
			want: func(c *Config) { c.Listen, c.Svc = ":9000", "dataone" },
		},
		{
			name: "nested strings",
			env: map[string]string{
				"D1BRIDGE_NODE_ID":        "urn:node:X",
				"D1BRIDGE_NODE_BASEURL":   "https://x.example.org/d1",
				"D1BRIDGE_CATALOG_DRIVER": "postgres",
				"D1BRIDGE_CATALOG_DSN":    "postgres://db/x",
				"D1BRIDGE_METRICS_LISTEN": "127.0.0.1:9090",
			},
			want: func(c *Config) {
				c.Node.ID, c.Node.BaseURL = "urn:node:X", "https://x.example.org/d1"
				c.Catalog.Driver, c.Catalog.DSN = "postgres", "postgres://db/x"
				c.Metrics.Listen = "127.0.0.1:9090"
			},
		},
		{
			name: "bool true and 1",
			env:  map[string]string{"D1BRIDGE_ENABLESESSIONFROMHEADER": "true", "D1BRIDGE_NODE_REPLICATE": "1"},
			want: func(c *Config) { c.EnableSessionFromHeader, c.Node.Replicate = true, true },
		},
		{
			name: "bool FALSE and 0",
			env:  map[string]string{"D1BRIDGE_NODE_SYNCHRONIZE": "FALSE", "D1BRIDGE_ENABLEAPPENDLDAPGROUPS": "0"},
			want: func(c *Config) { c.Node.Synchronize, c.EnableAppendLdapGroups = false, false },
		},
		{
			name: "int and int64",
			env:  map[string]string{"D1BRIDGE_AUTHCACHESIZE": "0", "D1BRIDGE_MAXUPLOADSIZE": "5368709120"},
			want: func(c *Config) { c.AuthCacheSize, c.MaxUploadSize = 0, 5368709120 },
		},
		{
			name: "duration",
			env:  map[string]string{"D1BRIDGE_SHUTDOWNTIMEOUT": "1m30s"},
			want: func(c *Config) { c.ShutdownTimeout = 90 * time.Second },
		},
		{
			name: "comma-separated list",
			env:  map[string]string{"D1BRIDGE_ROLES": "mn", "D1BRIDGE_NODE_SUBMITTERS": " public , authenticatedUser "},
			want: func(c *Config) {
				c.Roles = []string{"mn"}
				c.Node.Submitters = []string{"public", "authenticatedUser"}
			},
		},
		{
			name: "flow list for items with commas",
			env:  map[string]string{"D1BRIDGE_NODE_CONTACTSUBJECTS": `["` + admin + `", "http://orcid.org/0000-0002-1825-0097"]`},
			want: func(c *Config) { c.Node.ContactSubjects = []string{admin, "http://orcid.org/0000-0002-1825-0097"} },
		},
		{
			name: "empty flow list clears",
			env:  map[string]string{"D1BRIDGE_NODE_SUBMITTERS": "[]"},
			want: func(c *Config) { c.Node.Submitters = []string{} },
		},
		{
			name: "empty variable is unset",
			env:  map[string]string{"D1BRIDGE_LISTEN": "", "D1BRIDGE_LISTEN_FILE": ""},
			want: func(*Config) {},
		},
		{
			name:  "file with trailing newline",
			env:   map[string]string{"D1BRIDGE_CATALOG_DSN_FILE": "{dir}/dsn"},
			files: map[string]string{"dsn": "postgres://user:secret@db/x\n"},
			want:  func(c *Config) { c.Catalog.DSN = "postgres://user:secret@db/x" },
		},
		{
			name: "file for every type",
			env: map[string]string{
				"D1BRIDGE_NODE_REPLICATE_FILE":       "{dir}/bool",
				"D1BRIDGE_MAXUPLOADSIZE_FILE":        "{dir}/int64",
				"D1BRIDGE_SHUTDOWNTIMEOUT_FILE":      "{dir}/duration",
				"D1BRIDGE_NODE_ADMINISTRATORS_FILE":  "{dir}/list",
				"D1BRIDGE_NODE_CONTACTSUBJECTS_FILE": "{dir}/flow",
			},
			files: map[string]string{
				"bool":     "true\r\n",
				"int64":    "42\n",
				"duration": "5s",
				"list":     "CN=a, CN=b\n",
				"flow":     "[\"" + admin + "\"]\n",
			},
			want: func(c *Config) {
				c.Node.Replicate, c.MaxUploadSize, c.ShutdownTimeout = true, 42, 5*time.Second
				c.Node.Administrators = []string{"CN=a", "CN=b"}
				c.Node.ContactSubjects = []string{admin}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := writeFiles(t, tc.files)
			got, err := Load("", envFrom(tc.env, dir))
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			tc.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestEnvOverridesFile(t *testing.T) {
	c, err := Load("testdata/full.good.yaml", envFrom(map[string]string{
		"D1BRIDGE_LISTEN":    "127.0.0.1:7000",
		"D1BRIDGE_ROLES":     "cn,mn",
		"D1BRIDGE_NODE_NAME": "From the environment",
	}, ""))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7000" || !slices.Equal(c.Roles, []string{"cn", "mn"}) || c.Node.Name != "From the environment" {
		t.Errorf("environment did not win over the file: %+v", c)
	}
	if c.Svc != "dataone" {
		t.Errorf("svc = %q, want the file's dataone", c.Svc)
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		files map[string]string
		errs  []string
	}{
		{
			name: "bad int",
			env:  map[string]string{"D1BRIDGE_AUTHCACHESIZE": "ten"},
			errs: []string{`D1BRIDGE_AUTHCACHESIZE="ten": not an integer`},
		},
		{
			name: "int64 out of range",
			env:  map[string]string{"D1BRIDGE_MAXUPLOADSIZE": "99999999999999999999"},
			errs: []string{`D1BRIDGE_MAXUPLOADSIZE="99999999999999999999": an integer out of range`},
		},
		{
			name: "bad bool",
			env:  map[string]string{"D1BRIDGE_NODE_REPLICATE": "yes"},
			errs: []string{`D1BRIDGE_NODE_REPLICATE="yes": not a boolean (true, false, 1 or 0)`},
		},
		{
			name: "bad duration",
			env:  map[string]string{"D1BRIDGE_SHUTDOWNTIMEOUT": "30"},
			errs: []string{`D1BRIDGE_SHUTDOWNTIMEOUT="30": not a duration`},
		},
		{
			name: "bad flow list",
			env:  map[string]string{"D1BRIDGE_ROLES": "[mn, "},
			errs: []string{`D1BRIDGE_ROLES="[mn, ": not a list in YAML flow form`},
		},
		{
			name: "name and name_FILE",
			env:  map[string]string{"D1BRIDGE_CATALOG_DSN": "x", "D1BRIDGE_CATALOG_DSN_FILE": "{dir}/dsn"},
			errs: []string{"D1BRIDGE_CATALOG_DSN and D1BRIDGE_CATALOG_DSN_FILE are both set"},
		},
		{
			name: "missing file",
			env:  map[string]string{"D1BRIDGE_CATALOG_DSN_FILE": "{dir}/nope"},
			errs: []string{"D1BRIDGE_CATALOG_DSN_FILE: open ", "/nope"},
		},
		{
			name:  "bad value in a file is not quoted",
			env:   map[string]string{"D1BRIDGE_MAXUPLOADSIZE_FILE": "{dir}/size"},
			files: map[string]string{"size": "secret-ish\n"},
			errs:  []string{"D1BRIDGE_MAXUPLOADSIZE_FILE (", "/size): not an integer"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := writeFiles(t, tc.files)
			// The configuration comes back too, the bad keys at their defaults,
			// so that config check reports the other problems as well.
			c, err := Load("", envFrom(tc.env, dir))
			if c == nil {
				t.Errorf("Load returned no configuration with an environment error")
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.errs)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q; got:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "secret-ish") {
				t.Errorf("error quotes a value read from a file: %v", err)
			}
		})
	}

	t.Run("every problem at once", func(t *testing.T) {
		_, err := Load("", envFrom(map[string]string{
			"D1BRIDGE_AUTHCACHESIZE":   "ten",
			"D1BRIDGE_NODE_REPLICATE":  "yes",
			"D1BRIDGE_SHUTDOWNTIMEOUT": "soon",
		}, ""))
		checkErrors(t, err, []string{"D1BRIDGE_AUTHCACHESIZE", "D1BRIDGE_NODE_REPLICATE", "D1BRIDGE_SHUTDOWNTIMEOUT"})
	})
}

// envNames lists the variables Load reads for a value of type T, by recording
// what applyEnv asks for: each NAME followed by NAME_FILE.
func envNames[T any]() []string {
	var names []string
	var v T
	applyEnv(reflect.ValueOf(&v).Elem(), envRoot, func(k string) string {
		names = append(names, k)
		return ""
	})
	return names
}

func TestEnvNames(t *testing.T) {
	names := envNames[Config]()
	for _, want := range []string{
		"D1BRIDGE_LISTEN", "D1BRIDGE_SVC", "D1BRIDGE_ROLES", "D1BRIDGE_MAXUPLOADSIZE", "D1BRIDGE_AUTHCACHESIZE",
		"D1BRIDGE_ENABLESESSIONFROMHEADER", "D1BRIDGE_ENABLEAPPENDLDAPGROUPS", "D1BRIDGE_SHUTDOWNTIMEOUT",
		"D1BRIDGE_DATADIR", "D1BRIDGE_NODE_ID", "D1BRIDGE_NODE_NAME", "D1BRIDGE_NODE_DESCRIPTION",
		"D1BRIDGE_NODE_BASEURL", "D1BRIDGE_NODE_SUBJECTS", "D1BRIDGE_NODE_CONTACTSUBJECTS",
		"D1BRIDGE_NODE_ADMINISTRATORS", "D1BRIDGE_NODE_CNSUBJECTS", "D1BRIDGE_NODE_SUBMITTERS",
		"D1BRIDGE_NODE_REPLICATE", "D1BRIDGE_NODE_SYNCHRONIZE", "D1BRIDGE_CATALOG_DRIVER", "D1BRIDGE_CATALOG_DSN",
		"D1BRIDGE_CATALOG_DSN_FILE", "D1BRIDGE_METRICS_LISTEN", "D1BRIDGE_METRICS_PATH",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("Load does not read %s", want)
		}
	}
	// One key's NAME_FILE must never be another key's NAME (a key cert_file next
	// to a key cert would do that).
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("%s is read for two keys", n)
		}
		seen[n] = true
		if !strings.HasPrefix(n, EnvPrefix) {
			t.Errorf("%s lacks the prefix %s", n, EnvPrefix)
		}
	}
}

// upperText is a custom scalar: the environment parses it with UnmarshalText.
type upperText string

func (u *upperText) UnmarshalText(b []byte) error {
	if string(b) == "bad" {
		return errors.New("not acceptable text")
	}
	*u = upperText(strings.ToUpper(string(b)))
	return nil
}

type inlined struct {
	Extra string `yaml:"extra"`
}

// futureConfig stands for fields other packages will add to Config.
type futureConfig struct {
	inlined  `yaml:",inline"`
	Plain    string // yaml's key: plain
	Ignored  string `yaml:"-"`
	hidden   string
	TLS      *struct{ Cert, Key string } `yaml:"tls"`
	LDAP     *struct{ URL string }       `yaml:"ldap"`
	Optional *bool                       `yaml:"optional"`
	Port     uint16                      `yaml:"port"`
	Ratio    float64                     `yaml:"ratio"`
	Codes    []int                       `yaml:"codes"`
	Timeouts []time.Duration             `yaml:"timeouts"`
	Text     upperText                   `yaml:"text"`
	Options  yaml.Node                   `yaml:"options"`
	Labels   map[string]string           `yaml:"labels"`
	Upstream []struct {
		Name string `yaml:"name"`
	} `yaml:"upstreams"`
}

func TestEnvGenericFields(t *testing.T) {
	env := map[string]string{
		"T_EXTRA":     "inline",
		"T_PLAIN":     "plain",
		"T_IGNORED":   "x",
		"T_HIDDEN":    "x",
		"T_TLS_CERT":  "/etc/cert.pem",
		"T_OPTIONAL":  "false",
		"T_PORT":      "8443",
		"T_RATIO":     "0.5",
		"T_CODES":     "429, 503",
		"T_TIMEOUTS":  "1s,2m",
		"T_TEXT":      "shout",
		"T_OPTIONS":   "x",
		"T_LABELS":    "x",
		"T_UPSTREAMS": "x",
	}
	var got futureConfig
	set, errs := applyEnv(reflect.ValueOf(&got).Elem(), "T", envFrom(env, ""))
	if !set || len(errs) > 0 {
		t.Fatalf("applyEnv = %v, %v", set, errs)
	}
	switch {
	case got.Extra != "inline", got.Plain != "plain", got.Ignored != "", got.hidden != "":
		t.Errorf("strings: %+v", got)
	case got.TLS == nil || got.TLS.Cert != "/etc/cert.pem" || got.TLS.Key != "":
		t.Errorf("TLS = %+v, want Cert set", got.TLS)
	case got.LDAP != nil:
		t.Errorf("LDAP = %+v, want nil: no variable under it is set", got.LDAP)
	case got.Optional == nil || *got.Optional:
		t.Errorf("Optional = %v, want a pointer to false", got.Optional)
	case got.Port != 8443 || got.Ratio != 0.5:
		t.Errorf("Port, Ratio = %d, %g", got.Port, got.Ratio)
	case !slices.Equal(got.Codes, []int{429, 503}) || !slices.Equal(got.Timeouts, []time.Duration{time.Second, 2 * time.Minute}):
		t.Errorf("Codes, Timeouts = %v, %v", got.Codes, got.Timeouts)
	case got.Text != "SHOUT":
		t.Errorf("Text = %q", got.Text)
	case !got.Options.IsZero() || got.Labels != nil || got.Upstream != nil:
		t.Errorf("skipped fields were set: %+v", got)
	}

	bad := map[string]string{"T_PORT": "70000", "T_CODES": "1,x", "T_TEXT": "bad", "T_LDAP_URL": "u", "T_LDAP_URL_FILE": "f"}
	var none futureConfig
	_, errs = applyEnv(reflect.ValueOf(&none).Elem(), "T", envFrom(bad, ""))
	checkErrors(t, errors.Join(errs...), []string{
		`T_PORT="70000": a non-negative integer out of range`,
		`T_CODES="1,x": item 1: not an integer`,
		`T_TEXT="bad": not acceptable text`,
		`T_LDAP_URL and T_LDAP_URL_FILE are both set`,
	})
	if none.LDAP != nil {
		t.Errorf("LDAP allocated despite an error")
	}
}

// TestEnvKeysMatchYAML checks that the names applyEnv derives follow the keys
// the YAML decoder uses, including untagged and inlined fields.
func TestEnvKeysMatchYAML(t *testing.T) {
	const doc = `
extra: inline
plain: plain
tls: {cert: /etc/cert.pem}
optional: false
port: 8443
codes: [429, 503]
text: shout
`
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	var fromYAML futureConfig
	if err := dec.Decode(&fromYAML); err != nil {
		t.Fatal(err)
	}
	var fromEnv futureConfig
	_, errs := applyEnv(reflect.ValueOf(&fromEnv).Elem(), "T", envFrom(map[string]string{
		"T_EXTRA": "inline", "T_PLAIN": "plain", "T_TLS_CERT": "/etc/cert.pem", "T_OPTIONAL": "false",
		"T_PORT": "8443", "T_CODES": "429,503", "T_TEXT": "shout",
	}, ""))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !reflect.DeepEqual(fromYAML, fromEnv) {
		t.Errorf("YAML and environment disagree:\nyaml %+v\nenv  %+v", fromYAML, fromEnv)
	}
}
