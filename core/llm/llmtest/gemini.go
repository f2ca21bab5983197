package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Gemini's API (generateContent), as its reference documents the request:
// the path names the model and the method; the body holds contents (turns
// of role "user" or "model" made of parts), and may hold
// systemInstruction, tools (functionDeclarations), toolConfig,
// generationConfig, safetySettings and cachedContent. The API reads both
// camelCase and snake_case names.

var geminiPath = regexp.MustCompile(`^/v1beta/models/([^/:]+):(generateContent|streamGenerateContent)$`)

// geminiFunctionName is what a FunctionDeclaration's name may be: letters,
// digits, underscores, colons, dots and dashes, starting with a letter or
// an underscore, at most 64 long.
var geminiFunctionName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)

var geminiKeys = map[string]string{
	"contents": "contents", "systemInstruction": "systemInstruction", "system_instruction": "systemInstruction",
	"tools": "tools", "toolConfig": "toolConfig", "tool_config": "toolConfig",
	"generationConfig": "generationConfig", "generation_config": "generationConfig",
	"safetySettings": "safetySettings", "safety_settings": "safetySettings",
	"cachedContent": "cachedContent", "cached_content": "cachedContent",
}

// checkGemini checks a generateContent request as the API would.
func checkGemini(h http.Header, path string, query url.Values, body []byte) (*view, error) {
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("Content-Type is %q, not application/json", ct)
	}
	m := geminiPath.FindStringSubmatch(path)
	if m == nil {
		return nil, fmt.Errorf("path %q is not /v1beta/models/MODEL:generateContent or :streamGenerateContent", path)
	}
	v := &view{model: m[1], stream: m[2] == "streamGenerateContent", toolResults: map[string]toolResultView{}}
	if v.stream && query.Get("alt") != "sse" {
		return nil, fmt.Errorf("streamGenerateContent without alt=sse answers a JSON array, not server-sent events")
	}
	raw, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	req := map[string]any{}
	for k, x := range raw {
		name, ok := geminiKeys[k]
		if !ok {
			return nil, fmt.Errorf("Invalid JSON payload received. Unknown name %q: Cannot find field.", k)
		}
		if _, dup := req[name]; dup {
			return nil, fmt.Errorf("Invalid JSON payload received. %q is given twice", name)
		}
		req[name] = x
	}
	if err := geminiGeneration(req["generationConfig"], v); err != nil {
		return nil, err
	}
	if si, ok := req["systemInstruction"]; ok {
		sm, _ := si.(map[string]any)
		parts, err := geminiParts(sm["parts"], "systemInstruction")
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			t, ok := p["text"].(string)
			if !ok {
				return nil, fmt.Errorf("systemInstruction.parts: only text parts")
			}
			v.system += t
		}
	}
	declared := map[string]bool{}
	if tools, ok := req["tools"]; ok {
		list, ok := tools.([]any)
		if !ok {
			return nil, fmt.Errorf("tools must be an array")
		}
		v.tools = []string{}
		for i, t := range list {
			tm, _ := t.(map[string]any)
			if tm == nil {
				return nil, fmt.Errorf("tools[%d] must be an object", i)
			}
			decls, _ := tm["functionDeclarations"].([]any)
			if decls == nil {
				decls, _ = tm["function_declarations"].([]any)
			}
			for j, d := range decls {
				dm, _ := d.(map[string]any)
				name, _ := dm["name"].(string)
				if !geminiFunctionName.MatchString(name) {
					return nil, fmt.Errorf("tools[%d].functionDeclarations[%d].name %q: letters, digits, underscores, colons, dots and dashes, at most 64", i, j, name)
				}
				_, hasParams := dm["parameters"]
				schema, hasJSON := dm["parametersJsonSchema"]
				if hasParams && hasJSON {
					return nil, fmt.Errorf("tools[%d].functionDeclarations[%d]: parameters and parametersJsonSchema are mutually exclusive", i, j)
				}
				if hasJSON {
					sm, _ := schema.(map[string]any)
					if sm == nil || sm["type"] != "object" {
						return nil, fmt.Errorf("tools[%d].functionDeclarations[%d].parametersJsonSchema must describe an object", i, j)
					}
				}
				if d, ok := dm["description"]; ok {
					if _, ok := d.(string); !ok {
						return nil, fmt.Errorf("tools[%d].functionDeclarations[%d].description must be a string", i, j)
					}
				}
				if declared[name] {
					return nil, fmt.Errorf("function %q is declared twice", name)
				}
				declared[name] = true
				v.tools = append(v.tools, name)
			}
		}
	}
	if tc, ok := req["toolConfig"]; ok {
		tm, _ := tc.(map[string]any)
		fc, _ := tm["functionCallingConfig"].(map[string]any)
		if fc == nil {
			return nil, fmt.Errorf("toolConfig needs functionCallingConfig")
		}
		mode, _ := fc["mode"].(string)
		switch mode {
		case "AUTO", "ANY", "NONE", "VALIDATED":
		default:
			return nil, fmt.Errorf("toolConfig.functionCallingConfig.mode must be AUTO, ANY, NONE or VALIDATED, not %q", mode)
		}
		if names, ok := fc["allowedFunctionNames"]; ok {
			list, _ := names.([]any)
			if mode != "ANY" && mode != "VALIDATED" {
				return nil, fmt.Errorf("allowedFunctionNames may only be set when the mode is ANY")
			}
			for _, n := range list {
				if s, _ := n.(string); !declared[s] {
					return nil, fmt.Errorf("allowedFunctionNames names %v, which is not declared", n)
				}
			}
		}
		if len(declared) == 0 {
			return nil, fmt.Errorf("toolConfig needs function declarations")
		}
		v.toolChoice = strings.ToLower(mode)
	}
	contents, ok := req["contents"].([]any)
	if !ok || len(contents) == 0 {
		return nil, fmt.Errorf("contents must be a non-empty array")
	}
	v.messages = len(contents)
	var calls []string // the function calls of the last model turn, not yet answered
	usesFunctions := false
	for i, c := range contents {
		cm, _ := c.(map[string]any)
		role, _ := cm["role"].(string)
		if role != "user" && role != "model" {
			return nil, fmt.Errorf("contents[%d].role must be \"user\" or \"model\", not %q", i, role)
		}
		parts, err := geminiParts(cm["parts"], fmt.Sprintf("contents[%d]", i))
		if err != nil {
			return nil, err
		}
		if role == "model" {
			if len(calls) > 0 {
				return nil, fmt.Errorf("contents[%d]: the function calls of the previous model turn (%s) have no function responses", i, strings.Join(calls, ", "))
			}
			v.assistants++
			v.toolResults = map[string]toolResultView{}
			for j, p := range parts {
				fc, ok := p["functionCall"]
				if !ok {
					continue
				}
				usesFunctions = true
				fm, _ := fc.(map[string]any)
				name, _ := fm["name"].(string)
				if args, ok := fm["args"]; ok {
					if _, ok := args.(map[string]any); !ok {
						return nil, fmt.Errorf("contents[%d].parts[%d].functionCall.args must be an object", i, j)
					}
				}
				if name == "" {
					return nil, fmt.Errorf("contents[%d].parts[%d].functionCall needs a name", i, j)
				}
				calls = append(calls, callKey(fm))
			}
			continue
		}
		var texts, answered []string
		for j, p := range parts {
			if fr, ok := p["functionResponse"]; ok {
				usesFunctions = true
				fm, _ := fr.(map[string]any)
				resp, ok := fm["response"].(map[string]any)
				if name, _ := fm["name"].(string); name == "" || !ok {
					return nil, fmt.Errorf("contents[%d].parts[%d].functionResponse needs a name and a response object", i, j)
				}
				text, _ := json.Marshal(resp)
				_, isErr := resp["error"]
				key := callKey(fm)
				answered = append(answered, key)
				v.toolResults[key] = toolResultView{content: string(text), isError: isErr}
				if id, _ := fm["id"].(string); id != "" {
					v.toolResults[id] = v.toolResults[key]
				}
				continue
			}
			if t, ok := p["text"].(string); ok {
				texts = append(texts, t)
			}
		}
		if len(answered) > 0 || len(calls) > 0 {
			a, c := append([]string(nil), answered...), append([]string(nil), calls...)
			sort.Strings(a)
			sort.Strings(c)
			if strings.Join(a, ",") != strings.Join(c, ",") {
				return nil, fmt.Errorf("contents[%d]: please ensure that the number of function response parts is equal to the number of function call parts of the function call turn (calls %v, responses %v)", i, calls, answered)
			}
		}
		calls = nil
		if len(texts) > 0 {
			v.lastUser = strings.Join(texts, "\n")
		}
	}
	if len(calls) > 0 {
		return nil, fmt.Errorf("the last model turn's function calls (%s) have no function responses", strings.Join(calls, ", "))
	}
	if usesFunctions && len(declared) == 0 {
		return nil, fmt.Errorf("function calls and responses in contents need function declarations in tools")
	}
	return v, nil
}

