package mcp

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/telemetry"
)

// HTTPPath is where Listen serves the Streamable HTTP endpoint.
const HTTPPath = "/mcp"

// ServerOptions configure a Server. The zero value is valid.
type ServerOptions struct {
	Name, Version string // what initialize reports; "clara" and "0" by default
	Instructions  string // optional hints for the client's model
	Logger        *logging.Logger
	// OnSessionEnd, if set, runs (on its own goroutine) after an MCP
	// session has ended, with its Clara session name.
	OnSessionEnd func(session string)
	// Telemetry, when on, gets a server span per request (observe.go).
	Telemetry *telemetry.T
	// MaxWaitingCalls bounds the tool calls of 2026-07-28 clients waiting
	// between rounds for their client's input (DefaultMaxParked when 0);
	// WaitTimeout is how long one waits for the client's next round
	// (DefaultParkTimeout when 0).
	MaxWaitingCalls int
	WaitTimeout     time.Duration
	// ListTTL is the cache hint of the lists (tools, prompts, resources,
	// templates) and of server/discover: how long a client may keep them
	// (cacheScope private: they follow the configuration and its policy).
	// 0: immediately stale.
	ListTTL time.Duration
	// TaskAfter is how long a call of a client that declared the tasks
	// extension runs before it is answered with a task (DefaultTaskAfter
	// when 0; negative: never); TaskTTL how long a task is kept from its
	// creation (DefaultTaskTTL when 0). Only with a BackgroundHost.
	TaskAfter time.Duration
	TaskTTL   time.Duration
}

// ListenOptions are one listener's settings, fixed when it starts (each
// Listen takes its own: a later Listen with other settings does not change
// an earlier listener's). The zero value serves on loopback only, without
// a token, with the default limits.
type ListenOptions struct {
	// AllowRemote lets Listen bind an address that is not loopback.
	AllowRemote bool
	// BearerToken, when set, must be on every HTTP request
	// (Authorization: Bearer TOKEN). It never reaches a log.
	BearerToken string
	// SessionIdleTimeout ends an HTTP session that sends no request for
	// this long; 0 means DefaultSessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// MaxSessions caps the HTTP sessions open at once, those of every
	// listener of the server counted: an initialize beyond is answered
	// HTTP 503 with a JSON-RPC error. 0 means DefaultMaxSessions.
	MaxSessions int
}

// Defaults of ListenOptions (those of the [mcp] table).
const (
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultMaxSessions        = 100
)

// Server serves a Host's tools over MCP. Its methods are safe for
// concurrent use.
type Server struct {
	host Host
	opts ServerOptions
	log  *logging.Logger
	mcp  *sdk.Server

	// served is the published tool list; only the sync goroutine (and
	// NewServer before it starts) writes it.
	served map[string]*servedTool
	// elicitOnly names the served tools only a client that can elicit
	// sees (ToolInfo.ElicitOnly); syncTools replaces it, tools/list reads
	// it.
	elicitOnly atomic.Pointer[map[string]bool]
	features   servedFeatures    // resources and prompts of a CatalogHost
	parking    *parking          // calls of 2026-07-28 clients between rounds
	holds      sessionHolds      // sessions kept open by calls outliving their request
	tasks      tasks             // tools/calls followed as tasks
	warned     map[string]string // tool -> last problem logged, so each is logged once
	dirty      chan struct{}     // a sync is due
	stopHost   func()

	mu       sync.Mutex
	stopCtx  context.Context // cancelled by Stop: what is serving now stops
	stopNow  context.CancelFunc
	webs     map[*web]struct{}
	closed   bool
	sessions sync.Map // *sdk.ServerSession -> Clara session name (stdio sessions have no id)

	// The places HTTP sessions hold, counted against MaxSessions: one from
	// a session's first request to its end.
	gateMu sync.Mutex
	open   int
	atCap  bool // the cap was reached and logged; logged again once it is left

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
	logs clientLogs // Clara's log to the sessions that set a level (observe.go)
}

// web is one Listen.
type web struct {
	srv     *http.Server
	ln      net.Listener
	stopped atomic.Bool // Stop closed it: Serve's error is expected
}

