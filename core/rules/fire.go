package rules

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr/vm"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/rulelua"
)

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
	// Namespace is the plugin of the rule that wrote it ("" for none):
	// the host keeps it in StateScope(session, Namespace).
	Namespace string
}

// BeforeRuleEval is the event emitted before each rule is evaluated, when
// a rule watches it (the payload names the rule: rule, trigger, plugin,
// file, line).
const BeforeRuleEval = "before_rule_eval"

// NamespacedSource is a ContextSource that can give the context a
// plugin's rules see: context.state is then the plugin's state.
type NamespacedSource interface {
	ContextIn(namespace string) map[string]any
}

// Host is what Fire needs from the engine. Called from the goroutine that
// called Fire.
type Host interface {
	// ApplyState writes an emission's set_state values, in one transaction.
	// An error fails each set_state action of the emission: its record's
	// Error is "set_state: " + the error.
	ApplyState(session string, writes []StateWrite) error
	// Chain fires a rule-emitted event (depth is the new event's). An error
	// (the host refusing the emission, as when one event tree has set off
	// too many) fails the emit_event action: its record's Error is
	// "emit_event: " + the error, and the rule's other actions go on.
	Chain(ctx context.Context, session, event string, payload map[string]any, depth int, trace bool) (*Outcome, error)
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

// Denial is a deny action's verdict on a tool call (or a chat), and the
// form of the other decisions that give a reason: ask and block.
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
	Mode       string         `json:"mode,omitempty"`    // "shadow" for a rule in shadow mode
}

// Outcome is what an emission did.
type Outcome struct {
	Fired   []Fired           `json:"fired"`
	Notices []protocol.Notice `json:"notices"`
	Denied  *Denial           `json:"denied"`
	Trace   []TraceEntry      `json:"trace,omitempty"`

	// The other decisions (decide.go), which an emission's answer does
	// not list: the engine enforces them.
	Asked      *Denial          `json:"-"` // the first ask
	Blocked    *Denial          `json:"-"` // the first block
	Rewrite    *Rewrite         `json:"-"` // the first rewrite
	Redactions []Redaction      `json:"-"` // every redact, in order
	Shadow     []ShadowDecision `json:"-"` // what rules in shadow mode would have decided
	// Deferred are the notices whose delivery waits (deliver_on,
	// deliver_after_ms): for the session's queue only, not the answer.
	Deferred []protocol.Notice `json:"-"`

	// Of an outcome Fire made: the block its action records were made in
	// last, for Release to keep with Fired and Notices.
	recs     []ActionRecord
	fromFire bool
}

// released are outcomes given back by Release, their slices emptied with
// their room kept: the next emission that fires makes its outcome there.
var released sync.Pool

// Release gives the outcome's memory (the Fired list, the action records,
// the Notices list; not the strings they hold) to a coming emission. The
// caller keeps nothing of it afterwards, nor of its Trace. An outcome
// that Fire did not make (or too large to keep) is left to the collector.
// An emission's answer, written once and dropped, is the caller this is
// for: the memory of its outcome was most of what it allocated.
func (o *Outcome) Release() {
	if o == nil || !o.fromFire || cap(o.Fired) > maxReleased || cap(o.Notices) > maxReleased || cap(o.recs) > 4*maxReleased {
		return
	}
	clear(o.Fired)
	clear(o.Notices)
	clear(o.recs)
	*o = Outcome{Fired: o.Fired[:0], Notices: o.Notices[:0], recs: o.recs[:0], fromFire: true}
	released.Put(o)
}

// maxReleased bounds the fired rules and notices a released outcome keeps
// room for.
const maxReleased = 64

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
	mem     memBudget      // bytes built (budget.go)
	scratch []byte         // where templates render (template.render)
	script  ruleScriptHost // what the emission's scripts reach, passed by pointer
	ns      string         // the namespace env.Context was made for
	// looked are the template paths read from env.Context and
	// env.Thresholds (which stay as they are while env does), by path:
	// the rules of an emission tend to render the same fields.
	looked  [8]lookedPath
	nlooked int
}

