"""MNRead: get, describe, getSystemMetadata, getChecksum, on /v1 and /v2, with the
content checked: bytes, checksums against hashlib, system metadata as sent."""

import io
import os

import d1_common.date_time
import pytest

import d1


def _node_id(mn):
    return d1.value(mn.getCapabilities().identifier)


# ---------------------------------------------------------------------------
# get
# ---------------------------------------------------------------------------


def test_get_returns_the_bytes(mn):
    pid, data, _ = mn.create_object("get", format_id="text/plain")
    resp = mn.get(pid)
    assert resp.status_code == 200
    assert resp.content == data
    ctype = resp.headers.get("Content-Type", "")
    assert ctype.split(";")[0].strip() == "text/plain", "Content-Type {!r} for a text/plain object".format(ctype)


def test_get_large_binary_object(mn):
    data = os.urandom(3 * 1024 * 1024 + 17)
    pid, _, _ = mn.create_object("large", data=data, algorithm="MD5")
    resp = mn.get(pid, stream=True)
    got = b"".join(resp.iter_content(64 * 1024))
    assert len(got) == len(data)
    assert got == data
    assert resp.headers.get("Content-Type", "").startswith("application/octet-stream")


def test_get_empty_object(mn):
    pid, _, _ = mn.create_object("empty", data=b"")
    assert mn.get(pid).content == b""
    assert int(mn.getSystemMetadata(pid).size) == 0


# ---------------------------------------------------------------------------
# getSystemMetadata: the fields as sent, and the node-controlled ones
# ---------------------------------------------------------------------------


def test_get_system_metadata_as_sent(mn):
    extra = {}
    if mn.version == "v2":
        extra = dict(sid=mn.pid("sid"), media_type="text/csv", file_name="table.csv")
    allow = ((("public",), ("read",)), ((d1.OTHER, "CN=Reader Two,DC=org"), ("read", "write")))
    pid, data, sent = mn.create_object(
        "meta", data=b"a,b\n1,2\n", format_id="text/csv", algorithm="SHA-1", allow=allow, **extra
    )
    before = d1.now()
    sm = mn.getSystemMetadata(pid)

    want_ns = d1.NS_V2 if mn.version == "v2" else d1.NS_V1
    assert d1.ns_of(sm) == want_ns
    assert d1.value(sm.identifier) == pid
    assert str(sm.formatId) == "text/csv"
    assert int(sm.size) == len(data)
    assert sm.checksum.algorithm == "SHA-1"
    assert sm.checksum.value().lower() == d1.digest(data, "SHA-1")
    assert d1.value(sm.rightsHolder) == d1.OWNER
    assert d1.access_rules(sm) == d1.access_rules(sent)
    assert sm.replicationPolicy is not None and not sm.replicationPolicy.replicationAllowed
    assert sm.obsoletes is None and sm.obsoletedBy is None
    assert not sm.archived
    if mn.version == "v2":
        assert d1.value(sm.seriesId) == extra["sid"]
        assert sm.mediaType is not None and sm.mediaType.name == "text/csv"
        assert str(sm.fileName) == "table.csv"

    # Node-controlled fields (API.md §10 rule 4).
    node_id = _node_id(mn)
    assert d1.value(sm.submitter) == "public", "submitter is the caller (anonymous: public)"
    assert d1.value(sm.authoritativeMemberNode) == node_id
    assert d1.value(sm.originMemberNode) == node_id
    assert sm.serialVersion is not None
    assert sm.dateUploaded is not None and sm.dateSysMetadataModified is not None
    uploaded = d1.utc(sm.dateUploaded)
    assert abs((uploaded - before).total_seconds()) < 300, "dateUploaded {} is not now".format(uploaded)
    assert d1.utc(sm.dateSysMetadataModified) >= uploaded


def test_v2_object_read_through_v1(node):
    """An object created on /v2 with v2-only fields reads as v1 system metadata on /v1."""
    mn2, mn1 = d1.MN(node, "v2"), d1.MN(node, "v1")
    pid, data, _ = mn2.create_object("cross", sid=mn2.pid("sid"), file_name="x.bin")
    sm = mn1.getSystemMetadata(pid)
    assert d1.ns_of(sm) == d1.NS_V1
    assert d1.value(sm.identifier) == pid
    assert mn1.get(pid).content == data


