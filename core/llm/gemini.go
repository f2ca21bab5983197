package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/clara-lib/clara/core/jsonx"
	"github.com/clara-lib/clara/core/protocol"
)

// gemini speaks Google's Gemini API (generateContent): POST
// {base_url}/v1beta/models/{model}:generateContent, or
// :streamGenerateContent?alt=sse for a stream, with x-goog-api-key. The
// conversation is contents of role "user" and "model" made of parts; the
// system prompt is systemInstruction; tools are functionDeclarations
// (their JSON Schema as parametersJsonSchema); the model's calls are
// functionCall parts and their answers functionResponse parts in the next
// user turn, one for each call, in order.
type gemini struct{}

func (gemini) headers(_ http.Header, cfg *Config) []SecretHeader {
	if cfg.APIKeyEnv == "" {
		return nil
	}
	return []SecretHeader{{Name: "x-goog-api-key", Env: cfg.APIKeyEnv, Key: "llm.api_key_env"}}
}

// gmPart is a part of a content being encoded.
type gmPart struct {
	kind      string // text, functionCall, functionResponse
	text      string
	name      string
	id        string // the call's id, when the model gave one
	args      []byte // functionCall: an object
	response  []byte // functionResponse: an object
	signature string // functionCall: the thoughtSignature the model gave, sent back as it came
}

type gmContent struct {
	role  string
	parts []gmPart
}

// contents turns the conversation into Gemini's turns, as Anthropic's
// are built: leading system messages join the system instruction, later
// ones become text in the user turn next to them; parts of one role in a
// row merge into one turn. When no tools are described, earlier calls and
// answers are written as text.
func (gemini) contents(r *modelRequest) (system string, out []gmContent) {
	system, msgs := leadingSystem(r)
	described := len(r.Tools) > 0
	add := func(role string, p gmPart) {
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].parts = append(out[n-1].parts, p)
			return
		}
		out = append(out, gmContent{role: role, parts: []gmPart{p}})
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case roleUser, roleSystem:
			if m.Content != "" {
				add("user", gmPart{kind: "text", text: m.Content})
			}
		case roleAssistant:
			if m.Content != "" {
				add("model", gmPart{kind: "text", text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				if described {
					p := gmPart{kind: "functionCall", name: tc.Name, args: objectArguments(tc.Arguments), signature: tc.Signature}
					if !tc.madeID {
						p.id = tc.ID
					}
					add("model", p)
				} else {
					add("model", gmPart{kind: "text", text: "[called tool " + tc.Name + " with " + string(objectArguments(tc.Arguments)) + "]"})
				}
			}
		case roleTool:
			if described {
				p := gmPart{kind: "functionResponse", name: m.ToolName, response: gmResponse(m)}
				if call := callOf(msgs[:i], m.ToolCallID); call != nil && !call.madeID {
					p.id = call.ID
				}
				add("user", p)
			} else {
				add("user", gmPart{kind: "text", text: "[tool " + m.ToolName + " answered: " + m.Content + "]"})
			}
		}
	}
	return system, out
}

// callOf finds the call a tool message answers among the messages before
// it.
func callOf(before []message, id string) *toolCall {
	for i := len(before) - 1; i >= 0; i-- {
		for j := range before[i].ToolCalls {
			if before[i].ToolCalls[j].ID == id {
				return &before[i].ToolCalls[j]
			}
		}
		if before[i].Role == roleAssistant {
			return nil
		}
	}
	return nil
}

// gmResponse is a tool answer as a functionResponse's response, which must
// be an object: an error object as it is ({"error": ...}, as Gemini's
// documentation asks), an object result as it is, anything else as
// {"output": value}.
func gmResponse(m *message) []byte {
	t := strings.TrimSpace(m.Content)
	if strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
		return []byte(t)
	}
	var v []byte
	if t != "" && json.Valid([]byte(t)) && !m.IsError {
		v = []byte(t)
	} else {
		v = protocol.AppendString(nil, m.Content)
	}
	return append(append([]byte(`{"output":`), v...), '}')
}

// geminiPath is the path of a request for model: the model may be given
// with Google's "models/" prefix.
func geminiPath(model string, stream bool) string {
	model = strings.TrimPrefix(model, "models/")
	if stream {
		return "/v1beta/models/" + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
	}
	return "/v1beta/models/" + url.PathEscape(model) + ":generateContent"
}

