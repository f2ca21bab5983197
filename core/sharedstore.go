package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/pgstore"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/session"
	"github.com/clara-lib/clara/core/toolbox"
)

// The shared store (issue 31): with store.backend = "postgres", the state
// that makes governance hold across processes lives in PostgreSQL
// (core/pgstore): rule state, rate windows, budgets per session,
// conversations, pending approvals, session notices, and the rule changes
// every process applies. The snapshot holds the store of its
// configuration (nil for the embedded default, which then costs a call
// nothing but that nil check where a limit applies).

// sharedStore opens the store a configuration names and keeps it while the
// configurations that follow name the same one.
type sharedStore struct {
	e    *Engine
	mu   sync.Mutex
	st   *pgstore.Store
	key  string        // what it was opened with
	stop chan struct{} // ends the sweeper

	// The rule changes of other processes are applied one catch-up at a
	// time, in order; applied is the last seq in force here.
	rulesMu sync.Mutex
	applied atomic.Int64
}

// storeURL reads the URL of store.url_env, which must be set and parse.
func (e *Engine) storeURL(c *config.Config) (string, error) {
	url := e.env.Getenv(c.Store.URLEnv)
	if url == "" {
		return "", protocol.Problems{{Message: fmt.Sprintf("store.backend is \"postgres\" but the environment variable %s (store.url_env) is empty: it must hold the database's URL", c.Store.URLEnv)}}
	}
	e.out.secrets.Add(url) // never in a log line, an error or an envelope
	if err := pgstore.CheckURL(url, func(pw string) { e.out.secrets.Add(pw) }); err != nil {
		return "", protocol.Problems{{Message: fmt.Sprintf("%s (store.url_env): %v", c.Store.URLEnv, err)}}
	}
	return url, nil
}

// checkStore is prepare's check of the [store] table.
func (e *Engine) checkStore(c *config.Config) error {
	if c.Store.Backend != config.BackendPostgres {
		return nil
	}
	_, err := e.storeURL(c)
	return err
}

// sync returns the store configuration c names (nil: none), opening it or
// keeping the one open, and applies c's choices (on_unavailable) to the
// parts of the engine that hold their own (sessions' notices,
// conversations). Called by commit, under e.admin.
func (sh *sharedStore) sync(c *config.Config) *pgstore.Store {
	e := sh.e
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var st *pgstore.Store
	if c.Store.Backend == config.BackendPostgres {
		url, err := e.storeURL(c)
		key := fmt.Sprintf("%s\x00%d\x00%d", url, c.Store.PoolSize, c.Store.StatementTimeoutMS)
		switch {
		case err != nil:
			e.log.Logf(logging.Error, "store: %v", err) // prepare checked it: the environment changed since
		case sh.st != nil && sh.key == key:
			st = sh.st
		default:
			st, err = pgstore.Open(pgstore.Options{URL: url, PoolSize: c.Store.PoolSize,
				StatementTimeout: time.Duration(c.Store.StatementTimeoutMS) * time.Millisecond,
				Go:               e.Go, Log: func(m string) { e.log.Log(logging.Warn, m) }})
			if err != nil {
				e.log.Logf(logging.Error, "store: %v", err)
				break
			}
			st.SetHandlers(pgstore.Handlers{
				ApprovalDecided: func(id int64) { e.Go("an approval decided elsewhere", func() { e.approvalDecidedElsewhere(id) }) },
				RulesChanged:    func(int64) { e.Go("rule changes of other processes", sh.catchUp) },
				Connected: func() {
					e.Go("the shared store reconnected", func() {
						e.recheckApprovals()
						sh.catchUp()
					})
				},
			})
			sh.closeLocked()
			sh.st, sh.key = st, key
			sh.stop = make(chan struct{})
			sh.applied.Store(0)
			stop := sh.stop
			e.Go("the shared store's sweeper", func() { sh.sweep(st, stop) })
			e.log.Logf(logging.Info, "store: %s", st.Name())
		}
	}
	if st == nil {
		sh.closeLocked()
		e.sessions.SetNoticeStore(nil, false, nil)
		e.out.convs.SetStore(nil, false, nil)
		return nil
	}
	ou := c.Store.OnUnavailable
	logStore := func(err error) { e.log.Logf(logging.Warn, "%s", e.out.secrets.String(err.Error())) }
	e.sessions.SetNoticeStore(noticeStore{e, st}, ou.Notices == config.UnavailableLocal, logStore)
	e.out.convs.SetStore(conversationStore{e, st}, ou.Conversations == config.UnavailableLocal, logStore)
	return st
}