// exprEnv is what expressions see. A struct, not a map: expr reads its
// fields by index, with no hashing.
type exprEnv struct {
	Context    map[string]any `expr:"context"`
	Thresholds map[string]any `expr:"thresholds"`
	Mem        *memBudget     `expr:"__mem"`
}

var runners = sync.Pool{New: func() any { return new(runner) }}

type lookedPath struct {
	key string // the path, joined by dots
	v   any
	ok  bool
}

// forget empties looked, for another env.
func (r *runner) forget() {
	clear(r.looked[:r.nlooked])
	r.nlooked = 0
}

// lookupPart is lookup(p.path), read once per env.
func (r *runner) lookupPart(p *tmplPart) (any, bool) {
	if p.path == nil {
		return nil, false
	}
	for i := range r.looked[:r.nlooked] {
		if l := &r.looked[i]; l.key == p.key {
			return l.v, l.ok
		}
	}
	v, ok := r.lookup(p.path)
	if r.nlooked < len(r.looked) {
		r.looked[r.nlooked] = lookedPath{p.key, v, ok}
		r.nlooked++
	}
	return v, ok
}

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
// writes of the emission commit in one transaction at the end. Conditions
// and templates see the thresholds the set was loaded with.
func (s *Set) Fire(ctx context.Context, ev Event, host Host) *Outcome {
	if s == nil {
		return noOutcome
	}
	trigger := ev.Trigger
	if trigger == nil {
		trigger = s.triggers[ev.Name]
	}
	if trigger == nil || len(trigger.rules) == 0 {
		return noOutcome
	}
	candidates := trigger.rules
	var e emission // set field by field: a composite literal is built aside, then copied
	e.set, e.ctx, e.ev, e.host = s, ctx, ev, host
	// Room for as many matches as the event's last emission had, else for
	// a few, without regrowing.
	if last := int(trigger.lastFired.Load()); last > 0 {
		e.slab.room, e.slab.known = min(len(candidates), last), true
	} else {
		e.slab.room = min(len(candidates), 8)
	}
	defer e.release()
	if s.slots > 0 { // only sets where several comparisons read one path
		e.slots = make([]slotValue, s.slots)
	}
	// resolve reads an operand for the fast forms of conditions (ok false:
	// expr decides). A closure made here rather than a method value, whose
	// wrapper cost a third of an emission that matched nothing.
	resolve := func(o *operand) (Value, bool) {
		if o.literal {
			return o.value, true
		}
		if o.count {
			return e.count(o.path)
		}
		if o.slot > 0 {
			sv := &e.slots[o.slot-1]
			if !sv.looked {
				sv.v, sv.ok = e.ev.Context.Lookup(o.path)
				sv.looked = true
			}
			return sv.v, sv.ok
		}
		if o.root == "thresholds" {
			v, ok := walk(e.set.thresholds, o.path)
			return valueOf(v), ok
		}
		return e.ev.Context.Lookup(o.path)
	}
	before := s.beforeEval && ev.Name != BeforeRuleEval
	if idx := trigger.index; idx != nil && !before && !ev.Trace {
		e.fireIndexed(idx, candidates, resolve)
	} else {
		for _, rule := range candidates {
			if before {
				e.beforeRuleEval(rule)
			}
			if e.fireRule(rule, resolve) {
				break
			}
		}
	}
	if e.out == nil {
		if trigger.lastFired.Load() != 0 {
			trigger.lastFired.Store(0)
		}
		return noOutcome
	}
	// Written only when it changes: the threads firing an event share it.
	if n := int32(min(len(e.out.Fired), 1<<10)); trigger.lastFired.Load() != n {
		trigger.lastFired.Store(n)
	}
	e.applyState()
	e.out.recs = e.slab.recs
	return e.out
}

