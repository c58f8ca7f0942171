package auth

// LDAPDirectory against a real slapd (auth/ldaptest), seeded with
//
//	alice: groupOfNames dataone-admins, researchers
//	bob:   groupOfNames researchers; posixGroup posix-staff
//	carol: posixGroup posix-staff

import (
	"bufio"
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth/ldaptest"
	"github.com/d1bridge/d1bridge/config"
)

var (
	aliceLDAP = ldaptest.UserDN("alice")
	bobLDAP   = ldaptest.UserDN("bob")
	carolLDAP = ldaptest.UserDN("carol")
	admins    = ldaptest.GroupDN("dataone-admins")
	research  = ldaptest.GroupDN("researchers")
	staff     = ldaptest.GroupDN("posix-staff")
)

// searches counts the directory searches Observe reports, by outcome.
type searches struct {
	mu  sync.Mutex
	n   map[string]int
	all int
}

func (s *searches) observe(outcome string, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[outcome]++
	s.all++
}

func (s *searches) count(outcome string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if outcome == "" {
		return s.all
	}
	return s.n[outcome]
}

// newDirectory is a directory over srv configured as the configuration's
// defaults are, with the test's base DNs, then edited by opts.
func newDirectory(t testing.TB, srv *ldaptest.Server, opts ...func(*LDAPOptions)) (*LDAPDirectory, *searches) {
	t.Helper()
	def := config.Default().LDAP
	obs := &searches{}
	o := LDAPOptions{
		URL: srv.URL, UserBaseDN: ldaptest.PeopleDN, UserFilter: def.UserFilter,
		GroupBaseDN: ldaptest.GroupsDN, GroupFilter: def.GroupFilter, GroupSubject: def.GroupSubject,
		Timeout: def.Timeout, MaxConnections: def.MaxConnections, CacheSize: 1000, CacheTTL: def.CacheTTL,
		Observe: obs.observe,
	}
	for _, f := range opts {
		f(&o)
	}
	d := NewLDAPDirectory(o)
	t.Cleanup(func() { d.Close() })
	return d, obs
}

func sorted(ss []string) []string {
	ss = slices.Clone(ss)
	slices.Sort(ss)
	return ss
}

func wantGroups(t testing.TB, d *LDAPDirectory, subject string, want ...string) {
	t.Helper()
	got, err := d.Groups(context.Background(), subject)
	if err != nil {
		t.Fatalf("Groups(%q): %v", subject, err)
	}
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("Groups(%q) = %q, want %q", subject, got, want)
	}
}

// TestLDAPGroups: the configuration's default group filter finds groupOfNames
// groups by member DN and posixGroup groups by memberUid, for a subject given as
// the user's DN ((uid={uid})) or as the uid itself ((uid={subject})).
func TestLDAPGroups(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	byDN, obs := newDirectory(t, srv)
	byUID, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.UserFilter = "(uid={subject})" })
	tests := []struct {
		uid  string
		want []string
	}{
		{"alice", []string{admins, research}},
		{"bob", []string{research, staff}},
		{"carol", []string{staff}},
		{"nobody", nil},
	}
	for _, tc := range tests {
		t.Run(tc.uid, func(t *testing.T) {
			wantGroups(t, byDN, ldaptest.UserDN(tc.uid), tc.want...)
			wantGroups(t, byUID, tc.uid, tc.want...)
		})
	}
	if ok, nf := obs.count("ok"), obs.count("not_found"); ok != 3 || nf != 1 {
		t.Errorf("observed %d ok and %d not_found searches, want 3 and 1", ok, nf)
	}

	t.Run("entry found by another attribute", func(t *testing.T) {
		// A CILogon-style subject matched by cn: memberUid takes the entry's uid.
		byCN, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.UserFilter = "(cn={uid})" })
		wantGroups(t, byCN, "CN=Bob Jones,O=Example,C=US,DC=cilogon,DC=org", research, staff)
	})

	t.Run("service bind", func(t *testing.T) {
		d, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.BindDN, o.BindPassword = ldaptest.AdminDN, ldaptest.AdminPassword })
		wantGroups(t, d, bobLDAP, research, staff)
		bad, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.BindDN, o.BindPassword = ldaptest.AdminDN, "wrong" })
		if _, err := bad.Groups(context.Background(), bobLDAP); err == nil || !strings.Contains(err.Error(), "Invalid Credentials") {
			t.Errorf("a wrong bind password: %v, want Invalid Credentials", err)
		}
	})
}

