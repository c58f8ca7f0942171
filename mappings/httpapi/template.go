package httpapi

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/d1bridge/d1bridge/mappings/upstream"
)

// template is a URL, header value or identifier with {placeholders}, parsed
// once at New.
type template []part

// part is literal text, or a placeholder when name is set.
type part struct{ lit, name string }

// Placeholders by what a template may use.
var (
	keyPlaceholders  = []string{"key", "key.query", "key.blob"}
	listPlaceholders = []string{"page", "offset", "cursor", "pageSize"}
)

// parseTemplate splits s into literals and placeholders, refusing any
// placeholder not in allowed.
func parseTemplate(s string, allowed []string) (template, error) {
	var t template
	for s != "" {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			if strings.IndexByte(s, '}') >= 0 {
				return nil, fmt.Errorf("%q has a } without its {", s)
			}
			return append(t, part{lit: s}), nil
		}
		end := strings.IndexByte(s[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%q has a { without its }", s)
		}
		if open > 0 {
			t = append(t, part{lit: s[:open]})
		}
		name := s[open+1 : open+end]
		if !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("unknown placeholder {%s}; this template can use {%s}", name, strings.Join(allowed, "}, {"))
		}
		t = append(t, part{name: name})
		s = s[open+end+1:]
	}
	return t, nil
}

// uses reports whether the template has the placeholder name.
func (t template) uses(name string) bool {
	for _, p := range t {
		if p.name == name {
			return true
		}
	}
	return false
}

// misplaced tells of a key placeholder on the wrong side of a URL's ?: {key}
// and {key.blob} are escaped for a path, where & = + and ; pass as they are
// (in a query they would change it: a key a&b=c, a+b read as "a b"), and
// {key.query} for a query, where a space becomes + (in a path, a + stays one).
func (t template) misplaced() error {
	inQuery := false
	for _, p := range t {
		switch {
		case p.name == "":
			inQuery = inQuery || strings.ContainsAny(p.lit, "?#")
		case inQuery && (p.name == "key" || p.name == "key.blob"):
			return fmt.Errorf("{%s} is escaped for a path, not for the query: use {key.query} after the ?", p.name)
		case !inQuery && p.name == "key.query":
			return errors.New("{key.query} is escaped for a query, not for the path: use {key} before the ?")
		}
	}
	return nil
}

// expand fills the placeholders with value(name).
func (t template) expand(value func(name string) string) string {
	var b strings.Builder
	for _, p := range t {
		if p.name == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(value(p.name))
		}
	}
	return b.String()
}

// vars are the values of one request's placeholders.
type vars struct {
	key      string
	cursor   string // the page number, offset or upstream cursor
	since    time.Time
	pageSize int
}

// escaped is the value of placeholder name, escaped for where it goes in a URL.
func (v vars) escaped(name string) string {
	switch name {
	case "key":
		return url.PathEscape(v.key)
	case "key.query":
		return url.QueryEscape(v.key)
	case "key.blob":
		segs := strings.Split(upstream.BlobName(v.key), "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		return strings.Join(segs, "/")
	case "page", "offset", "cursor":
		return url.QueryEscape(v.cursor)
	case "since":
		return url.QueryEscape(v.since.UTC().Format(time.RFC3339))
	case "pageSize":
		return strconv.Itoa(v.pageSize)
	}
	return ""
}
