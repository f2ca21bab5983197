package pgstore

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Conversations: each session's conversation as one opaque text (the chat
// package writes and reads it) with a version, replaced only by whoever
// read the version in place (compare and swap), so that two processes
// continuing one session at once cannot overwrite each other unseen.

// LoadConversation returns a session's conversation and its version; 0
// and nil when it has none.
func (s *Store) LoadConversation(ctx context.Context, session string) ([]byte, int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return nil, 0, err
	}
	var data string
	var version int64
	err := s.pool.QueryRow(ctx, `SELECT data, version FROM clara_conversations WHERE session = $1`, session).Scan(&data, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, s.fail("reading a conversation", err)
	}
	return []byte(data), version, nil
}

// StoreConversation replaces a session's conversation if its version is
// still version (0: it has none yet); false when another process stored
// one meanwhile.
func (s *Store) StoreConversation(ctx context.Context, session string, data []byte, version int64) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	var tag interface{ RowsAffected() int64 }
	var err error
	if version == 0 {
		tag, err = s.pool.Exec(ctx, `INSERT INTO clara_conversations (session, version, data) VALUES ($1, 1, $2)
			ON CONFLICT (session) DO NOTHING`, session, string(data))
	} else {
		tag, err = s.pool.Exec(ctx, `UPDATE clara_conversations SET data = $2, version = version + 1, updated_at = now()
			WHERE session = $1 AND version = $3`, session, string(data), version)
	}
	if err != nil {
		return false, s.fail("storing a conversation", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ForgetConversation deletes a session's conversation (chat_reset).
func (s *Store) ForgetConversation(ctx context.Context, session string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM clara_conversations WHERE session = $1`, session)
	return s.fail("forgetting a conversation", err)
}

// Notices: a session's queue, drained by whichever process asks first
// (DELETE ... RETURNING: each notice is delivered once). As in a
// process's own queue (core/session), a repeat within the window is
// counted in the notice it repeats, and a deferred notice waits for its
// event and its time.

// Notice is a notice as the store keeps it.
type Notice struct {
	// Text is the notice's JSON without its count: repeats have equal
	// texts.
	Text []byte
	// Count is how many identical notices it stands for (at least 1).
	Count int
	// DeliverOn and DeliverAfterMS defer its delivery: until the event
	// fires in the session (ReleaseNotices), for that many milliseconds.
	DeliverOn      string
	DeliverAfterMS int64
}

// mergeNotice counts a notice in the newest identical one of its session
// queued within the window and still waiting in the same way, or queues
// it. $1 session, $2 text, $3 deliver_on, $4 deliver_after_ms, $5 the
// window in ms (0: never merged), $6 count.
const mergeNotice = `
WITH hit AS (
	SELECT id FROM clara_notices
	WHERE $5::bigint > 0 AND session = $1::text AND notice = $2::text AND deliver_on = $3::text
		AND deliver_after_ms = $4::bigint AND held = ($3::text <> '')
		AND queued_at >= clock_timestamp() - $5::bigint * interval '1 millisecond'
	ORDER BY id DESC LIMIT 1
), merged AS (
	UPDATE clara_notices n SET count = n.count + $6::int FROM hit WHERE n.id = hit.id RETURNING n.id
)
INSERT INTO clara_notices (session, notice, count, deliver_on, deliver_after_ms, held, not_before)
SELECT $1::text, $2::text, $6::int, $3::text, $4::bigint, $3::text <> '',
	CASE WHEN $4::bigint > 0 THEN clock_timestamp() + $4::bigint * interval '1 millisecond' END
WHERE NOT EXISTS (SELECT 1 FROM merged)`

// QueueNotices appends notices to a session's queue; with a window, a
// notice identical to one queued less than window before and not
// delivered yet (the same text and delivery, and still held if it is
// held) is counted in it. The merge runs under a transaction-scoped
// advisory lock on the session, so that two processes queueing the same
// notice at once make one row.
func (s *Store) QueueNotices(ctx context.Context, session string, notices []Notice, window time.Duration) error {
	if len(notices) == 0 {
		return nil
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	plain := window <= 0
	for i := range notices {
		if notices[i].DeliverOn != "" || notices[i].DeliverAfterMS > 0 {
			plain = false
		}
	}
	if plain {
		texts := make([]string, len(notices))
		counts := make([]int32, len(notices))
		for i, n := range notices {
			texts[i], counts[i] = string(n.Text), int32(max(n.Count, 1))
		}
		_, err := s.pool.Exec(ctx, `INSERT INTO clara_notices (session, notice, count) SELECT $1, t, c FROM unnest($2::text[], $3::int[]) AS u(t, c)`, session, texts, counts)
		return s.fail("queueing notices", err)
	}
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('clara_notices:' || $1::text, 0))`, session)
	for _, n := range notices {
		b.Queue(mergeNotice, session, string(n.Text), n.DeliverOn, n.DeliverAfterMS, window.Milliseconds(), max(n.Count, 1))
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
	return s.fail("queueing notices", err)
}

// ReleaseNotices lets the next drain take a session's notices held until
// event (their deliver_after_ms still applies).
func (s *Store) ReleaseNotices(ctx context.Context, session, event string) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `UPDATE clara_notices SET held = false WHERE session = $1 AND deliver_on = $2 AND held`, session, event)
	return s.fail("releasing notices", err)
}