def test_v1_object_read_through_v2(node):
    mn2, mn1 = d1.MN(node, "v2"), d1.MN(node, "v1")
    pid, data, _ = mn1.create_object("cross1")
    sm = mn2.getSystemMetadata(pid)
    assert d1.ns_of(sm) == d1.NS_V2
    assert d1.value(sm.identifier) == pid
    assert sm.seriesId is None
    assert mn2.get(pid).content == data


# ---------------------------------------------------------------------------
# describe (HEAD)
# ---------------------------------------------------------------------------


def test_describe_headers(mn):
    pid, data, _ = mn.create_object("describe", format_id="text/plain", algorithm="MD5")
    sm = mn.getSystemMetadata(pid)
    h = mn.describe(pid)
    assert h.get("Content-Length") == str(len(data))
    algo, _, hexval = h.get("DataONE-Checksum", "").partition(",")
    assert algo == "MD5" and hexval.lower() == d1.digest(data, "MD5"), "DataONE-Checksum {!r}".format(
        h.get("DataONE-Checksum")
    )
    fmt = h.get("DataONE-FormatId") or h.get("DataONE-ObjectFormat")
    assert fmt == "text/plain", "DataONE-FormatId {!r}".format(fmt)
    assert h.get("DataONE-SerialVersion") == str(int(sm.serialVersion))
    assert (h.get("Content-Type") or "").split(";")[0].strip() == "text/plain"
    lm = h.get("Last-Modified")
    assert lm, "describe must send Last-Modified"
    got = d1_common.date_time.dt_from_http_datetime_str(lm)
    want = d1.utc(sm.dateSysMetadataModified).replace(microsecond=0)
    assert got == want, "Last-Modified {!r} is not dateSysMetadataModified {}".format(lm, want)


# ---------------------------------------------------------------------------
# getChecksum
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-1", "SHA-256"])
def test_get_checksum(mn, algorithm):
    # Stored with a different algorithm than asked for, so the node must compute it.
    stored = "SHA-1" if algorithm != "SHA-1" else "MD5"
    pid, data, _ = mn.create_object("cks", algorithm=stored)
    c = mn.getChecksum(pid, algorithm)
    assert c.algorithm == algorithm
    assert c.value().lower() == d1.digest(data, algorithm)
    # Asking again (a cached value) answers the same.
    assert mn.getChecksum(pid, algorithm).value().lower() == d1.digest(data, algorithm)


def test_get_checksum_default_algorithm(mn):
    pid, data, _ = mn.create_object("cksdefault", algorithm=d1.CHECKSUM_ALGORITHM[0])
    c = mn.getChecksum(pid)
    assert c.algorithm in d1.HASHES, c.algorithm
    assert c.value().lower() == d1.digest(data, c.algorithm)


def test_get_checksum_unsupported_algorithm(mn):
    pid, _, _ = mn.create_object("cksbad")
    with pytest.raises(d1.DataONEException) as e:
        mn.getChecksum(pid, "NO-SUCH-HASH")
    d1.check_error(e.value, "InvalidRequest")


# ---------------------------------------------------------------------------
# Series ids (v2): get, getSystemMetadata and describe resolve a SID to the head
# ---------------------------------------------------------------------------


def test_sid_resolves_to_head(node):
    mn2, mn1 = d1.MN(node, "v2"), d1.MN(node, "v1")
    sid = mn2.pid("series")
    pid1, data1, _ = mn2.create_object("sid1", sid=sid)
    assert mn2.get(sid).content == data1
    assert d1.value(mn2.getSystemMetadata(sid).identifier) == pid1

    pid2, data2 = mn2.pid("sid2"), d1.payload("sid2")
    mn2.update(pid1, io.BytesIO(data2), pid2, mn2.sysmeta(pid2, data2, sid=sid, obsoletes=pid1))
    assert mn2.get(sid).content == data2
    assert d1.value(mn2.getSystemMetadata(sid).identifier) == pid2
    assert mn2.describe(sid).get("Content-Length") == str(len(data2))
    # listObjects(identifier=SID) gives every PID of the series (API.md §10 rule 12).
    listed = sorted(d1.value(o.identifier) for o in mn2.listObjects(identifier=sid).objectInfo)
    assert listed == sorted([pid1, pid2]), listed

    # On /v1 a SID is just an unknown identifier.
    with pytest.raises(d1.DataONEException) as e:
        mn1.get(sid)
    d1.check_error(e.value, "NotFound")
