"""Coordinating node: what the CN role serves so far, driven by the official CN
clients (d1_client.cnclient.CoordinatingNodeClient on /v1, CoordinatingNodeClient_2_0
on /v2). The CN issue grows this module."""

import pytest

import d1

# The tests below that carry it create objects through the MN role and then read
# or change them through the CN role, so they need both roles over one catalog
# (backends.Backend.cn_sees_mn_objects). On the dataone backend the front's CN
# role serves the front's own catalog while the mapping writes to the upstream:
# there conftest.py deselects them. The other tests of this module (ping, node
# document, formats, checksum algorithms, listNodes, reservations and generated
# identifiers of identifiers no MN holds) run on every backend.
MN_OBJECTS = pytest.mark.cn_sees_mn_objects


@pytest.fixture
def cn(node, version):
    return d1.cn_client(node.cn_base, version)


def test_cn_ping(cn):
    assert cn.ping() is True


def test_cn_get_capabilities(cn, node, version):
    doc = cn._read_dataone_type_response(cn.GET([""]), "Node")
    assert d1.ns_of(doc) == (d1.NS_V2 if version == "v2" else d1.NS_V1)
    assert doc.type == "cn"
    assert str(doc.baseURL).rstrip("/") == node.cn_base


def test_cn_list_formats(cn):
    fl = cn.listFormats()
    assert int(fl.count) == len(fl.objectFormat) == int(fl.total) > 100
    ids = {str(f.formatId) for f in fl.objectFormat}
    assert {"text/plain", "text/csv", "application/octet-stream", "http://www.openarchives.org/ore/terms"} <= ids


def test_cn_get_format(cn):
    f = cn.getFormat("eml://ecoinformatics.org/eml-2.1.1")
    assert str(f.formatId) == "eml://ecoinformatics.org/eml-2.1.1"
    assert str(f.formatType) == "METADATA"


def test_cn_get_format_missing(cn):
    with pytest.raises(d1.DataONEException) as e:
        cn.getFormat("no/such-format")
    d1.check_error(e.value, "NotFound")


def test_cn_list_checksum_algorithms(cn):
    algos = [str(a) for a in cn.listChecksumAlgorithms().algorithm]
    assert "MD5" in algos and "SHA-1" in algos, algos


# ---------------------------------------------------------------------------
# The CN read path over the node's catalog (objects created on the MN)
# ---------------------------------------------------------------------------


@pytest.fixture
def mn_object(node, version):
    return d1.MN(node, version).create_object("cnread")


@MN_OBJECTS
def test_cn_get(cn, mn_object):
    pid, data, _ = mn_object
    assert cn.get(pid).content == data


@MN_OBJECTS
def test_cn_get_system_metadata(cn, mn_object):
    pid, data, _ = mn_object
    sm = cn.getSystemMetadata(pid)
    assert d1.value(sm.identifier) == pid and int(sm.size) == len(data)


@MN_OBJECTS
def test_cn_describe(cn, mn_object):
    pid, data, _ = mn_object
    assert cn.describe(pid).get("Content-Length") == str(len(data))


@MN_OBJECTS
def test_cn_get_checksum(cn, mn_object):
    pid, data, _ = mn_object
    c = cn.getChecksum(pid)
    assert c.value().lower() == d1.digest(data, c.algorithm)


@MN_OBJECTS
def test_cn_list_objects(cn, mn_object):
    pid, _, _ = mn_object
    ol = cn.listObjects(identifier=pid)
    assert int(ol.total) == 1 and d1.value(ol.objectInfo[0].identifier) == pid


@MN_OBJECTS
def test_cn_resolve(cn, mn_object, node):
    """The production CN answers 303 with Location = the first replica's URL; the
    client insists on the 303 (NOTES.md §1)."""
    pid, _, _ = mn_object
    locations = cn.resolve(pid)
    urls = [str(o.url) for o in locations.objectLocation]
    assert urls and urls[0].startswith(node.mn_base), urls


# ---------------------------------------------------------------------------
# CNCore, CNAuthorization, CNReplication: the rest of what the CN client offers
# ---------------------------------------------------------------------------


@pytest.fixture
def cn_user(node, version, tokens):
    return d1.cn_client(node.cn_base, version, tokens.token(d1.USER))


@pytest.fixture
def cn_trusted(node, version, tokens):
    """The coordinating node's own subject (node.cnSubjects): a trusted caller."""
    return d1.cn_client(node.cn_base, version, tokens.token(d1.CN_SUBJECT))


def _sv(cn, pid):
    return int(cn.getSystemMetadata(pid).serialVersion)


def test_cn_list_nodes_not_implemented(cn):
    """CNRegister/listNodes are NotImplemented by design (the seed)."""
    with pytest.raises(d1.DataONEException) as e:
        cn.listNodes()
    d1.check_error(e.value, "NotImplemented")


