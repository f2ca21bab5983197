package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/clara-lib/clara/core/protocol"
)

// Providers: the wire formats Chat speaks.
const (
	ProviderOpenAI    = "openai"    // POST {base_url}/chat/completions
	ProviderAnthropic = "anthropic" // POST {base_url}/v1/messages
)

// Defaults of Config fields left at zero.
const (
	DefaultModelTimeout     = 120 * time.Second
	DefaultAnthropicVersion = "2023-06-01"
	// DefaultMaxTokens is the max_tokens sent to Anthropic, which requires
	// one, when neither the chat nor the configuration gives it.
	DefaultMaxTokens = 4096
)

// Roles of the provider-neutral conversation.
const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// message is one message of a conversation, whatever the provider: a
// conversation kept in a session survives a change of provider.
type message struct {
	Role       string
	Content    string
	ToolCalls  []toolCall // assistant: the calls it asked for
	ToolCallID string     // tool: the call answered
	ToolName   string     // tool: the tool that answered
	IsError    bool       // tool: the answer is an error object
}

// toolCall is a call the model asked for. Arguments is the text the model
// gave, JSON or not.
type toolCall struct {
	ID        string
	Name      string
	Arguments string
}

// modelRequest is one call of the model.
type modelRequest struct {
	Model    string
	System   string
	Messages []message
	Tools    []ToolSpec
	// ToolsOff: Tools are described (the history holds tool calls) but
	// none may be called: the last call once max_tool_calls is spent.
	ToolsOff    bool
	Temperature *float64
	MaxTokens   int
	Stream      bool
}

// modelReply is the model's answer, decoded.
type modelReply struct {
	Content      string
	ToolCalls    []toolCall
	FinishReason string // normalised: stop, length, tool_calls, content_filter, or the provider's own
	Usage        Usage
}

// Usage counts tokens. For Anthropic, prompt tokens include the cache's
// (cache_creation_input_tokens and cache_read_input_tokens).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *Usage) add(v Usage) {
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	u.TotalTokens += v.TotalTokens
}

// provider encodes requests and decodes answers of one wire format.
type provider interface {
	// encode returns the path under base_url and the JSON body.
	encode(r *modelRequest) (path string, body []byte, err error)
	// headers adds the provider's headers; secrets go through SecretHeader.
	headers(h http.Header, cfg *Config) []SecretHeader
	decode(body []byte) (modelReply, error)
	// decodeStream reads server-sent events to the end of the answer,
	// calling token for each text delta.
	decodeStream(events *sseReader, token func(string)) (modelReply, error)
}

// Config is the [llm] section of the configuration.
type Config struct {
	Provider  string // ProviderOpenAI (the default) or ProviderAnthropic
	BaseURL   string // e.g. "https://api.openai.com/v1", "http://localhost:11434/v1", "https://api.anthropic.com"
	Model     string // the default model; a chat may name another
	APIKeyEnv string // the environment variable holding the API key; "" sends none
	// HeadersEnv adds headers whose values come from the environment.
	HeadersEnv map[string]string
	// Timeout bounds one model call, retries included: DefaultModelTimeout
	// when 0.
	Timeout time.Duration
	// ContextWindow is the model's context in tokens; token_usage is the
	// tokens of the last call over it (0 when unknown).
	ContextWindow    int
	MaxRetries       int   // 0: the Client's; NoRetries: none
	MaxResponseBytes int64 // 0: the Client's
	// MaxTokens is sent when a chat gives no max_tokens; Anthropic requires
	// one, DefaultMaxTokens when 0.
	MaxTokens        int
	AnthropicVersion string // DefaultAnthropicVersion when ""
	// MaxToolCalls is the chat's max_tool_calls when the arguments give
	// none (limits.max_tool_calls): 1 when 0.
	MaxToolCalls int
}

