package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
)

// maxAnswer is the largest answer a store reads whole (stat, a list page).
const maxAnswer = 64 << 20

// Stat describes the object under key again.
func (s *Store) Stat(ctx context.Context, key string) (*node.Found, error) {
	if s.stat == nil {
		return nil, adapter.Errorf(adapter.NotImplemented, "upstream %q describes no single object (its options have no stat)", s.c.Name())
	}
	what := fmt.Sprintf("object %q", key)
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	req, err := s.newRequest(ctx, &s.stat.request, vars{key: key}, "")
	if err != nil {
		return nil, err
	}
	doc, h, err := s.fetch(req, what, s.stat.readBody)
	if err != nil {
		return nil, err
	}
	item := doc
	if s.stat.item.raw != "" {
		if item = at(doc, s.stat.item.segs); item == nil {
			return nil, s.unreadable(what, fmt.Errorf("options.stat.item: the answer has no %q", s.stat.item.raw))
		}
		if set, ok := item.([]*element); ok {
			item = set[0]
		}
	}
	f, err := s.found(item, h, s.stat.fields)
	if err != nil {
		return nil, s.unreadable(what, err)
	}
	if f.Key == "" {
		f.Key = key
	}
	if f.PID == "" {
		f.PID = s.pidOf(f.Key)
	}
	return f, nil
}

// List returns one page of the upstream's objects and the next page's cursor.
func (s *Store) List(ctx context.Context, since time.Time, cursor string) ([]node.Found, string, error) {
	l := s.list
	if l == nil {
		return nil, "", adapter.Errorf(adapter.NotImplemented, "upstream %q lists nothing (its options have no list)", s.c.Name())
	}
	v := vars{cursor: cursor, since: since, pageSize: l.pageSize}
	target := ""
	switch l.paging {
	case pagingPage, pagingOffset:
		if cursor == "" {
			v.cursor = "0"
			if l.paging == pagingPage {
				v.cursor = strconv.Itoa(l.first)
			}
		} else if _, err := strconv.Atoi(cursor); err != nil {
			return nil, "", adapter.Errorf(adapter.InvalidRequest, "list cursor %q of upstream %q is not a %s number", cursor, s.c.Name(), l.paging)
		}
	case pagingNextURL:
		if cursor != "" {
			u, err := s.sameOrigin(cursor)
			if err != nil {
				return nil, "", adapter.Wrap(adapter.InvalidRequest, err, "list cursor of upstream %q is not one of its pages", s.c.Name())
			}
			target = u.String()
		}
	}
	what := "the list page at the start"
	switch {
	case cursor != "" && l.paging == pagingNextURL:
		what = fmt.Sprintf("the list page at %s", pathOf(cursor)) // the link's host and query stay out of descriptions
	case cursor != "":
		what = fmt.Sprintf("the list page at cursor %q", cursor)
	}
	if target == "" {
		target = s.base.String() + l.url.expand(v.escaped)
		if l.since != nil && !since.IsZero() {
			sep := "?"
			if strings.Contains(target, "?") {
				sep = "&"
			}
			target += sep + l.since.expand(v.escaped)
		}
	}
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	req, err := s.newRequest(ctx, &l.request, v, target)
	if err != nil {
		return nil, "", err
	}
	doc, h, err := s.fetch(req, what, true)
	if err != nil {
		return nil, "", err
	}
	page, next, err := s.page(doc, h, v.cursor, req.URL)
	if err != nil {
		return nil, "", s.unreadable(what, err)
	}
	return page, next, nil
}

// page reads one list answer: its items, and the next page's cursor.
func (s *Store) page(doc any, h http.Header, cursor string, at *url.URL) ([]node.Found, string, error) {
	l := s.list
	all, err := items(doc, l.items)
	if err != nil {
		return nil, "", fmt.Errorf("options.list.items: %w", err)
	}
	page := make([]node.Found, 0, len(all))
	// An item the options cannot read is listed with its problem, so that one
	// bad record does not hide the ones after it.
items:
	for i, item := range all {
		for _, c := range l.where {
			got, _, err := field(item, h, c.p)
			if err != nil {
				page = append(page, node.Found{Size: -1, Problem: fmt.Errorf("item %d: options.list.where (%q): %w", i, c.p.raw, err)})
				continue items
			}
			if got != c.want {
				continue items
			}
		}
		f, err := s.found(item, h, l.fields)
		if err == nil && f.Key == "" {
			err = fmt.Errorf("options.%s.key (%q): absent", l.fields.opt, l.fields.paths[fieldKey].raw)
		}
		if err != nil {
			f = &node.Found{Key: f.Key, PID: f.PID, Dataset: f.Dataset, Size: -1, Problem: fmt.Errorf("item %d: %w", i, err)}
		}
		page = append(page, *f)
	}
	var next string
	switch l.paging {
	case pagingPage, pagingOffset:
		if len(all) < l.pageSize {
			return page, "", nil
		}
		n, _ := strconv.Atoi(cursor)
		if l.paging == pagingPage {
			n++
		} else {
			n += len(all)
		}
		next = strconv.Itoa(n)
	case pagingCursor, pagingNextURL:
		if next, _, err = field(doc, h, l.next); err != nil {
			return nil, "", fmt.Errorf("options.list.next (%q): %w", l.next.raw, err)
		}
		if next == "" {
			return page, "", nil
		}
		if l.paging == pagingNextURL {
			ref, err := url.Parse(next)
			if err != nil {
				return nil, "", fmt.Errorf("options.list.next (%q): %q is not a URL", l.next.raw, next)
			}
			u, err := s.sameOrigin(at.ResolveReference(ref).String())
			if err != nil {
				return nil, "", fmt.Errorf("options.list.next (%q): %w", l.next.raw, err)
			}
			next = u.String()
		}
		if next == cursor || l.paging == pagingNextURL && next == at.String() {
			return nil, "", fmt.Errorf("options.list.next (%q): the next page is this page again (%q)", l.next.raw, next)
		}
	}
	return page, next, nil
}