// TestLDAPAmbiguousUser: a subject whose filter finds two entries (uid=alice
// in two branches) gets no groups, either entry's would be a guess, unless it
// is one of their DNs.
func TestLDAPAmbiguousUser(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	d, _ := newDirectory(t, srv)
	wantGroups(t, d, ldaptest.UserDN("alice"), admins, research)
	srv.Add(t, "dn: ou=Guests,"+ldaptest.PeopleDN+"\nobjectClass: organizationalUnit\nou: Guests\n\n"+
		"dn: uid=alice,ou=Guests,"+ldaptest.PeopleDN+"\nobjectClass: inetOrgPerson\nuid: alice\ncn: alice\nsn: alice\n")
	fresh, _ := newDirectory(t, srv) // no cached groups
	wantGroups(t, fresh, "CN=alice,O=Elsewhere,DC=example,DC=net")
	wantGroups(t, fresh, strings.ToUpper(ldaptest.UserDN("alice")), admins, research)
}

// TestLDAPMemberOf: groups from the user entry's memberOf attribute (the
// overlay covers groupOfNames only), alone or merged with the filter's.
func TestLDAPMemberOf(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	only, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.GroupFilter, o.MemberOf = "", true })
	wantGroups(t, only, aliceLDAP, admins, research)
	wantGroups(t, only, bobLDAP, research)
	wantGroups(t, only, carolLDAP)

	both, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.MemberOf = true })
	got, err := both.Groups(context.Background(), bobLDAP)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(got), sorted([]string{research, staff})) {
		t.Errorf("memberOf and filter: %q, want researchers once and posix-staff", got)
	}
}

// TestLDAPGroupSubject: a group becomes the subject "dn" (its entry DN) or the
// value of an attribute such as cn, from the search and from memberOf alike.
func TestLDAPGroupSubject(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	dn, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.GroupSubject = "dn" })
	wantGroups(t, dn, bobLDAP, research, staff)
	cn, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.GroupSubject = "cn" })
	wantGroups(t, cn, bobLDAP, "researchers", "posix-staff")
	wantGroups(t, cn, aliceLDAP, "dataone-admins", "researchers")
	memberOfCN, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.GroupSubject, o.GroupFilter, o.MemberOf = "cn", "", true })
	wantGroups(t, memberOfCN, aliceLDAP, "dataone-admins", "researchers")
}

// TestLDAPFilterEscaping: subject values are escaped into the filters, so a
// subject crafted as a filter matches nothing (rather than every user), and
// users whose names hold filter characters are still found.
func TestLDAPFilterEscaping(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	srv.AddUser(t, "pat(x)*")
	srv.AddMember(t, "researchers", "pat(x)*")
	srv.AddMember(t, "posix-staff", "pat(x)*")
	byDN, obs := newDirectory(t, srv)
	byUID, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.UserFilter = "(uid={subject})" })
	hostile := []string{
		"*)(uid=*",
		"*",
		"alice)(|(uid=*",
		"uid=*,ou=People,dc=example,dc=org",
		`uid=*)(uid=*,ou=People,dc=example,dc=org`,
		"alice\x00",
		`\2a`,
	}
	for _, s := range hostile {
		for name, d := range map[string]*LDAPDirectory{"dn": byDN, "uid": byUID} {
			got, err := d.Groups(context.Background(), s)
			if err != nil || len(got) != 0 {
				t.Errorf("%s filter, subject %q: %q, %v; want no groups and no error", name, s, got, err)
			}
		}
	}
	if n := obs.count("not_found"); n != len(hostile) {
		t.Errorf("%d not_found searches, want %d (one per hostile subject)", n, len(hostile))
	}
	wantGroups(t, byDN, ldaptest.UserDN("pat(x)*"), research, staff)
	wantGroups(t, byUID, "pat(x)*", research, staff)
}

