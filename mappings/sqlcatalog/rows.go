package sqlcatalog

// The rows of a record: its objects row (the indexed columns, the encoded
// system metadata and the later checksums) and its access rows, as the writes
// in write.go store them.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
)

// stored is an object row as the catalog reads and writes it.
type stored struct {
	seq     int64
	meta    *adapter.SystemMetadata
	blobKey string
	sums    map[string]string // checksums computed later, by algorithm
	written string            // the meta column as columns made it
}

func (s *stored) info() *rowInfo {
	sm := s.meta
	lv := accessLevels(sm)
	return &rowInfo{
		key: sortKey{millis(sm.DateSysMetadataModified), s.seq},
		pid: sm.Identifier, sid: sm.SeriesID, format: sm.FormatID, auth: sm.AuthoritativeMemberNode,
		readers: slices.Sorted(maps.Keys(lv)),
	}
}

// accessLevels is the access table of sm: the best level of every subject that
// has one, the rights holder at changePermission.
func accessLevels(sm *adapter.SystemMetadata) map[string]int {
	lv := map[string]int{}
	grant := func(s string, l int) {
		if s != "" && l > lv[s] {
			lv[s] = l
		}
	}
	if sm.AccessPolicy != nil {
		for _, r := range sm.AccessPolicy.Allow {
			best := 0
			for _, p := range r.Permission {
				best = max(best, p.Level())
			}
			for _, s := range r.Subject {
				grant(strings.TrimSpace(s), best)
			}
		}
	}
	grant(sm.RightsHolder, adapter.PermChangePermission.Level())
	return lv
}

// columns returns the values of the indexed columns of s, in objectColumns
// order, and keeps the meta column in s.written.
func (s *stored) columns() ([]any, error) {
	sm := s.meta
	if sm.Size > 1<<63-1 {
		return nil, adapter.Errorf(adapter.InvalidSystemMetadata, "size %d is too large", sm.Size).WithPID(sm.Identifier)
	}
	var buf bytes.Buffer
	if err := adapter.Encode(&buf, sm, 2); err != nil {
		return nil, fmt.Errorf("sqlcatalog: encoding the system metadata of %q: %w", sm.Identifier, err)
	}
	// meta is what decoding the XML gives, so that a read gives what
	// getSystemMetadata's document says. The XML itself is not kept: sysmeta
	// is "" in the rows written since meta came (one copy per row, so twice
	// the rows per page for a lookup's descent); older rows keep theirs.
	var read adapter.SystemMetadata
	if err := adapter.Decode(bytes.NewReader(buf.Bytes()), &read); err != nil {
		return nil, fmt.Errorf("sqlcatalog: decoding the system metadata of %q: %w", sm.Identifier, err)
	}
	s.written = encodeMeta(&read)
	return []any{
		sm.Identifier, nullable(sm.SeriesID), sm.FormatID, int64(sm.Size),
		sm.Checksum.Algorithm, sm.Checksum.Value, sm.RightsHolder, sm.Archived,
		nullable(sm.Obsoletes), nullable(sm.ObsoletedBy), sm.AuthoritativeMemberNode,
		millis(sm.DateUploaded), millis(sm.DateSysMetadataModified), s.blobKey, "", s.written, s.sumsColumn(),
	}, nil
}

// compact is the record of the row s as written, in the form of the record
// cache's second tier: what a lookup would read back.
func (s *stored) compact() []byte {
	var sums map[string]string
	if len(s.sums) > 0 {
		sums = s.sums // an empty map is a NULL column, read back as nil
	}
	return encodeRecord(s.blobKey, s.written, sums)
}

// sumsColumn is the sums column of s: NULL when there are none.
func (s *stored) sumsColumn() any {
	if len(s.sums) == 0 {
		return nil
	}
	return encodeSums(s.sums)
}

const objectColumns = `pid, sid, format_id, size, checksum_algorithm, checksum_value, rights_holder, archived,
	obsoletes, obsoleted_by, authoritative_mn, date_uploaded, date_modified, blob_key, sysmeta, meta, sums`

// updateObject sets every column of objectColumns.
var updateObject = `UPDATE objects SET ` +
	strings.Join(strings.Fields(strings.ReplaceAll(objectColumns, ",", " = ?,")), " ") + ` = ? WHERE seq = ?`

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// insertRow adds s as a new row, assigning s.seq, with its access rows.
func (c *Catalog) insertRow(ctx context.Context, tx *sql.Tx, s *stored) error {
	vals, err := s.columns()
	if err != nil {
		return err
	}
	err = tx.QueryRowContext(ctx, c.d.q(`INSERT INTO objects (`+objectColumns+`)
		VALUES (`+placeholders(len(vals))+`) RETURNING seq`), vals...).Scan(&s.seq)
	if c.d.isUnique(err) {
		return adapter.Errorf(adapter.IdentifierNotUnique, "identifier %q is already in use", s.meta.Identifier).WithPID(s.meta.Identifier)
	}
	if err != nil {
		return fmt.Errorf("sqlcatalog: inserting %q: %w", s.meta.Identifier, err)
	}
	return c.putAccess(ctx, tx, s.meta)
}

