package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/rulelua"
)

// Lua in rules (SPEC §7.1, §8): a condition given as `lua = "..."` or
// `script = "file.lua"`, and actions of type "lua" that run a script. A
// script sees the event's context as `ctx` and asks for actions through
// its API (notify, state.set, emit, deny); they apply with the rule's own
// actions, all or none.

// maxScriptFile bounds what is read of a script file; rulelua.Compile has
// its own (smaller) source cap.
const maxScriptFile = 4 << 20

// luaSource compiles inline Lua or a script file. Script paths are relative
// to the rule file's directory (Source.Dir).
func luaSource(src Source, inline, file *string, what string) (*rulelua.Script, string, error) {
	if inline != nil {
		s, err := rulelua.Compile(fmt.Sprintf("%s (%s)", src.Name, what), *inline)
		return s, *inline, err
	}
	path := *file
	if path == "" {
		return nil, "", fmt.Errorf("script path is empty")
	}
	if !filepath.IsAbs(path) {
		dir := src.Dir
		if dir == "" {
			dir = filepath.Dir(src.Name)
		}
		path = filepath.Join(dir, path)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("script: %v", err)
	}
	if info.Size() > maxScriptFile {
		return nil, "", fmt.Errorf("script %s: %d bytes, over the %d-byte limit", path, info.Size(), maxScriptFile)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("script: %v", err)
	}
	s, err := rulelua.Compile(path, string(text))
	return s, string(text), err
}

// luaTruthy is Lua's truth: everything but nil and false.
func luaTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	}
	return true
}

// luaHost is what a rule's script reaches: the session's state (with the
// writes of this emission's earlier rules not yet visible: they commit
// at the end), tools and the log.
type luaHost struct {
	host    Host
	session string
}

func (h luaHost) StateGet(key string) (any, bool, error) { return h.host.StateGet(h.session, key) }

func (h luaHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, error) {
	return h.host.CallTool(ctx, h.session, name, args)
}

func (h luaHost) Log(level, message string) { h.host.Log(logging.MessageLevel(level), message) }

// runLua runs a rule's script against the emission's context. The script
// reaches the host through the runner's luaHost: a pointer to it, unlike
// a luaHost value, goes into the interface without an allocation (the
// script does not keep it after its run).
func (r *runner) runLua(ctx context.Context, s *rulelua.Script, session string, host Host) (rulelua.Result, error) {
	r.lua = luaHost{host: host, session: session}
	return s.Run(ctx, r.env.Context, &r.lua)
}

// luaActions turns what a script asked for into rendered actions of the
// rule. A deny outside on_tool_call is refused like a deny action there.
func luaActions(list []rulelua.Action, trigger string) ([]rendered, error) {
	out := make([]rendered, 0, len(list))
	for _, a := range list {
		r := rendered{a: &action{kind: a.Type}}
		switch a.Type {
		case ActNotify:
			r.a.priority, r.text = a.Priority, a.Message // rulelua checked the priority
		case ActSetState:
			if a.Key == "" {
				return nil, fmt.Errorf("state.set: empty key")
			}
			if _, err := json.Marshal(a.Value); err != nil {
				return nil, fmt.Errorf("state.set(%q): %v", a.Key, err)
			}
			r.a.key, r.value = a.Key, a.Value
		case ActEmit:
			if !ValidEventName(a.Event) {
				return nil, fmt.Errorf("emit: %q is not an event name ([a-z][a-z0-9_.]*)", a.Event)
			}
			r.a.event = a.Event
			if a.Payload != nil {
				r.value = a.Payload
			}
		case ActDeny:
			if trigger != "on_tool_call" {
				return nil, fmt.Errorf("deny only acts on on_tool_call, not %s", trigger)
			}
			r.text = a.Reason
		default:
			return nil, fmt.Errorf("unknown script action %q", a.Type)
		}
		out = append(out, r)
	}
	return out, nil
}
