package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Limits of one chat's arguments and of one model message.
const (
	maxToolCallsCap    = 256 // the largest max_tool_calls a chat may ask for
	maxTurnsCap        = 10000
	maxCallsPerMessage = 128 // tool calls one model message may hold
)

// errTooManyCalls is a model message past maxCallsPerMessage.
var errTooManyCalls = fmt.Errorf("the model asked for more than %d tool calls in one message, more than Clara takes", maxCallsPerMessage)

// Turn events, fired around each model call.
const (
	EventTurnStart = "on_turn_start"
	EventTurnEnd   = "on_turn_end"
)

// Kinds of ProgressEvent.
const (
	ProgressToken      = "token"       // a text delta of a streamed answer
	ProgressToolCall   = "tool_call"   // the model asked for a tool call
	ProgressToolResult = "tool_result" // a tool call ended
	ProgressAnswer     = "answer"      // the chat's final answer
	ProgressError      = "error"       // the chat failed
	ProgressFinished   = "finished"    // the chat ended, either way: always its last event
)

// ToolSpec is a tool as the model sees it.
type ToolSpec struct {
	Name        string
	Description string
	InputSchema json.RawMessage // nil: any object
	// ReturnsContent: the tool's result is MCP content blocks
	// (toolbox.ReturnsContent): the model reads their text, and the
	// chat's result keeps the blocks for the host.
	ReturnsContent bool
}

// Turn is context.turn for on_turn_start and on_turn_end.
type Turn struct {
	// Number counts the model calls of the conversation, this one
	// included: it goes on across the chats of one session.
	Number int
	// TokenUsage is the last call's prompt plus completion tokens over
	// llm.context_window, from 0 to 1; 0 when the window is unknown.
	TokenUsage float64
	// Tokens are the tokens this chat has used so far.
	Tokens Usage
	// ToolCalls counts the tool calls this chat has made so far.
	ToolCalls int
}

// Context returns t as rules see it: {number, token_usage, tokens:
// {prompt, completion, total}, tool_calls}.
func (t Turn) Context() map[string]any {
	return map[string]any{
		"number":      t.Number,
		"token_usage": t.TokenUsage,
		"tokens": map[string]any{
			"prompt":     t.Tokens.PromptTokens,
			"completion": t.Tokens.CompletionTokens,
			"total":      t.Tokens.TotalTokens,
		},
		"tool_calls": t.ToolCalls,
	}
}

// ProgressEvent reports what a chat is doing while it runs. Every text
// and value in it has had the secrets the Client knows cut out.
type ProgressEvent struct {
	Kind       string          // one of the Progress* kinds
	Text       string          // token: the text delta; answer: the whole answer
	Tool       string          // tool_call, tool_result: the tool's name
	Arguments  json.RawMessage // tool_call: the arguments (a JSON string when the model's were not JSON)
	Status     string          // tool_result, finished: "success" or an error code
	DurationMS float64         // tool_result
	Result     json.RawMessage // tool_result: the tool's result, when it succeeded
	Message    string          // tool_result, error: what went wrong, for people
	// finished: how the chat ended.
	FinishReason string
	Turns        int
	Usage        Usage
}

// AppendJSON writes ev as one JSON object:
// {"event":"token","text":"..."}, {"event":"tool_call","tool":"...","arguments":{...}},
// {"event":"tool_result","tool":"...","status":"success","duration_ms":3.1,"result":{...}}
// (an error: "message" in place of "result"), {"event":"answer","text":"..."},
// {"event":"error","error":"tool_failed","message":"..."},
// {"event":"finished","status":"success","finish_reason":"stop","turns":2,"usage":{...}}.
func (ev ProgressEvent) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event":`...)
	dst = protocol.AppendString(dst, ev.Kind)
	switch ev.Kind {
	case ProgressToken, ProgressAnswer:
		dst = append(dst, `,"text":`...)
		dst = protocol.AppendString(dst, ev.Text)
	case ProgressToolCall:
		dst = append(dst, `,"tool":`...)
		dst = protocol.AppendString(dst, ev.Tool)
		dst = append(dst, `,"arguments":`...)
		if len(ev.Arguments) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, ev.Arguments...)
		}
	case ProgressToolResult:
		dst = append(dst, `,"tool":`...)
		dst = protocol.AppendString(dst, ev.Tool)
		dst = append(dst, `,"status":`...)
		dst = protocol.AppendString(dst, ev.Status)
		dst = append(dst, `,"duration_ms":`...)
		dst = strconv.AppendFloat(dst, ev.DurationMS, 'f', -1, 64)
		if ev.Result != nil {
			dst = append(dst, `,"result":`...)
			dst = append(dst, ev.Result...)
		}
		if ev.Message != "" {
			dst = append(dst, `,"message":`...)
			dst = protocol.AppendString(dst, ev.Message)
		}
	case ProgressError:
		dst = append(dst, `,"error":`...)
		dst = protocol.AppendString(dst, ev.Status)
		dst = append(dst, `,"message":`...)
		dst = protocol.AppendString(dst, ev.Message)
	case ProgressFinished:
		dst = append(dst, `,"status":`...)
		dst = protocol.AppendString(dst, ev.Status)
		if ev.FinishReason != "" {
			dst = append(dst, `,"finish_reason":`...)
			dst = protocol.AppendString(dst, ev.FinishReason)
		}
		dst = append(dst, `,"turns":`...)
		dst = strconv.AppendInt(dst, int64(ev.Turns), 10)
		dst = appendUsage(append(dst, `,"usage":`...), ev.Usage)
	}
	return append(dst, '}')
}

