package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
)

// openAI speaks the chat completions format of OpenAI, which vLLM,
// llama.cpp's server, Ollama and OpenRouter accept too:
// POST {base_url}/chat/completions.
type openAI struct{}

type oaRequest struct {
	Model         string           `json:"model"`
	Messages      []oaMessage      `json:"messages"`
	Tools         []oaTool         `json:"tools,omitempty"`
	Temperature   *float64         `json:"temperature,omitempty"`
	MaxTokens     int              `json:"max_tokens,omitempty"`
	Stream        bool             `json:"stream,omitempty"`
	StreamOptions *oaStreamOptions `json:"stream_options,omitempty"`
}

type oaStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type oaMessage struct {
	Role string `json:"role"`
	// Content is null for an assistant message that only calls tools.
	Content    *string      `json:"content"`
	ToolCalls  []oaToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type oaToolCall struct {
	ID       string     `json:"id"`
	Type     string     `json:"type"`
	Function oaFunction `json:"function"`
}

type oaFunction struct {
	Name string `json:"name"`
	// Arguments is a JSON string holding JSON text; some servers answer an
	// object instead, which decoding accepts.
	Arguments json.RawMessage `json:"arguments"`
}

type oaTool struct {
	Type     string        `json:"type"`
	Function oaFunctionDef `json:"function"`
}

type oaFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type oaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *oaUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	t := u.TotalTokens
	if t == 0 {
		t = u.PromptTokens + u.CompletionTokens
	}
	return Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: t}
}

type oaError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

func (openAI) headers(h http.Header, cfg *Config) []SecretHeader {
	if cfg.APIKeyEnv == "" {
		return nil
	}
	return []SecretHeader{{Name: "Authorization", Env: cfg.APIKeyEnv, Prefix: "Bearer ", Key: "llm.api_key_env"}}
}

func (openAI) encode(r *modelRequest) (string, []byte, error) {
	req := oaRequest{Model: r.Model, Temperature: r.Temperature, MaxTokens: r.MaxTokens, Stream: r.Stream}
	if r.Stream {
		req.StreamOptions = &oaStreamOptions{IncludeUsage: true}
	}
	if r.System != "" {
		req.Messages = append(req.Messages, oaMessage{Role: roleSystem, Content: &r.System})
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		om := oaMessage{Role: m.Role, Content: &m.Content, ToolCallID: m.ToolCallID}
		if m.Role == roleAssistant && len(m.ToolCalls) > 0 {
			if m.Content == "" {
				om.Content = nil
			}
			for _, tc := range m.ToolCalls {
				args, _ := json.Marshal(tc.Arguments)
				om.ToolCalls = append(om.ToolCalls, oaToolCall{ID: tc.ID, Type: "function",
					Function: oaFunction{Name: tc.Name, Arguments: args}})
			}
		}
		req.Messages = append(req.Messages, om)
	}
	if !r.ToolsOff {
		for _, t := range r.Tools {
			req.Tools = append(req.Tools, oaTool{Type: "function",
				Function: oaFunctionDef{Name: t.Name, Description: t.Description, Parameters: schemaOrEmpty(t.InputSchema)}})
		}
	}
	body, err := json.Marshal(&req)
	return "/chat/completions", body, err
}

type oaResponse struct {
	Choices []struct {
		Message struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls []oaToolCall    `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
	Error *oaError `json:"error"`
}

func (openAI) decode(body []byte) (modelReply, error) {
	var resp oaResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return modelReply{}, fmt.Errorf("the answer is not a chat completion: %v", err)
	}
	if resp.Error != nil {
		return modelReply{}, fmt.Errorf("the server answered an error: %s", resp.Error.Message)
	}
	if len(resp.Choices) == 0 {
		return modelReply{}, fmt.Errorf("the answer has no choices")
	}
	ch := &resp.Choices[0]
	reply := modelReply{Content: oaContent(ch.Message.Content), FinishReason: ch.FinishReason, Usage: resp.Usage.usage()}
	for i, tc := range ch.Message.ToolCalls {
		reply.ToolCalls = append(reply.ToolCalls, toolCall{ID: callID(tc.ID, i), Name: tc.Function.Name,
			Arguments: oaArguments(tc.Function.Arguments)})
	}
	reply.FinishReason = finishReason(reply.FinishReason, len(reply.ToolCalls) > 0)
	return reply, nil
}

// oaContent reads a message's content: a string, null, or an array of
// text parts.
func oaContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// oaArguments reads function.arguments: a JSON string (the format), or a
// JSON value some servers send in its place.
func oaArguments(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// callID is the id of a tool call, made up when a server gives none (the
// answer to the call needs one).
func callID(id string, i int) string {
	if id != "" {
		return id
	}
	return fmt.Sprintf("call_%d", i)
}

// finishReason normalises a stop reason to OpenAI's words.
func finishReason(r string, calls bool) string {
	switch r {
	case "end_turn", "stop_sequence", "stop":
		return "stop"
	case "tool_use", "tool_calls", "function_call":
		return "tool_calls"
	case "max_tokens", "length":
		return "length"
	case "refusal", "content_filter":
		return "content_filter"
	case "":
		if calls {
			return "tool_calls"
		}
		return "stop"
	}
	return r
}

type oaChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage `json:"usage"`
	Error *oaError `json:"error"`
}

func (openAI) decodeStream(events *sseReader, token func(string)) (modelReply, error) {
	var (
		reply    modelReply
		content  strings.Builder
		calls    = map[int]*toolCall{}
		args     = map[int]*strings.Builder{}
		finished bool
	)
	done := func() modelReply {
		reply.Content = content.String()
		idx := make([]int, 0, len(calls))
		for i := range calls {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for n, i := range idx {
			tc := calls[i]
			tc.ID = callID(tc.ID, n)
			tc.Arguments = args[i].String()
			reply.ToolCalls = append(reply.ToolCalls, *tc)
		}
		reply.FinishReason = finishReason(reply.FinishReason, len(reply.ToolCalls) > 0)
		return reply
	}
	for {
		ev, err := events.next()
		if err == io.EOF && finished {
			return done(), nil // a server that ends without [DONE] after the finish reason
		}
		if err != nil {
			return modelReply{}, err
		}
		if string(bytes.TrimSpace(ev.data)) == "[DONE]" {
			return done(), nil
		}
		var chunk oaChunk
		if err := json.Unmarshal(ev.data, &chunk); err != nil {
			return modelReply{}, streamErrorf("a streamed chunk is not JSON: %v", err)
		}
		if chunk.Error != nil {
			return modelReply{}, streamErrorf("the server sent an error in the stream: %s", chunk.Error.Message)
		}
		if chunk.Usage != nil {
			reply.Usage = chunk.Usage.usage()
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != nil && *c.Delta.Content != "" {
				content.WriteString(*c.Delta.Content)
				if token != nil {
					token(*c.Delta.Content)
				}
			}
			for _, d := range c.Delta.ToolCalls {
				tc := calls[d.Index]
				if tc == nil {
					if len(calls) >= maxCallsPerMessage {
						return modelReply{}, streamErrorf("more than %d tool calls in one message", maxCallsPerMessage)
					}
					tc = &toolCall{}
					calls[d.Index] = tc
					args[d.Index] = &strings.Builder{}
				}
				if d.ID != "" {
					tc.ID = d.ID
				}
				if tc.Name == "" {
					tc.Name = d.Function.Name
				}
				args[d.Index].WriteString(oaArguments(d.Function.Arguments))
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				reply.FinishReason = *c.FinishReason
				finished = true
			}
		}
	}
}
