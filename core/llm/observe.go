package llm

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/telemetry"
)

// What a chat tells an operator (issue 29): a "chat {model}" span per
// model call, the GenAI client metrics, the figures of the run for its
// audit record (RunStats), and traceparent on every outgoing request
// (Client.send). Nothing of it runs while telemetry is off but the
// RunStats, which only a chat the engine audits asks for.

// SetTelemetry makes the client's requests carry the trace context and
// its chats emit spans and metrics through t (nil: none).
func (c *Client) SetTelemetry(t *telemetry.T) { c.tel.Store(t) }

func (c *Client) telemetry() *telemetry.T { return c.tel.Load() }

// RunStats are the figures of one chat run, for its audit record.
type RunStats struct {
	mu                        sync.Mutex
	Provider, Model           string
	InputTokens, OutputTokens int64
	Turns, ModelCalls         int
	ModelTime                 time.Duration // waiting for the model, every call together
}

// Snapshot returns a copy of the figures, safe to read once the chat ran.
func (s *RunStats) Snapshot() RunStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return RunStats{Provider: s.Provider, Model: s.Model, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens,
		Turns: s.Turns, ModelCalls: s.ModelCalls, ModelTime: s.ModelTime}
}

// turn counts one turn of the chat (nil: none kept). The chat may go on
// after its caller stopped waiting for it (cancelled, past its deadline),
// while the caller reads the figures: under the lock.
func (s *RunStats) turn() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.Turns++
	s.mu.Unlock()
}

type runStatsKey struct{}

// WithRunStats makes the chat run in ctx fill st.
func WithRunStats(ctx context.Context, st *RunStats) context.Context {
	return context.WithValue(ctx, runStatsKey{}, st)
}

func runStatsOf(ctx context.Context) *RunStats {
	st, _ := ctx.Value(runStatsKey{}).(*RunStats)
	return st
}

type toolCallIDKey struct{}

// withToolCallID passes the model's id of a tool call to the call's span
// (gen_ai.tool.call.id), when tracing.
func (ch *Chat) withToolCallID(ctx context.Context, id string) context.Context {
	if id == "" || !ch.client.telemetry().Tracing() {
		return ctx
	}
	return context.WithValue(ctx, toolCallIDKey{}, id)
}

// ToolCallIDOf is the model's id of the tool call ctx runs, "" when none.
func ToolCallIDOf(ctx context.Context) string {
	id, _ := ctx.Value(toolCallIDKey{}).(string)
	return id
}

// observeModel starts what one model call records; done ends it with the
// reply or the error.
func (ch *Chat) observeModel(ctx context.Context, r *modelRequest) (context.Context, func(*modelReply, error)) {
	stats := runStatsOf(ctx)
	tel := ch.client.telemetry()
	if stats == nil && !tel.On() {
		return ctx, func(*modelReply, error) {}
	}
	start := time.Now()
	provider := r.endpoint.cfg.Provider
	host, port := serverOf(r.endpoint.cfg.BaseURL)
	var span trace.Span
	if tel.Tracing() {
		attrs := []attribute.KeyValue{
			attribute.String(telemetry.AttrOperationName, telemetry.OpChat),
			attribute.String(telemetry.AttrProviderName, provider),
			attribute.String(telemetry.AttrRequestModel, r.Model),
			attribute.String(telemetry.AttrServerAddress, host),
		}
		if port > 0 {
			attrs = append(attrs, attribute.Int(telemetry.AttrServerPort, port))
		}
		if r.MaxTokens > 0 {
			attrs = append(attrs, attribute.Int(telemetry.AttrRequestMaxTokens, r.MaxTokens))
		}
		if tel.Content() {
			attrs = append(attrs, attribute.String(telemetry.AttrInputMessages, tel.RedactedContent(contentJSON(r.System, r.Messages))))
		}
		ctx, span = tel.Start(ctx, telemetry.OpChat+" "+r.Model, trace.SpanKindClient, attrs...)
	}
	return ctx, func(reply *modelReply, err error) {
		took := time.Since(start)
		if stats != nil {
			stats.mu.Lock()
			stats.Provider, stats.Model = provider, r.Model
			stats.ModelCalls++
			stats.ModelTime += took
			if err == nil {
				stats.InputTokens += int64(reply.Usage.PromptTokens)
				stats.OutputTokens += int64(reply.Usage.CompletionTokens)
			}
			stats.mu.Unlock()
		}
		if !tel.On() {
			return
		}
		errType := ""
		if err != nil {
			errType = telemetry.ErrorTypeOther
			if pe, ok := err.(*protocol.Error); ok {
				errType = string(pe.Code)
			}
		}
		tel.RecordModelCall(ctx, telemetry.ModelCall{Provider: provider, Model: r.Model, ResponseModel: reply.Model, Server: host,
			ErrorType: errType, Took: took, InputTokens: int64(reply.Usage.PromptTokens), OutputTokens: int64(reply.Usage.CompletionTokens)})
		if span == nil {
			return
		}
		if err != nil {
			telemetry.Fail(span, errType, err.Error())
		} else {
			attrs := []attribute.KeyValue{
				attribute.Int(telemetry.AttrInputTokens, reply.Usage.PromptTokens),
				attribute.Int(telemetry.AttrOutputTokens, reply.Usage.CompletionTokens),
				attribute.StringSlice(telemetry.AttrFinishReasons, []string{reply.FinishReason}),
			}
			if reply.Model != "" {
				attrs = append(attrs, attribute.String(telemetry.AttrResponseModel, reply.Model))
			}
			if reply.ID != "" {
				attrs = append(attrs, attribute.String(telemetry.AttrResponseID, reply.ID))
			}
			if tel.Content() {
				out := message{Role: roleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls}
				attrs = append(attrs, attribute.String(telemetry.AttrOutputMessages, tel.RedactedContent(contentJSON("", []message{out}))))
			}
			span.SetAttributes(attrs...)
		}
		span.End()
	}
}

// serverOf is the host and port of a base URL (server.address, .port).
func serverOf(base string) (string, int) {
	u, err := url.Parse(base)
	if err != nil {
		return "", 0
	}
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		switch u.Scheme {
		case "https":
			port = 443
		case "http":
			port = 80
		}
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return host, port
}

// contentJSON renders messages as the conventions' content attributes
// do: [{"role", "parts": [...]}], for gen_ai.input/output.messages.
func contentJSON(system string, msgs []message) string {
	type part struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
	}
	type msg struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	var out []msg
	if system != "" {
		out = append(out, msg{Role: roleSystem, Parts: []part{{Type: "text", Content: system}}})
	}
	for _, m := range msgs {
		var ps []part
		switch {
		case m.Role == roleTool:
			ps = append(ps, part{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		case m.Content != "":
			ps = append(ps, part{Type: "text", Content: m.Content})
		}
		for _, tc := range m.ToolCalls {
			ps = append(ps, part{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: objectArguments(tc.Arguments)})
		}
		out = append(out, msg{Role: m.Role, Parts: ps})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}
