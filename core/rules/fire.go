package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/clara-lib/clara/core/protocol"
	"reflect"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr/vm"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/rulelua"
)

// Rule is one compiled rule. Read-only.
type Rule struct {
	ID          string
	Description string
	Trigger     string
	Priority    int
	Stop        bool
	File        string
	Line        int
	CondSource  string // "" when the rule has no condition (it always matches)

	cond         *vm.Program
	simple       *simpleCond  // the condition's fast form, when it has one
	folded       *simpleCond  // simple with the Set's thresholds read in
	guards       []comparison // when not simple: comparisons that can rule it out
	foldedGuards []comparison
	actions      []action
	order        int      // load order, the tie-break of equal priorities
	sources      []string // condition and template texts, to find what they read
	luaCond      *rulelua.Script
	lua          bool // a Lua condition or action: reads context whole
}

// Set is a compiled, immutable rule set.
type Set struct {
	all       []*Rule
	byTrigger map[string][]*Rule // highest priority first, then load order
	needs     map[string]Needs   // what the rules of a trigger read of context
	triggers  map[string]*Trigger
	// thresholds are those Load was given: when Fire gets the same map
	// (the engine's case; rule tests pass their own), simple conditions
	// use them folded in.
	thresholds map[string]any
	slots      int // distinct context paths of simple conditions and guards
}

// Needs says which parts of `context` the rules of a trigger read, so that
// the engine builds only those: an event on every tool call must be cheap.
type Needs struct {
	All        bool // `context` used whole (e.g. passed to a filter)
	Event      bool
	Tool       bool
	ToolFields map[string]bool // fields of context.tool read by name; nil with Tool means all
	History    bool
	State      bool
}

// ToolField reports whether context.tool.name (field) is read.
func (n Needs) ToolField(name string) bool {
	return n.Tool && (n.ToolFields == nil || n.ToolFields[name])
}

var contextRef = regexp.MustCompile(`\bcontext\b(\s*\??\.\s*([A-Za-z_][A-Za-z0-9_]*))?`)

// toolRef finds context.tool.FIELD; a bare context.tool (or tool[...])
// means every field.
var toolRef = regexp.MustCompile(`\bcontext\s*\??\.\s*tool\b(\s*\??\.\s*([A-Za-z_][A-Za-z0-9_]*))?`)

// needsOf reads a rule's sources (condition and templates) for the parts of
// context they use. Helpers count as the parts they read.
func needsOf(sources []string) Needs {
	var n Needs
	fields := map[string]bool{}
	allFields := false
	for _, src := range sources {
		if strings.Contains(src, "tool_completed") || strings.Contains(src, "tool_failed") {
			n.Event, n.Tool = true, true
			fields["name"] = true
		}
		for _, m := range toolRef.FindAllStringSubmatch(src, -1) {
			if m[2] == "" {
				allFields = true
			}
			fields[m[2]] = true
		}
		for _, m := range contextRef.FindAllStringSubmatch(src, -1) {
			switch m[2] {
			case "":
				n.All = true
			case "event":
				n.Event = true
			case "tool":
				n.Tool = true
			case "history":
				n.History = true
			case "state":
				n.State = true
			}
		}
	}
	if n.All {
		n.Event, n.Tool, n.History, n.State = true, true, true, true
		allFields = true
	}
	if n.Tool && !allFields {
		n.ToolFields = fields
	}
	return n
}

func (n Needs) or(m Needs) Needs {
	out := Needs{All: n.All || m.All, Event: n.Event || m.Event, Tool: n.Tool || m.Tool,
		History: n.History || m.History, State: n.State || m.State}
	switch {
	case !out.Tool:
	case (n.Tool && n.ToolFields == nil) || (m.Tool && m.ToolFields == nil):
		// one of them reads every field
	default:
		out.ToolFields = map[string]bool{}
		for k := range n.ToolFields {
			out.ToolFields[k] = true
		}
		for k := range m.ToolFields {
			out.ToolFields[k] = true
		}
	}
	return out
}

// NeedsFor says what the rules of trigger read of context.
func (s *Set) NeedsFor(trigger string) Needs {
	if s == nil {
		return Needs{}
	}
	return s.needs[trigger]
}

