package core

import (
	"context"
	"fmt"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// The outbound side (issue 11): one HTTP client for the evaluator, the
// HTTP tools and the model; the chat tool's loop; the conversations of
// sessions. The client and the conversations live as long as the engine;
// what the configuration decides (allowlist, the model, the evaluator's
// URL) is rebuilt with every snapshot.

// maxConversations bounds the sessions whose conversations are kept.
const maxConversations = 10000

type outbound struct {
	client  *llm.Client
	convs   *llm.Conversations
	vectors *llm.VectorCache // semantic conditions' embeddings (semantic.go)
}

func newOutbound(log *logging.Logger, getenv func(string) string) outbound {
	client, err := llm.NewClient(llm.ClientOptions{Logger: log, Getenv: getenv})
	if err != nil {
		panic("clara: the HTTP client does not start: " + err.Error()) // a bug, caught by this package's tests
	}
	return outbound{client: client, convs: llm.NewConversations(0, maxConversations), vectors: llm.NewVectorCache(maxVectors)}
}

// models is what a configuration decides of the outbound side.
type models struct {
	clientOptions llm.ClientOptions
	chat          *llm.Chat       // nil: neither llm.base_url nor llm.model
	evaluate      toolbox.Func    // nil: no evaluator.url
	embed         *llm.Embeddings // nil: no llm.embedding_model (semantic.go)
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
	if len(c.Network.AllowHosts) > 0 {
		m.clientOptions.AllowHosts = c.Network.AllowHosts
	} else {
		// Without a base_url, the endpoint of llm.model's provider.
		modelURL := c.LLM.BaseURL
		if modelURL == "" {
			modelURL = llm.DefaultBaseURL(c.LLM.Provider, c.LLM.Model)
		}
		for _, u := range append([]string{modelURL, c.Evaluator.URL}, httpURLs...) {
			if u != "" {
				m.clientOptions.ImplicitHosts = append(m.clientOptions.ImplicitHosts, u)
			}
		}
	}
	// A throwaway client checks the options now, so that commit cannot fail.
	if probe, err := llm.NewClient(m.clientOptions); err != nil {
		return nil, fmt.Errorf("network.allow_hosts: %v", err)
	} else {
		probe.Close()
	}
	if c.LLM.BaseURL != "" || c.LLM.Model != "" {
		chat, err := llm.NewChat(e.out.client, llm.Config{Provider: c.LLM.Provider, BaseURL: c.LLM.BaseURL,
			Model: c.LLM.Model, APIKeyEnv: c.LLM.APIKeyEnv, Timeout: time.Duration(c.LLM.TimeoutMS) * time.Millisecond,
			ContextWindow: c.LLM.ContextWindow, MaxRetries: retries(c.LLM.MaxRetries),
			MaxResponseBytes: int64(c.LLM.MaxResponseBytes), MaxTokens: c.LLM.MaxTokens,
			MaxToolCalls: c.Limits.MaxToolCalls, MaxTurns: c.Limits.MaxTurns}, e.out.convs)
		if err != nil {
			return nil, err
		}
		m.chat = chat
	}
	if c.Evaluator.URL != "" {
		f, err := llm.HTTPToolFunc(e.out.client, llm.Evaluator(c.Evaluator.URL,
			time.Duration(c.Evaluator.TimeoutMS)*time.Millisecond, nil))
		if err != nil {
			return nil, fmt.Errorf("evaluator: %v", err)
		}
		m.evaluate = f
	}
	return m, nil
}

// commitModels applies what cannot fail: the client's allowlist and limits,
// the conversations' bounds.
func (e *Engine) commitModels(c *config.Config, m *models) {
	if err := e.out.client.Configure(m.clientOptions); err != nil {
		e.log.Logf(logging.Error, "network: %v", err) // checked in prepareModels
	}
	e.out.convs.SetLimits(c.LLM.MaxHistoryMessages, maxConversations)
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
	if s.models.chat == nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "chat: no model is configured (set llm.model, and llm.base_url for a server other than OpenAI's or Anthropic's)")
	}
	host := &chatHost{e: m.e, s: s, session: call.Session, scope: call.Scope, stack: scopeOf(ctx).stack, handle: AsyncHandle(ctx)}
	// A request that names no session is in "default", shared by every
	// such caller: its chats start afresh rather than continue each other.
	conversation := call.Session
	if conversation == protocol.DefaultSession {
		conversation = ""
	}
	out, err := s.models.chat.Run(ctx, host, conversation, call.Arguments)
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
