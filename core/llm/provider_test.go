package llm

import (
	"context"
	"strings"
	"testing"
)

// Providers read from the model's name when llm.provider is empty (seed
// 003's SDK): claude-* is Anthropic's, gpt-* and o1, o3-mini, ... OpenAI's,
// any other name a server of OpenAI's format at llm.base_url.

func TestProviderOfModel(t *testing.T) {
	for model, want := range map[string]string{
		"claude-3-opus-20240229": ProviderAnthropic, "claude-sonnet-4-5": ProviderAnthropic,
		"gpt-4o-mini": ProviderOpenAI, "gpt-5": ProviderOpenAI, "o1": ProviderOpenAI, "o3-mini": ProviderOpenAI, "o4-mini": ProviderOpenAI,
		"llama3.1": "", "ollama": "", "o": "", "mistral-large": "", "anthropic/claude-3.5-sonnet": "", "": "",
	} {
		if got := ProviderOfModel(model); got != want {
			t.Errorf("ProviderOfModel(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestEndpoint_resolved_from_the_model(t *testing.T) {
	cases := []struct {
		cfg                   Config
		model                 string
		provider, url, keyEnv string
		maxTokens             int
	}{
		{Config{}, "gpt-4o", ProviderOpenAI, OpenAIBaseURL, OpenAIAPIKeyEnv, 0},
		{Config{}, "claude-3-opus-20240229", ProviderAnthropic, AnthropicBaseURL, AnthropicAPIKeyEnv, DefaultMaxTokens},
		{Config{APIKeyEnv: "MY_KEY"}, "claude-x", ProviderAnthropic, AnthropicBaseURL, "MY_KEY", DefaultMaxTokens},
		// A base_url wins; the key variable is then only api_key_env.
		{Config{BaseURL: "http://localhost:11434/v1"}, "llama3.1", ProviderOpenAI, "http://localhost:11434/v1", "", 0},
		{Config{BaseURL: "http://proxy:4000"}, "claude-x", ProviderAnthropic, "http://proxy:4000", "", DefaultMaxTokens},
		// An explicit provider wins over the name.
		{Config{Provider: ProviderOpenAI, BaseURL: "http://proxy:4000"}, "claude-x", ProviderOpenAI, "http://proxy:4000", "", 0},
		{Config{Provider: ProviderAnthropic}, "my-model", ProviderAnthropic, AnthropicBaseURL, AnthropicAPIKeyEnv, DefaultMaxTokens},
	}
	for _, c := range cases {
		ch, err := NewChat(newTestClient(t, ClientOptions{}), c.cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ep, err := ch.endpointFor(c.model)
		if err != nil {
			t.Errorf("%+v %s: %v", c.cfg, c.model, err)
			continue
		}
		if ep.cfg.Provider != c.provider || ep.cfg.BaseURL != c.url || ep.cfg.APIKeyEnv != c.keyEnv || ep.cfg.MaxTokens != c.maxTokens {
			t.Errorf("%+v %s: %s %s %q %d", c.cfg, c.model, ep.cfg.Provider, ep.cfg.BaseURL, ep.cfg.APIKeyEnv, ep.cfg.MaxTokens)
		}
	}
	// Neither a base_url nor a known provider: the chat says so.
	ch, err := NewChat(newTestClient(t, ClientOptions{}), Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.Run(context.Background(), newFakeHost(), "", []byte(`{"prompt":"hi","model":"llama3.1"}`))
	if err == nil || !strings.Contains(err.Error(), `the provider of model "llama3.1" is not known from its name and llm.base_url is empty`) {
		t.Errorf("llama3.1 without base_url: %v", err)
	}
}

// The documented Anthropic example, with llm.provider left empty: the
// model's name chooses Anthropic's wire format (the script rejects any
// other).
func TestChat_anthropicChosenFromTheModelName(t *testing.T) {
	srv := serveScripts(t, "anthropic_weather")
	env := map[string]string{"ANTHROPIC_API_KEY": testKey}
	ch := chatFor(t, srv, "anthropic_weather", Config{Model: "claude-3-opus-20240229", APIKeyEnv: "ANTHROPIC_API_KEY"}, env, nil)
	out, err := ch.Run(context.Background(), newFakeHost("get_weather"), "", []byte(`{"prompt":"What is the weather like in San Francisco?","allow_tools":true,"max_tokens":1024}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := decodeResult(t, out); r.Turns != 2 || !strings.HasPrefix(r.Content, "The current weather in San Francisco is 15 degrees") {
		t.Fatalf("%s", out)
	}
	if rec := srv.Received("anthropic_weather"); rec[0].Header.Get("x-api-key") != testKey {
		t.Errorf("headers %v", rec[0].Header)
	}
}
