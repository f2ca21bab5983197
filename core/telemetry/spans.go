package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator is W3C Trace Context and Baggage, Clara's own (a Go host's
// global propagator is left alone).
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

type tKey struct{}

// fromContext is the T whose span ctx carries (Start puts it there).
func fromContext(ctx context.Context) *T {
	t, _ := ctx.Value(tKey{}).(*T)
	return t
}

// Start starts a span named name as a child of ctx's span (or of the
// remote parent Extract put in ctx). When tracing is off it returns ctx
// and a span that records nothing, without allocating.
func (t *T) Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	st := t.state()
	if st == nil || st.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	if fromContext(ctx) != t {
		ctx = context.WithValue(ctx, tKey{}, t)
	}
	return st.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// StartAt is Start for something that began at a time past (a callback
// run that ended before it was reported).
func (t *T) StartAt(ctx context.Context, name string, at time.Time, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	st := t.state()
	if st == nil || st.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return st.tracer.Start(ctx, name, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
}

// Fail marks span as failed with errorType (error.type) and a message.
func Fail(span trace.Span, errorType, message string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(AttrErrorType, errorType))
	span.SetStatus(codes.Error, message)
}

// Extract makes the trace context of an MCP-style _meta object
// ({"traceparent": ..., "tracestate": ..., "baggage": ...}) the parent of
// the spans started from the returned context. ctx is returned as it is
// when telemetry is off or meta has no valid traceparent.
func (t *T) Extract(ctx context.Context, meta []byte) context.Context {
	if len(meta) == 0 || !t.On() {
		return ctx
	}
	tp := gjson.GetBytes(meta, "traceparent")
	if tp.Type != gjson.String {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tp.String()}
	if ts := gjson.GetBytes(meta, "tracestate"); ts.Type == gjson.String {
		c["tracestate"] = ts.String()
	}
	if b := gjson.GetBytes(meta, "baggage"); b.Type == gjson.String {
		c["baggage"] = b.String()
	}
	return propagator.Extract(ctx, c)
}

// ExtractMap is Extract for a _meta already decoded (the MCP SDK's).
func (t *T) ExtractMap(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 || !t.On() {
		return ctx
	}
	c := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := meta[k].(string); ok {
			c[k] = v
		}
	}
	if c["traceparent"] == "" {
		return ctx
	}
	return propagator.Extract(ctx, c)
}

// InjectHeader writes ctx's trace context into an outgoing HTTP request's
// headers (traceparent, tracestate, baggage).
func (t *T) InjectHeader(ctx context.Context, h http.Header) {
	if !t.On() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// InjectMeta writes ctx's trace context into an MCP request's _meta,
// unprefixed (SEP-414); it returns meta, made when nil and needed.
func (t *T) InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !t.On() || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	if meta == nil {
		meta = make(map[string]any, len(c))
	}
	for k, v := range c {
		meta[k] = v
	}
	return meta
}

// Decision is one decision about a call: a policy layer's or a rule's.
type Decision struct {
	Tool    string // the tool the call is of
	Layer   string // "configuration", "session", "request", "rule", "the call stack", ...
	Rule    string // the rule's name, for a rule's decision
	Outcome string // OutcomeAllow, OutcomeDeny, OutcomeAsk, or another word (rewrite, shadow_deny)
	Reason  string
}

// RecordDecision records d as a clara.decision event on the span of ctx
// (the call's span, when tracing) and counts it in clara.decisions (when
// it is not an allow, which every call has). It costs a context lookup
// when telemetry is off. Decisions are span events, not spans of their
// own: a policy layer or a rule decides in microseconds, inside the call
// it is about, and a call has several; events keep them on that call's
// span, where a backend shows them in order, at the cost of no duration.
func RecordDecision(ctx context.Context, d Decision) {
	st := fromContext(ctx).state()
	if st == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(AttrDecisionLayer, d.Layer), attribute.String(AttrDecisionOutcome, d.Outcome)}
	if d.Rule != "" {
		attrs = append(attrs, attribute.String(AttrDecisionRule, d.Rule))
	}
	if d.Tool != "" {
		attrs = append(attrs, attribute.String(AttrToolName, d.Tool))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		ev := attrs
		if d.Reason != "" {
			ev = append(ev[:len(ev):len(ev)], attribute.String(AttrDecisionReason, d.Reason))
		}
		span.AddEvent(EventDecision, trace.WithAttributes(ev...))
	}
	if st.inst != nil && d.Outcome != OutcomeAllow {
		st.inst.decisions.Add(ctx, 1, metricAttrs(attrs...))
	}
}

// WithT makes ctx carry t for RecordDecision even where no span was
// started (telemetry with metrics only). It returns ctx when t is off.
func WithT(ctx context.Context, t *T) context.Context {
	if !t.On() || fromContext(ctx) == t {
		return ctx
	}
	return context.WithValue(ctx, tKey{}, t)
}

// RedactedContent is s with secrets cut out, for a content attribute;
// "" when content is not recorded.
func (t *T) RedactedContent(s string) string {
	if !t.Content() {
		return ""
	}
	return t.Redact(s)
}
