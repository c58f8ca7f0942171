package deploy

// The Helm chart: lint, the rendered objects, shared work on several replicas, the values' documentation.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestHelmLint(t *testing.T) {
	out, err := exec.Command(tool(t, "helm"), "lint", "--strict", chart).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict %s: %v\n%s", chart, err, out)
	}
	if !bytes.Contains(out, []byte("0 chart(s) failed")) {
		t.Fatalf("helm lint: %s", out)
	}
}

// TestHelmTemplate renders the chart and checks the objects: the Deployment's
// replicas, probes, _FILE variables and Secret mount, the PodDisruptionBudget
// and Service selecting its pods, the ServiceMonitor only when asked for; and
// that the rendered configuration passes `d1bridge config check` with the
// environment and the secret files the pods get.
func TestHelmTemplate(t *testing.T) {
	objs := helmTemplate(t, "--set", "replicaCount=4")
	dep := object(t, objs, "Deployment")
	if got := dig(dep, "spec", "replicas"); got != 4 {
		t.Errorf("Deployment replicas %v, want 4", got)
	}
	podLabels, _ := dig(dep, "spec", "template", "metadata", "labels").(map[string]any)
	selector, _ := dig(dep, "spec", "selector", "matchLabels").(map[string]any)
	if len(selector) == 0 || !subset(selector, podLabels) {
		t.Errorf("Deployment selector %v does not select its pods %v", selector, podLabels)
	}
	containers, _ := dig(dep, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got := dig(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %v, want %s", probe, got, path)
		}
		if got := dig(c, probe, "httpGet", "port"); got != "http" {
			t.Errorf("%s port %v, want http", probe, got)
		}
	}
	env := podEnv(t, objs)
	if got := env["D1BRIDGE_CATALOG_DSN_FILE"]; got != "/run/secrets/d1bridge/catalog-dsn" {
		t.Errorf("D1BRIDGE_CATALOG_DSN_FILE=%q, want /run/secrets/d1bridge/catalog-dsn (env %v)", got, env)
	}
	mounts := map[string]string{}
	mountList, _ := dig(c, "volumeMounts").([]any)
	for _, m := range mountList {
		m := m.(map[string]any)
		mounts[m["name"].(string)] = m["mountPath"].(string)
	}
	if mounts["secrets"] != "/run/secrets/d1bridge" || mounts["config"] != "/etc/d1bridge" {
		t.Errorf("volume mounts %v: want secrets at /run/secrets/d1bridge, config at /etc/d1bridge", mounts)
	}
	volumes := map[string]map[string]any{}
	volumeList, _ := dig(dep, "spec", "template", "spec", "volumes").([]any)
	for _, v := range volumeList {
		v := v.(map[string]any)
		volumes[v["name"].(string)] = v
	}
	if got := dig(volumes["secrets"], "secret", "secretName"); got != "rel-d1bridge" {
		t.Errorf("secrets volume from Secret %v, want rel-d1bridge", got)
	}
	if got := dig(c, "args"); !slices.Equal(toStrings(got), []string{"serve", "--config", "/etc/d1bridge/d1bridge.yaml"}) {
		t.Errorf("args %v", got)
	}

	pdb := object(t, objs, "PodDisruptionBudget")
	if got := dig(pdb, "spec", "maxUnavailable"); got != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", got)
	}
	if sel, _ := dig(pdb, "spec", "selector", "matchLabels").(map[string]any); len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", sel, podLabels)
	}
	svc := object(t, objs, "Service")
	if sel, _ := dig(svc, "spec", "selector").(map[string]any); len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("Service selector %v does not select the pods %v", sel, podLabels)
	}
	if objectOK(objs, "ServiceMonitor") {
		t.Error("a ServiceMonitor by default; it needs the Prometheus Operator's CRDs")
	}
	sm := object(t, helmTemplate(t, "--set", "serviceMonitor.enabled=true"), "ServiceMonitor")
	if eps, _ := dig(sm, "spec", "endpoints").([]any); len(eps) != 1 || dig(eps[0], "port") != "metrics" || dig(eps[0], "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %v, want one: port metrics, path /metrics", eps)
	}

	helmConfigCheck(t, objs, env)
}

