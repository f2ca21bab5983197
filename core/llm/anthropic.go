package llm

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/protocol"
)

// anthropic speaks Anthropic's Messages API: POST {base_url}/v1/messages
// with x-api-key and anthropic-version; the system prompt is a top-level
// field, tool calls are tool_use blocks and their answers tool_result
// blocks in the next user message.
type anthropic struct{}

func (anthropic) headers(h http.Header, cfg *Config) []SecretHeader {
	h.Set("anthropic-version", cfg.AnthropicVersion)
	if cfg.APIKeyEnv == "" {
		return nil
	}
	return []SecretHeader{{Name: "x-api-key", Env: cfg.APIKeyEnv, Key: "llm.api_key_env"}}
}

// anBlock is a content block of a message being encoded.
type anBlock struct {
	kind      string // text, tool_use, tool_result
	text      string // text; tool_result's content
	id        string // tool_use's id; tool_result's tool_use_id
	name      string
	input     []byte // tool_use
	isError   bool
	toolUseID string
}

type anMessage struct {
	role   string
	blocks []anBlock
}

// messages turns the conversation into Anthropic's turns: leading
// system messages join the system prompt; later ones (rules' notices)
// become text in the user turn next to them; tool answers are
// tool_result blocks, first in their user turn; consecutive blocks of
// one role merge into one turn. When no tools are described (an
// Anthropic request with tool blocks must describe tools), earlier tool
// calls and answers are written as text.
func (anthropic) messages(r *modelRequest) (system string, out []anMessage) {
	system, msgs := leadingSystem(r)
	described := len(r.Tools) > 0
	add := func(role string, b anBlock) {
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].blocks = append(out[n-1].blocks, b)
			return
		}
		out = append(out, anMessage{role: role, blocks: []anBlock{b}})
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case roleUser, roleSystem:
			if m.Content != "" {
				add(roleUser, anBlock{kind: "text", text: m.Content})
			}
		case roleAssistant:
			if m.Content != "" {
				add(roleAssistant, anBlock{kind: "text", text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				if described {
					add(roleAssistant, anBlock{kind: "tool_use", id: tc.ID, name: tc.Name, input: objectArguments(tc.Arguments)})
				} else {
					add(roleAssistant, anBlock{kind: "text", text: "[called tool " + tc.Name + " with " + string(objectArguments(tc.Arguments)) + "]"})
				}
			}
		case roleTool:
			if described {
				add(roleUser, anBlock{kind: "tool_result", toolUseID: m.ToolCallID, text: m.Content, isError: m.IsError})
			} else {
				add(roleUser, anBlock{kind: "text", text: "[tool " + m.ToolName + " answered: " + m.Content + "]"})
			}
		}
	}
	return system, out
}

