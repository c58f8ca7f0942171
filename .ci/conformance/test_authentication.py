"""Sessions and rights with real credentials: RS256 bearer tokens passed through
the official client's jwt_token, signed by the suite's key (trusted by the nodes,
see conftest.py) or by a key the nodes do not trust.

Expected answers (API.md §7, NOTES.md §1): a caller without a credential who
lacks a right gets InvalidToken or NotAuthorized; a credentialed caller who lacks
it gets NotAuthorized. An unusable token downgrades the caller to public."""

import io

import pytest

import d1


@pytest.fixture
def user(node, version, tokens):
    return d1.MN(node, version, token=tokens.token(d1.USER))


@pytest.fixture
def other(node, version, tokens):
    return d1.MN(node, version, token=tokens.token(d1.OTHER))


@pytest.fixture
def private(user):
    """An object of USER's, created with USER's token, with no access policy."""
    pid, data, _ = user.create_object("private", rights_holder=d1.USER, allow=None)
    return pid, data


def test_token_caller_is_the_submitter(user, private):
    pid, _ = private
    sm = user.getSystemMetadata(pid)
    assert d1.value(sm.submitter) == d1.USER, "submitter must be the caller, not what the sysmeta said"
    assert d1.value(sm.rightsHolder) == d1.USER


def test_owner_reads_private_object(user, private):
    pid, data = private
    assert user.get(pid).content == data
    assert user.describe(pid).get("Content-Length") == str(len(data))
    assert user.getChecksum(pid, "SHA-1").value().lower() == d1.digest(data, "SHA-1")
    for action in ("read", "write", "changePermission"):
        assert user.isAuthorized(pid, action) is True, action


def test_anonymous_caller_cannot_read_private_object(mn, private):
    pid, _ = private
    for call in (mn.get, mn.getSystemMetadata, mn.describe):
        with pytest.raises(d1.DataONEException) as e:
            call(pid)
        d1.check_error(e.value, "InvalidToken", "NotAuthorized")


def test_other_user_is_not_authorized(other, private):
    pid, _ = private
    for call in (other.get, other.getSystemMetadata, other.describe):
        with pytest.raises(d1.DataONEException) as e:
            call(pid)
        d1.check_error(e.value, "NotAuthorized")
    new, data = other.pid("other-upd"), d1.payload("x")
    with pytest.raises(d1.DataONEException) as e:
        other.update(pid, io.BytesIO(data), new, other.sysmeta(new, data))
    d1.check_error(e.value, "NotAuthorized")
    assert other.isAuthorized(pid, "read") is False


def test_access_policy_grants_other_user(user, other):
    pid, data, _ = user.create_object(
        "shared", rights_holder=d1.USER, allow=(((d1.OTHER,), ("read", "write")),)
    )
    assert other.get(pid).content == data
    assert other.isAuthorized(pid, "write") is True
    assert other.isAuthorized(pid, "changePermission") is False
    new, d2 = other.pid("shared-new"), d1.payload("shared-new")
    assert d1.value(other.update(pid, io.BytesIO(d2), new, other.sysmeta(new, d2))) == new
    # write does not include changePermission, which archive needs.
    with pytest.raises(d1.DataONEException) as e:
        other.archive(pid)
    d1.check_error(e.value, "NotAuthorized")


def test_authenticated_user_symbolic_subject(user, other, mn):
    pid, data, _ = user.create_object(
        "authn", rights_holder=d1.USER, allow=((("authenticatedUser",), ("read",)),)
    )
    assert other.get(pid).content == data
    with pytest.raises(d1.DataONEException) as e:
        mn.get(pid)
    d1.check_error(e.value, "InvalidToken", "NotAuthorized")


def test_owner_archives(user, private):
    pid, _ = private
    assert d1.value(user.archive(pid)) == pid
    assert user.getSystemMetadata(pid).archived


@pytest.mark.parametrize("kind", ["untrusted-key", "expired"])
def test_unusable_token_is_refused(node, version, tokens, private, kind):
    """A token signed by an unknown key, or expired, is never taken for no
    credential (the seed: an unusable credential yields InvalidToken): even
    public objects and listings answer InvalidToken, saying why; ping, which
    cannot raise it, ignores it; with no token at all the caller is public."""
    if kind == "expired":
        token = tokens.token(d1.USER, lifetime=60, age=7200)
        reason = "expired at"
    else:
        token = tokens.token(d1.USER, trusted=False)
        reason = "signature"
    bad = d1.MN(node, version, token=token)
    anonymous = d1.MN(node, version)
    public_pid, public_data, _ = anonymous.create_object("pub")
    pid, _ = private
    for call in (lambda: bad.get(public_pid), lambda: bad.get(pid), lambda: bad.listObjects(count=1)):
        with pytest.raises(d1.DataONEException) as e:
            call()
        d1.check_error(e.value, "InvalidToken")
        assert reason in (e.value.description or ""), e.value.description
    assert bad.ping() is True
    assert anonymous.get(public_pid).content == public_data


def test_list_objects_shows_what_the_caller_may_read(user, other, private):
    pid, _ = private
    ol = user.listObjects(identifier=pid)
    assert int(ol.total) == 1 and d1.value(ol.objectInfo[0].identifier) == pid
    ol = other.listObjects(identifier=pid)
    assert int(ol.total) == len(ol.objectInfo) == 0, "a private object listed to another user"


def test_log_records_show_what_the_caller_may_read(user, other, private):
    pid, _ = private
    log = user.getLogRecords(pidFilter=pid, event="create")
    assert [d1.value(e.identifier) for e in log.logEntry] == [pid]
    assert d1.value(log.logEntry[0].subject) == d1.USER
    log = other.getLogRecords(pidFilter=pid)
    assert int(log.total) == len(log.logEntry) == 0, "another user sees the private object's events"


def test_coordinating_node_is_trusted(tmn, private):
    """The CN subject (node.cnSubjects) holds every right on every object."""
    pid, data = private
    assert tmn.get(pid).content == data
    assert tmn.isAuthorized(pid, "changePermission") is True
    assert int(tmn.listObjects(identifier=pid).total) == 1


# ---------------------------------------------------------------------------
# node.submitters: by default only authenticated callers may create
# ---------------------------------------------------------------------------


def test_submitters(default_node, version, tokens):
    anon = d1.MN(default_node, version)
    data = d1.payload("anon")
    pid = anon.pid("anon")
    with pytest.raises(d1.DataONEException) as e:
        anon.create(pid, io.BytesIO(data), anon.sysmeta(pid, data))
    d1.check_error(e.value, "InvalidToken", "NotAuthorized")
    authed = d1.MN(default_node, version, token=tokens.token(d1.USER))
    pid2, data2, _ = authed.create_object("authed", rights_holder=d1.USER)
    assert authed.get(pid2).content == data2
