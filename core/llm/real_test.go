package llm

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestChat_realServer runs one tool-calling conversation against a real
// server on the developer's machine (a llama.cpp server, Ollama...):
//
//	CLARA_TEST_LLM_URL=http://localhost:11434/v1 CLARA_TEST_LLM_MODEL=qwen2.5:7b go test ./core/llm -run RealServer -v
//
// CLARA_TEST_LLM_PROVIDER picks "anthropic"; CLARA_TEST_LLM_KEY_ENV names
// the variable holding an API key. Skipped when CLARA_TEST_LLM_URL is not
// set: no test here reaches the network otherwise.
func TestChat_realServer(t *testing.T) {
	base, model := os.Getenv("CLARA_TEST_LLM_URL"), os.Getenv("CLARA_TEST_LLM_MODEL")
	if base == "" || model == "" {
		t.Skip("set CLARA_TEST_LLM_URL and CLARA_TEST_LLM_MODEL to run a conversation against a real server")
	}
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{base}})
	ch, err := NewChat(c, Config{Provider: os.Getenv("CLARA_TEST_LLM_PROVIDER"), BaseURL: base, Model: model,
		APIKeyEnv: os.Getenv("CLARA_TEST_LLM_KEY_ENV"), Timeout: 5 * time.Minute, MaxToolCalls: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost("get_time")
	for _, stream := range []string{"false", "true"} {
		out, err := ch.Run(context.Background(), h, "", []byte(`{"prompt":"What time is it in UTC? Use the get_time tool.","allow_tools":true,"stream":`+stream+`}`))
		if err != nil {
			t.Fatal(err)
		}
		r := decodeResult(t, out)
		t.Logf("stream %s: %s", stream, out)
		if r.Content == "" || r.Turns == 0 {
			t.Errorf("an empty answer: %s", out)
		}
	}
}
