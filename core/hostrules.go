package core

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/rules"
)

// Rules the host registers (seed 004's Tier 1): a descriptor and the
// host's functions, kept with the rules added at run time (runtimeRules)
// so that every configuration after compiles them with the others, in the
// same set. They stay through clara_configure (clear = ["rules"] too) and
// go with clara_reset or clara_unregister_rule; their functions are
// released once no emission can call them.

// hostRuleSourceName is the file host rules are said to come from
// (problems, rules_list).
const hostRuleSourceName = "host"

// ErrRuleNotFound: no rule of the host has that id.
var ErrRuleNotFound = errors.New("no rule registered by the host has that id")

// ErrRuleTaken: the id is a rule of the configuration (a file, a plugin,
// the built-in rules, rules_load), which the host cannot replace.
var ErrRuleTaken = errors.New("a rule of the configuration has that id")

// hostRule is one registration.
type hostRule struct {
	id  string
	src rules.Source
}

// RegisterRule adds a rule whose condition and action are the host's
// functions, or replaces the host's rule of the same id (its functions are
// released once its running calls return). descriptor is the rule as a
// JSON rule file writes it ({"id", "trigger", "priority", "stop", "mode",
// "description"}, and a "condition" or "actions" of its own if wanted),
// or JSON5. On any error funcs are released at once, so the caller never
// has to guess who frees.
func (e *Engine) RegisterRule(descriptor []byte, funcs *rules.HostFuncs) (err error) {
	defer func() {
		if err != nil {
			funcs.Retire()
		}
	}()
	text := descriptor
	if !json.Valid(text) {
		// A descriptor is written by hand: JSON5 (docs/protocol.md).
		if text, err = e.JSON5(descriptor); err != nil {
			return fmt.Errorf("descriptor: %v", err)
		}
	}
	id, err := rules.HostRuleID(text)
	if err != nil {
		return err
	}
	if r := e.ruleOfConfiguration(id); r != nil {
		return fmt.Errorf("rule %q: %w (%s:%d)", id, ErrRuleTaken, r.File, r.Line)
	}
	reg := hostRule{id: id, src: rules.Source{Name: hostRuleSourceName, Text: append([]byte(nil), text...), Host: funcs}}
	var replaced *rules.HostFuncs
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		next, old := cur.runtime.withHostRule(reg)
		replaced = old
		return cur.tree, next
	}, nil)
	retire(left)
	if err != nil {
		return err
	}
	if replaced != nil {
		replaced.Retire()
	}
	e.log.Logf(logging.Info, "rule %q registered by the host", id)
	return nil
}

// UnregisterRule removes a rule the host registered; its functions are
// released once its running calls return.
func (e *Engine) UnregisterRule(id string) error {
	if _, old := e.current.Load().runtime.withoutHostRule(id); old == nil {
		if e.ruleOfConfiguration(id) != nil {
			return fmt.Errorf("rule %q: %w", id, ErrRuleTaken)
		}
		return fmt.Errorf("rule %q: %w", id, ErrRuleNotFound)
	}
	var removed *rules.HostFuncs
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		next, old := cur.runtime.withoutHostRule(id)
		removed = old
		return cur.tree, next
	}, nil)
	retire(left)
	if err != nil {
		return err
	}
	if removed == nil { // unregistered meanwhile by another thread
		return fmt.Errorf("rule %q: %w", id, ErrRuleNotFound)
	}
	removed.Retire()
	e.log.Logf(logging.Info, "rule %q unregistered by the host", id)
	return nil
}

// ruleOfConfiguration is the rule in force of that id that the host did
// not register, or nil.
func (e *Engine) ruleOfConfiguration(id string) *rules.Rule {
	for _, r := range e.current.Load().rules.Rules() {
		if r.ID == id && !r.OfHost() {
			return r
		}
	}
	return nil
}

// withHostRule is r with reg in place of the host rule of its id, or
// after the others, and the functions it replaced.
func (r runtimeRules) withHostRule(reg hostRule) (runtimeRules, *rules.HostFuncs) {
	out := r
	out.host = make([]hostRule, 0, len(r.host)+1)
	var old *rules.HostFuncs
	for _, h := range r.host {
		if h.id == reg.id {
			old = h.src.Host
			out.host = append(out.host, reg)
			continue
		}
		out.host = append(out.host, h)
	}
	if old == nil {
		out.host = append(out.host, reg)
	}
	return out, old
}

// withoutHostRule is r without the host rule id, and its functions (nil
// when there was none).
func (r runtimeRules) withoutHostRule(id string) (runtimeRules, *rules.HostFuncs) {
	out := r
	out.host = make([]hostRule, 0, len(r.host))
	var old *rules.HostFuncs
	for _, h := range r.host {
		if h.id == id {
			old = h.src.Host
			continue
		}
		out.host = append(out.host, h)
	}
	return out, old
}

// hostSources are the host's rules, as sources for rules.Load.
func (r runtimeRules) hostSources() []rules.Source {
	out := make([]rules.Source, len(r.host))
	for i, h := range r.host {
		out[i] = h.src
	}
	return out
}

// retireHostRules releases the functions of host rules that left.
func retireHostRules(list []hostRule) {
	for _, h := range list {
		h.src.Host.Retire()
	}
}
