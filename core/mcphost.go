package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Serving Clara's tools over MCP (issue 13): the engine is the Host of one
// mcp.Server, made when serving starts; each listener takes the [mcp]
// settings in force when it starts. MCPStop ends it; serving again makes a
// new one.

// mcpServing holds the server while something serves.
type mcpServing struct {
	mu     sync.Mutex
	server *mcp.Server
	// calls counts the clients' tools/call running now, against
	// mcp.max_calls: a client may send any number at once, and each C or
	// Python tool's call holds a thread or two while it runs (its own, and
	// its caller's waiting in C), so without a bound a client could exhaust
	// the process's threads (issue 25, finding 1) before a single call ran
	// past its deadline and limits.max_overdue_calls could count it.
	calls atomic.Int64
}

// mcpHost is what the MCP server reaches of the engine.
type mcpHost struct{ e *Engine }

// Tools lists the llm_visible tools the configuration's policy allows;
// the administrative tools are never served.
func (h mcpHost) Tools() []mcp.ToolInfo {
	scope := toolbox.Scope{Config: h.e.current.Load().policy}
	var out []mcp.ToolInfo
	for _, t := range h.e.tools.List() {
		if t.LLMVisible && !t.Admin && scope.Allows(t.Name) {
			out = append(out, mcp.InfoFromDescriptor(&t.Descriptor))
		}
	}
	return out
}

// Call runs a client's tools/call through the whole pipeline, in the MCP
// session's own Clara session.
func (h mcpHost) Call(ctx context.Context, session, name string, args []byte, progress mcp.ProgressFunc) ([]byte, *protocol.Error) {
	e := h.e
	s := e.current.Load()
	if max := int64(s.config.MCP.MaxCalls); e.mcp.calls.Add(1) > max {
		e.mcp.calls.Add(-1)
		perr := protocol.Errorf(protocol.ToolFailed, "tool %q was not started: %d calls of MCP clients are running, "+
			"the most mcp.max_calls allows; try again once one has ended", name, max)
		e.logFailure(name, perr)
		return nil, perr
	}
	defer e.mcp.calls.Add(-1)
	args, perr := mcpArguments(args, s.limits)
	if perr != nil {
		e.logFailure(name, perr)
		return nil, perr
	}
	c := &toolCall{name: name, session: session, args: args,
		scope: toolbox.Scope{Config: s.policy, Session: e.sessions.Policy(session)}, rep: &report{}}
	if progress != nil {
		ctx = context.WithValue(ctx, progressKey{}, ProgressFunc(progress))
	}
	result, _, perr := e.callTool(withEmissionBudget(ctx, s), s, c)
	if perr != nil {
		e.logFailure(name, perr)
	}
	return result, perr
}

// mcpArguments checks a client's arguments as a request's are checked,
// with the same scanner and limits (limits.max_request_bytes,
// limits.max_depth, valid UTF-8, no key twice), and that they are a JSON
// object, as every tool is promised; they come back compact. The SDK has
// only decoded them as far as JSON goes, at any depth up to its own.
func mcpArguments(args []byte, lim protocol.Limits) ([]byte, *protocol.Error) {
	if lim.MaxRequestBytes > 0 && len(args) > lim.MaxRequestBytes {
		return nil, protocol.Errorf(protocol.InvalidRequest,
			"the arguments are %d bytes, more than limits.max_request_bytes (%d)", len(args), lim.MaxRequestBytes)
	}
	sc, serr := protocol.ScanStrict(args, lim.MaxDepth)
	if serr != nil {
		if serr.TooDeep {
			return nil, protocol.Errorf(protocol.InvalidRequest,
				"the arguments nest deeper than limits.max_depth (%d) at byte %d", lim.MaxDepth, serr.Offset)
		}
		return nil, protocol.Errorf(protocol.InvalidArgs, "the arguments are not valid JSON: %v", serr)
	}
	doc := args[sc.Start:sc.End]
	if doc[0] != '{' {
		return nil, protocol.Errorf(protocol.InvalidArgs, "the arguments must be a JSON object, not %s", protocol.KindOf(doc[0]))
	}
	if sc.Spaced {
		doc = protocol.AppendCompact(nil, doc)
	}
	return doc, nil
}

// OnToolsChanged signals a change of the tools, and of the remote
// servers' resources and prompts (the configuration's come with a
// configuration change, which always changes the registry).
func (h mcpHost) OnToolsChanged(fn func()) (stop func()) {
	stopTools := h.e.tools.OnChange(fn)
	stopRemote := h.e.onRemoteCatalog(fn)
	return func() { stopTools(); stopRemote() }
}

