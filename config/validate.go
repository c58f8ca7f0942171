package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Validate checks the whole configuration and returns every problem found,
// joined with errors.Join, each naming its key; nil means valid.
func (c *Config) Validate() error {
	var p problems

	if !isHostPort(c.Listen) {
		p.addf("listen", "%q is not a host:port address", c.Listen)
	}
	switch {
	case c.Svc == "":
		p.addf("svc", "required")
	case !isPathSegment(c.Svc):
		p.addf("svc", "%q is not one path segment of URL-safe characters (letters, digits, - . _ ~)", c.Svc)
	}
	c.validateRoles(&p)
	if c.MaxUploadSize <= 0 {
		p.addf("maxUploadSize", "must be greater than 0, got %d", c.MaxUploadSize)
	}
	if c.AuthCacheSize < 0 {
		p.addf("authCacheSize", "must be 0 (no cache) or more, got %d", c.AuthCacheSize)
	}
	if c.ObjectCacheSize < 0 {
		p.addf("objectCacheSize", "must be 0 (no cache) or more, got %d", c.ObjectCacheSize)
	}
	if c.HeapFloor < 0 {
		p.addf("heapFloor", "must be 0 (the runtime's pace) or more, got %d", c.HeapFloor)
	}
	if c.ShutdownTimeout <= 0 {
		p.addf("shutdownTimeout", "must be greater than 0, got %s", c.ShutdownTimeout)
	}
	c.validateAuth(&p)
	c.validateUpstreams(&p)
	for i, n := range c.Nodes {
		key := fmt.Sprintf("nodes[%d]", i)
		if n.ID == "" || strings.ContainsFunc(n.ID, unicode.IsSpace) {
			p.addf(key+".id", "required, without whitespace")
		}
		if u, err := url.Parse(n.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.addf(key+".baseURL", "%q is not an absolute http(s) URL", n.BaseURL)
		}
	}
	if c.Replication.CNBaseURL != "" {
		if u, err := url.Parse(c.Replication.CNBaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.addf("replication.cnBaseURL", "%q is not an absolute http(s) URL", c.Replication.CNBaseURL)
		}
	}

	switch c.Catalog.Driver {
	case DriverSQLite:
		if c.DataDir == "" {
			p.addf("dataDir", "required when catalog.driver is %s", DriverSQLite)
		}
	case DriverPostgres:
		if c.Catalog.DSN == "" {
			p.addf("catalog.dsn", "required when catalog.driver is %s", DriverPostgres)
		}
	case "":
		p.addf("catalog.driver", "required: %s or %s", DriverSQLite, DriverPostgres)
	default:
		p.addf("catalog.driver", "%q is not %s or %s", c.Catalog.Driver, DriverSQLite, DriverPostgres)
	}

	if c.Catalog.CacheSize < 0 || c.Catalog.MmapSize < 0 || c.Catalog.RecordCacheSize < 0 {
		p.addf("catalog", "cacheSize, mmapSize and recordCacheSize must not be negative, got %d, %d and %d",
			c.Catalog.CacheSize, c.Catalog.MmapSize, c.Catalog.RecordCacheSize)
	}
	c.Node.validate(&p)
	if r := c.Replication; r.MaxAttempts < 1 {
		p.addf("replication.maxAttempts", "must be at least 1, got %d", r.MaxAttempts)
	}
	if r := c.Replication; r.RetryBackoff <= 0 {
		p.addf("replication.retryBackoff", "must be greater than 0, got %s", r.RetryBackoff)
	}
	if r := c.Replication; r.RescueAfter < 3*time.Second {
		p.addf("replication.rescueAfter", "must be at least 3s (the lease is renewed every third of it), got %s", r.RescueAfter)
	}
	c.validateMetrics(&p)
	c.Limits.validate(&p)
	c.CORS.validate(&p)
	c.Log.validate(&p)
	return errors.Join(p...)
}

func (c *Config) validateRoles(p *problems) {
	if len(c.Roles) == 0 {
		p.addf("roles", "at least one of %s or %s is required", RoleMN, RoleCN)
	}
	seen := make(map[string]bool, len(c.Roles))
	for i, r := range c.Roles {
		key := fmt.Sprintf("roles[%d]", i)
		switch {
		case r != RoleMN && r != RoleCN:
			p.addf(key, "%q is not %s or %s", r, RoleMN, RoleCN)
		case seen[r]:
			p.addf(key, "%q is listed twice", r)
		}
		seen[r] = true
	}
}

