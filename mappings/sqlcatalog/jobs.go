package sqlcatalog

// # Jobs
//
// The catalog keeps a queue of background work (node.Queue) that every
// instance sharing it works: accepted replications, reindex batches and their
// ranges. A job is one row of jobs:
//
//	queued ──claim──▶ running ──▶ done | failed
//	  ▲                  │
//	  └── retry, release ┘   (expired lease: any instance claims it again)
//
// A claim takes the oldest due job of a kind, queued or running under an
// expired lease, in one statement (on PostgreSQL FOR UPDATE SKIP LOCKED, so
// instances claim different jobs without waiting), adds one to its attempt and
// gives the instance a lease until expires. The instance renews the lease
// every third of it while the job runs, and cancels the job's context when it
// cannot (the job was taken over, or the database is out of reach until the
// lease is about to end). Every write of a running job's outcome is fenced by
// (id, holder, attempt, state running): an instance that lost a job writes
// nothing. A partial unique index keeps one queued or running job per (kind,
// key). Times are milliseconds since the Unix epoch, from each instance's
// clock: leases are minutes, far above the skew of synchronized clocks.
//
// An SQLite catalog belongs to one process: when its first worker starts,
// every lease left by an earlier run (a crash) is expired at once, so the jobs
// resume without waiting. Ended jobs are kept a week, then deleted.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/d1bridge/d1bridge/mappings/node"
)

// jobsSchema creates the jobs table (schema migration 9).
const jobsSchema = `
CREATE TABLE jobs (
	id           {{pk}},
	kind         TEXT NOT NULL,
	key          TEXT{{bin}} NOT NULL,
	state        TEXT NOT NULL,
	payload      TEXT NOT NULL,
	weight       BIGINT NOT NULL,
	attempt      INTEGER NOT NULL,
	max_attempts INTEGER NOT NULL,
	run_at       BIGINT NOT NULL,
	holder       TEXT NOT NULL,
	expires      BIGINT NOT NULL,
	created      BIGINT NOT NULL,
	ended        BIGINT NOT NULL,
	error        TEXT NOT NULL
);
CREATE UNIQUE INDEX jobs_active ON jobs (kind, key) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_due ON jobs (kind, state, run_at);
CREATE INDEX jobs_ended ON jobs (ended) WHERE state IN ('done', 'failed')
`

// Job states.
const (
	jobQueued  = "queued"
	jobRunning = "running"
	jobDone    = "done"
	jobFailed  = "failed"
)

// jobsKeep is how long ended jobs stay in the table.
const jobsKeep = 7 * 24 * time.Hour

var _ node.Queue = (*Catalog)(nil)