// NewServer builds a server for host and publishes its tools. Serve it with
// ServeStdio or Listen; Close it when done.
func NewServer(host Host, opts ServerOptions) *Server {
	if opts.Name == "" {
		opts.Name = "clara"
	}
	if opts.Version == "" {
		opts.Version = "0"
	}
	s := &Server{
		host:   host,
		opts:   opts,
		log:    opts.Logger,
		served: map[string]*servedTool{},
		warned: map[string]string{},
		dirty:  make(chan struct{}, 1),
		webs:   map[*web]struct{}{},
		done:   make(chan struct{}),
	}
	s.parking = newParking(opts.MaxWaitingCalls, opts.WaitTimeout)
	if s.opts.TaskAfter == 0 {
		s.opts.TaskAfter = DefaultTaskAfter
	}
	if s.opts.TaskTTL <= 0 {
		s.opts.TaskTTL = DefaultTaskTTL
	}
	s.tasks.ttl = s.opts.TaskTTL
	s.stopCtx, s.stopNow = context.WithCancel(context.Background())
	sopts := &sdk.ServerOptions{
		Instructions: opts.Instructions,
		Logger:       newSlog(opts.Logger),
		PageSize:     1000,
		// Tools (listChanged: the host's tools change while clients are
		// connected) and logging (a tool's clara_call_log); resources,
		// prompts and completion when the host has them.
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}, Logging: &sdk.LoggingCapabilities{}},
		SupportedProtocolVersions: servedVersions(),
		GetSessionID:              newSessionName,
		InitializedHandler:        s.initialized,
		SetCacheable:              s.cacheable,
	}
	if _, ok := host.(CatalogHost); ok {
		s.serverCatalogOptions(sopts)
	}
	bh, background := host.(BackgroundHost)
	if background {
		sopts.Capabilities.Extensions = map[string]any{TasksExtension: map[string]any{}}
	}
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: opts.Name, Version: opts.Version}, sopts)
	if background {
		s.addTaskMethods(bh)
		s.mcp.AddReceivingMiddleware(s.taskMiddleware)
	}
	s.mcp.AddReceivingMiddleware(s.recoverMiddleware, s.telemetryMiddleware, s.elicitOnlyMiddleware)
	// Subscribe, then list: a change in between marks a sync as due.
	s.stopHost = host.OnToolsChanged(s.toolsChanged)
	s.syncTools()
	s.wg.Add(1)
	go s.syncLoop()
	return s
}

// servedVersions are the revisions up to ProtocolVersion: newer drafts the
// SDK knows are not offered.
func servedVersions() []string {
	var vs []string
	for _, v := range sdk.SupportedProtocolVersions() {
		if v <= ProtocolVersion {
			vs = append(vs, v)
		}
	}
	return vs
}

func newSessionName() string { return "mcp-" + rand.Text() }

// sessionName is the Clara session of an MCP session: its id over HTTP, a
// name of the same form for a session without one (stdio; and each
// request of a 2026-07-28 client over HTTP, which has no session), which
// ends with its connection.
func (s *Server) sessionName(ss *sdk.ServerSession) string {
	if ss == nil {
		return "mcp"
	}
	if id := ss.ID(); id != "" {
		return id
	}
	if v, ok := s.sessions.Load(ss); ok {
		return v.(string)
	}
	v, loaded := s.sessions.LoadOrStore(ss, newSessionName())
	if !loaded {
		s.watchEnd(ss, v.(string))
	}
	return v.(string)
}

// initialized watches a session that completed its handshake, to tell the
// host when it ends (one without an id is watched from its first use).
func (s *Server) initialized(_ context.Context, req *sdk.InitializedRequest) {
	ss := req.Session
	if ss.ID() == "" {
		s.sessionName(ss)
		return
	}
	s.watchEnd(ss, ss.ID())
}

// watchEnd forgets a session's name and tells the host once it has ended.
func (s *Server) watchEnd(ss *sdk.ServerSession, name string) {
	// Close sets closed before it waits for the goroutines: none starts after.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "the end of session "+name, r)
			}
		}()
		_ = ss.Wait()
		s.dropLogTap(ss)
		s.sessions.Delete(ss)
		s.holds.wait(name) // the calls that outlive their request (parked, tasks) end first
		if s.opts.OnSessionEnd != nil {
			s.opts.OnSessionEnd(name)
		}
	}()
}

