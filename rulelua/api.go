package rulelua

import (
	"context"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

func (st *lstate) addAction(L *lua.LState, a Action) {
	if len(st.actions) >= maxActions {
		st.raiseLimit(L, "more than %d actions in one run", maxActions)
	}
	st.actions = append(st.actions, a)
}

func (st *lstate) notify(L *lua.LState) int {
	msg := checkStr(L, 1, "notify")
	pr := optStr(L, 2, "notify", "normal")
	if !notifyPriorities[pr] {
		argError(L, 2, "notify", "priority must be low, normal, high or critical, got '"+pr+"'")
	}
	a := Action{Type: "notify_self", Message: msg, Priority: pr}
	if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
		opts := st.tableArg(L, 3, "notify")
		for k, v := range opts {
			switch k {
			case "deliver_on":
				s, ok := v.(string)
				if !ok || s == "" {
					argError(L, 3, "notify", "deliver_on must be an event name")
				}
				a.DeliverOn = s
			case "deliver_after_ms":
				f, ok := v.(float64)
				if !ok || f < 1 || f != math.Trunc(f) || f > math.MaxInt32 {
					argError(L, 3, "notify", "deliver_after_ms must be a whole number of milliseconds")
				}
				a.DeliverAfterMS = int(f)
			default:
				argError(L, 3, "notify", "unknown option '"+k+"' (deliver_on, deliver_after_ms)")
			}
		}
	}
	st.addAction(L, a)
	return 0
}

var notifyPriorities = map[string]bool{"low": true, "normal": true, "high": true, "critical": true}

var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

func (st *lstate) log(L *lua.LState) int {
	level := checkStr(L, 1, "log")
	if !logLevels[level] {
		argError(L, 1, "log", "level must be debug, info, warn or error, got '"+level+"'")
	}
	st.emitLog(level, checkStr(L, 2, "log"))
	return 0
}