func (n *Node) validate(p *problems) {
	switch {
	case n.ID == "":
		p.addf("node.id", "required (DataONE node ids look like urn:node:NAME)")
	case strings.IndexFunc(n.ID, unicode.IsSpace) >= 0:
		p.addf("node.id", "%q contains whitespace", n.ID)
	}
	if (n.ClientCert == "") != (n.ClientKey == "") {
		p.addf("node.clientCert", "node.clientCert and node.clientKey go together: set both or neither")
	}
	if strings.TrimSpace(n.Name) == "" {
		p.addf("node.name", "required")
	}
	if strings.TrimSpace(n.Description) == "" {
		p.addf("node.description", "required")
	}
	if n.BaseURL != "" {
		u, err := url.Parse(n.BaseURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.addf("node.baseURL", "%q is not an absolute http or https URL", n.BaseURL)
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(n.BaseURL, "#"):
			p.addf("node.baseURL", "%q must not have a query or a fragment", n.BaseURL)
		}
	}
	if len(n.ContactSubjects) == 0 {
		p.addf("node.contactSubjects", "at least one subject is required")
	}
	for _, l := range []struct {
		key      string
		subjects []string
	}{
		{"node.subjects", n.Subjects},
		{"node.contactSubjects", n.ContactSubjects},
		{"node.administrators", n.Administrators},
		{"node.cnSubjects", n.CNSubjects},
		{"node.submitters", n.Submitters},
	} {
		for i, s := range l.subjects {
			key := fmt.Sprintf("%s[%d]", l.key, i)
			switch {
			case strings.TrimSpace(s) == "":
				p.addf(key, "empty subject")
			case strings.TrimSpace(s) != s:
				p.addf(key, "%q has leading or trailing whitespace", s)
			}
		}
	}
	rp := n.ReplicationPolicy
	if rp.MaxObjectSize < 0 {
		p.addf("node.replicationPolicy.maxObjectSize", "must be 0 (no limit) or more, got %d", rp.MaxObjectSize)
	}
	if rp.SpaceAllocated < 0 {
		p.addf("node.replicationPolicy.spaceAllocated", "must be 0 (no limit) or more, got %d", rp.SpaceAllocated)
	}
	for _, l := range []struct {
		key string
		ids []string
	}{{"node.replicationPolicy.allowedNodes", rp.AllowedNodes}, {"node.replicationPolicy.allowedObjectFormats", rp.AllowedObjectFormats}} {
		for i, id := range l.ids {
			if id == "" || strings.ContainsFunc(id, unicode.IsSpace) {
				p.addf(fmt.Sprintf("%s[%d]", l.key, i), "%q is empty or contains whitespace", id)
			}
		}
	}
}

func (c *Config) validateMetrics(p *problems) {
	m := c.Metrics
	if !strings.HasPrefix(m.Path, "/") {
		p.addf("metrics.path", "%q does not start with /", m.Path)
	} else if m.Listen == "" && (m.Path == "/" || m.Path == "/healthz" || m.Path == "/readyz") {
		// One table of exact paths serves these: the metrics would take the
		// probe's place, and /readyz would answer ready whatever the upstreams.
		p.addf("metrics.path", "%q is a probe or the status page on the main listener; choose another path, or a metrics.listen of its own", m.Path)
	} else if prefix := "/" + c.Svc; m.Listen == "" && c.Svc != "" &&
		(m.Path == prefix || strings.HasPrefix(m.Path, prefix+"/")) {
		p.addf("metrics.path", "%q is under the DataONE prefix %s on the main listener", m.Path, prefix)
	}
	switch {
	case m.Listen == "":
	case !isHostPort(m.Listen):
		p.addf("metrics.listen", "%q is not a host:port address", m.Listen)
	case sameListener(m.Listen, c.Listen):
		p.addf("metrics.listen", "%q is the same address as listen (%q); leave it empty to serve metrics on the main listener", m.Listen, c.Listen)
	}
}

// problems collects validation errors, each prefixed with its key.
type problems []error

func (p *problems) addf(key, format string, a ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
}

// isHostPort reports whether s is host:port with a numeric port (0 to 65535)
// and a host that is empty, an IP address or a DNS name.
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return false
	}
	if host == "" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(host, "."), ".") {
		if label == "" || strings.IndexFunc(label, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return false
		}
	}
	return true
}

// isPathSegment reports whether s is one URL path segment made only of
// unreserved characters (RFC 3986), other than "." and "..".
func isPathSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '-' || r == '.' || r == '_' || r == '~')
	}) < 0
}