// sessionHolds counts, per Clara session, the calls that run on after the
// request that started them (a call parked between rounds, a task): the
// session ends once they are over.
type sessionHolds struct {
	mu sync.Mutex
	m  map[string]*holdCount
}

type holdCount struct {
	n    int
	zero chan struct{} // closed when n drops to 0
}

// hold keeps session alive until the returned release is called.
func (h *sessionHolds) hold(session string) (release func()) {
	h.mu.Lock()
	if h.m == nil {
		h.m = map[string]*holdCount{}
	}
	c := h.m[session]
	if c == nil {
		c = &holdCount{zero: make(chan struct{})}
		h.m[session] = c
	}
	c.n++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			c.n--
			if c.n == 0 {
				delete(h.m, session)
				close(c.zero)
			}
			h.mu.Unlock()
		})
	}
}

// wait returns once session holds nothing.
func (h *sessionHolds) wait(session string) {
	h.mu.Lock()
	c := h.m[session]
	h.mu.Unlock()
	if c != nil {
		<-c.zero
	}
}

// cacheable sets the cache hints of the lists and of server/discover (a
// resource's contents are never cached: ttlMs 0). The lists are in a
// deterministic order, by name (by URI for resources).
func (s *Server) cacheable(_ context.Context, req sdk.Request, c *sdk.Cacheable) {
	c.CacheScope = "private"
	c.TTLMs = 0
	if _, read := req.(*sdk.ReadResourceRequest); !read {
		c.TTLMs = int(s.opts.ListTTL / time.Millisecond)
	}
}

// recoverMiddleware turns a panic in any method handler into a JSON-RPC
// internal error (tool calls catch theirs earlier, as isError results).
func (s *Server) recoverMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "MCP method "+method, r)
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
		}()
		return next(ctx, method, req)
	}
}

// elicitOnlyMiddleware takes the tools that can answer only by asking the
// client's user out of the tools/list of a client that cannot be asked
// (it declared no elicitation in form mode): listed to it, such a tool
// could never succeed (issue 26 §3).
func (s *Server) elicitOnlyMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		only := s.elicitOnly.Load()
		if err != nil || method != "tools/list" || only == nil || len(*only) == 0 {
			return res, err
		}
		list, ok := res.(*sdk.ListToolsResult)
		lr, isList := req.(*sdk.ListToolsRequest)
		if !ok || !isList || canElicitForm(lr.ClientCapabilities()) {
			return res, err
		}
		kept := make([]*sdk.Tool, 0, len(list.Tools))
		for _, t := range list.Tools {
			if t != nil && !(*only)[t.Name] {
				kept = append(kept, t)
			}
		}
		filtered := *list
		filtered.Tools = kept
		return &filtered, nil
	}
}

// toolsChanged is the host's signal; it only marks a sync as due.
func (s *Server) toolsChanged() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

func (s *Server) syncLoop() {
	defer s.wg.Done() // syncTools recovers its own panics: the loop goes on
	for {
		select {
		case <-s.done:
			return
		case <-s.dirty:
			s.syncTools()
		}
	}
}

