package auth

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-ldap/ldap/v3"
	"golang.org/x/sync/singleflight"
)

// LDAPOptions configures the group directory.
type LDAPOptions struct {
	URL          string // ldap://host:389 or ldaps://host:636
	BindDN       string // service account; empty binds anonymously
	BindPassword string
	// UserBaseDN and UserFilter find the caller's entry. {subject} is the whole
	// session subject, {uid} the value of its first RDN when it is a DN (else the
	// subject itself). Values are escaped.
	UserBaseDN, UserFilter string
	// GroupBaseDN and GroupFilter find the groups; {dn} is the user's entry DN,
	// {uid} its uid attribute (a posixGroup's memberUid names it; the first
	// RDN's value when the entry has none), {subject} as above.
	GroupBaseDN, GroupFilter string
	// GroupSubject is how a group becomes a subject: "dn" (its entry DN) or an
	// attribute such as cn.
	GroupSubject string
	// MemberOf also takes the groups named by the user entry's memberOf attribute.
	MemberOf       bool
	Timeout        time.Duration // dial and per-operation limit
	MaxConnections int           // pooled, bounded connections
	CacheSize      int           // subjects whose groups are kept
	CacheTTL       time.Duration // how long a subject's groups are believed
	// Backoff is how long a failed directory is not asked again: requests then
	// go on without it at once instead of waiting for it.
	Backoff time.Duration
	// Observe, when set, is told of every directory search: "ok", "not_found" or
	// "error", and how long it took.
	Observe func(outcome string, d time.Duration)
}

// LDAPDirectory looks subjects' groups up in an LDAP directory.
type LDAPDirectory struct {
	o      LDAPOptions
	slots  chan struct{}   // bounds open connections
	idle   chan *ldap.Conn // reusable bound connections
	closed atomic.Bool     // by Close: connections are no longer pooled
	flight singleflight.Group
	cache  *ttlCache[string, []string]

	mu        sync.Mutex
	downUntil time.Time
	downErr   error
}

// NewLDAPDirectory builds a directory client; it connects lazily.
func NewLDAPDirectory(o LDAPOptions) *LDAPDirectory {
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 4
	}
	if o.GroupSubject == "" {
		o.GroupSubject = "dn"
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 5 * time.Minute // the cache's zero TTL would mean forever
	}
	return &LDAPDirectory{o: o, slots: make(chan struct{}, o.MaxConnections),
		idle: make(chan *ldap.Conn, o.MaxConnections), cache: newTTLCache[string, []string](max(o.CacheSize, 1), o.CacheTTL)}
}

var _ GroupDirectory = (*LDAPDirectory)(nil)

