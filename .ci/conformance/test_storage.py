"""MNStorage (create, update, archive, delete, updateSystemMetadata,
generateIdentifier) and the calls coordinating nodes make on a member node
(systemMetadataChanged, synchronizationFailed)."""

import datetime
import io

import d1_common.types.exceptions
import pytest

import d1

# ---------------------------------------------------------------------------
# create
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-1", "SHA-256"])
def test_create(mn, algorithm):
    pid, data, _ = mn.create_object("create", algorithm=algorithm)
    sm = mn.getSystemMetadata(pid)
    assert sm.checksum.algorithm == algorithm
    assert sm.checksum.value().lower() == d1.digest(data, algorithm)
    assert mn.get(pid).content == data


def test_create_checksum_in_upper_case_hex(mn):
    """Hex digests compare case-insensitively (API.md §10 rule 10)."""
    data = d1.payload("upper")
    pid = mn.pid("upper")
    sm = mn.sysmeta(pid, data, algorithm="MD5", checksum=d1.digest(data, "MD5").upper())
    assert d1.value(mn.create(pid, io.BytesIO(data), sm)) == pid
    assert mn.get(pid).content == data


def _gone(mn, pid):
    with pytest.raises(d1.DataONEException) as e:
        mn.getSystemMetadata(pid)
    d1.check_error(e.value, "NotFound")


def test_create_pid_differs_from_sysmeta_identifier(mn):
    data = d1.payload("mismatch")
    pid, other = mn.pid("mismatch"), mn.pid("other")
    with pytest.raises(d1.DataONEException) as e:
        mn.create(pid, io.BytesIO(data), mn.sysmeta(other, data))
    d1.check_error(e.value, "InvalidSystemMetadata", "InvalidRequest")
    _gone(mn, pid)
    _gone(mn, other)


def test_create_wrong_size(mn):
    data = d1.payload("size")
    pid = mn.pid("size")
    with pytest.raises(d1.DataONEException) as e:
        mn.create(pid, io.BytesIO(data), mn.sysmeta(pid, data, size=len(data) + 1))
    d1.check_error(e.value, "InvalidSystemMetadata")
    _gone(mn, pid)


def test_create_with_obsoletes(mn):
    """create must not carry obsoletes (API.md §10 rule 2)."""
    old, _, _ = mn.create_object("obsoletes-target")
    data = d1.payload("obs")
    pid = mn.pid("obs")
    with pytest.raises(d1.DataONEException) as e:
        mn.create(pid, io.BytesIO(data), mn.sysmeta(pid, data, obsoletes=old))
    d1.check_error(e.value, "InvalidSystemMetadata", "InvalidRequest")
    _gone(mn, pid)
    assert mn.getSystemMetadata(old).obsoletedBy is None


def test_create_unknown_format(mn):
    data = d1.payload("fmt")
    pid = mn.pid("fmt")
    with pytest.raises(d1.DataONEException) as e:
        mn.create(pid, io.BytesIO(data), mn.sysmeta(pid, data, format_id="no/such-format-" + pid))
    d1.check_error(e.value, "UnsupportedType", "InvalidSystemMetadata", "InvalidRequest")
    _gone(mn, pid)


def test_create_sid_equal_to_pid(mn2):
    data = d1.payload("sidpid")
    pid = mn2.pid("sidpid")
    with pytest.raises(d1.DataONEException) as e:
        mn2.create(pid, io.BytesIO(data), mn2.sysmeta(pid, data, sid=pid))
    d1.check_error(e.value, "InvalidSystemMetadata", "IdentifierNotUnique", "InvalidRequest")


def test_create_sid_in_use(mn2):
    sid = mn2.pid("sidused")
    mn2.create_object("sidused1", sid=sid)
    data = d1.payload("sidused2")
    pid = mn2.pid("sidused2")
    with pytest.raises(d1.DataONEException) as e:
        mn2.create(pid, io.BytesIO(data), mn2.sysmeta(pid, data, sid=sid))
    d1.check_error(e.value, "IdentifierNotUnique")
    _gone(mn2, pid)


# ---------------------------------------------------------------------------
# update
# ---------------------------------------------------------------------------


