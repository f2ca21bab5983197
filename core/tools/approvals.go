package tools

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Approvals is what approvals_list and approval_decide reach: the calls
// waiting for a person's approval (issue 28).
type Approvals interface {
	// List returns the approvals waiting for a decision, as a JSON array.
	List() ([]byte, error)
	// Decide decides one: approve (with arguments, edited), or reject
	// with a reason. An error when it waits for no decision, or when the
	// edited arguments do not match the tool's schema (it then waits on).
	Decide(id int64, approve bool, reason string, arguments json.RawMessage) error
}

// approvalsList lists the calls waiting for approval. Administrative: a
// model never sees what waits for a person, nor decides it.
func approvalsList(a Approvals) toolbox.Builtin {
	return toolbox.Builtin{Name: "approvals_list", Admin: true,
		Description:    "Lists the tool calls waiting for a person's approval: id, tool, session, the arguments (secrets cut out), the reason, the rule that asked, how long each has waited.",
		Schema:         `{"type":"object","properties":{},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(context.Context, toolbox.Call) ([]byte, error) {
			list, err := a.List()
			if err != nil {
				return nil, err
			}
			return append(append([]byte(`{"approvals":`), list...), '}'), nil
		}}
}

// approvalDecide decides a call waiting for approval, from any thread.
func approvalDecide(a Approvals) toolbox.Builtin {
	return toolbox.Builtin{Name: "approval_decide", Admin: true,
		Description: "Decides a tool call waiting for approval: approve it (with arguments, run with those instead, checked against the tool's schema) or reject it with a reason the caller (or the model) is told.",
		Schema: `{"type":"object","properties":{"id":{"type":"integer","minimum":1},"decision":{"enum":["approve","reject"]},` +
			`"reason":{"type":"string"},"arguments":{"type":"object"}},"required":["id","decision"],"additionalProperties":false}`,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			var d struct {
				ID        int64           `json:"id"`
				Decision  string          `json:"decision"`
				Reason    string          `json:"reason"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := json.Unmarshal(call.Arguments, &d); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "approval_decide: %v", err)
			}
			if d.Decision == "reject" && d.Arguments != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "approval_decide: arguments go with approve")
			}
			if err := a.Decide(d.ID, d.Decision == "approve", d.Reason, d.Arguments); err != nil {
				return nil, err
			}
			out := strconv.AppendInt([]byte(`{"id":`), d.ID, 10)
			out = append(out, `,"decision":`...)
			out = protocol.AppendString(out, d.Decision)
			return append(out, '}'), nil
		}}
}