// appendUsage writes {"prompt_tokens","completion_tokens","total_tokens"}.
func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.PromptTokens), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CompletionTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.TotalTokens), 10)
	return append(b, '}')
}

// Host is what one chat reaches of the engine. The engine builds one per
// chat call, bound to the call's session and policy.
//
// Concurrency: Catalog and Turn are called from the chat's goroutine, one
// at a time. CallTool is called concurrently, once for each tool call of
// a model message, and must be safe for that. Progress is never called
// concurrently for one chat, but may be called from any goroutine; it
// must return promptly (it runs on the chat's path). No method may keep
// a slice it is given after it returns.
type Host interface {
	// Catalog lists the tools the model may be offered: allowed by the
	// call's policy and llm_visible, narrowed to names when names is not
	// nil, sorted by name.
	Catalog(names []string) []ToolSpec
	// CallTool runs one tool call through the engine's whole pipeline
	// (policy, rules, validation, limits, audit). args is a compact JSON
	// object. It returns the result as JSON, or the call's error.
	CallTool(ctx context.Context, name string, args []byte) ([]byte, *protocol.Error)
	// Turn fires event (EventTurnStart or EventTurnEnd) with context.turn
	// = t.Context() and returns the notices rules raised for the session,
	// drained from its queue: the model sees them before its next call.
	Turn(ctx context.Context, event string, t Turn) []string
	// Progress reports ev to the host's event handler, if any.
	Progress(ev ProgressEvent)
	// Context is text the model sees after the system prompt at each of
	// the chat's calls, as it is at that turn ("" for none): seed 001's
	// callbacks panel. It is never kept in the conversation.
	Context() string
}

// Guards is a Host that guards what goes into a chat and what comes out
// of it (the engine's on_chat_start and on_answer rules, issue 28).
// GuardPrompt sees the prompt before the model does and returns it,
// perhaps rewritten or redacted, or the error that ends the chat;
// GuardAnswer does the same with the final answer before anyone sees it.
type Guards interface {
	GuardPrompt(ctx context.Context, prompt string) (string, *protocol.Error)
	GuardAnswer(ctx context.Context, prompt, answer string) (string, *protocol.Error)
}

// ChatInputSchema is the input_schema of the chat tool.
const ChatInputSchema = `{"type":"object","properties":{` +
	`"prompt":{"type":"string","description":"The user's message."},` +
	`"messages":{"type":"array","description":"Messages to send before the prompt.","items":{"type":"object","properties":{"role":{"enum":["system","user","assistant"]},"content":{"type":"string"}},"required":["role","content"],"additionalProperties":false}},` +
	`"system":{"type":"string","description":"The system prompt."},` +
	`"model":{"type":"string","description":"The model; llm.model when absent."},` +
	`"allow_tools":{"type":"boolean","description":"Let the model call tools (false by default)."},` +
	`"tools":{"type":"array","items":{"type":"string"},"description":"The tools the model may call; all that policy allows when absent."},` +
	`"max_tool_calls":{"type":"integer","minimum":0,"maximum":256},` +
	`"max_turns":{"type":"integer","minimum":1,"maximum":10000,"description":"The model calls this chat may make, the last without tools; llm's limits.max_turns when absent."},` +
	`"temperature":{"type":"number","minimum":0,"maximum":2},` +
	`"max_tokens":{"type":"integer","minimum":1},` +
	`"stream":{"type":"boolean","description":"Call the model with server-sent events and report progress."},` +
	`"tool_choice":{"anyOf":[{"enum":["auto","none","required"]},{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}],` +
	`"description":"auto (the model decides), none (no tool call), required (a tool call first), or {\"name\": TOOL} (that tool first)."},` +
	`"result_schema":{"type":"object","description":"A JSON Schema: the model is given set_result and finish, and the chat's result carries the value it set."}},` +
	`"anyOf":[{"required":["prompt"]},{"required":["messages"]}],"additionalProperties":false}`

// Chat runs the chat tool's loop (SPEC §10.2, issue 11 §4) against one
// provider configuration. It is immutable and safe for concurrent use:
// the engine builds a new one when the configuration changes, sharing
// the Client and the Conversations.
type Chat struct {
	client *Client
	cfg    Config
	convs  *Conversations
	// sampling: the chat has no model of its own and asks the MCP
	// client's (NewSamplingChat).
	sampling bool
}