// TestLDAPCacheTTL: a removed membership is still returned from the cache until
// the TTL has passed since the search, and no longer after it.
func TestLDAPCacheTTL(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	const ttl = time.Second
	d, obs := newDirectory(t, srv, func(o *LDAPOptions) { o.CacheTTL = ttl })

	start := time.Now() // before the search, so the entry expires after start+ttl
	wantGroups(t, d, bobLDAP, research, staff)
	added := time.Now() // after it, so the entry has expired by added+ttl
	srv.RemoveMember(t, "researchers", "bob")
	if !strings.Contains(srv.Search(t, "(cn=researchers)", "member"), "uid=alice") ||
		strings.Contains(srv.Search(t, "(cn=researchers)", "member"), "uid=bob") {
		t.Fatal("the directory still lists bob in researchers")
	}
	got, err := d.Groups(context.Background(), bobLDAP)
	if elapsed := time.Since(start); elapsed < ttl {
		if err != nil || !slices.Contains(got, research) || obs.count("") != 1 {
			t.Errorf("%s after the search (TTL %s): %q, %v, %d searches; want the cached groups, researchers included, and no new search",
				elapsed, ttl, got, err, obs.count(""))
		}
	} else {
		t.Logf("the removal took %s, longer than the TTL: the before-TTL check was not possible", elapsed)
	}
	time.Sleep(time.Until(added.Add(ttl + 50*time.Millisecond)))
	wantGroups(t, d, bobLDAP, staff)
	if n := obs.count(""); n != 2 {
		t.Errorf("%d searches, want 2 (one more after the TTL)", n)
	}
	// And a new membership shows after the TTL the same way.
	srv.AddMember(t, "researchers", "carol")
	wantGroups(t, d, carolLDAP, research, staff)
}

// hangBound is the most a directory failure may take: far above the timeout, so
// that it bounds hangs without claiming speed.
func hangBound(timeout time.Duration) time.Duration { return 5 * timeout }

// TestLDAPStoppedDirectory: with slapd gone, Groups fails within the timeout's
// bound, and during the backoff fails at once without asking the directory.
func TestLDAPStoppedDirectory(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	const timeout = 500 * time.Millisecond
	d, obs := newDirectory(t, srv, func(o *LDAPOptions) { o.Timeout, o.Backoff = timeout, time.Minute })
	wantGroups(t, d, aliceLDAP, admins, research) // cached: survives the outage
	srv.Stop()

	start := time.Now()
	_, err := d.Groups(context.Background(), bobLDAP)
	elapsed := time.Since(start)
	t.Logf("stopped directory: %v after %s", err, elapsed)
	if err == nil {
		t.Fatal("Groups succeeded against a stopped directory")
	}
	if elapsed > hangBound(timeout) {
		t.Errorf("Groups took %s against a stopped directory, bound %s", elapsed, hangBound(timeout))
	}
	if obs.count("error") != 1 {
		t.Errorf("%d error outcomes observed, want 1", obs.count("error"))
	}

	for _, s := range []string{bobLDAP, carolLDAP} {
		start = time.Now()
		_, err = d.Groups(context.Background(), s)
		elapsed = time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "failed recently") {
			t.Errorf("during the backoff, %s: %v, want the recent failure", s, err)
		}
		if elapsed > timeout/2 {
			t.Errorf("during the backoff, %s took %s: it should not wait for the directory", s, elapsed)
		}
	}
	if n := obs.count(""); n != 2 {
		t.Errorf("%d searches, want 2 (none during the backoff)", n)
	}
	wantGroups(t, d, aliceLDAP, admins, research)

	// Without a backoff every call asks again, each bounded.
	nb, nobs := newDirectory(t, srv, func(o *LDAPOptions) { o.Timeout, o.Backoff = timeout, 0 })
	for range 3 {
		start = time.Now()
		if _, err := nb.Groups(context.Background(), bobLDAP); err == nil || time.Since(start) > hangBound(timeout) {
			t.Errorf("no backoff: %v after %s", err, time.Since(start))
		}
	}
	if nobs.count("error") != 3 {
		t.Errorf("no backoff: %d failed searches, want 3", nobs.count("error"))
	}
}