// DrainNotices takes a session's notices that may be delivered now (not
// held, their time come), oldest first: the newest keep of them, and how
// many older ones were dropped. The others stay queued.
func (s *Store) DrainNotices(ctx context.Context, session string, keep int) ([]Notice, int, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, `DELETE FROM clara_notices WHERE session = $1 AND NOT held
		AND (not_before IS NULL OR not_before <= clock_timestamp()) RETURNING id, notice, count`, session)
	if err != nil {
		return nil, 0, s.fail("draining notices", err)
	}
	type row struct {
		id     int64
		notice string
		count  int
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.notice, &r.count); err != nil {
			rows.Close()
			return nil, 0, s.fail("draining notices", err)
		}
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, s.fail("draining notices", err)
	}
	// RETURNING has no order: put them back in the order they came.
	sort.Slice(got, func(i, j int) bool { return got[i].id < got[j].id })
	dropped := 0
	if len(got) > keep {
		dropped = len(got) - keep
		got = got[dropped:]
	}
	out := make([]Notice, len(got))
	for i, r := range got {
		out[i] = Notice{Text: []byte(r.notice), Count: r.count}
	}
	return out, dropped, nil
}

// Approvals: a call held for approval in one process is a row every
// process sees; whichever decides first wins (an UPDATE of a pending row),
// and the asking process is told (a notification, and a look at the row
// whenever its listener reconnects).

// PendingApproval is a row of approvals waiting for a decision.
type PendingApproval struct {
	ID      int64
	Request []byte // as the asker wrote it
	AskedAt time.Time
	// Mine: asked by this process.
	Mine bool
}

// AskApproval records a call held for approval until expires, and returns
// its id (unique across the processes).
func (s *Store) AskApproval(ctx context.Context, request []byte, timeout time.Duration) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	var id int64
	err := s.pool.QueryRow(ctx, `INSERT INTO clara_approvals (instance, request, expires_at)
		VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING id`, s.instance, string(request), timeout.Seconds()).Scan(&id)
	return id, s.fail("recording an approval", err)
}

// ErrApprovalGone is DecideApproval's error for an approval that waits for
// no decision any more.
var ErrApprovalGone = errors.New("no approval of that id is waiting")

