package mcp

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/telemetry"
)

// What MCP shows an operator (issue 29): server spans for what clients
// ask, client spans for what Clara asks remote servers, the trace context
// carried in params._meta both ways (SEP-414), the MCP operation
// metrics, and Clara's own log sent to clients that set a level.

// metaOf is a request's _meta; nil when it has no params.
func metaOf(req sdk.Request) (meta map[string]any) {
	defer func() {
		if recover() != nil { // a typed nil params: no _meta
			meta = nil
		}
	}()
	if p := req.GetParams(); p != nil {
		return p.GetMeta()
	}
	return nil
}

// toolOf is the tool a tools/call names, "" for other methods.
func toolOf(req sdk.Request) (name string) {
	defer func() {
		if recover() != nil {
			name = ""
		}
	}()
	switch p := req.GetParams().(type) {
	case *sdk.CallToolParams:
		return p.Name
	case *sdk.CallToolParamsRaw:
		return p.Name
	}
	return ""
}

// errorType is error.type of a failed request or of a tool's isError.
func errorType(res sdk.Result, err error) (string, string) {
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return strconv.FormatInt(rpc.Code, 10), rpc.Message
		}
		return telemetry.ErrorTypeOther, err.Error()
	}
	if r, ok := res.(*sdk.CallToolResult); ok && r != nil && r.IsError {
		return telemetry.ErrorTypeToolError, "the tool answered isError"
	}
	return "", ""
}

func spanName(method, tool string) string {
	if tool != "" {
		return method + " " + tool
	}
	return method
}

// telemetryMiddleware is the server side: a span per request a client
// sends, a child of the trace context in its _meta, and its duration.
func (s *Server) telemetryMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		tel := s.opts.Telemetry
		if !tel.On() {
			s.watchLogLevel(method, req)
			return next(ctx, method, req)
		}
		start := time.Now()
		ctx = tel.ExtractMap(ctx, metaOf(req))
		tool := toolOf(req)
		attrs := []attribute.KeyValue{attribute.String(telemetry.AttrMCPMethodName, method)}
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok && ss != nil {
			attrs = append(attrs, attribute.String(telemetry.AttrMCPSessionID, s.sessionName(ss)))
			if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion != "" {
				attrs = append(attrs, attribute.String(telemetry.AttrMCPProtocolVersion, ip.ProtocolVersion))
			}
		}
		transport := "pipe"
		if x := req.GetExtra(); x != nil && x.Header != nil {
			transport = "tcp"
		}
		attrs = append(attrs, attribute.String(telemetry.AttrNetworkTransport, transport))
		if tool != "" {
			attrs = append(attrs, attribute.String(telemetry.AttrToolName, tool), attribute.String(telemetry.AttrOperationName, telemetry.OpExecuteTool))
		}
		ctx, span := tel.Start(ctx, spanName(method, tool), trace.SpanKindServer, attrs...)
		res, err := next(ctx, method, req)
		s.watchLogLevel(method, req)
		et, msg := errorType(res, err)
		if et != "" {
			telemetry.Fail(span, et, msg)
		}
		span.End()
		tel.MCPOperation(ctx, true, method, tool, et, time.Since(start))
		return res, err
	}
}

// telemetryMiddleware is the client side: a span per request Clara sends
// a remote server, whose context goes in the request's _meta.
func (r *remote) telemetryMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		tel := r.m.opts.Telemetry
		if !tel.On() {
			return next(ctx, method, req)
		}
		start := time.Now()
		tool := toolOf(req)
		attrs := []attribute.KeyValue{attribute.String(telemetry.AttrMCPMethodName, method),
			attribute.String("clara.mcp.server", r.cfg.Name)}
		if tool != "" {
			attrs = append(attrs, attribute.String(telemetry.AttrToolName, tool), attribute.String(telemetry.AttrOperationName, telemetry.OpExecuteTool))
		}
		if cs, ok := req.GetSession().(*sdk.ClientSession); ok && cs != nil && cs.ID() != "" {
			attrs = append(attrs, attribute.String(telemetry.AttrMCPSessionID, cs.ID()))
		}
		ctx, span := tel.Start(ctx, spanName(method, tool), trace.SpanKindClient, attrs...)
		injectMeta(ctx, tel, req)
		res, err := next(ctx, method, req)
		et, msg := errorType(res, err)
		if et != "" {
			telemetry.Fail(span, et, msg)
		}
		span.End()
		tel.MCPOperation(ctx, false, method, tool, et, time.Since(start))
		return res, err
	}
}

