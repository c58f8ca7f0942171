"""Helpers of the conformance suite: clients, system metadata built with the
schema bindings of dataone.common, and xmllint validation of responses."""

import datetime
import hashlib
import io
import os
import subprocess
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import d1_client.cnclient
import d1_client.cnclient_2_0
import d1_client.mnclient
import d1_client.mnclient_1_2
import d1_client.mnclient_2_0
import d1_common.types.dataoneTypes_v1
import d1_common.types.dataoneTypes_v2_0
import d1_common.types.exceptions as exc

NS_V1 = "http://ns.dataone.org/service/types/v1"
NS_V1_1 = "http://ns.dataone.org/service/types/v1.1"
NS_V2 = "http://ns.dataone.org/service/types/v2.0"

BINDINGS = {
    "v1": d1_common.types.dataoneTypes_v1,
    "v2": d1_common.types.dataoneTypes_v2_0,
}

# The HTTP timeout of every client call: a node that hangs fails the test, not CI.
TIMEOUT = 30.0

# ---------------------------------------------------------------------------
# Identifiers and data
# ---------------------------------------------------------------------------


def new_pid(label, version=""):
    """A unique PID; label and version make the server log readable."""
    parts = ["conf", version, label, uuid.uuid4().hex[:12]]
    return "-".join(p for p in parts if p)