// Trigger is the rules of one event name, in firing order, with what they
// read of context. A caller firing the same event often (the tool
// pipeline) looks it up once per rule set.
type Trigger struct {
	rules []*Rule
	needs Needs
	set   *Set
}

// Trigger returns the rules watching the event name, or nil when none do.
func (s *Set) Trigger(name string) *Trigger {
	if s == nil {
		return nil
	}
	return s.triggers[name]
}

// RuledOut reports whether the simple forms of the trigger's rules alone
// show that none of them matches a tool event with these figures: a quick
// test before building an event, as the tool pipeline fires one on every
// call. False whenever a rule needs more (no simple form, no condition, a
// value other than the tool's own figures). What Fire would do without
// trace then is nothing at all; with trace, call Fire.
func (t *Trigger) RuledOut(facts *ToolFacts, thresholds map[string]any) bool {
	useFolded := t.set.thresholds != nil && sameMap(thresholds, t.set.thresholds)
	resolve := func(o *operand) (Value, bool) {
		switch {
		case o.literal:
			return o.value, true
		case o.root == "thresholds":
			v, ok := walk(thresholds, o.path)
			return valueOf(v), ok
		case o.tool != 0:
			return facts.value(o.tool)
		}
		return Value{}, false
	}
	for _, r := range t.rules {
		cond := r.simple
		if useFolded && r.folded != nil {
			cond = r.folded
		}
		if cond == nil {
			if r.guards == nil {
				return false
			}
			guards := r.guards
			if useFolded {
				guards = r.foldedGuards
			}
			if !ruledOut(guards, resolve) {
				return false
			}
			continue
		}
		if matched, decided := cond.eval(resolve); !decided || matched {
			return false
		}
	}
	return true
}

// Needs says what the trigger's rules read of context.
func (t *Trigger) Needs() Needs { return t.needs }

func newSet(rules []*Rule) *Set {
	s := &Set{all: rules, byTrigger: map[string][]*Rule{}, needs: map[string]Needs{}, triggers: map[string]*Trigger{}}
	defer func() {
		for name, list := range s.byTrigger {
			s.triggers[name] = &Trigger{rules: list, needs: s.needs[name], set: s}
		}
	}()
	for _, r := range rules {
		s.byTrigger[r.Trigger] = append(s.byTrigger[r.Trigger], r)
		n := needsOf(r.sources)
		if r.lua {
			n = needsOf([]string{"context"}) // a script may read anything
		}
		s.needs[r.Trigger] = s.needs[r.Trigger].or(n)
	}
	for _, list := range s.byTrigger {
		sort.SliceStable(list, func(i, j int) bool {
			if list[i].Priority != list[j].Priority {
				return list[i].Priority > list[j].Priority
			}
			return list[i].order < list[j].order
		})
	}
	return s
}

// Rules returns every rule in load order.
func (s *Set) Rules() []*Rule {
	if s == nil {
		return nil
	}
	return s.all
}

// Watches reports whether any rule has this trigger (so the caller can skip
// building an event nobody reads).
func (s *Set) Watches(trigger string) bool { return s != nil && len(s.byTrigger[trigger]) > 0 }

// MaxChainDepth bounds emit_event chains: an event emitted by a rule
// emitted by a rule... at most this deep.
const MaxChainDepth = 8

// Event is one emission.
type Event struct {
	Name    string
	Session string
	// Context is what conditions see as `context` (SPEC §7.2): the payload's
	// fields at the top, plus event, tool, history and state. Fire only
	// reads it, and asks for the whole map only when a rule needs it.
	Context ContextSource
	Trace   bool
	Depth   int // 0 for an emission from outside; +1 per emit_event
	// Trigger is the event's rules, when the caller looked them up
	// (Set.Trigger); nil: Fire looks them up by Name.
	Trigger *Trigger
}

// StateWrite is one set_state of an emission.
type StateWrite struct {
	Key   string
	Value []byte // JSON
}