// closeLocked closes the store open, if any. Called with sh.mu held.
func (sh *sharedStore) closeLocked() {
	if sh.st == nil {
		return
	}
	close(sh.stop)
	sh.st.Close()
	sh.st, sh.key = nil, ""
}

// close closes the store (Engine.Close); the next configuration change
// opens it again.
func (sh *sharedStore) close() {
	sh.mu.Lock()
	sh.closeLocked()
	sh.mu.Unlock()
}

// sweepEvery is how often a process deletes what the store no longer
// needs (idle rate windows, old conversations and approvals).
const sweepEvery = 5 * time.Minute

func (sh *sharedStore) sweep(st *pgstore.Store, stop chan struct{}) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		if s := sh.e.current.Load(); s != nil && s.shared == st {
			retention := time.Duration(s.config.Store.RetentionHours) * time.Hour
			if err := st.Sweep(context.Background(), retention); err != nil && !errors.Is(err, pgstore.ErrUnavailable) {
				sh.e.log.Logf(logging.Warn, "store: %v", err)
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// storeError is the envelope's error of a store that failed: unavailable,
// naming the store, when it could not be reached in time; tool_failed
// otherwise. The message never holds the URL or its password.
func (e *Engine) storeError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	msg := e.out.secrets.String(err.Error())
	if errors.Is(err, pgstore.ErrUnavailable) {
		return &protocol.Error{Code: protocol.Unavailable, Message: msg, Details: []byte(`{"store":"postgres"}`)}
	}
	return &protocol.Error{Code: protocol.ToolFailed, Message: msg}
}

// local reports whether a kind of state falls back to the process's own
// when the store is unavailable.
func local(err error, onUnavailable string) bool {
	return errors.Is(err, pgstore.ErrUnavailable) && onUnavailable == config.UnavailableLocal
}

// storeCtx bounds a use of the store on the call path by the tool's own
// deadline too: the envelope comes within it.
func storeCtx(ctx context.Context, s *snapshot, t *toolbox.Tool) (context.Context, context.CancelFunc) {
	ms := t.Limits.TimeoutMS
	if ms == 0 {
		ms = s.defaults.TimeoutMS
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// sharedAdmit is rate_per_min in the shared store: every process's calls
// of the tool (or of the tool in the session) in one window. Limits fail
// closed: a store that cannot say refuses the call, unless
// on_unavailable.limits is "local" (this process's own window then).
func (e *Engine) sharedAdmit(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall, start time.Time) *protocol.Error {
	perSession := t.Limits.RateScope == toolbox.RateScopeSession
	// PostgreSQL's text holds no NUL: the unit separator parts the key.
	key := "rate\x1f" + t.Name
	if perSession {
		key += "\x1f" + c.session
	}
	ctx, cancel := storeCtx(ctx, s, t)
	defer cancel()
	wait, _, err := s.shared.Admit(ctx, key, t.Limits.RatePerMin, toolbox.RateSpan)
	switch {
	case err == nil && wait == 0:
		return nil
	case err == nil:
		return toolbox.RateLimitedError(t.Name, t.Limits.RatePerMin, perSession, wait)
	case local(err, s.config.Store.OnUnavailable.Limits):
		return t.Admit(c.session, start)
	}
	perr := e.storeError(err)
	perr.Message = fmt.Sprintf("tool %q was not run: its rate_per_min is kept in %s", t.Name, perr.Message)
	return perr
}

// takeSessionBudget counts a call against the tool's budget per session,
// in the shared store when there is one (fail closed, as limits do).
func (e *Engine) takeSessionBudget(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall, max int) (bool, *protocol.Error) {
	if s.shared == nil {
		return e.sessions.Get(c.session).TakeBudget(t.Name, max), nil
	}
	sctx, cancel := storeCtx(ctx, s, t)
	defer cancel()
	ok, err := s.shared.TakeBudget(sctx, c.session, t.Name, max)
	switch {
	case err == nil:
		return ok, nil
	case local(err, s.config.Store.OnUnavailable.Limits):
		return e.sessions.Get(c.session).TakeBudget(t.Name, max), nil
	}
	perr := e.storeError(err)
	perr.Message = fmt.Sprintf("tool %q was not run: its max_calls_per_session is kept in %s", t.Name, perr.Message)
	return false, perr
}

// giveBackSessionBudget returns what takeSessionBudget counted.
func (e *Engine) giveBackSessionBudget(s *snapshot, t *toolbox.Tool, c *toolCall) {
	if s.shared != nil {
		err := s.shared.GiveBackBudget(context.Background(), c.session, t.Name)
		if err == nil || !local(err, s.config.Store.OnUnavailable.Limits) {
			if err != nil {
				e.log.Logf(logging.Warn, "%s", e.out.secrets.String(err.Error()))
			}
			return
		}
	}
	e.sessions.Get(c.session).GiveBackBudget(t.Name)
}

// endSharedSession forgets what the store keeps of a session that ended.
func (e *Engine) endSharedSession(session string) {
	if s := e.current.Load(); s.shared != nil {
		if err := s.shared.EndSession(context.Background(), session); err != nil {
			e.log.Logf(logging.Warn, "session_end %q: %s", session, e.out.secrets.String(err.Error()))
		}
	}
}

// noticeStore is the store as sessions keep their notices in it.
type noticeStore struct {
	e  *Engine
	st *pgstore.Store
}

func (n noticeStore) QueueNotices(session string, ns []protocol.Notice, window time.Duration) error {
	rows := make([]pgstore.Notice, len(ns))
	for i := range ns {
		nt := ns[i]
		count := max(nt.Count, 1)
		nt.Count = 0                 // the count is a column: repeats have equal texts
		text, _ := json.Marshal(&nt) // strings only: cannot fail
		rows[i] = pgstore.Notice{Text: text, Count: count, DeliverOn: nt.DeliverOn, DeliverAfterMS: int64(nt.DeliverAfterMS)}
	}
	return n.wrap(n.st.QueueNotices(context.Background(), session, rows, window))
}

func (n noticeStore) ReleaseNotices(session, event string) error {
	return n.wrap(n.st.ReleaseNotices(context.Background(), session, event))
}

func (n noticeStore) DrainNotices(session string, keep int) ([]protocol.Notice, int, error) {
	rows, dropped, err := n.st.DrainNotices(context.Background(), session, keep)
	if err != nil {
		return nil, 0, n.wrap(err)
	}
	out := make([]protocol.Notice, 0, len(rows))
	for _, r := range rows {
		var nt protocol.Notice
		if json.Unmarshal(r.Text, &nt) == nil {
			if r.Count > 1 {
				nt.Count = r.Count
			}
			out = append(out, nt)
		}
	}
	return out, dropped, nil
}

func (n noticeStore) wrap(err error) error {
	if err == nil {
		return nil
	}
	return n.e.storeError(err)
}

// conversationStore is the store as the chat keeps conversations in it.
type conversationStore struct {
	e  *Engine
	st *pgstore.Store
}

func (cs conversationStore) LoadConversation(ctx context.Context, session string) ([]byte, int64, error) {
	data, v, err := cs.st.LoadConversation(ctx, session)
	return data, v, cs.wrap(err)
}

func (cs conversationStore) StoreConversation(ctx context.Context, session string, data []byte, version int64) (bool, error) {
	ok, err := cs.st.StoreConversation(ctx, session, data, version)
	return ok, cs.wrap(err)
}

func (cs conversationStore) ForgetConversation(ctx context.Context, session string) error {
	return cs.wrap(cs.st.ForgetConversation(ctx, session))
}

func (cs conversationStore) wrap(err error) error {
	if err == nil {
		return nil
	}
	return cs.e.storeError(err)
}

var _ session.NoticeStore = noticeStore{}

// Rule changes across processes: rules_load and plugin_enable announce
// what they changed; the other processes apply it through the same
// prepare and commit (a change that does not load here is logged, and the
// rules in force stay).

// ruleChange is one announced change.
type ruleChange struct {
	Sources []announcedSource `json:"sources,omitempty"`
	Files   []string          `json:"files,omitempty"`
	Root    string            `json:"root,omitempty"` // the announcer's project root
	Plugin  string            `json:"plugin,omitempty"`
	Enabled bool              `json:"enabled,omitempty"`
}

type announcedSource struct {
	Name      string `json:"name"`
	Text      string `json:"text"`
	Dir       string `json:"dir,omitempty"`
	Root      string `json:"root,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Shadow    bool   `json:"shadow,omitempty"`
}

// announceRules tells the other processes of a change made here. The
// change is in force here already; one the store could not take is
// logged (the others miss it).
func (e *Engine) announceRules(s *snapshot, rc ruleChange) {
	if s.shared == nil {
		return
	}
	text, err := json.Marshal(rc)
	if err == nil {
		var seq int64
		seq, err = s.shared.AnnounceRules(context.Background(), text)
		if err == nil {
			e.shared.markApplied(seq)
			return
		}
	}
	e.log.Logf(logging.Error, "store: the rule change was made here but not announced to the other processes: %s", e.out.secrets.String(err.Error()))
}

// markApplied notes that seq is in force here, when it is the next one.
func (sh *sharedStore) markApplied(seq int64) {
	sh.applied.CompareAndSwap(seq-1, seq)
}

// catchUp applies the rule changes other processes announced since the
// last one applied here.
func (sh *sharedStore) catchUp() {
	e := sh.e
	sh.rulesMu.Lock()
	defer sh.rulesMu.Unlock()
	s := e.current.Load()
	if s == nil || s.shared == nil {
		return
	}
	changes, err := s.shared.RuleChanges(context.Background(), sh.applied.Load())
	if err != nil {
		e.log.Logf(logging.Warn, "store: reading the rule changes: %s", e.out.secrets.String(err.Error()))
		return
	}
	for _, c := range changes {
		if c.Origin != s.shared.Instance() {
			e.applyRuleChange(c)
		}
		sh.applied.Store(c.Seq)
	}
}

// applyRuleChange applies a change another process announced.
func (e *Engine) applyRuleChange(c pgstore.RuleChange) {
	var rc ruleChange
	if err := json.Unmarshal(c.Change, &rc); err != nil {
		e.log.Logf(logging.Error, "store: rule change %d does not read: %v", c.Seq, err)
		return
	}
	root := e.current.Load().config.ProjectRoot
	var added []ruleSource
	for _, src := range rc.Sources {
		added = append(added, ruleSource{Name: src.Name, Text: []byte(src.Text), Dir: rebase(src.Dir, rc.Root, root),
			Root: rebase(src.Root, rc.Root, root), Namespace: src.Namespace, Shadow: src.Shadow})
	}
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		if rc.Plugin != "" {
			return cur.tree, cur.runtime.withEnabled(rc.Plugin, rc.Enabled)
		}
		return cur.tree, cur.runtime.withSources(added, rc.Files)
	}, nil)
	retire(left)
	if err != nil {
		e.log.Logf(logging.Error, "store: rule change %d of another process does not load here (the rules in force are unchanged): %s",
			c.Seq, e.out.secrets.String(err.Error()))
		return
	}
	e.log.Logf(logging.Info, "store: rule change %d of another process applied", c.Seq)
}

// rebase puts a path under the announcer's project root under ours.
func rebase(path, from, to string) string {
	if from == "" || path == "" {
		return path
	}
	if path == from {
		return to
	}
	if rest, ok := strings.CutPrefix(path, from+"/"); ok {
		return to + "/" + rest
	}
	return path
}

// announcedSources is how sources travel in a ruleChange.
func announcedSources(srcs []ruleSource) []announcedSource {
	out := make([]announcedSource, len(srcs))
	for i, s := range srcs {
		out[i] = announcedSource{Name: s.Name, Text: string(s.Text), Dir: s.Dir, Root: s.Root, Namespace: s.Namespace, Shadow: s.Shadow}
	}
	return out
}

// stateErr is a rule state's error as a call reports it: the shared
// store's unavailable names the store; SQLite's errors stay as they were.
func (e *Engine) stateErr(err error) error {
	if err == nil || !errors.Is(err, pgstore.ErrUnavailable) {
		return err
	}
	return e.storeError(err)
}