// NewChat checks cfg and returns a Chat calling the model through client.
// convs keeps the conversations of sessions; nil keeps none.
func NewChat(client *Client, cfg Config, convs *Conversations) (*Chat, error) {
	if client == nil {
		return nil, errors.New("llm: NewChat needs a Client")
	}
	cfg.HeadersEnv = cloneMap(cfg.HeadersEnv)
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Chat{client: client, cfg: cfg, convs: convs}, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// chatArgs are the chat tool's arguments.
type chatArgs struct {
	Prompt       *string      `json:"prompt"`
	Messages     []argMessage `json:"messages"`
	System       *string      `json:"system"`
	Model        string       `json:"model"`
	AllowTools   bool         `json:"allow_tools"`
	Tools        []string     `json:"tools"` // nil when absent; empty when [] was given
	MaxToolCalls *int         `json:"max_tool_calls"`
	MaxTurns     *int         `json:"max_turns"`
	Temperature  *float64     `json:"temperature"`
	MaxTokens    *int         `json:"max_tokens"`
	Stream       bool         `json:"stream"`
	ResultSchema []byte       `json:"result_schema"` // nil when absent
	ToolChoice   string       `json:"-"`             // "", ChoiceAuto, ChoiceNone, ChoiceRequired or ChoiceTool
	ChoiceName   string       `json:"-"`             // ChoiceTool: the tool
}

// Kinds of tool_choice.
const (
	ChoiceAuto     = "auto"
	ChoiceNone     = "none"
	ChoiceRequired = "required"
	ChoiceTool     = "tool" // {"name": TOOL}
)

type argMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func parseChatArgs(args []byte) (*chatArgs, *protocol.Error) {
	var a chatArgs
	r := newJSONReader(args)
	bad := ""
	if r.kind() != '{' {
		return nil, protocol.Errorf(protocol.InvalidArgs, "chat: the arguments must be a JSON object")
	}
	// is checks the next value's kind; a value of the wrong kind is left
	// for object to skip.
	is := func(kind byte, name, what string) bool {
		if r.kind() == kind {
			return true
		}
		if bad == "" {
			bad = name + " must be " + what
		}
		return false
	}
	str := func(name string) *string {
		if !is('"', name, "a string") {
			return nil
		}
		s := r.str()
		return &s
	}
	boolean := func(name string) bool {
		if k := r.kind(); k != 't' && k != 'f' {
			is('t', name, "true or false")
			return false
		}
		return r.boolean()
	}
	integer := func(name string) *int {
		if !is('0', name, "an integer") {
			return nil
		}
		f := r.float()
		if f != float64(int(f)) {
			bad = name + " must be an integer"
			return nil
		}
		n := int(f)
		return &n
	}
	seen := map[string]bool{}
	r.object(func(k []byte) {
		if seen[string(k)] {
			bad = fmt.Sprintf("%q is given twice", k)
		}
		seen[string(k)] = true
		switch string(k) {
		case "prompt":
			a.Prompt = str("prompt")
		case "system":
			a.System = str("system")
		case "model":
			if m := str("model"); m != nil {
				a.Model = *m
			}
		case "allow_tools":
			a.AllowTools = boolean("allow_tools")
		case "stream":
			a.Stream = boolean("stream")
		case "max_tool_calls":
			a.MaxToolCalls = integer("max_tool_calls")
		case "max_turns":
			a.MaxTurns = integer("max_turns")
		case "max_tokens":
			a.MaxTokens = integer("max_tokens")
		case "temperature":
			if is('0', "temperature", "a number") {
				t := r.float()
				a.Temperature = &t
			}
		case "result_schema":
			if is('{', "result_schema", "a JSON Schema object") {
				a.ResultSchema = r.raw()
			}
		case "tool_choice":
			const what = `"auto", "none", "required" or {"name": TOOL}`
			switch r.kind() {
			case '"':
				switch c := r.str(); c {
				case ChoiceAuto, ChoiceNone, ChoiceRequired:
					a.ToolChoice = c
				default:
					if bad == "" {
						bad = "tool_choice must be " + what + fmt.Sprintf(", not %q", c)
					}
				}
			case '{':
				r.object(func(k []byte) {
					if string(k) != "name" || r.kind() != '"' {
						if bad == "" {
							bad = "tool_choice must be " + what
						}
						return
					}
					a.ToolChoice, a.ChoiceName = ChoiceTool, r.str()
				})
				if a.ToolChoice != ChoiceTool && bad == "" {
					bad = "tool_choice must be " + what
				}
			default:
				is('"', "tool_choice", what)
			}
		case "tools":
			if !is('[', "tools", "an array of tool names") {
				return
			}
			a.Tools = []string{}
			r.array(func(i int) {
				if is('"', fmt.Sprintf("tools[%d]", i), "a string") {
					a.Tools = append(a.Tools, r.str())
				}
			})
		case "messages":
			if !is('[', "messages", "an array of {role, content}") {
				return
			}
			r.array(func(i int) {
				at := fmt.Sprintf("messages[%d]", i)
				if !is('{', at, "an object with role and content") {
					return
				}
				var m argMessage
				var hasContent bool
				r.object(func(k []byte) {
					switch string(k) {
					case "role":
						if s := str(at + ".role"); s != nil {
							m.Role = *s
						}
					case "content":
						if s := str(at + ".content"); s != nil {
							m.Content, hasContent = *s, true
						}
					default:
						if bad == "" {
							bad = fmt.Sprintf("%s: unknown field %q", at, k)
						}
					}
				})
				if bad == "" && (m.Role != roleSystem && m.Role != roleUser && m.Role != roleAssistant) {
					bad = fmt.Sprintf("%s.role must be system, user or assistant, not %q", at, m.Role)
				}
				if bad == "" && !hasContent {
					bad = at + ".content is missing"
				}
				a.Messages = append(a.Messages, m)
			})
		default:
			if bad == "" {
				bad = fmt.Sprintf("unknown field %q", k)
			}
		}
	})
	if err := r.end(); err != nil {
		return nil, protocol.Errorf(protocol.InvalidArgs, "chat: the arguments are not JSON: %v", err)
	}
	switch {
	case bad != "":
	case a.Prompt == nil && len(a.Messages) == 0:
		bad = "give a prompt or messages"
	case a.MaxToolCalls != nil && (*a.MaxToolCalls < 0 || *a.MaxToolCalls > maxToolCallsCap):
		bad = fmt.Sprintf("max_tool_calls must be between 0 and %d", maxToolCallsCap)
	case a.MaxTurns != nil && (*a.MaxTurns < 1 || *a.MaxTurns > maxTurnsCap):
		bad = fmt.Sprintf("max_turns must be between 1 and %d", maxTurnsCap)
	case a.Temperature != nil && (*a.Temperature < 0 || *a.Temperature > 2):
		bad = "temperature must be between 0 and 2"
	case a.MaxTokens != nil && *a.MaxTokens < 1:
		bad = "max_tokens must be 1 or more"
	}
	if bad != "" {
		return nil, protocol.Errorf(protocol.InvalidArgs, "chat: %s", bad)
	}
	return &a, nil
}

// chatResult is the chat tool's result.
type chatResult struct {
	Content      string          `json:"content"`
	Result       json.RawMessage `json:"result,omitempty"` // what set_result set, when the chat gave a result_schema
	ToolCalls    []toolRecord    `json:"tool_calls"`
	FinishReason string          `json:"finish_reason"`
	Usage        Usage           `json:"usage"`
	Turns        int             `json:"turns"`
}

// appendJSON writes the result:
// {"content","result"?,"tool_calls":[{"name","arguments","status","error"?,"duration_ms","content"?}],"finish_reason","usage","turns"}.
func (res *chatResult) appendJSON(b []byte) []byte {
	b = append(b, `{"content":`...)
	b = protocol.AppendString(b, res.Content)
	if res.Result != nil {
		b = append(b, `,"result":`...)
		b = append(b, res.Result...)
	}
	b = append(b, `,"tool_calls":[`...)
	for i := range res.ToolCalls {
		t := &res.ToolCalls[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = protocol.AppendString(b, t.Name)
		b = append(b, `,"arguments":`...)
		b = append(b, t.Arguments...)
		b = append(b, `,"status":`...)
		b = protocol.AppendString(b, t.Status)
		if t.Error != "" {
			b = append(b, `,"error":`...)
			b = protocol.AppendString(b, t.Error)
		}
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendFloat(b, t.DurationMS, 'f', -1, 64)
		if t.Content != nil {
			b = append(b, `,"content":`...)
			b = append(b, t.Content...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"finish_reason":`...)
	b = protocol.AppendString(b, res.FinishReason)
	b = appendUsage(append(b, `,"usage":`...), res.Usage)
	b = append(b, `,"turns":`...)
	b = strconv.AppendInt(b, int64(res.Turns), 10)
	return append(b, '}')
}

// toolRecord is one tool call in the result.
type toolRecord struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Status     string          `json:"status"`
	Error      string          `json:"error,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	// Content is what a tool that returns content blocks returned: the
	// model read their text, the host gets the blocks.
	Content json.RawMessage `json:"content,omitempty"`
}

// chatRun is the state of one Run.
type chatRun struct {
	ch      *Chat
	host    Host
	offered map[string]bool
	content map[string]bool // the offered tools that return content blocks
	own     *ownTools       // set_result and finish; nil without a result_schema
	req     modelRequest

	progressMu sync.Mutex

	// choice and choiceName are the chat's tool_choice: required and a
	// named tool hold for its first model call, then the model decides.
	choice, choiceName string
	system             string // the chat's system prompt, without the host's Context

	turns      int // model calls of the conversation so far
	chatTurns  int // model calls of this chat
	toolCalls  int // calls of the catalog's tools the model asked for: max_tool_calls bounds them
	lastTokens int
	used       Usage
	records    []toolRecord
	pending    []string // notices for the next call
	collected  []string // every notice this chat received, kept when it fails
	stats      *RunStats
	maxTurns   int    // model calls this chat may make (0: no bound but max_tool_calls)
	prompt     string // the prompt as the model saw it, for on_answer
}

// Run runs one chat: args are the chat tool's arguments, session ("" for
// none) names the conversation it continues. The result is the chat
// tool's JSON result; errors are *protocol.Error (invalid_args for bad
// arguments, the model call's error when the model fails).
func (ch *Chat) Run(ctx context.Context, host Host, session string, args []byte) ([]byte, error) {
	a, perr := parseChatArgs(args)
	if perr != nil {
		return nil, perr
	}
	r := &chatRun{ch: ch, host: host, stats: runStatsOf(ctx)}
	res, err := r.run(ctx, a, session)
	// The last events (seed 003's error and finished) say how it ended.
	if err != nil {
		ev := ProgressEvent{Kind: ProgressError, Status: string(protocol.ToolFailed), Message: err.Error()}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			ev.Status, ev.Message = string(pe.Code), pe.Message
		}
		ev.Message = ch.client.redactor.String(ev.Message)
		r.progress(ev)
		r.progress(ProgressEvent{Kind: ProgressFinished, Status: ev.Status, Turns: r.chatTurns, Usage: r.used})
		return nil, err
	}
	r.progress(ProgressEvent{Kind: ProgressFinished, Status: "success", FinishReason: res.FinishReason, Turns: res.Turns, Usage: res.Usage})
	return res.appendJSON(make([]byte, 0, 256+len(res.Content)+64*len(res.ToolCalls))), nil
}

// run is Run once the arguments are read.
func (r *chatRun) run(ctx context.Context, a *chatArgs, session string) (*chatResult, error) {
	ch, host := r.ch, r.host
	r.req.Model = ch.cfg.Model
	if a.Model != "" {
		r.req.Model = a.Model
	}
	var ep *endpoint
	var err error
	if ch.sampling {
		ep, err = ch.samplingEndpoint(ctx)
	} else {
		if r.req.Model == "" {
			return nil, protocol.Errorf(protocol.InvalidArgs, "chat: no model: set llm.model or give model")
		}
		ep, err = ch.endpointFor(r.req.Model)
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
	}
	r.req.endpoint = ep
	if a.Temperature != nil && *a.Temperature > 1 && ep.cfg.Provider == ProviderAnthropic {
		return nil, protocol.Errorf(protocol.InvalidArgs, "chat: temperature must be between 0 and 1 for Anthropic")
	}
	r.req.Temperature = a.Temperature
	r.req.MaxTokens = ep.cfg.MaxTokens
	if a.MaxTokens != nil {
		r.req.MaxTokens = *a.MaxTokens
	}
	r.req.Stream = a.Stream && ep.sample == nil // sampling answers whole
	maxCalls := ch.cfg.MaxToolCalls
	if a.MaxToolCalls != nil {
		maxCalls = *a.MaxToolCalls
	}
	r.maxTurns = ch.cfg.MaxTurns
	if a.MaxTurns != nil {
		r.maxTurns = *a.MaxTurns
	}

	var conv *conversation
	if session != "" && ch.convs != nil {
		var err error
		if conv, err = ch.convs.acquire(ctx, session); err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				return nil, pe // the conversations' store failed (issue 31)
			}
			if errors.Is(err, context.Canceled) {
				return nil, protocol.Errorf(protocol.ToolFailed, "chat: cancelled while waiting for the previous chat of session %q", session)
			}
			return nil, protocol.Errorf(protocol.Timeout, "chat: the previous chat of session %q did not end in time", session)
		}
		defer ch.convs.release(conv)
		r.req.Messages = append(r.req.Messages, conv.messages...)
		r.turns, r.lastTokens = conv.turns, conv.lastTokens
		r.pending = append(r.pending, conv.notices...)
		r.collected = append(r.collected, conv.notices...)
	}
	if a.System != nil {
		r.system = *a.System
	}
	given := len(r.req.Messages) // the messages this chat brings start here
	for _, m := range a.Messages {
		r.req.Messages = append(r.req.Messages, message{Role: m.Role, Content: m.Content})
	}
	if a.Prompt != nil {
		r.req.Messages = append(r.req.Messages, message{Role: roleUser, Content: *a.Prompt})
	}
	if g, ok := host.(Guards); ok {
		// The guard sees the user's last word: the prompt, or the last
		// user message given.
		for i := len(r.req.Messages) - 1; i >= given; i-- {
			if m := &r.req.Messages[i]; m.Role == roleUser {
				guarded, perr := g.GuardPrompt(ctx, m.Content)
				if perr != nil {
					return nil, perr
				}
				m.Content = guarded
				r.prompt = m.Content
				break
			}
		}
	}

	var ownSpecs []ToolSpec
	if a.ResultSchema != nil {
		own, specs, perr := newOwnTools(a.ResultSchema)
		if perr != nil {
			return nil, perr
		}
		r.own, ownSpecs = own, specs
	}
	toolsOn := a.AllowTools && maxCalls > 0 && (a.Tools == nil || len(a.Tools) > 0)
	if toolsOn {
		r.offer(host.Catalog(a.Tools), a.Tools)
	}
	r.req.Tools = append(r.req.Tools, ownSpecs...)
	toolsOn = len(r.req.Tools) > 0 && (maxCalls > 0 || r.own != nil)
	if perr := r.checkChoice(a, toolsOn); perr != nil {
		return nil, perr
	}

	result, err := r.loop(ctx, toolsOn, maxCalls)
	if conv != nil {
		if err == nil {
			// System messages are the chat's own (seed 003): its system
			// prompt, messages given with role system, rules' notices. Only
			// the user's, the model's and the tools' go on to the next chat.
			conv.messages = withoutSystem(r.req.Messages)
			conv.turns, conv.lastTokens = r.turns, r.lastTokens
			conv.notices = r.pending
		} else {
			conv.notices = r.collected
		}
	}
	if err != nil {
		return nil, err
	}
	return result, nil
}

// checkChoice checks the chat's tool_choice against the tools it offers:
// required and a named tool need tools the model may call (the named one
// among them); none cannot stand with a result_schema, which the model
// answers by calling set_result.
func (r *chatRun) checkChoice(a *chatArgs, toolsOn bool) *protocol.Error {
	r.choice, r.choiceName = a.ToolChoice, a.ChoiceName
	switch {
	case a.ToolChoice == ChoiceNone && r.own != nil:
		return protocol.Errorf(protocol.InvalidArgs, `chat: tool_choice "none" cannot stand with a result_schema: the model sets the result by calling set_result`)
	case (a.ToolChoice == ChoiceRequired || a.ToolChoice == ChoiceTool) && !toolsOn:
		return protocol.Errorf(protocol.InvalidArgs, "chat: tool_choice %s needs tools the model may call (allow_tools, tools, max_tool_calls, the call's policy)", choiceString(a))
	case a.ToolChoice == ChoiceTool && !r.offered[a.ChoiceName] && !(r.own != nil && ownsName(a.ChoiceName)):
		return protocol.Errorf(protocol.InvalidArgs, "chat: tool_choice names %q, which is not among the tools offered to the model (allow_tools, tools, the call's policy)", a.ChoiceName)
	}
	return nil
}

func choiceString(a *chatArgs) string {
	if a.ToolChoice == ChoiceTool {
		return fmt.Sprintf("{\"name\": %q}", a.ChoiceName)
	}
	return fmt.Sprintf("%q", a.ToolChoice)
}

// withoutSystem is msgs without its system messages, in a slice of its
// own.
func withoutSystem(msgs []message) []message {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		if m.Role != roleSystem {
			out = append(out, m)
		}
	}
	return out
}

// offer keeps the catalog's tools named in names (all when nil).
func (r *chatRun) offer(specs []ToolSpec, names []string) {
	var want map[string]bool
	if names != nil {
		want = make(map[string]bool, len(names))
		for _, n := range names {
			want[n] = true
		}
	}
	r.offered = map[string]bool{}
	for _, s := range specs {
		if (want == nil || want[s.Name]) && !r.offered[s.Name] && !(r.own != nil && ownsName(s.Name)) {
			if len(s.InputSchema) > 0 && !json.Valid(s.InputSchema) {
				s.InputSchema = nil // it goes into the request as it is: never let it break the request
			}
			r.offered[s.Name] = true
			if s.ReturnsContent {
				if r.content == nil {
					r.content = map[string]bool{}
				}
				r.content[s.Name] = true
			}
			r.req.Tools = append(r.req.Tools, s)
		}
	}
}

// loop calls the model until it answers without tool calls, or until
// max_tool_calls is spent and one last call without tools has answered.
func (r *chatRun) loop(ctx context.Context, toolsOn bool, maxCalls int) (*chatResult, error) {
	res := &chatResult{ToolCalls: []toolRecord{}}
	final := !toolsOn
	for {
		r.turns++
		r.chatTurns++
		res.Turns = r.chatTurns
		r.stats.turn()
		if r.maxTurns > 0 && res.Turns >= r.maxTurns {
			final = true // the last turn: the model answers without tools
		}
		r.notice(r.host.Turn(ctx, EventTurnStart, r.turn()))
		if len(r.pending) > 0 {
			r.req.Messages = append(r.req.Messages, message{Role: roleSystem, Content: strings.Join(r.pending, "\n")})
			r.pending = nil
		}
		r.req.ToolsOff = final
		r.req.System = r.system
		if extra := r.host.Context(); extra != "" {
			if r.req.System != "" {
				r.req.System += "\n\n"
			}
			r.req.System += extra
		}
		r.req.ToolChoice, r.req.ChoiceName = r.choice, r.choiceName
		if r.chatTurns > 1 && (r.choice == ChoiceRequired || r.choice == ChoiceTool) {
			r.req.ToolChoice, r.req.ChoiceName = ChoiceAuto, ""
		}
		var token func(string)
		if r.req.Stream {
			token = func(s string) { r.progress(ProgressEvent{Kind: ProgressToken, Text: s}) }
		}
		reply, err := r.ch.callModel(ctx, &r.req, token)
		if err != nil {
			return nil, err
		}
		r.used.add(reply.Usage)
		if n := reply.Usage.PromptTokens + reply.Usage.CompletionTokens; n > 0 {
			r.lastTokens = n
		}
		r.notice(r.host.Turn(ctx, EventTurnEnd, r.turn()))

		if final || len(reply.ToolCalls) == 0 {
			r.req.Messages = append(r.req.Messages, message{Role: roleAssistant, Content: reply.Content})
			if r.own != nil && r.own.result == nil && !final && !r.own.reminded {
				// The model answered without setting the result: tell it
				// once, while it can still call set_result.
				r.own.reminded = true
				r.req.Messages = append(r.req.Messages, message{Role: roleSystem, Content: reminder})
				continue
			}
			return r.end(ctx, res, reply, reply.FinishReason)
		}
		r.req.Messages = append(r.req.Messages, message{Role: roleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls})
		r.req.Messages = append(r.req.Messages, r.runTools(ctx, reply.ToolCalls, maxCalls)...)
		if r.own != nil && r.own.finished {
			return r.end(ctx, res, reply, FinishReasonFinish)
		}
		// The last call goes without tools once max_tool_calls is spent
		// (and, with a result_schema, the result is set), or once the
		// own calls are: every turn spends one or the other.
		spent := r.toolCalls >= maxCalls
		if r.own != nil {
			final = r.own.calls >= ownCallsCap || spent && r.own.result != nil
		} else {
			final = spent
		}
	}
}

// end fills in the chat's result after the model's last reply. A chat
// that gave a result_schema fails when the model never set a valid
// result: its caller asked for a typed value and must not get none.
func (r *chatRun) end(ctx context.Context, res *chatResult, reply modelReply, finishReason string) (*chatResult, error) {
	if g, ok := r.host.(Guards); ok {
		answer, perr := g.GuardAnswer(ctx, r.prompt, reply.Content)
		if perr != nil {
			return nil, perr
		}
		if answer != reply.Content {
			// What the conversation keeps is what was let out.
			if last := &r.req.Messages[len(r.req.Messages)-1]; last.Role == roleAssistant && last.Content == reply.Content {
				last.Content = answer
			}
			reply.Content = answer
		}
	}
	if r.own != nil {
		if r.own.result == nil {
			return nil, protocol.Errorf(protocol.ToolFailed, "chat: the model ended without setting a result that matches result_schema (set_result)")
		}
		res.Result = r.own.result
	}
	res.Content = reply.Content
	res.FinishReason = finishReason
	res.Usage = r.used
	res.ToolCalls = append(res.ToolCalls, r.records...)
	r.progress(ProgressEvent{Kind: ProgressAnswer, Text: reply.Content})
	return res, nil
}

func (r *chatRun) turn() Turn {
	t := Turn{Number: r.turns, Tokens: r.used, ToolCalls: len(r.records)}
	if w := r.ch.cfg.ContextWindow; w > 0 {
		t.TokenUsage = min(float64(r.lastTokens)/float64(w), 1)
	}
	return t
}

func (r *chatRun) notice(n []string) {
	for _, s := range n {
		if s = strings.Clone(strings.TrimSpace(s)); s != "" {
			r.pending = append(r.pending, s)
			r.collected = append(r.collected, s)
		}
	}
}

func (r *chatRun) progress(ev ProgressEvent) {
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	r.host.Progress(ev)
}

// runTools answers the tool calls of one model message: each runs on its
// own goroutine through Host.CallTool; the answers come back in the order
// the model asked. Calls past max_tool_calls, to tools not offered, or with
// arguments that are not a JSON object are answered without running.
func (r *chatRun) runTools(ctx context.Context, calls []toolCall, maxCalls int) []message {
	answers := make([]message, len(calls))
	records := make([]toolRecord, len(calls))
	var wg sync.WaitGroup
	for i := range calls {
		tc := &calls[i]
		rec := &records[i]
		rec.Name = tc.Name
		args, perr := parseArguments(tc.Arguments, r.ch.cfg.argumentLimits())
		if args != nil {
			rec.Arguments = args
		} else {
			rec.Arguments = protocol.AppendString(nil, tc.Arguments)
		}
		own := r.own != nil && ownsName(tc.Name)
		if own {
			r.own.calls++
		} else {
			r.toolCalls++
		}
		switch {
		case own && r.own.calls > ownCallsCap:
			perr = protocol.Errorf(protocol.Denied, "the chat's %d calls of set_result and finish are spent", ownCallsCap)
		case own:
		case r.toolCalls > maxCalls:
			perr = protocol.Errorf(protocol.Denied, "the chat's max_tool_calls is spent; answer without more tool calls")
			if r.own != nil {
				r.own.calls++ // a turn the model spends past its budget: bounded like the own calls
			}
		case !r.offered[tc.Name]:
			perr = protocol.Errorf(protocol.UnknownTool, "no tool named %q is available; continue without it", tc.Name)
		}
		r.progress(ProgressEvent{Kind: ProgressToolCall, Tool: tc.Name, Arguments: rec.Arguments})
		if perr != nil {
			answers[i] = r.answer(tc, rec, nil, perr, 0)
			continue
		}
		if own {
			// The loop's own tools: answered here, in the model's order.
			start := time.Now()
			result, perr := r.own.call(tc.Name, args)
			answers[i] = r.answer(tc, rec, result, perr, time.Since(start))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var (
				result []byte
				perr   *protocol.Error
			)
			func() {
				defer func() {
					if p := recover(); p != nil {
						perr = protocol.InternalError(fmt.Errorf("panic in the chat's call of tool %q: %v\n%s", tc.Name, p, debug.Stack()))
						r.ch.client.settings.Load().log.Logf(logging.Error, "llm: %v", perr.Cause)
					}
				}()
				result, perr = r.host.CallTool(r.ch.withToolCallID(ctx, tc.ID), tc.Name, args)
			}()
			answers[i] = r.answer(tc, rec, result, perr, time.Since(start))
		}()
	}
	wg.Wait()
	r.records = append(r.records, records...)
	return answers
}

// answer records a tool call's outcome and builds the message the model
// gets: the result, or seed 002's error object.
func (r *chatRun) answer(tc *toolCall, rec *toolRecord, result []byte, perr *protocol.Error, d time.Duration) message {
	rec.DurationMS = float64(d.Microseconds()) / 1000
	m := message{Role: roleTool, ToolCallID: tc.ID, ToolName: tc.Name}
	ev := ProgressEvent{Kind: ProgressToolResult, Tool: tc.Name, DurationMS: rec.DurationMS}
	red := r.ch.client.redactor
	if perr != nil {
		rec.Status = string(perr.Code)
		rec.Error = perr.Message
		m.Content = string(errorObject(perr))
		m.IsError = true
		ev.Message = red.String(perr.Message)
	} else {
		rec.Status = "success"
		if r.content[tc.Name] {
			m.Content = toolbox.ContentText(result)
			rec.Content = json.RawMessage(append([]byte(nil), result...))
		} else {
			m.Content = resultText(result)
		}
		// The host sees what the tool answered (seed 003's toolResult),
		// never a secret of the configuration's.
		ev.Result = eventValue(red.JSON(result))
	}
	ev.Status = rec.Status
	r.progress(ev)
	return m
}

// eventValue is a result as an event carries it: JSON as it is, anything
// else (never expected of the engine) as a JSON string.
func eventValue(result []byte) json.RawMessage {
	if len(result) == 0 {
		return json.RawMessage("null")
	}
	if !json.Valid(result) {
		return protocol.AppendString(nil, string(result))
	}
	return result
}

// parseArguments reads a tool call's arguments as a request's arguments
// are read: one JSON value in valid UTF-8, no key twice
// (protocol.ScanStrict), within limits.max_request_bytes and
// limits.max_depth (lim), an object, compacted (an empty string is {}).
// Anything else is invalid_args; args is nil when the text is not JSON
// within the limits.
func parseArguments(text string, lim protocol.Limits) (args []byte, perr *protocol.Error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return []byte("{}"), nil
	}
	if lim.MaxRequestBytes > 0 && len(t) > lim.MaxRequestBytes {
		return nil, &protocol.Error{Code: protocol.InvalidArgs,
			Message: fmt.Sprintf("the arguments are %d bytes, more than limits.max_request_bytes (%d)", len(t), lim.MaxRequestBytes),
			Details: protocol.AppendString(nil, fmt.Sprintf("the arguments are too large; give at most %d bytes", lim.MaxRequestBytes))}
	}
	depth := lim.MaxDepth
	if depth <= 0 {
		depth = maxJSONDepth
	}
	if _, serr := protocol.ScanStrict([]byte(t), depth); serr != nil {
		if serr.TooDeep {
			return nil, &protocol.Error{Code: protocol.InvalidArgs,
				Message: fmt.Sprintf("the arguments nest deeper than limits.max_depth (%d)", depth),
				Details: protocol.AppendString(nil, fmt.Sprintf("the arguments nest deeper than %d levels; give a flatter object", depth))}
		}
		return nil, &protocol.Error{Code: protocol.InvalidArgs, Message: "the arguments are not JSON: " + serr.Error(),
			Details: protocol.AppendString(nil, "the arguments are not JSON; give a JSON object")}
	}
	args = protocol.AppendCompact(nil, []byte(t))
	if args[0] != '{' {
		return args, &protocol.Error{Code: protocol.InvalidArgs, Message: "the arguments are not a JSON object",
			Details: protocol.AppendString(nil, "the arguments must be a JSON object")}
	}
	return args, nil
}

