package auth

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/golang-jwt/jwt/v5"
)

// ProxyTrust says when the subject a front proxy forwards in headers is believed
// (enableSessionFromHeader): only with the shared secret, or only from the
// listed addresses, or both when both are set.
type ProxyTrust struct {
	SubjectHeader string       // carries the caller's subject (a certificate DN)
	VerifyHeader  string       // when set, must say SUCCESS (the proxy verified the certificate)
	SecretHeader  string       // carries Secret
	Secret        string       // the proxy's shared secret
	Addresses     []*net.IPNet // remote addresses the proxy connects from
}

// Authenticator derives sessions from requests.
type Authenticator struct {
	tokenKeys  []*rsa.PublicKey
	clientCAs  *x509.CertPool // nil: the handshake's verification alone
	proxy      *ProxyTrust    // nil: forwarded subjects are ignored
	groups     GroupDirectory
	leeway     time.Duration
	groupsFail bool // a directory failure fails the request instead of degrading
	log        *slog.Logger
	creds      *credentialCache // verified credentials; nil: every request verifies
	now        func() time.Time
}

// AuthenticatorOptions configures an Authenticator.
type AuthenticatorOptions struct {
	// TokenKeys verify bearer tokens (RS256): the CN's certificates or public keys.
	TokenKeys []*rsa.PublicKey
	// ClientCAs are the authorities of tls.clientCAs: a client certificate is
	// verified against them again whenever the cache no longer believes it, so
	// that a reload which drops an authority ends its certificates' sessions
	// on connections already open too.
	ClientCAs *x509.CertPool
	// Proxy, when set, enables sessions from a trusted front proxy's headers.
	Proxy *ProxyTrust
	// Groups, when set, appends the subject's directory groups (enableAppendLdapGroups).
	Groups GroupDirectory
	// FailOnDirectoryError answers ServiceFailure when the directory cannot be
	// asked; otherwise the session continues without groups.
	FailOnDirectoryError bool
	// Log receives directory failures the session went on without; nil: none.
	Log *slog.Logger
	// CredentialCacheSize bounds the verified tokens and certificates
	// remembered (see cache.go): 0 is DefaultCredentialCacheSize, a negative
	// size remembers none and verifies every request.
	CredentialCacheSize int
}

// NewAuthenticator builds an Authenticator.
func NewAuthenticator(o AuthenticatorOptions) *Authenticator {
	a := &Authenticator{tokenKeys: o.TokenKeys, clientCAs: o.ClientCAs, proxy: o.Proxy, groups: o.Groups,
		leeway: 30 * time.Second, groupsFail: o.FailOnDirectoryError, log: o.Log, now: time.Now}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	size := o.CredentialCacheSize
	if size == 0 {
		size = DefaultCredentialCacheSize
	}
	a.creds = newCredentialCache(size, credentialTTL, func() time.Time { return a.now() })
	return a
}

// GroupDirectory finds the groups a subject belongs to, as subjects.
type GroupDirectory interface {
	Groups(ctx context.Context, subject string) ([]string, error)
}

// Session derives the caller's session: a client certificate (when d1bridge
// terminates TLS) first, then a bearer token, then a trusted proxy's forwarded
// subject; none gives the public session. A credential that was presented and
// cannot be used gives a public session carrying the reason (CredentialError):
// the operations that may raise InvalidToken answer it with that reason, never
// serving the caller as public; the others (ping, capabilities) ignore it.
func (a *Authenticator) Session(r *http.Request) (*adapter.Session, error) {
	var (
		subjects []string
		expires  time.Time
		err      error
	)
	certified := r.TLS != nil && len(r.TLS.PeerCertificates) > 0
	token := bearer(r)
	switch {
	case certified:
		subjects, expires, err = a.certSubjects(memoOf(r.Context()), r.TLS.PeerCertificates)
	case token != "":
		subjects, expires, err = a.tokenSubjects(memoOf(r.Context()), token)
	case a.proxy != nil && r.Header.Get(a.proxy.SubjectHeader) != "":
		subjects, err = a.proxySubjects(r)
	}
	if err != nil {
		s := adapter.PublicSession()
		s.CredentialError = err.Error()
		return s, nil
	}
	if len(subjects) == 0 {
		return adapter.PublicSession(), nil
	}
	if a.groups != nil {
		groups, gerr := a.groups.Groups(r.Context(), subjects[0])
		if gerr != nil {
			if a.groupsFail {
				return nil, adapter.Wrap(adapter.ServiceFailure, gerr, "the group directory cannot be reached")
			}
			a.log.WarnContext(r.Context(), "going on without directory groups", "subject", subjects[0], "err", gerr)
		}
		subjects = append(subjects, groups...)
	}
	s := &adapter.Session{Subject: subjects[0], Expires: expires}
	if !certified {
		s.Token = token // the session came from it (or from a proxy, with none)
	}
	s.Subjects = make([]string, 0, len(subjects)+2)
	for _, x := range subjects {
		s.Subjects = appendNew(s.Subjects, x)
	}
	s.Subjects = appendNew(appendNew(s.Subjects, adapter.SubjectAuthenticatedUser), adapter.SubjectPublic)
	return s, nil
}

