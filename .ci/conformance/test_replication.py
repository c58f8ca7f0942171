"""MNReplication (getReplica, replicate) and MNPackage.getPackage.

getReplica and replicate are for trusted callers (a replicating member node, the
coordinating node): tmn has the coordinating node's credentials (conftest.py)."""

import zipfile

import bagit
import d1_common.resource_map
import pytest

import d1


def test_get_replica(tmn):
    pid, data, _ = tmn.create_object("replica")
    resp = tmn.getReplica(pid)
    assert resp.content == data
    # Logged as a replicate event, not a read (API.md §3.1).
    events = [str(e.event) for e in tmn.getLogRecords(pidFilter=pid).logEntry]
    assert "replicate" in events, events


def test_get_replica_by_anonymous_caller_refused(mn):
    pid, _, _ = mn.create_object("replica-anon")
    with pytest.raises(d1.DataONEException) as e:
        mn.getReplica(pid)
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")


def test_replicate(tmn):
    """A coordinating node asks this node to hold a replica of another node's
    object; the node accepts the job (the copy itself is asynchronous)."""
    pid, data = tmn.pid("replicate"), d1.payload("replicate")
    sm = tmn.sysmeta(pid, data, replication_allowed=True)
    sm.authoritativeMemberNode = "urn:node:conformanceSource"
    sm.originMemberNode = "urn:node:conformanceSource"
    sm.dateUploaded = d1.now()
    sm.dateSysMetadataModified = d1.now()
    assert tmn.replicate(sm, "urn:node:conformanceSource") is True


def _package_client(node, version):
    # getPackage arrived in API 1.2: on /v1 the 1.2 client has it.
    return d1.mn_client_1_2(node) if version == "v1" else d1.MN(node, "v2")


def test_get_package(node, version, tmp_path):
    mn = _package_client(node, version)
    scimeta, _, _ = mn.create_object("pkg-meta", data=b"a,b\n1,2\n", format_id="text/csv")
    data_pid, data, _ = mn.create_object("pkg-data")
    ore_pid = mn.pid("pkg-ore")
    ore = d1_common.resource_map.createSimpleResourceMap(ore_pid, scimeta, [data_pid]).serialize_to_transport()
    mn.create_object("pkg-ore", pid=ore_pid, data=ore, format_id="http://www.openarchives.org/ore/terms")

    resp = mn.getPackage(ore_pid)
    zpath = tmp_path / "package.zip"
    zpath.write_bytes(resp.content)
    assert zipfile.is_zipfile(zpath), "getPackage did not answer a zip ({} bytes)".format(len(resp.content))
    with zipfile.ZipFile(zpath) as z:
        z.extractall(tmp_path / "x")
    # The bag is the directory that holds bagit.txt.
    bag_dirs = [p.parent for p in (tmp_path / "x").rglob("bagit.txt")]
    assert len(bag_dirs) == 1, "expected one bag, found bagit.txt in {}".format(bag_dirs)
    bag = bagit.Bag(str(bag_dirs[0]))
    bag.validate()
    payload = {(bag_dirs[0] / f).read_bytes() for f in bag.payload_files()}
    assert data in payload, "the data object's bytes are not in the bag"


def test_get_package_unsupported_type(node, version):
    """An unsupported package type is InvalidRequest (NOTES.md §1)."""
    mn = _package_client(node, version)
    pid, _, _ = mn.create_object("pkg-bad")
    with pytest.raises(d1.DataONEException) as e:
        mn.getPackage(pid, packageType="application/x-no-such-package")
    d1.check_error(e.value, "InvalidRequest")