// encode writes model, max_tokens, system, messages (a turn of one text
// block as a plain string, as the documentation writes it), tools with
// input_schema, tool_choice none for the last call, then the options.
func (a anthropic) encode(r *modelRequest) (string, []byte, error) {
	system, msgs := a.messages(r)
	b := make([]byte, 0, requestSizeHint(r))
	b = append(b, `{"model":`...)
	b = protocol.AppendString(b, r.Model)
	maxTokens := r.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	if system != "" {
		b = append(b, `,"system":`...)
		b = protocol.AppendString(b, system)
	}
	b = append(b, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = protocol.AppendString(b, m.role)
		b = append(b, `,"content":`...)
		if len(m.blocks) == 1 && m.blocks[0].kind == "text" {
			b = protocol.AppendString(b, m.blocks[0].text)
		} else {
			b = append(b, '[')
			for j, bl := range m.blocks {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendBlock(b, &bl)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if len(r.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = protocol.AppendString(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = protocol.AppendString(b, t.Description)
			}
			b = append(b, `,"input_schema":`...)
			b = append(b, schemaOrEmpty(t.InputSchema)...)
			b = append(b, '}')
		}
		b = append(b, ']')
		switch {
		case r.ToolsOff || r.ToolChoice == ChoiceNone:
			b = append(b, `,"tool_choice":{"type":"none"}`...)
		case r.ToolChoice == ChoiceAuto:
			b = append(b, `,"tool_choice":{"type":"auto"}`...)
		case r.ToolChoice == ChoiceRequired:
			b = append(b, `,"tool_choice":{"type":"any"}`...)
		case r.ToolChoice == ChoiceTool:
			b = append(b, `,"tool_choice":{"type":"tool","name":`...)
			b = protocol.AppendString(b, r.ChoiceName)
			b = append(b, '}')
		}
	}
	if r.Temperature != nil {
		b = append(b, `,"temperature":`...)
		b = strconv.AppendFloat(b, *r.Temperature, 'g', -1, 64)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	return "/v1/messages", append(b, '}'), nil
}

func appendBlock(b []byte, bl *anBlock) []byte {
	b = append(b, `{"type":`...)
	b = protocol.AppendString(b, bl.kind)
	switch bl.kind {
	case "text":
		b = append(b, `,"text":`...)
		b = protocol.AppendString(b, bl.text)
	case "tool_use":
		b = append(b, `,"id":`...)
		b = protocol.AppendString(b, bl.id)
		b = append(b, `,"name":`...)
		b = protocol.AppendString(b, bl.name)
		b = append(b, `,"input":`...)
		b = append(b, bl.input...)
	case "tool_result":
		b = append(b, `,"tool_use_id":`...)
		b = protocol.AppendString(b, bl.toolUseID)
		if bl.text != "" {
			b = append(b, `,"content":`...)
			b = protocol.AppendString(b, bl.text)
		}
		if bl.isError {
			b = append(b, `,"is_error":true`...)
		}
	}
	return append(b, '}')
}

// anUsage is a usage object; message_delta's counts are cumulative and
// may leave input out, so only the counts given replace earlier ones.
type anUsage struct {
	input, output, cacheCreate, cacheRead int
	hasInput, hasOutput                   bool
}

func readAnUsage(r *jsonx.Reader) anUsage {
	var u anUsage
	if r.Null() {
		return u
	}
	r.Object(func(k []byte) {
		switch string(k) {
		case "input_tokens":
			u.input, u.hasInput = r.Int(), true
		case "output_tokens":
			u.output, u.hasOutput = r.Int(), true
		case "cache_creation_input_tokens":
			u.cacheCreate = r.Int()
		case "cache_read_input_tokens":
			u.cacheRead = r.Int()
		}
	})
	return u
}

func (u anUsage) merge(v *Usage) {
	if u.hasInput {
		v.PromptTokens = u.input + u.cacheCreate + u.cacheRead
	}
	if u.hasOutput {
		v.CompletionTokens = u.output
	}
	v.TotalTokens = v.PromptTokens + v.CompletionTokens
}

// anContentBlock reads a content block of an answer (or the start of a
// streamed one).
type anContentBlock struct {
	kind, text, id, name string
	input                []byte
}

func readAnBlock(r *jsonx.Reader) anContentBlock {
	var c anContentBlock
	r.Object(func(k []byte) {
		switch string(k) {
		case "type":
			c.kind = r.StrOrNull()
		case "text":
			c.text = r.StrOrNull()
		case "id":
			c.id = r.StrOrNull()
		case "name":
			c.name = r.StrOrNull()
		case "input":
			c.input = bytes.Clone(bytes.TrimSpace(r.Raw()))
		}
	})
	return c
}

func readAnError(r *jsonx.Reader) string {
	var kind, msg string
	r.Object(func(k []byte) {
		switch string(k) {
		case "type":
			kind = r.StrOrNull()
		case "message":
			msg = r.StrOrNull()
		}
	})
	return kind + ": " + msg
}

func (anthropic) decode(body []byte) (modelReply, error) {
	var (
		reply  modelReply
		text   strings.Builder
		kind   string
		stop   string
		usage  anUsage
		errMsg string
	)
	r := jsonx.NewReader(body)
	r.Object(func(k []byte) {
		switch string(k) {
		case "id":
			reply.ID = r.StrOrNull()
		case "model":
			reply.Model = r.StrOrNull()
		case "type":
			kind = r.StrOrNull()
		case "content":
			r.Array(func(int) {
				c := readAnBlock(r)
				switch c.kind {
				case "text":
					text.WriteString(c.text)
				case "tool_use":
					if len(reply.ToolCalls) >= maxCallsPerMessage {
						r.Stop(errTooManyCalls)
						return
					}
					reply.ToolCalls = append(reply.ToolCalls, toolCall{ID: callID(c.id, len(reply.ToolCalls)), Name: c.name, Arguments: string(c.input)})
				}
			})
		case "stop_reason":
			stop = r.StrOrNull()
		case "usage":
			usage = readAnUsage(r)
		case "error":
			if !r.Null() {
				errMsg = readAnError(r)
			}
		}
	})
	if err := r.End(); err != nil {
		if errors.Is(err, errTooManyCalls) {
			return modelReply{}, err
		}
		return modelReply{}, fmt.Errorf("the answer is not a message: %v", err)
	}
	if kind == "error" || errMsg != "" {
		return modelReply{}, fmt.Errorf("the server answered an error: %s", errMsg)
	}
	if kind != "" && kind != "message" { // the documentation's examples leave type out
		return modelReply{}, fmt.Errorf("the answer is not a message (type %q)", kind)
	}
	reply.Content = text.String()
	usage.merge(&reply.Usage)
	reply.FinishReason = finishReason(stop, len(reply.ToolCalls) > 0)
	return reply, nil
}

// anBlockState is a content block being streamed.
type anBlockState struct {
	call    *toolCall
	input   strings.Builder
	initial []byte // the input content_block_start gave, used when no delta follows
}

// anStream accumulates a streamed message.
type anStream struct {
	reply   modelReply
	text    strings.Builder
	blocks  map[int]*anBlockState
	stop    string
	started bool
	stopped bool
}

// event reads one event.
func (s *anStream) event(name string, data []byte, token func(string)) error {
	var (
		kind      = name
		index     int
		block     *anContentBlock
		deltaType string
		deltaText string
		stop      string
		usage     anUsage
		hasUsage  bool
		errMsg    string
	)
	r := jsonx.NewReader(data)
	r.Object(func(k []byte) {
		switch string(k) {
		case "type":
			kind = r.StrOrNull()
		case "index":
			index = r.Int()
		case "message":
			r.Object(func(k []byte) {
				if string(k) == "usage" {
					usage, hasUsage = readAnUsage(r), true
				}
			})
		case "content_block":
			c := readAnBlock(r)
			block = &c
		case "delta":
			r.Object(func(k []byte) {
				switch string(k) {
				case "type":
					deltaType = r.StrOrNull()
				case "text", "partial_json":
					deltaText = r.StrOrNull()
				case "stop_reason":
					stop = r.StrOrNull()
				}
			})
		case "usage":
			usage, hasUsage = readAnUsage(r), true
		case "error":
			errMsg = readAnError(r)
		}
	})
	if err := r.End(); err != nil {
		return streamErrorf("a streamed event is not JSON: %v", err)
	}
	if hasUsage {
		usage.merge(&s.reply.Usage)
	}
	switch kind {
	case "message_start":
		s.started = true
	case "content_block_start":
		if block == nil {
			return streamErrorf("content_block_start without a content_block")
		}
		if s.blocks == nil {
			s.blocks = map[int]*anBlockState{}
		}
		st := &anBlockState{}
		switch block.kind {
		case "tool_use":
			if len(s.blocks) >= maxCallsPerMessage {
				return &streamError{msg: errTooManyCalls.Error()}
			}
			st.call = &toolCall{ID: block.id, Name: block.name}
			st.initial = block.input
		case "text":
			if block.text != "" {
				s.text.WriteString(block.text)
				if token != nil {
					token(block.text)
				}
			}
		}
		s.blocks[index] = st
	case "content_block_delta":
		switch deltaType {
		case "text_delta":
			s.text.WriteString(deltaText)
			if token != nil && deltaText != "" {
				token(deltaText)
			}
		case "input_json_delta":
			st := s.blocks[index]
			if st == nil || st.call == nil {
				return streamErrorf("input_json_delta for block %d, which is not a tool_use block", index)
			}
			st.input.WriteString(deltaText)
		}
	case "message_delta":
		if stop != "" {
			s.stop = stop
		}
	case "message_stop":
		if !s.started {
			return streamErrorf("message_stop before message_start")
		}
		s.stopped = true
	case "error":
		return streamErrorf("the server sent an error in the stream: %s", errMsg)
	}
	return nil
}

func (s *anStream) done() modelReply {
	idx := make([]int, 0, len(s.blocks))
	for i := range s.blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		st := s.blocks[i]
		if st.call == nil {
			continue
		}
		st.call.ID = callID(st.call.ID, len(s.reply.ToolCalls))
		st.call.Arguments = st.input.String()
		if st.input.Len() == 0 {
			st.call.Arguments = string(st.initial)
		}
		s.reply.ToolCalls = append(s.reply.ToolCalls, *st.call)
	}
	s.reply.Content = s.text.String()
	s.reply.FinishReason = finishReason(s.stop, len(s.reply.ToolCalls) > 0)
	return s.reply
}

func (anthropic) decodeStream(events *sseReader, token func(string)) (modelReply, error) {
	var s anStream
	for {
		ev, err := events.next()
		if err != nil {
			return modelReply{}, err
		}
		if err := s.event(ev.name, ev.data, token); err != nil {
			return modelReply{}, err
		}
		if s.stopped {
			return s.done(), nil
		}
	}
}
