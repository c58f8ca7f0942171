// Package d1client is the small DataONE REST client the d1bridge subcommands
// use against a running node: describe and create on a member node, the node
// document, and registration with a coordinating node. Answers that are
// DataONE errors come back as *adapter.Exception (name, description), read
// from the <error> body or, on HEAD, the DataONE-Exception-* headers.
package d1client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
)

// Client calls one node's API of version 2.
type Client struct {
	// Base is the node's base URL for its role, ending in /mn or /cn, with
	// no trailing slash (what its node document calls baseURL).
	Base string
	HTTP *http.Client
	// Token gives the bearer token sent with each call; nil or "" sends
	// none (a client certificate in HTTP's transport may be the credential).
	Token func() (string, error)
}

// BaseURL is raw as a role's base URL: trailing slashes go, and a URL that
// does not end in /role (a d1bridge node's http://host:8080/d1) gets it.
func BaseURL(raw, role string) (string, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	}
	s := u.String()
	if !strings.HasSuffix(s, "/"+role) {
		s += "/" + role
	}
	return s, nil
}

// NewHTTP is an HTTP client for conns concurrent calls, presenting tc's
// client certificate and trusting its roots (tc nil: the system's). It sets
// no overall timeout, as an upload lasts as long as its bytes flow; calls
// are bounded by their context.
func NewHTTP(tc *tls.Config, conns int) *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   30 * time.Second,
		MaxIdleConnsPerHost:   max(conns, 2),
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr}
}

// TLSConfig presents the certificate in certFile (with keyFile; both or
// neither) and trusts the authorities in caFile besides the system's ("":
// the system's only). Nil when there is nothing to set.
func TLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("a client certificate needs both its certificate and its key file")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if caFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", caFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// url is Base/v2/ followed by path segments, each escaped as one segment.
func (c *Client) url(segments ...string) string {
	var b strings.Builder
	b.WriteString(c.Base + "/v2")
	for _, s := range segments {
		b.WriteString("/" + url.PathEscape(s))
	}
	return b.String()
}

// do sends req with the credential and answers the response of a 2xx; any
// other status is the DataONE error it carries.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	if c.Token != nil {
		tok, err := c.Token()
		if err != nil {
			return nil, err
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, exception(resp, req.Method+" "+req.URL.Redacted())
}

// exception reads the DataONE error of a failed answer; an answer that is
// not one (a proxy's page) is a ServiceFailure quoting its start.
func exception(resp *http.Response, what string) *adapter.Exception {
	if name := resp.Header.Get("DataONE-Exception-Name"); name != "" {
		k, _ := adapter.KindByName(name)
		return &adapter.Exception{Kind: k, Status: resp.StatusCode, DetailCode: resp.Header.Get("DataONE-Exception-DetailCode"),
			Description: resp.Header.Get("DataONE-Exception-Description")}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if e, err := adapter.DecodeException(strings.NewReader(string(body))); err == nil {
		e.Status = resp.StatusCode
		return e
	}
	snippet := strings.Join(strings.Fields(string(body)), " ")
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	k := adapter.ServiceFailure
	if resp.StatusCode == http.StatusNotFound {
		k = adapter.NotFound
	}
	return &adapter.Exception{Kind: k, Status: resp.StatusCode,
		Description: fmt.Sprintf("%s answered HTTP %d, not a DataONE error: %s", what, resp.StatusCode, snippet)}
}

// Description is what describe says of an object.
type Description struct {
	Size     int64
	Checksum adapter.Checksum
	FormatID string
}

// Describe is MNRead.describe (HEAD object/{pid}); a missing object is a
// NotFound exception.
func (c *Client) Describe(ctx context.Context, pid string) (*Description, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.url("object", pid), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	d := &Description{Size: resp.ContentLength, FormatID: resp.Header.Get("DataONE-FormatId")}
	if d.Size < 0 {
		d.Size, _ = strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	}
	alg, value, ok := strings.Cut(resp.Header.Get("DataONE-Checksum"), ",")
	if !ok {
		return nil, adapter.Errorf(adapter.ServiceFailure, "describe of %q: no DataONE-Checksum header", pid)
	}
	if a, ok := adapter.CanonicalAlgorithm(strings.TrimSpace(alg)); ok {
		alg = a
	}
	d.Checksum = adapter.Checksum{Algorithm: alg, Value: strings.ToLower(strings.TrimSpace(value))}
	return d, nil
}

// Ping is MNCore.ping (CNCore.ping): whether the node answers.
func (c *Client) Ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("monitor", "ping"), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Whoami is the subject the node sees for this client's credential
// (GET whoami, a d1bridge extension; public without one).
func (c *Client) Whoami(ctx context.Context) (string, error) {
	var doc adapter.SessionDoc
	if err := c.getDoc(ctx, c.url("whoami"), &doc); err != nil {
		return "", err
	}
	return doc.Subject, nil
}

// getDoc reads a DataONE document answer into v.
func (c *Client) getDoc(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := adapter.Decode(resp.Body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