// inTx runs fn in a write transaction, serialized with this process's other
// writes on SQLite.
func (c *Catalog) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if c.d == sqliteDialect {
		c.wmu.Lock()
		defer c.wmu.Unlock()
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// exec runs one write statement, serialized on SQLite as inTx is.
func (c *Catalog) execJobs(ctx context.Context, query string, args ...any) (int64, error) {
	if c.d == sqliteDialect {
		c.wmu.Lock()
		defer c.wmu.Unlock()
	}
	res, err := c.db.ExecContext(ctx, c.d.q(query), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c *Catalog) nowMillis() int64 { return c.now().UnixMilli() }

type txKey struct{}

// reader is what a read made with ctx queries: the transaction of the
// Enqueue whose admit check makes it, else the database.
func (c *Catalog) reader(ctx context.Context) querier {
	if tx, ok := ctx.Value(txKey{}).(*sql.Tx); ok {
		return tx
	}
	return c.db
}

// kindLock is the key of the advisory lock that serializes the Enqueues of a
// kind on PostgreSQL (SQLite's write transactions are serialized already).
func kindLock(kind string) int64 {
	h := fnv.New64a()
	h.Write([]byte("d1bridge jobs " + kind))
	return int64(h.Sum64())
}

// Enqueue implements node.Queue.
func (c *Catalog) Enqueue(ctx context.Context, j node.NewJob, admit func(ctx context.Context, active int64) error) (int64, error) {
	if j.Kind == "" || j.Key == "" {
		return 0, errors.New("sqlcatalog: a job needs a kind and a key")
	}
	var id int64
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		if c.d.claimLock != "" {
			if _, err := tx.ExecContext(ctx, c.d.claimLock, kindLock(j.Kind)); err != nil {
				return err
			}
		}
		var one int
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT 1 FROM jobs WHERE kind = ? AND key = ? AND state IN ('queued', 'running')`),
			j.Kind, j.Key).Scan(&one)
		switch {
		case err == nil:
			return node.ErrJobActive
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if admit != nil {
			var active int64
			if err := tx.QueryRowContext(ctx, c.d.q(`SELECT COALESCE(SUM(weight), 0) FROM jobs WHERE kind = ? AND state IN ('queued', 'running')`),
				j.Kind).Scan(&active); err != nil {
				return err
			}
			// admit reads on tx: the connections of the pool may all be
			// held by Enqueues waiting on the kind's lock behind this one.
			if err := admit(context.WithValue(ctx, txKey{}, tx), active); err != nil {
				return admitError{err}
			}
		}
		now := c.nowMillis()
		return tx.QueryRowContext(ctx, c.d.q(`INSERT INTO jobs (kind, key, state, payload, weight, attempt, max_attempts, run_at, holder, expires, created, ended, error)
VALUES (?, ?, 'queued', ?, ?, 0, ?, ?, '', 0, ?, 0, '') RETURNING id`),
			j.Kind, j.Key, string(j.Payload), j.Weight, max(j.MaxAttempts, 1), now, now).Scan(&id)
	})
	var refused admitError
	switch {
	case errors.As(err, &refused):
		return 0, refused.error
	case errors.Is(err, node.ErrJobActive), err != nil && c.d.isUnique(err):
		return 0, node.ErrJobActive
	case err != nil:
		return 0, fmt.Errorf("sqlcatalog: queuing a %s job: %w", j.Kind, err)
	}
	c.queue().wake(j.Kind)
	return id, nil
}

// EnqueueAll implements node.Queue.
func (c *Catalog) EnqueueAll(ctx context.Context, jobs []node.NewJob) error {
	var kinds []string
	for _, j := range jobs {
		if j.Kind == "" || j.Key == "" {
			return errors.New("sqlcatalog: a job needs a kind and a key")
		}
		kinds = append(kinds, j.Kind)
	}
	slices.Sort(kinds) // the kinds' locks in one order, whoever takes them
	kinds = slices.Compact(kinds)
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		for _, k := range kinds {
			if c.d.claimLock != "" {
				if _, err := tx.ExecContext(ctx, c.d.claimLock, kindLock(k)); err != nil {
					return err
				}
			}
		}
		for _, j := range jobs {
			now := c.nowMillis()
			_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO jobs (kind, key, state, payload, weight, attempt, max_attempts, run_at, holder, expires, created, ended, error)
SELECT ?, ?, 'queued', ?, ?, 0, ?, ?, '', 0, ?, 0, ''
WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE kind = ? AND key = ? AND state IN ('queued', 'running'))`),
				j.Kind, j.Key, string(j.Payload), j.Weight, max(j.MaxAttempts, 1), now, now, j.Kind, j.Key)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlcatalog: queuing %d jobs: %w", len(jobs), err)
	}
	for _, k := range kinds {
		c.queue().wake(k)
	}
	return nil
}

// admitError carries admit's refusal out of the transaction, unchanged.
type admitError struct{ error }

// SetWeight implements node.Queue.
func (c *Catalog) SetWeight(ctx context.Context, id, weight int64) error {
	_, err := c.execJobs(ctx, `UPDATE jobs SET weight = ? WHERE id = ?`, weight, id)
	return err
}

// Count implements node.Queue.
func (c *Catalog) Count(ctx context.Context, kind, keyPrefix string) (node.JobCounts, error) {
	var out node.JobCounts
	rows, err := c.db.QueryContext(ctx, c.d.q(`SELECT state, COUNT(*) FROM jobs WHERE kind = ? AND substr(key, 1, ?) = ? GROUP BY state`),
		kind, utf8.RuneCountInString(keyPrefix), keyPrefix) // substr counts characters
	if err != nil {
		return out, fmt.Errorf("sqlcatalog: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return out, err
		}
		switch state {
		case jobQueued:
			out.Queued = n
		case jobRunning:
			out.Running = n
		case jobDone:
			out.Done = n
		case jobFailed:
			out.Failed = n
		}
	}
	return out, rows.Err()
}

// JobRow is a job as the table holds it, for operators and tests.
type JobRow struct {
	ID                   int64
	Kind, Key, State     string
	Attempt, MaxAttempts int
	Weight               int64
	Holder, Error        string
}

