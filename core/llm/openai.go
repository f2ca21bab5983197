package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/clara-lib/clara/core/protocol"
)

// openAI speaks the chat completions format of OpenAI, which vLLM,
// llama.cpp's server, Ollama and OpenRouter accept too:
// POST {base_url}/chat/completions.
type openAI struct{}

func (openAI) headers(h http.Header, cfg *Config) []SecretHeader {
	if IsOpenRouter(cfg.BaseURL) {
		if cfg.AppURL != "" {
			h.Set("HTTP-Referer", cfg.AppURL)
		}
		if cfg.AppTitle != "" {
			h.Set("X-Title", cfg.AppTitle)
		}
	}
	if cfg.APIKeyEnv == "" {
		return nil
	}
	return []SecretHeader{{Name: "Authorization", Env: cfg.APIKeyEnv, Prefix: "Bearer ", Key: "llm.api_key_env"}}
}

// encode writes the request: model, messages (the system prompt first;
// an assistant message that only calls tools has content null; tool
// calls carry their arguments as a JSON string; tool answers are role
// "tool" with tool_call_id), tools as functions, then the options.
func (openAI) encode(r *modelRequest) (string, []byte, error) {
	b := make([]byte, 0, requestSizeHint(r))
	b = append(b, `{"model":`...)
	b = protocol.AppendString(b, r.Model)
	b = append(b, `,"messages":[`...)
	n := 0
	open := func(role string) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"role":`...)
		b = protocol.AppendString(b, role)
		b = append(b, `,"content":`...)
	}
	if r.System != "" {
		open(roleSystem)
		b = protocol.AppendString(b, r.System)
		b = append(b, '}')
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		open(m.Role)
		if m.Role == roleAssistant && len(m.ToolCalls) > 0 && m.Content == "" {
			b = append(b, "null"...)
		} else {
			b = protocol.AppendString(b, m.Content)
		}
		if m.Role == roleAssistant && len(m.ToolCalls) > 0 {
			b = append(b, `,"tool_calls":[`...)
			for j, tc := range m.ToolCalls {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":`...)
				b = protocol.AppendString(b, tc.ID)
				b = append(b, `,"type":"function","function":{"name":`...)
				b = protocol.AppendString(b, tc.Name)
				b = append(b, `,"arguments":`...)
				b = protocol.AppendString(b, tc.Arguments)
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		if m.ToolCallID != "" {
			b = append(b, `,"tool_call_id":`...)
			b = protocol.AppendString(b, m.ToolCallID)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if !r.ToolsOff && len(r.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","function":{"name":`...)
			b = protocol.AppendString(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = protocol.AppendString(b, t.Description)
			}
			b = append(b, `,"parameters":`...)
			b = append(b, schemaOrEmpty(t.InputSchema)...)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
		switch r.ToolChoice {
		case ChoiceAuto, ChoiceNone, ChoiceRequired:
			b = append(b, `,"tool_choice":`...)
			b = protocol.AppendString(b, r.ToolChoice)
		case ChoiceTool:
			b = append(b, `,"tool_choice":{"type":"function","function":{"name":`...)
			b = protocol.AppendString(b, r.ChoiceName)
			b = append(b, "}}"...)
		}
	}
	b = appendOptions(b, r)
	if r.Stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return "/chat/completions", append(b, '}'), nil
}

// appendOptions writes temperature and max_tokens when given.
func appendOptions(b []byte, r *modelRequest) []byte {
	if r.Temperature != nil {
		b = append(b, `,"temperature":`...)
		b = strconv.AppendFloat(b, *r.Temperature, 'g', -1, 64)
	}
	if r.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
	}
	return b
}

// requestSizeHint guesses the size of an encoded request.
func requestSizeHint(r *modelRequest) int {
	n := 256 + len(r.System)
	for i := range r.Messages {
		n += 64 + len(r.Messages[i].Content)
		for _, tc := range r.Messages[i].ToolCalls {
			n += 96 + len(tc.Arguments)
		}
	}
	for _, t := range r.Tools {
		n += 64 + len(t.Description) + len(t.InputSchema)
	}
	return n
}