// fireIndexed tries the rules of candidates that the value of idx's path
// leaves possible, in order (all of them when the value is not a scalar:
// then no comparison on it is decided).
func (e *emission) fireIndexed(idx *ruleIndex, candidates []*Rule, resolve func(*operand) (Value, bool)) {
	v, ok := resolve(&idx.key)
	if !ok || v.kind == 0 {
		for _, rule := range candidates {
			if e.fireRule(rule, resolve) {
				return
			}
		}
		return
	}
	rest, keyed := idx.candidates(v)
	for i, j := 0, 0; i < len(rest) || j < len(keyed); {
		var at int32
		if j == len(keyed) || (i < len(rest) && rest[i] < keyed[j]) {
			at, i = rest[i], i+1
		} else {
			at, j = keyed[j], j+1
		}
		if e.fireRule(candidates[at], resolve) {
			return
		}
	}
}

// emission is one Fire at work: its event, what its rules did so far, and
// what they share.
type emission struct {
	set  *Set
	ctx  context.Context
	ev   Event
	host Host
	out  *Outcome // made when the first rule fires (or, with trace, is tried)
	// r is the expression runner, with the whole context: made only when a
	// rule needs it, so simple conditions that do not match cost neither.
	r *runner
	// slots hold each context path that simple conditions and guards
	// compare, looked up once for the whole event.
	slots  []slotValue
	writes []StateWrite // the set_state writes of the rules fired so far
	slab   recSlab      // where the action records are made
	ns     string       // the namespace of the rule being tried
	// shadowStop: a rule in shadow mode with stop = true fired; the rules
	// in shadow mode after it are not tried (enforcing ones are).
	shadowStop bool
	// The event as a host rule's functions get it, made for hostRule.
	hostRule *Rule
	hostJSON []byte
}

// runner is the emission's expression runner, made on first use.
func (e *emission) runner() *runner {
	if e.r == nil {
		e.r = runners.Get().(*runner)
		e.r.env = exprEnv{Context: e.contextIn(e.ns), Thresholds: e.set.thresholds}
		e.r.ns = e.ns
		e.r.forget()
	} else if e.r.ns != e.ns { // a rule of another plugin: its own state
		e.r.env.Context, e.r.ns = e.contextIn(e.ns), e.ns
		e.r.forget()
	}
	return e.r
}

// contextIn is the event's context as the rules of namespace see it.
func (e *emission) contextIn(namespace string) map[string]any {
	if namespace != "" {
		if ns, ok := e.ev.Context.(NamespacedSource); ok {
			return ns.ContextIn(namespace)
		}
	}
	return e.ev.Context.Context()
}

// beforeRuleEval emits before_rule_eval for the rule about to be tried,
// through the host as a chained event, and takes in what its rules did.
func (e *emission) beforeRuleEval(rule *Rule) {
	if e.ev.Depth+1 >= MaxChainDepth {
		return
	}
	payload := map[string]any{"rule": rule.ID, "description": rule.Description, "trigger": e.ev.Name,
		"plugin": rule.Namespace, "file": rule.File, "line": rule.Line}
	child, err := e.host.Chain(e.ctx, e.ev.Session, BeforeRuleEval, payload, e.ev.Depth+1, e.ev.Trace)
	if err != nil {
		e.host.Log(logging.Warn, fmt.Sprintf("rule %q: %s: %v", rule.ID, BeforeRuleEval, err))
		return
	}
	if child == nil || (len(child.Fired) == 0 && len(child.Notices) == 0 && len(child.Deferred) == 0 && len(child.Trace) == 0) {
		return
	}
	e.outcome()
	for _, cf := range child.Fired {
		if cf.Event == "" {
			cf.Event = BeforeRuleEval
		}
		e.out.Fired = append(e.out.Fired, cf)
	}
	e.out.Notices = append(e.out.Notices, child.Notices...)
	e.out.Deferred = append(e.out.Deferred, child.Deferred...)
	e.out.Trace = append(e.out.Trace, child.Trace...)
}

