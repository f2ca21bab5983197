package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// anthropic speaks Anthropic's Messages API: POST {base_url}/v1/messages
// with x-api-key and anthropic-version; the system prompt is a top-level
// field, tool calls are tool_use blocks and their answers tool_result
// blocks in the next user message.
type anthropic struct{}

type anRequest struct {
	Model       string        `json:"model"`
	MaxTokens   int           `json:"max_tokens"`
	System      string        `json:"system,omitempty"`
	Messages    []anMessage   `json:"messages"`
	Tools       []anTool      `json:"tools,omitempty"`
	ToolChoice  *anToolChoice `json:"tool_choice,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	Stream      bool          `json:"stream,omitempty"`
}

type anMessage struct {
	Role string `json:"role"`
	// Content is a string for a message of one text block, as the
	// documentation writes it, and an array of blocks otherwise.
	Content any `json:"content"`
	blocks  []anBlock
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anToolChoice struct {
	Type string `json:"type"`
}

type anUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// merge takes the counts u gives into v (message_delta's are cumulative
// and may leave input out).
func (u *anUsage) merge(v *Usage) {
	if u == nil {
		return
	}
	if u.InputTokens != nil {
		v.PromptTokens = *u.InputTokens
		if u.CacheCreationInputTokens != nil {
			v.PromptTokens += *u.CacheCreationInputTokens
		}
		if u.CacheReadInputTokens != nil {
			v.PromptTokens += *u.CacheReadInputTokens
		}
	}
	if u.OutputTokens != nil {
		v.CompletionTokens = *u.OutputTokens
	}
	v.TotalTokens = v.PromptTokens + v.CompletionTokens
}

type anError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (anthropic) headers(h http.Header, cfg *Config) []SecretHeader {
	h.Set("anthropic-version", cfg.AnthropicVersion)
	if cfg.APIKeyEnv == "" {
		return nil
	}
	return []SecretHeader{{Name: "x-api-key", Env: cfg.APIKeyEnv, Key: "llm.api_key_env"}}
}

func (anthropic) encode(r *modelRequest) (string, []byte, error) {
	req := anRequest{Model: r.Model, MaxTokens: r.MaxTokens, System: r.System, Temperature: r.Temperature, Stream: r.Stream}
	if req.MaxTokens == 0 {
		req.MaxTokens = DefaultMaxTokens
	}
	msgs := r.Messages
	// Leading system messages join the system prompt; later ones (notices
	// from rules) become text in the user turn they precede or follow.
	for len(msgs) > 0 && msgs[0].Role == roleSystem {
		if req.System != "" {
			req.System += "\n\n"
		}
		req.System += msgs[0].Content
		msgs = msgs[1:]
	}
	described := len(r.Tools) > 0
	var out []anMessage
	add := func(role string, b anBlock) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].blocks = append(out[n-1].blocks, b)
			return
		}
		out = append(out, anMessage{Role: role, blocks: []anBlock{b}})
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case roleUser, roleSystem:
			if m.Content != "" {
				add(roleUser, anBlock{Type: "text", Text: m.Content})
			}
		case roleAssistant:
			if m.Content != "" {
				add(roleAssistant, anBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				if described {
					add(roleAssistant, anBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: objectArguments(tc.Arguments)})
				} else {
					// tool_use blocks need tools described; a chat without
					// tools sees the calls of an earlier one as text.
					add(roleAssistant, anBlock{Type: "text", Text: fmt.Sprintf("[called tool %s with %s]", tc.Name, objectArguments(tc.Arguments))})
				}
			}
		case roleTool:
			if described {
				add(roleUser, anBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError})
			} else {
				add(roleUser, anBlock{Type: "text", Text: fmt.Sprintf("[tool %s answered: %s]", m.ToolName, m.Content)})
			}
		}
	}
	for i := range out {
		b := out[i].blocks
		if len(b) == 1 && b[0].Type == "text" {
			out[i].Content = b[0].Text
		} else {
			out[i].Content = b
		}
	}
	req.Messages = out
	if req.Messages == nil {
		req.Messages = []anMessage{}
	}
	for _, t := range r.Tools {
		req.Tools = append(req.Tools, anTool{Name: t.Name, Description: t.Description, InputSchema: schemaOrEmpty(t.InputSchema)})
	}
	if described && r.ToolsOff {
		req.ToolChoice = &anToolChoice{Type: "none"}
	}
	body, err := json.Marshal(&req)
	return "/v1/messages", body, err
}

type anContentBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anResponse struct {
	Type       string           `json:"type"`
	Content    []anContentBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      *anUsage         `json:"usage"`
	Error      *anError         `json:"error"`
}

func (anthropic) decode(body []byte) (modelReply, error) {
	var resp anResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return modelReply{}, fmt.Errorf("the answer is not a message: %v", err)
	}
	if resp.Type == "error" || resp.Error != nil {
		msg := "unknown"
		if resp.Error != nil {
			msg = resp.Error.Type + ": " + resp.Error.Message
		}
		return modelReply{}, fmt.Errorf("the server answered an error: %s", msg)
	}
	if resp.Type != "" && resp.Type != "message" { // the documentation's examples leave type out
		return modelReply{}, fmt.Errorf("the answer is not a message (type %q)", resp.Type)
	}
	var reply modelReply
	var text strings.Builder
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if len(reply.ToolCalls) >= maxCallsPerMessage {
				return modelReply{}, fmt.Errorf("more than %d tool calls in one message", maxCallsPerMessage)
			}
			reply.ToolCalls = append(reply.ToolCalls, toolCall{ID: callID(b.ID, len(reply.ToolCalls)), Name: b.Name,
				Arguments: string(bytes.TrimSpace(b.Input))})
		}
	}
	reply.Content = text.String()
	resp.Usage.merge(&reply.Usage)
	reply.FinishReason = finishReason(resp.StopReason, len(reply.ToolCalls) > 0)
	return reply, nil
}

type anEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      *anResponse     `json:"message"`
	ContentBlock *anContentBlock `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *anUsage `json:"usage"`
	Error *anError `json:"error"`
}

