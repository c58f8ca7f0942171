// Package webdav keeps object bytes on a WebDAV server (nginx dav, Apache
// mod_dav, ownCloud/Nextcloud, rclone serve webdav...): a node.Blobs in plain
// HTTP, whose requests go through the upstream's client (metrics, breaker,
// retries of GET and HEAD).
//
// Keys are laid out by upstream.BlobName under the prefix collection:
// <baseURL><prefix>/<h[0:2]>/<h[2:4]>/<key or ~digest>, every segment
// percent-escaped.
//
// Put streams the bytes (chunked; memory is one 32 KiB look-ahead, so a reader
// that fails at once costs no request) to a temporary resource
// <prefix>/tmp/<random>, then MOVEs it onto the key with Overwrite: T, so a
// key never shows a partial object; a failed Put deletes its temporary
// resource (retrying while the server still holds the aborted PUT's lock),
// and the key too when the MOVE got no answer (the transport failed, or the
// caller gave up), since the server may have moved it all the same.
// The prefix and tmp collections are made (MKCOL) on the first Put, which also
// sweeps temporary resources older than StaleAfter (a crash's leftovers).
// When a MOVE answers 409 Conflict (RFC 4918: the target's collection is
// missing), the fan-out collections are made and the MOVE is sent again
// (nginx makes them itself). An overwrite is atomic when the server renames
// (nginx does); durability is the server's (nginx does not fsync).
//
// Get returns an upstream.Seekable when the server sends a Content-Length
// and a validator (upstream.PinOf): ranges reopen the resource with a ranged
// GET pinned by If-Match to the strong ETag first read, else by
// If-Unmodified-Since to its Last-Modified. A GET redirected to another path
// (nginx redirects a collection to its path with a "/") is NotFound. Delete
// treats 404 as done.
//
// Options (upstreams[].options):
//
//	prefix:        a collection path under baseURL, such as d1bridge/objects
//	holdings:      the collection path under baseURL that the store lists as
//	               a harvest source (default: prefix); see List
//	username:      basic authentication user (default: none)
//	password:      its password; or passwordFile, a file holding it
package webdav

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// Options are the upstream's options for a WebDAV store.
type Options struct {
	Prefix       string  `yaml:"prefix"`
	Holdings     *string `yaml:"holdings"`
	Username     string  `yaml:"username"`
	Password     string  `yaml:"password"`
	PasswordFile string  `yaml:"passwordFile"`
}

// Store is a node.Blobs on a WebDAV server. It is safe for concurrent use.
type Store struct {
	c        *upstream.Client
	base     *url.URL // the server's base URL, ending in /
	prefix   []string // the prefix's segments, unescaped
	holdings []string // the holdings collection's segments, unescaped
	// pageSize and pageCollections bound one List call: the files it lists,
	// the collections it reads.
	pageSize, pageCollections int
	user, password            string

	mu       sync.Mutex
	tmpReady bool // the tmp collection is known to exist
	swept    bool // stale temporary resources were looked for
}

var (
	_ node.Blobs  = (*Store)(nil)
	_ node.Lister = (*Store)(nil)
)

// New opens the store u describes, sending every request through c. It does
// not contact the server.
func New(u config.Upstream, c *upstream.Client) (*Store, error) {
	s, err := parse(u)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on. It reads passwordFile.
func CheckOptions(u config.Upstream) error {
	_, err := parse(u)
	return err
}

// parse decodes and checks u's options into a store without its upstream
// client.
func parse(u config.Upstream) (*Store, error) {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, fmt.Errorf("webdav: %w", err)
	}
	var errs []error
	base, err := url.Parse(u.BaseURL)
	switch {
	case err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "":
		errs = append(errs, fmt.Errorf("baseURL %q is not an http(s) URL", u.BaseURL))
	case base.RawQuery != "" || base.Fragment != "" || base.User != nil:
		errs = append(errs, fmt.Errorf("baseURL %q must have no query, fragment or credentials (use options.username)", u.BaseURL))
	case !strings.HasSuffix(base.Path, "/"):
		base.Path += "/"
		base.RawPath = ""
	}
	s := &Store{base: base, user: o.Username, password: o.Password, pageSize: listPage, pageCollections: listCollections}
	s.prefix, errs = collectionPath("prefix", o.Prefix, errs)
	s.holdings = s.prefix
	if o.Holdings != nil {
		s.holdings, errs = collectionPath("holdings", *o.Holdings, errs)
	}
	if o.Password != "" && o.PasswordFile != "" {
		errs = append(errs, errors.New("options.password and options.passwordFile are both set; keep one"))
	}
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("options.passwordFile: %w", err))
		}
		s.password = strings.TrimRight(string(b), "\r\n")
	}
	if o.Username == "" && s.password != "" {
		errs = append(errs, errors.New("options.password is set without options.username"))
	}
	if err := upstream.OptionProblems("webdav", u, errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// collectionPath is the segments of the collection path the option name
// gives, adding its problems to errs.
func collectionPath(name, path string, errs []error) ([]string, []error) {
	var segs []string
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		switch seg {
		case "":
			if path != "" && strings.Trim(path, "/") != "" {
				errs = append(errs, fmt.Errorf("options.%s %q has an empty segment", name, path))
			}
		case ".", "..":
			errs = append(errs, fmt.Errorf("options.%s %q has a %q segment", name, path, seg))
		default:
			segs = append(segs, seg)
		}
	}
	return segs, errs
}

// at is the URL of the resource at segs (unescaped) under the base URL; a
// collection (ending in /) when dir.
func (s *Store) at(dir bool, segs ...string) string {
	var b strings.Builder
	b.WriteString(s.base.String())
	for i, seg := range segs {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(seg))
	}
	if dir && len(segs) > 0 {
		b.WriteByte('/')
	}
	return b.String()
}

// resource is the URL of the resource at segs under the prefix.
func (s *Store) resource(dir bool, segs ...string) string {
	return s.at(dir, append(s.prefix[:len(s.prefix):len(s.prefix)], segs...)...)
}

// object is the URL of key's bytes.
func (s *Store) object(key string) string {
	return s.resource(false, strings.Split(upstream.BlobName(key), "/")...)
}

// tmpCollection holds the temporary resources of Puts, under the prefix: a
// name no collection the store shares is likely to have (it was "tmp", whose
// files a shared collection's own tmp/ lost to the sweep).
const tmpCollection = ".d1bridge-tmp"

// tmpName is a fresh temporary resource: 32 hexadecimal digits, the only
// names Sweep deletes.
func (s *Store) tmpName() string {
	var b [16]byte
	rand.Read(b[:])
	return s.resource(false, tmpCollection, hex.EncodeToString(b[:]))
}

// request makes a request with the store's credentials.
func (s *Store) request(ctx context.Context, method, target string) *http.Request {
	req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, method), method, target, nil)
	if err != nil {
		panic(err) // the URLs are built here, from a parsed base
	}
	if s.user != "" {
		req.SetBasicAuth(s.user, s.password)
	}
	return req
}

// Ping checks that the server answers for the base collection, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	req := s.request(ctx, "PROPFIND", s.base.String())
	req.Header.Set("Depth", "0")
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return s.c.Error(err, "the base collection")
	}
	if resp.StatusCode != http.StatusMultiStatus && resp.StatusCode/100 != 2 {
		return s.c.Exception(resp, "the base collection")
	}
	upstream.Discard(resp)
	return nil
}