def payload(label="", size=None):
    """Distinct object bytes (not valid XML, so never mistaken for a DataONE doc)."""
    base = "d1bridge conformance object {} {}\n".format(label, uuid.uuid4()).encode()
    if size is None:
        return base
    return (base * (size // len(base) + 1))[:size]


HASHES = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256"}
# The checksum algorithm of the suite's objects when a test names none: the
# backend's (backends.Backend.checksum_algorithm), set by conftest.py.
CHECKSUM_ALGORITHM = ["SHA-256"]
# The checksum algorithms the backend's store accepts in system metadata
# (backends.Backend.checksum_algorithms), set by conftest.py.
ALGORITHMS = ["MD5", "SHA-1", "SHA-256"]


def digest(data, algorithm):
    return hashlib.new(HASHES[algorithm], data).hexdigest()


# ---------------------------------------------------------------------------
# System metadata through the schema bindings
# ---------------------------------------------------------------------------

# Test objects belong to `public`: until the authentication issue lands every
# caller is anonymous (subject `public`), and the rights holder holds every
# permission (read, write, changePermission), which update, archive, delete and
# updateSystemMetadata need.
OWNER = "public"
OTHER = "CN=Someone Else A1,O=Conformance,C=US,DC=cilogon,DC=org"

# Authenticated callers present RS256 bearer tokens (the client's jwt_token),
# signed by a key the suite makes and the nodes are configured to trust.
USER = "CN=Conformance User A2,O=Conformance,C=US,DC=cilogon,DC=org"
CN_SUBJECT = "CN=urn:node:cnConformance,DC=dataone,DC=org"


class Tokens:
    """An RSA key pair whose public half the nodes trust (auth.tokenKeys), and a
    second one they do not, for forged tokens."""

    def __init__(self, workdir):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.untrusted_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_pem = Path(workdir) / "token-key.pem"
        self.public_pem.write_bytes(
            self.key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def token(self, subject, lifetime=3600, trusted=True, age=0):
        """A DataONE-style JWT for subject; a negative lifetime has expired."""
        import jwt

        now = int(time.time()) - age
        claims = {
            "sub": subject,
            "userId": subject,
            "fullName": "Conformance",
            "consumerKey": "theconsumerkey",
            "issuedAt": now,
            "iat": now,
            "nbf": now - 5,
            "exp": now + lifetime,
        }
        return jwt.encode(claims, self.key if trusted else self.untrusted_key, algorithm="RS256")


def sysmeta(
    version,
    pid,
    data,
    format_id="application/octet-stream",
    algorithm=None,
    checksum=None,
    size=None,
    rights_holder=OWNER,
    allow=((("public",), ("read",)),),
    sid=None,
    obsoletes=None,
    media_type=None,
    file_name=None,
    replication_allowed=False,
):
    """Build a SystemMetadata with dataone.common's generated bindings.

    allow: ((subjects, permissions), ...) or None for no access policy.
    The node controls submitter, dates, serialVersion and the member node fields,
    so they are left out (or, for submitter, set to the caller).
    """
    t = BINDINGS[version]
    algorithm = algorithm or CHECKSUM_ALGORITHM[0]
    sm = t.systemMetadata()
    sm.serialVersion = 1
    sm.identifier = pid
    sm.formatId = format_id
    sm.size = len(data) if size is None else size
    sm.checksum = t.Checksum(
        digest(data, algorithm) if checksum is None else checksum, algorithm=algorithm
    )
    sm.submitter = OWNER
    sm.rightsHolder = rights_holder
    if allow:
        sm.accessPolicy = t.AccessPolicy(
            allow=[
                t.AccessRule(subject=list(subjects), permission=list(perms))
                for subjects, perms in allow
            ]
        )
    sm.replicationPolicy = t.ReplicationPolicy(
        replicationAllowed=replication_allowed,
        numberReplicas=2 if replication_allowed else 0,
    )
    if obsoletes is not None:
        sm.obsoletes = obsoletes
    if version == "v2":
        if sid is not None:
            sm.seriesId = sid
        if media_type is not None:
            sm.mediaType = t.MediaType(name=media_type)
        if file_name is not None:
            sm.fileName = file_name
    return sm


def access_rules(sm):
    """The access policy of a SystemMetadata (or an AccessPolicy itself) as a
    sorted list of (subjects, permissions)."""
    policy = sm if hasattr(sm, "allow") else sm.accessPolicy
    if policy is None:
        return []
    return sorted(
        (tuple(sorted(value(s) for s in a.subject)), tuple(sorted(str(p) for p in a.permission)))
        for a in policy.allow
    )


def value(x):
    """The plain value of a pyxb simple content (or None)."""
    if x is None:
        return None
    v = x.value() if hasattr(x, "value") and callable(x.value) else x
    return str(v)


def ns_of(pyxb_obj):
    return pyxb_obj._element().name().namespace().uri()


# ---------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------


class MN:
    """The official client of one API version against one node, with every XML
    response validated by xmllint."""

    def __init__(self, node, version, client_class=None, token=None):
        self.node = node
        self.version = version
        self.t = BINDINGS[version]
        if client_class is None:
            client_class = {
                "v1": d1_client.mnclient.MemberNodeClient,
                "v2": d1_client.mnclient_2_0.MemberNodeClient_2_0,
            }[version]
        self.client = make_client(client_class, node.mn_base, token)

    def __getattr__(self, name):
        return getattr(self.client, name)

    def pid(self, label):
        return new_pid(label, self.version)

    def sysmeta(self, pid, data, **kw):
        return sysmeta(self.version, pid, data, **kw)

    def create_object(self, label="obj", data=None, pid=None, **kw):
        """Create an object; returns (pid, data, sysmeta as sent)."""
        pid = pid or self.pid(label)
        data = payload(label) if data is None else data
        sm = self.sysmeta(pid, data, **kw)
        ident = self.client.create(pid, io.BytesIO(data), sm)
        assert value(ident) == pid, "create answered identifier {!r}, expected {!r}".format(
            value(ident), pid
        )
        return pid, data, sm

    def get_bytes(self, pid):
        return self.client.get(pid).content


def make_client(client_class, base_url, token=None):
    kw = {"jwt_token": token} if token else {}
    c = client_class(base_url, timeout_sec=TIMEOUT, **kw)
    c._session.hooks["response"].append(_validate_response)
    return c


def mn_client_1_2(node, token=None):
    """The v1 client that has the API 1.2 calls (getPackage, views) on /v1."""
    return MN(node, "v1", d1_client.mnclient_1_2.MemberNodeClient_1_2, token)


def cn_client(base_url, version, token=None):
    cls = {
        "v1": d1_client.cnclient.CoordinatingNodeClient,
        "v2": d1_client.cnclient_2_0.CoordinatingNodeClient_2_0,
    }[version]
    return make_client(cls, base_url, token)


# ---------------------------------------------------------------------------
# Datetimes
# ---------------------------------------------------------------------------


def utc(dt):
    """A pyxb dateTime as an aware UTC datetime."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    dt = dt.astimezone(datetime.timezone.utc)
    return datetime.datetime(
        dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond,
        tzinfo=datetime.timezone.utc,
    )


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def tick():
    """Let the node's millisecond clock move on, so that timestamps differ."""
    time.sleep(0.02)


# ---------------------------------------------------------------------------
# xmllint validation of every DataONE document a client receives
# ---------------------------------------------------------------------------

_SCHEMAS = {}
_CATALOG = {}
VALIDATED = [0]
_lock = threading.Lock()


def setup_xmllint(workdir):
    """Write an XML catalog that maps the schemas' remote imports to the copies in
    dataone.common, and note which XSD validates which root namespace."""
    xsd_dir = Path(d1_common.types.dataoneTypes_v1.__file__).resolve().parent / "schemas"
    files = {
        NS_V1: xsd_dir / "dataoneTypes.xsd",
        NS_V1_1: xsd_dir / "dataoneTypes_v1.1.xsd",
        NS_V2: xsd_dir / "dataoneTypes_v2.0.xsd",
        "": xsd_dir / "dataoneErrors.xsd",
    }
    for f in files.values():
        if not f.is_file():
            raise RuntimeError("dataone.common schema missing: {}".format(f))
    entries = []
    for ns in (NS_V1, NS_V1_1, NS_V2):
        uri = files[ns].as_uri()
        entries.append('  <system systemId="{}" uri="{}"/>'.format(ns, uri))
        entries.append('  <uri name="{}" uri="{}"/>'.format(ns, uri))
    catalog = Path(workdir) / "catalog.xml"
    catalog.write_text(
        '<?xml version="1.0"?>\n'
        '<catalog xmlns="urn:oasis:names:tc:entity:xmlns:xml:catalog">\n'
        + "\n".join(entries)
        + "\n</catalog>\n"
    )
    _SCHEMAS.update(files)
    _CATALOG["path"] = str(catalog)


def root_of(body):
    """(namespace, local name) of the document's root element, or None."""
    try:
        for _, el in ET.iterparse(io.BytesIO(body), events=("start",)):
            tag = el.tag
            if tag.startswith("{"):
                ns, _, local = tag[1:].partition("}")
                return ns, local
            return "", tag
    except ET.ParseError:
        return None
    return None


def schema_for(body):
    root = root_of(body)
    if root is None:
        return None
    ns, local = root
    if ns == "" and local == "error":
        return _SCHEMAS.get("")
    if ns in (NS_V1, NS_V1_1, NS_V2):
        return _SCHEMAS.get(ns)
    return None  # object bytes, resource maps, ...: not a DataONE type


def validate_xml(body, what="document"):
    """Validate a DataONE document with xmllint; AssertionError if it is invalid."""
    xsd = schema_for(body)
    if xsd is None:
        return False
    env = dict(os.environ, XML_CATALOG_FILES=_CATALOG["path"])
    res = subprocess.run(
        ["xmllint", "--noout", "--nonet", "--schema", str(xsd), "-"],
        input=body,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    if res.returncode != 0:
        raise AssertionError(
            "xmllint: the {} does not validate against {}:\n{}\n--- document ---\n{}".format(
                what,
                xsd.name,
                res.stdout.decode("utf-8", "replace"),
                body.decode("utf-8", "replace")[:4000],
            )
        )
    with _lock:
        VALIDATED[0] += 1
    return True


def _validate_response(response, *args, **kwargs):
    """requests response hook: validate every DataONE XML body."""
    if response.request.method == "HEAD" or not _CATALOG:
        return
    ctype = response.headers.get("Content-Type", "")
    if "xml" not in ctype:
        return
    body = response.content
    if not body:
        return
    validate_xml(
        body,
        "response to {} {} (HTTP {})".format(
            response.request.method, response.request.url, response.status_code
        ),
    )


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

NotFound = exc.NotFound
NotAuthorized = exc.NotAuthorized
InvalidToken = exc.InvalidToken
InvalidRequest = exc.InvalidRequest
InvalidSystemMetadata = exc.InvalidSystemMetadata
IdentifierNotUnique = exc.IdentifierNotUnique
ServiceFailure = exc.ServiceFailure
DataONEException = exc.DataONEException

STATUS = {
    "NotFound": 404,
    "NotAuthorized": 401,
    "InvalidToken": 401,
    "InvalidRequest": 400,
    "InvalidSystemMetadata": 400,
    "IdentifierNotUnique": 409,
    "ServiceFailure": 500,
    "NotImplemented": 501,
    "UnsupportedType": 400,
    "VersionMismatch": 409,
}


def check_error(e, *names):
    """The exception is one of names, with the errorCode that name implies."""
    name = type(e).__name__
    assert name in names, "expected {}, got {}: {}".format(" or ".join(names), name, e)
    assert int(e.errorCode) == STATUS[name], "{} with errorCode {} (expected {})".format(
        name, e.errorCode, STATUS[name]
    )