// errorObject is what the model gets for a failed tool call (seed 002):
// the code, and for invalid_args, denied, unknown_tool and rate_limited
// what it needs to do better. A tool's own failure text (tool_failed,
// internal) never reaches the model.
func errorObject(perr *protocol.Error) []byte {
	b := []byte(`{"error":`)
	b = protocol.AppendString(b, string(perr.Code))
	switch perr.Code {
	case protocol.InvalidArgs, protocol.RateLimited:
		b = append(b, `,"details":`...)
		if len(perr.Details) > 0 && json.Valid(perr.Details) {
			b = append(b, protocol.AppendCompact(nil, perr.Details)...)
		} else {
			b = protocol.AppendString(b, perr.Message)
		}
	case protocol.Denied, protocol.UnknownTool:
		b = append(b, `,"message":`...)
		b = protocol.AppendString(b, perr.Message)
	case protocol.BudgetExhausted, protocol.Blocked:
		// {"error":"budget_exhausted","tool":...,"budget":...,"limit":...}
		// and {"error":"blocked","rule":...,"reason":...}: the details.
		if len(perr.Details) > 2 && perr.Details[0] == '{' && json.Valid(perr.Details) {
			b = append(b, ',')
			b = append(b, perr.Details[1:len(perr.Details)-1]...)
		}
	}
	return append(b, '}')
}

// resultText is a tool's JSON result as the model reads it: a JSON string
// unquoted, anything else as JSON text.
func resultText(result []byte) string {
	if len(result) > 0 && result[0] == '"' {
		var s string
		if json.Unmarshal(result, &s) == nil {
			return s
		}
	}
	if len(result) == 0 {
		return "null"
	}
	return string(result)
}
