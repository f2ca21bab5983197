package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/rulelua"
)

// Rules of the host (seed 004's Tier 1, registerRule({condition, action})):
// a rule whose condition and action are functions of the program that
// embeds Clara (C function pointers, Python callables), beside the rules
// of files, under the same hooks, priorities, modes, trace and tests. Its
// descriptor is a rule as a JSON rule file writes one ({"id", "trigger",
// "priority", ...}), which may also give a condition or actions of its
// own; the host's condition replaces the descriptor's, and the host's
// action runs after the descriptor's actions.

// HostFuncs are a host rule's functions. Each gets the event as JSON
// ({"rule", "event", "session", "context"}) on the goroutine that fires
// it; several emissions may call them at once.
type HostFuncs struct {
	// Condition says whether the rule matches; an error is a condition
	// that cannot be evaluated (on on_tool_call the call is denied). nil:
	// the descriptor's condition, or none (the rule always matches).
	Condition func(ctx context.Context, event []byte) (bool, error)
	// Action runs when the rule matched, and returns what else Clara is to
	// do: a JSON array of actions (an object is one action; empty or null
	// is none; {"error": "..."} is a failure), as hostActions reads them.
	// An error skips the rule's actions, as a template that fails does
	// (on on_tool_call the call is denied).
	Action func(ctx context.Context, event []byte) ([]byte, error)
	// Release is called once, when no emission may call the functions
	// any more: after Retire, once the calls running then returned.
	Release func()

	mu       sync.Mutex
	running  int
	retired  bool
	released bool
}

// enter counts a call of the functions; false once retired (the rule left
// the rules in force: an emission of the old set calls nothing).
func (f *HostFuncs) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.retired {
		return false
	}
	f.running++
	return true
}

func (f *HostFuncs) leave() {
	f.mu.Lock()
	f.running--
	release := f.retired && f.running == 0 && !f.released
	if release {
		f.released = true
	}
	f.mu.Unlock()
	if release && f.Release != nil {
		f.Release()
	}
}

// Retire says the functions are no longer in force: Release runs now, or
// when the last running call returns. Calling it again does nothing.
func (f *HostFuncs) Retire() {
	f.mu.Lock()
	f.retired = true
	release := f.running == 0 && !f.released
	if release {
		f.released = true
	}
	f.mu.Unlock()
	if release && f.Release != nil {
		f.Release()
	}
}

// OfHost reports whether the host registered the rule.
func (r *Rule) OfHost() bool { return r.host != nil }

// ErrNoHostFunction is the error of a descriptor that gives the rule
// nothing to do.
var ErrNoHostFunction = errors.New("a host rule needs an action: a function, or actions in its descriptor")

// HostRuleID reads the id of a host rule's descriptor (JSON), for the
// engine to keep registrations by id; Load checks the rest.
func HostRuleID(descriptor []byte) (string, error) {
	var d struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(descriptor, &d); err != nil {
		return "", fmt.Errorf("descriptor: %v", err)
	}
	if !ruleID.MatchString(d.ID) {
		return "", fmt.Errorf("rule id %q: use 1 to 128 letters, digits, '_', '.' or '-'", d.ID)
	}
	return d.ID, nil
}

// loadHostRule compiles a host rule: src.Text is its descriptor (JSON).
func (c *compiler) loadHostRule(src Source) ([]*Rule, protocol.Problems) {
	var d ruleDoc
	if problems := decodeJSON(src.Name, src.Text, &d); problems != nil {
		return nil, problems
	}
	problem := func(format string, args ...any) protocol.Problems {
		return protocol.Problems{{File: src.Name, Line: 1, Message: fmt.Sprintf("rule %q: ", d.ID) + fmt.Sprintf(format, args...)}}
	}
	hasActions := d.Action != nil || len(d.Actions) > 0
	switch {
	case src.Host.Action == nil && !hasActions:
		return nil, problem("%v", ErrNoHostFunction)
	case src.Host.Condition != nil && d.Condition != nil:
		return nil, problem("give the condition as a function or in the descriptor, not both")
	}
	r, problems := c.compileRule(src, &d)
	if r == nil {
		return nil, problems
	}
	r.host = src.Host
	if src.Host.Condition != nil {
		r.CondSource = "(a function of the host)"
	}
	if src.Host.Action != nil {
		r.actions = append(r.actions, action{kind: actHost})
		// Opaque, it may deny or block: one that cannot be evaluated
		// fails closed where a rule that decides does.
		r.guard = true
	}
	return []*Rule{r}, nil
}

// actHost is a host rule's action function among its actions.
const actHost = "host"

// hostEvent is what the host's functions get: the rule, the event, the
// session and the context the rule sees.
func (e *emission) hostEvent(rule *Rule) ([]byte, error) {
	if e.hostRule == rule && e.hostJSON != nil {
		return e.hostJSON, nil
	}
	b, err := json.Marshal(struct {
		Rule    string         `json:"rule"`
		Event   string         `json:"event"`
		Session string         `json:"session"`
		Context map[string]any `json:"context"`
	}{rule.ID, e.ev.Name, e.ev.Session, e.contextIn(rule.Namespace)})
	if err != nil {
		return nil, fmt.Errorf("the event's context as JSON: %v", err)
	}
	e.hostRule, e.hostJSON = rule, b
	return b, nil
}

