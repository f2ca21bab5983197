package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
)

// ElicitFunc asks the person at the MCP client that made a call, through
// that client (elicitation/create in form mode under 2025-11-25; an
// input_required result under 2026-07-28, see mrtr.go). schema is the
// form: a JSON Schema of a flat object of strings, numbers, booleans and
// enums, as MCP allows. It returns the person's action (ActionAccept,
// ActionDecline or ActionCancel) and, on accept, the form's object. It
// returns early, with an error, when ctx ends or the client fails.
type ElicitFunc func(ctx context.Context, message string, schema json.RawMessage) (action string, content json.RawMessage, err error)

// What a person did with a question (MCP's elicitation actions).
const (
	ActionAccept  = "accept"
	ActionDecline = "decline"
	ActionCancel  = "cancel"
)

type elicitKey struct{}

// ElicitorOf is the way to the person at the MCP client that made the
// call ctx belongs to: nil when the call came from no MCP client, or from
// one that did not declare the elicitation capability (form mode).
func ElicitorOf(ctx context.Context) ElicitFunc {
	f, _ := ctx.Value(elicitKey{}).(ElicitFunc)
	return f
}

// canElicitForm reports whether the client declared elicitation in form
// mode (a declaration naming neither form nor url means form).
func canElicitForm(caps *sdk.ClientCapabilities) bool {
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil
}

// withElicitor gives a tools/call of a client that can answer a form the
// way to ask it, by elicitation/create on its session.
func withElicitor(ctx context.Context, ss *sdk.ServerSession, caps *sdk.ClientCapabilities, log *logging.Logger) context.Context {
	if ss == nil || !canElicitForm(caps) {
		return ctx
	}
	ask := func(ctx context.Context, message string, schema json.RawMessage) (action string, content json.RawMessage, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(log, "an elicitation", r)
				err = errors.New("internal error")
			}
		}()
		var requested any
		if len(schema) > 0 {
			requested = schema
		}
		res, err := ss.Elicit(ctx, &sdk.ElicitParams{Mode: "form", Message: message, RequestedSchema: requested})
		if err != nil {
			return "", nil, fmt.Errorf("the MCP client did not answer the question: %w", err)
		}
		return elicitAnswer(res)
	}
	return context.WithValue(ctx, elicitKey{}, ElicitFunc(ask))
}

// elicitAnswer reads a client's answer to a form.
func elicitAnswer(res *sdk.ElicitResult) (string, json.RawMessage, error) {
	if res == nil {
		return "", nil, errors.New("the MCP client answered the question with nothing")
	}
	switch res.Action {
	case ActionAccept:
		b, err := json.Marshal(res.Content)
		if err != nil {
			return "", nil, fmt.Errorf("the MCP client's answer: %v", err)
		}
		if res.Content == nil {
			b = []byte("{}")
		}
		return ActionAccept, b, nil
	case ActionDecline, ActionCancel:
		return res.Action, nil, nil
	}
	return "", nil, fmt.Errorf("the MCP client answered the question with the action %q (accept, decline or cancel)", res.Action)
}
