package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/rulelua"
)

// Decisions (issue 28): besides deny, a rule may hold a tool call for a
// person's approval (ask), change its arguments (rewrite), refuse what a
// tool or a chat gives back (block), or cut parts out of it (redact). The
// engine enforces them from the Outcome; a rule in shadow mode has its
// decisions recorded in Outcome.Shadow instead.
//
// Where each acts:
//
//	on_tool_call      deny, ask, rewrite (arguments)
//	on_chat_start     deny, rewrite (prompt), redact (the prompt)
//	on_tool_complete  block, redact (the result)
//	on_answer         block, redact (the chat's answer)
//
// When several rules decide on one event, the engine applies deny > ask >
// rewrite > allow: a denial wins over everything, an ask holds the call
// (with the rewrite applied, so that the person approves what will run),
// and the first rule (highest priority) that denies, asks, rewrites or
// blocks gives the reason or the new value. Every redact applies, in
// order.

// The hook points of the decisions, besides OnToolCall.
const (
	OnToolComplete = "on_tool_complete"
	OnChatStart    = "on_chat_start"
	OnAnswer       = "on_answer"
	// OnBudgetExhausted fires when a call is refused because a budget of
	// calls is spent (max_calls_per_chat, max_calls_per_session).
	OnBudgetExhausted = "on_budget_exhausted"
	// OnQueryStart fires as a chat starts, before its first turn (seed
	// 004's hook; issue 26 §5), with context.question.
	OnQueryStart = "on_query_start"
)

// Modes of a rule.
const (
	ModeEnforce = "enforce"
	ModeShadow  = "shadow"
)

// decisionTriggers are the events each decision acts on.
var decisionTriggers = map[string][]string{
	ActDeny:    {OnToolCall, OnChatStart},
	ActAsk:     {OnToolCall},
	ActRewrite: {OnToolCall, OnChatStart},
	ActBlock:   {OnToolComplete, OnAnswer},
	ActRedact:  {OnToolComplete, OnAnswer, OnChatStart},
}

// checkDecisionTrigger refuses a decision on an event it does not act on.
func checkDecisionTrigger(kind, trigger string) error {
	on, ok := decisionTriggers[kind]
	if !ok {
		return nil
	}
	for _, t := range on {
		if t == trigger {
			return nil
		}
	}
	return fmt.Errorf("%s only acts on %s, not %s", kind, strings.Join(on, " and "), trigger)
}

// isGuard reports whether the rule decides: one whose condition or
// actions fail then fails closed (failClosed).
func isGuard(r *Rule) bool {
	for i := range r.actions {
		if _, ok := decisionTriggers[r.actions[i].kind]; ok {
			return true
		}
	}
	return false
}

// failClosed is the decision a rule that could not be evaluated to the end
// takes in its stead: on on_tool_call every rule denies the call (it
// cannot say the call may go on); a guard on on_chat_start denies the
// chat; a guard on on_tool_complete or on_answer blocks what comes back.
// "" for the others, which simply do not act.
func failClosed(rule *Rule) string {
	switch {
	case rule.Trigger == OnToolCall:
		return ActDeny
	case !rule.guard:
		return ""
	case rule.Trigger == OnChatStart:
		return ActDeny
	case rule.Trigger == OnToolComplete, rule.Trigger == OnAnswer:
		return ActBlock
	}
	return ""
}

// compileRewrite reads a rewrite action: new arguments (on on_tool_call;
// a template object, merged into the call's own with merge = true), a new
// prompt (on on_chat_start; a template), or a Lua script returning either.
func (c *compiler) compileRewrite(src Source, trigger string, d *actionDoc, a *action) error {
	n := 0
	for _, given := range []bool{d.Arguments != nil, d.Prompt != nil, d.Lua != nil, d.Script != nil} {
		if given {
			n++
		}
	}
	what := "arguments"
	if trigger == OnChatStart {
		what = "prompt"
	}
	if n != 1 {
		return fmt.Errorf("give one of %s, lua or script", what)
	}
	if d.Merge != nil {
		if d.Arguments == nil {
			return fmt.Errorf("merge goes with arguments")
		}
		a.merge = *d.Merge
	}
	var err error
	switch {
	case d.Arguments != nil:
		if trigger != OnToolCall {
			return fmt.Errorf("on %s a rewrite gives the prompt, not arguments", trigger)
		}
		a.args, err = c.value(d.Arguments)
	case d.Prompt != nil:
		if trigger != OnChatStart {
			return fmt.Errorf("on %s a rewrite gives the arguments, not a prompt", trigger)
		}
		a.prompt, err = c.template(*d.Prompt)
	default:
		a.script, _, err = luaSource(src, d.Lua, d.Script, "action", c.lua)
	}
	return err
}

