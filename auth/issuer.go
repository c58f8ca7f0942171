package auth

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/golang-jwt/jwt/v5"
)

// Issuer signs bearer tokens for sessions (the token operation, Metacat's GET
// /token): RS256 JWTs shaped like the CN's, which this node's Authenticator
// accepts when given PublicKey.
type Issuer struct {
	key      *rsa.PrivateKey
	issuer   string
	lifetime time.Duration
	now      func() time.Time
}

// LoadIssuer reads an RSA private key (PKCS#1 or PKCS#8 PEM) from path.
func LoadIssuer(path, issuer string, lifetime time.Duration) (*Issuer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return nil, fmt.Errorf("%s: no RSA private key (PEM RSA PRIVATE KEY or PRIVATE KEY)", path)
		}
		var key any
		switch blk.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rk, ok := key.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%s: a %T key cannot sign RS256 tokens", path, key)
		}
		return NewIssuer(rk, issuer, lifetime), nil
	}
}

// NewIssuer signs with key; tokens name issuer and last lifetime.
func NewIssuer(key *rsa.PrivateKey, issuer string, lifetime time.Duration) *Issuer {
	return &Issuer{key: key, issuer: issuer, lifetime: lifetime, now: time.Now}
}

// PublicKey verifies the tokens the issuer signs.
func (i *Issuer) PublicKey() *rsa.PublicKey { return &i.key.PublicKey }

// Issue signs a token for the session's primary subject. Groups are not put in
// the token: they are looked up again whenever it is used. The token expires
// no later than the credential the session came from (a token, a client
// certificate), so a credential cannot be renewed into one that outlives it.
func (i *Issuer) Issue(s *adapter.Session) (string, error) {
	if s.Subject == "" || s.Subject == adapter.SubjectPublic {
		return "", adapter.Errorf(adapter.NotAuthorized, "tokens are issued to authenticated callers only")
	}
	now := i.now()
	exp := now.Add(i.lifetime)
	if !s.Expires.IsZero() && s.Expires.Before(exp) {
		exp = s.Expires
	}
	claims := jwt.MapClaims{
		"sub": s.Subject, "userId": s.Subject, "iss": i.issuer,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": exp.Unix(),
		"issuedAt": now.UTC().Format(time.RFC3339), "ttl": int64(exp.Sub(now).Seconds()),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(i.key)
	if err != nil {
		return "", adapter.Wrap(adapter.ServiceFailure, err, "signing the token")
	}
	return tok, nil
}
