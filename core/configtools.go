package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/rulelua"
)

// Tools declared in configuration ([[tools]], SPEC §8): a descriptor plus
// the Lua that runs it, inline (lua) or in a file (lua_file, relative to
// project_root). A relative lua_file stays inside project_root, symbolic
// links resolved, as rules.paths does; an absolute one is taken as given,
// since the host's own configuration could name any file anyway (a
// plugin's tools are held to the plugin's folder: plugins.go). They are compiled when a configuration is prepared and
// registered when it is committed, in place of the previous
// configuration's.

// maxLuaToolFile bounds what is read of a lua_file; rulelua.Compile has its
// own source cap.
const maxLuaToolFile = 4 << 20

// compileConfigTools compiles the configuration's tools and lists the URLs
// of its HTTP tools; origins says who declares each entry (withPluginTools),
// and pluginLua holds the lua_files of plugins' tools, read when the
// plugins were. Nothing is registered: commit does that once the whole
// configuration is ready.
func (e *Engine) compileConfigTools(c *config.Config, origins []toolbox.Origin, pluginLua map[string][]byte) ([]*toolbox.Tool, []string, error) {
	var out []*toolbox.Tool
	var urls []string
	var problems protocol.Problems
	for i, m := range c.Tools {
		origin := toolbox.Origin{Rank: rankConfig, Name: "the configuration's [[tools]]"}
		if i < len(origins) {
			origin = origins[i]
		}
		at := fmt.Sprintf("tools[%d]", i)
		d, code, err := config.SplitToolEntry(m)
		if err != nil {
			problems = append(problems, protocol.Problem{Message: at + ": " + err.Error()})
			continue
		}
		at = fmt.Sprintf("%s (%s)", at, d.Name)
		if t, ok := e.tools.Lookup(d.Name); ok && t.Builtin {
			problems = append(problems, protocol.Problem{Message: fmt.Sprintf("%s: %q is a built-in tool", at, d.Name)})
			continue
		}
		if code.HTTP != nil {
			t, err := e.httpTool(d, code.HTTP, origin)
			if err != nil {
				problems = append(problems, protocol.Problem{Message: at + ": " + err.Error()})
				continue
			}
			urls = append(urls, code.HTTP.URL)
			out = append(out, t)
			continue
		}
		src, name := "", "tool "+d.Name
		if code.Lua != nil {
			src = *code.Lua
		} else {
			name = *code.LuaFile
			text, ok := pluginLua[d.Name]
			var err error
			switch {
			case ok: // a plugin's, read inside its folder
			case filepath.IsAbs(name):
				text, err = fsread.File(name, maxLuaToolFile)
			default:
				name = filepath.Join(c.ProjectRoot, name)
				text, err = fsread.In(c.ProjectRoot, name, maxLuaToolFile)
			}
			if err != nil {
				problems = append(problems, protocol.Problem{Message: fmt.Sprintf("%s: lua_file: %v", at, err)})
				continue
			}
			src = string(text)
		}
		script, err := rulelua.CompileWithLimits(name, src, rulelua.Limits{MaxMemoryBytes: int64(code.MemoryMB) << 20})
		if err != nil {
			problems = append(problems, luaProblem(err, at, code.LuaFile != nil))
			continue
		}
		t, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: e.luaToolRun(script), SelfTimed: true, PollsDeadline: true, CompactJSON: true, KeepsNothing: true,
			Origin: origin})
		if err != nil {
			problems = append(problems, protocol.Problem{Message: at + ": " + err.Error()})
			continue
		}
		out = append(out, t)
	}
	if len(problems) > 0 {
		return nil, nil, problems
	}
	return out, urls, nil
}

// httpTool builds a [[tools]] table's HTTP tool: capability network (so
// test mode skips it), timed by its own request deadline.
func (e *Engine) httpTool(d toolbox.Descriptor, h *config.HTTPCode, origin toolbox.Origin) (*toolbox.Tool, error) {
	f, err := e.httpToolFunc(d, h)
	if err != nil {
		return nil, err
	}
	if !contains(d.Capabilities, toolbox.CapNetwork) {
		d.Capabilities = append(append([]string(nil), d.Capabilities...), toolbox.CapNetwork)
	}
	return toolbox.NewTool(d, toolbox.ToolOptions{Run: f, SelfTimed: true, Origin: origin})
}

// luaProblem positions a Lua compile error of the entry at: a lua_file's
// problem is at its file and line; an inline script's names the entry and
// the line in its lua (the configuration text's own lines are elsewhere).
func luaProblem(err error, at string, inFile bool) protocol.Problem {
	var le *rulelua.Error
	if !errors.As(err, &le) {
		return protocol.Problem{Message: at + ": " + err.Error()}
	}
	msg := le.Message
	if prefix := fmt.Sprintf("%s:%d:", le.Script, le.Line); le.Line > 0 && strings.HasPrefix(msg, prefix) {
		msg = strings.TrimSpace(msg[len(prefix):])
	} else {
		msg = strings.TrimSpace(strings.TrimPrefix(msg, le.Script+":"))
	}
	if inFile {
		return protocol.Problem{File: le.Script, Line: le.Line, Message: msg}
	}
	if le.Line > 0 {
		return protocol.Problem{Message: fmt.Sprintf("%s: lua line %d: %s", at, le.Line, msg)}
	}
	return protocol.Problem{Message: at + ": lua: " + msg}
}

