"""Conformance suite of d1bridge: the official DataONE Python client drives a real
d1bridge binary over HTTP.

The binary is built once (``go build ./cmd/d1bridge`` from the repository root) and
started on a free loopback port with a temporary data directory. Every DataONE XML
document the node answers is validated with xmllint against the DataONE schemas
that ship with dataone.common, on top of the client's own schema-bound parsing.

Callers: most tests are anonymous, i.e. the symbolic subject ``public``. The
nodes are started with ``D1BRIDGE_NODE_SUBMITTERS=public`` so that anonymous
callers may create objects, and test objects give ``public`` the rights each
operation needs (their rightsHolder is ``public``, see ``d1.sysmeta``).
Authenticated callers present RS256 bearer tokens through the client's
``jwt_token``, signed by a key this suite generates and the nodes trust
(``D1BRIDGE_AUTH_TOKENKEYS``). Operations for trusted callers only (delete,
systemMetadataChanged, synchronizationFailed, replicate, getReplica) are made with
a token of the coordinating node's subject (``D1BRIDGE_NODE_CNSUBJECTS``).

Backends: every node of a run keeps its objects and catalog in the backend chosen
with ``--backend files|s3|webdav|http|postgres|replicas|dataone|gmn`` or
``D1BRIDGE_CONFORMANCE_BACKEND`` (default files); see backends.py. With replicas
every node is three processes behind a load balancer (backend.front), whose
URL is the node's. The servers of
s3 (versitygw), webdav and http (nginx) and postgres are real, started once per run before
the first node and stopped after the last; a node of those backends runs
``d1bridge serve --config FILE`` with a configuration file of its own (its own key
prefix, collection or database). With dataone every node is a front d1bridge
whose member node is the dataone mapping over an upstream d1bridge of its own,
started just before it with the node's environment (submitters, cnSubjects,
tokenKeys) and stopped just after it; the tests talk only to the front, and the
upstream's log is reported with the front's.

Backend property ``cn_sees_mn_objects`` (backends.Backend): on files, s3,
webdav, http and postgres the CN role and the MN role of a node share one catalog, so a
CN test may read through the CN what it created through the MN. On dataone they
do not: the front's CN role serves the front's own catalog, while the mapping
creates and changes objects on the upstream. The CN tests that need the MN's
objects carry the marker ``cn_sees_mn_objects`` and are deselected on such a
backend (said in the header, the summary and the count of deselected tests); the
other CN tests, and every MN test, run on every backend.
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backends  # noqa: E402
import d1  # noqa: E402  (helpers of this suite)

ROOT = Path(__file__).resolve().parents[2]

# Every node started by the suite, for the log sections of failing tests and the
# full logs printed at the end of a run with failures.
NODES = []
# The running backend (a backends.Backend), once the first node asked for it.
BACKEND = []


@atexit.register
def _kill_leftovers():
    """However pytest ends, no d1bridge or backend server the suite started
    outlives it."""
    for n in NODES:
        if n.proc is not None and n.proc.poll() is None:
            n.proc.kill()
            n.proc.wait(timeout=10)
    for b in BACKEND:
        for s in b.servers:
            if s.running():
                s.stop(grace=2)


# ---------------------------------------------------------------------------
# The backend
# ---------------------------------------------------------------------------


def pytest_addoption(parser):
    parser.addoption(
        "--backend",
        choices=backends.NAMES,
        default=None,
        help="where the nodes keep objects and catalog: {} (default: ${} or files)".format(
            ", ".join(backends.NAMES), backends.ENV
        ),
    )


def backend_name(config):
    name = config.getoption("--backend") or os.environ.get(backends.ENV, "") or "files"
    if name not in backends.NAMES:
        raise pytest.UsageError(
            "{}={!r}: the backend is one of {}".format(backends.ENV, name, ", ".join(backends.NAMES))
        )
    return name


def pytest_configure(config):
    config._d1_backend = backend_name(config)
    cls = backends.CLASSES[config._d1_backend]
    d1.CHECKSUM_ALGORITHM[0] = cls.checksum_algorithm
    d1.ALGORITHMS[:] = cls.checksum_algorithms


def pytest_report_header(config):
    lines = ["d1bridge backend: {} (--backend or ${})".format(config._d1_backend, backends.ENV)]
    why = _cn_blind(config)
    if why:
        lines.append("deselected on this backend: tests marked cn_sees_mn_objects ({})".format(why))
    return lines


def _cn_blind(config):
    """Why the CN role of this backend's nodes does not see the MN's objects, or
    "" when it does (backends.Backend.cn_sees_mn_objects)."""
    cls = backends.CLASSES[config._d1_backend]
    if cls.cn_sees_mn_objects:
        return ""
    return cls.cn_sees_mn_objects_why or "the CN role does not see the MN's objects"


def _names(name, nodeid):
    """Whether a deselect table's name (file::test, with or without its
    parameters) names the test nodeid."""
    return nodeid == name or nodeid.startswith(name + "[")


def pytest_collection_modifyitems(config, items):
    """Deselect the tests marked cn_sees_mn_objects on a backend whose CN role
    does not see the objects created through the MN (see the module docstring),
    and the tests the backend names in its deselect table, each for its reason."""
    table = backends.CLASSES[config._d1_backend].deselect
    blind = _cn_blind(config)
    keep, dropped, config._d1_deselected = [], [], []
    for item in items:
        why = next((w for name, w in table.items() if _names(name, item.nodeid)), None)
        if why is not None:
            config._d1_deselected.append((item.nodeid, why))
            dropped.append(item)
        elif blind and item.get_closest_marker("cn_sees_mn_objects"):
            dropped.append(item)
            config._d1_cn_deselected = getattr(config, "_d1_cn_deselected", 0) + 1
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def backend(request, tmp_path_factory):
    """The backend's servers, started before the first node and stopped after the
    last (nodes are torn down first: they depend on this fixture)."""
    name = request.config._d1_backend
    b = backends.CLASSES[name](tmp_path_factory.mktemp("backend-" + name))
    BACKEND.append(b)
    started = time.monotonic()
    try:
        b.start()
    except backends.Unavailable as e:
        try:
            b.stop()
        finally:
            pytest.exit("the {} backend cannot run: {}".format(name, e), returncode=1)
    sys.stderr.write(
        "\nbackend {} up in {:.2f}s: {}\n".format(name, time.monotonic() - started, b.describe())
    )
    yield b
    b.stop()


# ---------------------------------------------------------------------------
# The binary
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def d1bridge_binary(tmp_path_factory):
    """Build ./cmd/d1bridge once per run."""
    out = tmp_path_factory.mktemp("bin") / "d1bridge"
    go = shutil.which("go")
    if go is None:
        pytest.fail("go is not on PATH: the suite builds ./cmd/d1bridge with it")
    started = time.monotonic()
    res = subprocess.run(
        [go, "build", "-o", str(out), "./cmd/d1bridge"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if res.returncode != 0:
        # One clear message instead of an error in every test.
        pytest.exit(
            "go build -o {} ./cmd/d1bridge failed (exit {}):\n{}".format(
                out, res.returncode, res.stdout
            ),
            returncode=1,
        )
    sys.stderr.write(
        "\nbuilt d1bridge in {:.1f}s: {}\n".format(time.monotonic() - started, out)
    )
    return out


# ---------------------------------------------------------------------------
# A running node
# ---------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One d1bridge process on 127.0.0.1 with its own data directory."""

    def __init__(self, binary, workdir, name, tokens, env=None, config=None):
        self.binary = binary
        self.tokens = tokens
        self.workdir = Path(workdir)
        self.name = name
        self.extra_env = dict(env or {})
        self.proc = None
        self.port = None
        self.log_path = self.workdir / "d1bridge.log"
        # dataone: the upstream d1bridge this node fronts, stopped after it.
        self.upstream = None
        # The backend's configuration file (the environment still sets the
        # scalar keys below, over it); None runs d1bridge with no file.
        self.config_path = None
        # replicas: the load balancer's port, once backend.front started it.
        self.front_port = None
        if config is not None:
            self.config_path = self.workdir / "d1bridge.yaml"
            backends.write_config(self.config_path, config)

    def argv(self):
        if self.config_path is None:
            return [str(self.binary)]
        return [str(self.binary), "serve", "--config", str(self.config_path)]

    @property
    def base(self):
        return "http://127.0.0.1:{}".format(self.front_port or self.port)

    @property
    def mn_base(self):
        return self.base + "/d1/mn"

    @property
    def cn_base(self):
        return self.base + "/d1/cn"

    def env(self):
        # Only what this suite sets: no D1BRIDGE_* variable of the caller leaks in.
        env = {k: v for k, v in os.environ.items() if not k.startswith("D1BRIDGE_")}
        env.update(
            {
                "D1BRIDGE_LISTEN": "127.0.0.1:{}".format(self.port),
                "D1BRIDGE_DATADIR": str(self.workdir / "data"),
                # Most tests are anonymous: let the symbolic subject `public`
                # create objects.
                "D1BRIDGE_NODE_SUBMITTERS": "public",
                # Bearer tokens signed by the suite's key are credentials.
                "D1BRIDGE_AUTH_TOKENKEYS": str(self.tokens.public_pem),
                # The coordinating node, a trusted subject (a YAML flow list:
                # the DN has commas).
                "D1BRIDGE_NODE_CNSUBJECTS": '["{}"]'.format(d1.CN_SUBJECT),
                # Accept replicas: with node.replicate off, replicate is refused.
                "D1BRIDGE_NODE_REPLICATE": "true",
            }
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout=60.0):
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            self.port = free_port()
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                self.argv(),
                cwd=self.workdir,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            if self._wait_ready(timeout):
                return self
            if self.proc.poll() is None:
                break  # running but not answering: no point in another port
        self.stop()
        extra = ""
        for b in BACKEND:
            for log in b.logs():
                extra += "\n--- {} ---\n{}".format(log.title, log.text(limit=4000))
        pytest.exit(
            "d1bridge ({}, {}) did not answer GET {}/v2/monitor/ping within {:.0f}s "
            "(exit status {}). Its log:\n{}{}".format(
                self.name, " ".join(self.argv()), self.mn_base, timeout,
                self.proc.returncode, self.log_text(), extra
            ),
            returncode=1,
        )

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        url = self.mn_base + "/v2/monitor/ping"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        return False

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; then the upstream it fronts."""
        try:
            self._stop()
        finally:
            if self.upstream is not None:
                self.upstream.stop()

    def _stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_size(self):
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_text(self, start=0, limit=None):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return "(no log)"
        text = data.decode("utf-8", "replace")
        if limit is not None and len(text) > limit:
            text = "[... {} earlier characters cut ...]\n".format(
                len(text) - limit
            ) + text[-limit:]
        return text


@pytest.fixture(scope="session")
def tokens(tmp_path_factory):
    return d1.Tokens(tmp_path_factory.mktemp("tokens"))


def _start(binary, backend, tmp_path_factory, tokens, name, env=None):
    """Start a node on the run's backend: a store (prefix, collection, database)
    of its own there; on dataone, first the upstream d1bridge it fronts, with the
    node's environment (the same submitters, cnSubjects and tokenKeys) and the
    backend's on top."""
    label = "{:02d}-{}".format(backend.nodes + 1, name.split()[0])
    upstream = None
    try:
        backend.check()
        up_env = backend.upstream_env(label)
        if up_env is not None:
            upstream = Node(
                binary, tmp_path_factory.mktemp("upstream-" + name.split()[0]),
                "upstream of the " + name, tokens, dict(env or {}, **up_env),
            )
            NODES.append(upstream)
            upstream.start()
        config = backend.node_config(label, upstream=upstream)
        if upstream is None:
            upstream = backend.node_upstream(label)
    except backends.Unavailable as e:
        if upstream is not None:
            upstream.stop()
        pytest.fail("{} on the {} backend: {}".format(name, backend.name, e), pytrace=False)
    n = Node(binary, tmp_path_factory.mktemp(name.split()[0]), name, tokens, env, config)
    n.upstream = upstream
    NODES.append(n)
    n.start()
    try:
        backend.front(n)
    except backends.Unavailable as e:
        n.stop()
        pytest.fail("{} on the {} backend: {}".format(name, backend.name, e), pytrace=False)
    return n


