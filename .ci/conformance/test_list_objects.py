"""MNRead.listObjects on a node of its own, so totals are exact: every filter
(fromDate, toDate, formatId, identifier, replicaStatus), paging with start/count,
and the ObjectInfo fields against the system metadata."""

import pytest

import d1

N_TEXT, N_CSV = 4, 3
N = N_TEXT + N_CSV


@pytest.fixture(scope="module")
def objects(fresh_node):
    """N objects created one after another (distinct timestamps), as
    [(pid, data, sysmeta as stored)], in creation order."""
    mn = d1.MN(fresh_node, "v2")
    out = []
    for i in range(N):
        fmt = "text/plain" if i < N_TEXT else "text/csv"
        algo = d1.ALGORITHMS[i % len(d1.ALGORITHMS)]  # those the backend accepts
        pid, data, _ = mn.create_object("list{}".format(i), format_id=fmt, algorithm=algo)
        out.append((pid, data, mn.getSystemMetadata(pid)))
        d1.tick()
    return out


@pytest.fixture
def lmn(fresh_node, version):
    return d1.MN(fresh_node, version)


def pids(ol):
    return [d1.value(o.identifier) for o in ol.objectInfo]


def check_slice(ol, start, count, total):
    assert int(ol.start) == start, "start {} (expected {})".format(ol.start, start)
    assert int(ol.count) == count, "count {} (expected {})".format(ol.count, count)
    assert len(ol.objectInfo) == count, "{} objectInfo for count {}".format(len(ol.objectInfo), ol.count)
    assert int(ol.total) == total, "total {} (expected {})".format(ol.total, total)


def test_list_all(lmn, objects):
    ol = lmn.listObjects()
    assert d1.ns_of(ol) == d1.NS_V1, "an ObjectList is in the v1 namespace on /v1 and /v2"
    check_slice(ol, 0, N, N)
    assert sorted(pids(ol)) == sorted(p for p, _, _ in objects)
    stored = {p: sm for p, _, sm in objects}
    last = None
    for o in ol.objectInfo:
        sm = stored[d1.value(o.identifier)]
        assert str(o.formatId) == str(sm.formatId)
        assert o.checksum.algorithm == sm.checksum.algorithm
        assert o.checksum.value().lower() == sm.checksum.value().lower()
        assert int(o.size) == int(sm.size)
        modified = d1.utc(o.dateSysMetadataModified)
        assert modified == d1.utc(sm.dateSysMetadataModified)
        if last is not None:
            assert modified >= last, "listObjects is not in ascending dateSysMetadataModified order"
        last = modified


def test_list_in_creation_order(lmn, objects):
    assert pids(lmn.listObjects()) == [p for p, _, _ in objects]


def test_list_paging(lmn, objects):
    seen = []
    for start in range(0, N, 3):
        ol = lmn.listObjects(start=start, count=3)
        check_slice(ol, start, min(3, N - start), N)
        seen += pids(ol)
    assert seen == pids(lmn.listObjects()), "pages do not add up to the whole list"


def test_list_count_zero_gives_total(lmn, objects):
    check_slice(lmn.listObjects(count=0), 0, 0, N)


def test_list_start_past_end(lmn, objects):
    """Past the end: an empty slice with the total, or InvalidRequest (NOTES.md §1)."""
    try:
        ol = lmn.listObjects(start=N + 5, count=10)
    except d1.DataONEException as e:
        d1.check_error(e, "InvalidRequest")
    else:
        check_slice(ol, N + 5, 0, N)


@pytest.mark.parametrize("fmt,n", [("text/plain", N_TEXT), ("text/csv", N_CSV), ("image/png", 0)])
def test_list_format_filter(lmn, objects, fmt, n):
    ol = lmn.listObjects(formatId=fmt)
    check_slice(ol, 0, n, n)
    assert pids(ol) == [p for p, _, sm in objects if str(sm.formatId) == fmt]


def test_list_identifier_filter(lmn, objects):
    pid = objects[2][0]
    ol = lmn.listObjects(identifier=pid)
    check_slice(ol, 0, 1, 1)
    assert pids(ol) == [pid]
    check_slice(lmn.listObjects(identifier=d1.new_pid("nosuch")), 0, 0, 0)


def test_list_from_date_is_inclusive(lmn, objects):
    k = 3
    ol = lmn.listObjects(fromDate=d1.utc(objects[k][2].dateSysMetadataModified))
    check_slice(ol, 0, N - k, N - k)
    assert pids(ol) == [p for p, _, _ in objects[k:]]


def test_list_to_date_is_exclusive(lmn, objects):
    k = 3
    ol = lmn.listObjects(toDate=d1.utc(objects[k][2].dateSysMetadataModified))
    check_slice(ol, 0, k, k)
    assert pids(ol) == [p for p, _, _ in objects[:k]]


def test_list_date_range_with_format_and_paging(lmn, objects):
    lo, hi = 1, 6  # objects[1:6]
    frm = d1.utc(objects[lo][2].dateSysMetadataModified)
    to = d1.utc(objects[hi][2].dateSysMetadataModified)
    want = [p for p, _, sm in objects[lo:hi] if str(sm.formatId) == "text/plain"]
    ol = lmn.listObjects(fromDate=frm, toDate=to, formatId="text/plain", start=1, count=1)
    check_slice(ol, 1, 1, len(want))
    assert pids(ol) == want[1:2]


@pytest.mark.parametrize("replica_status", [True, False])
def test_list_replica_status(lmn, objects, replica_status):
    """Every object here was created on this node, none is a replica: both
    replicaStatus=true and replicaStatus=false list them all."""
    ol = lmn.listObjects(replicaStatus=replica_status)
    check_slice(ol, 0, N, N)
