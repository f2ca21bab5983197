package rules

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/rulelua"
)

// rendered is an action with its templates evaluated.
type rendered struct {
	a     *action
	text  string           // message or reason; rewrite: the new prompt
	value any              // set_state value, emit_event payload, call_tool and rewrite arguments, a redact script's value
	more  []rulelua.Action // what a rewrite or redact script asked for besides
}

// recSlab is where the action records of an emission's fired rules are
// made, a block for several rules at a time. (Its own type, apart from
// what leaks to the heap, so that escape analysis keeps Fire's locals on
// the stack.)
type recSlab struct {
	recs   []ActionRecord
	room   int  // how many rules the outcome expects to fire
	known  bool // room is what the event's last emission fired
	blocks int  // blocks made
}

// take gives room for n records, in recs or in a new block with room for
// those of a few more rules (as many as expected when the last emission
// said; else 4, then 8, as in most emissions few fire); used says how many
// were written.
func (f *recSlab) take(n int) []ActionRecord {
	if cap(f.recs)-len(f.recs) < n {
		rules := min(f.room, 4<<f.blocks)
		if f.known && f.blocks == 0 {
			rules = f.room
		}
		f.recs = make([]ActionRecord, 0, n*max(rules, 1))
		f.blocks = min(f.blocks+1, 1)
	}
	return f.recs[len(f.recs):len(f.recs)]
}

func (f *recSlab) used(n int) { f.recs = f.recs[:len(f.recs)+n] }

// act runs the actions of a matched rule and records it in Fired, with
// its records in entry; when a template or script fails, nothing applies,
// the rule is not in Fired and entry.Skipped says why (and on
// on_tool_call the call is refused).
func (e *emission) act(rule *Rule, fromCond []rulelua.Action, entry *TraceEntry) {
	firedAt := len(e.out.Fired)
	e.out.Fired = append(e.out.Fired, Fired{Rule: rule.ID})
	records, skipped := e.runActions(rule, fromCond)
	if skipped != "" {
		entry.Skipped = skipped
		e.host.Log(logging.Warn, fmt.Sprintf("rule %q (%s:%d) skipped: %s", rule.ID, rule.File, rule.Line, skipped))
		e.out.Fired = append(e.out.Fired[:firedAt], e.out.Fired[firedAt+1:]...)
		if kind := failClosed(rule); kind != "" {
			e.refuse(rule, kind, "it matched, but its actions could not be prepared", skipped)
		}
		return
	}
	entry.Actions = records
	e.out.Fired[firedAt].Actions = records
}

// runActions renders every action of the rule, then applies them in order.
// If any template fails, nothing applies and skipped says why. A panic is
// a skip too, with nothing of the rule's state writes kept.
func (e *emission) runActions(rule *Rule, fromCond []rulelua.Action) (records []ActionRecord, skipped string) {
	mark := len(e.writes)
	defer func() {
		if x := recover(); x != nil {
			records, e.writes = nil, e.writes[:mark]
			e.slab.recs = e.slab.recs[:len(e.slab.recs):len(e.slab.recs)] // what apply wrote past it is not zero
			skipped = fmt.Sprintf("internal error: %v", x)
			e.host.Log(logging.Error, fmt.Sprintf("panic in rule %q: %v\n%s", rule.ID, x, debug.Stack()))
		}
	}()
	var room [4]rendered
	ready, skipped := e.render(rule, fromCond, room[:0])
	if skipped != "" {
		return nil, skipped
	}
	return e.apply(rule, ready), ""
}

// render evaluates the templates of the rule's actions and runs its
// script actions, appending to ready what is to apply: first what a Lua
// condition asked for (it ran first), then each action in order.
func (e *emission) render(rule *Rule, fromCond []rulelua.Action, ready []rendered) ([]rendered, string) {
	// The runner (and with it the whole context) is made only when a
	// template or a script needs it; it has a whole budget for the
	// templates of this rule.
	var r *runner
	run := func() *runner {
		if r == nil {
			r = e.runner().fresh()
		}
		return r
	}
	if len(fromCond) > 0 {
		more, err := luaActions(fromCond, rule.Trigger)
		if err != nil {
			return nil, "condition: " + err.Error()
		}
		ready = append(ready, more...)
	}
	for i := range rule.actions {
		a := &rule.actions[i]
		var err error
		if a.kind == actHost {
			var more []rendered
			if more, err = e.hostAction(rule); err == nil {
				ready = append(ready, more...)
			}
		} else if a.kind == ActLua {
			var res rulelua.Result
			if res, err = run().runLua(e.ctx, a.script, e.ev.Session, e.host); err == nil {
				var more []rendered
				more, err = luaActions(res.Actions, rule.Trigger)
				ready = append(ready, more...)
			}
		} else {
			ready = append(ready, rendered{a: a})
			x := &ready[len(ready)-1]
			if err = x.render(e, run); err == nil && len(x.more) > 0 {
				var more []rendered
				more, err = luaActions(x.more, rule.Trigger)
				ready = append(ready, more...)
			}
		}
		if err != nil {
			return nil, fmt.Sprintf("action %d (%s): %v", i+1, a.kind, err)
		}
	}
	return ready, ""
}

// render evaluates the templates of x's action; run gives the runner when
// one is needed.
func (x *rendered) render(e *emission, run func() *runner) error {
	a := x.a
	var err error
	switch a.kind {
	case ActNotify, ActLog:
		if a.message.static {
			x.text = a.message.text
		} else {
			x.text, err = a.message.render(run())
		}
	case ActDeny, ActAsk, ActBlock:
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
	case ActRewrite:
		err = x.renderRewrite(e, run)
	case ActRedact:
		err = x.renderRedact(e, run)
	}
	return err
}