@pytest.fixture(scope="session")
def node(d1bridge_binary, backend, tmp_path_factory, tokens):
    """The shared node most tests use."""
    n = _start(d1bridge_binary, backend, tmp_path_factory, tokens, "shared node")
    yield n
    n.stop()


@pytest.fixture(scope="module")
def fresh_node(d1bridge_binary, backend, tmp_path_factory, tokens):
    """A node of its own for one test module, whose totals (listObjects,
    getLogRecords) count only what that module created."""
    n = _start(d1bridge_binary, backend, tmp_path_factory, tokens, "fresh node")
    yield n
    n.stop()


@pytest.fixture(scope="module")
def default_node(d1bridge_binary, backend, tmp_path_factory, tokens):
    """A node with the default submitters (authenticatedUser): anonymous callers
    may not create."""
    n = _start(
        d1bridge_binary,
        backend,
        tmp_path_factory,
        tokens,
        "default-submitters node",
        env={"D1BRIDGE_NODE_SUBMITTERS": "authenticatedUser"},
    )
    yield n
    n.stop()


# ---------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------


@pytest.fixture(params=["v1", "v2"])
def version(request):
    return request.param


@pytest.fixture
def mn(node, version):
    """An MN client of the given API version against the shared node."""
    return d1.MN(node, version)