def test_update(mn):
    old, data1, _ = mn.create_object("upd-old")
    before = mn.getSystemMetadata(old)
    d1.tick()
    new, data2 = mn.pid("upd-new"), d1.payload("upd-new")
    # No obsoletes in the new sysmeta: the node sets it (API.md §10 rule 5).
    ident = mn.update(old, io.BytesIO(data2), new, mn.sysmeta(new, data2, format_id="text/plain"))
    assert d1.value(ident) == new

    sm_old, sm_new = mn.getSystemMetadata(old), mn.getSystemMetadata(new)
    assert d1.value(sm_old.obsoletedBy) == new
    assert d1.value(sm_new.obsoletes) == old
    assert sm_new.obsoletedBy is None
    assert str(sm_new.formatId) == "text/plain"
    assert sm_new.checksum.value().lower() == d1.digest(data2, d1.CHECKSUM_ALGORITHM[0])
    old_modified = d1.utc(sm_old.dateSysMetadataModified)
    assert old_modified > d1.utc(before.dateSysMetadataModified), "the obsoleted object's dateSysMetadataModified must move"
    # Both bytes stay readable.
    assert mn.get(old).content == data1
    assert mn.get(new).content == data2
    # Both show up to a harvester that lists what changed since before the update.
    since = d1.utc(before.dateSysMetadataModified) + datetime.timedelta(milliseconds=1)
    listed = [d1.value(o.identifier) for o in mn.listObjects(fromDate=since, count=1000).objectInfo]
    assert old in listed and new in listed, "listObjects(fromDate) after update lists {}".format(listed)


def test_update_with_explicit_obsoletes(mn):
    old, _, _ = mn.create_object("upd2-old")
    new, data = mn.pid("upd2-new"), d1.payload("upd2")
    mn.update(old, io.BytesIO(data), new, mn.sysmeta(new, data, obsoletes=old))
    assert d1.value(mn.getSystemMetadata(old).obsoletedBy) == new


def test_update_obsoletes_mismatch(mn):
    old, _, _ = mn.create_object("upd3-old")
    other, _, _ = mn.create_object("upd3-other")
    new, data = mn.pid("upd3-new"), d1.payload("upd3")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(old, io.BytesIO(data), new, mn.sysmeta(new, data, obsoletes=other))
    d1.check_error(e.value, "InvalidSystemMetadata", "InvalidRequest")
    _gone(mn, new)


def test_update_keeps_the_series(mn2):
    sid = mn2.pid("updsid")
    old, _, _ = mn2.create_object("updsid-old", sid=sid)
    new, data = mn2.pid("updsid-new"), d1.payload("updsid")
    mn2.update(old, io.BytesIO(data), new, mn2.sysmeta(new, data, sid=sid))
    assert d1.value(mn2.getSystemMetadata(new).seriesId) == sid
    assert mn2.get(sid).content == data


def test_update_by_sid(mn2):
    """v2 update of a SID acts on the head of the series (NOTES.md §1)."""
    sid = mn2.pid("updbysid")
    pid1, _, _ = mn2.create_object("updbysid-1", sid=sid)
    pid2, data = mn2.pid("updbysid-2"), d1.payload("updbysid-2")
    assert d1.value(mn2.update(sid, io.BytesIO(data), pid2, mn2.sysmeta(pid2, data, sid=sid))) == pid2
    assert d1.value(mn2.getSystemMetadata(pid1).obsoletedBy) == pid2
    assert d1.value(mn2.getSystemMetadata(pid2).obsoletes) == pid1
    assert mn2.get(sid).content == data


def test_update_of_missing_object(mn):
    new, data = mn.pid("upd-missing-new"), d1.payload("x")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(mn.pid("no-such-object"), io.BytesIO(data), new, mn.sysmeta(new, data))
    d1.check_error(e.value, "NotFound")
    _gone(mn, new)


def test_update_of_obsoleted_object(mn):
    """Chains do not branch (API.md §10 rule 5)."""
    old, _, _ = mn.create_object("branch-old")
    new1, d_1 = mn.pid("branch-1"), d1.payload("b1")
    mn.update(old, io.BytesIO(d_1), new1, mn.sysmeta(new1, d_1))
    new2, d_2 = mn.pid("branch-2"), d1.payload("b2")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(old, io.BytesIO(d_2), new2, mn.sysmeta(new2, d_2))
    d1.check_error(e.value, "InvalidRequest", "InvalidSystemMetadata")
    _gone(mn, new2)
    assert d1.value(mn.getSystemMetadata(old).obsoletedBy) == new1