// apply applies rendered actions in order and returns their records.
func (e *emission) apply(rule *Rule, ready []rendered) []ActionRecord {
	if len(ready) == 0 {
		return []ActionRecord{} // "actions": [], a rule whose script or host asked for nothing
	}
	var records []ActionRecord
	if len(ready) > 0 {
		records = e.slab.take(len(ready))
	}
	for i := range ready {
		x := &ready[i]
		// The slab's room past its records is zero (a block is fresh, and
		// runActions closes one a panic wrote into): set Type in place
		// rather than copy a whole record there.
		records = records[:len(records)+1]
		rec := &records[len(records)-1]
		rec.Type = x.a.kind
		switch x.a.kind {
		case ActNotify:
			e.notify(rule, x, rec)
		case ActLog:
			e.log(rule, x, rec)
		case ActSetState:
			e.setState(rule, x, rec)
		case ActDeny, ActAsk, ActBlock:
			e.decide(rule, x.a.kind, x.text)
			rec.Reason = x.text
		case ActRewrite:
			e.rewrite(rule, x, rec)
		case ActRedact:
			e.redact(rule, x)
		case ActEmit:
			e.emit(rule, x, rec)
		case ActCallTool:
			e.callTool(x, rec)
		}
	}
	e.slab.used(len(records))
	return records[:len(records):len(records)]
}

func (e *emission) notify(rule *Rule, x *rendered, rec *ActionRecord) {
	if a := x.a; a.deliverOn != "" || a.deliverAfterMS > 0 {
		e.out.Deferred = append(e.out.Deferred, protocol.Notice{Rule: rule.ID, Message: x.text, Priority: a.priority, Event: e.ev.Name,
			DeliverOn: a.deliverOn, DeliverAfterMS: a.deliverAfterMS})
		rec.Message, rec.Priority, rec.DeliverOn, rec.DeliverAfterMS = x.text, a.priority, a.deliverOn, a.deliverAfterMS
		return
	}
	if cap(e.out.Notices) == 0 {
		e.out.Notices = make([]protocol.Notice, 0, max(e.slab.room, 1))
	}
	e.out.Notices = append(e.out.Notices, protocol.Notice{Rule: rule.ID, Message: x.text, Priority: x.a.priority, Event: e.ev.Name})
	rec.Message, rec.Priority = x.text, x.a.priority
}

func (e *emission) log(rule *Rule, x *rendered, rec *ActionRecord) {
	switch {
	case x.a.logPrefix == "": // a script's action: Load did not prepare it
		level, _ := logging.ParseLevel(x.a.level)
		e.host.Log(level, fmt.Sprintf("rule %q: %s", rule.ID, x.text))
	case x.a.logLine != "":
		e.host.Log(x.a.logLevel, x.a.logLine)
	default:
		e.host.Log(x.a.logLevel, x.a.logPrefix+x.text)
	}
	rec.Level, rec.Message = x.a.level, x.text
}

// setState adds the write to the emission's, which commit at its end.
func (e *emission) setState(rule *Rule, x *rendered, rec *ActionRecord) {
	b, err := json.Marshal(x.value)
	if err != nil {
		rec.Error = err.Error()
		return
	}
	e.writes = append(e.writes, StateWrite{Key: x.a.key, Value: b, Namespace: rule.Namespace})
	rec.Key, rec.Value = x.a.key, x.value
}

// emit fires a chained event through the host and takes in what its
// rules did.
func (e *emission) emit(rule *Rule, x *rendered, rec *ActionRecord) {
	rec.Event = x.a.event
	if e.ev.Depth+1 >= MaxChainDepth {
		rec.Error = fmt.Sprintf("emit_event: chain deeper than %d events", MaxChainDepth)
		e.host.Log(logging.Warn, fmt.Sprintf("rule %q: %s", rule.ID, rec.Error))
		return
	}
	payload, _ := x.value.(map[string]any)
	child, err := e.host.Chain(e.ctx, e.ev.Session, x.a.event, payload, e.ev.Depth+1, e.ev.Trace)
	if err != nil {
		rec.Error = "emit_event: " + err.Error()
		e.host.Log(logging.Warn, fmt.Sprintf("rule %q: %s", rule.ID, rec.Error))
		return
	}
	if child == nil {
		return
	}
	for _, cf := range child.Fired {
		if cf.Event == "" {
			cf.Event = x.a.event
		}
		e.out.Fired = append(e.out.Fired, cf)
	}
	e.out.Notices = append(e.out.Notices, child.Notices...)
	e.out.Deferred = append(e.out.Deferred, child.Deferred...)
	e.out.Trace = append(e.out.Trace, child.Trace...)
	rec.Fired = len(child.Fired)
}

func (e *emission) callTool(x *rendered, rec *ActionRecord) {
	rec.Tool = x.a.tool
	args := []byte("{}")
	if x.value != nil {
		b, err := json.Marshal(x.value)
		if err != nil {
			rec.Error = err.Error()
			return
		}
		args = b
	}
	result, err := e.host.CallTool(e.ctx, e.ev.Session, x.a.tool, args)
	if err != nil {
		rec.Error = err.Error()
	} else {
		rec.Result = json.RawMessage(result)
	}
}