@pytest.fixture
def tmn(node, version, tokens):
    """An MN client of the given API version against the shared node, with the
    coordinating node's credentials: a trusted caller."""
    return d1.MN(node, version, token=tokens.token(d1.CN_SUBJECT))


@pytest.fixture
def mn2(node):
    """The v2 MN client (for v2-only operations)."""
    return d1.MN(node, "v2")


# ---------------------------------------------------------------------------
# xmllint: every DataONE document the node sends is validated
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def strict_bindings():
    """Documents go through dataone.common's schema bindings with validation on,
    both ways: lenient parsing is never switched on."""
    import pyxb

    def check():
        cfg = pyxb.GlobalValidationConfig
        assert cfg.forDocument and cfg.forBinding, "pyxb validation was switched off"

    check()
    yield
    check()


@pytest.fixture(scope="session", autouse=True)
def xmllint_schemas(tmp_path_factory):
    """Point d1.validate_xml at the XSDs shipped in dataone.common, through an XML
    catalog so that their imports of http://ns.dataone.org/... resolve offline."""
    if shutil.which("xmllint") is None:
        pytest.fail(
            "xmllint is missing: .ci/test installs it (apt package libxml2-utils)",
            pytrace=False,
        )
    d1.setup_xmllint(tmp_path_factory.mktemp("xsd"))


