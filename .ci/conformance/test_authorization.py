"""MNAuthorization: isAuthorized and setAccessPolicy (PUT /accessRules/{pid}).

The MN client of d1_client has no setAccessPolicy; its only wrapper of
PUT /accessRules/{pid} is the CN client's, so that is what drives the MN here.
"""

import pytest

import d1
import d1_common.types.dataoneTypes_v1 as t1



def test_is_authorized_rights_holder(mn):
    pid, _, _ = mn.create_object("isauth-own")
    for action in ("read", "write", "changePermission"):
        assert mn.isAuthorized(pid, action) is True, action


def test_is_authorized_access_policy(mn):
    pid, _, _ = mn.create_object(
        "isauth-foreign", rights_holder=d1.OTHER, allow=((("public",), ("read",)),)
    )
    assert mn.isAuthorized(pid, "read") is True
    assert mn.isAuthorized(pid, "write") is False
    assert mn.isAuthorized(pid, "changePermission") is False


def test_is_authorized_missing_object(mn):
    with pytest.raises(d1.DataONEException) as e:
        mn.isAuthorized(mn.pid("missing"), "read")
    d1.check_error(e.value, "NotFound")


def test_is_authorized_unknown_action(mn):
    pid, _, _ = mn.create_object("isauth-bad")
    with pytest.raises(d1.DataONEException) as e:
        mn.isAuthorized(pid, "own")
    d1.check_error(e.value, "InvalidRequest")


def _policy(*rules):
    return t1.accessPolicy(allow=[t1.AccessRule(subject=list(s), permission=list(p)) for s, p in rules])


def test_set_access_policy(mn, node):
    pid, _, _ = mn.create_object("setap")
    sm = mn.getSystemMetadata(pid)
    ap = _policy((("public",), ("read",)), ((d1.OTHER,), ("write", "changePermission")))
    d1.tick()
    cn = d1.cn_client(node.mn_base, mn.version)
    assert cn.setAccessPolicy(pid, ap, int(sm.serialVersion)) is True
    got = mn.getSystemMetadata(pid)
    assert d1.access_rules(got) == d1.access_rules(ap)
    assert d1.utc(got.dateSysMetadataModified) > d1.utc(sm.dateSysMetadataModified)
    assert int(got.serialVersion) == int(sm.serialVersion) + 1, "serialVersion must be incremented (API.md §10 rule 8)"


def test_set_access_policy_stale_serial_version(mn, node):
    pid, _, _ = mn.create_object("setap-stale")
    sm = mn.getSystemMetadata(pid)
    cn = d1.cn_client(node.mn_base, mn.version)
    with pytest.raises(d1.DataONEException) as e:
        cn.setAccessPolicy(pid, _policy((("public",), ("read",))), int(sm.serialVersion) + 7)
    d1.check_error(e.value, "VersionMismatch")


def test_set_access_policy_without_rights(mn, node):
    pid, _, _ = mn.create_object(
        "setap-foreign", rights_holder=d1.OTHER, allow=((("public",), ("read", "write")),)
    )
    sm = mn.getSystemMetadata(pid)
    cn = d1.cn_client(node.mn_base, mn.version)
    with pytest.raises(d1.DataONEException) as e:
        cn.setAccessPolicy(pid, _policy((("public",), ("changePermission",))), int(sm.serialVersion))
    d1.check_error(e.value, "NotAuthorized", "InvalidToken")
