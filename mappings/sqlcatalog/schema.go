package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// migrations bring the schema from version i to i+1. {{pk}} is an increasing
// integer key, {{bin}} makes text compare byte by byte, {{norowid}} ends a table
// whose primary key is all it is looked up by, {{blob}} is a byte string.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE objects (
	seq                {{pk}},
	pid                TEXT{{bin}} NOT NULL UNIQUE,
	sid                TEXT{{bin}},
	format_id          TEXT NOT NULL,
	size               BIGINT NOT NULL,
	checksum_algorithm TEXT NOT NULL,
	checksum_value     TEXT NOT NULL,
	rights_holder      TEXT NOT NULL,
	archived           BOOLEAN NOT NULL,
	obsoletes          TEXT{{bin}},
	obsoleted_by       TEXT{{bin}},
	authoritative_mn   TEXT NOT NULL,
	date_uploaded      BIGINT NOT NULL,
	date_modified      BIGINT NOT NULL,
	blob_key           TEXT NOT NULL,
	sysmeta            TEXT NOT NULL
);
CREATE INDEX objects_order ON objects (date_modified, seq, pid);
CREATE INDEX objects_sid ON objects (sid);
CREATE INDEX objects_format ON objects (format_id, date_modified, seq);
CREATE INDEX objects_authority ON objects (authoritative_mn, date_modified, seq);

CREATE TABLE access (
	pid     TEXT{{bin}} NOT NULL REFERENCES objects (pid) ON DELETE CASCADE,
	subject TEXT NOT NULL,
	level   INTEGER NOT NULL CHECK (level BETWEEN 1 AND 3),
	PRIMARY KEY (pid, subject)
){{norowid}};
CREATE INDEX access_subject ON access (subject, pid);

CREATE TABLE checksums (
	pid       TEXT{{bin}} NOT NULL REFERENCES objects (pid) ON DELETE CASCADE,
	algorithm TEXT NOT NULL,
	value     TEXT NOT NULL,
	PRIMARY KEY (pid, algorithm)
){{norowid}};

CREATE TABLE events (
	entry_id    {{pk}},
	entry_ref   TEXT,
	pid         TEXT{{bin}} NOT NULL,
	ip          TEXT NOT NULL,
	user_agent  TEXT NOT NULL,
	subject     TEXT NOT NULL,
	event       TEXT NOT NULL,
	date_logged BIGINT NOT NULL,
	node_id     TEXT NOT NULL
);
CREATE INDEX events_order ON events (date_logged, entry_id, pid);
CREATE INDEX events_event ON events (event, date_logged, entry_id);
CREATE INDEX events_pid ON events (pid, date_logged, entry_id);
`,
	// 2: identifier reservations of the CN role.
	`
CREATE TABLE reservations (
	id       TEXT{{bin}} NOT NULL PRIMARY KEY,
	subject  TEXT NOT NULL,
	reserved BIGINT NOT NULL
){{norowid}};
`,
	// 3: HoldsBlob, asked for each object a store lists that has no record.
	`CREATE INDEX objects_blob_key ON objects (blob_key)`,
	// 4: the documents a harvest writes (resource maps, EML), by key
	// (doc-<digest>), written with the records that name them.
	`CREATE TABLE documents (
	key  TEXT{{bin}} NOT NULL PRIMARY KEY,
	body {{blob}} NOT NULL
)`,
	// 5: the list blocks (blocks.go), filled from the objects once created.
	`CREATE TABLE object_blocks (
	low_date         BIGINT NOT NULL,
	low_seq          BIGINT NOT NULL,
	format_id        TEXT NOT NULL,
	authoritative_mn TEXT NOT NULL,
	public           INTEGER NOT NULL,
	n                BIGINT NOT NULL,
	PRIMARY KEY (low_date, low_seq, format_id, authoritative_mn, public)
){{norowid}}`,
	// 6: the system metadata as JSON (meta), which reads decode several
	// times faster than the XML of sysmeta; NULL in rows written before.
	`ALTER TABLE objects ADD COLUMN meta TEXT`,
	// 7: the change log (changes.go): one row per PID a write changed, in the
	// write's transaction, in commit order, which other instances sharing the
	// catalog read to forget what they cached. Pruned after a while.
	`CREATE TABLE changes (
	seq {{pk}},
	pid TEXT{{bin}} NOT NULL,
	at  BIGINT NOT NULL
)`,
	// 8: leases (lease.go): background work that one instance at a time may
	// do (a harvest of one upstream), with a fencing epoch that grows with
	// every new holder and the holder's checkpoint.
	`CREATE TABLE leases (
	name    TEXT{{bin}} NOT NULL PRIMARY KEY,
	epoch   BIGINT NOT NULL,
	holder  TEXT NOT NULL,
	expires BIGINT NOT NULL,
	state   TEXT NOT NULL
){{norowid}}`,
	// 9: the job queue (jobs.go): replication jobs and reindex ranges that
	// every instance sharing the catalog works.
	jobsSchema,
	// 10: the later checksums in the object's row (sums, a JSON object of
	// algorithm to value; NULL for none), so that a lookup reads one row;
	// moved there from checksums (moveChecksums), which stays empty.
	`ALTER TABLE objects ADD COLUMN sums TEXT`,
	// 11: the log's index by PID, deferred (eventpids.go): event_pids holds
	// (pid, id) of the events up to event_pids_mark's upto, filled in
	// batches in PID order instead of one random B-tree insert per event.
	`DROP INDEX events_pid;
