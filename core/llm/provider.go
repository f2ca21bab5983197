package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/secrets"
)

// Providers: the wire formats Chat speaks.
const (
	ProviderOpenAI    = "openai"    // POST {base_url}/chat/completions
	ProviderAnthropic = "anthropic" // POST {base_url}/v1/messages
	ProviderGemini    = "gemini"    // POST {base_url}/v1beta/models/{model}:generateContent
)

// The providers' own endpoints and the variables their keys are
// conventionally in: a chat goes there when llm.base_url is empty and the
// provider is known (set, or read from the model's name).
const (
	OpenAIBaseURL      = "https://api.openai.com/v1"
	AnthropicBaseURL   = "https://api.anthropic.com"
	GeminiBaseURL      = "https://generativelanguage.googleapis.com"
	OpenAIAPIKeyEnv    = "OPENAI_API_KEY"
	AnthropicAPIKeyEnv = "ANTHROPIC_API_KEY"
	// GeminiAPIKeyEnv is the variable seed 003's SDK reads Google's key
	// from.
	GeminiAPIKeyEnv = "GOOGLE_GENERATIVE_AI_API_KEY"
	// OpenRouterAPIKeyEnv is read when llm.base_url is OpenRouter's and
	// llm.api_key_env is empty.
	OpenRouterAPIKeyEnv = "OPENROUTER_API_KEY"
)