func (openAI) decode(body []byte) (modelReply, error) {
	var (
		reply   modelReply
		choices int
		errMsg  *string
	)
	r := newJSONReader(body)
	r.object(func(k []byte) {
		switch string(k) {
		case "id":
			reply.ID = r.strOrNull()
		case "model":
			reply.Model = r.strOrNull()
		case "choices":
			if r.null() {
				return
			}
			r.array(func(i int) {
				choices++
				if i > 0 {
					return
				}
				r.object(func(k []byte) {
					switch string(k) {
					case "message":
						r.object(func(k []byte) { oaMessageField(r, k, &reply) })
					case "finish_reason":
						reply.FinishReason = r.strOrNull()
					}
				})
			})
		case "usage":
			if !r.null() {
				reply.Usage = oaUsage(r)
			}
		case "error":
			if !r.null() {
				msg := oaError(r)
				errMsg = &msg
			}
		}
	})
	if err := r.end(); err != nil {
		if errors.Is(err, errTooManyCalls) {
			return modelReply{}, err
		}
		return modelReply{}, fmt.Errorf("the answer is not a chat completion: %v", err)
	}
	if errMsg != nil {
		return modelReply{}, fmt.Errorf("the server answered an error: %s", *errMsg)
	}
	if choices == 0 {
		return modelReply{}, fmt.Errorf("the answer has no choices")
	}
	for i := range reply.ToolCalls {
		reply.ToolCalls[i].ID = callID(reply.ToolCalls[i].ID, i)
	}
	reply.FinishReason = finishReason(reply.FinishReason, len(reply.ToolCalls) > 0)
	return reply, nil
}

// oaMessageField reads one member of a choice's message.
func oaMessageField(r *jsonReader, k []byte, reply *modelReply) {
	switch string(k) {
	case "content":
		reply.Content = oaContent(r)
	case "tool_calls":
		if r.null() {
			return
		}
		r.array(func(int) {
			if len(reply.ToolCalls) >= maxCallsPerMessage {
				r.stop(errTooManyCalls)
				return
			}
			var tc toolCall
			r.object(func(k []byte) {
				switch string(k) {
				case "id":
					tc.ID = r.strOrNull()
				case "function":
					r.object(func(k []byte) {
						switch string(k) {
						case "name":
							tc.Name = r.strOrNull()
						case "arguments":
							tc.Arguments = oaArguments(r)
						}
					})
				}
			})
			reply.ToolCalls = append(reply.ToolCalls, tc)
		})
	}
}

// oaContent reads a message's content: a string, null, or an array of
// text parts.
func oaContent(r *jsonReader) string {
	switch r.kind() {
	case '"':
		return r.str()
	case 'n':
		r.null()
		return ""
	case '[':
		var b strings.Builder
		r.array(func(int) {
			r.object(func(k []byte) {
				if string(k) == "text" {
					b.WriteString(r.strOrNull())
				}
			})
		})
		return b.String()
	}
	r.fail("content must be a string, an array of parts or null")
	return ""
}

// oaArguments reads function.arguments: a JSON string holding JSON text
// (the format), or a JSON value some servers send in its place.
func oaArguments(r *jsonReader) string {
	switch r.kind() {
	case '"':
		return r.str()
	case 'n':
		r.null()
		return ""
	}
	return string(r.raw())
}