// encode writes contents, systemInstruction, tools, toolConfig and
// generationConfig.
func (g gemini) encode(r *modelRequest) (string, []byte, error) {
	system, contents := g.contents(r)
	b := make([]byte, 0, requestSizeHint(r))
	b = append(b, `{"contents":[`...)
	for i, c := range contents {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = protocol.AppendString(b, c.role)
		b = append(b, `,"parts":[`...)
		for j := range c.parts {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendGeminiPart(b, &c.parts[j])
		}
		b = append(b, "]}"...)
	}
	b = append(b, ']')
	if system != "" {
		b = append(b, `,"systemInstruction":{"parts":[{"text":`...)
		b = protocol.AppendString(b, system)
		b = append(b, "}]}"...)
	}
	if len(r.Tools) > 0 {
		b = append(b, `,"tools":[{"functionDeclarations":[`...)
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
			b = append(b, `,"parametersJsonSchema":`...)
			b = append(b, schemaOrEmpty(t.InputSchema)...)
			b = append(b, '}')
		}
		b = append(b, "]}]"...)
		mode := ""
		switch {
		case r.ToolsOff || r.ToolChoice == ChoiceNone:
			mode = "NONE"
		case r.ToolChoice == ChoiceAuto:
			mode = "AUTO"
		case r.ToolChoice == ChoiceRequired, r.ToolChoice == ChoiceTool:
			mode = "ANY"
		}
		if mode != "" {
			b = append(b, `,"toolConfig":{"functionCallingConfig":{"mode":"`...)
			b = append(b, mode...)
			b = append(b, '"')
			if r.ToolChoice == ChoiceTool && !r.ToolsOff {
				b = append(b, `,"allowedFunctionNames":[`...)
				b = protocol.AppendString(b, r.ChoiceName)
				b = append(b, ']')
			}
			b = append(b, "}}"...)
		}
	}
	if r.Temperature != nil || r.MaxTokens > 0 {
		b = append(b, `,"generationConfig":{`...)
		sep := ""
		if r.Temperature != nil {
			b = append(b, `"temperature":`...)
			b = strconv.AppendFloat(b, *r.Temperature, 'g', -1, 64)
			sep = ","
		}
		if r.MaxTokens > 0 {
			b = append(b, sep...)
			b = append(b, `"maxOutputTokens":`...)
			b = strconv.AppendInt(b, int64(r.MaxTokens), 10)
		}
		b = append(b, '}')
	}
	return geminiPath(r.Model, r.Stream), append(b, '}'), nil
}

func appendGeminiPart(b []byte, p *gmPart) []byte {
	switch p.kind {
	case "text":
		b = append(b, `{"text":`...)
		b = protocol.AppendString(b, p.text)
	case "functionCall":
		b = append(b, `{"functionCall":{"name":`...)
		b = protocol.AppendString(b, p.name)
		if p.id != "" {
			b = append(b, `,"id":`...)
			b = protocol.AppendString(b, p.id)
		}
		b = append(b, `,"args":`...)
		b = append(b, p.args...)
		b = append(b, '}')
		if p.signature != "" {
			b = append(b, `,"thoughtSignature":`...)
			b = protocol.AppendString(b, p.signature)
		}
	case "functionResponse":
		b = append(b, `{"functionResponse":{"name":`...)
		b = protocol.AppendString(b, p.name)
		if p.id != "" {
			b = append(b, `,"id":`...)
			b = protocol.AppendString(b, p.id)
		}
		b = append(b, `,"response":`...)
		b = append(b, p.response...)
		b = append(b, '}')
	}
	return append(b, '}')
}

// gmAnswer accumulates one GenerateContentResponse, or the chunks of a
// streamed one (each a GenerateContentResponse whose text parts are
// deltas and whose function calls come whole).
type gmAnswer struct {
	reply      modelReply
	text       strings.Builder
	candidates int
	finish     string
	blocked    string // promptFeedback.blockReason
	errMsg     string
	usage      Usage
}

// read reads one response (or chunk), calling token for its text.
func (a *gmAnswer) read(body []byte, token func(string)) error {
	r := jsonx.NewReader(body)
	r.Object(func(k []byte) {
		switch string(k) {
		case "candidates":
			if r.Null() {
				return
			}
			r.Array(func(i int) {
				a.candidates++
				if i > 0 {
					return // the first candidate is the answer
				}
				r.Object(func(k []byte) {
					switch string(k) {
					case "content":
						if !r.Null() {
							r.Object(func(k []byte) {
								if string(k) == "parts" && !r.Null() {
									r.Array(func(int) { a.part(r, token) })
								}
							})
						}
					case "finishReason":
						if f := r.StrOrNull(); f != "" {
							a.finish = f
						}
					}
				})
			})
		case "usageMetadata":
			if !r.Null() {
				a.usage = gmUsage(r)
			}
		case "promptFeedback":
			if !r.Null() {
				r.Object(func(k []byte) {
					if string(k) == "blockReason" {
						a.blocked = r.StrOrNull()
					}
				})
			}
		case "error":
			if !r.Null() {
				a.errMsg = oaError(r)
			}
		}
	})
	return r.End()
}