// Groups returns the subject's groups: from the cache, or from one search however
// many requests wait for the same subject.
func (d *LDAPDirectory) Groups(ctx context.Context, subject string) ([]string, error) {
	if gs, ok := d.cache.Get(subject); ok {
		return gs, nil
	}
	if err := d.down(); err != nil {
		return nil, err
	}
	ch := d.flight.DoChan(subject, func() (any, error) {
		// A caller that missed the cache just before the previous search for this
		// subject stored its answer (and left the flight) finds it here.
		if gs, ok := d.cache.Get(subject); ok {
			return gs, nil
		}
		// The search outlives one waiter's cancellation: others may wait for it.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*d.o.Timeout)
		defer cancel()
		start := time.Now()
		gs, found, reused, err := d.search(sctx, subject, false)
		if err != nil && reused && sctx.Err() == nil {
			// A pooled connection may have been dropped while idle (a NAT's
			// idle timeout, the server's): one more try on a new one before
			// the directory counts as down.
			gs, found, _, err = d.search(sctx, subject, true)
		}
		d.observe(outcome(found, err), time.Since(start))
		if err != nil {
			d.markDown(err)
			return nil, err
		}
		d.cache.Add(subject, gs)
		return gs, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.([]string), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func outcome(found bool, err error) string {
	switch {
	case err != nil:
		return "error"
	case !found:
		return "not_found"
	}
	return "ok"
}

func (d *LDAPDirectory) observe(outcome string, dur time.Duration) {
	if d.o.Observe != nil {
		d.o.Observe(outcome, dur)
	}
}

func (d *LDAPDirectory) down() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Now().Before(d.downUntil) {
		return fmt.Errorf("the LDAP directory failed recently (%v); not asking again until %s", d.downErr, d.downUntil.Format(time.RFC3339))
	}
	return nil
}

func (d *LDAPDirectory) markDown(err error) {
	if d.o.Backoff <= 0 {
		return
	}
	d.mu.Lock()
	d.downUntil, d.downErr = time.Now().Add(d.o.Backoff), err
	d.mu.Unlock()
}

// search finds the user entry, then its groups, on a pooled connection
// unless fresh; reused says whether it ran on a pooled one.
func (d *LDAPDirectory) search(ctx context.Context, subject string, fresh bool) (groups []string, found, reused bool, err error) {
	conn, reused, err := d.acquire(ctx, fresh)
	if err != nil {
		return nil, false, false, err
	}
	healthy := false
	defer func() { d.release(conn, healthy) }()

	fill := func(tmpl, uid, dn string) string {
		return strings.NewReplacer("{subject}", ldap.EscapeFilter(subject), "{uid}", ldap.EscapeFilter(uid),
			"{dn}", ldap.EscapeFilter(dn)).Replace(tmpl)
	}
	users, err := d.find(ctx, conn, d.o.UserBaseDN, fill(d.o.UserFilter, firstRDNValue(subject), ""), []string{"uid", "memberOf"})
	if err != nil {
		return nil, false, reused, err
	}
	user := theUser(users, subject)
	if user == nil {
		healthy = true
		return nil, false, reused, nil
	}
	seen := map[string]bool{}
	add := func(g string) {
		if g != "" && !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	var memberOf []string
	if d.o.MemberOf {
		memberOf = user.GetAttributeValues("memberOf")
	}
	if d.o.GroupFilter != "" {
		attrs := []string{"dn"}
		if d.o.GroupSubject != "dn" {
			attrs = []string{d.o.GroupSubject}
		}
		// The entry's own uid, not the subject's first value: a subject found
		// by another attribute (CN=Bob Jones,... by cn) is still bob to a
		// posixGroup's memberUid.
		uid := user.GetAttributeValue("uid")
		if uid == "" {
			uid = firstRDNValue(user.DN)
		}
		entries, err := d.find(ctx, conn, d.o.GroupBaseDN, fill(d.o.GroupFilter, uid, user.DN), attrs)
		if err != nil {
			return nil, false, reused, err
		}
		for _, e := range entries {
			add(d.groupSubject(e.DN, e))
		}
	}
	for _, dn := range memberOf {
		add(d.groupSubject(dn, nil))
	}
	healthy = true
	return groups, true, reused, nil
}

// groupSubject names a group: its DN, or an attribute of its entry (for memberOf
// values, the value of the DN's first RDN when it is that attribute).
func (d *LDAPDirectory) groupSubject(dn string, e *ldap.Entry) string {
	if d.o.GroupSubject == "dn" {
		return dn
	}
	if e != nil {
		return e.GetAttributeValue(d.o.GroupSubject)
	}
	if parsed, err := ldap.ParseDN(dn); err == nil && len(parsed.RDNs) > 0 {
		for _, a := range parsed.RDNs[0].Attributes {
			if strings.EqualFold(a.Type, d.o.GroupSubject) {
				return a.Value
			}
		}
	}
	return dn
}

func (d *LDAPDirectory) find(ctx context.Context, conn *ldap.Conn, base, filter string, attrs []string) ([]*ldap.Entry, error) {
	req := ldap.NewSearchRequest(base, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases, 0, int(d.o.Timeout/time.Second)+1,
		false, filter, attrs, nil)
	res := conn.SearchAsync(ctx, req, 64)
	var out []*ldap.Entry
	for res.Next() {
		out = append(out, res.Entry())
	}
	err := res.Err()
	if err == nil && ctx.Err() != nil {
		// go-ldap ends a search whose context is done without an error: what
		// was read may be partial, and must not pass for a complete answer.
		err = ctx.Err()
	}
	if err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
			// The base itself is missing (an empty base DN gets this from
			// OpenLDAP): a misconfiguration, not a user without groups.
			return nil, fmt.Errorf("LDAP search %s: the base DN %q does not exist in the directory: %w", filter, base, err)
		}
		return nil, fmt.Errorf("LDAP search %s under %s: %w", filter, base, err)
	}
	return out, nil
}

// acquire takes a pooled connection (reused), unless fresh, or dials one,
// within the connection bound.
func (d *LDAPDirectory) acquire(ctx context.Context, fresh bool) (c *ldap.Conn, reused bool, err error) {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("waiting for an LDAP connection: %w", ctx.Err())
	}
	if !fresh {
		select {
		case c := <-d.idle:
			if !c.IsClosing() {
				return c, true, nil
			}
			c.Close()
		default:
		}
	}
	c, err = ldap.DialURL(d.o.URL, ldap.DialWithDialer(&net.Dialer{Timeout: d.o.Timeout}))
	if err != nil {
		<-d.slots
		return nil, false, fmt.Errorf("connecting to %s: %w", d.o.URL, err)
	}
	c.SetTimeout(d.o.Timeout)
	if d.o.BindDN != "" {
		if err := c.Bind(d.o.BindDN, d.o.BindPassword); err != nil {
			c.Close()
			<-d.slots
			return nil, false, fmt.Errorf("binding to %s as %s: %w", d.o.URL, d.o.BindDN, err)
		}
	}
	return c, false, nil
}

func (d *LDAPDirectory) release(c *ldap.Conn, healthy bool) {
	defer func() { <-d.slots }()
	if !healthy || c.IsClosing() || d.closed.Load() {
		c.Close()
		return
	}
	select {
	case d.idle <- c:
		if d.closed.Load() { // Close ran meanwhile: nothing would take it again
			d.Close()
		}
	default:
		c.Close()
	}
}

// Close closes the pooled connections, and those of searches still running
// as they end (a reload closes the directory it replaces).
func (d *LDAPDirectory) Close() error {
	d.closed.Store(true)
	for {
		select {
		case c := <-d.idle:
			c.Close()
		default:
			return nil
		}
	}
}

// theUser is the caller's entry among those the user filter found: the only
// one, or the one whose DN is the subject. Of several others, none: {uid} is
// a DN's first value only, two entries (uid=alice in two branches) are two
// people, and either one's groups could give the caller another's rights.
func theUser(users []*ldap.Entry, subject string) *ldap.Entry {
	if len(users) == 1 {
		return users[0]
	}
	if dn, err := ldap.ParseDN(subject); err == nil {
		for _, u := range users {
			if udn, err := ldap.ParseDN(u.DN); err == nil && udn.EqualFold(dn) {
				return u
			}
		}
	}
	return nil
}

// firstRDNValue is the value of a DN's first RDN (uid=bob,ou=People → bob), or s.
func firstRDNValue(s string) string {
	if dn, err := ldap.ParseDN(s); err == nil && len(dn.RDNs) > 0 && len(dn.RDNs[0].Attributes) > 0 {
		return dn.RDNs[0].Attributes[0].Value
	}
	return s
}
