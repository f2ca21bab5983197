package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clara-lib/clara/core/fsread"
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
// to the rule file's directory (Source.Dir) and must stay inside
// Source.Root. A compile error is *located:
// at the script file's line, or for inline Lua at the rule file's line
// where the error is.
func luaSource(src Source, inline, file *string, what string, lim rulelua.Limits) (*rulelua.Script, string, error) {
	if inline != nil {
		s, err := rulelua.CompileWithLimits(fmt.Sprintf("%s (%s)", src.Name, what), *inline, lim)
		if err != nil {
			return nil, *inline, &located{file: src.Name, line: inlineLine(src.Text, *inline, luaLine(err, *inline)), msg: luaMessage(err)}
		}
		return s, *inline, nil
	}
	path := *file
	if path == "" {
		return nil, "", fmt.Errorf("script path is empty")
	}
	dir := src.Dir
	if dir == "" {
		dir = filepath.Dir(src.Name)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	root := src.Root
	if root == "" {
		root = dir
	}
	// A script that cannot be read is a problem at the line naming it:
	// missing, outside root, a named pipe or a device, too large.
	text, err := fsread.In(root, path, maxScriptFile)
	if err != nil {
		return nil, "", &located{file: src.Name, line: locate(src.Text, *file), msg: "script: " + err.Error()}
	}
	s, err := rulelua.CompileWithLimits(path, string(text), lim)
	if err != nil {
		return nil, string(text), &located{file: path, line: luaLine(err, string(text)), msg: luaMessage(err)}
	}
	return s, string(text), nil
}

// located is an error with its own place (a Lua script's line), which a
// rule's problem reports instead of the rule's line.
type located struct {
	file string
	line int // 0: unknown
	msg  string
}

func (l *located) Error() string { return l.msg }

// luaLine is the line of script a compile error points at (its last line
// for an error at the end of the file), 0 when unknown.
func luaLine(err error, script string) int {
	var le *rulelua.Error
	if !errors.As(err, &le) {
		return 0
	}
	if le.Line > 0 {
		return le.Line
	}
	// The pre-scan's errors say "name: line N: ...".
	if rest, ok := strings.CutPrefix(le.Message, le.Script+": line "); ok {
		if n, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ':'), 0)]); err == nil {
			return n
		}
	}
	if strings.HasSuffix(le.Message, " at end of file") {
		return strings.Count(strings.TrimRight(script, " \t\r\n"), "\n") + 1
	}
	return 0
}

// luaMessage is a compile error's text without its "name:line:" prefix,
// which the problem's file and line say.
func luaMessage(err error) string {
	var le *rulelua.Error
	if !errors.As(err, &le) {
		return err.Error()
	}
	msg := strings.TrimPrefix(le.Message, le.Script+":")
	if msg == le.Message {
		return msg
	}
	if i := strings.IndexByte(msg, ':'); i > 0 && strings.Trim(msg[:i], "0123456789") == "" {
		msg = msg[i+1:] // the line
	} else if rest, ok := strings.CutPrefix(msg, " line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 && strings.Trim(rest[:i], "0123456789") == "" {
			msg = rest[i+1:]
		}
	}
	return strings.TrimSpace(msg)
}

// inlineLine is the line of the rule file where line n (from 1; 0:
// unknown) of an inline script is. When the script's text is in the file
// as it is (a literal or multi-line string), that is exact; when it was
// escaped (a one-line basic string, JSON), the script's first line is
// found, which is where such a script is whole.
func inlineLine(text []byte, script string, n int) int {
	if i := bytes.Index(text, []byte(script)); i >= 0 && script != "" {
		return lineAt(text, i) + max(n-1, 0)
	}
	return locate(text, firstLine(script))
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

// ruleScriptHost is what a rule's script reaches: the session's state (with the
// writes of this emission's earlier rules not yet visible: they commit
// at the end), tools and the log.
type ruleScriptHost struct {
	host    Host
	session string
	scope   string // where state.get reads: StateScope(session, the rule's namespace)
}

func (h ruleScriptHost) StateGet(key string) (any, bool, error) {
	return h.host.StateGet(h.scope, key)
}

func (h ruleScriptHost) CallTool(ctx context.Context, name string, args []byte) ([]byte, error) {
	return h.host.CallTool(ctx, h.session, name, args)
}

func (h ruleScriptHost) Log(level, message string) { h.host.Log(logging.MessageLevel(level), message) }

// runLua runs a rule's script against the emission's context. The script
// reaches the host through the runner's ruleScriptHost: a pointer to it,
// unlike a value, goes into the interface without an allocation (the
// script does not keep it after its run).
func (r *runner) runLua(ctx context.Context, s *rulelua.Script, session string, host Host) (rulelua.Result, error) {
	r.script = ruleScriptHost{host: host, session: session, scope: StateScope(session, r.ns)}
	return s.Run(ctx, r.env.Context, &r.script)
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
			if err := CheckDelivery(a.DeliverOn, a.DeliverAfterMS); err != nil {
				return nil, fmt.Errorf("notify: %v", err)
			}
			r.a.deliverOn, r.a.deliverAfterMS = a.DeliverOn, a.DeliverAfterMS
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
		case ActDeny, ActAsk, ActBlock:
			d, err := luaDecision(a, trigger)
			if err != nil {
				return nil, err
			}
			r = d
		default:
			return nil, fmt.Errorf("unknown script action %q", a.Type)
		}
		out = append(out, r)
	}
	return out, nil
}

// Bounds of a rule's timeout_ms and memory_mb (SPEC §8; the seed's 5 s
// is the ceiling a file may ask, its 50 MB the default memory).
const (
	maxLuaTimeoutMS = 5000
	maxLuaMemoryMB  = 1024
)

// luaLimits reads a rule's timeout_ms and memory_mb (absent: the
// defaults, 50 ms and 50 MiB); a bad value is a problem at its line.
func luaLimits(src Source, d *ruleDoc, line int, problems *ruleProblems) rulelua.Limits {
	var lim rulelua.Limits
	for _, f := range []struct {
		key string
		v   any
		max int64
		set func(int64)
	}{
		{"timeout_ms", d.TimeoutMS, maxLuaTimeoutMS, func(n int64) { lim.Deadline = time.Duration(n) * time.Millisecond }},
		{"memory_mb", d.MemoryMB, maxLuaMemoryMB, func(n int64) { lim.MaxMemoryBytes = n << 20 }},
	} {
		if f.v == nil {
			continue
		}
		n, ok := f.v.(int64)
		if x, isFloat := f.v.(float64); isFloat && x == float64(int64(x)) {
			n, ok = int64(x), true
		}
		if !ok || n < 1 || n > f.max {
			problems.add(locateKey(src.Text, f.key, f.key, line), "%s must be a whole number from 1 to %d, not %v", f.key, f.max, f.v)
			continue
		}
		f.set(n)
	}
	return lim
}

// locateKey is the line of the first of two keys in text at or after
// line (the rule's), or line.
func locateKey(text []byte, a, b string, line int) int {
	start := 0
	for l := 1; l < line && start < len(text); l++ {
		nl := bytes.IndexByte(text[start:], '\n')
		if nl < 0 {
			break
		}
		start += nl + 1
	}
	for _, k := range []string{a, b} {
		if i := bytes.Index(text[start:], []byte(k)); i >= 0 {
			return lineAt(text, start+i)
		}
	}
	return line
}

// hasLuaAction tells whether one of r's actions runs Lua.
func hasLuaAction(r *Rule) bool {
	for _, a := range r.actions {
		if a.script != nil {
			return true
		}
	}
	return false
}