// TestLDAPHungDirectory: a directory that accepts connections but never answers
// (slapd suspended) costs at most about the timeout, a waiter's own deadline is
// honoured, and the directory is used again once it answers.
func TestLDAPHungDirectory(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	const timeout = 500 * time.Millisecond
	d, obs := newDirectory(t, srv, func(o *LDAPOptions) { o.Timeout, o.Backoff = timeout, 0 })
	wantGroups(t, d, carolLDAP, staff) // a pooled connection exists
	srv.Freeze(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw(t)
		}
	}()

	start := time.Now()
	_, err := d.Groups(context.Background(), bobLDAP)
	elapsed := time.Since(start)
	t.Logf("hung directory: %v after %s", err, elapsed)
	if err == nil {
		t.Fatal("Groups succeeded against a hung directory")
	}
	if elapsed > hangBound(timeout) {
		t.Errorf("Groups took %s against a hung directory, bound %s", elapsed, hangBound(timeout))
	}
	if obs.count("error") != 1 {
		t.Errorf("%d error outcomes, want 1", obs.count("error"))
	}
	// The hung answer is not cached as "no groups".
	if _, ok := d.cache.Get(bobLDAP); ok {
		t.Error("a failed search was cached")
	}

	const waiterDeadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), waiterDeadline)
	defer cancel()
	start = time.Now()
	_, err = d.Groups(ctx, aliceLDAP)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > hangBound(waiterDeadline) {
		t.Errorf("a waiter with a %s deadline: %v after %s", waiterDeadline, err, time.Since(start))
	}

	srv.Thaw(t)
	thawed = true
	time.Sleep(2 * timeout) // the abandoned search for alice ends (and fails) first
	wantGroups(t, d, bobLDAP, research, staff)
}

// TestLDAPSearchContextDone: a search whose context ends before the directory
// answers is an error, not an empty answer (go-ldap closes the results without
// an error then). With a long connection timeout, only the context can end it.
func TestLDAPSearchContextDone(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	d, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.Timeout = 30 * time.Second })
	conn, _, err := d.acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.release(conn, false)
	srv.Freeze(t)
	defer srv.Thaw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	entries, err := d.find(ctx, conn, ldaptest.PeopleDN, "(uid=bob)", []string{"memberOf"})
	if err == nil {
		t.Fatalf("find returned %d entries and no error when its context ended before any answer", len(entries))
	}
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("find: %v after %s, want the deadline at once", err, time.Since(start))
	}
}

// TestLDAPMissingBaseDN: a base DN that does not exist (an empty one, the
// configuration's default, gets "no such object" from OpenLDAP) is an error,
// not a directory where nobody has groups.
func TestLDAPMissingBaseDN(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	for name, edit := range map[string]func(*LDAPOptions){
		"empty user base":   func(o *LDAPOptions) { o.UserBaseDN = "" },
		"missing user base": func(o *LDAPOptions) { o.UserBaseDN = "ou=Nobody," + ldaptest.BaseDN },
		"missing group base": func(o *LDAPOptions) {
			o.GroupBaseDN = "ou=Teams," + ldaptest.BaseDN
		},
	} {
		t.Run(name, func(t *testing.T) {
			d, obs := newDirectory(t, srv, edit)
			_, err := d.Groups(context.Background(), bobLDAP)
			if err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Errorf("Groups: %v, want the missing base DN", err)
			}
			if obs.count("error") != 1 {
				t.Errorf("%d error outcomes, want 1", obs.count("error"))
			}
		})
	}
}