// part reads one part of the answer: text (not the model's thoughts),
// or a function call.
func (a *gmAnswer) part(r *jsonx.Reader, token func(string)) {
	var (
		text, signature string
		thought         bool
		call            *toolCall
		hasID           bool
	)
	r.Object(func(k []byte) {
		switch string(k) {
		case "text":
			text = r.StrOrNull()
		case "thought":
			if k := r.Kind(); k == 't' || k == 'f' {
				thought = r.Bool()
			}
		case "thoughtSignature":
			signature = r.StrOrNull()
		case "functionCall":
			call = &toolCall{}
			r.Object(func(k []byte) {
				switch string(k) {
				case "name":
					call.Name = r.StrOrNull()
				case "id":
					call.ID = r.StrOrNull()
					hasID = call.ID != ""
				case "args":
					if raw := r.Raw(); raw != nil {
						call.Arguments = string(protocol.AppendCompact(nil, raw))
					}
				}
			})
		}
	})
	if r.Err() != nil {
		return
	}
	if call != nil {
		if len(a.reply.ToolCalls) >= maxCallsPerMessage {
			r.Stop(errTooManyCalls)
			return
		}
		call.Signature = signature
		if !hasID {
			call.ID, call.madeID = "gemini_call_"+strconv.Itoa(len(a.reply.ToolCalls)), true
		}
		a.reply.ToolCalls = append(a.reply.ToolCalls, *call)
		return
	}
	if text != "" && !thought {
		a.text.WriteString(text)
		if token != nil {
			token(text)
		}
	}
}

// gmUsage reads usageMetadata: the model's thoughts count as completion
// tokens, as they are billed.
func gmUsage(r *jsonx.Reader) Usage {
	var u Usage
	var candidates, thoughts int
	r.Object(func(k []byte) {
		switch string(k) {
		case "promptTokenCount":
			u.PromptTokens = r.Int()
		case "candidatesTokenCount":
			candidates = r.Int()
		case "thoughtsTokenCount":
			thoughts = r.Int()
		case "totalTokenCount":
			u.TotalTokens = r.Int()
		}
	})
	u.CompletionTokens = candidates + thoughts
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// done checks what was read and returns the reply.
func (a *gmAnswer) done() (modelReply, error) {
	if a.errMsg != "" {
		return modelReply{}, fmt.Errorf("the server answered an error: %s", a.errMsg)
	}
	if a.candidates == 0 {
		if a.blocked != "" {
			return modelReply{}, fmt.Errorf("the prompt was blocked (%s)", a.blocked)
		}
		return modelReply{}, fmt.Errorf("the answer has no candidates")
	}
	a.reply.Content = a.text.String()
	a.reply.Usage = a.usage
	a.reply.FinishReason = geminiFinish(a.finish, len(a.reply.ToolCalls) > 0)
	return a.reply, nil
}

// geminiFinish normalises a finishReason to OpenAI's words.
func geminiFinish(f string, calls bool) string {
	switch f {
	case "STOP", "":
		if calls {
			return "tool_calls"
		}
		return "stop"
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return "content_filter"
	}
	return strings.ToLower(f)
}

func (gemini) decode(body []byte) (modelReply, error) {
	var a gmAnswer
	if err := a.read(body, nil); err != nil {
		if errors.Is(err, errTooManyCalls) {
			return modelReply{}, err
		}
		return modelReply{}, fmt.Errorf("the answer is not a GenerateContentResponse: %v", err)
	}
	return a.done()
}

// decodeStream reads the chunks to the end of the stream (Gemini sends no
// closing event): it must have seen a finishReason by then.
func (gemini) decodeStream(events *sseReader, token func(string)) (modelReply, error) {
	var a gmAnswer
	for {
		ev, err := events.next()
		if err != nil {
			if errors.Is(err, io.EOF) && a.finish != "" {
				return a.done()
			}
			return modelReply{}, err
		}
		if err := a.read(ev.data, token); err != nil {
			if errors.Is(err, errTooManyCalls) {
				return modelReply{}, &streamError{msg: err.Error()}
			}
			return modelReply{}, streamErrorf("a streamed chunk is not JSON: %v", err)
		}
		if a.errMsg != "" {
			return modelReply{}, streamErrorf("the server sent an error in the stream: %s", a.errMsg)
		}
	}
}
