package config

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// CORS lets browser clients (MetacatUI, portals) on other origins call the
// node: the answers to requests from an allowed origin carry the
// Access-Control-* headers, and OPTIONS answers their preflight on every
// path. With no allowed origin (the default) CORS is off: no request gets
// those headers.
type CORS struct {
	// AllowedOrigins are the origins (scheme://host[:port], no path) whose
	// pages may call the node, or "*" for any; empty turns CORS off.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// AllowedMethods are the methods a preflight allows.
	AllowedMethods []string `yaml:"allowedMethods"`
	// AllowedHeaders are the request headers a preflight allows.
	AllowedHeaders []string `yaml:"allowedHeaders"`
	// ExposedHeaders are the answer headers a page's script may read.
	ExposedHeaders []string `yaml:"exposedHeaders"`
	// AllowCredentials lets pages send cookies and TLS client certificates
	// (a bearer token in Authorization needs no credentials); it cannot go
	// with the origin "*".
	AllowCredentials bool `yaml:"allowCredentials"`
	// MaxAge is how long a browser may keep a preflight's answer; 0 sends no
	// Access-Control-Max-Age.
	MaxAge time.Duration `yaml:"maxAge"`
}

// DefaultCORS is CORS off, with the methods and headers the DataONE API uses
// ready for when origins are allowed.
func DefaultCORS() CORS {
	return CORS{
		AllowedMethods: []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"},
		AllowedHeaders: []string{"Authorization", "Content-Type", "Range", "If-Match", "If-None-Match", "If-Modified-Since",
			"If-Unmodified-Since", "If-Range", "X-Request-Id"},
		ExposedHeaders: []string{"Content-Disposition", "Content-Length", "Content-Range", "Accept-Ranges", "ETag",
			"Last-Modified", "X-Request-Id", "DataONE-Checksum", "DataONE-FormatId", "DataONE-ObjectFormat",
			"DataONE-SerialVersion", "DataONE-SeriesId", "DataONE-Obsoletes", "DataONE-ObsoletedBy",
			"DataONE-Exception-Name", "DataONE-Exception-ErrorCode", "DataONE-Exception-DetailCode",
			"DataONE-Exception-Description", "DataONE-Exception-Identifier", "DataONE-Exception-PID",
			"DataONE-Exception-NodeID", "DataONE-Exception-TraceInformation"},
		MaxAge: 10 * time.Minute,
	}
}

func (c *CORS) validate(p *problems) {
	for i, o := range c.AllowedOrigins {
		key := "cors.allowedOrigins[" + strconv.Itoa(i) + "]"
		if o == "*" {
			if c.AllowCredentials {
				p.addf(key, `"*" cannot go with cors.allowCredentials: name the origins`)
			}
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
			p.addf(key, "%q is not an origin (scheme://host[:port]) or *", o)
		}
	}
	for i, m := range c.AllowedMethods {
		if !isToken(m) || strings.ToUpper(m) != m {
			p.addf("cors.allowedMethods["+strconv.Itoa(i)+"]", "%q is not an upper-case HTTP method", m)
		}
	}
	for i, h := range c.AllowedHeaders {
		if !isToken(h) {
			p.addf("cors.allowedHeaders["+strconv.Itoa(i)+"]", "%q is not a header name", h)
		}
	}
	for i, h := range c.ExposedHeaders {
		if !isToken(h) {
			p.addf("cors.exposedHeaders["+strconv.Itoa(i)+"]", "%q is not a header name", h)
		}
	}
	if c.MaxAge < 0 {
		p.addf("cors.maxAge", "must not be negative, got %s", c.MaxAge)
	}
}

// isToken reports whether s is an RFC 9110 token (a method or header name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > '~' || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}