func validEvent(name string) bool {
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// tableArg converts argument n (a table or nil) into a JSON object.
func (st *lstate) tableArg(L *lua.LState, n int, fname string) map[string]any {
	v := L.Get(n)
	switch v.(type) {
	case *lua.LNilType:
		return map[string]any{}
	case *lua.LTable, *lua.LUserData:
	default:
		typeError(L, n, fname, "table")
	}
	g, err := st.toGo(v)
	if err != nil {
		st.convError(L, n, fname, err)
	}
	switch x := g.(type) {
	case map[string]any:
		return x
	case []any:
		if len(x) == 0 {
			return map[string]any{}
		}
	}
	argError(L, n, fname, "table with string keys expected, got a list")
	return nil
}

func (st *lstate) convError(L *lua.LState, n int, fname string, err error) {
	st.checkDeadline(L)
	if le, ok := err.(*Error); ok && le.Kind == KindLimit {
		st.raiseLimit(L, "%s", le.Message)
	}
	argError(L, n, fname, err.Error())
}

func (st *lstate) emit(L *lua.LState) int {
	ev := checkStr(L, 1, "emit")
	if !validEvent(ev) {
		argError(L, 1, "emit", "invalid event name '"+ev+"' (want [a-z][a-z0-9_.]*)")
	}
	payload := st.tableArg(L, 2, "emit")
	st.addAction(L, Action{Type: "emit_event", Event: ev, Payload: payload})
	return 0
}

func (st *lstate) deny(L *lua.LState) int {
	reason := checkStr(L, 1, "deny")
	st.addAction(L, Action{Type: "deny", Reason: reason})
	return 0
}

// ask(reason) holds a tool call for a person's approval (a rule on
// on_tool_call); block(reason) refuses a result or an answer (on
// on_tool_complete, on_answer). The host checks where they act.
func (st *lstate) ask(L *lua.LState) int {
	st.addAction(L, Action{Type: "ask", Reason: checkStr(L, 1, "ask")})
	return 0
}

func (st *lstate) block(L *lua.LState) int {
	st.addAction(L, Action{Type: "block", Reason: checkStr(L, 1, "block")})
	return 0
}

func (st *lstate) stateGet(L *lua.LState) int {
	key := checkStr(L, 1, "state.get")
	if v, ok := st.sets[key]; ok {
		L.Push(st.mustLua(L, v))
		return 1
	}
	if st.host == nil {
		L.Push(lua.LNil)
		return 1
	}
	v, ok, err := st.host.StateGet(key)
	st.checkDeadline(L)
	if err != nil {
		L.RaiseError("state.get('%s'): %s", key, err.Error())
	}
	if !ok {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(st.mustLua(L, v))
	return 1
}

func (st *lstate) mustLua(L *lua.LState, v any) lua.LValue {
	lv, err := st.toLua(v)
	if err != nil {
		st.checkDeadline(L)
		L.RaiseError("%s", err.Error())
	}
	return lv
}

func (st *lstate) stateSet(L *lua.LState) int {
	key := checkStr(L, 1, "state.set")
	if key == "" {
		argError(L, 1, "state.set", "empty key")
	}
	v, err := st.toGo(checkAny(L, 2, "state.set"))
	if err != nil {
		st.convError(L, 2, "state.set", err)
	}
	if st.sets == nil {
		st.sets = map[string]any{}
	}
	st.sets[key] = v
	st.addAction(L, Action{Type: "set_state", Key: key, Value: v})
	return 0
}

// maxProgressMessage bounds a progress message: it is a line for people.
const maxProgressMessage = 1024

// progress(done [, total [, message]]) reports a running tool's progress to a ProgressHost at
// once (it is not an action: it must arrive while the tool runs). total 0 means unknown.
func (st *lstate) progress(L *lua.LState) int {
	done := checkNum(L, 1, "progress")
	total := 0.0
	if L.Get(2) != lua.LNil {
		total = checkNum(L, 2, "progress")
	}
	msg := optStr(L, 3, "progress", "")
	if math.IsNaN(done) || math.IsInf(done, 0) || math.IsNaN(total) || math.IsInf(total, 0) || total < 0 {
		argError(L, 1, "progress", "done and total must be finite numbers, total not negative")
	}
	if len(msg) > maxProgressMessage {
		argError(L, 3, "progress", sprintf("message longer than %d bytes", maxProgressMessage))
	}
	if ph, ok := st.host.(ProgressHost); ok {
		ph.Progress(done, total, msg)
		st.checkDeadline(L)
	}
	return 0
}

func (st *lstate) callTool(L *lua.LState) int {
	name := checkStr(L, 1, "call_tool")
	args := st.tableArg(L, 2, "call_tool")
	if st.host == nil {
		L.RaiseError("call_tool('%s'): no host to call tools", name)
	}
	data, err := EncodeJSON(args)
	if err != nil {
		argError(L, 2, "call_tool", err.Error())
	}
	ctx, cancel := context.WithDeadline(st.parent, st.dctx.deadline)
	res, err := st.host.CallTool(ctx, name, data)
	cancel()
	st.checkDeadline(L)
	if err != nil {
		L.RaiseError("call_tool('%s'): %s", name, err.Error())
	}
	st.charge(L, len(res), "call_tool")
	if len(strings.TrimSpace(string(res))) == 0 {
		L.Push(lua.LNil)
		return 1
	}
	v, err := st.decodeJSONLua(L, string(res))
	if err != nil {
		L.RaiseError("call_tool('%s'): invalid JSON result: %s", name, err.Error())
	}
	L.Push(v)
	return 1
}

func (st *lstate) jsonEncode(L *lua.LState) int {
	v, err := st.toGo(checkAny(L, 1, "json.encode"))
	if err != nil {
		st.convError(L, 1, "json.encode", err)
	}
	data, err := EncodeJSON(v)
	if err != nil {
		argError(L, 1, "json.encode", err.Error())
	}
	st.charge(L, len(data), "json.encode")
	L.Push(lua.LString(data))
	return 1
}

func (st *lstate) jsonDecode(L *lua.LState) int {
	s := checkStr(L, 1, "json.decode")
	st.charge(L, len(s), "json.decode")
	v, err := st.decodeJSONLua(L, s)
	if err != nil {
		L.RaiseError("json.decode: %s", err.Error())
	}
	L.Push(v)
	return 1
}

// newCtx wraps a ctx map in read-only userdata. The userdata objects are recycled from run to
// run (nothing a run creates survives it), up to a few dozen per state.
func (st *lstate) newCtx(m map[string]any) lua.LValue {
	var ud *lua.LUserData
	if st.nuds < len(st.uds) {
		ud = st.uds[st.nuds]
		st.nuds++
	} else {
		ud = st.L.NewUserData()
		ud.Metatable = st.ctxMT
		if len(st.uds) < 64 {
			st.uds = append(st.uds, ud)
			st.nuds++
		}
	}
	ud.Value = m
	return ud
}

// ctxIndex is ctx's __index: it converts one field at a time.
func (st *lstate) ctxIndex(L *lua.LState) int {
	ud, ok := L.Get(1).(*lua.LUserData)
	if !ok {
		L.Push(lua.LNil)
		return 1
	}
	m, _ := ud.Value.(map[string]any)
	k, ok := L.Get(2).(lua.LString)
	if !ok || m == nil {
		L.Push(lua.LNil)
		return 1
	}
	if k == "state" && ud == st.ctxUD {
		// The seed's context.state.get('k'): the state map, with get and
		// set. A rule's context always holds the state as a map (absent:
		// an empty one); anything else under that name is shown as it is.
		v := m["state"]
		if sm, isMap := v.(map[string]any); isMap || v == nil {
			if sm == nil {
				sm = noState
			}
			st.stateUD.Value = sm
			L.Push(st.stateUD)
			return 1
		}
	}
	L.Push(st.lazyLua(m[string(k)]))
	return 1
}

// noState is context.state when the context has none: empty, never written.
var noState = map[string]any{}

// stateViewIndex is context.state's __index: get and set are the seed's
// functions (state.get and state.set); any other key reads the state's
// value as it was when the event fired, as context.state.KEY does in
// expressions. A key named "get" or "set" is read with
// context.state.get('get').
func (st *lstate) stateViewIndex(L *lua.LState) int {
	ud, _ := L.Get(1).(*lua.LUserData)
	k, ok := L.Get(2).(lua.LString)
	switch {
	case !ok || ud == nil:
		L.Push(lua.LNil)
	case k == "get":
		L.Push(st.stateGetFn)
	case k == "set":
		L.Push(st.stateSetFn)
	default:
		m, _ := ud.Value.(map[string]any)
		L.Push(st.lazyLua(m[string(k)]))
	}
	return 1
}

// viewMethod makes fn callable as context.state.get(k), as the seed writes
// it, and as context.state:get(k): a first argument that is context.state
// itself is dropped.
func (st *lstate) viewMethod(fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if L.GetTop() > 0 && L.Get(1) == st.stateUD {
			L.Remove(1)
		}
		return fn(L)
	}
}

// concat is the guarded replacement of the .. operator (see compile.go). It concatenates its
// arguments right to left, as OP_CONCAT does, calling __concat metamethods where needed.
func (st *lstate) concat(L *lua.LState) int {
	n := L.GetTop()
	if n == 2 {
		if a, ok := L.Get(1).(lua.LString); ok {
			if b, ok := L.Get(2).(lua.LString); ok {
				st.charge(L, len(a)+len(b), "concatenation")
				L.Push(a + b)
				return 1
			}
		}
	}
	rhs := L.Get(n)
	for i := n - 1; i >= 1; i-- {
		lhs := L.Get(i)
		if isStrNum(lhs) && isStrNum(rhs) {
			j := i
			for j > 1 && isStrNum(L.Get(j-1)) {
				j--
			}
			size := len(lua.LVAsString(rhs))
			for k := j; k <= i; k++ {
				size += len(lua.LVAsString(L.Get(k)))
			}
			st.charge(L, size, "concatenation")
			var b strings.Builder
			b.Grow(size)
			for k := j; k <= i; k++ {
				b.WriteString(lua.LVAsString(L.Get(k)))
			}
			b.WriteString(lua.LVAsString(rhs))
			rhs = lua.LString(b.String())
			i = j
			continue
		}
		mm := L.GetMetaField(lhs, "__concat")
		if mm == lua.LNil {
			mm = L.GetMetaField(rhs, "__concat")
		}
		if mm == lua.LNil {
			bad := lhs
			if isStrNum(lhs) {
				bad = rhs
			}
			L.RaiseError("attempt to concatenate a %s value", bad.Type().String())
		}
		L.Push(mm)
		L.Push(lhs)
		L.Push(rhs)
		L.Call(2, 1)
		rhs = L.Get(-1)
		L.Pop(1)
	}
	L.Push(rhs)
	return 1
}

func isStrNum(v lua.LValue) bool {
	switch v.(type) {
	case lua.LString, lua.LNumber:
		return true
	}
	return false
}

// The seed's condition functions (SPEC §7.2), as expr conditions have them: they read the
// run's ctx (in a Lua tool, where there is none, they are false).

// context_above_threshold(t): ctx.turn.token_usage >= t.
func (st *lstate) aboveThreshold(L *lua.LState) int {
	t := checkNum(L, 1, "context_above_threshold")
	usage, ok := number(dig(st.ctxUD.Value, "turn", "token_usage"))
	L.Push(lua.LBool(ok && usage >= t))
	return 1
}

// tool_completed(name): the event is on_tool_complete of the tool name.
func (st *lstate) toolCompleted(L *lua.LState) int {
	return st.toolEvent(L, "tool_completed", "on_tool_complete")
}

// tool_failed(name): the event is on_tool_failure of the tool name.
func (st *lstate) toolFailed(L *lua.LState) int {
	return st.toolEvent(L, "tool_failed", "on_tool_failure")
}

func (st *lstate) toolEvent(L *lua.LState, fname, event string) int {
	name := checkStr(L, 1, fname)
	ctx := st.ctxUD.Value
	L.Push(lua.LBool(dig(ctx, "event", "name") == event && dig(ctx, "tool", "name") == name))
	return 1
}

// dig reads a path of map keys from a ctx value.
func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}