// Jobs lists the jobs of kind (every kind when empty), oldest first.
func (c *Catalog) Jobs(ctx context.Context, kind string) ([]JobRow, error) {
	rows, err := c.db.QueryContext(ctx, c.d.q(`SELECT id, kind, key, state, attempt, max_attempts, weight, holder, error FROM jobs
WHERE kind = ? OR ? = '' ORDER BY id`), kind, kind)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: %w", err)
	}
	defer rows.Close()
	var out []JobRow
	for rows.Next() {
		var r JobRow
		if err := rows.Scan(&r.ID, &r.Kind, &r.Key, &r.State, &r.Attempt, &r.MaxAttempts, &r.Weight, &r.Holder, &r.Error); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

const jobColumns = `id, kind, key, payload, weight, attempt, max_attempts`

func scanJob(row interface{ Scan(...any) error }, extra ...any) (*node.Job, error) {
	j := &node.Job{}
	var payload string
	if err := row.Scan(append([]any{&j.ID, &j.Kind, &j.Key, &payload, &j.Weight, &j.Attempt, &j.MaxAttempts}, extra...)...); err != nil {
		return nil, err
	}
	j.Payload = []byte(payload)
	return j, nil
}

// claim takes the oldest due job of k.kind: queued and due, or running under
// an expired lease with attempts left; nil when there is none.
func (q *jobQueue) claim(k *kindWork) (*node.Job, error) {
	c := q.c
	ctx, cancel := context.WithTimeout(q.ctx, time.Minute)
	defer cancel()
	skip := ""
	if c.d == postgresDialect {
		skip = " FOR UPDATE SKIP LOCKED"
	}
	var j *node.Job
	err := c.inTx(ctx, func(tx *sql.Tx) error {
		now := c.nowMillis()
		var id int64
		var was string
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT id, holder FROM jobs
WHERE kind = ? AND ((state = 'queued' AND run_at <= ?) OR (state = 'running' AND expires < ? AND attempt < max_attempts))
ORDER BY run_at, id LIMIT 1`+skip), k.kind, now, now).Scan(&id, &was)
		if err != nil {
			return err
		}
		j, err = scanJob(tx.QueryRowContext(ctx, c.d.q(`UPDATE jobs SET state = 'running', attempt = attempt + 1, holder = ?, expires = ?
WHERE id = ? RETURNING `+jobColumns), q.holder, now+k.o.Lease.Milliseconds(), id))
		if err != nil {
			return err
		}
		j.TakenFrom = was
		return nil
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return j, err
}

// abandon ends failed the running jobs of k.kind whose lease expired on
// their last attempt, and tells the handler.
func (q *jobQueue) abandon(k *kindWork) {
	c := q.c
	ctx, cancel := context.WithTimeout(q.ctx, time.Minute)
	defer cancel()
	now := c.nowMillis()
	var jobs []*node.Job
	func() {
		if c.d == sqliteDialect {
			c.wmu.Lock()
			defer c.wmu.Unlock()
		}
		rows, err := c.db.QueryContext(ctx, c.d.q(`UPDATE jobs SET state = 'failed', ended = ?, error = ?
WHERE kind = ? AND state = 'running' AND expires < ? AND attempt >= max_attempts
RETURNING `+jobColumns), now, node.ErrJobAbandoned.Error(), k.kind, now)
		if err != nil {
			if q.ctx.Err() == nil {
				k.log.Error("ending the abandoned jobs", "kind", k.kind, "err", err)
			}
			return
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				k.log.Error("ending the abandoned jobs", "kind", k.kind, "err", err)
				return
			}
			jobs = append(jobs, j)
		}
	}()
	for _, j := range jobs {
		q.failed(k, j, node.ErrJobAbandoned)
	}
}

// prune deletes the jobs that ended more than jobsKeep ago.
func (q *jobQueue) prune(k *kindWork) {
	ctx, cancel := context.WithTimeout(q.ctx, time.Minute)
	defer cancel()
	cut := q.c.now().Add(-jobsKeep).UnixMilli()
	if _, err := q.c.execJobs(ctx, `DELETE FROM jobs WHERE kind = ? AND state IN ('done', 'failed') AND ended < ?`, k.kind, cut); err != nil && q.ctx.Err() == nil {
		k.log.Warn("deleting old jobs", "kind", k.kind, "err", err)
	}
}

// end writes how j ended, fenced by its holder and attempt; set is the SET
// clause, its ? first in args.
func (q *jobQueue) end(k *kindWork, j *node.Job, set string, args ...any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.ctx), time.Minute)
	defer cancel()
	n, err := q.c.execJobs(ctx, `UPDATE jobs SET `+set+` WHERE id = ? AND holder = ? AND attempt = ? AND state = 'running'`,
		append(args, j.ID, q.holder, j.Attempt)...)
	switch {
	case err != nil:
		k.log.Error("writing how a job ended; it runs again once its lease expires", "kind", j.Kind, "key", j.Key, "err", err)
	case n == 0:
		k.log.Warn("a job ended after another instance took it over; its end is not written", "kind", j.Kind, "key", j.Key, "attempt", j.Attempt)
	}
}