// syncTools makes the SDK server's tools those of Host.Tools: it adds what
// is new or changed and removes what is gone; the SDK then sends
// notifications/tools/list_changed to every session.
func (s *Server) syncTools() {
	defer func() {
		if r := recover(); r != nil {
			logPanic(s.log, "listing the host's tools", r)
		}
	}()
	if h, ok := s.host.(CatalogHost); ok {
		s.syncFeatures(h)
	}
	infos := s.host.Tools()
	want := make(map[string]*servedTool, len(infos))
	for _, info := range infos {
		st, warning, err := newServedTool(info)
		problem := warning
		if err != nil {
			problem = err.Error() + "; not served"
		}
		if problem != "" && s.warned[info.Name] != problem {
			logf(s.log, logging.Warn, "%s", problem)
		}
		if problem != "" {
			s.warned[info.Name] = problem
		} else {
			delete(s.warned, info.Name)
		}
		if err == nil {
			want[info.Name] = st
		}
	}
	var gone []string
	for name := range s.served {
		if want[name] == nil {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		st := want[name]
		if old := s.served[name]; old != nil && old.key == st.key {
			want[name] = old
			continue
		}
		s.mcp.AddTool(st.tool, s.toolHandler(name, st))
	}
	s.served = want
	only := map[string]bool{}
	for name, st := range want {
		if st.elicitOnly {
			only[name] = true
		}
	}
	s.elicitOnly.Store(&only)
}

// toolHandler runs one tools/call through the host.
func (s *Server) toolHandler(name string, st *servedTool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "tool call "+name, r)
				res, err = errorResult(protocol.InternalError(nil)), nil
			}
		}()
		// What the client can do is read per request: a 2026-07-28
		// request says it in its _meta, an older one at its session's
		// initialize.
		version, caps := req.ProtocolVersion(), req.ClientCapabilities()
		if req.Params.RequestState != "" {
			return s.resume(ctx, req)
		}
		session := s.sessionName(req.Session)
		args := []byte(req.Params.Arguments)
		if t := strings.TrimSpace(string(args)); t == "" || t == "null" {
			args = []byte("{}")
		}
		ctx = withClientLog(ctx, req.Session, name, s.log)
		var progress ProgressFunc
		if token := req.Params.GetProgressToken(); token != nil {
			p := &progressSender{ctx: ctx, ss: req.Session, token: token, log: s.log}
			defer p.finish()
			progress = p.send
		}
		run := func(ctx context.Context) *sdk.CallToolResult {
			out, perr := s.host.Call(ctx, session, name, args, progress)
			if perr != nil {
				return errorResult(perr)
			}
			if st.content {
				return contentResult(name, out)
			}
			return successResult(name, out, st.structured)
		}
		if bh, ok := s.host.(BackgroundHost); ok && s.opts.TaskAfter > 0 && usesInputRequired(version) && wantsTasks(caps) {
			// A client of the tasks extension: a long call becomes a task.
			return s.runAsTask(ctx, bh, req, caps, session, run)
		}
		if usesInputRequired(version) {
			// Questions become input_required results; the call runs on
			// between the client's rounds (mrtr.go).
			return s.startParked(ctx, req, caps, run)
		}
		// Stop cancels the calls in flight (the SDK's contexts only end
		// with the client's notifications/cancelled).
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.currentStopCtx(), cancel)()
		ctx = withElicitor(ctx, req.Session, caps, s.log)
		ctx = withSampler(ctx, req.Session, caps, s.log)
		return run(ctx), nil
	}
}

// progressSender forwards a call's progress as notifications/progress, in
// increasing order, until the call returns.
type progressSender struct {
	ctx   context.Context
	ss    *sdk.ServerSession
	token any
	log   *logging.Logger

	mu      sync.Mutex // held while sending, so that values reach the wire in order
	sent    bool
	last    float64
	stopped bool
}

func (p *progressSender) send(done, total float64, message string) {
	defer func() {
		if r := recover(); r != nil {
			logPanic(p.log, "a progress notification", r)
		}
	}()
	if math.IsNaN(done) || math.IsInf(done, 0) || math.IsNaN(total) || math.IsInf(total, 0) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || (p.sent && done <= p.last) {
		return
	}
	p.sent, p.last = true, done
	if err := p.ss.NotifyProgress(p.ctx, &sdk.ProgressNotificationParams{
		ProgressToken: p.token, Progress: done, Total: total, Message: message,
	}); err != nil {
		logf(p.log, logging.Debug, "progress notification not sent: %v", err)
	}
}

func (p *progressSender) finish() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

func (s *Server) currentStopCtx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopCtx
}

// ErrClosed is returned by ServeStdio and Listen after Close.
var ErrClosed = errors.New("mcp: server closed")

