"""MNCore.getLogRecords on a node of its own: the events the suite caused, each
filter (fromDate, toDate, event, v1 pidFilter / v2 idFilter) and paging."""

import pytest

import d1

N = 4


@pytest.fixture(scope="module")
def history(fresh_node):
    """N objects created one after another; the first is read once (get)."""
    mn = d1.MN(fresh_node, "v2")
    created = []
    for i in range(N):
        # Labels no pid is a prefix of another: a v1 pidFilter may be a prefix match.
        pid, data, _ = mn.create_object("log{}x".format(chr(ord("a") + i)))
        created.append(pid)
        d1.tick()
    mn.get(created[0])
    return {"created": created, "node_id": d1.value(mn.getCapabilities().identifier)}


@pytest.fixture
def lmn(fresh_node, version):
    return d1.MN(fresh_node, version)


def entries(log):
    return list(log.logEntry)


def check_slice(log, start, count, total=None):
    assert int(log.start) == start, "start {} (expected {})".format(log.start, start)
    assert int(log.count) == count == len(log.logEntry), "count {} with {} entries (expected {})".format(
        log.count, len(log.logEntry), count
    )
    if total is not None:
        assert int(log.total) == total, "total {} (expected {})".format(log.total, total)


def test_log_create_events(lmn, history):
    log = lmn.getLogRecords(event="create")
    want_ns = d1.NS_V2 if lmn.version == "v2" else d1.NS_V1
    assert d1.ns_of(log) == want_ns
    check_slice(log, 0, N, N)
    es = entries(log)
    assert [d1.value(e.identifier) for e in es] == history["created"], "one create per object, in order"
    ids = set()
    last = None
    for e in es:
        assert str(e.event) == "create"
        assert d1.value(e.nodeIdentifier) == history["node_id"]
        assert e.entryId and e.entryId not in ids
        ids.add(e.entryId)
        logged = d1.utc(e.dateLogged)
        if last is not None:
            assert logged >= last, "log not in ascending dateLogged order"
        last = logged


def test_log_read_event(lmn, history):
    pid = history["created"][0]
    log = lmn.getLogRecords(event="read", pidFilter=pid)
    assert int(log.total) >= 1 and len(log.logEntry) >= 1, "get must log a read event"
    for e in entries(log):
        assert d1.value(e.identifier) == pid and str(e.event) == "read"


def test_log_id_filter(lmn, history):
    """v1 sends pidFilter, v2 idFilter (the client picks by version)."""
    pid = history["created"][1]
    log = lmn.getLogRecords(pidFilter=pid)
    es = entries(log)
    assert es and all(d1.value(e.identifier) == pid for e in es)
    assert [str(e.event) for e in es].count("create") == 1


def test_log_dates(lmn, history):
    creates = entries(lmn.getLogRecords(event="create"))
    k = 2
    t = d1.utc(creates[k].dateLogged)
    after = lmn.getLogRecords(event="create", fromDate=t)
    check_slice(after, 0, N - k, N - k)
    assert [d1.value(e.identifier) for e in after.logEntry] == history["created"][k:]
    before = lmn.getLogRecords(event="create", toDate=t)
    check_slice(before, 0, k, k)
    assert [d1.value(e.identifier) for e in before.logEntry] == history["created"][:k]


def test_log_paging(lmn, history):
    whole = lmn.getLogRecords()
    total = int(whole.total)
    assert total >= N + 1, "at least {} creates and one read".format(N)
    check_slice(whole, 0, total, total)
    seen = []
    for start in range(0, total, 2):
        page = lmn.getLogRecords(start=start, count=2)
        check_slice(page, start, min(2, total - start), total)
        seen += [e.entryId for e in page.logEntry]
    assert seen == [e.entryId for e in whole.logEntry], "pages do not add up to the whole log"


def test_log_count_zero_gives_total(lmn, history):
    log = lmn.getLogRecords(event="create", count=0)
    check_slice(log, 0, 0, N)
