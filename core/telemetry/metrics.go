package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instruments are the metrics Clara records.
type instruments struct {
	toolCalls    metric.Int64Counter
	toolDuration metric.Float64Histogram
	decisions    metric.Int64Counter
	retries      metric.Int64Counter
	rateLimited  metric.Int64Counter
	opDuration   metric.Float64Histogram
	tokenUsage   metric.Int64Histogram
	mcpServerDur metric.Float64Histogram
	mcpClientDur metric.Float64Histogram
	gauges       metric.Registration
	// toolSets caches the attribute set of a tool and status: every call
	// records one, and a set costs allocations and a sort to build.
	toolSets     sync.Map // toolStatus -> metric.MeasurementOption
	toolSetCount atomic.Int64
}

type toolStatus struct{ tool, status string }

// maxToolSets bounds the cache (tools are registered by hosts, and
// unregistered: names may come and go).
const maxToolSets = 4096

func (in *instruments) toolSet(tool, status string) metric.MeasurementOption {
	k := toolStatus{tool, status}
	if v, ok := in.toolSets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	set := metricAttrs(attribute.String(AttrToolName, tool), attribute.String(AttrStatus, status))
	if in.toolSetCount.Add(1) <= maxToolSets {
		in.toolSets.Store(k, set)
	}
	return set
}

// Bucket boundaries the GenAI conventions advise.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	mcpBuckets      = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
	toolBuckets     = []float64{0.00001, 0.0001, 0.001, 0.01, 0.1, 1, 10, 100}
)

func newInstruments(m metric.Meter, t *T) (*instruments, error) {
	var in instruments
	var err error
	must := func(e error) {
		if err == nil {
			err = e
		}
	}
	var e error
	in.toolCalls, e = m.Int64Counter(MetricToolCalls, metric.WithUnit("{call}"), metric.WithDescription("Tool calls, by tool and status (success or the error code)."))
	must(e)
	in.toolDuration, e = m.Float64Histogram(MetricToolDuration, metric.WithUnit("s"), metric.WithDescription("How long tool calls took, admission included."), metric.WithExplicitBucketBoundaries(toolBuckets...))
	must(e)
	in.decisions, e = m.Int64Counter(MetricDecisions, metric.WithUnit("{decision}"), metric.WithDescription("Denials, asks and other decisions that are not a plain allow, by layer, rule and tool."))
	must(e)
	in.retries, e = m.Int64Counter(MetricRetries, metric.WithUnit("{retry}"), metric.WithDescription("Retries of outbound HTTP requests (models, the evaluator, HTTP tools)."))
	must(e)
	in.rateLimited, e = m.Int64Counter(MetricRateLimited, metric.WithUnit("{call}"), metric.WithDescription("Calls refused by a tool's rate or concurrency limit."))
	must(e)
	in.opDuration, e = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"), metric.WithDescription("GenAI operation duration."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	must(e)
	in.tokenUsage, e = m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"), metric.WithDescription("Number of input and output tokens used."), metric.WithExplicitBucketBoundaries(tokenBuckets...))
	must(e)
	in.mcpServerDur, e = m.Float64Histogram(MetricMCPServerDuration, metric.WithUnit("s"), metric.WithDescription("MCP request duration as observed on the receiver."), metric.WithExplicitBucketBoundaries(mcpBuckets...))
	must(e)
	in.mcpClientDur, e = m.Float64Histogram(MetricMCPClientDuration, metric.WithUnit("s"), metric.WithDescription("MCP request duration as observed on the sender."), metric.WithExplicitBucketBoundaries(mcpBuckets...))
	must(e)
	running, e := m.Int64ObservableGauge(MetricAsyncRunning, metric.WithUnit("{call}"), metric.WithDescription("Asynchronous calls running."))
	must(e)
	pending, e := m.Int64ObservableGauge(MetricAsyncPending, metric.WithUnit("{call}"), metric.WithDescription("Finished asynchronous calls whose answers wait to be collected."))
	must(e)
	cbRunning, e := m.Int64ObservableGauge(MetricCallbacksRunning, metric.WithUnit("{run}"), metric.WithDescription("Callback runs under way."))
	must(e)
	if err != nil {
		return nil, err
	}
	in.gauges, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if t.Gauges == nil {
			return nil
		}
		g := t.Gauges()
		o.ObserveInt64(running, int64(g.AsyncRunning))
		o.ObserveInt64(pending, int64(g.AsyncPending))
		o.ObserveInt64(cbRunning, int64(g.CallbacksRunning))
		return nil
	}, running, pending, cbRunning)
	return &in, err
}

func metricAttrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// ToolCall counts one tool call and its duration; status is "success" or
// the error code.
func (t *T) ToolCall(ctx context.Context, tool, status string, took time.Duration) {
	st := t.state()
	if st == nil || st.inst == nil {
		return
	}
	set := st.inst.toolSet(tool, status)
	st.inst.toolCalls.Add(ctx, 1, set)
	st.inst.toolDuration.Record(ctx, took.Seconds(), set)
	if status == "rate_limited" {
		st.inst.rateLimited.Add(ctx, 1, metricAttrs(attribute.String(AttrToolName, tool)))
	}
}

// Retry counts one retry of an outbound request to host.
func (t *T) Retry(ctx context.Context, host, reason string) {
	st := t.state()
	if st == nil || st.inst == nil {
		return
	}
	st.inst.retries.Add(ctx, 1, metricAttrs(attribute.String(AttrServerAddress, host), attribute.String(AttrRetryReason, reason)))
}

// ModelCall is what the GenAI client metrics record of one model call.
type ModelCall struct {
	Provider, Model, ResponseModel, Server string
	ErrorType                              string // "" on success
	Took                                   time.Duration
	InputTokens, OutputTokens              int64
}

// RecordModelCall records gen_ai.client.operation.duration and, on
// success, gen_ai.client.token.usage.
func (t *T) RecordModelCall(ctx context.Context, m ModelCall) {
	st := t.state()
	if st == nil || st.inst == nil {
		return
	}
	base := []attribute.KeyValue{attribute.String(AttrOperationName, OpChat), attribute.String(AttrProviderName, m.Provider),
		attribute.String(AttrRequestModel, m.Model)}
	if m.Server != "" {
		base = append(base, attribute.String(AttrServerAddress, m.Server))
	}
	if m.ResponseModel != "" {
		base = append(base, attribute.String(AttrResponseModel, m.ResponseModel))
	}
	dur := base
	if m.ErrorType != "" {
		dur = append(dur[:len(dur):len(dur)], attribute.String(AttrErrorType, m.ErrorType))
	}
	st.inst.opDuration.Record(ctx, m.Took.Seconds(), metricAttrs(dur...))
	if m.ErrorType != "" {
		return
	}
	in := append(base[:len(base):len(base)], attribute.String(AttrTokenType, TokenTypeInput))
	st.inst.tokenUsage.Record(ctx, m.InputTokens, metricAttrs(in...))
	out := append(base[:len(base):len(base)], attribute.String(AttrTokenType, TokenTypeOutput))
	st.inst.tokenUsage.Record(ctx, m.OutputTokens, metricAttrs(out...))
}

// MCPOperation records one MCP request's duration, on the server (server
// true) or the client side.
func (t *T) MCPOperation(ctx context.Context, server bool, method, tool, errorType string, took time.Duration) {
	st := t.state()
	if st == nil || st.inst == nil {
		return
	}
	kv := []attribute.KeyValue{attribute.String(AttrMCPMethodName, method)}
	if tool != "" {
		kv = append(kv, attribute.String(AttrToolName, tool))
	}
	if errorType != "" {
		kv = append(kv, attribute.String(AttrErrorType, errorType))
	}
	h := st.inst.mcpClientDur
	if server {
		h = st.inst.mcpServerDur
	}
	h.Record(ctx, took.Seconds(), metricAttrs(kv...))
}
