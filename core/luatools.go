package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
	"github.com/clara-lib/clara/rulelua"
)

// Tools declared in configuration ([[tools]], SPEC §8): a descriptor plus
// the Lua that runs it, inline (lua) or in a file (lua_file, relative to
// project_root). They are registered when the configuration is installed
// and replaced by every configuration change.

// maxLuaToolFile bounds what is read of a lua_file; rulelua.Compile has its
// own source cap.
const maxLuaToolFile = 4 << 20

// checkToolEntries checks the [[tools]] array: each entry's descriptor
// keys (strictly, as clara_register_tool would) and exactly one of lua and
// lua_file. It returns the entries as given.
func checkToolEntries(val any, path string, problems *[]string) ([]any, bool) {
	list, ok := val.([]any)
	if !ok {
		*problems = append(*problems, fmt.Sprintf("%s must be an array of tables ([[tools]])", path))
		return nil, false
	}
	names := map[string]bool{}
	for i, item := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		m, ok := item.(map[string]any)
		if !ok {
			*problems = append(*problems, at+" must be a table")
			continue
		}
		d, _, _, err := splitToolEntry(m)
		if err != nil {
			*problems = append(*problems, fmt.Sprintf("%s: %v", at, err))
			continue
		}
		if names[d.Name] {
			*problems = append(*problems, fmt.Sprintf("%s: tool %q is declared twice", at, d.Name))
		}
		names[d.Name] = true
	}
	return list, true
}

// splitToolEntry separates an entry's Lua from its descriptor.
func splitToolEntry(m map[string]any) (d toolbox.Descriptor, inline, file *string, err error) {
	desc := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "lua", "lua_file":
			s, ok := v.(string)
			if !ok {
				return d, nil, nil, fmt.Errorf("%s must be a string", k)
			}
			if k == "lua" {
				inline = &s
			} else {
				file = &s
			}
		default:
			desc[k] = v
		}
	}
	if (inline == nil) == (file == nil) {
		return d, nil, nil, errors.New("give one of lua (the script) or lua_file (a file relative to project_root); HTTP tools are not available in this version")
	}
	text, err := json.Marshal(desc)
	if err != nil {
		return d, nil, nil, err
	}
	d, err = toolbox.ParseDescriptor(text)
	return d, inline, file, err
}

// luaTools compiles the configuration's Lua tools. Nothing is registered:
// the caller does that once the whole configuration is known to install.
func (e *Engine) luaTools(c *Config) ([]*toolbox.Tool, error) {
	var out []*toolbox.Tool
	var problems []string
	for i, m := range c.Tools {
		d, inline, file, err := splitToolEntry(m)
		if err != nil {
			problems = append(problems, fmt.Sprintf("tools[%d]: %v", i, err))
			continue
		}
		if _, ok := e.tools.Lookup(d.Name); ok && e.builtinTool(d.Name) {
			problems = append(problems, fmt.Sprintf("tools[%d]: %q is a built-in tool", i, d.Name))
			continue
		}
		var src, name string
		if inline != nil {
			src, name = *inline, "tool "+d.Name
		} else {
			p := *file
			if !filepath.IsAbs(p) {
				p = filepath.Join(c.ProjectRoot, p)
			}
			text, err := readLimited(p, maxLuaToolFile)
			if err != nil {
				problems = append(problems, fmt.Sprintf("tools[%d] (%s): lua_file: %v", i, d.Name, err))
				continue
			}
			src, name = text, p
		}
		script, err := rulelua.Compile(name, src)
		if err != nil {
			problems = append(problems, fmt.Sprintf("tools[%d] (%s): %v", i, d.Name, err))
			continue
		}
		t, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: e.luaToolRun(script), SelfTimed: true})
		if err != nil {
			problems = append(problems, fmt.Sprintf("tools[%d]: %v", i, err))
			continue
		}
		out = append(out, t)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

