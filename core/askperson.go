package core

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
)

// Asking the person behind a call (issue 30): ask_user, and the approvals
// of rules (issue 28), put a Question to whoever can answer for the call.
// A call that came from an MCP client able to ask its user (it declared
// elicitation) asks that client, which shows the question in Claude
// Desktop or the IDE; any other call asks the host's input handler.

// Question is what a call asks the person behind it.
type Question struct {
	// Message is what the person reads.
	Message string
	// Schema, when set, makes the question a form: a JSON Schema of a
	// flat object (strings, numbers, integers, booleans, enums), as MCP's
	// elicitation allows. Without it the answer is free text.
	Schema json.RawMessage
}

// Reply is the person's answer.
type Reply struct {
	Action string // ReplyAccept, ReplyDecline or ReplyCancel
	// Content, on accept: the form's object, or the text as a JSON string
	// for a question without a schema.
	Content json.RawMessage
}

// What the person did.
const (
	ReplyAccept  = mcp.ActionAccept
	ReplyDecline = mcp.ActionDecline // said no
	ReplyCancel  = mcp.ActionCancel  // dismissed the question without an answer
)

// PersonAsker asks the person behind a call. The Engine is one
// (AskPerson); approvals ask through it so that an MCP client's user sees
// them as ask_user's questions are seen.
type PersonAsker interface {
	AskPerson(ctx context.Context, session string, q Question) (Reply, error)
}

var _ PersonAsker = (*Engine)(nil)

// freeTextForm is the form a question without a schema becomes for an MCP
// client (elicitation always asks for an object): one text field.
var freeTextForm = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","title":"Answer"}},"required":["answer"]}`)

// AskPerson asks q of the person behind the call ctx belongs to: the MCP
// client that made it, when that client can ask its user; otherwise the
// host's input handler (SetInputHandler). It blocks until the answer, or
// until ctx ends.
func (e *Engine) AskPerson(ctx context.Context, session string, q Question) (Reply, error) {
	elicit := mcp.ElicitorOf(ctx)
	if elicit == nil {
		return e.askInputHandler(ctx, session, q)
	}
	if err := ctx.Err(); err != nil {
		return Reply{}, err
	}
	schema := q.Schema
	if len(schema) == 0 {
		schema = freeTextForm
	}
	action, content, err := elicit(ctx, q.Message, schema)
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, ctx.Err()
		}
		var perr *protocol.Error
		if errors.As(err, &perr) {
			return Reply{}, perr
		}
		return Reply{}, protocol.Errorf(protocol.ToolFailed, "ask_user: %v", err)
	}
	r := Reply{Action: action}
	if action == ReplyAccept {
		r.Content = content
		if len(q.Schema) == 0 {
			r.Content = protocol.AppendString(nil, gjson.GetBytes(content, "answer").String())
		}
	}
	return r, nil
}
