"""Where the nodes of the conformance suite keep objects and their catalog.

One backend per run, chosen with ``--backend NAME`` or the environment variable
``D1BRIDGE_CONFORMANCE_BACKEND`` (the option wins; the default is ``files``):

files     the embedded store: bytes as files and the SQLite catalog, both under
          the node's data directory (no configuration file: d1bridge's defaults).
s3        bytes in a real S3 server: versitygw over a posix directory, on a free
          loopback port. One bucket for the run, made by d1bridge itself
          (``createBucket: true``); every node has a key prefix of its own.
webdav    bytes on a real WebDAV server: nginx with its dav and dav_ext modules
          (the configuration of mappings/mappingtest/servers); every node has a
          collection (``prefix``) of its own.
http      bytes behind the http mapping: the same nginx, described in the
          upstream's options as a legacy repository's REST API (GET, PUT and
          DELETE of /legacy/<node>/{key}, HEAD for stat, the JSON autoindex for
          list); every node has a directory of its own.
postgres  the catalog in a real, throwaway PostgreSQL cluster (initdb into a
          temporary directory, fsync off); every node has a database of its own;
          bytes stay files under the node's data directory.
replicas  every node is three d1bridge processes sharing the node's PostgreSQL
          database (postgres's cluster) and bucket prefix (s3's versitygw),
          each with a data directory of its own, behind nginx as a round-robin
          load balancer (config/deploy/nginx.conf's proxy settings) whose URL
          is the node's baseURL: the suite talks only to nginx, so consecutive
          calls of a test reach different replicas.
dataone   every node is a front: a d1bridge whose member node is served by the
          dataone mapping (``mapping: up``, type dataone, ``forward: proxy``)
          over an upstream d1bridge of its own (the files store), which the
          suite starts first with the same environment (submitters, cnSubjects,
          tokenKeys) plus ``enableSessionFromHeader`` and the shared proxy secret.
          The suite talks only to the front. Front and upstream keep the default
          node id: the front presents the upstream's member node, so the
          authoritativeMemberNode of the objects is the front's node id too.
          The front's CN role serves the front's own catalog, which the mapping
          never writes: see ``Backend.cn_sees_mn_objects``.

gmn       every node is a front: a d1bridge whose member node is served by the
          dataone mapping (``mapping: gmn``, ``forward: none``) over a real GMN
          of its own (PyPI dataone.gmn 3.5.2 from .ci/.venv-gmn) behind Apache
          with mod_ssl and mod_wsgi, as GMN is deployed: the front presents a
          client certificate (``upstreams[].tls``) whose subject GMN trusts, and
          GMN reads it from the TLS session. One PostgreSQL cluster for the run,
          one database and one Apache per node (started before the node, stopped
          after it); the templates are .ci/gmn's, shared with the Go tests
          (mappings/mappingtest/servers/gmn.go). GMN takes the front's node id.
          The suite's objects carry SHA-1 checksums (GMN accepts MD5 and SHA-1
          only); the tests GMN cannot satisfy are deselected (``GMN_DESELECT``,
          each with the reason).

The servers are the ones the Go tests start (mappings/mappingtest/servers,
mappings/sqlcatalog/pgtest, and for dataone cmd/d1bridge/dataone_test.go's
upstream d1bridge), started the same way: once per run, before the first node,
and stopped after the last (dataone: one upstream per node, started before it
and stopped after it, by conftest.py). A missing server binary is a failure of the
run that says to run .ci/test, which installs it; never a skip.

Each backend gives every node a configuration (written as JSON, which is YAML, to
the node's directory and passed as ``serve --config FILE``) and keeps the logs of
its servers for the failure reports.
"""

import ctypes
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

NAMES = ("files", "s3", "webdav", "http", "postgres", "replicas", "dataone", "gmn")
ENV = "D1BRIDGE_CONFORMANCE_BACKEND"

MISSING = "run .ci/test, which installs it"


class Unavailable(Exception):
    """A server binary is missing, or a server did not start: the run fails."""


# ---------------------------------------------------------------------------
# Processes and their logs
# ---------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PR_SET_PDEATHSIG = 1


