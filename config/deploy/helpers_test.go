package deploy

// What the tests of the deployment files share: rendering, digging, tools.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func composeConfig(t *testing.T) []byte {
	t.Helper()
	var cmd *exec.Cmd
	if p, err := exec.LookPath("docker-compose"); err == nil {
		cmd = exec.Command(p, "-f", "compose.yaml", "config")
	} else if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "compose", "version").Run() == nil {
		cmd = exec.Command(p, "compose", "-f", "compose.yaml", "config")
	} else {
		t.Fatal("neither docker-compose nor docker compose is installed (apt-get install docker-compose; see .ci/test)")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	return out
}

// helmTemplate renders the chart as release rel with args, and decodes its
// objects.
func helmTemplate(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	cmd := exec.Command(tool(t, "helm"), append([]string{"template", "rel", chart}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	var objs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output: %v\n%s", err, out)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// object is the one object of kind in objs.
func object(t *testing.T, objs []map[string]any, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

func objectOK(objs []map[string]any, kind string) bool {
	return slices.ContainsFunc(objs, func(o map[string]any) bool { return o["kind"] == kind })
}

// dig walks maps by keys; nil when a key is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]any) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// nodeField reads key from a long-syntax entry (a mapping), or the entry
// itself when it is a short-syntax string.
func nodeField(n yaml.Node, key string) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1].Value
		}
	}
	return ""
}

// volume reads the source and target of a volume entry: the long syntax
// (docker compose) or the short one, SOURCE:TARGET[:MODE] (docker-compose 1.29).
func volume(n yaml.Node) (source, target string) {
	if n.Kind == yaml.ScalarNode {
		parts := strings.Split(n.Value, ":")
		if len(parts) < 2 {
			return "", parts[0]
		}
		return parts[0], parts[1]
	}
	return nodeField(n, "source"), nodeField(n, "target")
}

// makeSecrets runs make-secrets into a new directory and returns it.
func makeSecrets(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secrets")
	if out, err := exec.Command("./make-secrets", dir).CombinedOutput(); err != nil {
		t.Fatalf("make-secrets: %v\n%s", err, out)
	}
	return dir
}

// rewriteFile writes a copy of path, with f applied, to a temporary file.
func rewriteFile(t *testing.T, path string, f func(string) string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := f(string(data))
	if s == string(data) {
		t.Fatalf("%s: nothing to rewrite", path)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// configCheck runs `d1bridge config check path` with exactly env (plus PATH
// and HOME) and fails unless it reports the file ok.
func configCheck(t *testing.T, path string, env map[string]string) {
	t.Helper()
	cmd := exec.Command(d1bridgeBin, "config", "check", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(": ok")) {
		t.Fatalf("d1bridge config check %s (env %v): %v\n%s", path, env, err, out)
	}
}

// pinnedVersion is the version .ci/test installs module at (GO_TOOLS).
func pinnedVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", ".ci", "test"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(module) + `@(v[\w.-]+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf(".ci/test does not pin %s", module)
	}
	return string(m[1])
}

// tool finds a binary on PATH or where `go install` puts it.
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command(goTool(), "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(d, "bin"))
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	t.Fatalf("%s is not installed (on PATH or in %v); .ci/test installs it", name, dirs)
	return ""
}

// goTool is the go command: the one on PATH, else the one in GOROOT.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if gr := os.Getenv("GOROOT"); gr != "" {
		return filepath.Join(gr, "bin", "go")
	}
	return "go"
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