// hostCondition runs a host rule's condition function.
func (e *emission) hostCondition(rule *Rule, v *verdict) {
	f := rule.host
	v.matched = false
	if !f.enter() {
		return // the rule left the rules in force meanwhile: it does not match
	}
	defer f.leave()
	ev, err := e.hostEvent(rule)
	if err == nil {
		v.matched, err = callCondition(e.ctx, f, ev)
	}
	if err != nil {
		v.matched, v.err = false, err
	}
	v.value = v.matched
}

// callCondition calls the function, a panic (a bug of a Go host) being
// an error.
func callCondition(ctx context.Context, f *HostFuncs, ev []byte) (matched bool, err error) {
	defer func() {
		if x := recover(); x != nil {
			matched, err = false, fmt.Errorf("the host's condition panicked: %v", x)
		}
	}()
	return f.Condition(ctx, ev)
}

// hostAction runs a host rule's action function and reads what it asks
// for.
func (e *emission) hostAction(rule *Rule) ([]rendered, error) {
	f := rule.host
	if !f.enter() {
		return nil, nil
	}
	defer f.leave()
	ev, err := e.hostEvent(rule)
	if err != nil {
		return nil, err
	}
	out, err := callAction(e.ctx, f, ev)
	if err != nil {
		return nil, err
	}
	return hostActions(out, rule.Trigger)
}

func callAction(ctx context.Context, f *HostFuncs, ev []byte) (out []byte, err error) {
	defer func() {
		if x := recover(); x != nil {
			out, err = nil, fmt.Errorf("the host's action panicked: %v", x)
		}
	}()
	return f.Action(ctx, ev)
}

// hostActionDoc is one action a host's function asks for.
type hostActionDoc struct {
	Type           string         `json:"type"`
	Message        *string        `json:"message"`
	Priority       *string        `json:"priority"`
	Level          *string        `json:"level"`
	Key            *string        `json:"key"`
	Value          any            `json:"value"`
	Event          *string        `json:"event"`
	Payload        map[string]any `json:"payload"`
	Reason         *string        `json:"reason"`
	DeliverOn      string         `json:"deliver_on"`
	DeliverAfterMS int            `json:"deliver_after_ms"`
	Error          *string        `json:"error"`
}

// hostActions reads what a host's action function returned: nothing
// (empty, null), one action (an object) or several (an array) of
// notify_self, log, set_state, emit_event, deny, ask and block, with the
// keys a rule file gives them; or {"error": "..."}, a failure.
func hostActions(out []byte, trigger string) ([]rendered, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 || bytes.Equal(out, []byte("null")) {
		return nil, nil
	}
	var docs []hostActionDoc
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	var err error
	if out[0] == '{' {
		docs = make([]hostActionDoc, 1)
		err = dec.Decode(&docs[0])
	} else {
		err = dec.Decode(&docs)
	}
	if err == nil && dec.More() {
		err = errors.New("data after the JSON value")
	}
	if err != nil {
		return nil, fmt.Errorf("the host's action returned what is not actions: %v", err)
	}
	var ready []rendered
	for i, d := range docs {
		if d.Error != nil {
			return nil, fmt.Errorf("the host's action failed: %s", *d.Error)
		}
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		if d.Type == ActLog {
			level := "info"
			if d.Level != nil {
				level = *d.Level
			}
			if !logLevels[level] {
				return nil, fmt.Errorf("action %d (log): level %q: use debug, info, warn or error", i+1, level)
			}
			ready = append(ready, rendered{a: &action{kind: ActLog, level: level}, text: str(d.Message)})
			continue
		}
		a := rulelua.Action{Type: d.Type, Message: str(d.Message), Priority: "normal", Key: str(d.Key), Value: d.Value,
			Event: str(d.Event), Payload: d.Payload, Reason: str(d.Reason), DeliverOn: d.DeliverOn, DeliverAfterMS: d.DeliverAfterMS}
		switch d.Type {
		case ActNotify:
			if d.Priority != nil {
				if !notifyPriorities[*d.Priority] {
					return nil, fmt.Errorf("action %d (notify_self): priority %q: use low, normal, high or critical", i+1, *d.Priority)
				}
				a.Priority = canonical(*d.Priority, "low", "normal", "high", "critical")
			}
		case ActSetState, ActEmit, ActDeny, ActAsk, ActBlock:
			if a.Payload == nil && d.Type == ActEmit {
				a.Payload = map[string]any{}
			}
		default:
			return nil, fmt.Errorf("action %d: type %q: a host's action may ask for notify_self, log, set_state, emit_event, deny, ask or block", i+1, d.Type)
		}
		more, err := luaActions([]rulelua.Action{a}, trigger)
		if err != nil {
			return nil, fmt.Errorf("action %d (%s): %v", i+1, d.Type, err)
		}
		ready = append(ready, more...)
	}
	return ready, nil
}