// oaUsage reads prompt_tokens, completion_tokens and total_tokens.
func oaUsage(r *jsonReader) Usage {
	var u Usage
	r.object(func(k []byte) {
		switch string(k) {
		case "prompt_tokens":
			u.PromptTokens = r.int()
		case "completion_tokens":
			u.CompletionTokens = r.int()
		case "total_tokens":
			u.TotalTokens = r.int()
		}
	})
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// oaError reads an error object's message (or the error itself when it
// is a string).
func oaError(r *jsonReader) string {
	if r.kind() == '"' {
		return r.str()
	}
	msg := "unknown"
	r.object(func(k []byte) {
		if string(k) == "message" {
			msg = r.strOrNull()
		}
	})
	return msg
}

// callID is the id of a tool call, made up when a server gives none (the
// answer to the call needs one).
func callID(id string, i int) string {
	if id != "" {
		return id
	}
	return "call_" + strconv.Itoa(i)
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

// oaStream accumulates a streamed answer.
type oaStream struct {
	reply    modelReply
	content  strings.Builder
	calls    map[int]*toolCall
	args     map[int]*strings.Builder
	finished bool
	errMsg   *string
}

// chunk reads one streamed chunk, calling token for its text delta.
func (s *oaStream) chunk(data []byte, token func(string)) error {
	r := newJSONReader(data)
	r.object(func(k []byte) {
		switch string(k) {
		case "id":
			s.reply.ID = r.strOrNull()
		case "model":
			s.reply.Model = r.strOrNull()
		case "choices":
			if r.null() {
				return
			}
			r.array(func(int) { s.choice(r, token) })
		case "usage":
			if !r.null() {
				s.reply.Usage = oaUsage(r)
			}
		case "error":
			if !r.null() {
				msg := oaError(r)
				s.errMsg = &msg
			}
		}
	})
	if err := r.end(); err != nil {
		if errors.Is(err, errTooManyCalls) {
			return &streamError{msg: err.Error()}
		}
		return streamErrorf("a streamed chunk is not JSON: %v", err)
	}
	if s.errMsg != nil {
		return streamErrorf("the server sent an error in the stream: %s", *s.errMsg)
	}
	return nil
}

func (s *oaStream) choice(r *jsonReader, token func(string)) {
	index := -1
	r.object(func(k []byte) {
		switch string(k) {
		case "index":
			index = r.int()
		case "delta":
			if index > 0 { // "index" comes first in every server's chunks; a later choice is skipped
				return
			}
			r.object(func(k []byte) {
				switch string(k) {
				case "content":
					if t := oaContent(r); t != "" {
						s.content.WriteString(t)
						if token != nil {
							token(t)
						}
					}
				case "tool_calls":
					if !r.null() {
						r.array(func(int) { s.toolCallDelta(r) })
					}
				}
			})
		case "finish_reason":
			if f := r.strOrNull(); f != "" && index <= 0 {
				s.reply.FinishReason = f
				s.finished = true
			}
		}
	})
}

func (s *oaStream) toolCallDelta(r *jsonReader) {
	var (
		idx        int
		id, name   string
		args       string
		sawIndex   bool
		hasPayload bool
	)
	r.object(func(k []byte) {
		switch string(k) {
		case "index":
			idx, sawIndex = r.int(), true
		case "id":
			id = r.strOrNull()
		case "function":
			hasPayload = true
			r.object(func(k []byte) {
				switch string(k) {
				case "name":
					name = r.strOrNull()
				case "arguments":
					args = oaArguments(r)
				}
			})
		}
	})
	if r.err != nil || !sawIndex && !hasPayload && id == "" {
		return
	}
	if s.calls == nil {
		s.calls, s.args = map[int]*toolCall{}, map[int]*strings.Builder{}
	}
	tc := s.calls[idx]
	if tc == nil {
		if len(s.calls) >= maxCallsPerMessage {
			r.stop(errTooManyCalls)
			return
		}
		tc = &toolCall{}
		s.calls[idx] = tc
		s.args[idx] = &strings.Builder{}
	}
	if id != "" {
		tc.ID = id
	}
	if tc.Name == "" {
		tc.Name = name
	}
	s.args[idx].WriteString(args)
}

func (s *oaStream) done() modelReply {
	s.reply.Content = s.content.String()
	idx := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for n, i := range idx {
		tc := s.calls[i]
		tc.ID = callID(tc.ID, n)
		tc.Arguments = s.args[i].String()
		s.reply.ToolCalls = append(s.reply.ToolCalls, *tc)
	}
	s.reply.FinishReason = finishReason(s.reply.FinishReason, len(s.reply.ToolCalls) > 0)
	return s.reply
}

func (openAI) decodeStream(events *sseReader, token func(string)) (modelReply, error) {
	var s oaStream
	for {
		ev, err := events.next()
		if err != nil {
			if s.finished && errors.Is(err, io.EOF) {
				return s.done(), nil // a server that ends without [DONE] after the finish reason
			}
			return modelReply{}, err
		}
		if isDone(ev.data) {
			return s.done(), nil
		}
		if err := s.chunk(ev.data, token); err != nil {
			return modelReply{}, err
		}
	}
}

func isDone(data []byte) bool {
	return bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]"))
}
