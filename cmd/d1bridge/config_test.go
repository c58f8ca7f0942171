package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheck runs the binary's `config check FILE`: a good file prints
// "FILE: ok" and exits 0; a file with bad keys, or with bad options of an
// upstream's mapping, prints every problem on stderr and exits 1, without
// contacting the upstream (its address does not answer).
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("Bearer x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	embedded, err := os.ReadFile("../../config/examples/embedded.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const head = "node: {id: urn:node:EXAMPLE, baseURL: https://repo.example.org/d1}\nupstreams:\n" +
		"  - name: legacy\n    type: http\n    baseURL: http://127.0.0.1:1\n    options:\n"
	for _, tc := range []struct {
		name, file string
		want       []string // the lines of stderr; none: success
	}{
		{name: "good", file: head + "      headerFiles: {Authorization: " + token + "}\n" +
			"      get: {url: \"/records/{key}/content\"}\nstore: legacy\n"},
		{name: "bad keys, then options once the keys are valid", file: "listen: nowhere\n" + head + "      get: {url: \"/x/{kye}\"}\nstore: legacy\n",
			want: []string{"d1bridge: invalid configuration:", `listen: "nowhere" is not a host:port address`}},
		{name: "bad http options", file: head +
			"      headerFiles: {Authorization: /nonexistent/archive-token}\n" +
			"      get: {url: \"/records/{kye}/content\"}\n" +
			"      list: {url: \"/records\", paging: cursor, items: records, fields: {key: id}}\n" +
			"store: legacy\n",
			want: []string{"d1bridge: invalid configuration:",
				`http: upstream "legacy": options.headerFiles.Authorization: open /nonexistent/archive-token: no such file or directory`,
				`http: upstream "legacy": options.get.url: unknown placeholder {kye}; this template can use {key}, {key.query}, {key.blob}`,
				`http: upstream "legacy": options.list.url: paging cursor needs {cursor} in the URL`,
				`http: upstream "legacy": options.list.next: required with paging cursor: the path of the next page's token`}},
		{name: "the embedded example names a token key file that is not there", file: string(embedded),
			want: []string{"d1bridge: invalid configuration:",
				"auth.tokenKeys[0]: open /etc/d1bridge/cn-signing.crt: no such file or directory"}},
		{name: "every file serve reads, each problem", file: "listen: nowhere\nauth: {tokenKeys: [" + token + ", /nonexistent/b.pem], signingKey: /nonexistent/signing.key}\n" +
			"tls: {cert: /nonexistent/server.crt, key: /nonexistent/server.key, clientCAs: " + token + "}\n",
			want: []string{"d1bridge: invalid configuration:",
				`listen: "nowhere" is not a host:port address`,
				"auth.tokenKeys[0]: no certificate or public key found in " + token,
				"auth.tokenKeys[1]: open /nonexistent/b.pem: no such file or directory",
				"auth.signingKey: open /nonexistent/signing.key: no such file or directory",
				"tls: open /nonexistent/server.crt: no such file or directory",
				"tls.clientCAs: no certificate in " + token}},
		{name: "unknown key with the closest known one", file: "node:\n  baseurl: https://repo.example.org/d1\n",
			want: []string{"d1bridge: {file}:2: unknown key node.baseurl; did you mean node.baseURL?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "d1bridge.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binPath, "config", "check", path)
			cmd.Env = withoutD1Bridge(os.Environ())
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if len(tc.want) == 0 {
				if err != nil || stdout.String() != path+": ok\n" || stderr.Len() != 0 {
					t.Fatalf("%v\nstdout: %s\nstderr: %s", err, &stdout, &stderr)
				}
				return
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", err)
			}
			want := strings.ReplaceAll(strings.Join(tc.want, "\n"), "{file}", path)
			if got := strings.TrimSuffix(stderr.String(), "\n"); got != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %s", &stdout)
			}
		})
	}
}
