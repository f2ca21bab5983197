package core

import (
	"context"
	"fmt"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/secrets"
	"github.com/clara-lib/clara/core/toolbox"
)

// The outbound side (issue 11): one HTTP client for the evaluator, the
// HTTP tools, the model and (through its Transports) the MCP servers
// reached by URL; the chat tool's loop; the conversations of sessions; the
// Redactor that knows every secret the engine holds. They live as long as
// the engine; what the configuration decides (allowlist, the model, the
// evaluator's URL) is rebuilt with every snapshot.

// maxConversations bounds the sessions whose conversations are kept.
const maxConversations = 10000

type outbound struct {
	client  *llm.Client
	convs   *llm.Conversations
	vectors *llm.VectorCache // semantic conditions' embeddings (semantic.go)
	// secrets learns every secret value as it is read (the client's
	// headers, [[mcp_servers]] headers_env and env_from, and at each
	// configuration the variables it names); the log, the client and the
	// MCP servers' Managers cut them out of what they write.
	secrets *secrets.Redactor
}

func newOutbound(log *logging.Logger, getenv func(string) string) outbound {
	red := secrets.New()
	client, err := llm.NewClient(llm.ClientOptions{Logger: log, Getenv: getenv, Redactor: red})
	if err != nil {
		panic("clara: the HTTP client does not start: " + err.Error()) // a bug, caught by this package's tests
	}
	return outbound{client: client, convs: llm.NewConversations(0, maxConversations), vectors: llm.NewVectorCache(maxVectors), secrets: red}
}

// models is what a configuration decides of the outbound side.
type models struct {
	clientOptions llm.ClientOptions
	chat          *llm.Chat // nil: neither llm.base_url nor llm.model
	// sampling asks the model of the MCP client a call came from, when
	// chat is nil (issue 30).
	sampling *llm.Chat
	evaluate toolbox.Func    // nil: no evaluator.url
	embed    *llm.Embeddings // nil: no llm.embedding_model (semantic.go)
}

// retries maps max_retries (0: none) to the llm package's convention.
func retries(n int) int {
	if n == 0 {
		return llm.NoRetries
	}
	return n
}

// prepareModels builds the outbound side of configuration c; httpURLs are
// the URLs of its HTTP tools (hosts allowed when network.allow_hosts is
// empty).
func (e *Engine) prepareModels(c *config.Config, httpURLs []string) (*models, error) {
	m := &models{clientOptions: llm.ClientOptions{Logger: e.log, Getenv: e.env.Getenv, MaxRetries: retries(c.LLM.MaxRetries),
		MaxResponseBytes: int64(c.LLM.MaxResponseBytes)}}
	servers := remoteURLs(c.MCPServers)
	if len(c.Network.AllowHosts) > 0 {
		m.clientOptions.AllowHosts = c.Network.AllowHosts
	} else {
		// Without a base_url, the endpoint of llm.model's provider.
		modelURL := c.LLM.BaseURL
		if modelURL == "" {
			modelURL = llm.DefaultBaseURL(c.LLM.Provider, c.LLM.Model)
		}
		for _, u := range append(append([]string{modelURL, c.Evaluator.URL}, httpURLs...), servers.urls...) {
			if u != "" {
				m.clientOptions.ImplicitHosts = append(m.clientOptions.ImplicitHosts, u)
			}
		}
	}
	// A throwaway client checks the options now, so that commit cannot fail.
	probe, err := llm.NewClient(m.clientOptions)
	if err != nil {
		return nil, fmt.Errorf("network.allow_hosts: %v", err)
	}
	probe.Close()
	// An [[mcp_servers]] url goes through the allowlist like every other
	// request: one network.allow_hosts does not name is a mistake to say
	// now, not a connection refused later.
	for i, u := range servers.urls {
		if err := probe.CheckHost(u); err != nil {
			return nil, fmt.Errorf("mcp_servers: server %q: url %s: %v", servers.names[i], u, err)
		}
	}
	if c.LLM.BaseURL != "" || c.LLM.Model != "" {
		chat, err := llm.NewChat(e.out.client, llm.Config{Provider: c.LLM.Provider, BaseURL: c.LLM.BaseURL,
			Model: c.LLM.Model, APIKeyEnv: c.LLM.APIKeyEnv, Timeout: time.Duration(c.LLM.TimeoutMS) * time.Millisecond,
			ContextWindow: c.LLM.ContextWindow, MaxRetries: retries(c.LLM.MaxRetries),
			MaxResponseBytes: int64(c.LLM.MaxResponseBytes), MaxTokens: c.LLM.MaxTokens, AppURL: c.LLM.AppURL, AppTitle: c.LLM.AppTitle,
			MaxToolCalls: c.Limits.MaxToolCalls, MaxTurns: c.Limits.MaxTurns, MaxArgumentBytes: c.Limits.MaxRequestBytes, MaxDepth: c.Limits.MaxDepth}, e.out.convs)
		if err != nil {
			return nil, err
		}
		m.chat = chat
	}
	if m.chat == nil {
		chat, err := llm.NewSamplingChat(e.out.client, llm.Config{Timeout: time.Duration(c.LLM.TimeoutMS) * time.Millisecond,
			ContextWindow: c.LLM.ContextWindow, MaxTokens: c.LLM.MaxTokens,
			MaxToolCalls: c.Limits.MaxToolCalls, MaxArgumentBytes: c.Limits.MaxRequestBytes, MaxDepth: c.Limits.MaxDepth}, e.out.convs)
		if err != nil {
			return nil, err
		}
		m.sampling = chat
	}
	if c.Evaluator.URL != "" {
		f, err := llm.HTTPToolFunc(e.out.client, llm.Evaluator(c.Evaluator.URL,
			time.Duration(c.Evaluator.TimeoutMS)*time.Millisecond, nil, c.Limits.MaxDepth))
		if err != nil {
			return nil, fmt.Errorf("evaluator: %v", err)
		}
		m.evaluate = f
	}
	return m, nil
}

