package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
)

// leakKey is the key the hostile server of these tests echoes back.
const leakKey = "sk-live-Zq8vR2mW9xT4pL7nKd3Q"

// escapeKey writes s as JSON \u escapes, every character.
func escapeKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// leaks reports whether text holds 8 characters in a row of the key,
// plain or once its JSON escapes are decoded.
func leaks(text string) bool {
	forms := []string{text}
	var decoded string
	if json.Unmarshal([]byte(`"`+strings.ReplaceAll(text, `"`, `\"`)+`"`), &decoded) == nil {
		forms = append(forms, decoded)
	}
	for _, f := range forms {
		for i := 0; i+8 <= len(leakKey); i++ {
			if strings.Contains(f, leakKey[i:i+8]) {
				return true
			}
		}
	}
	return false
}

// A model that echoes the key written with JSON escapes, in its content,
// in a tool call's arguments, and in an error object: none of it reaches
// the result, the events, or the error (issue 25, finding 6).
func TestChat_keyEchoedWithEscapes(t *testing.T) {
	esc := escapeKey(leakKey)
	srv := scriptServer(t, "echo", `provider = "openai"
[[exchange]]
reply.json = '''{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,
 "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"`+strings.ReplaceAll(esc, `\`, `\\`)+`\"}"}}]},"finish_reason":"tool_calls"}]}'''
[[exchange]]
reply.json = '''{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"your key: `+esc[:60]+`"},{"type":"text","text":"`+esc[60:]+`."}]},"finish_reason":"stop"}]}'''
[[exchange]]
reply.json = '''{"error":{"message":"invalid key `+esc+`","type":"invalid_request_error"}}'''
`)
	env := map[string]string{"KEY": leakKey}
	ch := chatFor(t, srv, "echo", Config{Model: "m", APIKeyEnv: "KEY", MaxToolCalls: 2}, env, nil)
	h := newFakeHost("get_time")
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Time?","allow_tools":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if leaks(string(out)) || !strings.Contains(string(out), `"content":"your key: [redacted]."`) {
		t.Errorf("the result: %s", out)
	}
	if got := strings.Join(h.called, "|"); leaks(got) || got != `get_time {"tz":"[redacted]"}` {
		t.Errorf("the tool got %s", got)
	}
	if ev := strings.Join(h.eventLines(), "\n"); leaks(ev) {
		t.Errorf("the events: %s", ev)
	}
	_, err = ch.Run(context.Background(), h, "", []byte(`{"prompt":"again"}`))
	pe := protoErr(t, err, protocol.ToolFailed)
	if leaks(pe.Message) || pe.Message != "model: the server answered an error: invalid key [redacted]" {
		t.Errorf("the error: %q", pe.Message)
	}
}

// A streamed answer that cuts the key between deltas, plain and escaped:
// no token and no answer holds it, nor do the tokens put together.
func TestChat_keySplitAcrossStreamedDeltas(t *testing.T) {
	esc := escapeKey(leakKey)
	delta := func(s string) string {
		return `data: {"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	sse := delta("the key is "+leakKey[:5]) + delta(leakKey[5:17]) + delta(leakKey[17:]+" and ") +
		delta(esc[:36]) + delta(esc[36:]) + delta(", twice.") +
		`data: {"id":"s","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	srv := scriptServer(t, "split", "provider = \"openai\"\n[[exchange]]\nreply.chunk = 13\nreply.sse = '''\n"+sse+"'''\n")
	ch := chatFor(t, srv, "split", Config{Model: "m", APIKeyEnv: "KEY"}, map[string]string{"KEY": leakKey}, nil)
	h := newFakeHost()
	out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"Key?","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, e := range h.events {
		if e.Kind == ProgressToken {
			tokens = append(tokens, e.Text)
		}
	}
	all := strings.Join(tokens, "")
	if leaks(all) || all != "the key is [redacted] and [redacted], twice." {
		t.Errorf("tokens %q", tokens)
	}
	if leaks(string(out)) || leaks(strings.Join(h.eventLines(), "\n")) {
		t.Errorf("the result %s or the events %q", out, h.eventLines())
	}
}

// A 401 whose body echoes the key with escapes, where the excerpt's cut
// falls: the excerpt keeps no part of it.
func TestClient_excerptOfAnEscapedKey(t *testing.T) {
	esc := escapeKey(leakKey)
	for _, at := range []int{0, 150, 190, 199} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"`+strings.Repeat("x", at)+` bad key `+esc+` `+strings.Repeat("y", 300)+`"}`)
		}))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, Getenv: func(string) string { return leakKey }})
		_, err := c.Do(context.Background(), &Request{URL: srv.URL, Secrets: []SecretHeader{{Name: "Authorization", Env: "K", Prefix: "Bearer "}}})
		srv.Close()
		pe := protoErr(t, err, protocol.ToolFailed)
		if leaks(pe.Message) || strings.Contains(pe.Message, `\u00`) && !strings.Contains(pe.Message, "[redacted]") {
			t.Errorf("at %d: %q", at, pe.Message)
		}
	}
}
