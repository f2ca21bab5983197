package tools

import (
	"context"
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// modelTimeoutMS is the deadline of chat and evaluate as tools: their own
// requests are bounded by llm.timeout_ms and evaluator.timeout_ms; a chat
// makes several.
const modelTimeoutMS = 600000

func chat(m Models) toolbox.Builtin {
	return toolbox.Builtin{Name: "chat",
		Description: "Asks the configured model ([llm]); with allow_tools it may call the tools the call's policy allows, each through Clara's whole pipeline. " +
			"Result: {content, tool_calls, finish_reason, usage, turns}.",
		Schema: llm.ChatInputSchema, Capabilities: []string{toolbox.CapNetwork},
		MaxOutputBytes: 16 << 20, TimeoutMS: modelTimeoutMS, Timed: true,
		Run: m.Chat}
}

func evaluate(m Models) toolbox.Builtin {
	return toolbox.Builtin{Name: "evaluate",
		Description:  "POSTs its arguments to the evaluator ([evaluator] url) and answers with the JSON it returns.",
		Capabilities: []string{toolbox.CapNetwork}, MaxOutputBytes: 16 << 20, TimeoutMS: modelTimeoutMS, Timed: true,
		Run: m.Evaluate}
}

func chatReset(m Models) toolbox.Builtin {
	return toolbox.Builtin{Name: "chat_reset",
		Description: "Forgets the conversation a session's chats continue (the calling session unless one is named).",
		Schema:      `{"type":"object","properties":{"session":{"type":"string","minLength":1,"maxLength":256}},"additionalProperties":false}`,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			session := call.Session
			if s := gjson.GetBytes(call.Arguments, "session"); s.Exists() {
				session = s.Str
			}
			m.ForgetConversation(session)
			return append(protocol.AppendString([]byte(`{"session":`), session), `,"forgotten":true}`...), nil
		}}
}

func chatHistory(m Models) toolbox.Builtin {
	return toolbox.Builtin{Name: "chat_history",
		Description: "Returns the conversation a session's chats continue (the calling session unless one is named): " +
			"{session, turns, messages: [{role, content, tool_calls?, tool_call_id?, name?, is_error?}]}, without system messages, which are never kept.",
		Schema:         `{"type":"object","properties":{"session":{"type":"string","minLength":1,"maxLength":256}},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			session := call.Session
			if s := gjson.GetBytes(call.Arguments, "session"); s.Exists() {
				session = s.Str
			}
			return m.History(ctx, call.Session, session)
		}}
}

// askUserSchema bounds the question: a prompt is for a person to read; a
// schema makes it a form (MCP's elicitation: a flat object).
const askUserSchema = `{"type":"object","properties":{"prompt":{"type":"string","minLength":1,"maxLength":8192,` +
	`"description":"The question for the user."},` +
	`"schema":{"type":"object","description":"A form: the JSON Schema of a flat object (string, number, integer, boolean and enum fields); the answer is then that object."}},` +
	`"required":["prompt"],"additionalProperties":false}`

func askUser(in Input) toolbox.Builtin {
	return toolbox.Builtin{Name: "ask_user",
		Description: "Asks the user a question and waits for the answer. Result: {answer} with the user's text (or, with a schema, the form's object), or {declined: true}.",
		Schema:      askUserSchema, LLMVisible: true, TimeoutMS: modelTimeoutMS, Timed: true,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			var schema json.RawMessage
			if s := gjson.GetBytes(call.Arguments, "schema"); s.Exists() {
				schema = json.RawMessage(s.Raw)
			}
			return in.Ask(ctx, call.Session, gjson.GetBytes(call.Arguments, "prompt").Str, schema)
		}}
}