// updateRow rewrites the row of s (found by seq) and its access rows from s.meta.
func (c *Catalog) updateRow(ctx context.Context, tx *sql.Tx, s *stored) error {
	vals, err := s.columns()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, c.d.q(updateObject), append(vals, s.seq)...); err != nil {
		return fmt.Errorf("sqlcatalog: updating %q: %w", s.meta.Identifier, err)
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM access WHERE pid = ?`), s.meta.Identifier); err != nil {
		return fmt.Errorf("sqlcatalog: updating the access of %q: %w", s.meta.Identifier, err)
	}
	return c.putAccess(ctx, tx, s.meta)
}

// accessBatch is how many access rows one INSERT carries: 4 bound variables
// each, so 996 variables, within 999, the limit of old SQLite builds (modern
// ones allow 32766, PostgreSQL 65535); a policy of any size is stored in as
// many statements.
const accessBatch = 249

func (c *Catalog) putAccess(ctx context.Context, tx *sql.Tx, sm *adapter.SystemMetadata) error {
	lv := accessLevels(sm)
	subjects := slices.Sorted(maps.Keys(lv))
	public := 0
	if lv[adapter.SubjectPublic] > 0 {
		public = 1
	}
	var full string // the statement of a whole batch, built once
	for batch := range slices.Chunk(subjects, accessBatch) {
		args := make([]any, 0, 4*len(batch))
		for _, s := range batch {
			args = append(args, sm.Identifier, s, lv[s], public)
		}
		q := full
		if len(batch) < accessBatch || q == "" {
			q = c.d.q(`INSERT INTO access (pid, subject, level, public) VALUES ` +
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", len(batch)), ", "))
			if len(batch) == accessBatch {
				full = q
			}
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("sqlcatalog: storing the access of %q: %w", sm.Identifier, err)
		}
	}
	return nil
}

// putBlobAndSums rewrites the blob_key and sums columns of the row of s.
func (c *Catalog) putBlobAndSums(ctx context.Context, tx *sql.Tx, s *stored) error {
	if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE objects SET blob_key = ?, sums = ? WHERE seq = ?`), s.blobKey, s.sumsColumn(), s.seq); err != nil {
		return fmt.Errorf("sqlcatalog: storing the blob key and checksums of %q: %w", s.meta.Identifier, err)
	}
	return nil
}

// moveChecksums moves the rows of checksums, where schema versions before
// sumsVersion kept the later checksums, into the sums of their objects, a
// page of moveChecksumsPage rows at a time (a connection's rows must be read
// before it runs the updates).
func (c *Catalog) moveChecksums(ctx context.Context, tx *sql.Tx) error {
	after := ""
	for {
		rows, err := tx.QueryContext(ctx, c.d.q(`SELECT pid, algorithm, value FROM checksums WHERE pid > ? ORDER BY pid, algorithm LIMIT ?`), after, moveChecksumsPage)
		if err != nil {
			return fmt.Errorf("sqlcatalog: reading the checksums: %w", err)
		}
		var pids []string
		sums := map[string]map[string]string{}
		n := 0
		for rows.Next() {
			var pid, alg, val string
			if err := rows.Scan(&pid, &alg, &val); err != nil {
				rows.Close()
				return fmt.Errorf("sqlcatalog: reading the checksums: %w", err)
			}
			if sums[pid] == nil {
				pids, sums[pid] = append(pids, pid), map[string]string{}
			}
			sums[pid][alg], n = val, n+1
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlcatalog: reading the checksums: %w", err)
		}
		if n == moveChecksumsPage && len(pids) > 1 {
			// The last PID may go on in the next page: it starts there.
			pids = pids[:len(pids)-1]
		}
		for _, pid := range pids {
			s := stored{sums: sums[pid]}
			if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE objects SET sums = ? WHERE pid = ?`), s.sumsColumn(), pid); err != nil {
				return fmt.Errorf("sqlcatalog: moving the checksums of %q: %w", pid, err)
			}
		}
		if n < moveChecksumsPage {
			break
		}
		after = pids[len(pids)-1]
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM checksums`); err != nil {
		return fmt.Errorf("sqlcatalog: moving the checksums: %w", err)
	}
	return nil
}

// moveChecksumsPage is how many checksums rows moveChecksums reads at a time.
var moveChecksumsPage = 10000