// swapConfigTools registers the configuration's tools in place of the
// previous configuration's (those a host has since replaced stay), and
// returns the tools that left the registry. Called with e.admin held.
func (e *Engine) swapConfigTools(next []*toolbox.Tool) []*toolbox.Tool {
	mine := map[*toolbox.Tool]bool{}
	for _, old := range e.configTools {
		mine[old] = true
	}
	// prepare refused what would take a host tool's name; one the host
	// registered since is kept, and the configured tool left out.
	left, refused := e.tools.SwapGuarded(func(t *toolbox.Tool) bool { return mine[t] }, next, e.nameGuard)
	for _, err := range refused {
		e.log.Logf(logging.Error, "configured tools: %v", err)
	}
	e.configTools = next
	return left
}

// toolHosts recycles the hosts of Lua tool runs (an allocation a call).
var toolHosts = sync.Pool{New: func() any { return new(toolScriptHost) }}

// luaToolRun is a Lua tool's function: arguments decoded, the script's
// function called with them (under the call's deadline), its value encoded.
// What the script asks for applies once it returns: notices go to the
// session's queue (notifications_drain), state writes commit, events fire.
func (e *Engine) luaToolRun(script *rulelua.Script) toolbox.Func {
	return func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		if args := bytes.TrimSpace(call.Arguments); len(args) > 0 && args[0] != '{' {
			return nil, protocol.Errorf(protocol.InvalidArgs, "arguments: a Lua tool takes a JSON object, not %s", protocol.KindOf(args[0]))
		}
		s := e.current.Load()
		h := toolHosts.Get().(*toolScriptHost)
		*h = toolScriptHost{e: e, s: s, tool: call.Tool.Name, session: call.Session, scope: call.Scope, progress: ProgressOf(ctx),
			clientLog: ClientLogOf(ctx)}
		var res rulelua.Result
		var err error
		if room := call.Room; room != nil {
			// Encoded into the request's buffer, kept for its next call:
			// the result is read only until the answer is written.
			if res, err = script.AppendCallJSON(room.Out[:0], ctx, call.Arguments, h); err == nil {
				room.Out = res.JSON[:0]
			}
		} else {
			res, err = script.CallJSON(ctx, call.Arguments, h)
		}
		*h = toolScriptHost{}
		toolHosts.Put(h) // rulelua keeps no Host past the run
		if err != nil {
			return nil, err
		}
		if len(res.Actions) > 0 {
			HandOnContext(ctx) // the actions may fire rules with ctx
			if err := e.applyToolScriptActions(ctx, s, call.Session, call.Tool.Name, res.Actions); err != nil {
				return nil, err
			}
		}
		if call.Tool.Returns == toolbox.ReturnsString {
			text, ok := res.Value.(string)
			if !ok {
				return nil, fmt.Errorf("the tool returns a string (\"returns\": \"string\") but its function returned %s", jsonTypeName(res.JSON))
			}
			return []byte(text), nil
		}
		return res.JSON, nil
	}
}

// applyToolScriptActions applies what a Lua tool asked for.
func (e *Engine) applyToolScriptActions(ctx context.Context, s *snapshot, session, tool string, actions []rulelua.Action) error {
	var writes []rules.StateWrite
	var notices []protocol.Notice
	for _, a := range actions {
		switch a.Type {
		case rules.ActNotify:
			if err := rules.CheckDelivery(a.DeliverOn, a.DeliverAfterMS); err != nil {
				return fmt.Errorf("notify: %v", err)
			}
			notices = append(notices, protocol.Notice{Rule: "tool:" + tool, Message: a.Message, Priority: a.Priority,
				DeliverOn: a.DeliverOn, DeliverAfterMS: a.DeliverAfterMS})
		case rules.ActSetState:
			b, err := json.Marshal(a.Value)
			if err != nil {
				return fmt.Errorf("state.set(%q): %v", a.Key, err)
			}
			writes = append(writes, rules.StateWrite{Key: a.Key, Value: b})
		case rules.ActEmit:
			if !rules.ValidEventName(a.Event) {
				return fmt.Errorf("emit: %q is not an event name", a.Event)
			}
		case rules.ActDeny:
			return errors.New("deny() acts only in on_tool_call rules, not in a tool")
		case rules.ActAsk, rules.ActBlock:
			return fmt.Errorf("%s() acts only in rules, not in a tool", a.Type)
		}
	}
	if len(writes) > 0 {
		if err := s.host.ApplyState(session, writes); err != nil {
			return err
		}
	}
	sess := e.sessions.Get(session)
	sess.Queue(notices)
	for _, a := range actions {
		if a.Type == rules.ActEmit {
			out, err := s.host.Chain(withEmissionBudget(ctx, s), session, a.Event, a.Payload, 1, false)
			if err != nil {
				return err
			}
			sess.Queue(out.Notices)
			sess.Queue(out.Deferred)
		}
	}
	return nil
}

// jsonTypeName names the type of a Lua tool's value, from its JSON, for
// messages.
func jsonTypeName(v []byte) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case 'n':
		return "nil"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '{', '[':
		return "a table"
	}
	return "a number"
}
