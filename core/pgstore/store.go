package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgxlisten"
)

// Options open a Store.
type Options struct {
	// URL is the database's URL or key=value connection string, password
	// included (from the environment; the caller registers it with its
	// redactor).
	URL string
	// PoolSize is the most connections calls use; the listener has one
	// more of its own.
	PoolSize int
	// StatementTimeout bounds each use of the database, waiting for a
	// connection included (and the server's statement_timeout).
	StatementTimeout time.Duration
	// Go starts a goroutine (the engine's guarded Engine.Go); nil: go.
	Go func(name string, fn func())
	// Log reports what goes wrong in the background (the listener); nil
	// discards it.
	Log func(msg string)
}

// Handlers are told what other processes did. Each runs on the listener's
// goroutine and must not block.
type Handlers struct {
	ApprovalDecided func(id int64)  // a pending approval got its decision
	RulesChanged    func(seq int64) // a process announced a rule change
	// Connected runs when the listener has (re)connected: notifications
	// sent while it was away were lost, so whatever waits on one looks
	// again.
	Connected func()
}

// Store is one process's handle on the shared database. Safe for
// concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	timeout  time.Duration
	name     string // "PostgreSQL at HOST:PORT, database DB": no user, no password
	instance string // this process's name for the others (application_name)
	log      func(string)

	migrated atomic.Bool
	migrate  sync.Mutex

	handlers atomic.Pointer[Handlers]

	// listening: the listener's connection is up, so other processes'
	// state changes arrive and cached scopes can be trusted.
	listening  atomic.Bool
	stopListen context.CancelFunc
	listenDone chan struct{}

	state stateCache
}

// ErrUnavailable is what every operation's error wraps when the database
// could not be reached or did not answer in time (or its connection was
// lost): the caller answers unavailable, or falls back.
var ErrUnavailable = errors.New("unavailable")

// unavailableError is ErrUnavailable with its cause.
type unavailableError struct {
	store string
	cause error
}

func (e *unavailableError) Error() string {
	return e.store + " is unavailable: " + e.cause.Error()
}

func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }
func (e *unavailableError) Unwrap() error        { return e.cause }

// Open prepares a Store: it checks the URL and makes the pool, but does
// not connect; the first use connects (and migrates the schema), and a
// database that is away then makes that use fail with ErrUnavailable.
// Open starts the listener's goroutine, which Close stops.
func Open(o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		// pgconn's parse errors quote the URL: say only what is wrong.
		return nil, errors.New("the PostgreSQL URL does not parse: give postgres://USER:PASSWORD@HOST:PORT/DATABASE")
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 8
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 2 * time.Second
	}
	s := &Store{timeout: o.StatementTimeout, log: o.Log, instance: newInstance()}
	if s.log == nil {
		s.log = func(string) {}
	}
	cc := cfg.ConnConfig
	s.name = describe(cc)
	cfg.MaxConns = int32(o.PoolSize)
	cfg.MinConns = 0
	cfg.HealthCheckPeriod = time.Second
	cc.ConnectTimeout = o.StatementTimeout
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["application_name"] = s.instance
	// The server gives up on a statement a little after the client does,
	// so that nothing it runs outlives the call by much.
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt((o.StatementTimeout + time.Second).Milliseconds(), 10)
	// Approvals wait for notifications; a call never holds a lock for
	// long, so a session idle in a transaction is a dead client.
	cc.RuntimeParams["idle_in_transaction_session_timeout"] = "60000"
	s.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, errors.New("the PostgreSQL settings are not usable: " + scrub(err.Error(), o.URL))
	}
	listenCfg := cc.Copy()
	start := o.Go
	if start == nil {
		start = func(_ string, fn func()) { go fn() }
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopListen, s.listenDone = cancel, make(chan struct{})
	l := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			cctx, stop := context.WithTimeout(ctx, s.timeout)
			defer stop()
			return pgx.ConnectConfig(cctx, listenCfg)
		},
		LogError: func(_ context.Context, err error) {
			if s.listening.Swap(false) {
				s.state.invalidateAll()
			}
			if ctx.Err() == nil {
				s.log(fmt.Sprintf("%s: listening for other processes' changes: %v (reconnecting)", s.name, scrub(err.Error(), o.URL)))
			}
		},
		ReconnectDelay: 500 * time.Millisecond,
	}
	l.Handle(channel, listenHandler{s})
	start("the shared store's listener", func() {
		defer close(s.listenDone)
		_ = l.Listen(ctx)
		s.listening.Store(false)
	})
	return s, nil
}