// release gives the runner back to the pool, holding nothing of the event.
func (e *emission) release() {
	if e.r != nil {
		e.r.env, e.r.script, e.r.ns = exprEnv{}, ruleScriptHost{}, ""
		e.r.forget()
		runners.Put(e.r)
	}
}

// fireRule tries one rule: its condition, then, when it matches, its
// actions. It reports whether the rule fired and stops those after it.
func (e *emission) fireRule(rule *Rule, resolve func(*operand) (Value, bool)) (stop bool) {
	if e.shadowStop && rule.Mode == ModeShadow {
		return false // a rule in shadow mode with stop fired above: it stops only the rules in shadow mode
	}
	var start time.Time
	if e.ev.Trace {
		start = time.Now()
	}
	e.ns = rule.Namespace
	var v verdict
	e.evaluate(rule, resolve, &v)
	if v.err != nil {
		if kind := failClosed(rule); kind != "" {
			e.refuse(rule, kind, "its condition could not be evaluated", v.err.Error())
		}
	}
	if !v.matched && !e.ev.Trace {
		return false
	}
	e.outcome()
	entry := TraceEntry{Rule: rule.ID, Event: e.ev.Name, Matched: v.matched}
	if rule.Mode == ModeShadow {
		entry.Mode = ModeShadow
	}
	if rule.cond != nil || rule.luaCond != nil || rule.semantic != nil || rule.host != nil && rule.host.Condition != nil {
		entry.Value = v.value
	}
	if v.err != nil {
		entry.Error = "condition: " + v.err.Error()
	}
	// A rule's place in Fired and Trace is taken before its actions run,
	// so that rules fired by an event it emits come after it.
	traceAt := len(e.out.Trace)
	if e.ev.Trace {
		e.out.Trace = append(e.out.Trace, TraceEntry{})
	}
	if v.matched {
		e.act(rule, v.actions, &entry)
	}
	if e.ev.Trace {
		entry.DurationUS = time.Since(start).Microseconds()
		e.out.Trace[traceAt] = entry
	}
	stop = v.matched && entry.Skipped == "" && rule.Stop
	if stop && rule.Mode == ModeShadow {
		// What a rule in shadow mode does must not change what the
		// enforcing rules do: its stop holds for the rules in shadow mode.
		e.shadowStop = true
		return false
	}
	return stop
}

// OnToolCall is the event emitted before each tool call, the one whose
// rules may deny it.
const OnToolCall = "on_tool_call"

// refuse decides kind (deny or block, failClosed) on behalf of a rule
// that could not be evaluated to the end (its condition failed: an error,
// a timeout, the call cancelled, an embedding that could not be had; or it
// matched and its actions could not be prepared): such a rule cannot say
// the call (the chat, the result) may go on, so governance fails closed.
// The first decision of the emission gives the reason, as with deny
// actions; a rule in shadow mode only records that it would have.
func (e *emission) refuse(rule *Rule, kind, what, why string) {
	var reason string
	switch {
	case rule.Trigger == OnToolCall:
		reason = what + ", and a rule on on_tool_call that cannot tell refuses the call: " + why
	case kind == ActBlock:
		reason = what + ", and a guard that cannot tell blocks what it guards: " + why
	default:
		reason = what + ", and a guard that cannot tell refuses the chat: " + why
	}
	e.decide(rule, kind, reason)
}

// verdict is what a rule's condition said.
type verdict struct {
	matched bool
	value   any              // the condition's value, for the trace
	err     error            // why it could not say (then it did not match; on on_tool_call it denies)
	actions []rulelua.Action // what a Lua condition asked for, applied when it matched
}