// Host is what Fire needs from the engine. Called from the goroutine that
// called Fire.
type Host interface {
	// ApplyState writes an emission's set_state values, in one transaction.
	ApplyState(session string, writes []StateWrite) error
	// Chain fires a rule-emitted event (depth is the new event's).
	Chain(ctx context.Context, session, event string, payload map[string]any, depth int, trace bool) *Outcome
	// CallTool runs a tool through the whole pipeline, in the session.
	CallTool(ctx context.Context, session, tool string, args []byte) (result []byte, err error)
	// Log writes a log action's message.
	Log(level logging.Level, message string)
	// StateGet reads a key of the session's state (Lua's state.get).
	StateGet(session, key string) (value any, ok bool, err error)
}

// Fired is a rule that matched, with what its actions did.
type Fired struct {
	Rule    string         `json:"rule"`
	Event   string         `json:"event,omitempty"` // set for rules fired by a chained event
	Actions []ActionRecord `json:"actions"`
}

// Denial is a deny action's verdict on a tool call.
type Denial struct {
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// TraceEntry explains one candidate rule (SPEC §7.7).
type TraceEntry struct {
	Rule       string         `json:"rule"`
	Event      string         `json:"event"`
	Matched    bool           `json:"matched"`
	Value      any            `json:"value,omitempty"`
	Error      string         `json:"error,omitempty"`
	DurationUS int64          `json:"duration_us"`
	Actions    []ActionRecord `json:"actions,omitempty"`
	Skipped    string         `json:"skipped,omitempty"` // why a matched rule did not act
}

// Outcome is what an emission did.
type Outcome struct {
	Fired   []Fired           `json:"fired"`
	Notices []protocol.Notice `json:"notices"`
	Denied  *Denial           `json:"denied"`
	Trace   []TraceEntry      `json:"trace,omitempty"`
}

// ContextSource gives Fire an event's context. Lookup reads one scalar
// without building the whole context (ok false: cannot tell, build it);
// Context builds it, once.
type ContextSource interface {
	Lookup(path []string) (v Value, ok bool)
	Context() map[string]any
}

// MapSource is a ContextSource over a context already built.
type MapSource map[string]any

// Lookup walks the map.
func (m MapSource) Lookup(path []string) (Value, bool) {
	v, ok := walk(m, path)
	if !ok {
		return Value{}, false
	}
	return valueOf(v), true
}

// Context returns the map.
func (m MapSource) Context() map[string]any { return m }

// noOutcome is what an emission that fired nothing returns: shared, never
// written to.
var noOutcome = &Outcome{Fired: []Fired{}, Notices: []protocol.Notice{}}

// noNotices is the Notices of an outcome until a rule notifies: empty, not
// null, in JSON; with no room, so that appending to it never writes to it.
var noNotices = []protocol.Notice{}

// outcomeOne is an outcome with room for one fired rule and its record,
// made at once: most triggers have a single rule.
type outcomeOne struct {
	out   Outcome
	fired [1]Fired
	recs  [1]ActionRecord
}

// outcomeFew and outcomeSome are outcomes with room for a few fired rules.
type outcomeFew struct {
	out   Outcome
	fired [4]Fired
}

type outcomeSome struct {
	out   Outcome
	fired [8]Fired
}

// runner evaluates expressions for one emission: one VM, one environment.
type runner struct {
	vm      vm.VM
	env     exprEnv
	mem     memBudget // bytes built (budget.go)
	scratch []byte    // where templates render (template.render)
	lua     luaHost   // what the emission's scripts reach, passed by pointer
}

// exprEnv is what expressions see. A struct, not a map: expr reads its
// fields by index, with no hashing.
type exprEnv struct {
	Context    map[string]any `expr:"context"`
	Thresholds map[string]any `expr:"thresholds"`
	Mem        *memBudget     `expr:"__mem"`
}

var runners = sync.Pool{New: func() any { return new(runner) }}

// lookup reads a plain path (context.a.b, thresholds.x) the way expr would
// when every step is a map holding the key; ok is false otherwise (and for
// a nil path), and then the VM decides.
func (r *runner) lookup(path []string) (any, bool) {
	if len(path) < 2 {
		return nil, false
	}
	root := r.env.Context
	if path[0] == "thresholds" {
		root = r.env.Thresholds
	}
	return walk(root, path[1:])
}

func (r *runner) run(p *vm.Program) (v any, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("%v", x)
		}
	}()
	r.vm.MemoryBudget = memoryBudget
	r.env.Mem = &r.mem
	return r.vm.Run(p, &r.env)
}

