package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// view is what the checks read of a model request, whatever its format.
type view struct {
	model       string
	stream      bool
	tools       []string // nil when the request offers none
	toolChoice  string
	system      string
	lastUser    string
	messages    int
	assistants  int
	maxTokens   int
	temperature *float64
	toolResults map[string]toolResultView // answering the last assistant message
}

type toolResultView struct {
	content string
	isError bool
}

func decodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the body holds more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the body is not a JSON object")
	}
	return m, nil
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Top-level keys each API accepts; both refuse others.
var openAIKeys = setOf("model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "max_completion_tokens",
	"stream", "stream_options", "top_p", "n", "stop", "seed", "user", "response_format", "parallel_tool_calls",
	"frequency_penalty", "presence_penalty", "logprobs", "top_logprobs", "logit_bias", "metadata", "store",
	"reasoning_effort", "modalities", "prediction", "service_tier", "audio", "web_search_options")

var anthropicKeys = setOf("model", "max_tokens", "messages", "system", "tools", "tool_choice", "temperature", "top_p",
	"top_k", "stop_sequences", "stream", "metadata", "thinking", "service_tier", "container", "mcp_servers")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkOpenAI checks a chat completions request as the API would, and
// returns what the expectations read.
func checkOpenAI(h http.Header, body []byte) (*view, error) {
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("Content-Type is %q, not application/json", ct)
	}
	req, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	for k := range req {
		if !openAIKeys[k] {
			return nil, fmt.Errorf("unrecognized request argument supplied: %s", k)
		}
	}
	v := &view{toolResults: map[string]toolResultView{}}
	if v.model, err = str(req, "model", true); err != nil {
		return nil, err
	}
	if err := commonOptions(req, v, 2); err != nil {
		return nil, err
	}
	if _, ok := req["stream_options"]; ok && !v.stream {
		return nil, fmt.Errorf("stream_options is only allowed when stream is true")
	}
	if tools, ok := req["tools"]; ok {
		list, ok := tools.([]any)
		if !ok {
			return nil, fmt.Errorf("tools must be an array")
		}
		v.tools = []string{}
		for i, t := range list {
			tm, _ := t.(map[string]any)
			if tm == nil || tm["type"] != "function" {
				return nil, fmt.Errorf("tools[%d].type must be \"function\"", i)
			}
			fn, _ := tm["function"].(map[string]any)
			if fn == nil {
				return nil, fmt.Errorf("tools[%d].function is missing", i)
			}
			name, _ := fn["name"].(string)
			if !toolNamePattern.MatchString(name) {
				return nil, fmt.Errorf("tools[%d].function.name %q does not match ^[a-zA-Z0-9_-]{1,64}$", i, name)
			}
			if p, ok := fn["parameters"]; ok {
				if _, ok := p.(map[string]any); !ok {
					return nil, fmt.Errorf("tools[%d].function.parameters must be an object", i)
				}
			}
			v.tools = append(v.tools, name)
		}
	}
	if tc, ok := req["tool_choice"]; ok {
		if s, ok := tc.(string); ok {
			v.toolChoice = s
		} else {
			v.toolChoice = "function"
		}
		if v.tools == nil {
			return nil, fmt.Errorf("tool_choice is only allowed when tools are specified")
		}
	}
	msgs, ok := req["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return nil, fmt.Errorf("messages must be a non-empty array")
	}
	v.messages = len(msgs)
	var pending map[string]bool // tool calls of the last assistant message not yet answered
	var system []string
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		if mm == nil {
			return nil, fmt.Errorf("messages[%d] is not an object", i)
		}
		role, _ := mm["role"].(string)
		if role != "tool" && len(pending) > 0 {
			return nil, fmt.Errorf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id' (missing %s)", i, keys(pending))
		}
		content, hasContent := mm["content"]
		text, err := openAIText(content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		switch role {
		case "system", "developer":
			system = append(system, text)
		case "user":
			if !hasContent || content == nil {
				return nil, fmt.Errorf("messages[%d]: a user message needs content", i)
			}
			v.lastUser = text
		case "assistant":
			v.assistants++
			v.toolResults = map[string]toolResultView{}
			calls, _ := mm["tool_calls"].([]any)
			if (!hasContent || content == nil) && len(calls) == 0 {
				return nil, fmt.Errorf("messages[%d]: an assistant message needs content or tool_calls", i)
			}
			pending = map[string]bool{}
			for j, c := range calls {
				cm, _ := c.(map[string]any)
				id, _ := cm["id"].(string)
				fn, _ := cm["function"].(map[string]any)
				if cm == nil || id == "" || cm["type"] != "function" || fn == nil {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d] needs an id, type \"function\" and a function", i, j)
				}
				if _, ok := fn["name"].(string); !ok {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d].function.name must be a string", i, j)
				}
				if _, ok := fn["arguments"].(string); !ok {
					return nil, fmt.Errorf("messages[%d].tool_calls[%d].function.arguments must be a string (JSON text)", i, j)
				}
				pending[id] = true
			}
		case "tool":
			id, _ := mm["tool_call_id"].(string)
			if !pending[id] {
				return nil, fmt.Errorf("messages[%d]: a tool message must answer a tool call of the preceding assistant message; %q is not one", i, id)
			}
			delete(pending, id)
			if !hasContent || content == nil {
				return nil, fmt.Errorf("messages[%d]: a tool message needs content", i)
			}
			v.toolResults[id] = toolResultView{content: text, isError: strings.HasPrefix(strings.TrimSpace(text), `{"error":`)}
		default:
			return nil, fmt.Errorf("messages[%d].role %q is not system, developer, user, assistant or tool", i, role)
		}
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("the last assistant message's tool calls %s have no tool message", keys(pending))
	}
	v.system = strings.Join(system, "\n")
	return v, nil
}

