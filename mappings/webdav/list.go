package webdav

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// The store is a harvest source of the files under its holdings collection:
// a share that held a collection before the node existed. List walks the
// collection tree depth first, each collection read with one PROPFIND of
// Depth 1 (nginx does not answer Depth: infinity), children in name order:
// the files come in the order of their paths compared segment by segment.
// since is ignored (PROPFIND cannot filter).
//
// One List call lists at most pageSize files and reads at most
// pageCollections collections, then returns the cursor: the path (relative
// to holdings) of the last file listed, or of the last collection walked
// through, with a trailing "/". The next call walks again from the top,
// skipping every collection and file at or before the cursor without reading
// it: only the cursor's ancestors are read again, and memory is the listings
// of the collections on one path.
//
// Each file becomes, as in the s3 store:
//   - a node key, when its path is the node's own layout under prefix
//     (xx/yy/leaf, leaf a plain key whose BlobName is that path): Found.Key is
//     the key, which the harvest finds in the catalog and skips; a ~digest
//     leaf is not listed, nor is the node's tmp collection;
//   - a holding otherwise: Found.Key is "/" followed by its path relative to
//     holdings, FileName that path, with its size (getcontentlength) and date
//     (getlastmodified). No checksum: a WebDAV ETag is not a digest.
//
// Get and Stat read a holding by its "/"-key; Put and Delete refuse them.

// List bounds: files per page, collections read per page.
const (
	listPage        = 1000
	listCollections = 100
)

// listProps asks for what List and Stat need.
const listProps = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>`

// listing is a PROPFIND answer with the properties of listProps.
type listing struct {
	Responses []struct {
		Href     string `xml:"DAV: href"`
		Propstat []struct {
			Prop struct {
				Length       string `xml:"DAV: getcontentlength"`
				LastModified string `xml:"DAV: getlastmodified"`
				ResourceType struct {
					Collection *struct{} `xml:"DAV: collection"`
				} `xml:"DAV: resourcetype"`
			} `xml:"DAV: prop"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}

// entry is one member of a collection.
type entry struct {
	name     string // unescaped; "" for the resource asked about itself
	dir      bool
	size     int64 // -1 when not given
	modified time.Time
}

// propfind reads the properties of the resource at target (Depth 0) or of
// its members (Depth 1, members sorted by name). A missing resource is a
// NotFound.
func (s *Store) propfind(ctx context.Context, target, depth, what string) ([]entry, error) {
	req := s.request(ctx, "PROPFIND", target)
	req.Header.Set("Depth", depth)
	req.Header.Set("Content-Type", `application/xml; charset="utf-8"`)
	req.Body = io.NopCloser(strings.NewReader(listProps))
	req.ContentLength = int64(len(listProps))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(listProps)), nil }
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return nil, s.c.Error(err, what)
	}
	switch resp.StatusCode {
	case http.StatusMultiStatus:
	case http.StatusNotFound:
		upstream.Discard(resp)
		return nil, adapter.Errorf(adapter.NotFound, "upstream %q holds no %s", s.c.Name(), what)
	default:
		return nil, s.c.Exception(resp, what)
	}
	var ls listing
	err = xml.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ls)
	upstream.Discard(resp)
	if err != nil {
		return nil, s.c.Error(err, what)
	}
	base, _ := url.Parse(target)
	self := strings.TrimSuffix(base.Path, "/")
	var es []entry
	for _, r := range ls.Responses {
		ref, err := url.Parse(r.Href)
		if err != nil {
			continue
		}
		p := strings.TrimSuffix(base.ResolveReference(ref).Path, "/")
		e := entry{size: -1}
		switch {
		case p == self:
		case strings.HasPrefix(p, self+"/") && !strings.Contains(p[len(self)+1:], "/"):
			e.name = p[len(self)+1:]
		default:
			continue // not a member
		}
		for _, ps := range r.Propstat {
			pr := ps.Prop
			if pr.ResourceType.Collection != nil {
				e.dir = true
			}
			if n, err := strconv.ParseInt(strings.TrimSpace(pr.Length), 10, 64); err == nil && n >= 0 {
				e.size = n
			}
			if t, err := http.ParseTime(strings.TrimSpace(pr.LastModified)); err == nil {
				e.modified = t
			}
		}
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return es, nil
}

// List returns one page of the files under holdings.
func (s *Store) List(ctx context.Context, _ time.Time, cursor string) ([]node.Found, string, error) {
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	w := walk{s: s, ctx: ctx, start: cursor, last: cursor}
	if cursor != "" {
		w.curDir = strings.HasSuffix(cursor, "/")
		w.cur = strings.Split(strings.TrimSuffix(cursor, "/"), "/")
	}
	err := w.walk(nil)
	switch {
	case errors.Is(err, errPageFull):
		return w.page, w.last, nil
	case adapter.IsKind(err, adapter.NotFound) && w.read == 1:
		return nil, "", nil // no holdings collection (yet): nothing to list
	case err != nil:
		return nil, "", err
	}
	return w.page, "", nil
}

// errPageFull stops a walk whose page is full.
var errPageFull = errors.New("the page is full")

// walk is one List call's walk.
type walk struct {
	s      *Store
	ctx    context.Context
	cur    []string // the cursor's segments; nil at the start
	curDir bool     // the cursor is a collection walked through
	start  string   // the cursor
	last   string   // the cursor to return
	read   int      // collections read
	page   []node.Found
}