def test_update_of_archived_object(mn):
    old, _, _ = mn.create_object("arch-upd")
    mn.archive(old)
    new, data = mn.pid("arch-upd-new"), d1.payload("x")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(old, io.BytesIO(data), new, mn.sysmeta(new, data))
    d1.check_error(e.value, "InvalidRequest")
    _gone(mn, new)


def test_update_new_pid_taken(mn):
    old, _, _ = mn.create_object("taken-old")
    taken, _, _ = mn.create_object("taken")
    data = d1.payload("taken2")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(old, io.BytesIO(data), taken, mn.sysmeta(taken, data))
    d1.check_error(e.value, "IdentifierNotUnique")
    assert mn.getSystemMetadata(old).obsoletedBy is None


def test_update_wrong_checksum(mn):
    old, _, _ = mn.create_object("upd-cks")
    new, data = mn.pid("upd-cks-new"), d1.payload("x")
    with pytest.raises(d1.DataONEException) as e:
        mn.update(old, io.BytesIO(data), new, mn.sysmeta(new, data, checksum="0" * 64))
    d1.check_error(e.value, "InvalidSystemMetadata")
    _gone(mn, new)
    assert mn.getSystemMetadata(old).obsoletedBy is None


# ---------------------------------------------------------------------------
# archive
# ---------------------------------------------------------------------------


def test_archive(mn):
    pid, data, _ = mn.create_object("archive")
    before = mn.getSystemMetadata(pid)
    d1.tick()
    assert d1.value(mn.archive(pid)) == pid
    sm = mn.getSystemMetadata(pid)
    assert sm.archived
    assert d1.utc(sm.dateSysMetadataModified) > d1.utc(before.dateSysMetadataModified)
    # Archived bytes stay readable.
    assert mn.get(pid).content == data


def test_archive_twice(mn):
    """Archiving an archived object: idempotent success, or InvalidRequest (GMN)."""
    pid, _, _ = mn.create_object("archive2")
    mn.archive(pid)
    try:
        assert d1.value(mn.archive(pid)) == pid
    except d1.DataONEException as e:
        d1.check_error(e, "InvalidRequest")
    assert mn.getSystemMetadata(pid).archived


def test_archive_by_sid(mn2):
    sid = mn2.pid("archsid")
    pid, _, _ = mn2.create_object("archsid", sid=sid)
    assert d1.value(mn2.archive(sid)) == pid
    assert mn2.getSystemMetadata(pid).archived


# ---------------------------------------------------------------------------
# delete: trusted callers only (tmn has the coordinating node's credentials)
# ---------------------------------------------------------------------------


def test_delete(tmn):
    pid, _, _ = tmn.create_object("delete")
    other, other_data, _ = tmn.create_object("delete-keep")
    assert d1.value(tmn.delete(pid)) == pid
    for call in (tmn.get, tmn.getSystemMetadata, tmn.describe):
        with pytest.raises(d1.DataONEException) as e:
            call(pid)
        d1.check_error(e.value, "NotFound")
    ol = tmn.listObjects(identifier=pid)
    assert int(ol.total) == 0 and len(ol.objectInfo) == 0
    # Nothing else went with it.
    assert tmn.get(other).content == other_data


def test_delete_by_sid(node, tokens):
    """v2 delete of a SID deletes the head of the series and answers its PID."""
    tmn = d1.MN(node, "v2", token=tokens.token(d1.CN_SUBJECT))
    sid = tmn.pid("delsid")
    pid, _, _ = tmn.create_object("delsid", sid=sid)
    assert d1.value(tmn.delete(sid)) == pid
    with pytest.raises(d1.DataONEException) as e:
        tmn.getSystemMetadata(pid)
    d1.check_error(e.value, "NotFound")


def test_delete_by_anonymous_caller_refused(mn):
    """Anonymous callers are not trusted: delete is refused."""
    pid, data, _ = mn.create_object("nodelete")
    with pytest.raises(d1.DataONEException) as e:
        mn.delete(pid)
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")
    assert mn.get(pid).content == data


# ---------------------------------------------------------------------------
# updateSystemMetadata (v2 only)
# ---------------------------------------------------------------------------


