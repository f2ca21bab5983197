package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clara-lib/clara/core/protocol"
)

// Sampling (issue 30): a chat with no model of its own asks the model of
// the MCP client whose call it runs in, with MCP's sampling/createMessage
// (revision 2025-11-25, tools included; deprecated by 2026-07-28). The
// request and the answer are that method's params and result, written
// and read here like a provider's wire format; the MCP server sends them.

// SampleFunc sends one sampling/createMessage: params is the request's
// params (JSON), the result its result (JSON).
type SampleFunc func(ctx context.Context, params []byte) (result []byte, err error)

type samplerKey struct{}

// WithSampler gives a chat run in ctx the MCP client's model.
func WithSampler(ctx context.Context, f SampleFunc) context.Context {
	return context.WithValue(ctx, samplerKey{}, f)
}

func samplerOf(ctx context.Context) SampleFunc {
	f, _ := ctx.Value(samplerKey{}).(SampleFunc)
	return f
}

// NewSamplingChat returns a Chat that calls no model of its own: each run
// asks the model of the MCP client its context carries (WithSampler), and
// fails without one. cfg's model, provider and URL are not used.
func NewSamplingChat(client *Client, cfg Config, convs *Conversations) (*Chat, error) {
	if client == nil {
		return nil, errors.New("llm: NewSamplingChat needs a Client (its redactor)")
	}
	cfg.Provider, cfg.BaseURL, cfg.APIKeyEnv, cfg.HeadersEnv = "", "", "", nil
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Chat{client: client, cfg: cfg, convs: convs, sampling: true}, nil
}

// samplingEndpoint is where a sampling chat's requests go.
func (ch *Chat) samplingEndpoint(ctx context.Context) (*endpoint, error) {
	f := samplerOf(ctx)
	if f == nil {
		return nil, errors.New("chat: no model is configured (set llm.model, and llm.base_url for a server other than OpenAI's or Anthropic's), and the call came from no MCP client that offers its model (sampling)")
	}
	return &endpoint{cfg: ch.cfg, provider: samplingFormat{}, sample: f}, nil
}

// samplingFormat writes sampling/createMessage's params and reads its
// result. Its blocks are Anthropic's, spelt MCP's way.
type samplingFormat struct{ anthropic }

func (samplingFormat) encode(r *modelRequest) (string, []byte, error) {
	system, msgs := anthropic{}.messages(r)
	type block map[string]any
	type msg struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}
	params := map[string]any{}
	maxTokens := r.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	params["maxTokens"] = maxTokens
	if system != "" {
		params["systemPrompt"] = system
	}
	if r.Temperature != nil {
		params["temperature"] = *r.Temperature
	}
	if r.Model != "" {
		params["modelPreferences"] = map[string]any{"hints": []map[string]string{{"name": r.Model}}}
	}
	out := make([]msg, 0, len(msgs))
	for _, m := range msgs {
		mm := msg{Role: m.role}
		for _, b := range m.blocks {
			switch b.kind {
			case "text":
				mm.Content = append(mm.Content, block{"type": "text", "text": b.text})
			case "tool_use":
				mm.Content = append(mm.Content, block{"type": "tool_use", "id": b.id, "name": b.name, "input": json.RawMessage(b.input)})
			case "tool_result":
				rb := block{"type": "tool_result", "toolUseId": b.toolUseID, "content": []block{{"type": "text", "text": b.text}}}
				if b.isError {
					rb["isError"] = true
				}
				mm.Content = append(mm.Content, rb)
			}
		}
		out = append(out, mm)
	}
	params["messages"] = out
	if len(r.Tools) > 0 {
		tools := make([]map[string]any, 0, len(r.Tools))
		for _, t := range r.Tools {
			schema := t.InputSchema
			if len(schema) == 0 {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "inputSchema": schema})
		}
		params["tools"] = tools
		mode := "auto"
		if r.ToolsOff {
			mode = "none"
		}
		params["toolChoice"] = map[string]string{"mode": mode}
	}
	body, err := json.Marshal(params)
	return "", body, err
}

func (samplingFormat) decode(body []byte) (modelReply, error) {
	var res struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		StopReason string          `json:"stopReason"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return modelReply{}, fmt.Errorf("the MCP client's sampling result: %v", err)
	}
	var blocks []json.RawMessage
	if c := strings.TrimSpace(string(res.Content)); strings.HasPrefix(c, "[") {
		if err := json.Unmarshal(res.Content, &blocks); err != nil {
			return modelReply{}, fmt.Errorf("the MCP client's sampling result: %v", err)
		}
	} else if len(res.Content) > 0 {
		blocks = []json.RawMessage{res.Content}
	}
	var reply modelReply
	var text []string
	for _, raw := range blocks {
		var b struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return modelReply{}, fmt.Errorf("the MCP client's sampling result: %v", err)
		}
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			reply.ToolCalls = append(reply.ToolCalls, toolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	reply.Content = strings.Join(text, "\n")
	switch res.StopReason {
	case "endTurn", "stopSequence", "":
		reply.FinishReason = "stop"
	case "maxTokens":
		reply.FinishReason = "length"
	case "toolUse":
		reply.FinishReason = "tool_calls"
	default:
		reply.FinishReason = res.StopReason
	}
	if len(reply.ToolCalls) > 0 {
		reply.FinishReason = "tool_calls"
	}
	return reply, nil
}

// sampleExchange is one model call of a sampling chat.
func (ch *Chat) sampleExchange(ctx context.Context, r *modelRequest) (modelReply, error) {
	ep := r.endpoint
	_, body, err := ep.provider.encode(r)
	if err != nil {
		return modelReply{}, protocol.InternalError(err)
	}
	ctx, cancel := context.WithTimeout(ctx, ch.cfg.Timeout)
	defer cancel()
	out, err := ep.sample(ctx, body)
	if err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return modelReply{}, pe
		}
		return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model (the MCP client's, by sampling): %v", err)
	}
	reply, err := ep.provider.decode(out)
	if err != nil {
		return modelReply{}, protocol.Errorf(protocol.ToolFailed, "model: %s", err)
	}
	return reply, nil
}
