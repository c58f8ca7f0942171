"""Identifiers as the official client encodes them (each one path segment,
percent-encoded from UTF-8 with d1_common's safe set; query values by requests):
/, ?, #, +, %, the client's literal safe characters, XML and URL specials,
non-ASCII, and 800 characters. Each goes through create, get, describe,
getSystemMetadata, getChecksum, listObjects(identifier=...), getLogRecords and,
last, delete.

They are made with the coordinating node's credentials, because delete is for
trusted callers only (see conftest.py)."""

import io
import uuid

import pytest

import d1

KINDS = {
    "slash": lambda u: "conf/{}/a/b/".format(u),
    "question": lambda u: "conf?{}=1&x=2".format(u),
    "hash": lambda u: "conf#{}#".format(u),
    "plus": lambda u: "conf+{}+1".format(u),
    "percent": lambda u: "conf%{}%25%2F%zz".format(u),
    "safe-chars": lambda u: "conf:@$!()',~*&={}".format(u),
    "xml-url-specials": lambda u: 'conf;[]{{}}|^`"<>\\{}'.format(u),
    "non-ascii": lambda u: "conf-é-ß-漢字-😀-{}".format(u),
    "800-chars": lambda u: ("conf-long-{}-".format(u) + "x" * 800)[:800],
    "800-chars-non-ascii": lambda u: ("conf-long-{}-".format(u) + "é漢" * 400)[:800],
}

CASES = [(v, k) for v in ("v1", "v2") for k in KINDS]


def test_identifiers_are_valid():
    for k, f in KINDS.items():
        pid = f(uuid.uuid4().hex)
        assert 1 <= len(pid) <= 800 and not any(c.isspace() for c in pid), k
    assert len(KINDS["800-chars"]("u")) == 800
    assert len(KINDS["800-chars-non-ascii"]("u")) == 800


@pytest.fixture(scope="module", params=CASES, ids=["{}-{}".format(v, k) for v, k in CASES])
def obj(request, node, tokens):
    """The object under test: created once per (version, kind); the outcome of
    create is kept, and test_create reports it."""
    version, kind = request.param
    mn = d1.MN(node, version, token=tokens.token(d1.CN_SUBJECT))
    pid = KINDS[kind](uuid.uuid4().hex[:10])
    data = d1.payload(kind)
    state = {"mn": mn, "pid": pid, "data": data, "error": None}
    try:
        state["answer"] = d1.value(mn.create(pid, io.BytesIO(data), mn.sysmeta(pid, data)))
    except Exception as e:  # reported by test_create
        state["error"] = e
    return state


def created(obj):
    if obj["error"] is not None:
        pytest.fail("create failed, see test_create: {}".format(obj["error"]), pytrace=False)
    return obj["mn"], obj["pid"], obj["data"]


def test_create(obj):
    if obj["error"] is not None:
        raise obj["error"]
    assert obj["answer"] == obj["pid"]


def test_get(obj):
    mn, pid, data = created(obj)
    assert mn.get(pid).content == data


def test_describe(obj):
    mn, pid, data = created(obj)
    h = mn.describe(pid)
    assert h.get("Content-Length") == str(len(data))
    algorithm = d1.CHECKSUM_ALGORITHM[0]  # the algorithm create was given
    assert h.get("DataONE-Checksum", "").lower() == algorithm.lower() + "," + d1.digest(data, algorithm)


def test_get_system_metadata(obj):
    mn, pid, data = created(obj)
    sm = mn.getSystemMetadata(pid)
    assert d1.value(sm.identifier) == pid
    assert int(sm.size) == len(data)


def test_get_checksum(obj):
    mn, pid, data = created(obj)
    assert mn.getChecksum(pid, "MD5").value().lower() == d1.digest(data, "MD5")


def test_list_objects_identifier(obj):
    mn, pid, _ = created(obj)
    ol = mn.listObjects(identifier=pid)
    assert int(ol.total) == 1 and [d1.value(o.identifier) for o in ol.objectInfo] == [pid]


def test_get_log_records_id_filter(obj):
    mn, pid, _ = created(obj)
    log = mn.getLogRecords(pidFilter=pid, event="create")
    assert [d1.value(e.identifier) for e in log.logEntry] == [pid]


def test_delete(obj):
    mn, pid, _ = created(obj)
    assert d1.value(mn.delete(pid)) == pid
    with pytest.raises(d1.DataONEException) as e:
        mn.get(pid)
    d1.check_error(e.value, "NotFound")
    assert int(mn.listObjects(identifier=pid).total) == 0