def test_cn_reserve_identifier(cn_user, node, version, tokens):
    """The client POSTs /reserve/{pid} (NOTES.md §2: the spec says POST /reserve)
    and asks GET /reserve/{pid}/{subject}."""
    pid = d1.new_pid("reserved", version)
    assert d1.value(cn_user.reserveIdentifier(pid)) == pid
    assert cn_user.hasReservation(pid, d1.USER) is True
    other = d1.cn_client(node.cn_base, version, tokens.token(d1.OTHER))
    with pytest.raises(d1.DataONEException) as e:
        other.reserveIdentifier(pid)
    d1.check_error(e.value, "IdentifierNotUnique")
    try:
        assert other.hasReservation(pid, d1.OTHER) is False
    except d1.DataONEException as e:
        d1.check_error(e, "NotAuthorized")
    assert cn_user.hasReservation(d1.new_pid("unreserved", version), d1.USER) is False


@MN_OBJECTS
def test_cn_reserve_identifier_in_use(cn_user, mn_object):
    pid, _, _ = mn_object
    with pytest.raises(d1.DataONEException) as e:
        cn_user.reserveIdentifier(pid)
    d1.check_error(e.value, "IdentifierNotUnique")


def test_cn_generate_identifier(cn_user, cn):
    a = d1.value(cn_user.generateIdentifier("UUID"))
    b = d1.value(cn_user.generateIdentifier("UUID", "conf-"))
    assert a and b and a != b
    with pytest.raises(d1.DataONEException) as e:
        cn.generateIdentifier("UUID")
    d1.check_error(e.value, "InvalidToken", "NotAuthorized")


@MN_OBJECTS
def test_cn_list_objects_node_filter(cn, mn_object, node):
    pid, _, _ = mn_object
    node_id = d1.value(d1.MN(node, "v2").getCapabilities().identifier)
    assert int(cn.listObjects(identifier=pid, nodeId=node_id).total) == 1
    assert int(cn.listObjects(identifier=pid, nodeId="urn:node:elsewhere").total) == 0


@MN_OBJECTS
def test_cn_get_log_records(cn, mn_object):
    pid, _, _ = mn_object
    log = cn.getLogRecords(pidFilter=pid, event="create")
    assert [d1.value(e.identifier) for e in log.logEntry] == [pid]


@MN_OBJECTS
def test_cn_is_authorized(cn, node, version):
    mn = d1.MN(node, version)
    own, _, _ = mn.create_object("cn-isauth")
    foreign, _, _ = mn.create_object("cn-isauth-f", rights_holder=d1.OTHER)
    assert cn.isAuthorized(own, "changePermission") is True
    assert cn.isAuthorized(foreign, "read") is True
    assert cn.isAuthorized(foreign, "write") is False


@MN_OBJECTS
def test_cn_set_rights_holder(cn, mn_object):
    pid, _, _ = mn_object
    sv = _sv(cn, pid)
    assert cn.setRightsHolder(pid, d1.USER, sv) is True
    sm = cn.getSystemMetadata(pid)
    assert d1.value(sm.rightsHolder) == d1.USER
    assert int(sm.serialVersion) == sv + 1
    # public no longer holds changePermission on it.
    with pytest.raises(d1.DataONEException) as e:
        cn.setRightsHolder(pid, "public", sv + 1)
    d1.check_error(e.value, "InvalidToken", "NotAuthorized")


@MN_OBJECTS
def test_cn_set_access_policy(cn, mn_object):
    pid, _, _ = mn_object
    sv = _sv(cn, pid)
    t1 = d1.BINDINGS["v1"]
    ap = t1.accessPolicy(allow=[t1.AccessRule(subject=["public"], permission=["read"]),
                                t1.AccessRule(subject=[d1.OTHER], permission=["write"])])
    with pytest.raises(d1.DataONEException) as e:
        cn.setAccessPolicy(pid, ap, sv + 3)
    d1.check_error(e.value, "VersionMismatch")
    assert cn.setAccessPolicy(pid, ap, sv) is True
    sm = cn.getSystemMetadata(pid)
    assert d1.access_rules(sm) == d1.access_rules(ap)
    assert int(sm.serialVersion) == sv + 1


@MN_OBJECTS
def test_cn_set_obsoleted_by(cn, node, version):
    mn = d1.MN(node, version)
    a, _, _ = mn.create_object("cn-obs-a")
    b, _, _ = mn.create_object("cn-obs-b")
    sv = _sv(cn, a)
    assert cn.setObsoletedBy(a, b, sv) is True
    sm = cn.getSystemMetadata(a)
    assert d1.value(sm.obsoletedBy) == b
    assert int(sm.serialVersion) == sv + 1