// sameListener reports whether two valid host:port addresses would contend for
// one socket: the same fixed port, and the same host or a wildcard host.
func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	na, errA := strconv.ParseUint(pa, 10, 16)
	nb, errB := strconv.ParseUint(pb, 10, 16)
	if errA != nil || errB != nil || na != nb || na == 0 {
		return false
	}
	return strings.EqualFold(ha, hb) || isWildcard(ha) || isWildcard(hb)
}

// isWildcard reports whether a listen host means every interface.
func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsUnspecified()
}

// validateAuth checks TLS, sessions and the directory.
func (c *Config) validateAuth(p *problems) {
	if c.AuthCacheTTL <= 0 {
		p.addf("authCacheTTL", "must be greater than 0, got %s", c.AuthCacheTTL)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		p.addf("tls", "cert and key go together: set both or neither")
	}
	if c.TLS.ClientCAs != "" && c.TLS.Cert == "" {
		p.addf("tls.clientCAs", "client certificates need d1bridge to terminate TLS (tls.cert and tls.key)")
	}
	if c.Auth.TokenLifetime <= 0 {
		p.addf("auth.tokenLifetime", "must be greater than 0, got %s", c.Auth.TokenLifetime)
	}
	for i, k := range c.Auth.TokenKeys {
		if strings.TrimSpace(k) == "" {
			p.addf(fmt.Sprintf("auth.tokenKeys[%d]", i), "empty path")
		}
	}
	px := c.Auth.Proxy
	if c.EnableSessionFromHeader {
		if px.SubjectHeader == "" {
			p.addf("auth.proxy.subjectHeader", "required when enableSessionFromHeader is on")
		}
		if px.Secret == "" && len(px.TrustedAddresses) == 0 {
			p.addf("auth.proxy", "enableSessionFromHeader needs a secret or trustedAddresses, or anyone could claim any subject")
		}
		if px.Secret != "" && px.SecretHeader == "" {
			p.addf("auth.proxy.secretHeader", "required with a secret")
		}
	}
	for i, a := range px.TrustedAddresses {
		if _, err := ParseCIDR(a); err != nil {
			p.addf(fmt.Sprintf("auth.proxy.trustedAddresses[%d]", i), "%v", err)
		}
	}
	l := c.LDAP
	if c.EnableAppendLdapGroups {
		if !strings.HasPrefix(l.URL, "ldap://") && !strings.HasPrefix(l.URL, "ldaps://") {
			p.addf("ldap.url", "an ldap:// or ldaps:// URL is required when enableAppendLdapGroups is on, got %q", l.URL)
		}
		if l.UserFilter == "" {
			p.addf("ldap.userFilter", "required when enableAppendLdapGroups is on")
		}
		if l.UserBaseDN == "" {
			p.addf("ldap.userBaseDN", "required when enableAppendLdapGroups is on")
		}
		if l.GroupBaseDN == "" && l.GroupFilter != "" {
			p.addf("ldap.groupBaseDN", "required with ldap.groupFilter")
		}
		if l.GroupFilter == "" && !l.MemberOf {
			p.addf("ldap.groupFilter", "required unless ldap.memberOf is on: groups come from one or the other")
		}
	}
	if l.Timeout <= 0 {
		p.addf("ldap.timeout", "must be greater than 0, got %s", l.Timeout)
	}
	if l.MaxConnections <= 0 {
		p.addf("ldap.maxConnections", "must be at least 1, got %d", l.MaxConnections)
	}
	if l.CacheTTL <= 0 {
		p.addf("ldap.cacheTTL", "must be greater than 0, got %s", l.CacheTTL)
	}
	if l.Backoff < 0 {
		p.addf("ldap.backoff", "must not be negative, got %s", l.Backoff)
	}
	if l.OnError != "degrade" && l.OnError != "fail" {
		p.addf("ldap.onError", "must be degrade or fail, got %q", l.OnError)
	}
}

// ParseCIDR reads an address or a CIDR range (a bare address is a /32 or /128).
func ParseCIDR(s string) (*net.IPNet, error) {
	if !strings.Contains(s, "/") {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address or CIDR range", s)
		}
		bits := 128
		if ip.To4() != nil {
			ip, bits = ip.To4(), 32
		}
		return &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}, nil
	}
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IP address or CIDR range", s)
	}
	return n, nil
}

