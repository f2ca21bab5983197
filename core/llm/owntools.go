package llm

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// The model's own tools inside a chat that gives a result_schema (seed
// 003's set_result and finish). The loop answers them itself: they never
// reach the Host, and a tool of the catalog with one of these names is
// not offered beside them.
const (
	ToolSetResult = "set_result"
	ToolFinish    = "finish"
)

// FinishReasonFinish is the chat's finish_reason when the model ended it
// by calling finish.
const FinishReasonFinish = "finish"

// ownCallsCap bounds the calls of set_result and finish in one chat, which
// do not count against max_tool_calls: a model that keeps setting values
// the schema refuses (or keeps calling tools past max_tool_calls) gets its
// last call without tools after this many.
const ownCallsCap = 8

// maxValueDepth bounds the nesting of a set_result value.
const maxValueDepth = 10000

// reminder is what the model is told when it answers without having set
// the result: once per chat, while its budget lasts.
const reminder = "This task needs a result: call set_result with a value that matches its schema, then call finish."

// ownTools is the state of the own tools of one chat. The loop calls them
// one at a time, on its own goroutine.
type ownTools struct {
	schema   *toolbox.ValueSchema // nil accepts any value
	result   []byte               // the last value set_result accepted; nil until then
	finished bool                 // finish was called with the result set
	reminded bool
	calls    int // own calls so far, and calls past max_tool_calls (see ownCallsCap)
}

// newOwnTools compiles a chat's result_schema and returns the own tools'
// state and their specs: set_result's value is typed by the schema (its
// $defs and definitions are lifted to the top of set_result's schema, so
// that "#/$defs/..." references still resolve).
func newOwnTools(resultSchema []byte) (*ownTools, []ToolSpec, *protocol.Error) {
	vs, err := toolbox.CompileValueSchema("result_schema", resultSchema)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.InvalidArgs, "chat: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(resultSchema, &fields); err != nil {
		return nil, nil, protocol.Errorf(protocol.InvalidArgs, "chat: result_schema must be a JSON Schema object")
	}
	wrapper := map[string]any{"type": "object", "required": []string{"value"}, "additionalProperties": false}
	for _, k := range []string{"$defs", "definitions"} {
		if d, ok := fields[k]; ok {
			wrapper[k] = d
			delete(fields, k)
		}
	}
	delete(fields, "$schema") // only meaningful at a schema's root
	wrapper["properties"] = map[string]any{"value": fields}
	schema, _ := json.Marshal(wrapper)
	specs := []ToolSpec{
		{Name: ToolFinish, Description: "Ends this task now. Call it once the result is set with set_result.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
		{Name: ToolSetResult, Description: "Sets the result of this task to value, which must match the schema of value. Then call finish.",
			InputSchema: schema},
	}
	return &ownTools{schema: vs}, specs, nil
}

// ownsName reports whether name is one of the own tools.
func ownsName(name string) bool { return name == ToolSetResult || name == ToolFinish }

// call answers one call of an own tool: the text the model reads, or an
// invalid_args error whose details tell the model what to do better.
func (o *ownTools) call(name string, args []byte) ([]byte, *protocol.Error) {
	switch name {
	case ToolSetResult:
		if _, serr := protocol.ScanStrict(args, maxValueDepth); serr != nil {
			return nil, badOwnCall("set_result: the arguments are not usable JSON: " + serr.Error())
		}
		var a map[string]json.RawMessage
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, badOwnCall("set_result: the arguments must be an object {\"value\": ...}")
		}
		value, ok := a["value"]
		if !ok || len(a) != 1 {
			extra := make([]string, 0, len(a))
			for k := range a {
				if k != "value" {
					extra = append(extra, k)
				}
			}
			sort.Strings(extra)
			msg := "set_result takes one argument, value"
			if len(extra) > 0 {
				msg += "; not " + strings.Join(extra, ", ")
			}
			return nil, badOwnCall(msg)
		}
		if perr := o.schema.Check(value); perr != nil {
			return nil, perr
		}
		o.result = protocol.AppendCompact(nil, value)
		return protocol.AppendString(nil, "The result is set. Call finish to end the task."), nil
	case ToolFinish:
		if o.result == nil {
			return nil, badOwnCall("the result is not set: call set_result with a value that matches its schema, then finish")
		}
		o.finished = true
		return protocol.AppendString(nil, "Finished."), nil
	}
	return nil, protocol.Errorf(protocol.UnknownTool, "no tool named %q is available; continue without it", name)
}

// badOwnCall is an invalid_args error the model reads in full.
func badOwnCall(msg string) *protocol.Error {
	return &protocol.Error{Code: protocol.InvalidArgs, Message: msg, Details: protocol.AppendString(nil, msg)}
}