// DefaultRedaction is what a redact action puts in place of a match.
const DefaultRedaction = "[redacted]"

// maxRedactPatterns bounds the patterns of one redact action.
const maxRedactPatterns = 256

// compileRedact reads a redact action: patterns (RE2, matched in every
// string of the value) and their replacement, or a Lua script that
// returns the value redacted.
func (c *compiler) compileRedact(src Source, d *actionDoc, a *action) error {
	if (d.Patterns != nil) == (d.Lua != nil || d.Script != nil) || (d.Lua != nil && d.Script != nil) {
		return fmt.Errorf("give patterns, or one of lua and script")
	}
	if d.Lua != nil || d.Script != nil {
		if d.Replacement != nil {
			return fmt.Errorf("replacement goes with patterns")
		}
		var err error
		a.script, _, err = luaSource(src, d.Lua, d.Script, "action", c.lua)
		return err
	}
	if len(d.Patterns) == 0 || len(d.Patterns) > maxRedactPatterns {
		return fmt.Errorf("patterns: give 1 to %d regular expressions", maxRedactPatterns)
	}
	a.replace = DefaultRedaction
	if d.Replacement != nil {
		a.replace = *d.Replacement
	}
	for _, p := range d.Patterns {
		if len(p) > maxExpressionBytes {
			return fmt.Errorf("pattern of %d bytes, more than the %d allowed", len(p), maxExpressionBytes)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return fmt.Errorf("pattern %q: %v", p, err)
		}
		a.patterns = append(a.patterns, re)
	}
	return nil
}

// Rewrite is the first rewrite of an emission: the new arguments of a
// tool call (a JSON object), or a chat's new prompt.
type Rewrite struct {
	Rule      string
	Arguments map[string]any // on on_tool_call
	Prompt    string         // on on_chat_start
	// Record is the rewrite's action record (in Fired and the trace): the
	// engine writes the hashes before and after into it.
	Record *ActionRecord
}

// Redaction is one redact action: patterns, or the value a Lua script
// returned (which takes the place of the whole value).
type Redaction struct {
	Rule     string
	Patterns []*regexp.Regexp
	Replace  string
	Value    any // what the script returned, when Script
	Script   bool
}

// ShadowDecision is a decision a rule in shadow mode would have taken:
// Decision is "would_deny", "would_ask", "would_rewrite", "would_block"
// or "would_redact".
type ShadowDecision struct {
	Decision string `json:"decision" toml:"decision"`
	Rule     string `json:"rule" toml:"rule"`
	Reason   string `json:"reason,omitempty" toml:"reason"`
	// Redaction is a would_redact's redaction: whoever has the value can
	// tell whether it would have changed anything (WouldChange).
	Redaction *Redaction `json:"-" toml:"-"`
}

// WouldChange reports whether a shadow decision would have changed value
// (a JSON value): a would_redact whose patterns match nothing in it would
// not; every other decision would.
func (d *ShadowDecision) WouldChange(value []byte) bool {
	if d.Redaction == nil {
		return true
	}
	_, changed, err := Redact(value, []Redaction{*d.Redaction})
	return changed || err != nil
}

// Decided reports whether the outcome holds a decision the engine
// enforces or records (beyond notices and state).
func (o *Outcome) Decided() bool {
	return o.Denied != nil || o.Asked != nil || o.Rewrite != nil || o.Blocked != nil || len(o.Redactions) > 0 || len(o.Shadow) > 0
}

