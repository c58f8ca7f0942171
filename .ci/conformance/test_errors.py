"""Error paths: the exception the client raises (from the error document, or from
the DataONE-Exception-* headers on HEAD), its HTTP status, and the document itself
(validated by xmllint in every test through the client's response hook)."""

import io

import pytest

import d1

# ---------------------------------------------------------------------------
# NotFound
# ---------------------------------------------------------------------------

MISSING_CALLS = {
    "get": lambda mn, pid: mn.get(pid),
    "getSystemMetadata": lambda mn, pid: mn.getSystemMetadata(pid),
    "describe": lambda mn, pid: mn.describe(pid),
    "getChecksum": lambda mn, pid: mn.getChecksum(pid, "MD5"),
    "archive": lambda mn, pid: mn.archive(pid),
}


@pytest.mark.parametrize("call", sorted(MISSING_CALLS))
def test_missing_object_is_not_found(mn, call):
    pid = mn.pid("missing")
    with pytest.raises(d1.DataONEException) as e:
        MISSING_CALLS[call](mn, pid)
    d1.check_error(e.value, "NotFound")


def test_delete_missing_object_is_not_found(tmn):
    with pytest.raises(d1.DataONEException) as e:
        tmn.delete(tmn.pid("missing"))
    d1.check_error(e.value, "NotFound")


def test_not_found_document(mn):
    """The error document itself: status, Content-Type, name, errorCode, identifier."""
    pid = mn.pid("missing/doc")
    resp = mn.getSystemMetadataResponse(pid)
    assert resp.status_code == 404
    assert resp.headers.get("Content-Type", "").split(";")[0].strip() in ("text/xml", "application/xml")
    assert d1.validate_xml(resp.content, "NotFound document"), "not an <error> document: {!r}".format(
        resp.content[:500]
    )
    import xml.etree.ElementTree as ET

    root = ET.fromstring(resp.content)
    assert root.tag == "error"
    assert root.get("name") == "NotFound" and root.get("errorCode") == "404"
    assert root.get("detailCode")
    assert root.get("identifier") == pid, "identifier attribute {!r}".format(root.get("identifier"))


def test_not_found_headers_on_head(mn):
    """HEAD errors travel in DataONE-Exception-* headers (API.md §6.3)."""
    pid = mn.pid("missing-head")
    resp = mn.describeResponse(pid)
    assert resp.status_code == 404
    h = resp.headers
    assert h.get("DataONE-Exception-Name") == "NotFound"
    assert h.get("DataONE-Exception-DetailCode")
    assert h.get("DataONE-Exception-Identifier") == pid or h.get("DataONE-Exception-PID") == pid
    assert resp.content == b""


# ---------------------------------------------------------------------------
# IdentifierNotUnique, InvalidSystemMetadata
# ---------------------------------------------------------------------------


def test_duplicate_identifier(mn):
    pid, data, _ = mn.create_object("dup")
    other = d1.payload("dup2")
    with pytest.raises(d1.DataONEException) as e:
        mn.create(pid, io.BytesIO(other), mn.sysmeta(pid, other))
    d1.check_error(e.value, "IdentifierNotUnique")
    assert mn.get(pid).content == data, "the first object must be untouched"


def test_duplicate_of_a_series_id(mn2):
    """A PID must not be in use as a SID either (API.md §10 rule 1)."""
    sid = mn2.pid("dupsid")
    mn2.create_object("dupsid-holder", sid=sid)
    data = d1.payload("dupsid")
    with pytest.raises(d1.DataONEException) as e:
        mn2.create(sid, io.BytesIO(data), mn2.sysmeta(sid, data))
    d1.check_error(e.value, "IdentifierNotUnique")


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-1", "SHA-256"])
def test_wrong_checksum(mn, algorithm):
    data = d1.payload("badsum")
    pid = mn.pid("badsum")
    wrong = d1.digest(data + b"x", algorithm)
    with pytest.raises(d1.DataONEException) as e:
        mn.create(pid, io.BytesIO(data), mn.sysmeta(pid, data, algorithm=algorithm, checksum=wrong))
    d1.check_error(e.value, "InvalidSystemMetadata")
    # Nothing was stored.
    with pytest.raises(d1.DataONEException) as e:
        mn.getSystemMetadata(pid)
    d1.check_error(e.value, "NotFound")


# ---------------------------------------------------------------------------
# Not authorized: an object of someone else, with no access policy
# ---------------------------------------------------------------------------


@pytest.fixture
def foreign(mn):
    """An object whose rightsHolder is another subject and which has no access
    policy: the anonymous caller holds no right on it (its submitter does not)."""
    pid, data, _ = mn.create_object("foreign", rights_holder=d1.OTHER, allow=None)
    return pid, data


FORBIDDEN_CALLS = {
    "get": lambda mn, pid: mn.get(pid),
    "getSystemMetadata": lambda mn, pid: mn.getSystemMetadata(pid),
    "describe": lambda mn, pid: mn.describe(pid),
    "getChecksum": lambda mn, pid: mn.getChecksum(pid, "MD5"),
    "archive": lambda mn, pid: mn.archive(pid),
}


def test_update_without_rights(mn, foreign):
    pid, _ = foreign
    new, data = mn.pid("foreign-new"), d1.payload("x")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(pid, io.BytesIO(data), new, mn.sysmeta(new, data))
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")


@pytest.mark.parametrize("call", sorted(FORBIDDEN_CALLS))
def test_call_without_rights(mn, foreign, call):
    pid, _ = foreign
    with pytest.raises(d1.DataONEException) as e:
        FORBIDDEN_CALLS[call](mn, pid)
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")


def test_update_system_metadata_without_rights(node, mn2):
    pid, _, _ = mn2.create_object("foreign-usm", rights_holder=d1.OTHER, allow=((("public",), ("read",)),))
    sm = mn2.getSystemMetadata(pid)
    sm.rightsHolder = "public"
    with pytest.raises(d1.DataONEException) as e:
        mn2.updateSystemMetadata(pid, sm)
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")
    assert d1.value(mn2.getSystemMetadata(pid).rightsHolder) == d1.OTHER


def test_foreign_object_not_listed(mn, foreign):
    """listObjects shows the caller only what it may read (or everything:
    NOTES.md §1 allows both); it never shows what it hides in the total."""
    pid, _ = foreign
    ol = mn.listObjects(identifier=pid)
    assert int(ol.total) == len(ol.objectInfo) <= 1


def test_access_policy_grants_write(mn):
    """With write granted to public, the anonymous caller may update someone
    else's object."""
    pid, _, _ = mn.create_object(
        "granted", rights_holder=d1.OTHER, allow=((("public",), ("read", "write")),)
    )
    new, data = mn.pid("granted-new"), d1.payload("granted")
    assert d1.value(mn.update(pid, io.BytesIO(data), new, mn.sysmeta(new, data))) == new
