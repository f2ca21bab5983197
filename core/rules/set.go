package rules

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr/vm"

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
	Namespace   string // the plugin of the rule, "" for none (Source.Namespace)
	// Mode is ModeEnforce, or ModeShadow: the rule's decisions are
	// recorded (Outcome.Shadow) instead of enforced.
	Mode string

	cond         *vm.Program
	condExpr     string       // the condition as expr reads it (a Python one translated)
	simple       *simpleCond  // the condition's fast form, when it has one
	folded       *simpleCond  // simple with the Set's thresholds read in
	guards       []comparison // when not simple: comparisons that can rule it out
	foldedGuards []comparison
	// counted is, for a condition that is simple but for len() of context
	// paths, its fast form (tried after the guards); foldedCounted has the
	// Set's thresholds read in.
	counted, foldedCounted *simpleCond
	actions                []action
	order                  int      // load order, the tie-break of equal priorities
	sources                []string // condition and template texts, to find what they read
	luaCond                *rulelua.Script
	semantic               *semanticCond // a semantic condition (semantic.go)
	lua                    bool          // a Lua condition or action: reads context whole
	host                   *HostFuncs    // a rule of the host (host.go): reads context whole
	// guard: the rule decides (deny, ask, rewrite, block, redact), so
	// that one that cannot be evaluated fails closed (decide.go).
	guard bool
}

// Set is a compiled, immutable rule set.
type Set struct {
	all       []*Rule
	byTrigger map[string][]*Rule // highest priority first, then load order
	needs     map[string]Needs   // what the rules of a trigger read of context
	triggers  map[string]*Trigger
	// thresholds are what conditions and templates see as `thresholds`,
	// bound at load: simple conditions have them folded in.
	thresholds map[string]any
	slots      int // distinct context paths of simple conditions and guards
	// beforeEval: a rule watches before_rule_eval, so every rule evaluated
	// emits it first (no rule watching it, no cost).
	beforeEval bool
}

// bindSet makes the Set of rules (which it owns from then on) with
// thresholds bound: simple conditions and guards get their folded forms,
// and the context paths they read their slots.
func bindSet(rules []*Rule, thresholds map[string]any) *Set {
	for _, r := range rules {
		r.folded, r.foldedGuards, r.foldedCounted = nil, nil, nil
		if r.simple != nil {
			r.folded = r.simple.fold(thresholds)
		}
		if r.counted != nil {
			r.foldedCounted = r.counted.fold(thresholds)
		}
		if r.guards != nil {
			r.foldedGuards = (&simpleCond{terms: r.guards}).fold(thresholds).terms
		}
	}
	set := newSet(rules)
	set.thresholds = thresholds
	set.slots = assignSlots(rules)
	markToolFields(rules)
	for _, t := range set.triggers {
		t.index = buildIndex(t.rules) // after assignSlots: the key keeps its slot
	}
	return set
}

// withThresholds returns a copy of s bound to other thresholds (a rule
// test's own). s is left as it is: the copy's rules have their own
// comparisons, as binding writes slots into them.
func (s *Set) withThresholds(thresholds map[string]any) *Set {
	if s == nil {
		return nil
	}
	rules := make([]*Rule, len(s.all))
	for i, r := range s.all {
		c := *r
		if r.simple != nil {
			c.simple = &simpleCond{terms: append([]comparison(nil), r.simple.terms...), or: r.simple.or}
		}
		if r.guards != nil {
			c.guards = append([]comparison(nil), r.guards...)
		}
		rules[i] = &c
	}
	return bindSet(rules, thresholds)
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
	index *ruleIndex // nil when too few rules test one path (index.go)
	// lastFired is how many rules the last emission of the event fired:
	// the next one makes room for as many at once (an event's emissions
	// tend to fire alike) instead of regrowing its outcome as rules fire.
	lastFired atomic.Int32
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
func (t *Trigger) RuledOut(facts *ToolFacts) bool {
	resolve := func(o *operand) (Value, bool) {
		switch {
		case o.literal:
			return o.value, true
		case o.root == "thresholds":
			v, ok := walk(t.set.thresholds, o.path)
			return valueOf(v), ok
		case o.tool != 0:
			return facts.value(o.tool)
		}
		return Value{}, false
	}
	for _, r := range t.rules {
		if r.folded == nil {
			if r.foldedGuards == nil || !ruledOut(r.foldedGuards, resolve) {
				return false
			}
			continue
		}
		if matched, decided := r.folded.eval(resolve); !decided || matched {
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
		if r.lua || r.host != nil {
			n = needsOf([]string{"context"}) // a script or the host may read anything
		}
		s.needs[r.Trigger] = s.needs[r.Trigger].or(n)
	}
	s.beforeEval = len(s.byTrigger[BeforeRuleEval]) > 0
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

// ScriptFiles returns the Lua script files the rule's condition and
// actions were read from (not inline Lua), for a watcher to watch.
func (r *Rule) ScriptFiles() []string {
	var out []string
	add := func(s *rulelua.Script) {
		if s == nil {
			return
		}
		if info, err := os.Stat(s.Name()); err == nil && info.Mode().IsRegular() {
			out = append(out, s.Name())
		}
	}
	add(r.luaCond)
	for i := range r.actions {
		add(r.actions[i].script)
	}
	return out
}

// StateScope is where the state of a session's rules of a namespace (a
// plugin) is kept: the session itself for "", apart from it otherwise.
func StateScope(session, namespace string) string {
	if namespace == "" {
		return session
	}
	return "plugin:" + namespace + "/" + session
}