// decide records the decision kind of rule (reason, for those that have
// one): into the outcome's field for it, the first rule's winning, or as
// a shadow decision when the rule is in shadow mode.
func (e *emission) decide(rule *Rule, kind, reason string) {
	e.outcome()
	if rule.Mode == ModeShadow {
		e.out.Shadow = append(e.out.Shadow, ShadowDecision{Decision: "would_" + kind, Rule: rule.ID, Reason: reason})
		return
	}
	var slot **Denial
	switch kind {
	case ActDeny:
		slot = &e.out.Denied
	case ActAsk:
		slot = &e.out.Asked
	case ActBlock:
		slot = &e.out.Blocked
	default:
		return
	}
	if *slot == nil {
		*slot = &Denial{Rule: rule.ID, Reason: reason}
	}
}

// rewrite applies a rendered rewrite: the first one of the emission is
// the one enforced.
func (e *emission) rewrite(rule *Rule, x *rendered, rec *ActionRecord) {
	if rule.Mode == ModeShadow {
		e.decide(rule, ActRewrite, "")
		return
	}
	if e.out.Rewrite != nil {
		return
	}
	rw := &Rewrite{Rule: rule.ID, Record: rec}
	if m, ok := x.value.(map[string]any); ok {
		rw.Arguments = m
	} else {
		rw.Prompt = x.text
	}
	e.out.Rewrite = rw
}

// redact adds a rendered redact action to the outcome's.
func (e *emission) redact(rule *Rule, x *rendered) {
	r := Redaction{Rule: rule.ID, Patterns: x.a.patterns, Replace: x.a.replace, Value: x.value, Script: x.a.script != nil}
	if rule.Mode == ModeShadow {
		e.decide(rule, ActRedact, "")
		e.out.Shadow[len(e.out.Shadow)-1].Redaction = &r
		return
	}
	e.out.Redactions = append(e.out.Redactions, r)
}

// renderRewrite evaluates a rewrite's new arguments or prompt into x. The
// arguments must be a JSON object; with merge, the call's own arguments
// (context.tool.arguments) are kept where the rule gives no key.
func (x *rendered) renderRewrite(e *emission, run func() *runner) error {
	a := x.a
	switch {
	case a.prompt != nil:
		var err error
		if a.prompt.static {
			x.text = a.prompt.text
		} else {
			x.text, err = a.prompt.render(run())
		}
		return err
	case a.script != nil:
		res, err := run().runLua(e.ctx, a.script, e.ev.Session, e.host)
		if err != nil {
			return err
		}
		x.more = res.Actions
		return x.takeRewritten(res.Value, e.ev.Name)
	}
	v, err := a.args.evalLazy(run)
	if err != nil {
		return err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("the new arguments are %s, not an object", jsonKind(v))
	}
	if a.merge {
		old, _ := walk(run().env.Context, []string{"tool", "arguments"})
		if om, ok := old.(map[string]any); ok {
			merged := make(map[string]any, len(om)+len(m))
			for k, v := range om {
				merged[k] = v
			}
			for k, v := range m {
				merged[k] = v
			}
			m = merged
		}
	}
	x.value = m
	return nil
}

// takeRewritten takes what a rewrite script returned: a table of
// arguments on on_tool_call, a string on on_chat_start.
func (x *rendered) takeRewritten(v any, event string) error {
	if event == OnChatStart {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("the script returned %s; a rewrite of the prompt returns a string", jsonKind(v))
		}
		x.text = s
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		if l, isList := v.([]any); isList && len(l) == 0 {
			m = map[string]any{} // an empty Lua table
		} else {
			return fmt.Errorf("the script returned %s; a rewrite returns a table of arguments", jsonKind(v))
		}
	}
	x.value = m
	return nil
}

// renderRedact runs a redact script into x.value (patterns need nothing
// rendered).
func (x *rendered) renderRedact(e *emission, run func() *runner) error {
	if x.a.script == nil {
		return nil
	}
	res, err := run().runLua(e.ctx, x.a.script, e.ev.Session, e.host)
	if err != nil {
		return err
	}
	if res.Value == nil {
		return fmt.Errorf("the script returned nothing; a redact script returns the value redacted")
	}
	x.more = res.Actions
	x.value = res.Value
	return nil
}

// jsonKind names a JSON-like value's kind, for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int, int64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

