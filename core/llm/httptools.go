package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// HTTPTool describes a tool that is one HTTP request: the evaluator
// (SPEC §10.1) or a [[tools]] entry with http = {...}.
type HTTPTool struct {
	Name   string // the tool's name, for messages
	URL    string
	Method string // "POST" (the default) sends the arguments as a JSON body; "GET" as query parameters
	// Timeout bounds the request, retries included; 0 leaves the tool's
	// own deadline (limits.timeout_ms) alone.
	Timeout time.Duration
	// HeadersEnv maps a header to the environment variable holding its
	// value (headers_env = { Authorization = "LOOKUP_TOKEN" }).
	HeadersEnv       map[string]string
	MaxResponseBytes int64 // 0: the Client's cap
	// Returns is the tool's descriptor's returns: toolbox.ReturnsJSON
	// answers a JSON body as JSON and anything else as a JSON string;
	// toolbox.ReturnsString answers the body as text.
	Returns string
	// StrictJSON refuses an answer that is not JSON (tool_failed): the
	// evaluator's contract.
	StrictJSON bool
	// MaxDepth bounds the nesting of a JSON answer (0: 10000): a deeper
	// one is refused (tool_failed). The evaluator, a built-in tool whose
	// result the toolbox takes as it is, gives limits.max_depth; the
	// toolbox holds an HTTP tool's result to it itself.
	MaxDepth int
}

// check validates t and fills in its defaults.
func (t *HTTPTool) check() error {
	t.Method = strings.ToUpper(strings.TrimSpace(t.Method))
	if t.Method == "" {
		t.Method = http.MethodPost
	}
	if t.Method != http.MethodPost && t.Method != http.MethodGet {
		return fmt.Errorf("tool %q: method must be \"POST\" or \"GET\", not %q", t.Name, t.Method)
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("tool %q: url %q is not an http:// or https:// URL with a host", t.Name, t.URL)
	}
	if u.User != nil {
		return fmt.Errorf("tool %q: url must not carry credentials; give them with headers_env", t.Name)
	}
	if t.Timeout < 0 || t.MaxResponseBytes < 0 {
		return fmt.Errorf("tool %q: timeout_ms and max_response_bytes must be positive", t.Name)
	}
	if t.Returns == "" {
		t.Returns = toolbox.ReturnsJSON
	}
	if t.Returns != toolbox.ReturnsJSON && t.Returns != toolbox.ReturnsString {
		return fmt.Errorf("tool %q: returns must be %q or %q", t.Name, toolbox.ReturnsJSON, toolbox.ReturnsString)
	}
	for h, env := range t.HeadersEnv {
		if h == "" || env == "" || strings.ContainsAny(h, " :\r\n") {
			return fmt.Errorf("tool %q: headers_env entry %q = %q is not a header and a variable name", t.Name, h, env)
		}
	}
	return nil
}

// Evaluator returns the HTTPTool of the evaluator (SPEC §10.1): it POSTs
// the arguments and its answer must be JSON.
func Evaluator(url string, timeout time.Duration, headersEnv map[string]string, maxDepth int) HTTPTool {
	return HTTPTool{Name: "evaluate", URL: url, Method: http.MethodPost, Timeout: timeout,
		HeadersEnv: headersEnv, Returns: toolbox.ReturnsJSON, StrictJSON: true, MaxDepth: maxDepth}
}

// HTTPToolFunc returns the toolbox.Func running t through c. It honours
// ctx's deadline, so it may be registered SelfTimed. Errors: denied for a
// host off the allowlist, timeout, tool_failed naming the status and an
// excerpt of the body for a non-2xx answer or an unreachable server.
func HTTPToolFunc(c *Client, t HTTPTool) (toolbox.Func, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	secrets := make([]SecretHeader, 0, len(t.HeadersEnv))
	for h, env := range t.HeadersEnv {
		secrets = append(secrets, SecretHeader{Name: h, Env: env, Key: fmt.Sprintf("tool %s headers_env.%s", t.Name, h)})
	}
	sort.Slice(secrets, func(i, j int) bool { return secrets[i].Name < secrets[j].Name })
	accept := "application/json"
	if t.Returns == toolbox.ReturnsString {
		accept = "application/json, text/plain;q=0.9, */*;q=0.5"
	}
	return func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		req := &Request{Method: t.Method, URL: t.URL, Header: http.Header{"Accept": {accept}}, Secrets: secrets,
			Timeout: t.Timeout, MaxResponseBytes: t.MaxResponseBytes}
		if t.Method == http.MethodGet {
			u, err := withQuery(t.URL, call.Arguments)
			if err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "tool %q: %v", t.Name, err)
			}
			req.URL = u
		} else {
			req.Body = bytes.Clone(call.Arguments)
			if len(req.Body) == 0 {
				req.Body = []byte("{}")
			}
		}
		resp, err := c.Do(ctx, req)
		if err != nil {
			return nil, err
		}
		body := resp.Body
		if t.Returns == toolbox.ReturnsString {
			return body, nil
		}
		depth := t.MaxDepth
		if depth <= 0 {
			depth = 10000
		}
		_, serr := protocol.Scan(body, depth)
		switch {
		case serr == nil:
			return body, nil
		case serr.TooDeep:
			return nil, protocol.Errorf(protocol.ToolFailed, "%s %s answered JSON nested deeper than limits.max_depth (%d)", t.Method, t.URL, depth)
		case t.StrictJSON:
			return nil, protocol.Errorf(protocol.ToolFailed, "%s %s answered %d with a body that is not JSON: %s",
				t.Method, t.URL, resp.StatusCode, shorten(strings.Join(strings.Fields(string(body)), " "), excerptBytes))
		}
		return protocol.AppendString(make([]byte, 0, len(body)+2), string(body)), nil
	}, nil
}

// withQuery adds the arguments (a JSON object) to raw's query: strings as
// they are, numbers and booleans as written, arrays as repeated
// parameters, objects as JSON text; null leaves the key out.
func withQuery(raw string, args []byte) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	q := u.Query()
	if len(bytes.TrimSpace(args)) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			return "", fmt.Errorf("arguments must be a JSON object for a GET tool: %v", err)
		}
		for k, v := range obj {
			var items []json.RawMessage
			if bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
				if err := json.Unmarshal(v, &items); err != nil {
					return "", err
				}
			} else {
				items = []json.RawMessage{v}
			}
			for _, it := range items {
				if s, ok := queryValue(it); ok {
					q.Add(k, s)
				}
			}
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func queryValue(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return "", false
	case v[0] == '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s, true
		}
	case v[0] == '{' || v[0] == '[':
		return string(protocol.AppendCompact(nil, v)), true
	}
	return string(v), true
}