// full says whether the page must end here: when it is full, or has read
// enough collections, and has moved past the cursor.
func (w *walk) full() bool {
	return (len(w.page) >= w.s.pageSize || w.read >= w.s.pageCollections) && w.last != w.start
}

// walk lists the collection at rel (under holdings).
func (w *walk) walk(rel []string) error {
	w.read++
	dir := append(w.s.holdings[:len(w.s.holdings):len(w.s.holdings)], rel...)
	members, err := w.s.propfind(w.ctx, w.s.at(true, dir...), "1", fmt.Sprintf("collection %q", strings.Join(dir, "/")))
	if err != nil {
		if adapter.IsKind(err, adapter.NotFound) && len(rel) > 0 {
			return nil // removed since its parent was read
		}
		return err
	}
	for _, e := range members {
		if e.name == "" {
			continue
		}
		p := append(rel[:len(rel):len(rel)], e.name)
		if e.dir {
			if w.done(p, true) || w.s.isTmp(p) {
				continue
			}
			if w.full() {
				return errPageFull
			}
			if err := w.walk(p); err != nil {
				return err
			}
			w.last = strings.Join(p, "/") + "/"
			continue
		}
		if w.done(p, false) {
			continue
		}
		f, ok := w.s.found(p, e)
		if !ok {
			continue
		}
		if len(w.page) >= w.s.pageSize && w.last != w.start {
			return errPageFull
		}
		w.page = append(w.page, f)
		w.last = strings.Join(p, "/")
	}
	return nil
}

// done says whether the path p is at or before the cursor: a file listed, or
// a collection walked through, by an earlier page. A collection holding the
// cursor is not done.
func (w *walk) done(p []string, dir bool) bool {
	switch {
	case w.cur == nil:
		return false
	case w.curDir && hasPrefix(p, w.cur):
		return true
	case dir && hasPrefix(w.cur, p):
		return false
	}
	return slices.Compare(p, w.cur) <= 0
}

func hasPrefix(p, prefix []string) bool {
	return len(p) >= len(prefix) && slices.Equal(p[:len(prefix)], prefix)
}

// abs is the path under the base URL of p, relative to holdings.
func (s *Store) abs(p []string) []string {
	return append(s.holdings[:len(s.holdings):len(s.holdings)], p...)
}

// isTmp says whether the collection p (relative to holdings) is the store's
// tmp collection.
func (s *Store) isTmp(p []string) bool {
	a := s.abs(p)
	return len(a) == len(s.prefix)+1 && hasPrefix(a, s.prefix) && a[len(a)-1] == tmpCollection
}

// found is what List says of the file p (relative to holdings): false when
// it is not listed.
func (s *Store) found(p []string, e entry) (node.Found, bool) {
	f := node.Found{Size: e.size, Modified: e.modified}
	if key, ok := s.nodeKey(s.abs(p)); ok {
		f.Key = key
		return f, key != "" // a ~digest leaf is not listed
	}
	rel := strings.Join(p, "/")
	f.Key, f.FileName = "/"+rel, rel
	return f, true
}

// nodeKey tells whether the file at a (under the base URL) is in the node's
// layout, and its key ("" for a ~digest leaf).
func (s *Store) nodeKey(a []string) (string, bool) {
	if len(a) != len(s.prefix)+3 || !hasPrefix(a, s.prefix) {
		return "", false
	}
	fan, leaf := a[len(s.prefix):len(s.prefix)+2], a[len(a)-1]
	if h, ok := strings.CutPrefix(leaf, "~"); ok {
		return "", len(h) == 64 && isHex(h) && fan[0] == h[0:2] && fan[1] == h[2:4]
	}
	return leaf, upstream.BlobName(leaf) == strings.Join(a[len(s.prefix):], "/")
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Stat describes the file under key again: a holding for a "/"-key, else the
// node's bytes under key.
func (s *Store) Stat(ctx context.Context, key string) (*node.Found, error) {
	target, err := s.target(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	es, err := s.propfind(ctx, target, "0", fmt.Sprintf("object %q", key))
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(es, func(e entry) bool { return e.name == "" })
	if i < 0 || es[i].dir {
		return nil, adapter.Errorf(adapter.NotFound, "no bytes are stored under key %q", key)
	}
	f := &node.Found{Key: key, Size: es[i].size, Modified: es[i].modified}
	if strings.HasPrefix(key, "/") {
		f.FileName = key[1:]
	}
	return f, nil
}

// target is the URL of key's bytes: under holdings for a "/"-key, else the
// node's layout.
func (s *Store) target(key string) (string, error) {
	rel, ok := strings.CutPrefix(key, "/")
	if !ok {
		return s.object(key), nil
	}
	segs := strings.Split(rel, "/")
	for _, seg := range segs {
		switch seg {
		case "", ".", "..":
			return "", adapter.Errorf(adapter.InvalidRequest, "key %q names no holding of upstream %q: it has an empty, . or .. segment", key, s.c.Name())
		}
	}
	return s.at(false, s.abs(segs)...), nil
}

// refuseHolding is the error of a write to a holding: the node never writes
// them.
func (s *Store) refuseHolding(key string) error {
	if strings.HasPrefix(key, "/") {
		return adapter.Errorf(adapter.InvalidRequest, "key %q is a holding of upstream %q, which the node does not write", key, s.c.Name())
	}
	return nil
}
