package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

// The pipeline's side of the decisions beyond allow and deny (issue 28;
// core/rules/decide.go says what rules decide): a rewrite of the
// arguments, the approval a call waits for (approvals.go), budgets of
// calls per tool, guards on what a tool gives back, and the record of
// what rules in shadow mode would have decided. None of it runs for a
// call no rule decides on and whose tool has no budget nor
// needs_approval.

// noteShadow records what rules in shadow mode would have decided on the
// call: in its audit record, and in the engine's counts (rules_list).
func (e *Engine) noteShadow(c *toolCall, shadow []rules.ShadowDecision) {
	if len(shadow) == 0 {
		return
	}
	d := c.decided()
	for _, sh := range shadow {
		d.Shadow = append(d.Shadow, toolbox.Shadowed{Decision: sh.Decision, Rule: sh.Rule, Reason: sh.Reason})
		e.shadowCounts.add(sh.Rule, sh.Decision)
	}
}

// applyRewrite replaces the call's arguments with those a rule gave; the
// pipeline validates them next. The rule's action record (in the trace)
// and the audit get both hashes.
func (e *Engine) applyRewrite(t *toolbox.Tool, c *toolCall, rw *rules.Rewrite) *protocol.Error {
	// Written as encoding/json would (keys sorted, no duplicate: the
	// arguments are as a strict scan leaves them), without reflection;
	// a value JSON cannot hold (NaN) becomes null, which the schema judges.
	args := rules.AppendJSON(make([]byte, 0, len(c.args)+16), rw.Arguments)
	d := c.decided()
	d.Rewrite = &toolbox.Rewritten{Rule: rw.Rule, Before: sha256.Sum256(c.args), After: sha256.Sum256(args)}
	if rw.Record != nil && c.rep.wantTrace { // the record is seen only in the trace
		rw.Record.Before, rw.Record.After = hex.EncodeToString(d.Rewrite.Before[:]), hex.EncodeToString(d.Rewrite.After[:])
	}
	c.args, c.scanned, c.rewritten = args, true, rw.Rule
	return nil
}

// needsApproval decides whether a call of a tool with needs_approval
// waits for a person: every call (true), or those the condition of the
// named on_tool_call rule matches. When that rule cannot say (it is not
// loaded, its condition fails), the call waits too: it does not run
// unless a person lets it.
func (e *Engine) needsApproval(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall) *protocol.Error {
	na := t.NeedsApproval
	if na.Rule == "" {
		c.ask = &askFor{reason: "tool " + strconv.Quote(t.Name) + " needs approval (needs_approval)"}
		return nil
	}
	c.handOn()
	trigger := s.rules.Trigger(rules.OnToolCall)
	src := &eventSource{e: e, s: s, needs: rules.Needs{All: true, Event: true, Tool: true, History: true, State: true},
		trigger: trigger, name: rules.OnToolCall, session: c.session, tool: rules.ToolFacts{Name: t.Name}, args: c.args, meta: c.meta}
	ev := rules.Event{Name: rules.OnToolCall, Session: c.session, Context: src}
	matched, err := s.rules.Matches(ctx, na.Rule, ev, s.host)
	switch {
	case err != nil:
		c.ask = &askFor{rule: na.Rule, reason: "needs_approval names rule " + strconv.Quote(na.Rule) + ", which cannot tell: " + err.Error()}
	case !matched:
		return nil
	case s.rules.Rule(na.Rule).Mode == rules.ModeShadow:
		e.noteShadow(c, []rules.ShadowDecision{{Decision: "would_ask", Rule: na.Rule, Reason: "needs_approval"}})
		return nil
	default:
		c.ask = &askFor{rule: na.Rule, reason: "rule " + strconv.Quote(na.Rule) + " matched (needs_approval)"}
	}
	return nil
}

// Budgets of calls per tool (issue 28): per chat, the calls its model
// makes of each tool; per session, every call of the tool in it. The
// configuration's limits.max_calls_per_chat and max_calls_per_session
// apply to every tool but the administrative ones, unless the tool's
// descriptor sets its own.

// chatBudgets counts the calls one chat's model made of each tool.
type chatBudgets struct {
	mu    sync.Mutex
	calls map[string]int
}

func (b *chatBudgets) take(tool string, max int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls[tool] >= max {
		return false
	}
	if b.calls == nil {
		b.calls = map[string]int{}
	}
	b.calls[tool]++
	return true
}

func (b *chatBudgets) giveBack(tool string) {
	b.mu.Lock()
	if b.calls[tool] > 0 {
		b.calls[tool]--
	}
	b.mu.Unlock()
}

// budgets are the tool's budgets of calls per chat and per session in s
// (0: none).
func budgets(s *snapshot, t *toolbox.Tool) (perChat, perSession int) {
	if s.admin(t) {
		return 0, 0
	}
	perChat, perSession = t.Limits.MaxCallsPerChat, t.Limits.MaxCallsPerSession
	if perChat == 0 {
		perChat = s.config.Limits.MaxCallsPerChat
	}
	if perSession == 0 {
		perSession = s.config.Limits.MaxCallsPerSession
	}
	return perChat, perSession
}

// takeBudgets counts the call against the tool's budgets, or refuses it
// with budget_exhausted when one is spent, firing on_budget_exhausted.
func (e *Engine) takeBudgets(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall) *protocol.Error {
	perChat, perSession := budgets(s, t)
	if perChat > 0 && c.chat != nil && !c.chat.take(t.Name, perChat) {
		return e.budgetSpent(ctx, s, t, c, "chat", perChat)
	}
	if perSession > 0 {
		ok, perr := e.takeSessionBudget(ctx, s, t, c, perSession) // the shared store's, with one
		if !ok {
			if perChat > 0 && c.chat != nil {
				c.chat.giveBack(t.Name)
			}
			if perr != nil {
				return perr
			}
			return e.budgetSpent(ctx, s, t, c, "session", perSession)
		}
	}
	return nil
}