// CheckURL checks that url parses as a PostgreSQL URL, and hands its
// password to secret (the caller's redactor) before anything could
// quote it.
func CheckURL(url string, secret func(string)) error {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return errors.New("the PostgreSQL URL does not parse: give postgres://USER:PASSWORD@HOST:PORT/DATABASE")
	}
	if cfg.Password != "" && secret != nil {
		secret(cfg.Password)
	}
	return nil
}

// channel is the one LISTEN/NOTIFY channel; a notification's payload is
// "KIND:INSTANCE:DATA".
const channel = "clara"

// newInstance names this process for the others: its connections' application_name.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "clara-" + hex.EncodeToString(b[:])
}

// describe names the database without its user or password.
func describe(cc *pgx.ConnConfig) string {
	host := cc.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	} else {
		host = net.JoinHostPort(host, strconv.Itoa(int(cc.Port)))
	}
	return fmt.Sprintf("the shared store (PostgreSQL at %s, database %s)", host, cc.Database)
}

// scrub cuts the URL and its password out of a message from pgx.
func scrub(msg, url string) string {
	if url != "" {
		msg = strings.ReplaceAll(msg, url, "[the URL]")
	}
	if cfg, err := pgconn.ParseConfig(url); err == nil && cfg.Password != "" {
		msg = strings.ReplaceAll(msg, cfg.Password, "[REDACTED]")
	}
	return msg
}

// Name says which database this is, for messages: no user, no password.
func (s *Store) Name() string { return s.name }

// Instance is this process's name in the database (application_name).
func (s *Store) Instance() string { return s.instance }

// SetHandlers installs what the listener tells of other processes.
func (s *Store) SetHandlers(h Handlers) { s.handlers.Store(&h) }

// Listening reports whether the listener's connection is up.
func (s *Store) Listening() bool { return s.listening.Load() }

// Close stops the listener and closes the pool.
func (s *Store) Close() {
	s.stopListen()
	<-s.listenDone
	s.pool.Close()
}

// ctx bounds one use by the statement timeout and the caller's deadline.
func (s *Store) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, s.timeout)
}

// fail classifies err: the database being away, slow or its connection
// lost is ErrUnavailable (naming the store); anything else (a constraint,
// a bug) stays what it is.
func (s *Store) fail(what string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57"):
			// connection exceptions, insufficient resources, operator
			// intervention (shutdown, statement timeout, cancel)
		default:
			return fmt.Errorf("%s: %s: %s (SQLSTATE %s)", s.name, what, pe.Message, pe.Code)
		}
	}
	return &unavailableError{store: s.name, cause: fmt.Errorf("%s: %s", what, conciseCause(err))}
}

// conciseCause is err in a few words: pgx's connection errors repeat the
// user and the database.
func conciseCause(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	case errors.Is(err, context.Canceled):
		return "the call was cancelled"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		msg := ce.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return "cannot connect: " + msg
	}
	return err.Error()
}

// ready connects and migrates the schema on first use.
func (s *Store) ready(ctx context.Context) error {
	if s.migrated.Load() {
		return nil
	}
	s.migrate.Lock()
	defer s.migrate.Unlock()
	if s.migrated.Load() {
		return nil
	}
	if err := Migrate(ctx, s.pool); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) || errors.Is(err, errNewerSchema) {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		return s.fail("migrating the schema", err)
	}
	s.migrated.Store(true)
	return nil
}

// Ping connects (and migrates) now, within the statement timeout.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return err
	}
	return s.fail("ping", s.pool.Ping(ctx))
}

// listenHandler dispatches the notifications of the channel.
type listenHandler struct{ s *Store }

// HandleBacklog runs once the listener is (re)connected and listening:
// nothing it missed meanwhile can be told apart, so every cached scope
// goes and the handlers look again.
func (h listenHandler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.s.state.invalidateAll()
	h.s.listening.Store(true)
	if hs := h.s.handlers.Load(); hs != nil && hs.Connected != nil {
		hs.Connected()
	}
	return nil
}

func (h listenHandler) HandleNotification(_ context.Context, n *pgconn.Notification, _ *pgx.Conn) error {
	kind, rest, _ := strings.Cut(n.Payload, ":")
	origin, data, _ := strings.Cut(rest, ":")
	hs := h.s.handlers.Load()
	switch kind {
	case "s": // state of a scope changed
		if origin != h.s.instance {
			h.s.state.invalidate(data)
		}
	case "a": // an approval was decided
		if id, err := strconv.ParseInt(data, 10, 64); err == nil && hs != nil && hs.ApprovalDecided != nil {
			hs.ApprovalDecided(id)
		}
	case "r": // rules changed
		if seq, err := strconv.ParseInt(data, 10, 64); err == nil && origin != h.s.instance && hs != nil && hs.RulesChanged != nil {
			hs.RulesChanged(seq)
		}
	}
	return nil
}

var _ pgxlisten.BacklogHandler = listenHandler{}