// commitModels applies what cannot fail: the client's allowlist and limits,
// the conversations' bounds, the secrets the configuration names.
func (e *Engine) commitModels(c *config.Config, m *models) {
	if err := e.out.client.Configure(m.clientOptions); err != nil {
		e.log.Logf(logging.Error, "network: %v", err) // checked in prepareModels
	}
	e.out.convs.SetLimits(c.LLM.MaxHistoryMessages, maxConversations)
	for _, name := range secretVariables(c) {
		v := e.env.Getenv(name)
		if v != "" && len(v) < secrets.MinLength {
			e.log.Logf(logging.Info, "%s holds fewer than %d characters: too short to be told from other text, it is not cut out of answers and logs", name, secrets.MinLength)
		}
		e.out.secrets.Add(v)
	}
}

// secretVariables are the environment variables c names as holding
// secrets: llm.api_key_env (or the provider's conventional one),
// mcp.token_env, the headers_env of HTTP tools and of [[mcp_servers]],
// their env_from and their oauth's client_secret_env. Each is read again where it is used, and learnt
// there too; reading them here makes them secrets before any use.
func secretVariables(c *config.Config) []string {
	names := []string{c.LLM.APIKeyEnv, c.MCP.TokenEnv}
	if c.LLM.APIKeyEnv == "" && c.LLM.BaseURL == "" {
		switch p := orProvider(c.LLM.Provider, c.LLM.Model); p {
		case llm.ProviderOpenAI:
			names = append(names, llm.OpenAIAPIKeyEnv)
		case llm.ProviderAnthropic:
			names = append(names, llm.AnthropicAPIKeyEnv)
		case llm.ProviderGemini:
			names = append(names, llm.GeminiAPIKeyEnv)
		}
	}
	if c.LLM.APIKeyEnv == "" && llm.IsOpenRouter(c.LLM.BaseURL) {
		names = append(names, llm.OpenRouterAPIKeyEnv)
	}
	tables := func(entries []map[string]any, path ...string) {
		for _, t := range entries {
			var v any = t
			for _, key := range path {
				m, _ := v.(map[string]any)
				v = m[key]
			}
			if m, ok := v.(map[string]any); ok {
				for _, source := range m {
					if s, ok := source.(string); ok {
						names = append(names, s)
					}
				}
			}
		}
	}
	tables(c.Tools, "http", "headers_env")
	tables(c.MCPServers, "headers_env")
	tables(c.MCPServers, "env_from")
	for _, t := range c.MCPServers {
		if o, ok := t["oauth"].(map[string]any); ok {
			if v, ok := o["client_secret_env"].(string); ok {
				names = append(names, v)
			}
		}
	}
	out := names[:0]
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

func orProvider(provider, model string) string {
	if provider != "" {
		return provider
	}
	return llm.ProviderOfModel(model)
}

// remoteServerURLs are the url servers of [[mcp_servers]], as given (the
// tables are checked when their Manager is made).
type remoteServerURLs struct{ names, urls []string }

func remoteURLs(entries []map[string]any) remoteServerURLs {
	var out remoteServerURLs
	for _, t := range entries {
		if u, ok := t["url"].(string); ok && u != "" {
			name, _ := t["name"].(string)
			out.names, out.urls = append(out.names, name), append(out.urls, u)
		}
	}
	return out
}

// httpToolFunc is a [[tools]] table's http = {...} as a tool function.
func (e *Engine) httpToolFunc(d toolbox.Descriptor, h *config.HTTPCode) (toolbox.Func, error) {
	return llm.HTTPToolFunc(e.out.client, llm.HTTPTool{Name: d.Name, URL: h.URL, Method: h.Method,
		Timeout: time.Duration(h.TimeoutMS) * time.Millisecond, HeadersEnv: h.HeadersEnv,
		MaxResponseBytes: int64(h.MaxResponseBytes), Returns: d.Returns})
}

// modelTools implements tools.Models: the engine side of chat, evaluate
// and chat_reset.
type modelTools struct{ e *Engine }

func (m modelTools) Chat(ctx context.Context, call toolbox.Call) ([]byte, error) {
	s := m.e.current.Load()
	chat := s.models.chat
	if chat == nil {
		// No model of our own: the MCP client's, when the call came from
		// one that offers it (sampling).
		sample := mcp.SamplerOf(ctx)
		if sample == nil {
			return nil, protocol.Errorf(protocol.ToolFailed, "chat: no model is configured (set llm.model, and llm.base_url for a server other than OpenAI's or Anthropic's)")
		}
		chat, ctx = s.models.sampling, llm.WithSampler(ctx, llm.SampleFunc(sample))
	}
	host := &chatHost{e: m.e, s: s, session: call.Session, scope: call.Scope, stack: scopeOf(ctx).stack, handle: AsyncHandle(ctx)}
	// A request that names no session is in "default", shared by every
	// such caller: its chats start afresh rather than continue each other.
	conversation := call.Session
	if conversation == protocol.DefaultSession {
		conversation = ""
	}
	out, err := chat.Run(ctx, host, conversation, call.Arguments)
	// Every turn's start fires the batch of the turn before; a chat that
	// ended between a turn's tool calls and the next turn (an error) fires
	// what is left, its notices queued for the session.
	if left := host.endBatch(ctx); len(left) > 0 {
		m.e.sessions.Get(call.Session).Queue(left)
	}
	return out, err
}

func (m modelTools) Evaluate(ctx context.Context, call toolbox.Call) ([]byte, error) {
	s := m.e.current.Load()
	if s.models.evaluate == nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "evaluate: no evaluator is configured (set evaluator.url)")
	}
	return s.models.evaluate(ctx, call)
}

func (m modelTools) ForgetConversation(session string) { m.e.out.convs.Forget(session) }

// History serves chat_history. A call made by a model, a rule or a tool
// reads its own session's conversation only: another session's is not
// its to see.
func (m modelTools) History(ctx context.Context, caller, session string) ([]byte, error) {
	if session != caller && scopeOf(ctx).depth > 0 {
		return nil, protocol.Errorf(protocol.Denied, "chat_history: a call made by a model, a rule or a tool reads its own session's conversation only (%q, not %q)", caller, session)
	}
	// A request naming no session is in "default", whose chats are not
	// kept (modelTools.Chat): it has no conversation.
	if session == protocol.DefaultSession {
		return []byte(`{"session":"default","turns":0,"messages":[]}`), nil
	}
	out, err := m.e.out.convs.HistoryOf(ctx, nil, session) // the shared store's, with one
	if err != nil {
		return nil, err
	}
	return m.e.out.secrets.JSON(out), nil
}
