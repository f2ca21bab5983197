// Command testserver serves a few Go tools through core/mcp, for the MCP
// client tests of tests/mcp: the official TypeScript SDK drives it.
//
//	testserver                              serve one session on stdin/stdout
//	testserver --listen 127.0.0.1:0 [--token T] [--max-sessions N]
//	                                        serve Streamable HTTP; print "url URL" on
//	                                        stdout; stop when stdin closes
//
// Its Host is a small pipeline on core/toolbox: a policy layer (hidden_tool
// is denied by configuration and so not listed), a "rule" that denies
// rm_rf, schema validation, limits and the tool's run, the steps the engine
// takes, without the engine.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

type progressKey struct{}

// host is the test Host.
type host struct {
	reg    *toolbox.Registry
	policy toolbox.Scope

	mu        sync.Mutex
	listeners map[int]func()
	next      int

	// steps waits for release_steps before it returns: the TypeScript SDK
	// drops progress that arrives in the same read as the response.
	release chan struct{}

	slowMu     sync.Mutex
	slowEnded  chan struct{} // closed when the last slow call returned
	slowReason string
}

func (h *host) Tools() []mcp.ToolInfo {
	var out []mcp.ToolInfo
	for _, t := range h.reg.List() {
		if t.LLMVisible && h.policy.Allows(t.Name) {
			info := mcp.InfoFromDescriptor(&t.Descriptor)
			if x, ok := extras[t.Name]; ok {
				info.Title, info.OutputSchema, info.Idempotent = x.title, json.RawMessage(x.output), x.idempotent
			}
			out = append(out, info)
		}
	}
	return out
}

func (h *host) Call(ctx context.Context, session, name string, args []byte, progress mcp.ProgressFunc) ([]byte, *protocol.Error) {
	t, ok := h.reg.Lookup(name)
	if !ok {
		return nil, protocol.Errorf(protocol.UnknownTool, "Tool not found: %s", name)
	}
	if perr := h.policy.Check(name); perr != nil {
		return nil, perr
	}
	if name == "rm_rf" { // what an on_tool_call rule with deny does
		return nil, protocol.Errorf(protocol.Denied, "denied by rule no_destruction: rm_rf is never allowed")
	}
	if !json.Valid(args) {
		return nil, protocol.Errorf(protocol.InvalidRequest, "arguments are not JSON")
	}
	if perr := t.Validate(args); perr != nil {
		return nil, perr
	}
	if perr := t.Admit(session, time.Now()); perr != nil {
		return nil, perr
	}
	if progress != nil {
		ctx = context.WithValue(ctx, progressKey{}, progress)
	}
	out, _, perr := t.Execute(ctx, toolbox.Call{Session: session, Arguments: args, Tool: t},
		toolbox.Defaults{TimeoutMS: 60000, MaxOutputBytes: 65536})
	return out, perr
}

func (h *host) OnToolsChanged(fn func()) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	h.next++
	h.listeners[id] = fn
	return func() {
		h.mu.Lock()
		delete(h.listeners, id)
		h.mu.Unlock()
	}
}

func (h *host) register(t *toolbox.Tool) error {
	if err := h.reg.Register(t); err != nil {
		return err
	}
	h.mu.Lock()
	var fns []func()
	for _, fn := range h.listeners {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return nil
}

// declared are the hints tools declare (the others get MCP's defaults: not
// read-only, destructive, an open world).
var declared = map[string]*toolbox.Annotations{
	"echo":      toolbox.Declared(true, false, false, false),
	"fetch_url": toolbox.Declared(true, false, false, true),
}

// extras are the descriptor fields toolbox does not have yet.
var extras = map[string]struct {
	title, output string
	idempotent    bool
}{
	"add": {"Add two numbers", `{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`, true},
}

func tool(name, description, schema, returns string, caps []string, run toolbox.Func) *toolbox.Tool {
	d := toolbox.Descriptor{Name: name, Description: description, Returns: returns, Capabilities: caps, LLMVisible: true,
		Annotations: declared[name]}
	if schema != "" {
		d.InputSchema = json.RawMessage(schema)
	}
	t, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: run})
	if err != nil {
		panic(err)
	}
	return t
}

func echo(_ context.Context, c toolbox.Call) ([]byte, error) {
	return append([]byte(nil), c.Arguments...), nil
}