// evaluate evaluates a rule's condition into v (zero): by its fast form
// (or guards, reading operands with resolve) when they decide, else by
// expr's VM or Lua. No condition matches. (v is written in place: a
// verdict returned by value was stored, then copied, on every rule.)
func (e *emission) evaluate(rule *Rule, resolve func(*operand) (Value, bool), v *verdict) {
	v.matched = true
	decided := false
	if rule.folded != nil {
		v.matched, decided = rule.folded.eval(resolve)
		v.value = v.matched
	} else if rule.foldedGuards != nil && !e.ev.Trace && ruledOut(rule.foldedGuards, resolve) {
		v.matched, decided = false, true
	} else if rule.foldedCounted != nil {
		// Decided, it is what expr would say (the condition is simple but
		// for len(), which count reads as expr's len does).
		if m, ok := rule.foldedCounted.eval(resolve); ok {
			v.matched, decided, v.value = m, true, m
		}
	}
	switch {
	case rule.host != nil && rule.host.Condition != nil:
		e.hostCondition(rule, v)
	case rule.luaCond != nil:
		var res rulelua.Result
		res, v.err = e.runner().runLua(e.ctx, rule.luaCond, e.ev.Session, e.host)
		v.value, v.actions = res.Value, res.Actions
		v.matched = v.err == nil && luaTruthy(v.value)
	case rule.semantic != nil:
		v.value, v.matched, v.err = e.semantic(rule.semantic)
	case !decided && rule.cond != nil:
		v.value, v.err = e.runner().fresh().run(rule.cond)
		b, _ := v.value.(bool)
		v.matched = v.err == nil && b
	}
	if v.err != nil {
		e.host.Log(logging.Warn, fmt.Sprintf("rule %q (%s:%d): condition: %v", rule.ID, rule.File, rule.Line, v.err))
	}
}

// count is len() of what a context path holds, as expr's len counts it:
// a list's elements, an object's keys, a string's characters. ok is false
// for anything else, absent included: expr decides (and fails).
func (e *emission) count(path []string) (Value, bool) {
	v, ok := walk(e.contextIn(e.ns), path)
	if !ok {
		return Value{}, false
	}
	switch x := v.(type) {
	case string:
		return Number(float64(utf8.RuneCountInString(x))), true
	case []any:
		return Number(float64(len(x))), true
	case map[string]any:
		return Number(float64(len(x))), true
	}
	return Value{}, false
}

// outcome makes the emission's Outcome, once, with room for the rules
// that may fire.
func (e *emission) outcome() {
	if e.out != nil {
		return
	}
	// A released outcome with room enough: its records' block too (zero,
	// as the slab's room must be).
	if o, _ := released.Get().(*Outcome); o != nil {
		if cap(o.Fired) >= e.slab.room {
			e.out, e.slab.recs = o, o.recs
			if cap(o.Notices) == 0 {
				o.Notices = noNotices
			}
			return
		}
		released.Put(o)
	}
	switch n := e.slab.room; {
	case n == 1:
		o := new(outcomeOne)
		o.out.Fired, e.slab.recs = o.fired[:0], o.recs[:0]
		e.out = &o.out
	case n <= 4:
		o := new(outcomeFew)
		o.out.Fired = o.fired[:0]
		e.out = &o.out
	case n <= 8:
		o := new(outcomeSome)
		o.out.Fired = o.fired[:0]
		e.out = &o.out
	default:
		e.out = &Outcome{Fired: make([]Fired, 0, n)}
	}
	e.out.Notices, e.out.fromFire = noNotices, true
}

// applyState commits the emission's set_state writes. When that fails, the
// records of those writes say so, besides the log (and the trace).
func (e *emission) applyState() {
	if len(e.writes) == 0 {
		return
	}
	err := e.host.ApplyState(e.ev.Session, e.writes)
	if err == nil {
		return
	}
	e.host.Log(logging.Error, fmt.Sprintf("rules: state of %q not saved: %v", e.ev.Session, err))
	msg := "set_state: " + err.Error()
	for i := range e.out.Fired {
		f := &e.out.Fired[i]
		if f.Event != "" {
			continue // fired by a chained event, whose emission saved its own writes
		}
		for j := range f.Actions {
			if a := &f.Actions[j]; a.Type == ActSetState && a.Error == "" {
				a.Error = msg
			}
		}
	}
	if e.ev.Trace {
		e.out.Trace = append(e.out.Trace, TraceEntry{Event: e.ev.Name, Error: msg})
	}
}
