// Package ldaptest runs a real OpenLDAP server (slapd) for tests: one per call
// of Start, on a free loopback port, with its configuration and database in the
// test's temporary directory, seeded with the users and groups of
// notes/real-services.md §2 and killed when the test ends.
//
// slapd and the ldap-utils clients (ldapadd, ldapmodify, ldapsearch) must be
// installed; .ci/test installs them. A machine without them fails the test: it
// is never skipped.
//
// The seed (base dc=example,dc=org):
//
//	uid=alice,ou=People   groupOfNames dataone-admins, researchers
//	uid=bob,ou=People     groupOfNames researchers; posixGroup posix-staff (memberUid)
//	uid=carol,ou=People   posixGroup posix-staff
//
// The memberOf overlay maintains alice's and bob's memberOf attributes for the
// groupOfNames groups (posixGroup membership is by uid and has no memberOf).
// Anonymous binds read everything but passwords; the root DN writes.
package ldaptest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The directory's names.
const (
	BaseDN        = "dc=example,dc=org"
	PeopleDN      = "ou=People," + BaseDN
	GroupsDN      = "ou=Groups," + BaseDN
	AdminDN       = "cn=admin," + BaseDN
	AdminPassword = "adminpw"
)

// SlapdPath is the slapd binary Debian's slapd package installs.
const SlapdPath = "/usr/sbin/slapd"

// Server is one running slapd.
type Server struct {
	URL  string // ldap://127.0.0.1:PORT
	Addr string // 127.0.0.1:PORT
	Dir  string // configuration, database and log

	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{} // closed when slapd has exited

	mu      sync.Mutex
	stopped bool
}

// UserDN is the entry DN of the user uid (uid=alice,ou=People,dc=example,dc=org).
func UserDN(uid string) string { return "uid=" + uid + "," + PeopleDN }

// GroupDN is the entry DN of the group cn (cn=researchers,ou=Groups,dc=example,dc=org).
func GroupDN(cn string) string { return "cn=" + cn + "," + GroupsDN }

const slapdConf = `include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile  {{DIR}}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
database mdb
maxsize 104857600
suffix "dc=example,dc=org"
rootdn "cn=admin,dc=example,dc=org"
rootpw adminpw
directory {{DIR}}/db
index objectClass,uid,memberUid,member eq
overlay memberof
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
`

// Seed is the LDIF Start adds: 3 users, 2 groupOfNames, 1 posixGroup.
const Seed = `dn: dc=example,dc=org
objectClass: dcObject
objectClass: organization
dc: example
o: Example

dn: ou=People,dc=example,dc=org
objectClass: organizationalUnit
ou: People

dn: ou=Groups,dc=example,dc=org
objectClass: organizationalUnit
ou: Groups

dn: uid=alice,ou=People,dc=example,dc=org
objectClass: inetOrgPerson
objectClass: posixAccount
uid: alice
cn: Alice Smith
sn: Smith
mail: alice@example.org
uidNumber: 10001
gidNumber: 10001
homeDirectory: /home/alice
userPassword: alicepw

dn: uid=bob,ou=People,dc=example,dc=org
objectClass: inetOrgPerson
objectClass: posixAccount
uid: bob
cn: Bob Jones
sn: Jones
uidNumber: 10002
gidNumber: 10002
homeDirectory: /home/bob
userPassword: bobpw

dn: uid=carol,ou=People,dc=example,dc=org
objectClass: inetOrgPerson
uid: carol
cn: Carol King
sn: King
userPassword: carolpw

dn: cn=dataone-admins,ou=Groups,dc=example,dc=org
objectClass: groupOfNames
cn: dataone-admins
member: uid=alice,ou=People,dc=example,dc=org

dn: cn=researchers,ou=Groups,dc=example,dc=org
objectClass: groupOfNames
cn: researchers
member: uid=alice,ou=People,dc=example,dc=org
member: uid=bob,ou=People,dc=example,dc=org

dn: cn=posix-staff,ou=Groups,dc=example,dc=org
objectClass: posixGroup
cn: posix-staff
gidNumber: 20001
memberUid: bob
memberUid: carol
`

// Start runs slapd in a new temporary directory of t on a free loopback port,
// waits until it answers, adds Seed, and kills it when t ends. It fails t when
// slapd or ldap-utils is missing (run .ci/test, which installs them) or when
// slapd does not come up.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(SlapdPath); err != nil {
		t.Fatalf("ldaptest: %s is missing (%v): run .ci/test, which installs the slapd and ldap-utils packages", SlapdPath, err)
	}
	for _, tool := range []string{"ldapadd", "ldapmodify", "ldapsearch"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("ldaptest: %s is missing (%v): run .ci/test, which installs the slapd and ldap-utils packages", tool, err)
		}
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launch(t)
		if err == nil {
			s.Add(t, Seed)
			return s
		}
		lastErr = err
		// Another process may have taken the port between its choice and
		// slapd's bind: try another one.
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	t.Fatalf("ldaptest: %v", lastErr)
	return nil
}

func launch(t testing.TB) (*Server, error) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "slapd.conf")
	if err := os.WriteFile(conf, []byte(strings.ReplaceAll(slapdConf, "{{DIR}}", dir)), 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: "ldap://127.0.0.1:" + port, Addr: "127.0.0.1:" + port, Dir: dir,
		log: &syncBuffer{}, done: make(chan struct{}),
	}
	// -d 0 keeps slapd in the foreground, so the process is the server.
	s.cmd = exec.Command(SlapdPath, "-f", conf, "-h", s.URL+"/", "-d", "0")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", SlapdPath, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("slapd log (%s):\n%s", s.Dir, s.log.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("slapd exited before answering: %v\nslapd log:\n%s", s.cmd.ProcessState, s.log.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
			c.Close()
			if _, err := s.run("ldapsearch", "", "-x", "-H", s.URL, "-b", "", "-s", "base"); err == nil {
				return s, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("slapd did not answer within 15s\nslapd log:\n%s", s.log.String())
}