// openAIText reads a content: a string, null, or an array of text parts.
func openAIText(c any) (string, error) {
	switch c := c.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var b strings.Builder
		for _, p := range c {
			pm, _ := p.(map[string]any)
			if pm == nil || pm["type"] == nil {
				return "", fmt.Errorf("a content part needs a type")
			}
			if t, ok := pm["text"].(string); ok {
				b.WriteString(t)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("must be a string, an array of parts or null")
}

// checkAnthropic checks a Messages API request as the API would.
func checkAnthropic(h http.Header, body []byte) (*view, error) {
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("content-type is %q, not application/json", ct)
	}
	if h.Get("anthropic-version") == "" {
		return nil, fmt.Errorf("anthropic-version: header is required")
	}
	req, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	for k := range req {
		if !anthropicKeys[k] {
			return nil, fmt.Errorf("%s: Extra inputs are not permitted", k)
		}
	}
	v := &view{toolResults: map[string]toolResultView{}}
	if v.model, err = str(req, "model", true); err != nil {
		return nil, err
	}
	if _, ok := req["max_tokens"]; !ok {
		return nil, fmt.Errorf("max_tokens: Field required")
	}
	if err := commonOptions(req, v, 1); err != nil {
		return nil, err
	}
	if v.maxTokens < 1 {
		return nil, fmt.Errorf("max_tokens: must be at least 1")
	}
	switch s := req["system"].(type) {
	case nil:
	case string:
		v.system = s
	case []any:
		for i, b := range s {
			bm, _ := b.(map[string]any)
			t, ok := bm["text"].(string)
			if bm == nil || bm["type"] != "text" || !ok {
				return nil, fmt.Errorf("system.%d: must be a text block", i)
			}
			v.system += t
		}
	default:
		return nil, fmt.Errorf("system: must be a string or an array of text blocks")
	}
	if tools, ok := req["tools"]; ok {
		list, ok := tools.([]any)
		if !ok {
			return nil, fmt.Errorf("tools: must be an array")
		}
		v.tools = []string{}
		for i, t := range list {
			tm, _ := t.(map[string]any)
			name, _ := tm["name"].(string)
			if !toolNamePattern.MatchString(name) {
				return nil, fmt.Errorf("tools.%d.name: %q does not match ^[a-zA-Z0-9_-]{1,64}$", i, name)
			}
			schema, _ := tm["input_schema"].(map[string]any)
			if schema == nil {
				return nil, fmt.Errorf("tools.%d.input_schema: Field required", i)
			}
			if schema["type"] != "object" {
				return nil, fmt.Errorf("tools.%d.input_schema.type: Input should be 'object'", i)
			}
			if d, ok := tm["description"]; ok {
				if _, ok := d.(string); !ok {
					return nil, fmt.Errorf("tools.%d.description: must be a string", i)
				}
			}
			v.tools = append(v.tools, name)
		}
	}
	if tc, ok := req["tool_choice"]; ok {
		tm, _ := tc.(map[string]any)
		t, _ := tm["type"].(string)
		switch t {
		case "auto", "any", "none":
		case "tool":
			if _, ok := tm["name"].(string); !ok {
				return nil, fmt.Errorf("tool_choice.name: Field required")
			}
		default:
			return nil, fmt.Errorf("tool_choice.type must be auto, any, tool or none")
		}
		v.toolChoice = t
	}
	msgs, ok := req["messages"].([]any)
	if !ok || len(msgs) == 0 {
		return nil, fmt.Errorf("messages: at least one message is required")
	}
	v.messages = len(msgs)
	var pending map[string]bool // tool_use ids of the last assistant message
	usesTools := false
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		if role != "user" && role != "assistant" {
			return nil, fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant', not %q", i, role)
		}
		if i == 0 && role != "user" {
			return nil, fmt.Errorf("messages: the first message must use the \"user\" role")
		}
		blocks, err := anthropicBlocks(mm["content"])
		if err != nil {
			return nil, fmt.Errorf("messages.%d.content: %v", i, err)
		}
		if role == "assistant" {
			if len(pending) > 0 {
				return nil, fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, keys(pending))
			}
			v.assistants++
			v.toolResults = map[string]toolResultView{}
			pending = map[string]bool{}
			for j, b := range blocks {
				if b["type"] == "tool_use" {
					usesTools = true
					id, _ := b["id"].(string)
					_, named := b["name"].(string)
					if _, ok := b["input"].(map[string]any); !ok || id == "" || !named {
						return nil, fmt.Errorf("messages.%d.content.%d: a tool_use block needs an id, a name and an input object", i, j)
					}
					pending[id] = true
				}
			}
			continue
		}
		var texts []string
		sawOther := false
		for j, b := range blocks {
			switch b["type"] {
			case "tool_result":
				usesTools = true
				if sawOther {
					return nil, fmt.Errorf("messages.%d.content.%d: tool_result blocks must come first in the user message", i, j)
				}
				id, _ := b["tool_use_id"].(string)
				if !pending[id] {
					return nil, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` %q in `tool_result` blocks: each must answer a `tool_use` block of the previous message", i, j, id)
				}
				delete(pending, id)
				text, err := anthropicResultText(b["content"])
				if err != nil {
					return nil, fmt.Errorf("messages.%d.content.%d.content: %v", i, j, err)
				}
				isErr, _ := b["is_error"].(bool)
				if ie, ok := b["is_error"]; ok {
					if _, ok := ie.(bool); !ok {
						return nil, fmt.Errorf("messages.%d.content.%d.is_error: must be a boolean", i, j)
					}
				}
				v.toolResults[id] = toolResultView{content: text, isError: isErr}
			case "text":
				sawOther = true
				texts = append(texts, b["text"].(string))
			default:
				sawOther = true
			}
		}
		if len(pending) > 0 {
			return nil, fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, keys(pending))
		}
		pending = nil
		if len(texts) > 0 {
			v.lastUser = strings.Join(texts, "\n")
		}
	}
	if len(pending) > 0 {
		return nil, fmt.Errorf("the last assistant message has tool_use blocks %s but no user message answers them", keys(pending))
	}
	if usesTools && len(v.tools) == 0 {
		return nil, fmt.Errorf("requests which include `tool_use` or `tool_result` blocks must define tools")
	}
	return v, nil
}

// anthropicBlocks reads a message content: a non-empty string, or an
// array of typed blocks (text blocks non-empty).
func anthropicBlocks(c any) ([]map[string]any, error) {
	switch c := c.(type) {
	case string:
		if c == "" {
			return nil, fmt.Errorf("text content blocks must be non-empty")
		}
		return []map[string]any{{"type": "text", "text": c}}, nil
	case []any:
		if len(c) == 0 {
			return nil, fmt.Errorf("all messages must have non-empty content")
		}
		out := make([]map[string]any, 0, len(c))
		for j, b := range c {
			bm, _ := b.(map[string]any)
			t, _ := bm["type"].(string)
			if t == "" {
				return nil, fmt.Errorf("%d: a block needs a type", j)
			}
			if t == "text" {
				if s, ok := bm["text"].(string); !ok || s == "" {
					return nil, fmt.Errorf("%d: text content blocks must be non-empty", j)
				}
			}
			out = append(out, bm)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a string or an array of blocks")
}

// anthropicResultText reads a tool_result's content: absent, a string,
// or text blocks.
func anthropicResultText(c any) (string, error) {
	switch c := c.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var b strings.Builder
		for _, x := range c {
			xm, _ := x.(map[string]any)
			if t, ok := xm["text"].(string); ok {
				b.WriteString(t)
			}
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("must be a string or an array of blocks")
}

// commonOptions reads stream, max_tokens and temperature (at most maxTemp).
func commonOptions(req map[string]any, v *view, maxTemp float64) error {
	if s, ok := req["stream"]; ok {
		b, ok := s.(bool)
		if !ok {
			return fmt.Errorf("stream must be a boolean")
		}
		v.stream = b
	}
	if mt, ok := req["max_tokens"]; ok {
		n, ok := mt.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil {
			return fmt.Errorf("max_tokens must be an integer")
		}
		v.maxTokens = int(i)
	}
	if t, ok := req["temperature"]; ok {
		n, ok := t.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || f < 0 || f > maxTemp {
			return fmt.Errorf("temperature must be a number between 0 and %g", maxTemp)
		}
		v.temperature = &f
	}
	return nil
}

func str(m map[string]any, key string, required bool) (string, error) {
	x, ok := m[key]
	if !ok {
		if required {
			return "", fmt.Errorf("%s: Field required", key)
		}
		return "", nil
	}
	s, ok := x.(string)
	if !ok || (required && s == "") {
		return "", fmt.Errorf("%s must be a non-empty string", key)
	}
	return s, nil
}

func keys(m map[string]bool) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// checkExpect compares a request with an exchange's expectations; v is
// nil for provider http.
func checkExpect(e *Expect, r *http.Request, path string, body []byte, v *view) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if e.Method != "" && r.Method != e.Method {
		fail("method is %s, expected %s", r.Method, e.Method)
	}
	if e.Path != "" && path != e.Path {
		fail("path is %q, expected %q", path, e.Path)
	}
	for name, want := range e.Headers {
		got := r.Header.Get(name)
		switch {
		case got == "":
			fail("header %s is missing", name)
		case want != "*" && got != want:
			fail("header %s is not the expected value", name) // never echo it: it may be a secret
		}
	}
	for _, name := range e.HeadersAbsent {
		if r.Header.Get(name) != "" {
			fail("header %s must not be sent", name)
		}
	}
	for _, s := range e.Contains {
		if !bytes.Contains(body, []byte(s)) {
			fail("the body does not contain %q", s)
		}
	}
	for _, s := range e.NotContains {
		if bytes.Contains(body, []byte(s)) {
			fail("the body contains %q", s)
		}
	}
	if e.JSON != "" {
		var want, got any
		_ = json.Unmarshal([]byte(e.JSON), &want)
		if err := json.Unmarshal(body, &got); err != nil || !reflect.DeepEqual(want, got) {
			fail("the body is %s, expected %s", shorten(string(body)), e.JSON)
		}
	}
	if e.Query != nil {
		q := r.URL.Query()
		got := map[string]string{}
		for k := range q {
			got[k] = strings.Join(q[k], ",")
		}
		if !reflect.DeepEqual(got, e.Query) {
			fail("the query is %v, expected %v", got, e.Query)
		}
	}
	if v == nil {
		return bad
	}
	if e.Model != "" && v.model != e.Model {
		fail("model is %q, expected %q", v.model, e.Model)
	}
	if e.Stream != nil && v.stream != *e.Stream {
		fail("stream is %v, expected %v", v.stream, *e.Stream)
	}
	if e.Tools != nil {
		got := append([]string(nil), v.tools...)
		want := append([]string(nil), e.Tools...)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			fail("the tools offered are %v, expected %v", got, want)
		}
	}
	if e.NoTools && len(v.tools) > 0 && v.toolChoice != "none" {
		fail("tools %v are offered, expected none", v.tools)
	}
	if e.ToolChoice != "" && v.toolChoice != e.ToolChoice {
		fail("tool_choice is %q, expected %q", v.toolChoice, e.ToolChoice)
	}
	if e.System != "" && !strings.Contains(v.system, e.System) {
		fail("the system prompt %q does not contain %q", shorten(v.system), e.System)
	}
	if e.LastUser != "" && v.lastUser != e.LastUser {
		fail("the last user message is %q, expected %q", shorten(v.lastUser), e.LastUser)
	}
	if e.Messages != 0 && v.messages != e.Messages {
		fail("the request holds %d messages, expected %d", v.messages, e.Messages)
	}
	if e.MaxTokens != 0 && v.maxTokens != e.MaxTokens {
		fail("max_tokens is %d, expected %d", v.maxTokens, e.MaxTokens)
	}
	if e.Temperature != nil && (v.temperature == nil || *v.temperature != *e.Temperature) {
		fail("temperature is not %g", *e.Temperature)
	}
	for _, tr := range e.ToolResults {
		got, ok := v.toolResults[tr.ID]
		switch {
		case !ok:
			fail("no answer to tool call %s", tr.ID)
		case tr.Content != "" && got.content != tr.Content:
			fail("the answer to %s is %q, expected %q", tr.ID, shorten(got.content), tr.Content)
		case tr.Contains != "" && !strings.Contains(got.content, tr.Contains):
			fail("the answer to %s, %q, does not contain %q", tr.ID, shorten(got.content), tr.Contains)
		case tr.IsError != nil && got.isError != *tr.IsError:
			fail("the answer to %s has is_error %v, expected %v", tr.ID, got.isError, *tr.IsError)
		}
	}
	return bad
}

func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
