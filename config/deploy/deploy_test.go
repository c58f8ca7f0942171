// Package deploy checks the deployment files operators run: compose.yaml (three
// replicas, PostgreSQL, versitygw, nginx) and the Helm chart helm/d1bridge. The
// tools do the reading, as they would for an operator: docker-compose renders
// the compose file, helm lints and renders the chart, and the d1bridge binary,
// built from this checkout, checks the configuration each one hands the
// replicas, with the environment and the secret files they would get.
//
// The tools are installed by .ci/test: helm by `go install
// helm.sh/helm/v3/cmd/helm@v3.22.0`, docker-compose by apt (or a docker CLI
// with the compose plugin). A missing tool fails the tests.
package deploy

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// d1bridgeBin is the binary TestMain built from this checkout.
var d1bridgeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "d1bridge-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "TestMain:", err)
		os.Exit(2)
	}
	d1bridgeBin = filepath.Join(dir, "d1bridge")
	build := exec.Command(goTool(), "build", "-o", d1bridgeBin, "./cmd/d1bridge")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "TestMain: go build ./cmd/d1bridge: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// chart is the Helm chart, relative to this directory.
const chart = "helm/d1bridge"

// TestComposeConfig renders compose.yaml with docker-compose (no daemon needed)
// and checks what the replicas get: the repository's image, the secrets as
// _FILE variables, health checks on /readyz and /healthz, a dataDir each; and
// that their configuration, with that environment and those secret files,
// passes `d1bridge config check`.
func TestComposeConfig(t *testing.T) {
	out := composeConfig(t)
	var doc struct {
		Services map[string]struct {
			Build *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Secrets     []yaml.Node       `yaml:"secrets"`
			Volumes     []yaml.Node       `yaml:"volumes"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
		Secrets map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("the rendered compose file: %v\n%s", err, out)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	replicas := []string{"d1bridge-1", "d1bridge-2", "d1bridge-3"}
	dataVolumes := map[string]bool{}
	for _, name := range replicas {
		s, ok := doc.Services[name]
		if !ok {
			t.Fatalf("no service %s in %s", name, out)
		}
		if s.Build == nil || filepath.Clean(s.Build.Context) != root {
			t.Errorf("%s: build %+v, want the repository root %s", name, s.Build, root)
		} else if _, err := os.Stat(filepath.Join(s.Build.Context, cmp.Or(s.Build.Dockerfile, "Dockerfile"))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if want := []string{"serve", "--config", "/etc/d1bridge/d1bridge.yaml"}; !slices.Equal(s.Command, want) {
			t.Errorf("%s: command %q, want %q", name, s.Command, want)
		}
		if got := s.Environment["D1BRIDGE_CATALOG_DSN_FILE"]; got != "/run/secrets/catalog-dsn" {
			t.Errorf("%s: D1BRIDGE_CATALOG_DSN_FILE=%q, want /run/secrets/catalog-dsn", name, got)
		}
		for k := range s.Environment {
			if strings.Contains(k, "DSN") && !strings.HasSuffix(k, "_FILE") {
				t.Errorf("%s: %s is set in plain text; secrets go through _FILE variables", name, k)
			}
		}
		secrets := map[string]bool{}
		for _, n := range s.Secrets {
			secrets[nodeField(n, "source")] = true
		}
		for _, want := range []string{"catalog-dsn", "signing-key.pem", "s3-secret"} {
			if !secrets[want] {
				t.Errorf("%s: secret %s not mounted (has %v)", name, want, secrets)
			}
		}
		if !slices.ContainsFunc(s.Healthcheck.Test, func(a string) bool { return strings.HasSuffix(a, ":8080/readyz") }) {
			t.Errorf("%s: health check %q does not ask /readyz", name, s.Healthcheck.Test)
		}
		for _, v := range s.Volumes {
			if src, target := volume(v); target == "/data" {
				if dataVolumes[src] {
					t.Errorf("%s: dataDir volume %s is shared with another replica", name, src)
				} else {
					dataVolumes[src] = true
				}
			}
		}
		for _, dep := range []string{"postgres", "s3"} {
			if c := s.DependsOn[dep].Condition; c != "service_healthy" {
				t.Errorf("%s: depends on %s with condition %q, want service_healthy", name, dep, c)
			}
		}
	}
	if len(dataVolumes) != len(replicas) {
		t.Errorf("dataDir volumes %v: want one per replica", dataVolumes)
	}
	lb := doc.Services["lb"]
	if !strings.HasPrefix(lb.Image, "nginx:") || !slices.ContainsFunc(lb.Healthcheck.Test, func(a string) bool { return strings.HasSuffix(a, "/healthz") }) {
		t.Errorf("lb: image %q, health check %q: want nginx asking /healthz", lb.Image, lb.Healthcheck.Test)
	}
	for _, name := range replicas {
		if c := lb.DependsOn[name].Condition; c != "service_healthy" {
			t.Errorf("lb: depends on %s with condition %q, want service_healthy", name, c)
		}
	}
	if img := doc.Services["postgres"].Image; !strings.HasPrefix(img, "postgres:") {
		t.Errorf("postgres: image %q", img)
	}
	// The S3 server is the versitygw the tests run, at the version .ci/test pins.
	if img, want := doc.Services["s3"].Image, "versity/versitygw:"+pinnedVersion(t, "github.com/versity/versitygw/cmd/versitygw"); img != want {
		t.Errorf("s3: image %q, want %q (the version .ci/test installs)", img, want)
	}

	// nginx balances over exactly the replicas compose runs.
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	upstream := regexp.MustCompile(`(?s)upstream d1bridge \{(.*?)\}`).FindSubmatch(conf)
	if upstream == nil {
		t.Fatal("nginx.conf: no upstream d1bridge")
	}
	var servers []string
	for _, m := range regexp.MustCompile(`server ([\w.-]+):8080`).FindAllSubmatch(upstream[1], -1) {
		servers = append(servers, string(m[1]))
	}
	if !slices.Equal(servers, replicas) {
		t.Errorf("nginx.conf: upstream d1bridge has %q, want %q", servers, replicas)
	}
	// No replica is special: every request, replicate and index included,
	// goes round robin over them all.
	if ups := regexp.MustCompile(`(?m)^\s*upstream\s+(\S+)`).FindAllSubmatch(conf, -1); len(ups) != 1 {
		t.Errorf("nginx.conf: %d upstream blocks, want one (d1bridge)", len(ups))
	}
	for _, m := range regexp.MustCompile(`proxy_pass\s+([^;]+);`).FindAllSubmatch(conf, -1) {
		if string(m[1]) != "http://d1bridge" {
			t.Errorf("nginx.conf: proxy_pass %s, want every request to http://d1bridge", m[1])
		}
	}

	// The configuration as d1bridge-1 sees it: its file, its environment, and
	// the secret files make-secrets writes, at the paths compose mounts them.
	secretsDir := makeSecrets(t)
	for name, s := range doc.Secrets {
		if filepath.Dir(s.File) != filepath.Join(mustAbs(t, "."), "secrets") {
			t.Errorf("secret %s from %s, not from secrets/ (where make-secrets writes)", name, s.File)
		}
		if _, err := os.Stat(filepath.Join(secretsDir, filepath.Base(s.File))); err != nil {
			t.Errorf("secret %s: make-secrets does not write it: %v", name, err)
		}
	}
	mount := func(p string) string { return strings.ReplaceAll(p, "/run/secrets/", secretsDir+"/") }
	cfg := rewriteFile(t, "d1bridge.yaml", mount)
	env := map[string]string{}
	for k, v := range doc.Services["d1bridge-1"].Environment {
		env[k] = mount(v)
	}
	configCheck(t, cfg, env)
}

// TestHelmLint runs helm lint --strict on the chart.
