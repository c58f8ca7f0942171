package oaipmh

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/datapackage"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// signposts are the data files the landing page links with rel="item": one
// HEAD of the page, and one of each file. A file that cannot be described has
// its Problem set, which fails its dataset's new version; a page that cannot
// be read is the dataset's problem.
func (s *Source) signposts(ctx context.Context, landing string) ([]node.Found, error) {
	resp, err := s.head(ctx, "LandingPage", landing, fmt.Sprintf("landing page %s", landing))
	if err != nil {
		return nil, err
	}
	base := resp.Request.URL // after redirects (a DOI resolved)
	var files []node.Found
	seen := map[string]bool{}
	names := map[string]bool{}
	for _, l := range parseLinks(resp.Header.Values("Link")) {
		if !l.has("item") {
			continue
		}
		u, err := base.Parse(l.target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		u.Fragment = ""
		key := u.String()
		if seen[key] {
			continue
		}
		seen[key] = true
		f := s.item(ctx, u, l.params["type"])
		f.FileName = datapackage.UniqueName(names, f.FileName)
		files = append(files, f)
	}
	return files, nil
}

// item describes one linked file by a HEAD of it.
func (s *Source) item(ctx context.Context, u *url.URL, linkType string) node.Found {
	f := node.Found{Key: u.String(), Size: -1, FileName: lastSegment(u)}
	resp, err := s.head(ctx, "HeadFile", f.Key, fmt.Sprintf("file %s", f.Key))
	if err != nil {
		f.Problem = err
	} else {
		if resp.ContentLength >= 0 {
			f.Size = resp.ContentLength
		}
		if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
			f.Modified = t.UTC()
		}
		if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
			if name := path.Base(strings.ReplaceAll(params["filename"], `\`, "/")); name != "" && name != "." && name != ".." && name != "/" {
				f.FileName = name
			}
		}
	}
	f.FormatID = dataoneMediaType(linkType)
	if f.FormatID == "" {
		f.FormatID = datapackage.FormatForName(f.FileName)
	}
	return f
}

// head asks url with HEAD, or with GET (reading no body) when HEAD is
// refused, within the upstream's timeout; the answer's body is closed.
func (s *Source) head(ctx context.Context, op, target, what string) (*http.Response, error) {
	ctx, cancel := s.c.WithTimeout(ctx)
	defer cancel()
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, err := http.NewRequestWithContext(upstream.WithOperation(ctx, op), method, target, nil)
		if err != nil {
			return nil, adapter.Wrap(adapter.ServiceFailure, err, "%s is not a URL", what)
		}
		resp, err := s.c.HTTP().Do(req)
		if err != nil {
			return nil, s.c.Error(err, what)
		}
		switch {
		case method == http.MethodHead && (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented):
			upstream.Discard(resp)
			continue
		case resp.StatusCode/100 != 2:
			return nil, s.c.Exception(resp, what)
		}
		resp.Body.Close() // a GET's body is not read: the connection is not reused
		return resp, nil
	}
	panic("unreachable")
}

// lastSegment is the URL's last path segment, unescaped; "file" when it has
// none.
func lastSegment(u *url.URL) string {
	p := strings.TrimSuffix(u.Path, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" || p == "." || p == ".." {
		return "file"
	}
	return p
}

// dataoneMediaType is the DataONE format of a media type that is one, else
// "".
func dataoneMediaType(t string) string {
	mt, _, err := mime.ParseMediaType(t)
	if err != nil {
		return ""
	}
	if dataoneMediaTypes[mt] {
		return mt
	}
	return ""
}

// dataoneMediaTypes are media types that are DataONE formatIds
// (https://cn.dataone.org/cn/v2/formats). application/octet-stream is left
// out: a file's name says more.
var dataoneMediaTypes = map[string]bool{
	"text/csv": true, "text/plain": true, "text/tab-separated-values": true, "text/html": true,
	"text/xml": true, "application/xml": true, "application/json": true, "application/pdf": true,
	"application/zip": true, "application/x-tar": true, "application/x-gzip": true, "application/x-bzip2": true,
	"application/x-netcdf": true, "application/x-hdf5": true, "application/x-hdf": true,
	"application/vnd.ms-excel": true, "application/msword": true, "application/rtf": true,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":       true,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": true,
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/tiff": true, "image/bmp": true, "image/svg+xml": true,
	"video/mp4": true, "video/quicktime": true, "audio/mpeg": true, "text/markdown": true,
}

// link is one link of a Link header (RFC 8288).
type link struct {
	target string
	params map[string]string // lower-case names; rel and type lower-cased
}

// has tells whether the link's relation types include rel.
func (l link) has(rel string) bool {
	for _, r := range strings.Fields(l.params["rel"]) {
		if r == rel {
			return true
		}
	}
	return false
}

// parseLinks reads the links of Link header values: several headers, several
// comma-separated links in each, parameters as tokens or quoted strings. A
// malformed link is skipped to the next comma.
func parseLinks(values []string) []link {
	var out []link
	for _, v := range values {
		for len(v) > 0 {
			v = strings.TrimLeft(v, " \t,")
			if !strings.HasPrefix(v, "<") {
				v = skipLink(v)
				continue
			}
			end := strings.IndexByte(v, '>')
			if end < 0 {
				break
			}
			l := link{target: strings.TrimSpace(v[1:end]), params: map[string]string{}}
			v = v[end+1:]
			for {
				v = strings.TrimLeft(v, " \t")
				if !strings.HasPrefix(v, ";") {
					break
				}
				v = strings.TrimLeft(v[1:], " \t")
				i := strings.IndexAny(v, "=;, \t")
				if i < 0 {
					i = len(v)
				}
				name := strings.ToLower(v[:i])
				v = strings.TrimLeft(v[i:], " \t")
				var value string
				if strings.HasPrefix(v, "=") {
					v = strings.TrimLeft(v[1:], " \t")
					value, v = paramValue(v)
				}
				if _, dup := l.params[name]; !dup && name != "" { // the first occurrence counts (RFC 8288 3.3)
					if name == "rel" || name == "type" {
						value = strings.ToLower(value)
					}
					l.params[name] = value
				}
			}
			out = append(out, l)
			v = skipLink(v)
		}
	}
	return out
}

// paramValue reads a token or a quoted string.
func paramValue(v string) (value, rest string) {
	if !strings.HasPrefix(v, `"`) {
		i := strings.IndexAny(v, ";, \t")
		if i < 0 {
			i = len(v)
		}
		return v[:i], v[i:]
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			if i+1 < len(v) {
				i++
				b.WriteByte(v[i])
			}
		case '"':
			return b.String(), v[i+1:]
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

// skipLink skips to the next top-level comma (outside quotes and <>).
func skipLink(v string) string {
	quoted, angle := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++
		case c == '"' && !angle:
			quoted = !quoted
		case c == '<' && !quoted:
			angle = true
		case c == '>' && !quoted:
			angle = false
		case c == ',' && !quoted && !angle:
			return v[i+1:]
		}
	}
	return ""
}