// TestLDAPBoundedConnections: 50 concurrent lookups of distinct subjects through
// at most 2 connections all succeed, and no more than 2 connections are open.
func TestLDAPBoundedConnections(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	const n, maxConns = 50, 2
	uids := make([]string, n)
	for i := range uids {
		uids[i] = fmt.Sprintf("user%02d", i)
	}
	srv.AddUsers(t, uids...)
	srv.AddMember(t, "researchers", uids...)
	d, obs := newDirectory(t, srv, func(o *LDAPOptions) { o.MaxConnections = maxConns })

	_, port, _ := strings.Cut(srv.Addr, ":")
	stop := make(chan struct{})
	peak := make(chan int)
	go func() {
		// A count holds when two samples in a row see it: a socket caught
		// between its close and the kernel's state change is not a connection
		// the pool holds (seen once in CI under load).
		most, last := 0, 0
		for {
			now := establishedTo(t, port)
			most = max(most, min(now, last))
			last = now
			select {
			case <-stop:
				peak <- most
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	release := make(chan struct{})
	for _, uid := range uids {
		wg.Go(func() {
			<-release
			got, err := d.Groups(context.Background(), ldaptest.UserDN(uid))
			if err == nil && !slices.Equal(got, []string{research}) {
				err = fmt.Errorf("%s: groups %q, want researchers", uid, got)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	close(release)
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := obs.count("ok"); got != n {
		t.Errorf("%d successful searches, want %d", got, n)
	}
	if p := <-peak; p > maxConns {
		t.Errorf("%d connections to the directory were open at once, bound %d", p, maxConns)
	} else {
		t.Logf("at most %d connections were seen open (bound %d)", p, maxConns)
	}
}

// establishedTo counts this machine's established TCP connections to the
// loopback port (client side), from /proc/net/tcp.
func establishedTo(t testing.TB, port string) int {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Errorf("reading /proc/net/tcp: %v", err)
		return 0
	}
	defer f.Close()
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st ...; st 01 is ESTABLISHED.
		if len(fields) > 3 && strings.HasSuffix(fields[2], want) && fields[3] == "01" {
			n++
		}
	}
	return n
}

// TestLDAPSingleflight: 1,000 concurrent lookups of one new subject make
// exactly one directory search, and all get its answer.
func TestLDAPSingleflight(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	d, obs := newDirectory(t, srv)
	const n = 1000
	var wg sync.WaitGroup
	var failed atomic.Int32
	release := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-release
			got, err := d.Groups(context.Background(), bobLDAP)
			if err != nil || !slices.Equal(sorted(got), sorted([]string{research, staff})) {
				if failed.Add(1) == 1 {
					t.Errorf("Groups: %q, %v", got, err)
				}
			}
		})
	}
	close(release)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d lookups failed", f, n)
	}
	if got := obs.count(""); got != 1 {
		t.Errorf("%d concurrent lookups of one subject made %d directory searches, want exactly 1", n, got)
	}
}

// TestLDAPSessionGroups: the Authenticator appends the directory's groups to a
// token's subject; when the directory fails it goes on without them (degrade) or
// answers ServiceFailure (fail).
func TestLDAPSessionGroups(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	d, _ := newDirectory(t, srv, func(o *LDAPOptions) { o.Timeout = 500 * time.Millisecond })
	keys := []*rsa.PublicKey{&cnKey().PublicKey}
	a := NewAuthenticator(AuthenticatorOptions{TokenKeys: keys, Groups: d})
	s, err := a.Session(bearerRequest(signRS256(t, cnKey(), validClaims(bobLDAP))))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{bobLDAP, research, staff, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}
	if s.Subject != bobLDAP || !slices.Equal(s.Subjects, want) {
		t.Errorf("session %q %q, want %q", s.Subject, s.Subjects, want)
	}
	// A public session asks the directory nothing.
	if s, _ := a.Session(request()); !slices.Equal(s.Subjects, []string{adapter.SubjectPublic}) {
		t.Errorf("public session %q", s.Subjects)
	}

	srv.Stop()
	s, err = a.Session(bearerRequest(signRS256(t, cnKey(), validClaims(carolLDAP))))
	if err != nil {
		t.Fatalf("degrade: %v", err)
	}
	if want := []string{carolLDAP, adapter.SubjectAuthenticatedUser, adapter.SubjectPublic}; !slices.Equal(s.Subjects, want) {
		t.Errorf("degrade: subjects %q, want %q", s.Subjects, want)
	}
	fail := NewAuthenticator(AuthenticatorOptions{TokenKeys: keys, Groups: d, FailOnDirectoryError: true})
	if _, err := fail.Session(bearerRequest(signRS256(t, cnKey(), validClaims(carolLDAP)))); !adapter.IsKind(err, adapter.ServiceFailure) {
		t.Errorf("fail: %v, want ServiceFailure", err)
	}
}

func TestLDAPDefaults(t *testing.T) {
	t.Parallel()
	d := NewLDAPDirectory(LDAPOptions{URL: "ldap://127.0.0.1:1"})
	if d.o.CacheTTL <= 0 || d.o.Timeout <= 0 || d.o.MaxConnections <= 0 || d.o.GroupSubject != "dn" {
		t.Errorf("defaults %+v: want a positive cache TTL (zero would cache forever), timeout and bound", d.o)
	}
	if d.cache == nil {
		t.Error("no cache with the default TTL")
	}
}

// silentProxy forwards TCP connections to addr; stall makes the connections
// open so far swallow what is sent and answer nothing, as a NAT that dropped
// them while idle does, while new connections pass.
type silentProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	stalled []*atomic.Bool
	conns   []net.Conn
}

