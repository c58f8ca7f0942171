// Package pgtest runs a real, throwaway PostgreSQL server for tests.
//
// Start gives each test a schema of its own in one cluster that the whole test
// binary shares: the cluster is created (initdb) and started the first time a
// test asks for it, on a free loopback port, in a temporary directory, with
// fsync off (its data is thrown away); it is stopped (pg_ctl -m fast stop) and
// its directory removed when the last test holding it ends. Tests that run one
// after another therefore each start a cluster (about a second) unless a parent
// test holds it for them: call Start in the parent, and in its subtests.
//
// The server binaries are Debian's (/usr/lib/postgresql/<version>/bin, package
// postgresql; .ci/test installs it). A machine without them fails the test: it
// is never skipped. initdb and postgres refuse to run as root, so as root they
// run as the postgres user (runuser -u postgres --).
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Database is the database Start's schemas are in, and User the superuser the
// DSNs connect as (trust authentication, no password).
const (
	Database = "d1bridge"
	User     = "postgres"
)

// BinGlob is where Debian's postgresql package installs the server binaries;
// the highest version found is used.
const BinGlob = "/usr/lib/postgresql/*/bin"

const missing = "run .ci/test, which installs postgresql"

var (
	mu     sync.Mutex
	shared *cluster // nil when no test holds a cluster
	users  int      // tests holding shared
	seq    int      // schemas created, for unique names
)

// Start returns the DSN (pgx URL syntax) of a new, empty schema of its own for
// t in the shared cluster, starting the cluster if no test holds it. The
// schema is selected with search_path, so unqualified tables are created in
// it. t holds the cluster until it ends.
func Start(t testing.TB) (dsn string) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared == nil {
		c, err := start()
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		shared = c
	}
	c := shared
	users++
	t.Cleanup(func() { release(t) })

	seq++
	schema := schemaName(seq, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: creating schema %s: %v", schema, err)
	}
	return c.dsn(Database, "search_path="+schema)
}

// release drops t's hold on the shared cluster, stopping it after the last.
func release(t testing.TB) {
	mu.Lock()
	defer mu.Unlock()
	c := shared
	if t.Failed() {
		if log := strings.TrimSpace(c.logTail(4 << 10)); log != "" {
			t.Logf("pgtest: the end of the PostgreSQL log (%s):\n%s", c.logPath(), log)
		}
	}
	if users--; users > 0 {
		return
	}
	shared = nil
	if err := c.stop(); err != nil {
		t.Errorf("pgtest: %v", err)
	}
}

// schemaName is a valid unquoted identifier, unique in the cluster, that
// names the test for whoever reads the database.
func schemaName(n int, test string) string {
	b := []byte("t" + strconv.Itoa(n) + "_")
	for _, r := range strings.ToLower(test) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			b = append(b, byte(r))
		} else if b[len(b)-1] != '_' {
			b = append(b, '_')
		}
	}
	return strings.TrimRight(string(b[:min(len(b), 63)]), "_")
}

// cluster is one running server.
type cluster struct {
	dir   string // holds data/, the log and the unix socket
	bin   string
	asPG  []string // the command prefix that runs a binary as the postgres user
	port  int
	cmd   *exec.Cmd
	done  chan struct{} // closed when the server process has exited
	admin *sql.DB       // the superuser on Database
}

func (c *cluster) dsn(db, params string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable&%s", User, c.port, db, params)
}

func (c *cluster) data() string    { return filepath.Join(c.dir, "data") }
func (c *cluster) logPath() string { return filepath.Join(c.dir, "postgres.log") }

// logTail is the last n bytes of the server log.
func (c *cluster) logTail(n int64) string {
	f, err := os.Open(c.logPath())
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		f.Seek(fi.Size()-n, 0)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return string(b[:k])
}

// findBin is the newest server binary directory.
func findBin() (string, error) {
	dirs, _ := filepath.Glob(BinGlob)
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (%s/postgres): %s", BinGlob, missing)
}

// start creates and starts a cluster, in a new temporary directory that the
// postgres user owns when running as root.
func start() (_ *cluster, err error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, bin: bin}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup(User)
		if err != nil {
			return nil, fmt.Errorf("running as root needs the user postgres to run the server as (%v): %s", err, missing)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		c.asPG = []string{"runuser", "-u", User, "--"}
	}
	initdb := c.command(filepath.Join(bin, "initdb"), "-D", c.data(), "-U", User, "-A", "trust",
		"--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C.UTF-8")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// The port was free a moment ago; another process may take it before the
	// server binds it, so try another one then.
	for attempt := 0; ; attempt++ {
		err := c.launch()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 2 {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createDatabase(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// command runs name as the postgres user.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	argv := append(append(slices.Clone(c.asPG), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.dir
	return cmd
}

var errPortTaken = errors.New("the port was taken")

// launch starts the server on a free port and waits until it accepts
// connections.
func (c *cluster) launch() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.cmd = c.command(filepath.Join(c.bin, "postgres"), "-D", c.data(),
		"-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-k", c.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300",
		// Tests cause errors on purpose (unique violations, ...); their
		// clients see them. The log keeps what only the server knows.
		"-c", "log_min_messages=fatal", "-c", "log_min_error_statement=panic")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Should the test binary die without its cleanups (a test timeout), the
	// server goes too: runuser passes SIGTERM on to it, and a smart shutdown
	// with no clients left is immediate.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %v", err)
	}
	c.done = make(chan struct{})
	go func() {
		c.cmd.Wait()
		close(c.done)
	}()

	db, err := sql.Open("pgx", c.dsn("postgres", "connect_timeout=2"))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			log := c.logTail(4 << 10)
			if strings.Contains(log, "could not create any TCP/IP sockets") {
				return errPortTaken
			}
			return fmt.Errorf("postgres exited before accepting connections (%v); its log:\n%s", c.cmd.ProcessState, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres accepted no connection on port %d within 30s (%v); its log:\n%s", c.port, err, c.logTail(4<<10))
		}
	}
}

// createDatabase creates Database and connects c.admin to it.
func (c *cluster) createDatabase(ctx context.Context) error {
	db, err := sql.Open("pgx", c.dsn("postgres", ""))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+Database); err != nil {
		return fmt.Errorf("creating database %s: %w", Database, err)
	}
	if c.admin, err = sql.Open("pgx", c.dsn(Database, "")); err != nil {
		return err
	}
	return c.admin.PingContext(ctx)
}

// stop shuts the server down, if it runs, and removes its directory.
func (c *cluster) stop() error {
	if c.admin != nil {
		c.admin.Close()
	}
	err := c.shutdown()
	return errors.Join(err, os.RemoveAll(c.dir))
}

// shutdown stops the server: a fast shutdown, which disconnects the clients,
// else an immediate one.
func (c *cluster) shutdown() error {
	if c.done == nil {
		return nil
	}
	var errs []error
	for _, mode := range []string{"fast", "immediate"} {
		select {
		case <-c.done:
			return errors.Join(errs...)
		default:
		}
		ctl := c.command(filepath.Join(c.bin, "pg_ctl"), "-D", c.data(), "-m", mode, "-w", "-t", "30", "stop")
		if out, err := ctl.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("pg_ctl -m %s stop: %v\n%s", mode, err, out))
		}
		select {
		case <-c.done:
			return errors.Join(errs...)
		case <-time.After(30 * time.Second):
			errs = append(errs, fmt.Errorf("postgres did not exit after pg_ctl -m %s stop", mode))
		}
	}
	c.cmd.Process.Kill()
	return errors.Join(errs...)
}