// Add adds the entries of an LDIF document as the root DN (ldapadd).
func (s *Server) Add(t testing.TB, ldif string) {
	t.Helper()
	if out, err := s.run("ldapadd", ldif, "-x", "-H", s.URL, "-D", AdminDN, "-w", AdminPassword); err != nil {
		t.Fatalf("ldaptest: ldapadd: %v\n%s\nLDIF:\n%s", err, out, ldif)
	}
}

// Modify applies an LDIF change document as the root DN (ldapmodify).
func (s *Server) Modify(t testing.TB, ldif string) {
	t.Helper()
	if out, err := s.run("ldapmodify", ldif, "-x", "-H", s.URL, "-D", AdminDN, "-w", AdminPassword); err != nil {
		t.Fatalf("ldaptest: ldapmodify: %v\n%s\nLDIF:\n%s", err, out, ldif)
	}
}

// AddUser adds the inetOrgPerson uid under ou=People.
func (s *Server) AddUser(t testing.TB, uid string) {
	t.Helper()
	s.Add(t, userLDIF(uid))
}

// AddUsers adds many inetOrgPerson entries in one ldapadd.
func (s *Server) AddUsers(t testing.TB, uids ...string) {
	t.Helper()
	var b strings.Builder
	for _, uid := range uids {
		b.WriteString(userLDIF(uid))
		b.WriteString("\n")
	}
	s.Add(t, b.String())
}

func userLDIF(uid string) string {
	return fmt.Sprintf("dn: %s\nobjectClass: inetOrgPerson\nuid: %s\ncn: %s\nsn: %s\n", UserDN(uid), uid, uid, uid)
}

// AddMember makes uid a member of the group cn: a member value (the user's DN)
// for a groupOfNames, a memberUid value for a posixGroup.
func (s *Server) AddMember(t testing.TB, group string, uids ...string) {
	t.Helper()
	s.Modify(t, s.memberChange(t, "add", group, uids))
}

// RemoveMember takes uid out of the group cn.
func (s *Server) RemoveMember(t testing.TB, group string, uids ...string) {
	t.Helper()
	s.Modify(t, s.memberChange(t, "delete", group, uids))
}

func (s *Server) memberChange(t testing.TB, op, group string, uids []string) string {
	t.Helper()
	dn := GroupDN(group)
	out, err := s.run("ldapsearch", "", "-LLL", "-x", "-H", s.URL, "-b", dn, "-s", "base", "objectClass")
	if err != nil {
		t.Fatalf("ldaptest: reading group %s: %v\n%s", dn, err, out)
	}
	attr, value := "member", UserDN
	switch {
	case strings.Contains(strings.ToLower(out), "objectclass: posixgroup"):
		attr, value = "memberUid", func(uid string) string { return uid }
	case strings.Contains(strings.ToLower(out), "objectclass: groupofnames"):
	default:
		t.Fatalf("ldaptest: %s is neither a groupOfNames nor a posixGroup:\n%s", dn, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "dn: %s\nchangetype: modify\n%s: %s\n", dn, op, attr)
	for _, uid := range uids {
		fmt.Fprintf(&b, "%s: %s\n", attr, value(uid))
	}
	return b.String()
}

// Search runs ldapsearch anonymously under BaseDN and returns its LDIF output.
func (s *Server) Search(t testing.TB, filter string, attrs ...string) string {
	t.Helper()
	out, err := s.run("ldapsearch", "", append([]string{"-LLL", "-x", "-H", s.URL, "-b", BaseDN, filter}, attrs...)...)
	if err != nil {
		t.Fatalf("ldaptest: ldapsearch %s: %v\n%s", filter, err, out)
	}
	return out
}

// Freeze suspends slapd (SIGSTOP) and returns once all its threads have
// stopped: connections are still accepted by the kernel, but nothing answers,
// as with a hung directory. Thaw resumes it.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("ldaptest: SIGSTOP to slapd: %v", err)
	}
	// The signal is delivered asynchronously: a thread may still answer a
	// request after kill(2) returned.
	deadline := time.Now().Add(10 * time.Second)
	for !s.allStopped(t) {
		if time.Now().After(deadline) {
			t.Fatalf("ldaptest: slapd did not stop within 10s of SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether every thread of slapd is in the stopped state
// (T in /proc/PID/task/TID/stat).
func (s *Server) allStopped(t testing.TB) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", s.cmd.Process.Pid))
	if err != nil || len(stats) == 0 {
		t.Fatalf("ldaptest: reading slapd's thread states: %v (%d threads)", err, len(stats))
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			return false // a thread came or went: look again
		}
		// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Thaw resumes a frozen slapd (SIGCONT).
func (s *Server) Thaw(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("ldaptest: SIGCONT to slapd: %v", err)
	}
}

// Stop kills slapd and waits for it to exit: connections are then refused.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cmd.Process.Signal(syscall.SIGKILL) // also ends a frozen slapd
	<-s.done
}

// Log is what slapd wrote so far.
func (s *Server) Log() string { return s.log.String() }

// run runs an ldap-utils command with stdin and returns its combined output;
// it gives up after 30s.
func (s *Server) run(name, stdin string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		return out.String(), err
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-waited
		return out.String(), errors.New(name + " did not finish within 30s")
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
