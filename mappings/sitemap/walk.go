package sitemap

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

const (
	// maxSitemap bounds a sitemap's bytes, decompressed (the protocol's limit
	// is 50 MB, and 50,000 URLs).
	maxSitemap = 64 << 20
	// maxPage bounds a dataset page's bytes.
	maxPage = 16 << 20
	// maxDepth bounds how deep sitemap indexes may nest (the protocol allows
	// none).
	maxDepth = 3
)

// entry is a <url> of a sitemap, or a <sitemap> of an index.
type entry struct {
	Loc     string `xml:"loc"`
	Lastmod string `xml:"lastmod"`
}

// Walk calls fn with the Dataset of every page of the sitemap modified at or
// after since, in the sitemap's order.
func (s *Source) Walk(ctx context.Context, since time.Time, fn func(*node.Dataset) error) error {
	return s.walk(ctx, s.sitemap, since, fn, 0, map[string]bool{})
}

// walk reads the sitemap (or index) at target and walks its pages.
func (s *Source) walk(ctx context.Context, target *url.URL, since time.Time, fn func(*node.Dataset) error, depth int, seen map[string]bool) error {
	if seen[target.String()] {
		return nil // an index that lists itself, or a sitemap listed twice
	}
	seen[target.String()] = true
	index, entries, err := s.read(ctx, target)
	if err != nil {
		return err
	}
	if index {
		if depth >= maxDepth {
			return adapter.Errorf(adapter.ServiceFailure, "upstream %q: sitemap index %q is nested more than %d deep", s.c.Name(), target, maxDepth)
		}
		for _, e := range entries {
			child, err := target.Parse(e.Loc)
			if err != nil || !httpURL(child) {
				return adapter.Errorf(adapter.ServiceFailure, "upstream %q: sitemap index %q lists %q, not an http(s) URL", s.c.Name(), target, e.Loc)
			}
			if err := s.walk(ctx, child, since, fn, depth+1, seen); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		modified, end, dated := parseDate(e.Lastmod)
		if !since.IsZero() && dated && !end.After(since) {
			continue
		}
		page, err := target.Parse(e.Loc)
		if err == nil && s.include != nil && !s.include.MatchString(page.String()) {
			continue
		}
		var d *node.Dataset
		if err != nil || !httpURL(page) {
			d = &node.Dataset{ID: e.Loc, Problem: fmt.Errorf("sitemap %q lists %q, not an http(s) URL", target, e.Loc)}
		} else if d, err = s.page(ctx, page); err != nil {
			return err
		}
		if dated {
			d.Version, d.Modified = e.Lastmod, modified
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// page reads the Dataset of the page at target. A page that is not a
// dataset page (no JSON-LD Dataset) is one with Problem node.ErrNotADataset,
// a page that fails (or whose JSON-LD is malformed) one with another Problem;
// the error is for what ends the walk (ctx done, the breaker open).
func (s *Source) page(ctx context.Context, target *url.URL) (*node.Dataset, error) {
	body, ctype, err := s.fetchPage(ctx, target.String())
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if s.c.State() == "open" {
			return nil, err
		}
		return &node.Dataset{ID: target.String(), Problem: err}, nil
	}
	d, err := dataset(target, body, ctype)
	if err == errNoDataset {
		return &node.Dataset{ID: target.String(), Page: target.String(), Problem: node.ErrNotADataset}, nil
	}
	if err != nil {
		return &node.Dataset{ID: target.String(), Problem: fmt.Errorf("page %q: %w", target, err)}, nil
	}
	return d, nil
}

// fetchPage reads a page whole, up to maxPage, within the upstream's timeout.
func (s *Source) fetchPage(ctx context.Context, target string) ([]byte, string, error) {
	what := fmt.Sprintf("page %q", target)
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	req, err := s.request(ctx, "GetPage", target, "text/html,application/xhtml+xml,application/ld+json;q=0.9,*/*;q=0.8")
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return nil, "", s.c.Error(err, what)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", s.c.Exception(resp, what)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPage+1))
	switch {
	case err != nil:
		return nil, "", s.c.Error(err, what)
	case len(body) > maxPage:
		return nil, "", fmt.Errorf("%s is %w of %d MiB", what, errTooLarge, maxPage>>20)
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// read fetches and parses the sitemap at target, whole, within the
// upstream's timeout: whether it is an index, and its entries. Any failure is
// a ServiceFailure naming target.
func (s *Source) read(ctx context.Context, target *url.URL) (index bool, entries []entry, err error) {
	what := fmt.Sprintf("sitemap %q", target)
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	req, err := s.request(ctx, "GetSitemap", target.String(), "application/xml,text/xml;q=0.9,*/*;q=0.8")
	if err != nil {
		return false, nil, adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: %s is not a URL", s.c.Name(), what)
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return false, nil, s.c.Error(err, what)
	}
	if resp.StatusCode != http.StatusOK {
		status := resp.StatusCode
		return false, nil, adapter.Wrap(adapter.ServiceFailure, s.c.Exception(resp, what), "upstream %q: %s answered HTTP %d", s.c.Name(), what, status)
	}
	defer resp.Body.Close()
	index, entries, err = parseSitemap(resp.Body, maxSitemap)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return false, nil, s.c.Error(cerr, what)
		}
		return false, nil, adapter.Wrap(adapter.ServiceFailure, err, "upstream %q: %s cannot be read: %v", s.c.Name(), what, err)
	}
	return index, entries, nil
}

// parseSitemap reads a sitemap (<urlset>) or sitemap index (<sitemapindex>),
// gzip'd or not, as a stream, up to limit bytes decompressed.
func parseSitemap(r io.Reader, limit int64) (index bool, entries []entry, err error) {
	lr := &io.LimitedReader{N: limit + 1}
	index, entries, err = decodeSitemap(r, lr)
	if lr.N <= 0 {
		return false, nil, fmt.Errorf("it is %w of %d bytes", errTooLarge, limit)
	}
	return index, entries, err
}

// decodeSitemap decodes r's sitemap, read through lr (whose R it sets).
func decodeSitemap(r io.Reader, lr *io.LimitedReader) (index bool, entries []entry, err error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false, nil, err
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	lr.R = r
	dec := xml.NewDecoder(lr)
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, nil, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Local
			switch root {
			case "urlset":
			case "sitemapindex":
				index = true
			default:
				return false, nil, fmt.Errorf("its root element is <%s>, not <urlset> or <sitemapindex>", root)
			}
			continue
		}
		if (index && se.Name.Local == "sitemap") || (!index && se.Name.Local == "url") {
			var e entry
			if err := dec.DecodeElement(&e, &se); err != nil {
				return false, nil, err
			}
			if e.Loc = strings.TrimSpace(e.Loc); e.Loc != "" {
				e.Lastmod = strings.TrimSpace(e.Lastmod)
				entries = append(entries, e)
			}
			continue
		}
		if err := dec.Skip(); err != nil {
			return false, nil, err
		}
	}
	if root == "" {
		return false, nil, fmt.Errorf("it holds no XML element")
	}
	return index, entries, nil
}
