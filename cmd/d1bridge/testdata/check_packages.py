"""Check a member node's data packages with DataONE's own Python software.

Usage: check_packages.py MN_BASE_URL EXPECTED.json WORKDIR

MN_BASE_URL is the node's MN base (http://host:port/d1/mn). EXPECTED.json is

    {"packages": {"<resource map pid>": {"metadata": "<pid>", "data": ["<pid>", ...]}}}

naming every resource map that must be a head (not obsoleted, not archived)
and exactly the members it must aggregate. With the DataONE client
(d1_client.mnclient_2_0.MemberNodeClient_2_0) the script:

  - lists the node's resource maps (listObjects, formatId
    http://www.openarchives.org/ore/terms, paged) and reads each one's system
    metadata; the heads must be exactly the expected resource maps;
  - parses each head with d1_common.resource_map.ResourceMap and checks that
    it aggregates exactly the expected members, the science metadata as the
    document that cito:documents the data and the data as cito:isDocumentedBy;
  - gets every member and its system metadata: the bytes must have the size
    and checksum the system metadata gives;
  - validates each science metadata object: XML formats with d1_scimeta
    (EML 2.2.0, which dataone.scimeta 3.5.2 does not ship, is registered at
    run time from the official schema in mappings/datapackage/testdata/eml-2.2.0,
    in a temporary copy of d1_scimeta's schema tree), science-on-schema.org
    JSON-LD parsed as JSON-LD with rdflib (schema.org's context made local);
  - saves getPackage's zip under WORKDIR, unzips it, and validates it with
    bagit.Bag(path).validate(); the bag's payload must hold every data member.

It prints a JSON report ({"errors": [...], "packages": {...}, "objects": N})
and exits 1 when there is any error.
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import traceback
import zipfile

import bagit
import d1_client.mnclient_2_0
import d1_common.resource_map
import d1_scimeta.util
import d1_scimeta.validate
import lxml.etree
import rdflib

ORE = "http://www.openarchives.org/ore/terms"
EML220 = "https://eml.ecoinformatics.org/eml-2.2.0"
SCHEMA_ORG = "science-on-schema.org/Dataset;ld+json"
XSD_NS = "http://www.w3.org/2001/XMLSchema"

HERE = os.path.dirname(os.path.abspath(__file__))
EML220_DIR = os.path.join(HERE, "..", "..", "..", "mappings", "datapackage", "testdata", "eml-2.2.0")

ALGORITHMS = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}


def register_eml220(work):
    """Give d1_scimeta the EML 2.2.0 schema, the way it resolves every format:
    format_id_to_schema.json names a schema, schema_root/<name>.xsd imports
    the namespaces of schema/<name>/*.xsd. The package's own trees are linked
    into a temporary copy, so site-packages is not touched."""
    root = os.path.join(work, "scimeta")
    schema = os.path.join(root, "schema")
    schema_root = os.path.join(root, "schema_root")
    os.makedirs(schema)
    os.makedirs(schema_root)
    for name in os.listdir(d1_scimeta.util.SCHEMA_ROOT_PATH):
        os.symlink(os.path.join(d1_scimeta.util.SCHEMA_ROOT_PATH, name), os.path.join(schema, name))
    for name in os.listdir(d1_scimeta.util.XSD_ROOT_DIR_PATH):
        os.symlink(os.path.join(d1_scimeta.util.XSD_ROOT_DIR_PATH, name), os.path.join(schema_root, name))
    shutil.copytree(EML220_DIR, os.path.join(schema, "eml-2.2.0"))
    imports = []
    for name in sorted(os.listdir(os.path.join(schema, "eml-2.2.0"))):
        if not name.endswith(".xsd"):
            continue
        tree = lxml.etree.parse(os.path.join(schema, "eml-2.2.0", name))
        ns = tree.getroot().get("targetNamespace")
        if ns:
            imports.append('  <xs:import namespace="%s" schemaLocation="../schema/eml-2.2.0/%s"/>' % (ns, name))
    with open(os.path.join(schema_root, "eml-2.2.0.xsd"), "w", encoding="utf-8") as f:
        f.write("<?xml version='1.0' encoding='utf-8'?>\n<xs:schema xmlns:xs=\"%s\">\n%s\n</xs:schema>\n"
                % (XSD_NS, "\n".join(imports)))
    d1_scimeta.util.SCHEMA_ROOT_PATH = schema
    d1_scimeta.util.XSD_ROOT_DIR_PATH = schema_root
    d1_scimeta.util.FORMAT_ID_TO_SCHEMA_DICT[EML220] = "eml-2.2.0"


def read_all(stream):
    if hasattr(stream, "read"):
        return stream.read()
    if hasattr(stream, "content"):
        return stream.content
    return b"".join(stream)


def main(base_url, expected_path, work):
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)["packages"]
    errors = []
    report = {"errors": errors, "packages": {}, "objects": 0}
    register_eml220(work)
    client = d1_client.mnclient_2_0.MemberNodeClient_2_0(base_url)

    def fail(msg):
        errors.append(msg)

    # Every object, and the resource maps among them.
    total = client.listObjects(start=0, count=0).total
    report["objects"] = total
    maps = []
    start = 0
    while True:
        page = client.listObjects(formatId=ORE, start=start, count=3)
        infos = page.objectInfo or []
        maps += [i.identifier.value() for i in infos]
        start += len(infos)
        if not infos or start >= page.total:
            break
    heads = []
    for pid in maps:
        sm = client.getSystemMetadata(pid)
        if sm.formatId != ORE:
            fail("%s: listed with formatId %s, system metadata says %s" % (pid, ORE, sm.formatId))
        if sm.obsoletedBy is None and not sm.archived:
            heads.append(pid)
    if sorted(heads) != sorted(expected):
        fail("resource map heads %s, want %s" % (sorted(heads), sorted(expected)))

    # The members of heads nobody expected are read too: their bytes must
    # still be what their system metadata says.
    for map_pid in sorted(set(heads) - set(expected)):
        try:
            rmap = d1_common.resource_map.ResourceMap()
            rmap.deserialize(data=read_all(client.get(map_pid)), format="xml")
            for pid in sorted(rmap.getAggregatedPids()):
                check_object(client, pid, read_all(client.get(pid)), fail)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            fail("%s: %s" % (map_pid, e))

    for map_pid in sorted(expected):
        want = expected[map_pid]
        got = {"members": [], "metadata_format": None, "bag_payload": []}
        report["packages"][map_pid] = got
        try:
            check_package(client, map_pid, want, got, work, fail)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            fail("%s: %s\n%s" % (map_pid, e, traceback.format_exc()))
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 1 if errors else 0


def check_package(client, map_pid, want, got, work, fail):
    body = read_all(client.get(map_pid))
    check_object(client, map_pid, body, fail)
    rmap = d1_common.resource_map.ResourceMap()
    rmap.deserialize(data=body, format="xml")
    if rmap.getResourceMapPid() != map_pid:
        fail("%s: the resource map names itself %s" % (map_pid, rmap.getResourceMapPid()))
    members = sorted(rmap.getAggregatedPids())
    got["members"] = members
    want_members = sorted([want["metadata"]] + want["data"])
    if members != want_members:
        fail("%s: aggregates %s, want %s" % (map_pid, members, want_members))
    scimeta = sorted(rmap.getAggregatedScienceMetadataPids())
    if want["data"] and scimeta != [want["metadata"]]:
        fail("%s: science metadata %s, want %s" % (map_pid, scimeta, [want["metadata"]]))
    scidata = sorted(rmap.getAggregatedScienceDataPids())
    if scidata != sorted(want["data"]):
        fail("%s: science data %s, want %s" % (map_pid, scidata, sorted(want["data"])))

    for pid in want_members:
        data = read_all(client.get(pid))
        sm = check_object(client, pid, data, fail)
        if sm is None or pid != want["metadata"]:
            continue
        got["metadata_format"] = sm.formatId
        check_scimeta(pid, sm.formatId, data, fail)

    # getPackage: a BagIt zip holding every data member.
    zpath = os.path.join(work, "package-%d.zip" % len(os.listdir(work)))
    with open(zpath, "wb") as f:
        f.write(read_all(client.getPackage(map_pid)))
    bag_dir = zpath[:-len(".zip")]
    with zipfile.ZipFile(zpath) as z:
        z.extractall(bag_dir)
    entries = os.listdir(bag_dir)
    if len(entries) == 1 and os.path.isdir(os.path.join(bag_dir, entries[0])):
        bag_dir = os.path.join(bag_dir, entries[0])  # a bag inside one folder
    try:
        bag = bagit.Bag(bag_dir)
        bag.validate()
    except (bagit.BagError, bagit.BagValidationError) as e:
        fail("%s: getPackage is not a valid bag: %s" % (map_pid, e))
        return
    payload = sorted(p for p in bag.payload_files())
    got["bag_payload"] = payload
    # One payload file per member at least (data, metadata, the map itself).
    if len(payload) < len(want["data"]) + 1:
        fail("%s: the bag's payload %s holds fewer files than the package's %d members"
             % (map_pid, payload, len(want["data"]) + 1))


def check_object(client, pid, data, fail):
    sm = client.getSystemMetadata(pid)
    if sm.identifier.value() != pid:
        fail("%s: getSystemMetadata names %s" % (pid, sm.identifier.value()))
    if sm.archived:
        fail("%s: a member of a head package is archived" % pid)
    if int(sm.size) != len(data):
        fail("%s: size %s, get returned %d bytes" % (pid, sm.size, len(data)))
    alg = ALGORITHMS.get(sm.checksum.algorithm)
    if alg is None:
        fail("%s: checksum algorithm %s" % (pid, sm.checksum.algorithm))
    elif hashlib.new(alg, data).hexdigest() != sm.checksum.value().lower():
        fail("%s: checksum %s %s, the bytes hash to %s" % (pid, sm.checksum.algorithm, sm.checksum.value(),
                                                          hashlib.new(alg, data).hexdigest()))
    return sm


def local_context(ctx):
    """A JSON-LD context with schema.org's remote context made a local
    @vocab (the checker reads nothing from the network)."""
    if isinstance(ctx, list):
        return [local_context(c) for c in ctx]
    if isinstance(ctx, str) and "schema.org" in ctx:
        return {"@vocab": "https://schema.org/"}
    if isinstance(ctx, str):
        raise ValueError("a remote @context %s" % ctx)
    return ctx


def check_scimeta(pid, format_id, data, fail):
    if format_id == SCHEMA_ORG:
        try:
            doc = json.loads(data)
            # schema.org's context, made local (no network): every term is
            # in the schema.org vocabulary.
            doc["@context"] = local_context(doc.get("@context"))
            g = rdflib.Graph()
            g.parse(data=json.dumps(doc), format="json-ld")
            types = {str(o) for o in g.objects(None, rdflib.RDF.type)}
            if not types & {"https://schema.org/Dataset", "http://schema.org/Dataset"}:
                fail("%s: the JSON-LD has no schema.org Dataset (types %s)" % (pid, sorted(types)))
        except Exception as e:  # noqa: BLE001
            fail("%s: not JSON-LD: %s" % (pid, e))
        return
    if not d1_scimeta.util.is_installed_scimeta_format_id(format_id):
        fail("%s: format %s is not one d1_scimeta validates" % (pid, format_id))
        return
    try:
        d1_scimeta.validate.assert_valid(format_id, data)
    except d1_scimeta.util.SciMetaError as e:
        fail("%s: %s does not validate: %s" % (pid, format_id, e))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
