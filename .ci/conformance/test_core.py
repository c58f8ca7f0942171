"""MNCore: ping and getCapabilities, on /v1 and /v2."""

import d1_common.date_time

import d1


def test_ping(mn):
    assert mn.ping() is True
    resp = mn.pingResponse()
    assert resp.status_code == 200
    date = resp.headers.get("Date")
    assert date, "ping must send a Date header (API.md §3.1)"
    then = d1_common.date_time.dt_from_http_datetime_str(date)
    assert abs((d1.now() - then).total_seconds()) < 300, "Date {!r} is not now".format(date)


def _check_node(mn, node, doc):
    want_ns = d1.NS_V2 if mn.version == "v2" else d1.NS_V1
    assert d1.ns_of(doc) == want_ns, "node document in namespace {}".format(d1.ns_of(doc))
    assert doc.type == "mn"
    assert doc.state == "up"
    ident = d1.value(doc.identifier)
    assert ident.startswith("urn:node:"), ident
    assert doc.name and doc.description
    assert str(doc.baseURL).rstrip("/") == node.mn_base, "baseURL {!r}, expected {!r}".format(
        str(doc.baseURL), node.mn_base
    )
    assert len(doc.contactSubject) >= 1
    services = {(str(s.name), str(s.version)): s.available for s in doc.services.service}
    # Tiers 1-3 are served on both versions (API.md §8): listed, and not unavailable.
    for name in ("MNCore", "MNRead", "MNAuthorization", "MNStorage"):
        for v in ("v1", "v2"):
            assert (name, v) in services, "service {} {} not listed: {}".format(name, v, sorted(services))
            assert services[(name, v)] is None or bool(services[(name, v)]), "{} {} unavailable".format(name, v)


def test_get_capabilities(mn, node):
    _check_node(mn, node, mn.getCapabilities())


def test_get_capabilities_at_version_root(mn, node):
    """GET {base}/vN/ is the node document too (API.md §1.1)."""
    resp = mn.GET([""])
    doc = mn._read_dataone_type_response(resp, "Node")
    _check_node(mn, node, doc)