// anBlockState is a content block being streamed.
type anBlockState struct {
	call    *toolCall
	input   strings.Builder
	initial json.RawMessage // the input content_block_start gave, used when no delta follows
}

func (anthropic) decodeStream(events *sseReader, token func(string)) (modelReply, error) {
	var (
		reply   modelReply
		text    strings.Builder
		blocks  = map[int]*anBlockState{}
		stop    string
		started bool
	)
	for {
		ev, err := events.next()
		if err != nil {
			return modelReply{}, err
		}
		var e anEvent
		if err := json.Unmarshal(ev.data, &e); err != nil {
			return modelReply{}, streamErrorf("a streamed event is not JSON: %v", err)
		}
		if e.Type == "" {
			e.Type = ev.name
		}
		switch e.Type {
		case "message_start":
			started = true
			if e.Message != nil {
				e.Message.Usage.merge(&reply.Usage)
			}
		case "content_block_start":
			if e.ContentBlock == nil {
				return modelReply{}, streamErrorf("content_block_start without a content_block")
			}
			st := &anBlockState{}
			switch e.ContentBlock.Type {
			case "tool_use":
				if len(blocks) >= maxCallsPerMessage {
					return modelReply{}, streamErrorf("more than %d tool calls in one message", maxCallsPerMessage)
				}
				st.call = &toolCall{ID: e.ContentBlock.ID, Name: e.ContentBlock.Name}
				st.initial = e.ContentBlock.Input
			case "text":
				if e.ContentBlock.Text != "" {
					text.WriteString(e.ContentBlock.Text)
					if token != nil {
						token(e.ContentBlock.Text)
					}
				}
			}
			blocks[e.Index] = st
		case "content_block_delta":
			if e.Delta == nil {
				continue
			}
			switch e.Delta.Type {
			case "text_delta":
				text.WriteString(e.Delta.Text)
				if token != nil && e.Delta.Text != "" {
					token(e.Delta.Text)
				}
			case "input_json_delta":
				st := blocks[e.Index]
				if st == nil || st.call == nil {
					return modelReply{}, streamErrorf("input_json_delta for block %d, which is not a tool_use block", e.Index)
				}
				st.input.WriteString(e.Delta.PartialJSON)
			}
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
			e.Usage.merge(&reply.Usage)
		case "message_stop":
			if !started {
				return modelReply{}, streamErrorf("message_stop before message_start")
			}
			idx := make([]int, 0, len(blocks))
			for i := range blocks {
				idx = append(idx, i)
			}
			sort.Ints(idx)
			for _, i := range idx {
				st := blocks[i]
				if st.call == nil {
					continue
				}
				st.call.ID = callID(st.call.ID, len(reply.ToolCalls))
				st.call.Arguments = st.input.String()
				if st.input.Len() == 0 {
					st.call.Arguments = string(bytes.TrimSpace(st.initial))
				}
				reply.ToolCalls = append(reply.ToolCalls, *st.call)
			}
			reply.Content = text.String()
			reply.FinishReason = finishReason(stop, len(reply.ToolCalls) > 0)
			return reply, nil
		case "error":
			msg := "unknown"
			if e.Error != nil {
				msg = e.Error.Type + ": " + e.Error.Message
			}
			return modelReply{}, streamErrorf("the server sent an error in the stream: %s", msg)
		}
	}
}