def _child_setup():
    """In the child: lead a process group of its own (nginx's workers stop with
    their master), and get SIGTERM should the suite die without its cleanups."""
    os.setpgid(0, 0)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class LogFile:
    """A server's log file, read from an offset for the per-test log sections."""

    def __init__(self, title, path):
        self.title = title
        self.path = Path(path)

    def size(self):
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def text(self, start=0, limit=None):
        try:
            with open(self.path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        if limit is not None and len(text) > limit:
            text = "[... {} earlier characters cut ...]\n".format(len(text) - limit) + text[-limit:]
        return text


def http_answers(url):
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


class Server:
    """One server process, started as a child on a free loopback port (a new one
    if it exits at once: the port was taken meanwhile)."""

    def __init__(self, name, workdir, cwd=None):
        self.name = name
        self.dir = Path(workdir)
        self.cwd = Path(cwd) if cwd is not None else self.dir
        self.log = LogFile("{} (stdout and stderr)".format(name), self.dir / (name + ".log"))
        self.proc = None

    def start(self, argv_for_port, ready, timeout=15.0, taken=lambda log: True):
        """argv_for_port(port) is the command; ready(port) says it answers;
        taken(log) whether an early exit means the port was taken."""
        for attempt in range(3):
            self.port = free_port()
            argv = argv_for_port(self.port)
            with open(self.log.path, "ab") as logf:
                try:
                    self.proc = subprocess.Popen(
                        argv,
                        cwd=self.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        preexec_fn=_child_setup,
                    )
                except OSError as e:
                    raise Unavailable("starting {}: {}: {}".format(self.name, argv[0], e))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if ready(self.port):
                    return
                time.sleep(0.02)
            if self.proc.poll() is None:
                self.stop()
                raise Unavailable(
                    "{} did not answer on 127.0.0.1:{} within {:.0f}s; its log:\n{}".format(
                        self.name, self.port, timeout, self.log.text(limit=4000)
                    )
                )
            if attempt == 2 or not taken(self.log.text()):
                raise Unavailable(
                    "{} exited at start (status {}); its log:\n{}".format(
                        self.name, self.proc.returncode, self.log.text(limit=4000)
                    )
                )

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def logs(self):
        return [self.log]

    def stop(self, grace=5.0):
        """SIGTERM to the process group, SIGKILL after grace seconds."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)


def go_binary(name):
    """A binary `go install` put in GOBIN or GOPATH/bin, or on PATH (as
    mappings/mappingtest/servers finds versitygw)."""
    dirs = []
    if os.environ.get("GOBIN"):
        dirs.append(os.environ["GOBIN"])
    gopath = os.environ.get("GOPATH", "")
    if not gopath and shutil.which("go"):
        res = subprocess.run(["go", "env", "GOPATH"], stdout=subprocess.PIPE, text=True)
        gopath = res.stdout.strip()
    dirs += [os.path.join(p, "bin") for p in gopath.split(os.pathsep) if p]
    dirs.append(os.path.join(os.path.expanduser("~"), "go", "bin"))
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    p = shutil.which(name)
    if p:
        return p
    raise Unavailable(
        "{} is not installed (looked in {} and PATH): {}".format(name, ", ".join(dirs), MISSING)
    )


def system_binary(name, fallback, package):
    p = shutil.which(name)
    if p:
        return p
    if os.path.isfile(fallback):
        return fallback
    raise Unavailable("{} is not installed (apt package {}): {}".format(name, package, MISSING))


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------


class Backend:
    """The files backend, and the interface of the others."""

    name = "files"

    # Whether the CN role of a node sees the objects created through its MN role
    # (both over one catalog). Where it does not, the tests marked
    # ``cn_sees_mn_objects`` (test_cn.py) are deselected: they create objects on
    # the MN and read or change them through the CN.
    cn_sees_mn_objects = True
    # Why not, for the run's summary line.
    cn_sees_mn_objects_why = ""
    # The checksum algorithm of the suite's objects when a test names none, and
    # the algorithms the store accepts in system metadata.
    checksum_algorithm = "SHA-256"
    checksum_algorithms = ("MD5", "SHA-1", "SHA-256")
    # Tests the backend's own upstream cannot satisfy: {"file::test" (every
    # parameter) or "file::test[params]": why}; conftest.py deselects them and
    # lists each with its reason.
    deselect = {}

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.servers = []
        self.nodes = 0

    def start(self):
        pass

    def stop(self):
        errors = []
        for s in reversed(self.servers):
            try:
                s.stop()
            except Exception as e:  # keep stopping the others
                errors.append("{}: {}".format(s.name, e))
        if errors:
            raise RuntimeError("stopping the {} backend: {}".format(self.name, "; ".join(errors)))

    def describe(self):
        return "files (bytes as files, SQLite catalog, under each node's dataDir)"

    def logs(self):
        return [log for s in self.servers for log in s.logs()]

    def check(self):
        """Raise Unavailable when a server has died."""
        for s in self.servers:
            if not s.running():
                raise Unavailable(
                    "the {} backend's {} is not running (exit status {}); its log:\n{}".format(
                        self.name, s.name, s.proc.returncode if s.proc else None,
                        s.log.text(limit=4000),
                    )
                )

    def upstream_env(self, label):
        """None, or the environment (over the node's own) of the upstream d1bridge
        a new node fronts: conftest.py then starts that upstream first (files
        store, no configuration file) and passes it to node_config."""
        return None

    def node_config(self, label, upstream=None):
        """The configuration of a new node (a dict, written as JSON/YAML), or None
        for none at all. label is unique in the run; upstream is the running
        upstream node (conftest.Node) when upstream_env asked for one."""
        self.nodes += 1
        return None

    def node_upstream(self, label):
        """None, or a server node_config started for the node labelled label
        alone (an object with stop()), stopped just after the node."""
        return None

    def front(self, node):
        """Called once node (conftest.Node) answers: the replicas backend starts
        the node's other replicas and its load balancer here."""


class S3Backend(Backend):
    name = "s3"
    ACCESS_KEY = "testkey"
    SECRET = "testsecret123"
    BUCKET = "d1bridge-conformance"

    def start(self):
        binary = go_binary("versitygw")
        d = self.workdir / "versitygw"
        root = d / "data"
        root.mkdir(parents=True)
        s = Server("versitygw", d)
        self.servers.append(s)
        # As mappings/mappingtest/servers does, without --quiet: the request log
        # goes to versitygw.log, for the failure reports.
        s.start(
            lambda port: [binary, "--access", self.ACCESS_KEY, "--secret", self.SECRET,
                          "--port", "127.0.0.1:{}".format(port), "posix", str(root)],
            lambda port: http_answers("http://127.0.0.1:{}/".format(port)),
        )
        self.endpoint = "http://127.0.0.1:{}".format(s.port)
        self.root = root

    def describe(self):
        return "s3 (versitygw at {}, bucket {}, one key prefix per node; data in {})".format(
            self.endpoint, self.BUCKET, self.root
        )

    def node_config(self, label, upstream=None):
        super().node_config(label)
        return {
            "upstreams": [{
                "name": "objects",
                "type": "s3",
                "baseURL": self.endpoint,
                "options": {
                    "bucket": self.BUCKET,
                    "region": "us-east-1",
                    "accessKey": self.ACCESS_KEY,
                    "secretKey": self.SECRET,
                    "prefix": label + "/",
                    # The first node makes the bucket; the others find it.
                    "createBucket": True,
                },
            }],
            "store": "objects",
        }


class WebDAVBackend(Backend):
    name = "webdav"
    MODULE = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"

    # mappings/mappingtest/servers.NginxDAV's configuration, with an access log
    # (for the failure reports) instead of access_log off.
    CONF = """load_module {module};
daemon off;
master_process on;
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/logs/error.log warn;
events {{ worker_connections 512; }}
http {{
  access_log {dir}/logs/access.log;
  client_body_temp_path {dir}/tmp/body;
  proxy_temp_path {dir}/tmp/proxy;
  fastcgi_temp_path {dir}/tmp/fastcgi;
  uwsgi_temp_path {dir}/tmp/uwsgi;
  scgi_temp_path {dir}/tmp/scgi;
  default_type application/octet-stream;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port};
    root {dir}/dav;
    client_max_body_size 0;
    location / {{
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
      autoindex on;
      autoindex_format json;
    }}
  }}
}}
"""

    def start(self):
        binary = system_binary("nginx", "/usr/sbin/nginx", "nginx")
        if not os.path.isfile(self.MODULE):
            raise Unavailable(
                "the nginx WebDAV module {} is missing (apt package libnginx-mod-http-dav-ext): {}".format(
                    self.MODULE, MISSING
                )
            )
        d = self.workdir / "nginx"
        for sub in ("logs", "tmp", "dav"):
            (d / sub).mkdir(parents=True)
        s = Nginx("nginx", d)
        self.servers.append(s)
        # As root the workers would run as nobody and could not write the root.
        user = "user root;" if os.geteuid() == 0 else ""

        def argv(port):
            conf = d / "nginx.conf"
            conf.write_text(self.CONF.format(module=self.MODULE, user=user, dir=d, port=port))
            return [binary, "-p", str(d), "-c", str(conf), "-e", str(d / "logs" / "error.log")]

        s.start(argv, lambda port: http_answers("http://127.0.0.1:{}/".format(port)))
        self.url = "http://127.0.0.1:{}/".format(s.port)
        self.root = d / "dav"

    def describe(self):
        return "webdav (nginx dav at {}, one collection per node; files in {})".format(
            self.url, self.root
        )

    def node_config(self, label, upstream=None):
        super().node_config(label)
        return {
            "upstreams": [{
                "name": "objects",
                "type": "webdav",
                "baseURL": self.url,
                "options": {"prefix": "d1bridge/" + label},
            }],
            "store": "objects",
        }


class HTTPBackend(WebDAVBackend):
    """The webdav backend's nginx as a legacy repository that the http mapping
    reads and writes with plain GET, PUT, DELETE and HEAD (no MOVE: nginx
    writes a PUT to a temporary file and renames it, so a key never shows a
    partial object)."""

    name = "http"

    def describe(self):
        return "http (the http mapping over nginx at {}, one directory per node; files in {})".format(
            self.url, self.root
        )

    def node_config(self, label, upstream=None):
        Backend.node_config(self, label)
        obj = "/legacy/" + label + "/{key}"
        return {
            "upstreams": [{
                "name": "legacy",
                "type": "http",
                "baseURL": self.url,
                "options": {
                    "fields": {"key": "name", "size": "size", "modified": "mtime"},
                    "get": {"url": obj},
                    "put": {"url": obj},
                    "delete": {"url": obj},
                    "stat": {"method": "HEAD", "url": obj,
                             "fields": {"size": "header:Content-Length", "modified": "header:Last-Modified"}},
                    "list": {"url": "/legacy/" + label + "/", "items": ".", "where": {"type": "file"}},
                },
            }],
            "store": "legacy",
        }


class Nginx(Server):
    def logs(self):
        return [
            self.log,
            LogFile("nginx error.log", self.dir / "logs" / "error.log"),
            LogFile("nginx access.log", self.dir / "logs" / "access.log"),
        ]


class PostgresBackend(Backend):
    """As mappings/sqlcatalog/pgtest: Debian's binaries, the highest version under
    /usr/lib/postgresql/*/bin, run as the user postgres when root."""

    name = "postgres"
    USER = "postgres"

    def start(self):
        self.bin = self._find_bin()
        # The cluster's directory must be the postgres user's when root: not under
        # pytest's temporary directory (mode 0700, root's). Removed at stop.
        self.dir = Path(tempfile.mkdtemp(prefix="d1bridge-conformance-pg-"))
        self.as_pg = []
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam(self.USER)
            except KeyError:
                raise Unavailable(
                    "running as root needs the user postgres to run the server as: "
                    "run .ci/test, which installs postgresql"
                )
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.as_pg = ["runuser", "-u", self.USER, "--"]
        self.data = self.dir / "data"
        d = self.workdir / "postgres"
        d.mkdir(parents=True)
        res = subprocess.run(
            self.as_pg + [os.path.join(self.bin, "initdb"), "-D", str(self.data), "-U", self.USER,
                          "-A", "trust", "--no-sync", "--no-instructions", "-E", "UTF8",
                          "--locale=C.UTF-8"],
            cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        if res.returncode != 0:
            raise Unavailable("initdb failed (exit {}):\n{}".format(res.returncode, res.stdout))
        # Its working directory is the cluster's: the server (as postgres) could
        # not enter d, which is root's.
        s = Postgres("postgres", d, self)
        self.servers.append(s)
        # Errors stay in the log with their statements (the default levels): it is
        # read only when a test failed.
        s.start(
            lambda port: self.as_pg + [
                os.path.join(self.bin, "postgres"), "-D", str(self.data),
                "-h", "127.0.0.1", "-p", str(port), "-k", str(self.dir),
                "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                "-c", "max_connections=300",
                # Each line names its database, that is its node.
                "-c", "log_line_prefix=%m [%p] %q%d: "],
            self._ready,
            timeout=30.0,
            taken=lambda log: "could not create any TCP/IP sockets" in log,
        )
        self.port = s.port

    def _find_bin(self):
        found = []
        for p in Path("/usr/lib/postgresql").glob("*/bin"):
            if (p / "postgres").is_file():
                try:
                    found.append((int(p.parent.name), str(p)))
                except ValueError:
                    pass
        if not found:
            raise Unavailable(
                "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/postgres): "
                "run .ci/test, which installs postgresql"
            )
        return max(found)[1]

    def _ready(self, port):
        res = subprocess.run(
            [os.path.join(self.bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port),
             "-U", self.USER, "-t", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        return res.returncode == 0

    def psql(self, sql):
        res = subprocess.run(
            [os.path.join(self.bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", self.USER, "-d", "postgres", "-c", sql],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
        )
        if res.returncode != 0:
            raise Unavailable("psql -c {!r} failed (exit {}):\n{}".format(sql, res.returncode, res.stdout))

    def stop(self):
        try:
            super().stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def describe(self):
        return "postgres (PostgreSQL {} on 127.0.0.1:{}, one database per node; bytes as files)".format(
            Path(self.bin).parent.name, self.port
        )

    def node_config(self, label, upstream=None):
        super().node_config(label)
        db = "d1bridge_" + re.sub(r"[^a-z0-9]+", "_", label.lower())
        self.psql("CREATE DATABASE " + db)
        return {
            "catalog": {
                "driver": "postgres",
                "dsn": "postgres://{}@127.0.0.1:{}/{}?sslmode=disable".format(self.USER, self.port, db),
            }
        }


class Postgres(Server):
    def __init__(self, name, workdir, backend):
        super().__init__(name, workdir, cwd=backend.dir)
        self.backend = backend

    def stop(self, grace=5.0):
        """pg_ctl -m fast stop (runuser does not pass SIGTERM to a process group
        it is not in), then the process group."""
        if self.running():
            b = self.backend
            subprocess.run(
                b.as_pg + [os.path.join(b.bin, "pg_ctl"), "-D", str(b.data), "-m", "fast",
                           "-w", "-t", "30", "stop"],
                cwd=b.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        super().stop(grace)


class ReplicasBackend(PostgresBackend):
    """postgres and s3 at once; every node three replicas behind nginx. The
    first replica is the node conftest.py starts (with the configuration
    node_config gives, whose node.baseURL is the load balancer's); front()
    starts the two others with the same command line and environment, then
    nginx, and makes the node's URLs the load balancer's."""

    name = "replicas"
    REPLICAS = 3
    CONF = """daemon off;
master_process on;
worker_processes 1;
{user}
pid {dir}/nginx.pid;
error_log {dir}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log {dir}/logs/access.log;
  # d1bridge's limits.maxHeaderBytes is 64 KiB: identifiers of 800 characters,
  # percent-encoded, make long request lines and long answer headers
  # (Content-Disposition, DataONE-*).
  large_client_header_buffers 4 64k;
  proxy_buffer_size 64k;
  proxy_buffers 4 64k;
  proxy_busy_buffers_size 128k;
  client_body_temp_path {dir}/tmp/body;
  proxy_temp_path {dir}/tmp/proxy;
  fastcgi_temp_path {dir}/tmp/fastcgi;
  uwsgi_temp_path {dir}/tmp/uwsgi;
  scgi_temp_path {dir}/tmp/scgi;
  upstream d1bridge {{
{servers}
    keepalive 16;
  }}
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 0;
    proxy_request_buffering off;
    proxy_buffering off;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $http_host;
    proxy_read_timeout 300s;
    proxy_next_upstream error timeout http_502 http_503;
    location / {{ proxy_pass http://d1bridge; }}
  }}
}}
"""

    def start(self):
        self.nginx = system_binary("nginx", "/usr/sbin/nginx", "nginx")
        super().start()
        self.s3 = S3Backend(self.workdir)
        try:
            self.s3.start()
        finally:
            self.servers += self.s3.servers
        self.replicas = []  # the replicas and load balancers of every node, for the logs

    def describe(self):
        return "replicas ({} per node behind nginx; {}; {})".format(
            self.REPLICAS, PostgresBackend.describe(self), self.s3.describe())

    def logs(self):
        return super().logs() + [log for s in self.replicas for log in s.logs()]

    def node_config(self, label, upstream=None):
        cfg = super().node_config(label)
        cfg.update(self.s3.node_config(label))
        self.front_port = free_port()
        cfg["node"] = {"baseURL": "http://127.0.0.1:{}/d1".format(self.front_port)}
        return cfg

    def front(self, node):
        group = []
        node.upstream = Group(group)
        ports = [node.port]
        for i in range(2, self.REPLICAS + 1):
            d = node.workdir / "replica-{}".format(i)
            (d / "data").mkdir(parents=True)
            r = Server("d1bridge-replica-{}".format(i), d)
            group.append(r)
            self.replicas.append(r)

            def argv(port, d=d):
                env = dict(node.env(), D1BRIDGE_LISTEN="127.0.0.1:{}".format(port),
                           D1BRIDGE_DATADIR=str(d / "data"))
                return ["env", "-i"] + ["{}={}".format(k, v) for k, v in env.items()] + node.argv()

            r.start(argv, lambda port: http_answers("http://127.0.0.1:{}/d1/mn/v2/monitor/ping".format(port)),
                    timeout=60.0, taken=lambda log: "address already in use" in log)
            ports.append(r.port)
        d = node.workdir / "nginx"
        for sub in ("tmp", "logs"):
            (d / sub).mkdir(parents=True)
        lb = Nginx("nginx-front", d)
        group.insert(0, lb)
        self.replicas.append(lb)
        conf = d / "nginx.conf"
        conf.write_text(self.CONF.format(
            user="user root;" if os.geteuid() == 0 else "", dir=d, port=self.front_port,
            servers="\n".join("    server 127.0.0.1:{};".format(p) for p in ports)))
        # The port is node.baseURL's, chosen by node_config: not another one.
        lb.start(lambda port: [self.nginx, "-p", str(d), "-c", str(conf), "-e", str(d / "logs" / "error.log")],
                 lambda port: http_answers("http://127.0.0.1:{}/d1/mn/v2/monitor/ping".format(self.front_port)),
                 taken=lambda log: False)
        lb.port = self.front_port
        node.front_port = self.front_port


class Group:
    """Servers stopped together, in order."""

    def __init__(self, servers):
        self.servers = servers

    def stop(self):
        for s in self.servers:
            s.stop()


class DataONEBackend(Backend):
    """Every node a front over an upstream d1bridge (cmd/d1bridge/dataone_test.go's
    pair): forward: proxy, the upstream trusting the front's headers by the
    shared secret. The spool directory of each front is checked to be empty when
    the run ends (every create and update removes its spool file)."""

    name = "dataone"
    SECRET = "conformance-proxy-secret"
    cn_sees_mn_objects = False
    cn_sees_mn_objects_why = (
        "the front's CN role serves the front's own catalog, and the dataone mapping "
        "creates and changes objects on the upstream only"
    )

    def start(self):
        self.spools = []
        self.secret_file = self.workdir / "proxy-secret"
        self.secret_file.write_text(self.SECRET + "\n")
        self.secret_file.chmod(0o600)

    def describe(self):
        return (
            "dataone (each node a front d1bridge, mapping: up of type dataone, forward: proxy, "
            "over an upstream d1bridge of its own with the files store; spool under {})".format(
                self.workdir / "spool"
            )
        )

    def upstream_env(self, label):
        # The upstream believes the subject the front forwards when the secret
        # comes with it; it serves only the MN role (the suite never calls it).
        return {
            "D1BRIDGE_ROLES": "mn",
            "D1BRIDGE_ENABLESESSIONFROMHEADER": "true",
            "D1BRIDGE_AUTH_PROXY_SECRET": self.SECRET,
        }

    def node_config(self, label, upstream=None):
        super().node_config(label)
        if upstream is None:
            raise Unavailable("a dataone front needs its upstream d1bridge")
        spool = self.workdir / "spool" / label
        spool.mkdir(parents=True)
        self.spools.append(spool)
        return {
            "upstreams": [{
                "name": "up",
                "type": "dataone",
                "baseURL": upstream.mn_base,
                "options": {
                    "forward": "proxy",
                    "secretFile": str(self.secret_file),
                    "spoolDir": str(spool),
                },
            }],
            "mapping": "up",
        }

    def stop(self):
        super().stop()
        left = sorted(str(f) for d in getattr(self, "spools", []) for f in d.iterdir())
        if left:
            raise RuntimeError(
                "the dataone fronts left {} spool file(s) behind (every create and update "
                "must remove its own): {}".format(len(left), ", ".join(left[:20]))
            )


class GMNBackend(PostgresBackend):
    """Every node a front over a real GMN of its own (see the module docstring):
    the PostgreSQL cluster of the postgres backend, a database per node, and per
    node an Apache serving GMN over TLS that trusts the front's client
    certificate. The certificates come from a throwaway CA made with openssl."""

    name = "gmn"
    # The CN tests that read through the CN what they created through the MN.
    cn_sees_mn_objects = False
    cn_sees_mn_objects_why = (
        "the front's CN role serves the front's own catalog, and the dataone mapping "
        "creates and changes objects in GMN only"
    )
    # GMN 3.5.2 accepts only MD5 and SHA-1 checksums (any other is
    # InvalidSystemMetadata, "Checksum algorithm is unsupported"): the suite's
    # objects use SHA-1.
    checksum_algorithm = "SHA-1"
    checksum_algorithms = ("MD5", "SHA-1")
    _GMN = "GMN 3.5.2 "
    deselect = {
        "test_storage.py::test_create[v1-SHA-256]": _GMN + "accepts only MD5 and SHA-1 checksums",
        "test_storage.py::test_create[v2-SHA-256]": _GMN + "accepts only MD5 and SHA-1 checksums",
        "test_read.py::test_get_checksum[v1-SHA-256]": _GMN + "computes only MD5 and SHA-1 checksums",
        "test_read.py::test_get_checksum[v2-SHA-256]": _GMN + "computes only MD5 and SHA-1 checksums",
        "test_read.py::test_get_empty_object": _GMN + "fails on get of an empty object (HTTP 500: its "
        "view returns a ServiceFailure instead of raising it; AttributeError in Django)",
        "test_storage.py::test_create_sid_equal_to_pid": _GMN + "accepts a seriesId equal to the identifier",
        "test_authorization.py::test_set_access_policy": _GMN + "has no MNAuthorization.setAccessPolicy "
        "(no /accessRules route): the front answers NotImplemented",
        "test_authorization.py::test_set_access_policy_stale_serial_version": _GMN + "has no "
        "MNAuthorization.setAccessPolicy: NotImplemented, not VersionMismatch",
        "test_authentication.py::test_log_records_show_what_the_caller_may_read": _GMN + "logs the "
        "subject it sees, the front's certificate (forward: none), as the subject of the caller's create "
        "event; that the front shows another user none of the private object's events is "
        "mappings/dataone TestGMNListingsForUntrustedCallers",
        "test_storage.py::test_update_system_metadata_stale": _GMN + "compares dateSysMetadataModified "
        "rounded to the second (d1_common.date_time.are_equal, round_sec=1), so a stale update within "
        "the same second is accepted",
        "test_identifiers.py::test_get[v1-percent]": _GMN + "decodes %2F in a path identifier once more "
        "(views/decorators.py), so an identifier holding a literal %2F cannot be read by path",
        "test_identifiers.py::test_get[v2-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_describe[v1-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_describe[v2-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_get_system_metadata[v1-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_get_system_metadata[v2-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_get_checksum[v1-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_get_checksum[v2-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_delete[v1-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_identifiers.py::test_delete[v2-percent]": _GMN + "decodes %2F in path identifiers once more",
        "test_read.py::test_get_system_metadata_as_sent": _GMN + "rewrites the access policy it "
        "returns: rules for the rightsHolder (here public) are left out and a rule keeps only its "
        "highest permission (sysmeta._access_policy_model_to_pyxb)",
        "test_storage.py::test_update_system_metadata": _GMN + "rewrites the access policy it returns "
        "(rightsHolder's rules left out, highest permission only)",
        "test_replication.py::test_get_package": _GMN + "answers getPackage with a bag that does not "
        "validate (bagit 1.9: its manifest lists bagit.txt and sysmeta files the zip lacks); the "
        "front passes GMN's zip through",
        "test_replication.py::test_get_replica": _GMN + "asks the DataONE production CN (cn.dataone.org) "
        "whether the caller may read a replica; the tests run offline",
    }
    GMN_USER = "www-data"
    NODE_ID = "urn:node:d1bridge"  # the front's (default) node id
    BRIDGE_SUBJECT = "CN=urn:node:d1bridgeConformance,DC=dataone,DC=org"
    MODULES = "/usr/lib/apache2/modules"
    ROOT = Path(__file__).resolve().parents[2]

    def start(self):
        self.venv = self.ROOT / ".ci" / ".venv-gmn"
        self.python = self.venv / "bin" / "python"
        if not self.python.is_file():
            raise Unavailable("{} is missing: {}".format(self.python, MISSING))
        self.apache = system_binary("apache2", "/usr/sbin/apache2", "apache2")
        for m in ("mod_ssl.so", "mod_wsgi.so"):
            if not os.path.isfile(os.path.join(self.MODULES, m)):
                raise Unavailable(
                    "{}/{} is missing (apt packages apache2, libapache2-mod-wsgi-py3): {}".format(
                        self.MODULES, m, MISSING
                    )
                )
        self.gmns = []  # every GMN of the run, for the logs
        # GMN (www-data when root) reads its own certificate: not under the
        # suite's temporary directory (root's, mode 0700). Removed at stop.
        self.pki = Path(tempfile.mkdtemp(prefix="d1bridge-conformance-pki-"))
        self.pki.chmod(0o755)
        self._pki()
        super().start()
        self.spools = []
        # d1_common's object format list locks a fixed path that whoever ran GMN
        # first created: every GMN (www-data when root) must be able to write it.
        lock = Path("/tmp/object_format_cache.lock")
        lock.touch(exist_ok=True)
        try:
            lock.chmod(0o666)
        except PermissionError:
            pass

    def _openssl(self, *args):
        res = subprocess.run(["openssl"] + list(args), cwd=self.pki,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if res.returncode != 0:
            raise Unavailable("openssl {} failed:\n{}".format(" ".join(args), res.stdout))

    def _issue(self, name, subj, ext):
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", name + ".key", "-out", name + ".csr", "-subj", subj)
        (self.pki / (name + ".ext")).write_text(ext + "\n")
        self._openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                      "-CAcreateserial", "-days", "2", "-out", name + ".pem", "-extfile", name + ".ext")
        return str(self.pki / (name + ".pem")), str(self.pki / (name + ".key"))

    def _pki(self):
        """A CA, GMN's server certificate, the fronts' client certificate and
        GMN's own (GMN 3.5.2 trusts no subject at all without one: settings.py.in)."""
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                      "-subj", "/CN=d1bridge conformance CA")
        self.ca = str(self.pki / "ca.pem")
        self.server_cert, self.server_key = self._issue(
            "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost")
        # RFC 2253 prints the sequence last first: /DC=org/DC=dataone/CN=X is
        # CN=X,DC=dataone,DC=org.
        cn = self.BRIDGE_SUBJECT.split(",")[0][3:]
        self.client_cert, self.client_key = self._issue(
            "bridge", "/DC=org/DC=dataone/CN=" + cn, "extendedKeyUsage=clientAuth")
        self.node_cert, self.node_key = self._issue(
            "gmn-node", "/DC=org/DC=dataone/CN=" + self.NODE_ID, "extendedKeyUsage=clientAuth")
        for p in self.pki.iterdir():
            p.chmod(0o644)

    def describe(self):
        return (
            "gmn (each node a front d1bridge, mapping: gmn of type dataone with a client "
            "certificate, over a GMN 3.5.2 of its own behind Apache mod_ssl + mod_wsgi; "
            "PostgreSQL {} on 127.0.0.1:{}, one database per node)".format(
                Path(self.bin).parent.name, self.port)
        )

    def logs(self):
        out = [log for s in self.servers for log in s.logs()]
        for g in self.gmns:
            out += g.logs()
        return out

    def node_config(self, label, upstream=None):
        Backend.node_config(self, label)
        db = "gmn_" + re.sub(r"[^a-z0-9]+", "_", label.lower())
        self.psql("CREATE DATABASE " + db)
        g = GMN(self, label, db)
        self.gmns.append(g)  # its logs, whether or not it starts
        try:
            g.start_gmn()
        except BaseException:
            g.stop()
            raise
        self.last_gmn = g
        spool = self.workdir / "spool" / label
        spool.mkdir(parents=True)
        self.spools.append(spool)
        return {
            "upstreams": [{
                "name": "gmn",
                "type": "dataone",
                "baseURL": g.base_url,
                "tls": {"ca": self.ca, "cert": self.client_cert, "key": self.client_key},
                # GMN sees the front's certificate; the front's authorization is
                # the one that sees the caller.
                "options": {"forward": "none", "spoolDir": str(spool)},
            }],
            "mapping": "gmn",
        }

    def node_upstream(self, label):
        """The GMN node_config started, stopped after its node."""
        g, self.last_gmn = self.last_gmn, None
        return g

    def stop(self):
        errors = []
        for g in getattr(self, "gmns", []):
            try:
                g.stop()
            except Exception as e:
                errors.append(str(e))
        try:
            super().stop()
        finally:
            if hasattr(self, "pki"):
                shutil.rmtree(self.pki, ignore_errors=True)
            left = sorted(str(f) for d in getattr(self, "spools", []) for f in d.iterdir())
            if left:
                errors.append(
                    "the gmn fronts left {} spool file(s) behind: {}".format(len(left), ", ".join(left[:20]))
                )
        if errors:
            raise RuntimeError("; ".join(errors))


class GMN(Server):
    """One GMN behind its own Apache (.ci/gmn's templates), in a directory
    www-data owns when root (Apache refuses to serve as root)."""

    def __init__(self, backend, label, db):
        # Not under the suite's temporary directory (root's, mode 0700); its
        # logs are kept there when it stops, and the rest removed.
        d = Path(tempfile.mkdtemp(prefix="d1bridge-conformance-gmn-"))
        (d / "apache").mkdir()
        super().__init__("apache2-gmn-" + label, d / "apache")
        self.backend, self.label, self.db, self.top = backend, label, db, d
        self.kept = backend.workdir / ("gmn-" + label)
        self.files = {"apache error.log": d / "apache" / "error.log",
                      "apache access.log": d / "apache" / "access.log",
                      "gmn.log": d / "gmn" / "gmn.log"}

    def logs(self):
        return [self.log] + [LogFile("GMN {} {}".format(self.label, t), p) for t, p in self.files.items()]

    def _fill(self, src, dst, port):
        b = self.backend
        as_root = os.geteuid() == 0
        values = {
            "DIR": str(self.top), "MODULES": b.MODULES, "VENV": str(b.venv), "PORT": str(port),
            "USER_LINES": "User {0}\nGroup {0}".format(b.GMN_USER) if as_root else "",
            "DAEMON_USER": "user={0} group={0} ".format(b.GMN_USER) if as_root else "",
            "SERVER_CERT": b.server_cert, "SERVER_KEY": b.server_key, "CLIENT_CA": b.ca,
            "VERIFY_CLIENT": "optional", "NODE_ID": b.NODE_ID,
            "NODE_CERT": b.node_cert, "NODE_KEY": b.node_key, "TRUSTED": b.BRIDGE_SUBJECT,
            "BASE_URL": "https://127.0.0.1:{}/mn".format(port),
            "PG_DB": self.db, "PG_USER": b.USER, "PG_PORT": str(b.port), "PG_SCHEMA": "public",
        }
        text = (b.ROOT / ".ci" / "gmn" / src).read_text()
        for k, v in values.items():
            text = text.replace("@" + k + "@", v)
        left = re.search(r"@[A-Z][A-Z_]*@", text)
        if left:
            raise Unavailable("{}: {} is not replaced".format(src, left.group(0)))
        Path(dst).write_text(text)

    def _write(self, port):
        self._fill("settings.py.in", self.top / "gmn" / "gmn_test_settings.py", port)
        self._fill("gmn.wsgi.in", self.top / "gmn" / "gmn.wsgi", port)
        self._fill("httpd.conf.in", self.top / "apache" / "httpd.conf", port)

    def start_gmn(self):
        b = self.backend
        started = time.monotonic()
        for sub in ("apache", "gmn/objects"):
            (self.top / sub).mkdir(parents=True, exist_ok=True)
        (self.top / "gmn" / "secret_key.txt").write_text("gmn-conformance-secret-key\n")
        self._write(0)
        as_gmn = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam(b.GMN_USER)
            for dirpath, dirnames, filenames in os.walk(self.top):
                for n in [dirpath] + [os.path.join(dirpath, f) for f in dirnames + filenames]:
                    os.chown(n, pw.pw_uid, pw.pw_gid)
            as_gmn = ["runuser", "-u", b.GMN_USER, "--"]
        res = subprocess.run(
            as_gmn + [str(b.python), str(b.ROOT / ".ci" / "gmn" / "setup_gmn.py"), b.BRIDGE_SUBJECT],
            cwd=self.top / "gmn", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        if res.returncode != 0:
            raise Unavailable("GMN's migrations (setup_gmn.py) failed:\n{}".format(res.stdout))
        import ssl

        ctx = ssl.create_default_context(cafile=b.ca)

        def ready(port):
            try:
                with urllib.request.urlopen(
                    "https://127.0.0.1:{}/mn/v2/monitor/ping".format(port), timeout=5, context=ctx
                ) as r:
                    return r.status == 200
            except (urllib.error.URLError, ConnectionError, OSError):
                return False

        def argv(port):
            self._write(port)
            return [b.apache, "-f", str(self.top / "apache" / "httpd.conf"), "-DFOREGROUND"]

        self.start(argv, ready, timeout=60.0,
                   taken=lambda log: "Address already in use" in log)
        self.base_url = "https://127.0.0.1:{}/mn".format(self.port)
        sys.stderr.write("\nGMN for node {} up in {:.2f}s at {}\n".format(
            self.label, time.monotonic() - started, self.base_url))

    def stop(self, grace=10.0):
        try:
            super().stop(grace)
        finally:
            if self.top.exists():
                self.kept.mkdir(parents=True, exist_ok=True)
                moved = {}
                for title, p in list(self.files.items()) + [("log", self.log.path)]:
                    dst = self.kept / (title.replace(" ", "-"))
                    if p.exists():
                        shutil.copyfile(p, dst)
                    moved[title] = dst
                self.log.path = moved.pop("log")
                self.files = moved
                shutil.rmtree(self.top, ignore_errors=True)


CLASSES = {
    "files": Backend,
    "s3": S3Backend,
    "webdav": WebDAVBackend,
    "http": HTTPBackend,
    "postgres": PostgresBackend,
    "replicas": ReplicasBackend,
    "dataone": DataONEBackend,
    "gmn": GMNBackend,
}


def write_config(path, cfg):
    """A configuration file: JSON is YAML."""
    Path(path).write_text(json.dumps(cfg, indent=2) + "\n")