CREATE TABLE event_pids (
	pid      TEXT{{bin}} NOT NULL,
	entry_id BIGINT NOT NULL,
	PRIMARY KEY (pid, entry_id)
){{norowid}};
CREATE TABLE event_pids_mark (upto BIGINT NOT NULL)`,
	// 12: meta and sums written in the compact form (metacodec.go). No DDL:
	// the version keeps older programs, which cannot read the form, from
	// opening the catalog. Rows written before keep their JSON.
	``,
	// 13: the log's index by PID in runs (eventpids.go): each indexing
	// appends a run of its own, where inserting into one tree of every
	// event wrote a page at a random place per event. The index so far
	// becomes run 0 (registered by indexRuns). PostgreSQL keeps the primary
	// key's index name of the new table, so the old one's is not in the way.
	`CREATE TABLE event_pids_13 (
	run      BIGINT NOT NULL DEFAULT 0,
	pid      TEXT{{bin}} NOT NULL,
	entry_id BIGINT NOT NULL,
	PRIMARY KEY (run, pid, entry_id)
){{norowid}};
INSERT INTO event_pids_13 (run, pid, entry_id) SELECT 0, pid, entry_id FROM event_pids;
DROP TABLE event_pids;
ALTER TABLE event_pids_13 RENAME TO event_pids;
CREATE TABLE event_pid_runs (
	run    BIGINT NOT NULL PRIMARY KEY,
	events BIGINT NOT NULL,
	level  INTEGER NOT NULL
)`,
	// 14: whether an access row's object is public, in the subject's
	// index: a signed-in list seeks past the public objects its subjects
	// were given (blockseek.go), which the owner of a public catalog was
	// given by the million, and counted.
	`ALTER TABLE access ADD COLUMN public INTEGER NOT NULL DEFAULT 0;
UPDATE access SET public = 1 WHERE pid IN (SELECT pid FROM access WHERE subject = 'public');
DROP INDEX access_subject;
CREATE INDEX access_subject ON access (subject, public, pid)`,
	// 15: the newest date the objects ever had (orderDate), kept when the
	// row that had it is deleted or given an older date; one row, or none
	// while no such row has gone.
	`CREATE TABLE newest_date (
	one INTEGER NOT NULL PRIMARY KEY,
	at  BIGINT NOT NULL
)`,
	// 16: the reader blocks (readerblocks.go), filled from the objects once
	// created.
	`CREATE TABLE reader_blocks (
	subject          TEXT NOT NULL,
	low_date         BIGINT NOT NULL,
	low_seq          BIGINT NOT NULL,
	format_id        TEXT NOT NULL,
	authoritative_mn TEXT NOT NULL,
	n                BIGINT NOT NULL,
	PRIMARY KEY (subject, low_date, low_seq, format_id, authoritative_mn)
){{norowid}}`,
}

// sumsVersion is the schema version that moves the checksums into objects.
const sumsVersion = 10

// migrate creates the schema or brings it up to date, in one transaction.
// schemaIsThis refuses a catalog whose schema is not this program's version
// (WithSchemaAsIs).
func (c *Catalog) schemaIsThis(ctx context.Context) error {
	var version int
	if err := c.db.QueryRowContext(ctx, `SELECT version FROM catalog_schema`).Scan(&version); err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	if version != len(migrations) {
		return fmt.Errorf("the catalog has schema version %d and this program's is %d: use the d1bridge that serves it (this one would migrate it)", version, len(migrations))
	}
	return nil
}

func (c *Catalog) migrate(ctx context.Context) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if c.d.migrateLock != "" {
		if _, err := tx.ExecContext(ctx, c.d.migrateLock); err != nil {
			return fmt.Errorf("locking the schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS catalog_schema (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating catalog_schema: %w", err)
	}
	var version int
	err = tx.QueryRowContext(ctx, `SELECT version FROM catalog_schema`).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO catalog_schema (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("reading the schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("the database has schema version %d; this program knows versions up to %d", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		for _, stmt := range strings.Split(c.d.ddl.Replace(migrations[v]), ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrating to schema version %d: %w", v+1, err)
			}
		}
	}
	if version < blocksVersion {
		if err := c.cutBlocks(ctx, tx, lowest); err != nil {
			return err
		}
	} else if version < readersVersion {
		if err := c.countAllReaders(ctx, tx); err != nil {
			return err
		}
	}
	if version < sumsVersion {
		if err := c.moveChecksums(ctx, tx); err != nil {
			return err
		}
	}
	if version < pidsVersion {
		if err := c.indexEventPIDs(ctx, tx, -1); err != nil {
			return err
		}
	} else if version < runsVersion {
		if err := registerRunZero(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE catalog_schema SET version = ?`), len(migrations)); err != nil {
		return err
	}
	return tx.Commit()
}
