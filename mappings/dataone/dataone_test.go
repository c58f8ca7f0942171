package dataone

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("file-token\n"), 0o600)
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("file-secret\r\n"), 0o600)
	spool := filepath.Join(dir, "spool", "deeper")
	for _, tc := range []struct {
		name, baseURL, options string
		err                    string // a part of the error; "" for none
		check                  func(t *testing.T, n *Node)
	}{
		{name: "defaults", check: func(t *testing.T, n *Node) {
			want := DefaultOptions()
			want.SpoolDir = n.o.SpoolDir
			if n.o != want || n.token != "" || n.secret != "" {
				t.Errorf("options %+v, token %q, secret %q", n.o, n.token, n.secret)
			}
		}},
		{name: "spool default", options: "forward: none", check: func(t *testing.T, n *Node) {
			if want, _ := filepath.Abs(os.TempDir()); n.spool != want {
				t.Errorf("spool %q, want %q", n.spool, want)
			}
		}},
		{name: "spool made", options: "spoolDir: " + spool, check: func(t *testing.T, n *Node) {
			if fi, err := os.Stat(spool); err != nil || !fi.IsDir() || n.spool != spool {
				t.Errorf("spool %q: %v", n.spool, err)
			}
		}},
		{name: "token file", options: "tokenFile: " + tokenFile, check: func(t *testing.T, n *Node) {
			if n.token != "file-token" {
				t.Errorf("token %q", n.token)
			}
		}},
		{name: "proxy", options: "{forward: proxy, secretFile: " + secretFile + ", subjectHeader: X-Subject, verifyHeader: ''}",
			check: func(t *testing.T, n *Node) {
				if n.secret != "file-secret" || n.o.SubjectHeader != "X-Subject" || n.o.VerifyHeader != "" || n.o.SecretHeader != "X-Proxy-Key" {
					t.Errorf("%+v, secret %q", n.o, n.secret)
				}
			}},
		{name: "version in baseURL", baseURL: "http://mn.example.org/metacat/d1/mn/v2/", check: func(t *testing.T, n *Node) {
			if n.base != "http://mn.example.org/metacat/d1/mn" {
				t.Errorf("base %q", n.base)
			}
		}},
		{name: "unknown key", options: "forwards: token", err: "field forwards not found"},
		{name: "bad mode", options: "forward: all", err: `options.forward: "all" is not none, token or proxy`},
		{name: "token with token mode", options: "{forward: token, token: x}", err: "used only with forward: none"},
		{name: "token and tokenFile", options: "{token: x, tokenFile: " + tokenFile + "}", err: "options.token and options.tokenFile are both set"},
		{name: "missing token file", options: "tokenFile: /nonexistent/t", err: "options.tokenFile"},
		{name: "secret without proxy", options: "secret: x", err: "sent only with forward: proxy"},
		{name: "bad subject header", options: "{forward: proxy, subjectHeader: 'Bad Header'}", err: "is not a header name"},
		{name: "token on two lines", options: `token: "a\nb"`, err: "one line of printable characters"},
		{name: "not http", baseURL: "ftp://mn.example.org/mn", err: "is not an http(s) URL"},
		{name: "every problem at once", baseURL: "ftp://mn.example.org/mn", options: "{forward: all, tokenFile: /nonexistent/t}",
			err: `dataone: upstream "up": baseURL "ftp://mn.example.org/mn" is not an http(s) URL without query` + "\n" +
				`dataone: upstream "up": options.forward: "all" is not none, token or proxy` + "\n" +
				`dataone: upstream "up": options.tokenFile: open /nonexistent/t: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := tc.baseURL
			if base == "" {
				base = "http://127.0.0.1:1/mn"
			}
			u := upstreamConfig(t, base, tc.options)
			c := upstream.New(u, nil)
			defer c.Close()
			n, err := New(u, c)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("New: %v, want an error with %q", err, tc.err)
			case tc.check != nil:
				tc.check(t, n)
			}
		})
	}
}

func TestEscapeID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"plain-id_1.0~x":          "plain-id_1.0~x",
		"10.1000/182":             "10.1000%2F182",
		"a b":                     "a%20b",
		"a+b":                     "a%2Bb",
		"q?h#p%s\\":               "q%3Fh%23p%25s%5C",
		"é":                       "%C3%A9",
		"urn:uuid:1@$!()',~*&=":   "urn:uuid:1@$!()',~*&=",
		"doi:10.5063/F1/[x];y\"z": "doi:10.5063%2FF1%2F%5Bx%5D%3By%22z",
	} {
		if got := adapter.EscapeIdentifier(id); got != want {
			t.Errorf("adapter.EscapeIdentifier(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestPathsAsSent: identifiers reach the upstream as one segment each,
// encoded as the Python client encodes them, and come back decoded.
func TestPathsAsSent(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	n := open(t, upstreamConfig(t, f.URL, ""), nil)
	for _, id := range []string{"10.1000/182", "a b+c", "urn:uuid:x@y", "é/?#%"} {
		f.put(id, "", []byte("x"))
		sm, err := n.SystemMetadata(t.Context(), session("CN=a", ""), id)
		if err != nil || sm.Identifier != id {
			t.Errorf("SystemMetadata(%q): %v, %v", id, sm, err)
			continue
		}
		if got := f.last(t, "GET", "/mn/v2/meta/").Path; got != "/mn/v2/meta/"+adapter.EscapeIdentifier(id) {
			t.Errorf("%q sent as %q", id, got)
		}
	}
}

// TestIdentity: each forward mode tells the upstream who calls, and nothing
// more.
func TestIdentity(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.put("p", "", []byte("x"))
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("own-token\n"), 0o600)
	identity := []string{"Authorization", "Ssl-Client-Subject-Dn", "Ssl-Client-Verify", "X-Proxy-Key", "X-Subject", "X-Key"}
	caller := session("CN=Jane Doe,O=Org,C=US,DC=cilogon,DC=org", "caller.jwt.token")
	for _, tc := range []struct {
		name, options string
		s             *adapter.Session
		want          map[string]string // the identity headers sent
		err           adapter.Kind      // when the call must fail before sending
	}{
		{name: "none", s: caller, want: map[string]string{}},
		{name: "none with token", options: "token: own", s: caller, want: map[string]string{"Authorization": "Bearer own"}},
		{name: "none with token file", options: "tokenFile: " + tokenFile, s: caller, want: map[string]string{"Authorization": "Bearer own-token"}},
		{name: "token", options: "forward: token", s: caller, want: map[string]string{"Authorization": "Bearer caller.jwt.token"}},
		{name: "token, caller without", options: "forward: token", s: session("CN=cert holder", ""), want: map[string]string{}},
		{name: "token, public", options: "forward: token", s: adapter.PublicSession(), want: map[string]string{}},
		{name: "proxy", options: "{forward: proxy, secret: s3cret}", s: caller, want: map[string]string{
			"Ssl-Client-Subject-Dn": caller.Subject, "Ssl-Client-Verify": "SUCCESS", "X-Proxy-Key": "s3cret"}},
		{name: "proxy, own headers", options: "{forward: proxy, secret: k, subjectHeader: X-Subject, secretHeader: X-Key, verifyHeader: ''}",
			s: caller, want: map[string]string{"X-Subject": caller.Subject, "X-Key": "k"}},
		{name: "proxy without secret", options: "forward: proxy", s: caller, want: map[string]string{
			"Ssl-Client-Subject-Dn": caller.Subject, "Ssl-Client-Verify": "SUCCESS"}},
		{name: "proxy, public", options: "{forward: proxy, secret: s3cret}", s: adapter.PublicSession(), want: map[string]string{}},
		{name: "proxy, refused credential", options: "{forward: proxy, secret: s3cret}",
			s: &adapter.Session{Subject: "public", Subjects: []string{"public"}, CredentialError: "expired"}, want: map[string]string{}},
		{name: "proxy, subject with a newline", options: "{forward: proxy, secret: s3cret}",
			s: session("CN=x\r\nX-Proxy-Key: forged", ""), err: adapter.NotAuthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := open(t, upstreamConfig(t, f.URL, tc.options), nil)
			f.requests()
			ctx := adapter.WithRequest(t.Context(), "req-42")
			_, err := n.SystemMetadata(ctx, tc.s, "p")
			if tc.want == nil {
				if !adapter.IsKind(err, tc.err) {
					t.Fatalf("SystemMetadata: %v, want %s", err, tc.err)
				}
				if rs := f.requests(); len(rs) != 0 {
					t.Errorf("a refused identity reached the upstream: %v", rs[0].Header)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := f.last(t, "GET", "/mn/v2/meta/p").Header
			for _, h := range identity {
				if v, sent := got[h]; sent != (tc.want[h] != "") || sent && v[0] != tc.want[h] {
					t.Errorf("%s: sent %q, want %q", h, v, tc.want[h])
				}
			}
			if tc.s.UserAgent != "" && got.Get("User-Agent") != tc.s.UserAgent {
				t.Errorf("User-Agent %q", got.Get("User-Agent"))
			}
			if tc.s.Address != "" && got.Get("X-Forwarded-For") != tc.s.Address {
				t.Errorf("X-Forwarded-For %q", got.Get("X-Forwarded-For"))
			}
			if got.Get("X-Request-Id") != "req-42" {
				t.Errorf("X-Request-Id %q", got.Get("X-Request-Id"))
			}
		})
	}
}

// TestStaleSpoolSwept: New removes spool files a crash left behind, and only
// those.
func TestStaleSpoolSwept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{spoolPrefix + "old" + spoolSuffix, spoolPrefix + "new" + spoolSuffix, "other-old"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	old := mustTime(t, "2000-01-01T00:00:00Z")
	for _, name := range []string{spoolPrefix + "old" + spoolSuffix, "other-old"} {
		os.Chtimes(filepath.Join(dir, name), old, old)
	}
	open(t, upstreamConfig(t, "http://127.0.0.1:1/mn", "spoolDir: "+dir), nil)
	var left []string
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != spoolPrefix+"new"+spoolSuffix+",other-old" {
		t.Errorf("left %v", left)
	}
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestRedirects: a redirect on the upstream's host is followed with the
// caller's identity; one elsewhere is not, so that the proxy secret stays.
func TestRedirects(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	f := newFake(t)
	f.put("p", "", []byte("x"))
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/mn/v2/meta/moved":
			http.Redirect(w, r, "/mn/v2/meta/p", http.StatusFound)
		case "/mn/v2/meta/away":
			http.Redirect(w, r, other.URL+"/mn/v2/meta/p", http.StatusFound)
		default:
			return false
		}
		return true
	})
	n := open(t, upstreamConfig(t, f.URL, "{forward: proxy, secret: s3cret}"), nil)
	s := session("CN=x", "")
	if sm, err := n.SystemMetadata(t.Context(), s, "moved"); err != nil || sm.Identifier != "p" {
		t.Errorf("same host: %v %v", sm, err)
	}
	if r := f.last(t, "GET", "/mn/v2/meta/p"); r.Header.Get("X-Proxy-Key") != "s3cret" {
		t.Errorf("the redirected request lost the identity: %v", r.Header)
	}
	_, err := n.SystemMetadata(t.Context(), s, "away")
	wantFailure(t, err, `upstream "up" answered HTTP 302 to the system metadata of "away"`)
	if elsewhere.Load() != 0 {
		t.Error("the request followed a redirect to another host")
	}
}