// IsOpenRouter reports whether baseURL is OpenRouter's (openrouter.ai or
// a name under it), which takes two headers of its own (HTTP-Referer and
// X-Title, llm.app_url and llm.app_title).
func IsOpenRouter(baseURL string) bool {
	host, err := urlHost(baseURL)
	if err != nil {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "openrouter.ai" || strings.HasSuffix(host, ".openrouter.ai")
}

// ProviderOfModel reads the provider from a model's name, as seed 003's
// SDK does: "claude-*" is Anthropic's, "gemini-*" Google's, "gpt-*" and
// "o1", "o3-mini", ... OpenAI's; any other name is "" (a server speaking
// OpenAI's format at llm.base_url: vLLM, llama.cpp, Ollama, OpenRouter).
func ProviderOfModel(model string) string {
	switch {
	case strings.HasPrefix(model, "claude-"):
		return ProviderAnthropic
	case strings.HasPrefix(model, "gemini-"), strings.HasPrefix(model, "models/gemini-"):
		return ProviderGemini
	case strings.HasPrefix(model, "gpt-"), len(model) >= 2 && model[0] == 'o' && model[1] >= '0' && model[1] <= '9':
		return ProviderOpenAI
	}
	return ""
}

// DefaultBaseURL is where a chat of model goes when llm.base_url is
// empty: the provider's own endpoint, provider being llm.provider or, when
// empty, read from the model's name; "" when neither says.
func DefaultBaseURL(provider, model string) string {
	if provider == "" {
		provider = ProviderOfModel(model)
	}
	switch provider {
	case ProviderOpenAI:
		return OpenAIBaseURL
	case ProviderAnthropic:
		return AnthropicBaseURL
	case ProviderGemini:
		return GeminiBaseURL
	}
	return ""
}

// endpoint is where and how one chat calls its model: the Config with
// the provider, base URL, key variable and max_tokens resolved for the
// chat's model.
type endpoint struct {
	cfg      Config
	provider provider
	sample   SampleFunc // set: the MCP client's model, by sampling (no HTTP)
}

// endpointFor resolves the provider (llm.provider, else the model's
// name, else OpenAI's format) and the base URL (llm.base_url, else the
// provider's own, with its conventional key variable when api_key_env is
// empty) of a chat of model.
func (ch *Chat) endpointFor(model string) (*endpoint, error) {
	ep := &endpoint{cfg: ch.cfg}
	known := ep.cfg.Provider
	if known == "" {
		known = ProviderOfModel(model)
	}
	ep.cfg.Provider = known
	if ep.cfg.Provider == "" {
		ep.cfg.Provider = ProviderOpenAI
	}
	if ep.cfg.BaseURL == "" {
		ep.cfg.BaseURL = DefaultBaseURL(known, model)
		switch known {
		case ProviderOpenAI:
			ep.cfg.APIKeyEnv = orDefault(ep.cfg.APIKeyEnv, OpenAIAPIKeyEnv)
		case ProviderAnthropic:
			ep.cfg.APIKeyEnv = orDefault(ep.cfg.APIKeyEnv, AnthropicAPIKeyEnv)
		case ProviderGemini:
			ep.cfg.APIKeyEnv = orDefault(ep.cfg.APIKeyEnv, GeminiAPIKeyEnv)
		default:
			return nil, fmt.Errorf("chat: the provider of model %q is not known from its name and llm.base_url is empty: set llm.base_url (and llm.provider)", model)
		}
	} else if IsOpenRouter(ep.cfg.BaseURL) {
		ep.cfg.APIKeyEnv = orDefault(ep.cfg.APIKeyEnv, OpenRouterAPIKeyEnv)
	}
	switch ep.cfg.Provider {
	case ProviderAnthropic:
		ep.provider = anthropic{}
		if ep.cfg.MaxTokens == 0 {
			ep.cfg.MaxTokens = DefaultMaxTokens
		}
	case ProviderGemini:
		ep.provider = gemini{}
	default:
		ep.provider = openAI{}
	}
	return ep, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

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
	// Signature is Gemini's thoughtSignature of the call, which the model
	// wants back with it; madeID: the server gave no id, Clara made ID up
	// (and does not send it back).
	Signature string
	madeID    bool
}

// modelRequest is one call of the model.
type modelRequest struct {
	Model    string
	System   string
	Messages []message
	Tools    []ToolSpec
	// endpoint is where the request goes (resolved once per chat).
	endpoint *endpoint
	// ToolsOff: Tools are described (the history holds tool calls) but
	// none may be called: the last call once max_tool_calls is spent.
	ToolsOff bool
	// ToolChoice is the chat's tool_choice for this call ("" sends none:
	// the provider's default, auto); ChoiceName names the tool of
	// ChoiceTool. Sent only with tools the model may call.
	ToolChoice  string
	ChoiceName  string
	Temperature *float64
	MaxTokens   int
	Stream      bool
}

// modelReply is the model's answer, decoded.
type modelReply struct {
	ID, Model    string // the response's id and the model that answered, when the provider says
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
	// Provider is ProviderOpenAI, ProviderAnthropic or ProviderGemini; "" reads it from
	// each chat's model (ProviderOfModel), OpenAI's format when unknown.
	Provider string
	// BaseURL is e.g. "http://localhost:11434/v1", "https://api.anthropic.com";
	// "" is the provider's own endpoint (OpenAIBaseURL, AnthropicBaseURL)
	// when the provider is known.
	BaseURL   string
	Model     string // the default model; a chat may name another
	APIKeyEnv string // the environment variable holding the API key; "" sends none
	// HeadersEnv adds headers whose values come from the environment.
	HeadersEnv map[string]string
	// AppURL and AppTitle are sent to OpenRouter (IsOpenRouter) as
	// HTTP-Referer and X-Title, which it shows in its rankings; "" sends
	// none. Other servers get neither.
	AppURL   string
	AppTitle string
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
	// MaxTurns is the chat's max_turns when the arguments give none
	// (limits.max_turns): 0 for no bound but MaxToolCalls.
	MaxTurns int
	// MaxArgumentBytes and MaxDepth bound the arguments of the model's tool
	// calls as limits.max_request_bytes and limits.max_depth bound a
	// request's: none and jsonx.MaxDepth when 0.
	MaxArgumentBytes int
	MaxDepth         int
}

// argumentLimits are the limits of the model's tool calls' arguments.
func (c *Config) argumentLimits() protocol.Limits {
	return protocol.Limits{MaxRequestBytes: c.MaxArgumentBytes, MaxDepth: c.MaxDepth}
}

// check validates c and fills in its defaults. The provider and the base
// URL may stay empty: each chat resolves them from its model
// (Chat.endpointFor).
func (c *Config) check() error {
	switch c.Provider {
	case "", ProviderOpenAI, ProviderAnthropic, ProviderGemini:
	default:
		return fmt.Errorf("llm.provider must be %q, %q, %q or empty (read from the model's name), not %q", ProviderOpenAI, ProviderAnthropic, ProviderGemini, c.Provider)
	}
	if c.BaseURL != "" {
		if _, err := urlHost(c.BaseURL); err != nil || !(strings.HasPrefix(c.BaseURL, "http://") || strings.HasPrefix(c.BaseURL, "https://")) {
			return fmt.Errorf("llm.base_url %q is not an http:// or https:// URL", c.BaseURL)
		}
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	for _, v := range []struct{ key, value string }{{"llm.app_url", c.AppURL}, {"llm.app_title", c.AppTitle}} {
		if strings.ContainsFunc(v.value, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return fmt.Errorf("%s holds a control character, which an HTTP header cannot carry", v.key)
		}
	}
	if c.Timeout < 0 || c.ContextWindow < 0 || c.MaxTokens < 0 || c.MaxToolCalls < 0 || c.MaxResponseBytes < 0 || c.MaxArgumentBytes < 0 || c.MaxDepth < 0 {
		return errors.New("llm: timeout_ms, context_window, max_tokens, max_tool_calls, max_response_bytes and the argument limits must not be negative")
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultModelTimeout
	}
	if c.AnthropicVersion == "" {
		c.AnthropicVersion = DefaultAnthropicVersion
	}
	if c.MaxToolCalls == 0 {
		c.MaxToolCalls = 1
	}
	return nil
}

// callModel sends one request to the model and decodes its answer,
// streaming when r.Stream (token gets each text delta). Every secret the
// Client knows is cut out of what comes back, after decoding (a key the
// server wrote with escapes decodes into plain text): the reply's texts,
// the tokens (a secret split across deltas included) and the error.
func (ch *Chat) callModel(ctx context.Context, r *modelRequest, token func(string)) (reply modelReply, err error) {
	ctx, done := ch.observeModel(ctx, r)
	defer func() { done(&reply, err) }()
	red := ch.client.redactor
	var tokens *secrets.Stream
	if token != nil {
		tokens = red.NewStream(token)
		token = tokens.Write
	}
	reply, err = ch.exchange(ctx, r, token)
	if tokens != nil {
		tokens.Flush()
	}
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return modelReply{}, &protocol.Error{Code: pe.Code, Message: red.String(pe.Message), Details: red.JSON(pe.Details), Cause: pe.Cause}
		}
		return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model: %s", red.String(err.Error()))
	}
	reply.Content = red.String(reply.Content)
	reply.FinishReason = red.String(reply.FinishReason)
	for i := range reply.ToolCalls {
		tc := &reply.ToolCalls[i]
		tc.ID, tc.Name = red.String(tc.ID), red.String(tc.Name)
		tc.Arguments = red.JSONString(tc.Arguments)
	}
	return reply, nil
}

