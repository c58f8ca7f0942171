package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog"
	"github.com/d1bridge/d1bridge/mappings/sqlcatalog/pgtest"
)

// TestExportPostgresDocuments: a PostgreSQL catalog whose objects' bytes are
// a document kept in the catalog (key doc-…, as harvests write resource maps
// and EML) exports both objects and the one file. It used to fail with
// "driver: bad connection": the document was read while the objects query was
// still open on the snapshot's connection, which pgx refuses (SQLite allows it).
func TestExportPostgresDocuments(t *testing.T) {
	ctx := context.Background()
	cat, err := sqlcatalog.OpenPostgres(pgtest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	body := []byte("<eml>a document kept in the catalog</eml>")
	sum := sha256.Sum256(body)
	key := node.DocumentKeyPrefix + hex.EncodeToString(sum[:])[:40]
	var recs []*node.Record
	for _, pid := range []string{"doc-a", "doc-b"} {
		recs = append(recs, &node.Record{BlobKey: key, Meta: &adapter.SystemMetadata{
			Identifier: pid, FormatID: "text/xml", Size: uint64(len(body)), SerialVersion: 1, RightsHolder: "CN=o",
			Checksum:     adapter.Checksum{Algorithm: "SHA-256", Value: hex.EncodeToString(sum[:])},
			DateUploaded: adapter.Now(), DateSysMetadataModified: adapter.Now(),
		}})
	}
	if _, err := cat.Apply(ctx, &node.Batch{Documents: map[string][]byte{key: body}, Records: recs}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e")
	m, err := Export(ctx, dir, ExportOptions{Options: Options{Catalog: cat, Files: filepath.Join(t.TempDir(), "objects")}})
	if err != nil {
		t.Fatalf("export of a PostgreSQL catalog with a document: %v", err)
	}
	if m.Objects != 2 || m.Files != 1 {
		t.Errorf("export: %+v", m)
	}
}