// check validates c and fills in its defaults.
func (c *Config) check() (provider, error) {
	if c.Provider == "" {
		c.Provider = ProviderOpenAI
	}
	var p provider
	switch c.Provider {
	case ProviderOpenAI:
		p = openAI{}
	case ProviderAnthropic:
		p = anthropic{}
	default:
		return nil, fmt.Errorf("llm.provider must be %q or %q, not %q", ProviderOpenAI, ProviderAnthropic, c.Provider)
	}
	if _, err := urlHost(c.BaseURL); err != nil || !(strings.HasPrefix(c.BaseURL, "http://") || strings.HasPrefix(c.BaseURL, "https://")) {
		return nil, fmt.Errorf("llm.base_url %q is not an http:// or https:// URL", c.BaseURL)
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Timeout < 0 || c.ContextWindow < 0 || c.MaxTokens < 0 || c.MaxToolCalls < 0 || c.MaxResponseBytes < 0 {
		return nil, errors.New("llm: timeout_ms, context_window, max_tokens, max_tool_calls and max_response_bytes must not be negative")
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultModelTimeout
	}
	if c.MaxTokens == 0 && c.Provider == ProviderAnthropic {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.AnthropicVersion == "" {
		c.AnthropicVersion = DefaultAnthropicVersion
	}
	if c.MaxToolCalls == 0 {
		c.MaxToolCalls = 1
	}
	return p, nil
}

// callModel sends one request to the model and decodes its answer,
// streaming when r.Stream (token gets each text delta).
func (ch *Chat) callModel(ctx context.Context, r *modelRequest, token func(string)) (modelReply, error) {
	path, body, err := ch.provider.encode(r)
	if err != nil {
		return modelReply{}, protocol.InternalError(err)
	}
	h := http.Header{}
	secrets := ch.provider.headers(h, &ch.cfg)
	for name, env := range ch.cfg.HeadersEnv {
		secrets = append(secrets, SecretHeader{Name: name, Env: env, Key: "llm.headers_env." + name})
	}
	req := &Request{Method: http.MethodPost, URL: ch.cfg.BaseURL + path, Header: h, Secrets: secrets, Body: body,
		Timeout: ch.cfg.Timeout, MaxRetries: ch.cfg.MaxRetries, MaxResponseBytes: ch.cfg.MaxResponseBytes}
	if !r.Stream {
		resp, err := ch.client.Do(ctx, req)
		if err != nil {
			return modelReply{}, modelError(err)
		}
		reply, err := ch.provider.decode(resp.Body)
		if err != nil {
			return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model: %s", err)
		}
		return reply, nil
	}
	h.Set("Accept", "text/event-stream")
	st, err := ch.client.Open(ctx, req)
	if err != nil {
		return modelReply{}, modelError(err)
	}
	defer st.Body.Close()
	if ct := st.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		// A server that does not stream answers the whole message.
		body, err := io.ReadAll(st.Body)
		if err != nil {
			return modelReply{}, modelError(st.Fail(err))
		}
		reply, err := ch.provider.decode([]byte(st.Redact(string(body))))
		if err != nil {
			return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model: %s", err)
		}
		if token != nil && reply.Content != "" {
			token(reply.Content)
		}
		return reply, nil
	}
	maxLine := int(ch.cfg.MaxResponseBytes)
	if maxLine == 0 {
		maxLine = DefaultMaxResponseBytes
	}
	reply, err := ch.provider.decodeStream(newSSEReader(st.Body, maxLine), token)
	if err != nil {
		var se *streamError
		if errors.As(err, &se) {
			return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model: %s", st.Redact(se.Error()))
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return modelReply{}, modelError(st.Fail(err))
	}
	return reply, nil
}

// modelError says that a failure was the model's.
func modelError(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return &protocol.Error{Code: pe.Code, Message: "model: " + pe.Message, Details: pe.Details, Cause: pe.Cause}
	}
	return err
}

// streamError is a stream that decoded but did not make sense: an error
// event, bad JSON in an event, an end before the last event.
type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

func streamErrorf(format string, args ...any) error {
	return &streamError{msg: fmt.Sprintf(format, args...)}
}

// objectArguments is a tool call's arguments as a JSON object, for the
// formats that send them as one (Anthropic's input): {} when they are not
// an object.
func objectArguments(args string) json.RawMessage {
	s := strings.TrimSpace(args)
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return json.RawMessage("{}")
}

// schemaOrEmpty is a tool's input schema, or the schema of any object.
func schemaOrEmpty(s json.RawMessage) json.RawMessage {
	if len(s) == 0 || string(s) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return s
}
