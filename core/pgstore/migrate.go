package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions, in order: migrations[i] takes the
// schema from version i to i+1. A released migration is never edited; a
// change is a new one at the end.
var migrations = []string{
	// 1: issue 31's tables.
	`
CREATE TABLE clara_state (
	scope      text        NOT NULL,
	key        text        NOT NULL,
	value      text        NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (scope, key)
);

-- Rate windows: the times (ms, the database's clock) of the last calls
-- admitted under a key, at most the limit of them.
CREATE TABLE clara_rate (
	key     text     PRIMARY KEY,
	times   bigint[] NOT NULL,
	last_ms bigint   NOT NULL
);

-- clara_rate_admit admits one call under key when fewer than n were
-- admitted in the span_ms before now, now being read once the key's row is
-- locked, so that the times of a key only grow and every process is
-- measured by one clock. It returns the time the call was admitted at
-- (ms) and 0, or 0 and how long until the oldest call leaves the window.
-- A full window is seen without the lock first: times only grow, so n
-- calls in the window read then are still there, and a refusal neither
-- waits for the admissions of other processes nor writes anything.
CREATE FUNCTION clara_rate_admit(k text, n int, span_ms bigint, OUT admitted_ms bigint, OUT wait_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
	t      bigint[];
	now_ms bigint;
	kept   bigint[];
BEGIN
	SELECT times INTO t FROM clara_rate WHERE key = k;
	IF NOT FOUND THEN
		INSERT INTO clara_rate (key, times, last_ms) VALUES (k, '{}', 0) ON CONFLICT (key) DO NOTHING;
	ELSIF cardinality(t) >= n THEN
		now_ms := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
		IF t[cardinality(t) - n + 1] > now_ms - span_ms THEN
			admitted_ms := 0;
			wait_ms := t[cardinality(t) - n + 1] + span_ms - now_ms;
			RETURN;
		END IF;
	END IF;
	SELECT times INTO t FROM clara_rate WHERE key = k FOR UPDATE;
	now_ms := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
	-- t is in ascending order: keep the times still in the window, at
	-- most the last n.
	kept := ARRAY(SELECT x FROM unnest(t) WITH ORDINALITY AS u(x, i) WHERE x > now_ms - span_ms ORDER BY i);
	IF cardinality(kept) >= n THEN
		admitted_ms := 0;
		wait_ms := kept[cardinality(kept) - n + 1] + span_ms - now_ms;
		RETURN;
	END IF;
	UPDATE clara_rate SET times = kept || now_ms, last_ms = now_ms WHERE key = k;
	admitted_ms := now_ms;
	wait_ms := 0;
END $$;

CREATE TABLE clara_budgets (
	session text NOT NULL,
	tool    text NOT NULL,
	used    int  NOT NULL,
	PRIMARY KEY (session, tool)
);

CREATE TABLE clara_conversations (
	session    text        PRIMARY KEY,
	version    bigint      NOT NULL,
	data       text        NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX clara_conversations_updated ON clara_conversations (updated_at);

CREATE TABLE clara_notices (
	id      bigserial PRIMARY KEY,
	session text      NOT NULL,
	notice  text      NOT NULL
);
CREATE INDEX clara_notices_session ON clara_notices (session, id);

-- state: pending, then approved, rejected, timed_out, cancelled or
-- abandoned. instance is the application_name of the asking process.
CREATE TABLE clara_approvals (
	id         bigserial   PRIMARY KEY,
	instance   text        NOT NULL,
	request    text        NOT NULL,
	state      text        NOT NULL DEFAULT 'pending',
	decision   text,
	asked_at   timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL,
	decided_at timestamptz
);
CREATE INDEX clara_approvals_pending ON clara_approvals (id) WHERE state = 'pending';

CREATE TABLE clara_rule_changes (
	seq    bigserial   PRIMARY KEY,
	origin text        NOT NULL,
	change text        NOT NULL,
	at     timestamptz NOT NULL DEFAULT now()
);
`,
	// 2: seed 004's accumulator on the shared store (issue 32): a repeat
	// within notices.dedupe_window_ms counted in the notice it repeats,
	// deferred notices held until their event (held) and their time
	// (not_before).
	`
ALTER TABLE clara_notices
	ADD COLUMN count            int         NOT NULL DEFAULT 1,
	ADD COLUMN queued_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
	ADD COLUMN deliver_on       text        NOT NULL DEFAULT '',
	ADD COLUMN deliver_after_ms bigint      NOT NULL DEFAULT 0,
	ADD COLUMN held             boolean     NOT NULL DEFAULT false,
	ADD COLUMN not_before       timestamptz;
CREATE INDEX clara_notices_held ON clara_notices (session, deliver_on) WHERE held;
`,
}

// SchemaVersion is the version this Clara writes and reads.
var SchemaVersion = len(migrations)

// migrateLock is the advisory lock that makes one process at a time
// migrate ("clara" in ASCII).
const migrateLock = 0x636c617261

var errNewerSchema = errors.New("the schema is newer than this Clara's")

// Migrate brings the database's schema to SchemaVersion: each missing
// migration in a transaction of its own, under an advisory lock, so that
// processes starting together migrate once and none sees half a schema.
// It is idempotent: a database at SchemaVersion is left alone.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var version int
	// Most starts find the schema current: read it without the lock first.
	if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT max(version) FROM clara_schema), 0)`).Scan(&version); err == nil && version == SchemaVersion {
		return nil
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrateLock)); err != nil {
		return err
	}
	defer func() {
		// Unlocked on a context of its own: ctx may have ended.
		uctx, cancel := context.WithTimeout(context.Background(), 5e9)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, int64(migrateLock)); err != nil {
			conn.Conn().Close(uctx) // the lock goes with the session
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS clara_schema (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM clara_schema`).Scan(&version); err != nil {
		return err
	}
	if version > SchemaVersion {
		return fmt.Errorf("%w: version %d, this Clara knows %d", errNewerSchema, version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO clara_schema (version) VALUES ($1)`, v+1); err != nil {
			_ = tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}