// injectMeta writes ctx's trace context into the request's _meta (a copy
// of the map it had: the caller's stays as it was).
func injectMeta(ctx context.Context, tel *telemetry.T, req sdk.Request) {
	defer func() { _ = recover() }() // a typed nil params: nothing to carry it
	p := req.GetParams()
	if p == nil {
		return
	}
	meta := map[string]any{}
	for k, v := range p.GetMeta() {
		meta[k] = v
	}
	if meta = tel.InjectMeta(ctx, meta); len(meta) > 0 {
		p.SetMeta(meta)
	}
}

// clientLogs sends Clara's own log to the MCP sessions that set a level
// (logging/setLevel): a tap on the engine's logger per session, each
// message handed to the session's goroutine, which sends it as
// notifications/message (logger "clara"). A session that falls behind
// loses messages rather than slowing whoever logs.
type clientLogs struct {
	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*logSession
}

type logSession struct {
	remove func()
	queue  chan logMessage
}

type logMessage struct {
	level sdk.LoggingLevel
	text  string
}

// claraLevel is the lowest of Clara's levels a client at level wants.
func claraLevel(level sdk.LoggingLevel) logging.Level {
	switch level {
	case "debug":
		return logging.Debug
	case "info", "notice":
		return logging.Info
	case "warning":
		return logging.Warn
	}
	return logging.Error
}

func mcpLevel(l logging.Level) sdk.LoggingLevel {
	switch l {
	case logging.Debug:
		return "debug"
	case logging.Info:
		return "info"
	case logging.Warn:
		return "warning"
	}
	return "error"
}

// watchLogLevel follows a session's logging/setLevel: its tap on Clara's
// log is put at the level it asked for.
func (s *Server) watchLogLevel(method string, req sdk.Request) {
	if method != "logging/setLevel" || s.log == nil {
		return
	}
	r, ok := req.(*sdk.ServerRequest[*sdk.SetLoggingLevelParams])
	if !ok || r.Params == nil || r.Session == nil {
		return
	}
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	if s.logs.sessions == nil {
		s.logs.sessions = map[*sdk.ServerSession]*logSession{}
	}
	if old := s.logs.sessions[r.Session]; old != nil {
		old.remove()
		close(old.queue)
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closed {
		delete(s.logs.sessions, r.Session)
		return
	}
	ls := &logSession{queue: make(chan logMessage, 256)}
	ss := r.Session
	ls.remove = s.log.AddTap(claraLevel(r.Params.Level), func(level logging.Level, message string) {
		if strings.HasPrefix(message, "mcp sdk: ") || strings.HasPrefix(message, `{"msg":"mcp sdk: `) {
			return // the SDK's own lines, which sending may add to: never a loop
		}
		select {
		case ls.queue <- logMessage{mcpLevel(level), message}:
		default: // behind: dropped
		}
	})
	s.logs.sessions[ss] = ls
	go func() {
		defer s.wg.Done()
		defer func() { _ = recover() }()
		for m := range ls.queue {
			_ = ss.Log(context.Background(), &sdk.LoggingMessageParams{Level: m.level, Logger: "clara", Data: m.text})
		}
	}()
}

// dropLogTap ends the log of a session that ended (or every session's,
// when ss is nil: the server closes).
func (s *Server) dropLogTap(ss *sdk.ServerSession) {
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	for k, ls := range s.logs.sessions {
		if ss == nil || k == ss {
			ls.remove()
			close(ls.queue)
			delete(s.logs.sessions, k)
		}
	}
}
