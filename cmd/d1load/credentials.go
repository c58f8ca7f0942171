package main

// The workload's credentials: a token given as is, or one signed here for a
// subject and renewed before it expires, made into its Authorization header
// once.

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// credentials give the Authorization header of each request.
type credentials struct {
	static  string // -token's header value, or ""
	key     *rsa.PrivateKey
	subject string

	mu     sync.Mutex // one signer at a time
	issued atomic.Pointer[issued]
}

// issued is a signed token's header value and its expiry.
type issued struct {
	header string
	exp    time.Time
}

func newCredentials(o *options) (*credentials, error) {
	c := &credentials{subject: o.subject}
	if o.token != "" {
		c.static = "Bearer " + o.token
	}
	if o.keyFile == "" {
		return c, nil
	}
	b, err := os.ReadFile(o.keyFile)
	if err != nil {
		return nil, fmt.Errorf("-key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("-key %s: no PEM block", o.keyFile)
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		c.key = k
		return c, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("-key %s: not a PKCS#1 or PKCS#8 private key: %w", o.keyFile, err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("-key %s: a %T cannot sign RS256 tokens", o.keyFile, k)
	}
	c.key = rk
	return c, nil
}

// authorization is the Authorization header to send ("" for none): the static
// token, or one signed here, valid for an hour and renewed when less than 10
// minutes remain. The header value is made once per token and read without a
// lock: the client shares the CPUs with the node it measures, and a request
// with a token should cost it no more than the header's bytes.
func (c *credentials) authorization() (string, error) {
	if c.key == nil {
		return c.static, nil
	}
	const renewBefore = 10 * time.Minute
	if t := c.issued.Load(); t != nil && time.Until(t.exp) > renewBefore {
		return t.header, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t := c.issued.Load(); t != nil && t.exp.Sub(now) > renewBefore {
		return t.header, nil
	}
	exp := now.Add(time.Hour)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"sub": c.subject, "iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": exp.Unix(), "iss": "d1load",
	}).SignedString(c.key)
	if err != nil {
		return "", err
	}
	t := &issued{header: "Bearer " + tok, exp: exp}
	c.issued.Store(t)
	return t.header, nil
}