// helmConfigCheck runs `d1bridge config check` on the configuration the
// rendered ConfigMap gives the pods, with their environment env and the
// Secret's files at the path the chart mounts them; it returns that
// configuration, decoded.
func helmConfigCheck(t *testing.T, objs []map[string]any, env map[string]string) map[string]any {
	t.Helper()
	cm := object(t, objs, "ConfigMap")
	conf, _ := dig(cm, "data", "d1bridge.yaml").(string)
	if conf == "" {
		t.Fatalf("ConfigMap has no d1bridge.yaml: %v", cm)
	}
	secretsDir := makeSecrets(t)
	mount := func(p string) string { return strings.ReplaceAll(p, "/run/secrets/d1bridge/", secretsDir+"/") }
	path := filepath.Join(t.TempDir(), "d1bridge.yaml")
	if err := os.WriteFile(path, []byte(mount(conf)), 0o644); err != nil {
		t.Fatal(err)
	}
	mounted := map[string]string{}
	for k, v := range env {
		mounted[k] = mount(v)
	}
	configCheck(t, path, mounted)
	var decoded map[string]any
	if err := yaml.Unmarshal([]byte(conf), &decoded); err != nil {
		t.Fatalf("the ConfigMap's d1bridge.yaml: %v\n%s", err, conf)
	}
	return decoded
}

// podEnv is the environment of the Deployment's one container.
func podEnv(t *testing.T, objs []map[string]any) map[string]string {
	t.Helper()
	containers, _ := dig(object(t, objs, "Deployment"), "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(containers))
	}
	env := map[string]string{}
	envList, _ := dig(containers[0], "env").([]any)
	for _, e := range envList {
		e := e.(map[string]any)
		env[e["name"].(string)], _ = e["value"].(string)
	}
	return env
}

// TestHelmSharedWork: replication jobs, batch reindex and harvests are shared
// through the catalog, so several replicas render with node.replicate and
// with a harvest source, and hand every pod that configuration.
func TestHelmSharedWork(t *testing.T) {
	objs := helmTemplate(t, "--set", "replicaCount=3", "--set", "config.node.replicate=true")
	if got := dig(object(t, objs, "Deployment"), "spec", "replicas"); got != 3 {
		t.Errorf("replicate: Deployment replicas %v, want 3", got)
	}
	conf := helmConfigCheck(t, objs, podEnv(t, objs))
	if got := dig(conf, "node", "replicate"); got != true {
		t.Errorf("the pods' node.replicate is %v, want true", got)
	}

	// A harvest source next to the store (a list is replaced whole by
	// --set, so a values file gives both).
	values := filepath.Join(t.TempDir(), "harvest.yaml")
	if err := os.WriteFile(values, []byte(`replicaCount: 3
config:
  upstreams:
    - name: objects
      type: s3
      baseURL: https://s3.example.org
      options:
        bucket: dataone-objects
        accessKey: AKIAEXAMPLE
        secretKeyFile: /run/secrets/d1bridge/s3-secret
    - name: archive
      type: s3
      baseURL: https://s3.example.org
      options:
        bucket: archive
        accessKey: AKIAEXAMPLE
        secretKeyFile: /run/secrets/d1bridge/s3-secret
      harvest:
        interval: 1h
        depth: 1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs = helmTemplate(t, "-f", values)
	if got := dig(object(t, objs, "Deployment"), "spec", "replicas"); got != 3 {
		t.Errorf("harvest: Deployment replicas %v, want 3", got)
	}
	conf = helmConfigCheck(t, objs, podEnv(t, objs))
	ups, _ := dig(conf, "upstreams").([]any)
	if len(ups) != 2 || dig(ups[1], "harvest", "interval") != "1h" {
		t.Errorf("the pods' upstreams %v, want the archive harvested every 1h", ups)
	}
}

// TestChartValuesDocumented: every value of values.yaml is in the chart's
// README.md table, and every value the table lists exists.
func TestChartValuesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	// Values whose content is an object of their own (a Kubernetes probe,
	// the d1bridge configuration, a variable map) are documented as one row.
	opaque := map[string]bool{"config": true, "secrets.fileEnv": true, "livenessProbe": true, "readinessProbe": true,
		"startupProbe": true, "podSecurityContext": true, "securityContext": true}
	var keys []string
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := prefix+n.Content[i].Value, n.Content[i+1]
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 && !opaque[k] {
				walk(k+".", v)
				continue
			}
			keys = append(keys, k)
		}
	}
	walk("", root.Content[0])
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllSubmatch(readme, -1) {
		documented[string(m[1])] = true
	}
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("value %s is not in the README's table", k)
		}
		delete(documented, k)
	}
	for k := range documented {
		t.Errorf("the README lists %s, which values.yaml does not have", k)
	}
	if len(keys) < 30 {
		t.Errorf("only %d values found: %v", len(keys), keys)
	}
}

// composeConfig renders compose.yaml with docker-compose, or with the docker
// CLI's compose plugin when docker-compose is absent.