// callKey names a call or its response: "name" or "name#id".
func callKey(fm map[string]any) string {
	name, _ := fm["name"].(string)
	if id, _ := fm["id"].(string); id != "" {
		return name + "#" + id
	}
	return name
}

// geminiParts reads a content's parts: a non-empty array of parts, each
// with exactly one kind of data.
func geminiParts(x any, at string) ([]map[string]any, error) {
	list, ok := x.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("%s.parts must be a non-empty array", at)
	}
	out := make([]map[string]any, 0, len(list))
	for j, p := range list {
		pm, _ := p.(map[string]any)
		if pm == nil {
			return nil, fmt.Errorf("%s.parts[%d] must be an object", at, j)
		}
		data := 0
		for k, val := range pm {
			switch k {
			case "text":
				if _, ok := val.(string); !ok {
					return nil, fmt.Errorf("%s.parts[%d].text must be a string", at, j)
				}
				data++
			case "functionCall", "functionResponse", "inlineData", "fileData", "executableCode", "codeExecutionResult":
				data++
			case "thought", "thoughtSignature", "videoMetadata":
			default:
				return nil, fmt.Errorf("Invalid JSON payload received. Unknown name %q at '%s.parts[%d]'", k, at, j)
			}
		}
		if data != 1 {
			return nil, fmt.Errorf("%s.parts[%d] must hold exactly one of text, functionCall, functionResponse, inlineData, fileData", at, j)
		}
		out = append(out, pm)
	}
	return out, nil
}

// geminiGeneration reads generationConfig's temperature (0 to 2) and
// maxOutputTokens.
func geminiGeneration(x any, v *view) error {
	if x == nil {
		return nil
	}
	gc, ok := x.(map[string]any)
	if !ok {
		return fmt.Errorf("generationConfig must be an object")
	}
	if t, ok := gc["temperature"]; ok {
		n, _ := t.(json.Number)
		f, err := n.Float64()
		if err != nil || f < 0 || f > 2 {
			return fmt.Errorf("generationConfig.temperature must be a number between 0 and 2")
		}
		v.temperature = &f
	}
	if mt, ok := gc["maxOutputTokens"]; ok {
		n, _ := mt.(json.Number)
		i, err := n.Int64()
		if err != nil || i < 1 {
			return fmt.Errorf("generationConfig.maxOutputTokens must be a positive integer")
		}
		v.maxTokens = int(i)
	}
	return nil
}