func newSilentProxy(t *testing.T, addr string) *silentProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			stalled := &atomic.Bool{}
			p.mu.Lock()
			p.stalled = append(p.stalled, stalled)
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if err != nil {
						return
					}
					if !stalled.Load() {
						dst.Write(buf[:n])
					}
				}
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return p
}

func (p *silentProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stalled {
		s.Store(true)
	}
}

// TestLDAPDroppedIdleConnection: a pooled connection the network dropped
// while idle costs one search's timeout, then a new connection answers; the
// directory is not marked down.
func TestLDAPDroppedIdleConnection(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	p := newSilentProxy(t, strings.TrimPrefix(srv.URL, "ldap://"))
	d, obs := newDirectory(t, srv, func(o *LDAPOptions) {
		o.URL, o.Timeout, o.Backoff = "ldap://"+p.ln.Addr().String(), 300*time.Millisecond, time.Minute
	})
	wantGroups(t, d, carolLDAP, staff) // a pooled connection exists
	p.stall()
	wantGroups(t, d, bobLDAP, research, staff)
	if n := obs.count("error"); n != 0 {
		t.Errorf("%d searches failed", n)
	}
}

// TestLDAPCloseDuringSearch: a connection a search holds while the directory
// is closed (a reload replaces it) is closed when the search ends, not pooled
// where nothing would take it again.
func TestLDAPCloseDuringSearch(t *testing.T) {
	t.Parallel()
	srv := ldaptest.Start(t)
	d, _ := newDirectory(t, srv)
	conn, _, err := d.acquire(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d.release(conn, true)
	if !conn.IsClosing() || len(d.idle) != 0 {
		t.Errorf("after Close, a released connection is open (%v) or pooled (%d idle)", !conn.IsClosing(), len(d.idle))
	}
}