// exchange is one model call: the request, the answer decoded.
func (ch *Chat) exchange(ctx context.Context, r *modelRequest, token func(string)) (modelReply, error) {
	ep := r.endpoint
	if ep.sample != nil {
		return ch.sampleExchange(ctx, r)
	}
	path, body, err := ep.provider.encode(r)
	if err != nil {
		return modelReply{}, protocol.InternalError(err)
	}
	h := http.Header{}
	secretHeaders := ep.provider.headers(h, &ep.cfg)
	for name, env := range ch.cfg.HeadersEnv {
		secretHeaders = append(secretHeaders, SecretHeader{Name: name, Env: env, Key: "llm.headers_env." + name})
	}
	req := &Request{Method: http.MethodPost, URL: ep.cfg.BaseURL + path, Header: h, Secrets: secretHeaders, Body: body,
		Timeout: ch.cfg.Timeout, MaxRetries: ch.cfg.MaxRetries, MaxResponseBytes: ch.cfg.MaxResponseBytes}
	if !r.Stream {
		resp, err := ch.client.Do(ctx, req)
		if err != nil {
			return modelReply{}, modelError(err)
		}
		reply, err := ep.provider.decode(resp.Body)
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
		reply, err := ep.provider.decode(body)
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
		maxLine = int(ch.client.settings.Load().maxBytes)
	}
	reply, err := ep.provider.decodeStream(newSSEReader(st.Body, maxLine), token)
	if err != nil {
		var se *streamError
		if errors.As(err, &se) {
			return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model: %s", se.Error())
		}
		if errors.Is(err, bufio.ErrTooLong) {
			// The line did not fit the reader's buffer: the server's doing,
			// not a dropped connection.
			return modelReply{}, protocol.Errorf(protocol.ToolFailed,
				"model: a line of the event stream is longer than %d bytes (llm.max_response_bytes)", maxLine)
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

// leadingSystem is the system prompt of the wire formats that carry it
// apart from the turns (Anthropic, Gemini): r.System and the system
// messages that open the conversation, joined; the rest of the messages
// follow.
func leadingSystem(r *modelRequest) (system string, rest []message) {
	system, rest = r.System, r.Messages
	for len(rest) > 0 && rest[0].Role == roleSystem {
		if system != "" {
			system += "\n\n"
		}
		system += rest[0].Content
		rest = rest[1:]
	}
	return system, rest
}
