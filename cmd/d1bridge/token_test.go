package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
)

// TestTokenOperation: with auth.signingKey the token operation (v1 and v2)
// issues a token for the caller that this node then accepts, as whoami shows;
// a caller without a credential gets InvalidToken; without a key it is
// NotImplemented.
func TestTokenOperation(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyPath := authWrite(t, dir, "signing.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	certPath, _, _, _ := authTokenKeyFiles(t)
	s := startServer(t, filepath.Join(dir, "data"), "D1BRIDGE_AUTH_SIGNINGKEY="+keyPath, "D1BRIDGE_AUTH_TOKENKEYS="+certPath)

	const alice = "CN=Alice Token,O=Test,C=US,DC=cilogon,DC=org"
	for _, v := range []string{"v1", "v2"} {
		r := authDo(t, s, http.MethodGet, "/d1/mn/"+v+"/token", authToken(t, authCNKey(), alice))
		if !wantStatus(t, r, http.StatusOK) {
			continue
		}
		issued := string(bytes.TrimSpace(r.Body))
		var who adapter.SessionDoc
		w := authDo(t, s, http.MethodGet, "/d1/mn/v2/whoami", issued)
		if err := adapter.Decode(bytes.NewReader(w.Body), &who); err != nil || who.Subject != alice {
			t.Errorf("%s: the issued token gives whoami %q (%v), want %q", v, who.Subject, err, alice)
		}
	}
	authWantError(t, s.get(t, "/d1/mn/v2/token"), http.StatusUnauthorized, "InvalidToken")

	plain := startServer(t, "", "D1BRIDGE_AUTH_TOKENKEYS="+certPath)
	authWantError(t, authDo(t, plain, http.MethodGet, "/d1/mn/v2/token", authToken(t, authCNKey(), alice)), http.StatusNotImplemented, "NotImplemented")
}