// ServeStdio serves one MCP session over in and out (newline-delimited
// JSON-RPC) on the calling goroutine, until in reaches EOF, ctx is done or
// Stop is called; a clean end returns nil. in and out stay open: they are
// the caller's. A Read blocked in in (or a Write in out) when Stop comes is
// released only if it has deadlines (SetReadDeadline: an *os.File in
// non-blocking mode, a net.Conn); otherwise it stays blocked until in
// delivers, and what it then reads is dropped. ServeFDs arranges that for
// file descriptors.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	stop := s.stopCtx
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(stop, cancel)()
	streams := newStdioStreams(ctx, in, out)
	ss, err := s.mcp.Connect(ctx, &sdk.IOTransport{Reader: streams.reader(), Writer: streams.writer(),
		MaxLineLength: 2 * maxStdioLine}, nil) // the streams keep to maxStdioLine; this is the SDK's own guard
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	ended := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "a stdio session", r)
				ended <- errors.New("internal error")
			}
		}()
		ended <- ss.Wait()
	}()
	select {
	case err = <-ended:
	case <-ctx.Done():
		// Deadlines first: Close waits for the calls in flight, which may
		// be blocked writing to a peer that does not read.
		rd, _ := in.(interface{ SetReadDeadline(time.Time) error })
		wd, _ := out.(interface{ SetWriteDeadline(time.Time) error })
		if rd != nil {
			_ = rd.SetReadDeadline(time.Now())
			defer rd.SetReadDeadline(time.Time{})
		}
		if wd != nil {
			_ = wd.SetWriteDeadline(time.Now())
			defer wd.SetWriteDeadline(time.Time{})
		}
		_ = ss.Close()
		err = <-ended
	}
	s.sessions.Delete(ss)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed) || ctx.Err() != nil || stop.Err() != nil {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

// Listen serves the Streamable HTTP transport at http://ADDR/mcp with the
// settings of opts and returns the address it bound (useful with port 0)
// at once. Without AllowRemote the address must be loopback.
func (s *Server) Listen(addr string, opts ListenOptions) (net.Addr, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mcp: listen: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !opts.AllowRemote && (!ok || !tcp.IP.IsLoopback()) {
		ln.Close()
		return nil, fmt.Errorf("mcp: %q is not a loopback address; serving other hosts needs mcp.allow_remote = true", addr)
	}
	idle := opts.SessionIdleTimeout
	if idle <= 0 {
		idle = DefaultSessionIdleTimeout
	}
	maxSessions := opts.MaxSessions
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp },
		&sdk.StreamableHTTPOptions{SessionTimeout: idle, Logger: newSlog(s.log)})
	h = s.sessionGate(maxSessions, h)
	h = revisionRouter(h, sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, Logger: newSlog(s.log)}))
	if opts.BearerToken != "" {
		token := []byte(opts.BearerToken)
		verify := func(_ context.Context, got string, _ *http.Request) (*auth.TokenInfo, error) {
			if subtle.ConstantTimeCompare([]byte(got), token) != 1 {
				return nil, auth.ErrInvalidToken
			}
			return &auth.TokenInfo{UserID: "bearer"}, nil
		}
		h = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	// A web page the user visits must not reach a loopback server: refuse
	// cross-origin browser requests (programs send no Origin).
	h = http.NewCrossOriginProtection().Handler(h)
	mux := http.NewServeMux()
	mux.Handle(HTTPPath, h)
	w := &web{ln: ln, srv: &http.Server{
		Handler:           s.recoverHTTP(mux),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil, ErrClosed
	}
	s.webs[w] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "the HTTP server", r)
			}
		}()
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !w.stopped.Load() {
			logf(s.log, logging.Warn, "serving %s: %v", ln.Addr(), err)
		}
	}()
	logf(s.log, logging.Info, "serving MCP at http://%s%s", ln.Addr(), HTTPPath)
	return ln.Addr(), nil
}

// sessionGate lets a request that would open an HTTP session (a POST
// without Mcp-Session-Id: the SDK makes a session for it) through only
// while fewer than max sessions hold a place; beyond, it answers 503 with
// a JSON-RPC error, as the session would have cost memory until its idle
// timeout. A session holds its place from its first request to its end
// (a request that opened none gives it back at once). Requests of open
// sessions pass untouched.
func (s *Server) sessionGate(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get(sessionIDHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		if open, ok := s.reserveSession(max); !ok {
			refuseSession(w, r, fmt.Sprintf("too many MCP sessions: %d are open, the most mcp.max_sessions (%d) allows; try again once one has ended", open, max))
			return
		}
		held := true
		defer func() {
			if held {
				s.releaseSession()
			}
		}()
		next.ServeHTTP(w, r)
		if ss := s.openedSession(w.Header().Get(sessionIDHeader)); ss != nil {
			held = !s.releaseAtEnd(ss)
		}
	})
}

