package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Serving Clara's tools over MCP (issue 13): the engine is the Host of one
// mcp.Server, made when serving starts, with the [mcp] settings then in
// force. MCPStop ends it; serving again makes a new one.

// mcpServing holds the server while something serves.
type mcpServing struct {
	mu     sync.Mutex
	server *mcp.Server
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

func (h mcpHost) OnToolsChanged(fn func()) (stop func()) { return h.e.tools.OnChange(fn) }

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

// mcpServer returns the server, made with the settings in force.
func (e *Engine) mcpServer() (*mcp.Server, error) {
	e.mcp.mu.Lock()
	defer e.mcp.mu.Unlock()
	if e.mcp.server != nil {
		return e.mcp.server, nil
	}
	c := e.current.Load().config
	opts := mcp.ServerOptions{Name: "clara", Version: Version, Logger: e.log, AllowRemote: c.MCP.AllowRemote, Telemetry: &e.tel,
		OnSessionEnd: func(session string) {
			if _, err := (adminTools{e}).EndSession(context.Background(), session); err != nil {
				e.log.Logf(logging.Warn, "mcp: ending session %q: %v", session, err)
			}
		}}
	if c.MCP.TokenEnv != "" {
		if opts.BearerToken = e.env.Getenv(c.MCP.TokenEnv); opts.BearerToken == "" {
			return nil, fmt.Errorf("mcp.token_env names %s, which is not set", c.MCP.TokenEnv)
		}
	}
	e.mcp.server = mcp.NewServer(mcpHost{e}, opts)
	return e.mcp.server, nil
}

// MCPServeFDs serves MCP over a pair of descriptors (stdio) on the calling
// goroutine until the client closes its end or MCPStop.
func (e *Engine) MCPServeFDs(inFD, outFD int) (err error) {
	defer e.guard("mcp serve", func() { err = errors.New("internal error (see the log)") })
	srv, err := e.mcpServer()
	if err != nil {
		return err
	}
	return srv.ServeFDs(context.Background(), inFD, outFD)
}

// MCPServeStdio serves MCP over in and out (bin/clara mcp) until EOF or
// MCPStop.
func (e *Engine) MCPServeStdio(in io.Reader, out io.Writer) error {
	srv, err := e.mcpServer()
	if err != nil {
		return err
	}
	return srv.ServeStdio(context.Background(), in, out)
}

// MCPListen serves MCP's Streamable HTTP transport at http://ADDR/mcp on
// goroutines of its own and returns the address bound (ADDR may end in :0).
func (e *Engine) MCPListen(addr string) (bound string, err error) {
	defer e.guard("mcp listen", func() { err = errors.New("internal error (see the log)") })
	srv, err := e.mcpServer()
	if err != nil {
		return "", err
	}
	a, err := srv.Listen(addr)
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