# ---------------------------------------------------------------------------
# Server log: per failing test, and in full at the end of a run with failures
# ---------------------------------------------------------------------------


def _backend_logs():
    return [log for b in BACKEND for log in b.logs()]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item._d1_log_offsets = {id(n): n.log_size() for n in NODES}
    item._d1_log_offsets.update({str(log.path): log.size() for log in _backend_logs()})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed or getattr(rep, "wasxfail", None):
        return
    offsets = getattr(item, "_d1_log_offsets", {})
    for n in NODES:
        text = n.log_text(offsets.get(id(n), 0), limit=20000)
        if text.strip():
            rep.sections.append(
                ("d1bridge log during this test ({}, {})".format(n.name, n.base), text)
            )
    for log in _backend_logs():
        text = log.text(offsets.get(str(log.path), 0), limit=20000)
        if text.strip():
            rep.sections.append(("backend log during this test: {}".format(log.title), text))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tr = terminalreporter
    tr.write_sep(
        "-",
        "xmllint validated {} DataONE documents (backend {})".format(
            d1.VALIDATED[0], config._d1_backend
        ),
    )
    dropped = getattr(config, "_d1_cn_deselected", 0)
    if dropped:
        tr.write_sep(
            "-",
            "{} CN tests (marker cn_sees_mn_objects) deselected on backend {}: {}".format(
                dropped, config._d1_backend, _cn_blind(config)
            ),
        )
    for nodeid, why in getattr(config, "_d1_deselected", []):
        tr.write_line("deselected on backend {}: {} ({})".format(config._d1_backend, nodeid, why))
    if not (tr.stats.get("failed") or tr.stats.get("error")):
        return
    for n in NODES:
        tr.write_sep("=", "d1bridge log: {} ({})".format(n.name, n.base))
        tr.write_line(n.log_text(limit=60000))
    for b in BACKEND:
        for log in b.logs():
            tr.write_sep("=", "{} backend log: {} ({})".format(b.name, log.title, log.path))
            tr.write_line(log.text(limit=60000) or "(empty)")