// revisionRouter serves the requests of 2026-07-28 clients (they carry
// the revision in their MCP-Protocol-Version header, and the SDK serves
// that revision only without sessions) with stateless, and every other
// request (the initialize handshake and the sessions of 2025-11-25 and
// before) with sessions: both revisions on one endpoint, each client on
// its own.
func revisionRouter(sessions, stateless http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(protocolVersionHeader); usesInputRequired(v) && r.Header.Get(sessionIDHeader) == "" {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// protocolVersionHeader is Streamable HTTP's revision header.
const protocolVersionHeader = "Mcp-Protocol-Version"

// sessionIDHeader is Streamable HTTP's session header.
const sessionIDHeader = "Mcp-Session-Id"

// reserveSession takes a place for a session when fewer than max are
// held, and says how many are.
func (s *Server) reserveSession(max int) (open int, ok bool) {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	if s.open >= max {
		if !s.atCap {
			s.atCap = true
			logf(s.log, logging.Warn, "%d MCP sessions are open, the most mcp.max_sessions (%d) allows: new sessions are refused until one ends", s.open, max)
		}
		return s.open, false
	}
	s.atCap = false
	s.open++
	return s.open - 1, true
}

func (s *Server) releaseSession() {
	s.gateMu.Lock()
	s.open--
	s.gateMu.Unlock()
}

// openedSession is the session a request opened: the SDK's session of the
// id it answered with, if it initialized (the SDK closes one that did not).
func (s *Server) openedSession(id string) *sdk.ServerSession {
	if id == "" {
		return nil
	}
	for ss := range s.mcp.Sessions() {
		if ss.ID() == id && ss.InitializeParams() != nil {
			return ss
		}
	}
	return nil
}

// releaseAtEnd gives ss's place back when it ends; false (nothing
// started) once the server is closed.
func (s *Server) releaseAtEnd(ss *sdk.ServerSession) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer s.releaseSession()
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "watching an HTTP session", r)
			}
		}()
		_ = ss.Wait()
	}()
	return true
}

// refuseSession answers a request that would have opened a session beyond
// the cap: 503, and the JSON-RPC error a client shows (with the request's
// id when its body, read up to 64 KiB, has one).
func refuseSession(w http.ResponseWriter, r *http.Request, message string) {
	id := json.RawMessage("null")
	if r.Body != nil {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req) == nil && validID(req.ID) {
			id = req.ID
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": codeTooManySessions, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// codeTooManySessions is the JSON-RPC error of an initialize beyond
// mcp.max_sessions, from the range JSON-RPC leaves to servers.
const codeTooManySessions = -32000

// validID reports whether raw is a JSON-RPC id: a string or a number.
func validID(raw json.RawMessage) bool {
	if len(raw) == 0 || !json.Valid(raw) {
		return false
	}
	c := raw[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// recoverHTTP answers 500 for a panic in the HTTP layer instead of letting
// net/http log it with the request.
func (s *Server) recoverHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logPanic(s.log, "an HTTP request", v)
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// Stop ends what is serving: the sessions (their calls in flight are
// cancelled), ServeStdio calls (they return) and HTTP listeners. The server
// may serve again afterwards.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopNow()
	s.stopCtx, s.stopNow = context.WithCancel(context.Background())
	webs := s.webs
	s.webs = map[*web]struct{}{}
	s.mu.Unlock()
	s.parking.cancelAll()
	if bh, ok := s.host.(BackgroundHost); ok {
		for _, t := range s.tasks.all() {
			s.cancelTask(bh, t, "the MCP server stopped")
		}
	}

	// HTTP first stops taking new connections, then the sessions end (which
	// ends their event streams), then the server waits for what is left.
	for w := range webs {
		w.stopped.Store(true)
		_ = w.ln.Close()
	}
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	for w := range webs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := w.srv.Shutdown(ctx); err != nil {
			_ = w.srv.Close()
		}
		cancel()
	}
}

// Close stops serving for good and returns once the server's goroutines
// are gone.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.stopHost()
	s.Stop()
	close(s.done)
	s.dropLogTap(nil)
	s.wg.Wait()
}
