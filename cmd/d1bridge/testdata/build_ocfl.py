"""Build an OCFL storage root for the d1bridge end-to-end dataset test, with
ocfl-py (the shape of mappings/ocfl/testdata/build_root.py, with valid EML
2.2.0 and a fourth version to come).

Usage: build_ocfl.py ROOT VERSIONS [OBJECT2]

ROOT must not exist. It becomes an OCFL 1.1 storage root (layout 0003)
holding:

  ark:/99999/fk4-dataset-1  VERSIONS versions (3 or 4), sha512:
      v1  eml.xml, data/a.csv, data/b.csv
      v2  data/a.csv changed; data/b.csv unchanged
      v3  data/b.csv deleted; data/c.csv and data/e.csv added
      v4  data/a.csv changed; data/c.csv unchanged; data/e.csv deleted
  ark:/99999/fk4-dataset-2  (when OBJECT2 is "yes", the default) one
      version, sha256, contentDirectory "files": ro-crate-metadata.json,
      measurements.tsv

The same arguments build the same bytes (created dates are fixed), so a root
with 4 versions holds the one with 3 as its first versions. The root is
validated with ocfl-py's validator; the script exits non-zero if it is not.
"""
import os
import sys
import tempfile

import ocfl

EML = """<?xml version="1.0" encoding="UTF-8"?>
<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="fk4-dataset-1" system="fixture">
  <dataset>
    <title>Lake temperatures</title>
    <creator><individualName><surName>Fixture</surName></individualName></creator>
    <contact><individualName><surName>Fixture</surName></individualName></contact>
  </dataset>
</eml:eml>
"""

RO_CRATE = """{
  "@context": "https://w3id.org/ro/crate/1.1/context",
  "@graph": [
    {"@id": "ro-crate-metadata.json", "@type": "CreativeWork",
     "conformsTo": {"@id": "https://w3id.org/ro/crate/1.1"}, "about": {"@id": "./"}},
    {"@id": "./", "@type": "Dataset", "name": "Soil moisture", "hasPart": [{"@id": "measurements.tsv"}]},
    {"@id": "measurements.tsv", "@type": "File"}
  ]
}
"""

OBJECT1 = {
    "v1": {"eml.xml": EML, "data/a.csv": "x,y\n1,2\n", "data/b.csv": "p,q\n3,4\n"},
    "v2": {"eml.xml": EML, "data/a.csv": "x,y\n1,2\n5,6\n", "data/b.csv": "p,q\n3,4\n"},
    "v3": {"eml.xml": EML, "data/a.csv": "x,y\n1,2\n5,6\n", "data/c.csv": "r,s\n7,8\n", "data/e.csv": "e\n1\n"},
    "v4": {"eml.xml": EML, "data/a.csv": "x,y\n1,2\n5,6\n9,10\n", "data/c.csv": "r,s\n7,8\n"},
}
CREATED = {1: "2020-01-01T00:00:00Z", 2: "2021-01-01T00:00:00Z", 3: "2022-01-01T00:00:00Z", 4: "2023-01-01T00:00:00Z"}

OBJECT2 = {"ro-crate-metadata.json": RO_CRATE, "measurements.tsv": "depth\tmoisture\n10\t0.31\n"}
OBJECT2_CREATED = "2021-06-01T12:30:00Z"


def write_tree(base, files):
    for name, text in files.items():
        path = os.path.join(base, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def main(root, versions, object2):
    store = ocfl.StorageRoot(root=root, layout_name="0003-hash-and-id-n-tuple-storage-layout")
    store.initialize(spec_version="1.1")
    with tempfile.TemporaryDirectory() as work:
        src1 = os.path.join(work, "src1")
        for n in range(1, versions + 1):
            write_tree(os.path.join(src1, "v%d" % n), OBJECT1["v%d" % n])
        meta1 = {n: ocfl.VersionMetadata(created=CREATED[n], message="version %d" % n,
                                         name="Fixture", address="mailto:fixture@example.org")
                 for n in range(1, versions + 1)}
        obj1 = os.path.join(work, "obj1")
        ocfl.Object(identifier="ark:/99999/fk4-dataset-1", spec_version="1.1").build(
            srcdir=src1, versions_metadata=meta1, objdir=obj1)
        store.add(obj1)
        if object2:
            src2 = os.path.join(work, "src2")
            write_tree(src2, OBJECT2)
            obj2 = os.path.join(work, "obj2")
            ocfl.Object(identifier="ark:/99999/fk4-dataset-2", spec_version="1.1",
                        content_directory="files", digest_algorithm="sha256").create(
                srcdir=src2, metadata=ocfl.VersionMetadata(created=OBJECT2_CREATED, message="Initial import"),
                objdir=obj2)
            store.add(obj2)

    want = 2 if object2 else 1
    check = ocfl.StorageRoot(root=root)
    if not check.validate(check_digests=True, log_warnings=False):
        sys.exit("invalid storage root: %s" % check.errors)
    if check.num_objects != want or check.good_objects != want:
        sys.exit("expected %d valid objects, have %d of %d: %s" % (want, check.good_objects, check.num_objects, check.errors))


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[2] not in ("3", "4"):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), len(sys.argv) < 4 or sys.argv[3] == "yes")
