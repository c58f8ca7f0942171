"""Build the OCFL storage root that mappings/ocfl's tests walk, with ocfl-py.

Usage: build_root.py ROOT

ROOT must not exist. It becomes an OCFL 1.1 storage root (layout 0003, hashed
n-tuple trees) holding two objects:

  ark:/99999/fk4-dataset-1  three versions, sha512, contentDirectory "content":
      v1  eml.xml, data/a.csv, data/b.csv
      v2  data/a.csv changed; data/b.csv unchanged (ocfl-py keeps v1's copy)
      v3  data/b.csv deleted; data/c.csv added
  ark:/99999/fk4-dataset-2  one version, sha256, contentDirectory "files":
      v1  ro-crate-metadata.json, measurements.tsv

The root is validated with ocfl-py's validator (digests checked); the script
exits non-zero if it is not valid.
"""
import os
import sys
import tempfile

import ocfl

EML = """<?xml version="1.0" encoding="UTF-8"?>
<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="fk4-dataset-1" system="fixture">
  <dataset><title>Lake temperatures</title></dataset>
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
    "v3": {"eml.xml": EML, "data/a.csv": "x,y\n1,2\n5,6\n", "data/c.csv": "r,s\n7,8\n"},
}
OBJECT1_CREATED = {1: "2020-01-01T00:00:00Z", 2: "2021-01-01T00:00:00Z", 3: "2022-01-01T00:00:00Z"}

OBJECT2 = {"ro-crate-metadata.json": RO_CRATE, "measurements.tsv": "depth\tmoisture\n10\t0.31\n"}
OBJECT2_CREATED = "2021-06-01T12:30:00Z"


def write_tree(base, files):
    for name, text in files.items():
        path = os.path.join(base, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def main(root):
    store = ocfl.StorageRoot(root=root, layout_name="0003-hash-and-id-n-tuple-storage-layout")
    store.initialize(spec_version="1.1")
    with tempfile.TemporaryDirectory() as work:
        src1 = os.path.join(work, "src1")
        for vdir, files in OBJECT1.items():
            write_tree(os.path.join(src1, vdir), files)
        meta1 = {n: ocfl.VersionMetadata(created=c, message="version %d" % n,
                                         name="Fixture", address="mailto:fixture@example.org")
                 for n, c in OBJECT1_CREATED.items()}
        obj1 = os.path.join(work, "obj1")
        ocfl.Object(identifier="ark:/99999/fk4-dataset-1", spec_version="1.1").build(
            srcdir=src1, versions_metadata=meta1, objdir=obj1)
        store.add(obj1)

        src2 = os.path.join(work, "src2")
        write_tree(src2, OBJECT2)
        obj2 = os.path.join(work, "obj2")
        ocfl.Object(identifier="ark:/99999/fk4-dataset-2", spec_version="1.1",
                    content_directory="files", digest_algorithm="sha256").create(
            srcdir=src2, metadata=ocfl.VersionMetadata(created=OBJECT2_CREATED, message="Initial import"),
            objdir=obj2)
        store.add(obj2)

    check = ocfl.StorageRoot(root=root)
    if not check.validate(check_digests=True, log_warnings=False):
        sys.exit("invalid storage root: %s" % check.errors)
    if check.num_objects != 2 or check.good_objects != 2:
        sys.exit("expected 2 valid objects, have %d of %d: %s" % (check.good_objects, check.num_objects, check.errors))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
