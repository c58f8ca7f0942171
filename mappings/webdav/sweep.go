package webdav

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// StaleAfter is how old a temporary resource must be for the sweep at the
// first Put to remove it: older than any Put takes, so that the Puts of other
// instances sharing the store are left alone.
const StaleAfter = 24 * time.Hour

// tmpNamed matches the names tmpName makes.
var tmpNamed = regexp.MustCompile(`^[0-9a-f]{32}$`)

// propfind asks for what Sweep needs.
const propfind = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getlastmodified/></D:prop></D:propfind>`

type multistatus struct {
	Responses []struct {
		Href     string `xml:"DAV: href"`
		Propstat []struct {
			Prop struct {
				LastModified string `xml:"DAV: getlastmodified"`
				ResourceType struct {
					Collection *struct{} `xml:"DAV: collection"`
				} `xml:"DAV: resourcetype"`
			} `xml:"DAV: prop"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}

// Sweep deletes the temporary resources last modified more than olderThan ago:
// those of Puts that a crash interrupted before their MOVE, or whose cleanup
// failed. Only names tmpName makes are deleted. It returns how many it deleted.
func (s *Store) Sweep(ctx context.Context, olderThan time.Duration) (int, error) {
	dir := s.resource(true, tmpCollection)
	base, _ := url.Parse(dir)
	req := s.request(ctx, "PROPFIND", dir)
	req.Header.Set("Depth", "1")
	req.Header.Set("Content-Type", `application/xml; charset="utf-8"`)
	req.Body = io.NopCloser(strings.NewReader(propfind))
	req.ContentLength = int64(len(propfind))
	resp, err := s.c.HTTP().Do(req)
	if err != nil {
		return 0, s.c.Error(err, "the tmp collection")
	}
	if resp.StatusCode != http.StatusMultiStatus {
		return 0, s.c.Exception(resp, "the tmp collection")
	}
	var ms multistatus
	err = xml.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ms)
	upstream.Discard(resp)
	if err != nil {
		return 0, fmt.Errorf("webdav: reading the listing of %s: %w", dir, err)
	}
	deleted := 0
	for _, r := range ms.Responses {
		ref, err := url.Parse(r.Href)
		if err != nil {
			continue
		}
		u := base.ResolveReference(ref)
		if u.Path == base.Path || !strings.HasPrefix(u.Path, base.Path) || !tmpNamed.MatchString(path.Base(u.Path)) {
			continue // the collection itself, not in it, or not a temporary resource
		}
		for _, ps := range r.Propstat {
			if ps.Prop.ResourceType.Collection != nil {
				break
			}
			t, err := http.ParseTime(ps.Prop.LastModified)
			if err != nil || time.Since(t) < olderThan {
				continue
			}
			resp, err := s.c.HTTP().Do(s.request(ctx, http.MethodDelete, u.String()))
			if err != nil {
				return deleted, s.c.Error(err, "a stale temporary resource")
			}
			upstream.Discard(resp)
			if resp.StatusCode/100 == 2 {
				deleted++
			}
			break
		}
	}
	return deleted, nil
}
