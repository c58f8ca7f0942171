package datapackage

// The functions below are placeholders of the API until their implementation
// lands; each returns what tells the caller "unknown".

// EML is an EML 2.2.0 document packageId pid for a dataset with facts f and
// data objects entities. Deterministic.
func EML(pid string, f Facts, entities []Entity) []byte { panic("not implemented") }

// Sniff is the DataONE formatId of a metadata document, from its file name and
// first bytes (up to 64 KiB); "" when it is not a metadata document this
// package knows.
func Sniff(name string, head []byte) string { return "" }

// Indexed tells whether the DataONE CN indexes science metadata of formatID.
func Indexed(formatID string) bool { return false }

// ReadFacts reads the facts a metadata document of formatID (or a sidecar:
// "ro-crate-metadata.json", "bag-info.txt") states. Unknown formats give no
// facts and no error.
func ReadFacts(formatID string, body []byte) (Facts, error) { return Facts{}, nil }

// FormatForName is the DataONE formatId of a data file by its name's
// extension; application/octet-stream when unknown.
func FormatForName(name string) string { return "application/octet-stream" }

// Sidecar tells whether a file at path (within its dataset) may be a metadata
// document rather than data: worth reading its first bytes to Sniff them.
// BagIt tag files (bagit.txt, bag-info.txt, manifest-*.txt,
// tagmanifest-*.txt) at the dataset's root are sidecars too.
func Sidecar(path string) bool { return false }