def test_update_system_metadata(mn2):
    pid, data, _ = mn2.create_object("usm", file_name="before.bin")
    sm = mn2.getSystemMetadata(pid)
    old_modified = d1.utc(sm.dateSysMetadataModified)
    t = d1.BINDINGS["v2"]
    sm.accessPolicy = t.AccessPolicy(
        allow=[
            t.AccessRule(subject=["public"], permission=["read"]),
            t.AccessRule(subject=[d1.OTHER], permission=["write"]),
        ]
    )
    sm.fileName = "after.bin"
    sm.mediaType = t.MediaType(name="application/x-conformance")
    d1.tick()
    assert mn2.updateSystemMetadata(pid, sm) is True

    got = mn2.getSystemMetadata(pid)
    assert d1.access_rules(got) == d1.access_rules(sm)
    assert str(got.fileName) == "after.bin"
    assert got.mediaType is not None and got.mediaType.name == "application/x-conformance"
    assert d1.utc(got.dateSysMetadataModified) > old_modified
    assert int(got.serialVersion) > int(sm.serialVersion), "serialVersion must be incremented (NOTES.md §1)"
    assert mn2.get(pid).content == data


def test_update_system_metadata_stale(mn2):
    """Optimistic locking on dateSysMetadataModified (API.md §10 rule 9)."""
    pid, _, _ = mn2.create_object("usm-stale")
    sm = mn2.getSystemMetadata(pid)
    sm.fileName = "first.bin"
    d1.tick()
    mn2.updateSystemMetadata(pid, sm)  # moves dateSysMetadataModified on
    sm.fileName = "second.bin"  # still carries the old dateSysMetadataModified
    with pytest.raises(d1.DataONEException) as e:
        mn2.updateSystemMetadata(pid, sm)
    d1.check_error(e.value, "InvalidRequest")
    assert str(mn2.getSystemMetadata(pid).fileName) == "first.bin"


def test_update_system_metadata_of_missing_object(mn2):
    pid, data = mn2.pid("usm-missing"), d1.payload("x")
    sm = mn2.sysmeta(pid, data)
    sm.dateSysMetadataModified = d1.now()
    with pytest.raises(d1.DataONEException) as e:
        mn2.updateSystemMetadata(pid, sm)
    d1.check_error(e.value, "NotFound", "InvalidRequest")


# ---------------------------------------------------------------------------
# systemMetadataChanged and synchronizationFailed: coordinating node calls
# ---------------------------------------------------------------------------


def test_system_metadata_changed(tmn):
    pid, _, _ = tmn.create_object("smc")
    sm = tmn.getSystemMetadata(pid)
    assert tmn.systemMetadataChanged(pid, int(sm.serialVersion) + 1, d1.now()) is True
    # The node's copy stays readable.
    assert d1.value(tmn.getSystemMetadata(pid).identifier) == pid


def test_system_metadata_changed_by_anonymous_caller_refused(mn):
    pid, _, _ = mn.create_object("smc-anon")
    with pytest.raises(d1.DataONEException) as e:
        mn.systemMetadataChanged(pid, 2, d1.now())
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")


def _sync_failed(pid):
    return d1_common.types.exceptions.SynchronizationFailed(
        "0", "conformance: the CN could not harvest {}".format(pid), identifier=pid
    )


def test_synchronization_failed(tmn):
    pid, _, _ = tmn.create_object("syncfail")
    assert tmn.synchronizationFailed(_sync_failed(pid)) is True


def test_synchronization_failed_by_anonymous_caller_refused(mn):
    pid, _, _ = mn.create_object("syncfail-anon")
    with pytest.raises(d1.DataONEException) as e:
        mn.synchronizationFailed(_sync_failed(pid))
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")


# ---------------------------------------------------------------------------
# generateIdentifier
# ---------------------------------------------------------------------------


def test_generate_identifier(mn):
    a = d1.value(mn.generateIdentifier("UUID"))
    b = d1.value(mn.generateIdentifier("UUID", "conf-frag-"))
    assert a and b and a != b
    # A generated identifier is usable for create.
    pid, _, _ = mn.create_object("gen", pid=b)
    assert d1.value(mn.getSystemMetadata(b).identifier) == b


def test_generate_identifier_unknown_scheme(mn):
    with pytest.raises(d1.DataONEException) as e:
        mn.generateIdentifier("NO-SUCH-SCHEME")
    d1.check_error(e.value, "InvalidRequest", "NotImplemented")