// validateUpstreams checks the upstream list and the store that names one.
func (c *Config) validateUpstreams(p *problems) {
	names := map[string]string{}
	prefixes := map[string]string{} // of the dataset sources
	for i, u := range c.Upstreams {
		key := fmt.Sprintf("upstreams[%d]", i)
		if u.Datasets() {
			// Two sources' datasets of one id would be one package, each
			// source's pass archiving what the other registered.
			if other, ok := prefixes[u.Harvest.PIDPrefix]; ok {
				p.addf(key+".harvest.pidPrefix", "%q is also the pidPrefix of %s, another dataset source: give each its own", u.Harvest.PIDPrefix, other)
			} else {
				prefixes[u.Harvest.PIDPrefix] = key
			}
		}
		switch {
		case u.Name == "":
			p.addf(key+".name", "required")
		case names[u.Name] != "":
			p.addf(key+".name", "%q is also the name of %s", u.Name, names[u.Name])
		default:
			names[u.Name] = key
		}
		switch u.Type {
		case UpstreamS3, UpstreamWebDAV, UpstreamHTTP, UpstreamDataONE, UpstreamDataCite,
			UpstreamFiles, UpstreamOAIPMH, UpstreamSitemap, UpstreamOCFL:
		default:
			p.addf(key+".type", "%q is not s3, webdav, http, dataone, datacite, files, oaipmh, sitemap or ocfl", u.Type)
		}
		if h := u.Harvest; h.Interval != 0 || len(h.Readers) > 0 || h.RightsHolder != "" || h.Submitter != "" || h.Depth != 0 {
			switch u.Type {
			case UpstreamDataONE, UpstreamDataCite:
				p.addf(key+".harvest", "upstreams of type %s are not harvested", u.Type)
			}
			if h.Interval < 0 {
				p.addf(key+".harvest.interval", "must not be negative, got %s", h.Interval)
			}
			if h.LeaseTTL != 0 && h.LeaseTTL < time.Second {
				p.addf(key+".harvest.leaseTTL", "must be at least 1s, got %s", h.LeaseTTL)
			}
			if h.FullInterval < 0 {
				p.addf(key+".harvest.fullInterval", "must not be negative, got %s", h.FullInterval)
			}
			if h.Depth < 0 {
				p.addf(key+".harvest.depth", "must not be negative, got %d", h.Depth)
			}
			if h.Depth > 0 && u.Type != UpstreamS3 && u.Type != UpstreamWebDAV && u.Type != UpstreamFiles {
				p.addf(key+".harvest.depth", "only file trees (s3, webdav, files) are grouped by depth")
			}
		}
		if u.Type == UpstreamFiles && u.Harvest.Depth == 0 {
			p.addf(key+".harvest.depth", "a files upstream is harvested as datasets: set depth (1: each top folder is a dataset)")
		}
		if u.Local() {
			if u.BaseURL != "" {
				p.addf(key+".baseURL", "an upstream of type %s is a directory (options.root), not a URL", u.Type)
			}
		} else if b, err := url.Parse(u.BaseURL); err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
			p.addf(key+".baseURL", "%q is not an absolute http(s) URL", u.BaseURL)
		}
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"dialTimeout", u.DialTimeout}, {"headerTimeout", u.HeaderTimeout}, {"timeout", u.Timeout},
			{"retry.minBackoff", u.Retry.MinBackoff}, {"retry.maxBackoff", u.Retry.MaxBackoff}, {"breaker.openFor", u.Breaker.OpenFor}} {
			if d.v < 0 {
				p.addf(key+"."+d.name, "must not be negative, got %s", d.v)
			}
		}
		if (u.TLS.Cert == "") != (u.TLS.Key == "") {
			p.addf(key+".tls", "cert and key go together: set both or neither")
		}
		if u.MaxConns < 0 || u.Retry.Max < 0 {
			p.addf(key, "maxConns and retry.max must not be negative")
		}
	}
	c.checkNames(p, names, "mapping", c.Mapping, "a mapping serves the node from a dataone upstream", UpstreamDataONE)
	c.checkNames(p, names, "store", c.Store, "object bytes can be kept on s3, webdav or http", UpstreamS3, UpstreamWebDAV, UpstreamHTTP)
	c.checkNames(p, names, "identifiers", c.Identifiers, "identifiers are minted by a datacite upstream", UpstreamDataCite)
}

// checkNames checks that key, when set, names an upstream of one of types.
func (c *Config) checkNames(p *problems, names map[string]string, key, name, why string, types ...string) {
	if name == "" {
		return
	}
	at, ok := names[name]
	if !ok {
		p.addf(key, "no upstream is named %q", name)
		return
	}
	var i int
	fmt.Sscanf(at, "upstreams[%d]", &i)
	if t := c.Upstreams[i].Type; !slices.Contains(types, t) {
		p.addf(key, "upstream %q is of type %s; %s", name, t, why)
	}
}
