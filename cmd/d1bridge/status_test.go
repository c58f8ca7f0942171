package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"golang.org/x/net/html"
)

// TestStatusPageInABrowser runs the binary with two upstreams (one that
// answers, one whose breaker a single failure opens), creates public and
// private objects, and renders / in Debian's Chromium, headless: the DOM the
// browser built shows the node's identity, the counts monitor/object reports,
// each upstream's health and breaker, and the events on public objects, and
// nothing of the private object or of the callers.
func TestStatusPageInABrowser(t *testing.T) {
	chromium := chromiumPath(t)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer live.Close()
	cfgPath := filepath.Join(t.TempDir(), "d1bridge.yaml")
	cfg := fmt.Sprintf(`node: {name: "Status <Test> Node", description: "A node for the status page test"}
upstreams:
  - {name: archive, type: webdav, baseURL: "%s/"}
  - {name: share, type: webdav, baseURL: "http://127.0.0.1:1/", breaker: {failures: 1, openFor: 10m}, retry: {max: 0}}
`, live.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServerConfig(t, "", cfgPath)

	const secret = "embargoed-study-2027"
	objects := []struct {
		pid, format, data string
		public            bool
	}{
		{"status-pub-1", "text/csv", "a,b\n1,2\n", true},
		{"status-pub-2", "text/plain", "hello status page", true},
		{secret, "text/plain", "not yet", false},
	}
	for _, o := range objects {
		sm := newSysmeta(o.pid, o.format, "MD5", []byte(o.data))
		if !o.public {
			sm.AccessPolicy = nil // the rights holder alone
		}
		if r := s.send(t, http.MethodPost, "/d1/mn/v2/object", false, createParts(sm, strings.NewReader(o.data), false)...); r.Status != 200 {
			t.Fatalf("create %s: %d %s", o.pid, r.Status, r.Body)
		}
	}
	for range 2 {
		if r := s.get(t, "/d1/mn/v2/object/status-pub-1"); r.Status != 200 {
			t.Fatalf("get: %d %s", r.Status, r.Body)
		}
	}
	var stats adapter.ObjectStats
	getJSON(t, s, "/d1/mn/v2/monitor/object", &stats)
	if stats.Objects != 3 {
		t.Fatalf("monitor/object counts %d objects, want 3", stats.Objects)
	}

	// The page itself: HTML that allows no script, for GET and HEAD.
	r := s.get(t, "/")
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(r.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("GET /: %d %v", r.Status, r.Header)
	}
	if h := s.head(t, "/"); h.Status != 200 {
		t.Fatalf("HEAD /: %d", h.Status)
	}

	dom := renderInChromium(t, chromium, s.URL+"/")
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatalf("the DOM Chromium dumped does not parse: %v", err)
	}
	text := func(id string) string {
		t.Helper()
		n := byID(doc, id)
		if n == nil {
			t.Fatalf("no element #%s in the rendered page:\n%s", id, dom)
		}
		return strings.Join(strings.Fields(textOf(n)), " ")
	}
	want := map[string]string{
		"node-name":     "Status <Test> Node", // escaped by the template, shown as written
		"node-id":       testNodeID,
		"node-base-url": s.URL + "/d1",
		"objects-count": strconv.FormatInt(stats.Objects, 10),
		"objects-bytes": strconv.FormatInt(stats.Bytes, 10),
		"catalog-state": "up",
	}
	for id, w := range want {
		if got := text(id); got != w {
			t.Errorf("#%s shows %q, want %q", id, got, w)
		}
	}
	if got := text("node-roles"); got != "member node (MN), coordinating node (CN)" { // the default roles
		t.Errorf("roles %q, want both", got)
	}
	if got := text("node-services"); !strings.Contains(got, "MNStorage") || !strings.Contains(got, "MNRead") {
		t.Errorf("services %q", got)
	}
	if got := text("node-version"); got == "" {
		t.Error("no version shown")
	}
	// Each upstream's row: health, then breaker.
	for name, w := range map[string][2]string{"archive": {"up", "closed"}, "share": {"down", "open"}} {
		row := byID(doc, "upstream-"+name)
		if row == nil {
			t.Fatalf("no row for upstream %s:\n%s", name, dom)
		}
		health, breaker := byClass(row, "health"), byClass(row, "breaker")
		if health == nil || breaker == nil || strings.TrimSpace(textOf(health)) != w[0] || strings.TrimSpace(textOf(breaker)) != w[1] {
			t.Errorf("upstream %s shows %q, want health %s, breaker %s", name, textOf(row), w[0], w[1])
		}
	}
	if got := text("harvest"); !strings.Contains(got, "no harvest pass") {
		t.Errorf("harvest %q", got)
	}
	if got := text("reindex"); !strings.Contains(got, "no reindex") {
		t.Errorf("reindex %q", got)
	}
	// Events: the public objects' creates and reads, newest first; the
	// private object only as a number among the counts.
	events := text("events")
	for _, w := range []string{"read status-pub-1", "create status-pub-1", "create status-pub-2"} {
		if !strings.Contains(events, w) {
			t.Errorf("events %q lack %q", events, w)
		}
	}
	if strings.Index(events, "read status-pub-1") > strings.Index(events, "create status-pub-1") {
		t.Errorf("events are not newest first: %q", events)
	}
	if got := text("event-counts"); !strings.Contains(got, "create 3") || !strings.Contains(got, "read 2") {
		t.Errorf("event counts %q, want create 3 and read 2", got)
	}
	for _, leak := range []string{secret, testOwner, "Go-http-client"} {
		if strings.Contains(dom, leak) {
			t.Errorf("the page shows %q", leak)
		}
	}
}

// chromiumPath is Debian's Chromium; the test fails without it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run .ci/test, which installs Debian's chromium package")
	return ""
}

// renderInChromium loads url in a headless Chromium and returns the DOM it built.
func renderInChromium(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--no-first-run", "--disable-extensions", "--dump-dom", url)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, errOut.String())
	}
	if !strings.Contains(out.String(), "</html>") {
		t.Fatalf("chromium dumped no document:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	return out.String()
}

func byID(n *html.Node, id string) *html.Node {
	return find(n, func(n *html.Node) bool { return attr(n, "id") == id })
}

func byClass(n *html.Node, class string) *html.Node {
	return find(n, func(n *html.Node) bool { return strings.Contains(" "+attr(n, "class")+" ", " "+class+" ") })
}

func find(n *html.Node, match func(*html.Node) bool) *html.Node {
	if n.Type == html.ElementNode && match(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, match); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
		if c.Type == html.ElementNode {
			b.WriteString(" ")
		}
	}
	return b.String()
}