// Redact applies redactions to a JSON value (a result, an answer as a
// JSON string): the value the first script returned takes the place of
// the whole, then every pattern replaces its matches in every string of
// it, in order (object keys too). It returns the redacted JSON and
// whether anything changed.
func Redact(value []byte, rs []Redaction) ([]byte, bool, error) {
	if len(rs) == 0 {
		return value, false, nil
	}
	var v any
	replaced := false
	for _, r := range rs {
		if r.Script {
			v, replaced = r.Value, true
			break
		}
	}
	if !replaced {
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.UseNumber() // numbers keep their text
		if err := dec.Decode(&v); err != nil {
			return nil, false, fmt.Errorf("redact: the value is not JSON: %v", err)
		}
	}
	changed := replaced
	for _, r := range rs {
		if len(r.Patterns) > 0 {
			var c bool
			v, c = redactValue(v, r.Patterns, r.Replace)
			changed = changed || c
		}
	}
	if !changed {
		return value, false, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false, fmt.Errorf("redact: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true, nil
}

// RedactText applies redactions to a text (a prompt, an answer): a
// script's value (which must be a string) replaces it, then the patterns.
func RedactText(text string, rs []Redaction) (string, error) {
	for _, r := range rs {
		if r.Script {
			s, ok := r.Value.(string)
			if !ok {
				return "", fmt.Errorf("redact: rule %q's script returned %s, not a string", r.Rule, jsonKind(r.Value))
			}
			text = s
			break
		}
	}
	for _, r := range rs {
		for _, re := range r.Patterns {
			text = re.ReplaceAllLiteralString(text, r.Replace)
		}
	}
	return text, nil
}

// redactValue replaces the matches of patterns in every string of v.
func redactValue(v any, patterns []*regexp.Regexp, replace string) (any, bool) {
	switch x := v.(type) {
	case string:
		out := x
		for _, re := range patterns {
			out = re.ReplaceAllLiteralString(out, replace)
		}
		return out, out != x
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			nk, kc := redactValue(k, patterns, replace)
			ne, ec := redactValue(e, patterns, replace)
			out[nk.(string)] = ne
			changed = changed || kc || ec
		}
		return out, changed
	case []any:
		changed := false
		out := make([]any, len(x))
		for i, e := range x {
			var c bool
			out[i], c = redactValue(e, patterns, replace)
			changed = changed || c
		}
		return out, changed
	}
	return v, false
}

// luaDecision turns a script's ask() or block() into a rendered action of
// the rule, refused where the decision does not act.
func luaDecision(a rulelua.Action, trigger string) (rendered, error) {
	kind := canonical(a.Type, ActDeny, ActAsk, ActBlock)
	if err := checkDecisionTrigger(kind, trigger); err != nil {
		return rendered{}, err
	}
	return rendered{a: &action{kind: kind}, text: a.Reason}, nil
}

// Rule returns the rule of that id, or nil.
func (s *Set) Rule(id string) *Rule {
	if s == nil {
		return nil
	}
	for _, r := range s.all {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Matches evaluates the condition of the rule id alone against ev, its
// actions left out: a tool whose needs_approval names a rule needs a
// person's approval for the calls that rule's condition matches,
// whichever other rules fire. It fails when no such rule watches ev, or
// when its condition cannot be evaluated.
func (s *Set) Matches(ctx context.Context, id string, ev Event, host Host) (bool, error) {
	rule := s.Rule(id)
	switch {
	case rule == nil:
		return false, fmt.Errorf("no rule %q is loaded", id)
	case rule.Trigger != ev.Name:
		return false, fmt.Errorf("rule %q watches %s, not %s", id, rule.Trigger, ev.Name)
	}
	var e emission
	e.set, e.ctx, e.ev, e.host = s, ctx, ev, host
	e.ns = rule.Namespace
	defer e.release()
	// Operands are left to expr (and Lua): one rule, evaluated rarely.
	var v verdict
	e.evaluate(rule, func(*operand) (Value, bool) { return Value{}, false }, &v)
	return v.matched, v.err
}

// AppendJSON appends a JSON-like value (a rewrite's arguments) as
// encoding/json writes it, keys sorted, without reflection.
func AppendJSON(dst []byte, v any) []byte { return jsonx.AppendValue(dst, v) }
