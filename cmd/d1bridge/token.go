package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
)

// tokenCmd is `d1bridge token`: a bearer token for a subject, signed RS256
// with the node's signing key (auth.signingKey) as the token operation signs
// them, so the node accepts it. With --new-key FILE the key is FILE, made on
// first use with its public key beside it (FILE.pub.pem), and the
// configuration lines that make a node trust it are printed. The token is the
// only thing written to stdout; messages go to stderr.
func tokenCmd(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := newFlags("token")
	path := flags.String("config", "", "YAML configuration file (its auth.signingKey, auth.tokenLifetime and node.id)")
	subject := flags.String("subject", "", "the subject the token is for, e.g. CN=Jane Doe,O=Example,C=US,DC=cilogon,DC=org (required)")
	lifetime := flags.Duration("lifetime", 0, "how long the token is valid (default auth.tokenLifetime)")
	newKey := flags.String("new-key", "", "sign with the RSA key in `FILE`, made first (with FILE.pub.pem) when there is none; prints the configuration that trusts it")
	if help, err := parseFlags(flags, args, stdout); help || err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("token: unexpected argument %q (d1bridge token --help)", flags.Arg(0))
	}
	if *subject == "" {
		return errors.New("token: --subject is required (d1bridge token --help)")
	}
	cfg, err := loadConfig(*path, getenv)
	if err != nil {
		return err
	}
	if *lifetime < 0 { // before --new-key writes anything
		return fmt.Errorf("token: --lifetime must be positive, got %s", *lifetime)
	}
	keyPath := cfg.Auth.SigningKey
	if *newKey != "" {
		if keyPath, err = signingKey(*newKey, stderr); err != nil {
			return err
		}
	}
	if keyPath == "" {
		return errors.New("token: no signing key: set auth.signingKey, or make one with --new-key FILE")
	}
	if *lifetime == 0 {
		*lifetime = cfg.Auth.TokenLifetime
	}
	if *lifetime <= 0 {
		return fmt.Errorf("token: --lifetime must be positive, got %s", *lifetime)
	}
	issuer, err := auth.LoadIssuer(keyPath, cfg.Node.ID, *lifetime)
	if err != nil {
		return fmt.Errorf("token: signing key: %w", err)
	}
	tok, err := issuer.Issue(&adapter.Session{Subject: *subject})
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintf(stderr, "token for %s, valid until %s\n", *subject, time.Now().Add(*lifetime).UTC().Format(time.RFC3339))
	fmt.Fprintln(stdout, tok)
	return nil
}

// signingKey makes an RSA key pair at path (the private key, mode 0600) and
// path.pub.pem (its public key) unless the key is there, then prints to w the
// configuration lines that make a node sign and accept tokens with it. It
// answers the key's absolute path.
func signingKey(path string, w io.Writer) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	pub := abs + ".pub.pem"
	var key *rsa.PublicKey
	switch _, err := os.Stat(abs); {
	case errors.Is(err, fs.ErrNotExist):
		priv, err := rsa.GenerateKey(rand.Reader, 3072)
		if err != nil {
			return "", err
		}
		key = &priv.PublicKey
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			return "", fmt.Errorf("token: --new-key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return "", err
		}
		if err := writeNew(abs, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return "", fmt.Errorf("token: --new-key: %w", err)
		}
		fmt.Fprintln(w, "made the signing key", abs)
	case err != nil:
		return "", fmt.Errorf("token: --new-key: %w", err)
	default:
		fmt.Fprintln(w, "using the signing key", abs)
	}
	if _, err := os.Stat(pub); errors.Is(err, fs.ErrNotExist) {
		if key == nil {
			is, err := auth.LoadIssuer(abs, "", time.Hour)
			if err != nil {
				return "", fmt.Errorf("token: --new-key: %w", err)
			}
			key = is.PublicKey()
		}
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			return "", err
		}
		if err := writeNew(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
			return "", fmt.Errorf("token: --new-key: %w", err)
		}
		fmt.Fprintln(w, "wrote its public key", pub)
	}
	fmt.Fprintf(w, `# The node signs tokens with this key (the token operation, d1bridge token) and
# accepts them; other nodes accept them with the public key in their auth.tokenKeys.
# In the configuration file (add to auth.tokenKeys if it lists keys already):
auth:
  signingKey: %q
  tokenKeys: [%q]
# or in the environment:
D1BRIDGE_AUTH_SIGNINGKEY=%s D1BRIDGE_AUTH_TOKENKEYS=%s
`, abs, pub, shellQuote(abs), shellQuote(pub))
	return abs, nil
}

// shellQuote quotes s for a POSIX shell: a path with spaces or quotes is one
// word when the line is pasted.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeNew writes a file that must not exist yet, with mode perm.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}