// sameOrigin parses a next page's URL, which must be on the base URL's scheme
// and host: the store's headers (credentials) go nowhere else.
func (s *Store) sameOrigin(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", raw)
	}
	if u.Scheme != s.base.Scheme || u.Host != s.base.Host {
		// Descriptions reach the public status page: the link's path only,
		// not the hosts (internal addresses) or its query (tokens).
		return nil, fmt.Errorf("%s is on another scheme or host than options.baseURL", pathOf(raw))
	}
	return u, nil
}

// pathOf names a link by its path alone.
func pathOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Path == "" {
		return "a link without a path"
	}
	return fmt.Sprintf("the link to path %q", u.Path)
}

// fetch sends req and decodes its answer (when body), of at most
// s.answerLimit bytes.
func (s *Store) fetch(req *http.Request, what string, body bool) (any, http.Header, error) {
	if req.Header.Get("Accept") == "" && body {
		req.Header.Set("Accept", "application/"+s.format)
	}
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return nil, nil, s.c.Error(err, what)
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, s.c.Exception(resp, what)
	}
	defer discard(resp)
	if !body {
		return nil, resp.Header, nil
	}
	r := &bounded{r: resp.Body, left: s.answerLimit}
	doc, err := decode(s.format, r)
	switch {
	case r.err != nil:
		return nil, nil, s.c.Error(r.err, what)
	case r.left < 0:
		return nil, nil, s.unreadable(what, fmt.Errorf("the answer is larger than %d bytes", s.answerLimit))
	case err != nil:
		return nil, nil, s.unreadable(what, err)
	}
	return doc, resp.Header, nil
}

// bounded reads at most left bytes (left goes negative past them) and keeps
// a read error, which is the connection's, not the answer's.
type bounded struct {
	r    io.Reader
	left int64
	err  error
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// unreadable is the exception for an answer the options do not describe.
func (s *Store) unreadable(what string, err error) error {
	return adapter.Wrap(adapter.ServiceFailure, err, "upstream %q answered for %s in a form its options do not describe: %v", s.c.Name(), what, err)
}

// found reads an object's fields from item (and the answer's headers).
func (s *Store) found(item any, h http.Header, fs *fieldSet) (*node.Found, error) {
	f := &node.Found{Size: -1}
	for i, p := range fs.paths {
		if p.raw == "" {
			continue
		}
		v, ok, err := field(item, h, p)
		if err == nil && ok {
			err = s.set(f, i, v)
		}
		if err != nil {
			return s.named(f), fmt.Errorf("options.%s.%s (%q): %w", fs.opt, fieldNames[i], p.raw, err)
		}
	}
	if f.Checksum.Value != "" && f.Checksum.Algorithm == "" {
		if f.Checksum.Algorithm = s.checksumAlg; f.Checksum.Algorithm == "" {
			return s.named(f), fmt.Errorf("options.%s.checksumAlgorithm (%q): absent, and options.checksumAlgorithm is not set",
				fs.opt, fs.paths[fieldChecksumAlgorithm].raw)
		}
	}
	return s.named(f), nil
}

// named fills in the PID from the key, when the answer gave none. found
// returns what it read even with an error, so that a failure names its object.
func (s *Store) named(f *node.Found) *node.Found {
	if f.PID == "" && f.Key != "" {
		f.PID = s.pidOf(f.Key)
	}
	return f
}

// set converts one field's text into f.
func (s *Store) set(f *node.Found, field int, v string) error {
	var err error
	switch field {
	case fieldKey:
		f.Key = v
	case fieldPID:
		f.PID = v
	case fieldDataset:
		f.Dataset = v
	case fieldSize:
		if f.Size, err = strconv.ParseInt(v, 10, 64); err != nil || f.Size < 0 {
			return fmt.Errorf("%q is not a size in bytes", v)
		}
	case fieldChecksum:
		f.Checksum.Value = v
	case fieldChecksumAlgorithm:
		var ok bool
		if f.Checksum.Algorithm, ok = adapter.CanonicalAlgorithm(v); !ok {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(adapter.ChecksumAlgorithms, ", "))
		}
	case fieldFormatID:
		f.FormatID = v
	case fieldRightsHolder:
		f.RightsHolder = v
	case fieldFileName:
		f.FileName = v
	case fieldModified:
		f.Modified, err = s.date(v)
	case fieldUploaded:
		f.Uploaded, err = s.date(v)
	}
	return err
}

// date parses RFC 3339, the configured layout, or an HTTP date.
func (s *Store) date(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if s.dateLayout != "" {
		if t, err := time.Parse(s.dateLayout, v); err == nil {
			return t, nil
		}
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, nil
	}
	also := ""
	if s.dateLayout != "" {
		also = fmt.Sprintf(", %q", s.dateLayout)
	}
	return time.Time{}, fmt.Errorf("%q is not a date (RFC 3339%s or an HTTP date)", v, also)
}

// pidOf is the identifier of the object under key.
func (s *Store) pidOf(key string) string {
	if s.pid == nil {
		return key
	}
	return s.pid.expand(func(string) string { return key })
}