func newHost() *host {
	h := &host{reg: toolbox.NewRegistry(), listeners: map[int]func(){}, release: make(chan struct{}, 1),
		policy: toolbox.Scope{Config: toolbox.NewPolicy("the configuration", nil, []string{"hidden_tool"})}}
	obj := `{"type":"object","additionalProperties":false,`
	tools := []*toolbox.Tool{
		tool("echo", "Returns its arguments.", "", toolbox.ReturnsJSON, nil, echo),
		tool("add", "Adds a and b.", obj+`"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`,
			toolbox.ReturnsJSON, nil, func(_ context.Context, c toolbox.Call) ([]byte, error) {
				var a struct{ A, B float64 }
				if err := json.Unmarshal(c.Arguments, &a); err != nil {
					return nil, err
				}
				return json.Marshal(map[string]float64{"sum": a.A + a.B})
			}),
		tool("greet", "Greets someone.", obj+`"properties":{"name":{"type":"string"}},"required":["name"]}`,
			toolbox.ReturnsString, nil, func(_ context.Context, c toolbox.Call) ([]byte, error) {
				var a struct{ Name string }
				json.Unmarshal(c.Arguments, &a)
				return []byte("Hello, " + a.Name), nil
			}),
		tool("rm_rf", "Removes everything.", "", toolbox.ReturnsJSON, []string{toolbox.CapFSWrite}, echo),
		tool("fetch_url", "Fetches a URL.", "", toolbox.ReturnsJSON, []string{toolbox.CapNetwork}, echo),
		tool("hidden_tool", "Denied by configuration, so not listed.", "", toolbox.ReturnsJSON, nil, echo),
		tool("boom", "Panics.", "", toolbox.ReturnsJSON, nil, func(context.Context, toolbox.Call) ([]byte, error) {
			panic("boom")
		}),
		tool("whoami", "Returns the Clara session of the call.", "", toolbox.ReturnsString, nil,
			func(_ context.Context, c toolbox.Call) ([]byte, error) { return []byte(c.Session), nil }),
		tool("steps", "Reports n steps of progress, then waits (at most 20 s) for release_steps.", obj+`"properties":{"n":{"type":"integer","minimum":1,"maximum":100}},"required":["n"]}`,
			toolbox.ReturnsString, nil, func(ctx context.Context, c toolbox.Call) ([]byte, error) {
				var a struct{ N int }
				json.Unmarshal(c.Arguments, &a)
				progress, _ := ctx.Value(progressKey{}).(mcp.ProgressFunc)
				for i := 1; i <= a.N; i++ {
					if progress != nil {
						progress(float64(i), float64(a.N), fmt.Sprintf("step %d", i))
					}
				}
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(20 * time.Second):
				}
				return []byte(fmt.Sprintf("done %d", a.N)), nil
			}),
		tool("release_steps", "Lets a waiting steps call return.", "", toolbox.ReturnsString, nil,
			func(context.Context, toolbox.Call) ([]byte, error) {
				h.release <- struct{}{}
				return []byte("released"), nil
			}),
		tool("register_tool", "Registers an echo tool under a new name.", obj+`"properties":{"name":{"type":"string"}},"required":["name"]}`,
			toolbox.ReturnsString, nil, func(_ context.Context, c toolbox.Call) ([]byte, error) {
				var a struct{ Name string }
				json.Unmarshal(c.Arguments, &a)
				if err := h.register(tool(a.Name, "Registered at run time.", "", toolbox.ReturnsJSON, nil, echo)); err != nil {
					return nil, err
				}
				return []byte("registered " + a.Name), nil
			}),
	}
	slow := tool("slow", "Reports one step of progress, then waits until cancelled.", "", toolbox.ReturnsString, nil,
		func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
			h.slowMu.Lock()
			ended := make(chan struct{})
			h.slowEnded = ended
			h.slowMu.Unlock()
			if progress, _ := ctx.Value(progressKey{}).(mcp.ProgressFunc); progress != nil {
				progress(1, 0, "started")
			}
			<-ctx.Done()
			h.slowMu.Lock()
			h.slowReason = ctx.Err().Error()
			h.slowMu.Unlock()
			close(ended)
			return nil, ctx.Err()
		})
	lastSlow := tool("last_slow", "Waits (at most 20 s) for the last slow call to end; says why it did.", "", toolbox.ReturnsString, nil,
		func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
			h.slowMu.Lock()
			ended := h.slowEnded
			h.slowMu.Unlock()
			if ended == nil {
				return []byte("no slow call"), nil
			}
			select {
			case <-ended:
			case <-time.After(20 * time.Second):
				return []byte("still running"), nil
			}
			h.slowMu.Lock()
			defer h.slowMu.Unlock()
			return []byte("ended: " + h.slowReason), nil
		})
	tools = append(tools, slow, lastSlow)
	for _, t := range tools {
		if err := h.reg.Register(t); err != nil {
			panic(err)
		}
	}
	return h
}

func main() {
	listen := flag.String("listen", "", "serve Streamable HTTP on this address instead of stdio")
	token := flag.String("token", "", "bearer token required over HTTP")
	maxSessions := flag.Int("max-sessions", 0, "the most HTTP sessions open at once (0: the default)")
	flag.Parse()
	log := logging.New(func(l logging.Level, m string) { fmt.Fprintf(os.Stderr, "%s: %s\n", l, m) }, logging.Warn)
	srv := mcp.NewServer(newHost(), mcp.ServerOptions{Name: "clara-testserver", Version: "1", Logger: log})
	defer srv.Close()
	if *listen == "" {
		if err := srv.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	addr, err := srv.Listen(*listen, mcp.ListenOptions{BearerToken: *token, MaxSessions: *maxSessions})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("url http://%s%s\n", addr, mcp.HTTPPath)
	io.Copy(io.Discard, bufio.NewReader(os.Stdin)) // until the test closes stdin
	srv.Stop()
}
