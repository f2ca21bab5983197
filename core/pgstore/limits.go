package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Admit admits one call under key when fewer than n were admitted in the
// rolling span before now, every process together: one statement
// (clara_rate_admit), which locks the key's row, so that concurrent
// admissions of one key queue there and each sees the others'. It returns
// 0 and the time the call was admitted at (the database's clock), or how
// long until a call may be admitted.
func (s *Store) Admit(ctx context.Context, key string, n int, span time.Duration) (wait time.Duration, at time.Time, err error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return 0, time.Time{}, err
	}
	var admittedMS, waitMS int64
	err = s.pool.QueryRow(ctx, `SELECT admitted_ms, wait_ms FROM clara_rate_admit($1, $2, $3)`,
		key, n, span.Milliseconds()).Scan(&admittedMS, &waitMS)
	if err != nil {
		return 0, time.Time{}, s.fail("admitting a rate-limited call", err)
	}
	if admittedMS == 0 {
		return max(time.Duration(waitMS)*time.Millisecond, time.Millisecond), time.Time{}, nil
	}
	return 0, time.UnixMilli(admittedMS), nil
}

// TakeBudget counts one call of tool in session against a budget of max
// calls, every process together; false, counting nothing, when it is
// spent (max is at least 1). One statement: the row's lock orders
// concurrent takes.
func (s *Store) TakeBudget(ctx context.Context, session, tool string, max int) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	var used int
	err := s.pool.QueryRow(ctx, `INSERT INTO clara_budgets (session, tool, used) VALUES ($1, $2, 1)
		ON CONFLICT (session, tool) DO UPDATE SET used = clara_budgets.used + 1 WHERE clara_budgets.used < $3
		RETURNING used`, session, tool, max).Scan(&used)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.fail("counting a call against its budget", err)
	}
	return true, nil
}

// GiveBackBudget returns a call TakeBudget counted, for a call that did
// not run after all.
func (s *Store) GiveBackBudget(ctx context.Context, session, tool string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE clara_budgets SET used = used - 1 WHERE session = $1 AND tool = $2 AND used > 0`, session, tool)
	return s.fail("giving back a budget's call", err)
}

// EndSession forgets what the store keeps for a session that ended: its
// budgets, its queued notices and its conversation (its rule state stays,
// as in SQLite).
func (s *Store) EndSession(ctx context.Context, session string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	var b pgx.Batch
	b.Queue(`DELETE FROM clara_budgets WHERE session = $1`, session)
	b.Queue(`DELETE FROM clara_notices WHERE session = $1`, session)
	b.Queue(`DELETE FROM clara_conversations WHERE session = $1`, session)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
	return s.fail("ending a session", err)
}

// Sweep deletes what nobody needs any more: rate windows idle for an hour,
// conversations idle for longer than retention (0: kept), approvals
// decided a day ago, pending ones whose asker's deadline passed. Rule
// changes are kept: a process that starts reads them all.
func (s *Store) Sweep(ctx context.Context, retention time.Duration) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	var b pgx.Batch
	b.Queue(`DELETE FROM clara_rate WHERE last_ms < floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - 3600000`)
	if retention > 0 {
		b.Queue(`DELETE FROM clara_conversations WHERE updated_at < now() - make_interval(secs => $1)`, retention.Seconds())
	}
	b.Queue(`DELETE FROM clara_approvals WHERE state <> 'pending' AND coalesce(decided_at, expires_at) < now() - interval '1 day'`)
	b.Queue(`UPDATE clara_approvals SET state = 'timed_out', decided_at = now() WHERE state = 'pending' AND expires_at < now() - interval '1 minute'`)
	err := s.pool.SendBatch(ctx, &b).Close()
	return s.fail("sweeping", err)
}