func (e *Engine) builtinTool(name string) bool {
	t, ok := e.tools.Lookup(name)
	return ok && t.Builtin
}

func readLimited(path string, max int64) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Size() > max {
		return "", fmt.Errorf("%s: %d bytes, over the %d-byte limit", path, info.Size(), max)
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

// luaToolRun is a Lua tool's function: arguments decoded, the script's
// function called with them (under the call's deadline), its value encoded.
// What the script asks for applies once it returns: notices go to the
// session's queue (notifications_drain), state writes commit, events fire.
func (e *Engine) luaToolRun(script *rulelua.Script) toolbox.Func {
	return func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		var args map[string]any
		if len(call.Arguments) > 0 {
			if err := json.Unmarshal(call.Arguments, &args); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "arguments: %v", err)
			}
		}
		s := e.cfg.Load()
		session := strings.Clone(call.Session)
		h := &luaToolHost{e: e, s: s, session: session, scope: call.Scope}
		res, err := script.Call(ctx, args, h)
		if err != nil {
			return nil, err
		}
		if err := e.applyLuaActions(ctx, s, session, call.Tool.Name, res.Actions); err != nil {
			return nil, err
		}
		if call.Tool.Returns == toolbox.ReturnsString {
			text, ok := res.Value.(string)
			if !ok {
				return nil, fmt.Errorf("the tool returns a string (\"returns\": \"string\") but its function returned %s", luaTypeName(res.Value))
			}
			return []byte(text), nil
		}
		out, err := rulelua.EncodeJSON(res.Value)
		if err != nil {
			return nil, fmt.Errorf("the tool's value: %v", err)
		}
		return out, nil
	}
}

// applyLuaActions applies what a Lua tool asked for.
func (e *Engine) applyLuaActions(ctx context.Context, s *settings, session, tool string, actions []rulelua.Action) error {
	var writes []rules.StateWrite
	var notices []rules.Notice
	for _, a := range actions {
		switch a.Type {
		case "notify_self":
			notices = append(notices, rules.Notice{Rule: "tool:" + tool, Message: a.Message, Priority: a.Priority})
		case "set_state":
			b, err := json.Marshal(a.Value)
			if err != nil {
				return fmt.Errorf("state.set(%q): %v", a.Key, err)
			}
			writes = append(writes, rules.StateWrite{Key: a.Key, Value: b})
		case "emit_event":
			if !rules.ValidEventName(a.Event) {
				return fmt.Errorf("emit: %q is not an event name", a.Event)
			}
		case "deny":
			return errors.New("deny() acts only in on_tool_call rules, not in a tool")
		}
	}
	if len(writes) > 0 {
		if err := s.host.ApplyState(session, writes); err != nil {
			return err
		}
	}
	if len(notices) > 0 {
		e.sessionFor(session).queue(notices)
	}
	for _, a := range actions {
		if a.Type == "emit_event" {
			out := s.host.Chain(ctx, session, a.Event, a.Payload, 1, false)
			if len(out.Notices) > 0 {
				e.sessionFor(session).queue(out.Notices)
			}
		}
	}
	return nil
}

// luaToolHost is what a Lua tool's script reaches.
type luaToolHost struct {
	e       *Engine
	s       *settings
	session string
	scope   toolbox.Scope
}

func (h *luaToolHost) StateGet(key string) (any, bool, error) {
	return h.s.host.StateGet(h.session, key)
}

// CallTool runs a tool under the calling tool's policy, one level deeper.
func (h *luaToolHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, error) {
	return h.e.nestedCall(ctx, h.s, name, h.session, args, h.scope)
}

func (h *luaToolHost) Log(level, message string) { h.e.log.Log(logging.MessageLevel(level), message) }

// luaTypeName names a converted Lua value's type for messages.
func luaTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case bool:
		return "a boolean"
	case float64, int, int64:
		return "a number"
	case []any, map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}