// giveBackBudgets returns what takeBudgets counted, for a call that did
// not run after all (its approval was not given).
func (e *Engine) giveBackBudgets(s *snapshot, t *toolbox.Tool, c *toolCall) {
	perChat, perSession := budgets(s, t)
	if perChat > 0 && c.chat != nil {
		c.chat.giveBack(t.Name)
	}
	if perSession > 0 {
		e.giveBackSessionBudget(s, t, c)
	}
}

// budgetSpent is the error of a call whose budget is spent, after
// on_budget_exhausted fired with {tool, budget, limit}.
func (e *Engine) budgetSpent(ctx context.Context, s *snapshot, t *toolbox.Tool, c *toolCall, budget string, limit int) *protocol.Error {
	c.decided().Budget = budget
	details := protocol.AppendString([]byte(`{"tool":`), t.Name)
	details = append(details, `,"budget":`...)
	details = protocol.AppendString(details, budget)
	details = strconv.AppendInt(append(details, `,"limit":`...), int64(limit), 10)
	details = append(details, '}')
	if c.rep.wantTrace {
		c.rep.extraTrace = append(c.rep.extraTrace, append([]byte(`{"budget_exhausted":`), details[len(`{"tool":`)-1:]...))
	}
	if s.rules.Watches(rules.OnBudgetExhausted) {
		c.handOn()
		src := e.newEventSource(s, rules.OnBudgetExhausted, c.session,
			map[string]any{"tool": t.Name, "budget": budget, "limit": limit})
		e.fire(ctx, s, c.rep, src)
		src.release()
	} else {
		e.sessions.Release(c.session, rules.OnBudgetExhausted)
	}
	what := "per chat: the chat's model called it that many times"
	if budget == "session" {
		what = "per session (until session_end)"
	}
	return &protocol.Error{Code: protocol.BudgetExhausted, Details: details,
		Message: "tool " + strconv.Quote(t.Name) + " was not run: its budget of " + strconv.Itoa(limit) + " calls " + what}
}

// guardResult applies what the rules on on_tool_complete decided on a
// result: a block replaces it by the error blocked, redactions cut parts
// out of it. A result that cannot be redacted is blocked: what it holds
// must not get out.
func (e *Engine) guardResult(t *toolbox.Tool, c *toolCall, out *rules.Outcome, result []byte, perr *protocol.Error) ([]byte, *protocol.Error) {
	shadow := out.Shadow[:0:0]
	for i := range out.Shadow {
		if perr == nil && out.Shadow[i].WouldChange(result) {
			shadow = append(shadow, out.Shadow[i])
		}
	}
	e.noteShadow(c, shadow)
	if perr != nil {
		return result, perr
	}
	if b := out.Blocked; b != nil {
		c.decided().BlockedBy = b.Rule
		return nil, blockedError("tool "+strconv.Quote(t.Name)+"'s result was blocked by rule "+strconv.Quote(b.Rule), b)
	}
	if len(out.Redactions) == 0 {
		return result, nil
	}
	red, changed, err := rules.Redact(result, out.Redactions)
	if err != nil {
		e.log.Logf(logging.Warn, "tool %q: %v", t.Name, err)
		b := &rules.Denial{Rule: out.Redactions[0].Rule, Reason: "the result could not be redacted: " + err.Error()}
		c.decided().BlockedBy = b.Rule
		return nil, blockedError("tool "+strconv.Quote(t.Name)+"'s result was blocked by rule "+strconv.Quote(b.Rule), b)
	}
	if changed {
		d := c.decided()
		for _, r := range out.Redactions {
			d.Redacted = append(d.Redacted, r.Rule)
		}
	}
	return red, nil
}

// blockedError is the error blocked: the message says what and why, the
// details {"rule", "reason"} (the model gets {"error": "blocked",
// "reason": ...}).
func blockedError(what string, b *rules.Denial) *protocol.Error {
	details := protocol.AppendString([]byte(`{"rule":`), b.Rule)
	details = append(details, `,"reason":`...)
	details = protocol.AppendString(details, b.Reason)
	return &protocol.Error{Code: protocol.Blocked, Message: what + ": " + b.Reason, Details: append(details, '}')}
}

// shadowCounts counts, per rule, the decisions rules in shadow mode would
// have taken (rules_list shows them): across reloads, until a reset.
type shadowCounts struct {
	m sync.Map // rule id -> *shadowCount
}

type shadowCount struct {
	byDecision sync.Map // "would_deny" ... -> *atomic.Int64
}

func (sc *shadowCounts) add(rule, decision string) {
	v, _ := sc.m.LoadOrStore(rule, &shadowCount{})
	n, _ := v.(*shadowCount).byDecision.LoadOrStore(decision, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// of returns the counts of a rule, nil when it never decided in shadow.
func (sc *shadowCounts) of(rule string) map[string]int64 {
	v, ok := sc.m.Load(rule)
	if !ok {
		return nil
	}
	out := map[string]int64{}
	v.(*shadowCount).byDecision.Range(func(k, n any) bool {
		out[k.(string)] = n.(*atomic.Int64).Load()
		return true
	})
	return out
}

func (sc *shadowCounts) reset() { sc.m.Range(func(k, _ any) bool { sc.m.Delete(k); return true }) }