// Fire evaluates ev against the set: the rules of its trigger in priority
// order, every match firing unless a fired rule has stop = true. A rule's
// actions apply all or none: its templates are evaluated first, and an
// error skips the rule (reported in the trace and the log). The set_state
// writes of the emission commit in one transaction at the end.
func (s *Set) Fire(ctx context.Context, ev Event, thresholds map[string]any, host Host) *Outcome {
	if s == nil {
		return noOutcome
	}
	var candidates []*Rule
	if ev.Trigger != nil {
		candidates = ev.Trigger.rules
	} else {
		candidates = s.byTrigger[ev.Name]
	}
	if len(candidates) == 0 {
		return noOutcome
	}
	var out *Outcome
	// The expression runner and the whole context are made only when a rule
	// needs them: simple conditions that do not match cost neither.
	var r *runner
	exprRunner := func() *runner {
		if r == nil {
			r = runners.Get().(*runner)
			r.env = exprEnv{Context: ev.Context.Context(), Thresholds: thresholds}
		}
		return r
	}
	defer func() {
		if r != nil {
			r.env, r.lua = exprEnv{}, luaHost{}
			runners.Put(r)
		}
	}()
	// Each context path compared by simple conditions and guards is looked
	// up once for the whole event.
	var slots []slotValue
	if s.slots > 0 { // only sets where several comparisons read one path
		slots = make([]slotValue, s.slots)
	}
	resolve := func(o *operand) (Value, bool) {
		if o.literal {
			return o.value, true
		}
		if o.slot > 0 {
			sv := &slots[o.slot-1]
			if !sv.looked {
				sv.v, sv.ok = ev.Context.Lookup(o.path)
				sv.looked = true
			}
			return sv.v, sv.ok
		}
		if o.root == "thresholds" {
			v, ok := walk(thresholds, o.path)
			return valueOf(v), ok
		}
		return ev.Context.Lookup(o.path)
	}
	useFolded := s.thresholds != nil && sameMap(thresholds, s.thresholds)
	var writes []StateWrite
	n := min(len(candidates), 8) // room for a few matches without regrowing
	slab := recSlab{room: n}
	for _, rule := range candidates {
		var start time.Time
		if ev.Trace {
			start = time.Now()
		}
		matched, decided := true, false
		var value any
		var condErr error
		if cond := rule.simple; cond != nil {
			if useFolded {
				cond = rule.folded
			}
			matched, decided = cond.eval(resolve)
			value = matched
		} else if guards := rule.guards; guards != nil && !ev.Trace {
			if useFolded {
				guards = rule.foldedGuards
			}
			if ruledOut(guards, resolve) {
				matched, decided = false, true
			}
		}
		var luaRes rulelua.Result
		if rule.luaCond != nil {
			luaRes, condErr = exprRunner().runLua(ctx, rule.luaCond, ev.Session, host)
			value = luaRes.Value
			matched = condErr == nil && luaTruthy(value)
			if condErr != nil {
				host.Log(logging.Warn, fmt.Sprintf("rule %q (%s:%d): condition: %v", rule.ID, rule.File, rule.Line, condErr))
			}
		} else if !decided && rule.cond != nil {
			value, condErr = exprRunner().fresh().run(rule.cond)
			b, _ := value.(bool)
			matched = condErr == nil && b
			if condErr != nil {
				host.Log(logging.Warn, fmt.Sprintf("rule %q (%s:%d): condition: %v", rule.ID, rule.File, rule.Line, condErr))
			}
		}
		if !matched && !ev.Trace {
			continue
		}
		if out == nil {
			switch {
			case n == 1:
				o := new(outcomeOne)
				o.out.Fired, slab.recs = o.fired[:0], o.recs[:0]
				out = &o.out
			case n <= 4:
				o := new(outcomeFew)
				o.out.Fired = o.fired[:0]
				out = &o.out
			default:
				o := new(outcomeSome)
				o.out.Fired = o.fired[:0]
				out = &o.out
			}
			out.Notices = noNotices
		}
		entry := TraceEntry{Rule: rule.ID, Event: ev.Name, Matched: matched}
		if rule.cond != nil || rule.luaCond != nil {
			entry.Value = value
		}
		if condErr != nil {
			entry.Error = "condition: " + condErr.Error()
		}
		// A rule's place in Fired and Trace is taken before its actions run,
		// so that rules fired by an event it emits come after it.
		firedAt, traceAt := -1, -1
		if ev.Trace {
			traceAt = len(out.Trace)
			out.Trace = append(out.Trace, TraceEntry{})
		}
		if matched {
			firedAt = len(out.Fired)
			out.Fired = append(out.Fired, Fired{Rule: rule.ID})
			records, ws, skipped := s.act(ctx, rule, ev, host, out, exprRunner, &slab, luaRes.Actions)
			if skipped != "" {
				entry.Skipped = skipped
				host.Log(logging.Warn, fmt.Sprintf("rule %q (%s:%d) skipped: %s", rule.ID, rule.File, rule.Line, skipped))
				out.Fired = append(out.Fired[:firedAt], out.Fired[firedAt+1:]...)
			} else {
				writes = append(writes, ws...)
				entry.Actions = records
				out.Fired[firedAt].Actions = records
			}
		}
		if ev.Trace {
			entry.DurationUS = time.Since(start).Microseconds()
			out.Trace[traceAt] = entry
		}
		if matched && entry.Skipped == "" && rule.Stop {
			break
		}
	}
	if out == nil {
		return noOutcome
	}
	if len(writes) > 0 {
		if err := host.ApplyState(ev.Session, writes); err != nil {
			host.Log(logging.Error, fmt.Sprintf("rules: state of %q not saved: %v", ev.Session, err))
			if ev.Trace {
				out.Trace = append(out.Trace, TraceEntry{Event: ev.Name, Error: "set_state: " + err.Error()})
			}
		}
	}
	return out
}