// ProgressFunc reports a running call's progress (MCP's
// notifications/progress): done units of total (0 when unknown).
type ProgressFunc func(done, total float64, message string)

type progressKey struct{}

// ProgressOf is the progress reporter of the call ctx belongs to, nil when
// nobody listens (a C tool's clara_call_progress, a Lua tool's progress).
func ProgressOf(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}

// ClientLogFunc sends a running tool's message to the MCP client that
// called it (notifications/message), at level debug, info, warning or
// error.
type ClientLogFunc func(level, message string)

// ClientLogOf is the MCP client's log of the call ctx belongs to, nil when
// the call came from no MCP client (a C tool's clara_call_log).
func ClientLogOf(ctx context.Context) ClientLogFunc {
	if f := mcp.ClientLogOf(ctx); f != nil {
		return ClientLogFunc(f)
	}
	return nil
}

// mcpServer returns the server, made when first needed with the [mcp]
// settings of the server as a whole (list_ttl_ms, max_waiting_calls,
// wait_timeout_ms); each listen takes the listener's settings in force
// when it is called.
func (e *Engine) mcpServer() *mcp.Server {
	e.mcp.mu.Lock()
	defer e.mcp.mu.Unlock()
	if e.mcp.server == nil {
		c := e.current.Load().config.MCP
		e.mcp.server = mcp.NewServer(mcpHost{e}, mcp.ServerOptions{Name: "clara", Version: Version, Logger: e.log, Telemetry: &e.tel,
			ListTTL: time.Duration(c.ListTTLMS) * time.Millisecond, MaxWaitingCalls: c.MaxWaitingCalls,
			WaitTimeout: time.Duration(c.WaitTimeoutMS) * time.Millisecond,
			TaskAfter:   taskAfter(c.TaskAfterMS), TaskTTL: time.Duration(c.TaskTTLMS) * time.Millisecond,
			OnSessionEnd: func(session string) {
				if _, err := (adminTools{e}).EndSession(context.Background(), session); err != nil {
					e.log.Logf(logging.Warn, "mcp: ending session %q: %v", session, err)
				}
			}})
	}
	return e.mcp.server
}

// mcpListenOptions are the [mcp] settings in force, for one listener (issue
// 25, finding 12: the server once kept those of its first listen, so a
// later listen served without the token the configuration now asked for).
func (e *Engine) mcpListenOptions() (mcp.ListenOptions, error) {
	c := e.current.Load().config.MCP
	opts := mcp.ListenOptions{AllowRemote: c.AllowRemote, MaxSessions: c.MaxSessions,
		SessionIdleTimeout: time.Duration(c.SessionIdleTimeoutMS) * time.Millisecond}
	if c.TokenEnv != "" {
		if opts.BearerToken = e.env.Getenv(c.TokenEnv); opts.BearerToken == "" {
			return opts, fmt.Errorf("mcp.token_env names %s, which is not set", c.TokenEnv)
		}
	}
	return opts, nil
}

// MCPServeFDs serves MCP over a pair of descriptors (stdio) on the calling
// goroutine until the client closes its end or MCPStop.
func (e *Engine) MCPServeFDs(inFD, outFD int) (err error) {
	defer e.guard("mcp serve", func() { err = errors.New("internal error (see the log)") })
	if _, err := e.mcpListenOptions(); err != nil {
		return err // a configuration that cannot serve HTTP serves nothing
	}
	return e.mcpServer().ServeFDs(context.Background(), inFD, outFD)
}

// MCPServeStdio serves MCP over in and out (bin/clara mcp) until EOF or
// MCPStop.
func (e *Engine) MCPServeStdio(in io.Reader, out io.Writer) error {
	if _, err := e.mcpListenOptions(); err != nil {
		return err
	}
	return e.mcpServer().ServeStdio(context.Background(), in, out)
}

// MCPListen serves MCP's Streamable HTTP transport at http://ADDR/mcp on
// goroutines of its own and returns the address bound (ADDR may end in :0).
// The listener takes the [mcp] settings in force now and keeps them.
func (e *Engine) MCPListen(addr string) (bound string, err error) {
	defer e.guard("mcp listen", func() { err = errors.New("internal error (see the log)") })
	opts, err := e.mcpListenOptions()
	if err != nil {
		return "", err
	}
	a, err := e.mcpServer().Listen(addr, opts)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

// MCPStop ends every MCP session and listener; calls in flight are
// cancelled. Serving again starts afresh with the settings then in force.
func (e *Engine) MCPStop() {
	defer e.guard("mcp stop", nil)
	e.mcp.mu.Lock()
	srv := e.mcp.server
	e.mcp.server = nil
	e.mcp.mu.Unlock()
	if srv != nil {
		srv.Stop()
		srv.Close()
	}
}
