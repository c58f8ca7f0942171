package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportBadProgressFlag: an invalid --progress is an argument error
// and must be reported as such, before the node is contacted, as every other
// flag of import is (--pid, --checksum, --jobs, --access). It was checked
// only after the ping, the listing of every source and whoami: with no node
// answering the operator was told the node does not answer ping.
func TestImportBadProgressFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	getenv := func(string) string { return "" }
	err := importCmd(context.Background(), []string{"--node", "http://127.0.0.1:1/d1", "--token", "x", "--progress", "bogus", dir},
		getenv, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("import --progress bogus succeeded")
	}
	if !strings.Contains(err.Error(), "--progress") {
		t.Errorf("import --progress bogus: the error does not name the flag: %v", err)
	}
}

// TestTokenBadLifetimeMakesNoKey: `token --new-key FILE --lifetime -1h`
// is refused for its lifetime; it was, but only after the RSA key pair was
// made and written (FILE, FILE.pub.pem): an argument error is reported
// before anything is written.
func TestTokenBadLifetimeMakesNoKey(t *testing.T) {
	t.Parallel()
	key := t.TempDir() + "/signing.key"
	var out, errOut strings.Builder
	err := tokenCmd([]string{"--subject", "CN=x", "--new-key", key, "--lifetime", "-1h"}, func(string) string { return "" }, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "lifetime") {
		t.Fatalf("token --lifetime -1h: %v, want an error naming --lifetime", err)
	}
	if fileExists(key) || fileExists(key+".pub.pem") {
		t.Errorf("token --lifetime -1h was refused but made the key pair %s and %s.pub.pem; it printed:\n%s", key, key, errOut.String())
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestTokenNewKeyEnvLineQuoted: `token --new-key FILE` prints "in the
// environment" the line D1BRIDGE_AUTH_SIGNINGKEY=%s D1BRIDGE_AUTH_TOKENKEYS=%s
// with the paths quoted for a shell, as the YAML lines above it are: under a
// directory with a space (a home directory "Jane Doe") the line, pasted in a
// shell, ran part of the path as a command instead of setting the variables.
func TestTokenNewKeyEnvLineQuoted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/Jane Doe"
	key := dir + "/signing.key"
	var out, errOut strings.Builder
	if err := tokenCmd([]string{"--subject", "CN=x", "--new-key", key}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(errOut.String(), "\n") {
		if strings.HasPrefix(l, "D1BRIDGE_AUTH_SIGNINGKEY=") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no environment line in:\n%s", errOut.String())
	}
	got, err := exec.Command("sh", "-c", line+` sh -c 'printf "%s|%s" "$D1BRIDGE_AUTH_SIGNINGKEY" "$D1BRIDGE_AUTH_TOKENKEYS"'`).CombinedOutput()
	if want := key + "|" + key + ".pub.pem"; err != nil || string(got) != want {
		t.Errorf("the printed line %q, run in sh, sets %q (%v); want %q", line, got, err, want)
	}
}