@MN_OBJECTS
def test_cn_set_replication_policy(cn, mn_object):
    pid, _, _ = mn_object
    sv = _sv(cn, pid)
    t1 = d1.BINDINGS["v1"]
    policy = t1.replicationPolicy(replicationAllowed=True, numberReplicas=2)
    assert cn.setReplicationPolicy(pid, policy, sv) is True
    sm = cn.getSystemMetadata(pid)
    assert sm.replicationPolicy.replicationAllowed and int(sm.replicationPolicy.numberReplicas) == 2
    assert int(sm.serialVersion) == sv + 1


@MN_OBJECTS
def test_cn_replica_metadata(cn_trusted, mn_object, node):
    """updateReplicationMetadata adds a replica entry, setReplicationStatus moves
    it on, deleteReplicationMetadata removes it; serialVersion counts each."""
    pid, _, _ = mn_object
    target = "urn:node:conformanceReplica"
    t1 = d1.BINDINGS["v1"]
    sv = _sv(cn_trusted, pid)
    replica = t1.replica(replicaMemberNode=target, replicationStatus="requested", replicaVerified=d1.now())
    assert cn_trusted.updateReplicationMetadata(pid, replica, sv) is True
    sm = cn_trusted.getSystemMetadata(pid)
    assert [(d1.value(r.replicaMemberNode), str(r.replicationStatus)) for r in sm.replica] == [(target, "requested")]
    assert cn_trusted.setReplicationStatus(pid, target, "completed") is True
    sm = cn_trusted.getSystemMetadata(pid)
    assert [str(r.replicationStatus) for r in sm.replica] == ["completed"]
    sv = int(sm.serialVersion)
    assert cn_trusted.deleteReplicationMetadata(pid, target, sv) is True
    sm = cn_trusted.getSystemMetadata(pid)
    assert len(sm.replica) == 0
    assert int(sm.serialVersion) == sv + 1


@MN_OBJECTS
def test_cn_replica_metadata_by_anonymous_caller_refused(cn, mn_object):
    pid, _, _ = mn_object
    t1 = d1.BINDINGS["v1"]
    replica = t1.replica(replicaMemberNode="urn:node:x", replicationStatus="requested", replicaVerified=d1.now())
    with pytest.raises(d1.DataONEException) as e:
        cn.updateReplicationMetadata(pid, replica, _sv(cn, pid))
    d1.check_error(e.value, "InvalidToken", "NotAuthorized")


@MN_OBJECTS
def test_cn_is_node_authorized(cn, mn_object):
    """A subject that is no registered node is not authorized to replicate."""
    pid, _, _ = mn_object
    assert cn.isNodeAuthorized("CN=not a node,DC=example,DC=org", pid) is False


@MN_OBJECTS
def test_cn_archive(cn, mn_object):
    pid, data, _ = mn_object
    assert d1.value(cn.archive(pid)) == pid
    assert cn.getSystemMetadata(pid).archived
    assert cn.get(pid).content == data


def _cn_delete(cn, pid):
    # The v2 CN client has delete; the v1 one does not, so on /v1 the same
    # request goes through the client's session (DELETE /v1/object/{pid}).
    if hasattr(cn, "delete"):
        return cn.delete(pid)
    return cn._read_dataone_type_response(cn.DELETE(["object", pid]), "Identifier")


@MN_OBJECTS
def test_cn_delete(cn_trusted, cn, mn_object):
    pid, _, _ = mn_object
    with pytest.raises(d1.DataONEException) as e:
        _cn_delete(cn, pid)
    d1.check_error(e.value, "InvalidToken", "NotAuthorized")
    assert d1.value(_cn_delete(cn_trusted, pid)) == pid
    with pytest.raises(d1.DataONEException) as e:
        cn.getSystemMetadata(pid)
    d1.check_error(e.value, "NotFound")


@MN_OBJECTS
def test_cn_update_system_metadata(node, tokens):
    cn = d1.cn_client(node.cn_base, "v2", tokens.token(d1.CN_SUBJECT))
    pid, _, _ = d1.MN(node, "v2").create_object("cn-usm")
    sm = cn.getSystemMetadata(pid)
    sm.fileName = "cn-updated.bin"
    d1.tick()
    assert cn.updateSystemMetadata(pid, sm) is True
    assert str(cn.getSystemMetadata(pid).fileName) == "cn-updated.bin"


@MN_OBJECTS
def test_cn_synchronize(node, tokens):
    cn = d1.cn_client(node.cn_base, "v2", tokens.token(d1.CN_SUBJECT))
    pid, _, _ = d1.MN(node, "v2").create_object("cn-sync")
    assert cn.synchronize(pid) is True