// appendNew appends x to xs unless xs holds it.
func appendNew(xs []string, x string) []string {
	if slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// certSubjects reads the subjects of a client certificate (the first of the
// chain the client presented), remembering them until its NotAfter. The TLS
// handshake verified it, but a kept-alive connection can outlive the
// certificate and the authorities trusted then: it is checked again whenever
// the cache no longer believes it.
func (a *Authenticator) certSubjects(m *connMemo, chain []*x509.Certificate) ([]string, time.Time, error) {
	c := chain[0]
	return a.believe(m, credential{cert: c}, func() ([]string, time.Time, error) {
		if err := a.checkCertificate(chain); err != nil {
			return nil, time.Time{}, err
		}
		subjects, err := CertificateSubjects(c)
		return subjects, c.NotAfter, err
	})
}

// checkCertificate refuses a client certificate outside its validity (within
// the clock leeway) or, with ClientCAs, not signed by one of them.
func (a *Authenticator) checkCertificate(chain []*x509.Certificate) error {
	c, now := chain[0], a.now()
	switch {
	case now.After(c.NotAfter.Add(a.leeway)):
		return fmt.Errorf("the client certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	case now.Add(a.leeway).Before(c.NotBefore):
		return fmt.Errorf("the client certificate is not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	if a.clientCAs == nil {
		return nil
	}
	intermediates := x509.NewCertPool()
	for _, x := range chain[1:] {
		intermediates.AddCert(x)
	}
	at := now // within the certificate's dates: the leeway above decided them
	if at.Before(c.NotBefore) {
		at = c.NotBefore
	} else if at.After(c.NotAfter) {
		at = c.NotAfter
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: a.clientCAs, Intermediates: intermediates, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("the client certificate is no longer trusted: %v", err)
	}
	return nil
}

// tokenSubjects gives the subjects of a bearer token, verifying it.
func (a *Authenticator) tokenSubjects(m *connMemo, token string) ([]string, time.Time, error) {
	if len(a.tokenKeys) == 0 {
		return nil, time.Time{}, errors.New("bearer tokens are not accepted by this node (no token keys are configured)")
	}
	return a.believe(m, credential{token: token}, func() ([]string, time.Time, error) {
		return a.verifyToken(token)
	})
}

// believe gives the subjects of cred and its expiry: from the connection's
// memo or the cache when it was verified before and has not expired, else
// from verify, remembered until the expiry it gives. A credential verify
// refuses is not remembered: see cache.go.
func (a *Authenticator) believe(m *connMemo, cred credential, verify func() ([]string, time.Time, error)) ([]string, time.Time, error) {
	if v, ok := m.get(a, cred); ok {
		return v.subjects, v.until, nil
	}
	k := cred.key()
	if v, fresh, ok := a.creds.get(k); ok {
		m.keep(a, cred, v, fresh)
		return v.subjects, v.until, nil
	}
	subjects, until, err := verify()
	if err == nil {
		subjects, err = usableSubjects(subjects)
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	if v, fresh, ok := a.creds.add(k, subjects, until); ok {
		m.keep(a, cred, v, fresh)
	}
	return subjects, until, nil
}

// usableSubjects refuses a credential whose primary subject is empty or holds
// a control character, and drops such subjects among the others (a
// SubjectInfo's): decisions are cached under the subjects joined by NUL,
// which must not be able to join two subjects into another session's, and a
// dropped subject only takes rights away.
func usableSubjects(subjects []string) ([]string, error) {
	unusable := func(x string) bool { return strings.TrimSpace(x) == "" || strings.IndexFunc(x, unicode.IsControl) >= 0 }
	switch {
	case len(subjects) == 0:
		return subjects, nil
	case strings.TrimSpace(subjects[0]) == "":
		return nil, errors.New("the credential names an empty subject")
	case unusable(subjects[0]):
		return nil, fmt.Errorf("the subject %q holds a control character", subjects[0])
	case slices.ContainsFunc(subjects[1:], unusable):
		return append(subjects[:1:1], slices.DeleteFunc(slices.Clone(subjects[1:]), unusable)...), nil
	}
	return subjects, nil
}

// verifyToken verifies a DataONE JWT: RS256 only (so neither "none" nor an HMAC
// keyed with a public key passes), signed by one of the configured keys, within
// its exp and nbf. The subject is the sub claim; exp is returned with it.
func (a *Authenticator) verifyToken(token string) ([]string, time.Time, error) {
	var (
		lastErr    error
		lastClaims jwt.MapClaims
	)
	for _, key := range a.tokenKeys {
		claims := jwt.MapClaims{}
		_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return key, nil },
			jwt.WithValidMethods([]string{"RS256"}), jwt.WithLeeway(a.leeway), jwt.WithExpirationRequired(),
			jwt.WithTimeFunc(a.now))
		if err != nil {
			lastErr, lastClaims = err, claims
			if errors.Is(err, jwt.ErrTokenSignatureInvalid) {
				continue // another configured key may have signed it
			}
			break
		}
		sub, _ := claims["sub"].(string)
		if sub == "" {
			sub, _ = claims["userId"].(string)
		}
		if sub == "" {
			return nil, time.Time{}, errors.New("the token names no subject (sub claim)")
		}
		exp, err := claims.GetExpirationTime()
		if err != nil || exp == nil { // required and validated above
			return nil, time.Time{}, tokenError(jwt.ErrTokenRequiredClaimMissing, claims)
		}
		return []string{sub}, exp.Time, nil
	}
	return nil, time.Time{}, tokenError(lastErr, lastClaims)
}

// tokenError says why a token failed verification, in the words of the
// InvalidToken description: when it expired, from when it is valid, or what
// is wrong with its form or signature.
func tokenError(err error, claims jwt.MapClaims) error {
	at := func(get func() (*jwt.NumericDate, error)) string {
		if d, derr := get(); derr == nil && d != nil {
			return d.UTC().Format(time.RFC3339)
		}
		return "an unreadable time"
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return fmt.Errorf("the bearer token is malformed (not a signed JWT): %v", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return fmt.Errorf("the bearer token's signature does not verify with any key this node trusts: %v", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return fmt.Errorf("the bearer token expired at %s", at(claims.GetExpirationTime))
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return fmt.Errorf("the bearer token is not valid yet: not before %s", at(claims.GetNotBefore))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return fmt.Errorf("the bearer token has no expiry time (exp claim): %v", err)
	}
	return fmt.Errorf("the bearer token is not valid: %v", err)
}

// proxySubjects believes a forwarded subject only from a trusted proxy.
func (a *Authenticator) proxySubjects(r *http.Request) ([]string, error) {
	p := a.proxy
	for _, h := range []string{p.SubjectHeader, p.VerifyHeader, p.SecretHeader} {
		if h != "" && len(r.Header.Values(h)) > 1 {
			// A proxy that appends to a header the client sent, instead of
			// replacing it, would have the client's value believed first.
			return nil, fmt.Errorf("the %s header was sent %d times: a proxy must replace it, not add to it", h, len(r.Header.Values(h)))
		}
	}
	if p.Secret == "" && len(p.Addresses) == 0 {
		// Nothing would tell the proxy from anyone else (config validation
		// refuses this too): believe no one rather than everyone.
		return nil, errors.New("a forwarded subject was sent, but no proxy secret or address is configured to trust it")
	}
	if p.Secret != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(p.SecretHeader)), []byte(p.Secret)) != 1 {
		return nil, errors.New("a forwarded subject was sent without the proxy secret")
	}
	if len(p.Addresses) > 0 {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		ip := net.ParseIP(host)
		if err != nil || ip == nil || !slices.ContainsFunc(p.Addresses, func(n *net.IPNet) bool { return n.Contains(ip) }) {
			return nil, fmt.Errorf("a forwarded subject was sent from %s, which is not a trusted proxy address", host)
		}
	}
	if p.VerifyHeader != "" && !strings.EqualFold(r.Header.Get(p.VerifyHeader), "SUCCESS") {
		return nil, errors.New("the proxy did not verify the client certificate")
	}
	subject := strings.TrimSpace(r.Header.Get(p.SubjectHeader))
	if subject == "" {
		return nil, errors.New("the forwarded subject is blank")
	}
	subject, err := ForwardedDN(subject)
	if err != nil {
		return nil, err
	}
	return usableSubjects([]string{subject})
}

// LoadTokenKeys reads RSA public keys from PEM files holding certificates or
// public keys.
func LoadTokenKeys(paths []string) ([]*rsa.PublicKey, error) {
	var keys []*rsa.PublicKey
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for {
			var blk *pem.Block
			if blk, b = pem.Decode(b); blk == nil {
				break
			}
			var pub crypto.PublicKey
			switch blk.Type {
			case "CERTIFICATE":
				c, err := x509.ParseCertificate(blk.Bytes)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
				pub = c.PublicKey
			case "PUBLIC KEY":
				if pub, err = x509.ParsePKIXPublicKey(blk.Bytes); err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
			case "RSA PUBLIC KEY":
				if pub, err = x509.ParsePKCS1PublicKey(blk.Bytes); err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
			default:
				continue
			}
			rk, ok := pub.(*rsa.PublicKey)
			if !ok {
				return nil, fmt.Errorf("%s: a %T key cannot verify RS256 tokens", p, pub)
			}
			keys = append(keys, rk)
		}
	}
	if len(keys) == 0 && len(paths) > 0 {
		return nil, fmt.Errorf("no certificate or public key found in %s", strings.Join(paths, ", "))
	}
	return keys, nil
}
