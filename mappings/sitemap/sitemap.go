// Package sitemap is the sitemap mapping: a web site that publishes its
// datasets as pages with schema.org Dataset JSON-LD (the science-on-schema.org
// guidelines; what DataONE's mnlite crawls), listed in a sitemap, as a
// node.DatasetSource and the node.Reader of the files the pages point at.
// Every request goes through the upstream's client (metrics, breaker, retries
// of GET).
//
// Walk reads the sitemap (a sitemap index: each of its sitemaps, in order;
// gzip'd sitemaps are read as well, known by their first bytes), each whole
// within the upstream's timeout. Every <url> whose <lastmod> is at or after
// since (every one when since is zero, or its lastmod is missing; a lastmod of
// a day counts the whole day) and that matches include is fetched, up to
// 16 MiB within the upstream's timeout, and its first
// <script type="application/ld+json"> block holding a Dataset node (at its top,
// in a list, in @graph, or as mainEntity; @type Dataset with or without a
// schema.org prefix) becomes a node.Dataset:
//
//	ID        the Dataset's @id when it is an http(s) URL or a DOI, else its
//	          identifier (a string, a PropertyValue's value or url, the first
//	          of a list), else the page's URL
//	Version   the page's lastmod as written, else the Dataset's dateModified
//	Modified  the lastmod, else dateModified
//	Metadata  the JSON-LD block exactly as on the page (trimmed), format
//	          science-on-schema.org/Dataset;ld+json
//	Files     one per distribution DataDownload with a contentUrl: the
//	          absolute URL is its key; its name (else the URL's last segment)
//	          the file name; encodingFormat the format when it is a DataONE
//	          format id (else one known from the name's extension); contentSize
//	          the size when it is whole bytes ("1234", "1234 B", "1234 bytes");
//	          an spdx:checksum with an algorithm DataONE knows the checksum
//
// A page without a JSON-LD Dataset (an "about" page) is passed over, unless
// a dataset was registered from it: that one stays as it was, its pass
// counted failed (node.ErrNotADataset), until its page is gone. A page
// that answers an error, whose JSON-LD is malformed or that cannot be read is
// a Dataset with the page's URL as ID and Problem set, and the walk goes on;
// unless the upstream's breaker is open, which ends the walk. A sitemap that
// cannot be read ends the walk with a ServiceFailure naming its URL.
//
// Get (node.Reader) reads a file by its key, an http(s) URL, streamed: an
// upstream.Seekable when the server sends a Content-Length, whose ranges
// reopen the URL with a ranged GET and If-Match on the strong ETag first
// read. 404 and 410 are NotFound.
//
// Options (upstreams[].options):
//
//	sitemap:  the URL of the sitemap or sitemap index, absolute or relative to
//	          baseURL (default: baseURL + /sitemap.xml)
//	include:  a regular expression a page's URL must match to be read
//	          (default: every page)
package sitemap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// Options are the upstream's options for a sitemap source.
type Options struct {
	Sitemap string `yaml:"sitemap"`
	Include string `yaml:"include"`
}

// Source is a site's sitemap of Dataset pages as a node.DatasetSource and
// node.Reader. It is safe for concurrent use.
type Source struct {
	c       *upstream.Client
	sitemap *url.URL
	include *regexp.Regexp // nil: every page
}

var (
	_ node.DatasetSource = (*Source)(nil)
	_ node.Reader        = (*Source)(nil)
)

// New opens the source u describes, sending every request through c. It does
// not contact the site.
func New(u config.Upstream, c *upstream.Client) (*Source, error) {
	s, err := parse(u)
	if err != nil {
		return nil, err
	}
	s.c = c
	return s, nil
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on.
func CheckOptions(u config.Upstream) error {
	_, err := parse(u)
	return err
}

// parse decodes and checks u's options into a source without its client.
func parse(u config.Upstream) (*Source, error) {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, fmt.Errorf("sitemap: %w", err)
	}
	var errs []error
	s := &Source{}
	base, err := url.Parse(u.BaseURL)
	switch {
	case err != nil || !httpURL(base):
		errs = append(errs, fmt.Errorf("baseURL %q is not an http(s) URL", u.BaseURL))
	case base.RawQuery != "" || base.Fragment != "" || base.User != nil:
		errs = append(errs, fmt.Errorf("baseURL %q must have no query, fragment or credentials", u.BaseURL))
	default:
		target := strings.TrimSuffix(u.BaseURL, "/") + "/sitemap.xml"
		if o.Sitemap != "" {
			target = o.Sitemap
			if !strings.Contains(o.Sitemap, "://") {
				target = strings.TrimSuffix(u.BaseURL, "/") + "/" + strings.TrimPrefix(o.Sitemap, "/")
			}
		}
		if s.sitemap, err = url.Parse(target); err != nil || !httpURL(s.sitemap) || s.sitemap.User != nil {
			errs = append(errs, fmt.Errorf("options.sitemap %q is not an http(s) URL without credentials", o.Sitemap))
		}
	}
	if o.Include != "" {
		if s.include, err = regexp.Compile(o.Include); err != nil {
			errs = append(errs, fmt.Errorf("options.include: %w", err))
		}
	}
	if err := upstream.OptionProblems("sitemap", u, errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// httpURL tells whether u is an absolute http(s) URL with a host.
func httpURL(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// request makes a GET of target for operation op.
func (s *Source) request(ctx context.Context, op, target, accept string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, op), http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return req, nil
}

// Get opens the file at key, an http(s) URL, streamed; a 404 or 410 is
// NotFound.
func (s *Source) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	what := fmt.Sprintf("file %q", key)
	u, err := url.Parse(key)
	if err != nil || !httpURL(u) {
		return nil, adapter.Errorf(adapter.NotFound, "key %q is not an http(s) URL: upstream %q holds nothing under it", key, s.c.Name())
	}
	req, err := s.request(ctx, "GetFile", key, "")
	if err != nil {
		return nil, adapter.Wrap(adapter.NotFound, err, "key %q is not a URL upstream %q can fetch", key, s.c.Name())
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return nil, s.c.Error(err, what)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		upstream.Discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "no file at %q in upstream %q", key, s.c.Name())
	case resp.StatusCode != http.StatusOK:
		return nil, s.c.Exception(resp, what)
	}
	return s.c.Seekable(ctx, resp, what, func(ctx context.Context) (*http.Request, error) {
		return s.request(ctx, "GetFile", key, "")
	}), nil
}

// errTooLarge is a page or sitemap over its limit.
var errTooLarge = errors.New("larger than the limit")