// DecideApproval gives a pending approval its decision (state "approved"
// or "rejected", decision a JSON text) and tells its asker; ErrApprovalGone
// when it was decided already, timed out, or the process that asked is
// gone (then it is marked abandoned).
func (s *Store) DecideApproval(ctx context.Context, id int64, stateName string, decision []byte) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	var decided bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var alive bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = a.instance)
			FROM clara_approvals a WHERE id = $1 AND state = 'pending' AND expires_at > now() FOR UPDATE`, id).Scan(&alive)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if !alive {
			_, err = tx.Exec(ctx, `UPDATE clara_approvals SET state = 'abandoned', decided_at = now() WHERE id = $1`, id)
			return err
		}
		if _, err = tx.Exec(ctx, `UPDATE clara_approvals SET state = $2, decision = $3, decided_at = now() WHERE id = $1`,
			id, stateName, string(decision)); err != nil {
			return err
		}
		decided = true
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, "a:"+s.instance+":"+strconv.FormatInt(id, 10))
		return err
	})
	if err != nil {
		return s.fail("deciding an approval", err)
	}
	if !decided {
		return ErrApprovalGone
	}
	return nil
}

// EndApproval closes a pending approval without a decision ("timed_out",
// "cancelled"); false when it had been decided meanwhile (read it with
// ApprovalOutcome).
func (s *Store) EndApproval(ctx context.Context, id int64, stateName string) (bool, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE clara_approvals SET state = $2, decided_at = now() WHERE id = $1 AND state = 'pending'`, id, stateName)
	if err != nil {
		return false, s.fail("closing an approval", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ApprovalOutcome reads an approval's state and decision ("" while
// pending).
func (s *Store) ApprovalOutcome(ctx context.Context, id int64) (stateName string, decision []byte, err error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	var d *string
	err = s.pool.QueryRow(ctx, `SELECT state, decision FROM clara_approvals WHERE id = $1`, id).Scan(&stateName, &d)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, ErrApprovalGone
	}
	if err != nil {
		return "", nil, s.fail("reading an approval", err)
	}
	if d != nil {
		decision = []byte(*d)
	}
	return stateName, decision, nil
}

// PendingApprovals lists the approvals waiting for a decision in every
// process whose asker is still connected, oldest first.
func (s *Store) PendingApprovals(ctx context.Context) ([]PendingApproval, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, request, asked_at, instance FROM clara_approvals a
		WHERE state = 'pending' AND expires_at > now()
		AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = a.instance) ORDER BY id`)
	if err != nil {
		return nil, s.fail("listing approvals", err)
	}
	defer rows.Close()
	var out []PendingApproval
	for rows.Next() {
		var p PendingApproval
		var req, inst string
		if err := rows.Scan(&p.ID, &req, &p.AskedAt, &inst); err != nil {
			return nil, s.fail("listing approvals", err)
		}
		p.Request, p.Mine = []byte(req), inst == s.instance
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("listing approvals", err)
	}
	return out, nil
}

// Rule changes: rules_load and plugin_enable in one process are appended
// here (an opaque text each) and announced; every process applies them in
// order of seq, those made before it started included.

// RuleChange is one announced change.
type RuleChange struct {
	Seq    int64
	Origin string // the instance that made it
	Change []byte
}

// AnnounceRules appends a change and tells the other processes.
func (s *Store) AnnounceRules(ctx context.Context, change []byte) (int64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	var seq int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO clara_rule_changes (origin, change) VALUES ($1, $2) RETURNING seq`,
			s.instance, string(change)).Scan(&seq); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, "r:"+s.instance+":"+strconv.FormatInt(seq, 10))
		return err
	})
	return seq, s.fail("announcing a rule change", err)
}

// RuleChanges returns the changes after seq, in order.
func (s *Store) RuleChanges(ctx context.Context, after int64) ([]RuleChange, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, origin, change FROM clara_rule_changes WHERE seq > $1 ORDER BY seq`, after)
	if err != nil {
		return nil, s.fail("reading rule changes", err)
	}
	defer rows.Close()
	var out []RuleChange
	for rows.Next() {
		var c RuleChange
		var text string
		if err := rows.Scan(&c.Seq, &c.Origin, &text); err != nil {
			return nil, s.fail("reading rule changes", err)
		}
		c.Change = []byte(text)
		out = append(out, c)
	}
	return out, s.fail("reading rule changes", rows.Err())
}