// sameMap reports whether a and b are the same map (not equal contents).
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// rendered is an action with its templates evaluated.
type rendered struct {
	a     *action
	text  string // message or reason
	value any    // set_state value, emit_event payload, call_tool arguments
}

// recSlab is where the action records of an emission's fired rules are
// made, a block for several rules at a time. (Its own type, apart from
// what leaks to the heap, so that escape analysis keeps Fire's locals on
// the stack.)
type recSlab struct {
	recs   []ActionRecord
	room   int // how many rules the outcome expects to fire
	blocks int // blocks made
}

// take gives room for n records, in recs or in a new block with room for
// those of a few more rules (4, then 8, as in most emissions few fire);
// used says how many were written.
func (f *recSlab) take(n int) []ActionRecord {
	if cap(f.recs)-len(f.recs) < n {
		f.recs = make([]ActionRecord, 0, n*max(min(f.room, 4<<f.blocks), 1))
		f.blocks = min(f.blocks+1, 1)
	}
	return f.recs[len(f.recs):len(f.recs)]
}

func (f *recSlab) used(n int) { f.recs = f.recs[:len(f.recs)+n] }

// act renders every action of a matched rule, then applies them in order.
// If any template fails, nothing applies and skipped says why.
// exprRunner gives the emission's runner, made on first use; slab is where
// the records are made.
func (s *Set) act(ctx context.Context, rule *Rule, ev Event, host Host, out *Outcome, exprRunner func() *runner, slab *recSlab, fromCond []rulelua.Action) (records []ActionRecord, writes []StateWrite, skipped string) {
	defer func() {
		if x := recover(); x != nil {
			records, writes = nil, nil
			skipped = fmt.Sprintf("internal error: %v", x)
			host.Log(logging.Error, fmt.Sprintf("panic in rule %q: %v\n%s", rule.ID, x, debug.Stack()))
		}
	}()
	// The runner (and with it the whole context) is made only when a
	// template or a script needs it; it has a whole budget for the
	// templates of this rule.
	var r *runner
	run := func() *runner {
		if r == nil {
			r = exprRunner().fresh()
		}
		return r
	}
	var room [4]rendered
	ready := room[:0]
	if len(fromCond) > 0 {
		// What a Lua condition asked for comes first: it ran first.
		more, err := luaActions(fromCond, rule.Trigger)
		if err != nil {
			return nil, nil, "condition: " + err.Error()
		}
		ready = append(ready, more...)
	}
	for i := range rule.actions {
		a := &rule.actions[i]
		if a.kind == ActLua {
			res, err := run().runLua(ctx, a.script, ev.Session, host)
			if err == nil {
				var more []rendered
				more, err = luaActions(res.Actions, rule.Trigger)
				ready = append(ready, more...)
			}
			if err != nil {
				return nil, nil, fmt.Sprintf("action %d (%s): %v", i+1, a.kind, err)
			}
			continue
		}
		ready = append(ready, rendered{a: a})
		x := &ready[len(ready)-1]
		var err error
		switch a.kind {
		case ActNotify, ActLog:
			if a.message.static {
				x.text = a.message.text
			} else {
				x.text, err = a.message.render(run())
			}
		case ActDeny:
			if a.reason.static {
				x.text = a.reason.text
			} else {
				x.text, err = a.reason.render(run())
			}
		case ActSetState:
			x.value, err = a.value.evalLazy(run)
		case ActEmit:
			if a.payload != nil {
				x.value, err = a.payload.evalLazy(run)
			}
		case ActCallTool:
			if a.args != nil {
				x.value, err = a.args.evalLazy(run)
			}
		}
		if err != nil {
			return nil, nil, fmt.Sprintf("action %d (%s): %v", i+1, a.kind, err)
		}
	}
	if len(ready) > 0 {
		records = slab.take(len(ready))
	}
	for _, x := range ready {
		records = append(records, ActionRecord{Type: x.a.kind})
		rec := &records[len(records)-1]
		switch x.a.kind {
		case ActNotify:
			if cap(out.Notices) == 0 {
				out.Notices = make([]protocol.Notice, 0, max(slab.room, 1))
			}
			out.Notices = append(out.Notices, protocol.Notice{Rule: rule.ID, Message: x.text, Priority: x.a.priority, Event: ev.Name})
			rec.Message, rec.Priority = x.text, x.a.priority
		case ActLog:
			if x.a.logPrefix == "" {
				level, _ := logging.ParseLevel(x.a.level)
				host.Log(level, fmt.Sprintf("rule %q: %s", rule.ID, x.text))
			} else if x.a.logLine != "" {
				host.Log(x.a.logLevel, x.a.logLine)
			} else {
				host.Log(x.a.logLevel, x.a.logPrefix+x.text)
			}
			rec.Level, rec.Message = x.a.level, x.text
		case ActSetState:
			b, err := json.Marshal(x.value)
			if err != nil {
				rec.Error = err.Error()
				break
			}
			writes = append(writes, StateWrite{Key: x.a.key, Value: b})
			rec.Key, rec.Value = x.a.key, x.value
		case ActDeny:
			if out.Denied == nil {
				out.Denied = &Denial{Rule: rule.ID, Reason: x.text}
			}
			rec.Reason = x.text
		case ActEmit:
			rec.Event = x.a.event
			if ev.Depth+1 >= MaxChainDepth {
				rec.Error = fmt.Sprintf("emit_event: chain deeper than %d events", MaxChainDepth)
				host.Log(logging.Warn, fmt.Sprintf("rule %q: %s", rule.ID, rec.Error))
				break
			}
			payload, _ := x.value.(map[string]any)
			child := host.Chain(ctx, ev.Session, x.a.event, payload, ev.Depth+1, ev.Trace)
			for _, cf := range child.Fired {
				if cf.Event == "" {
					cf.Event = x.a.event
				}
				out.Fired = append(out.Fired, cf)
			}
			out.Notices = append(out.Notices, child.Notices...)
			out.Trace = append(out.Trace, child.Trace...)
			rec.Fired = len(child.Fired)
		case ActCallTool:
			rec.Tool = x.a.tool
			args := []byte("{}")
			if x.value != nil {
				b, err := json.Marshal(x.value)
				if err != nil {
					rec.Error = err.Error()
					break
				}
				args = b
			}
			result, err := host.CallTool(ctx, ev.Session, x.a.tool, args)
			if err != nil {
				rec.Error = err.Error()
			} else {
				rec.Result = json.RawMessage(result)
			}
		}
	}
	slab.used(len(records))
	return records[:len(records):len(records)], writes, ""
}
