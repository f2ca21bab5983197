// Package telemetry is Clara's OpenTelemetry: traces, metrics and the
// audit as OTLP logs, exported over OTLP/HTTP, off until the environment
// (OTEL_* variables) or the configuration ([telemetry]) asks, or a Go host
// hands its own providers.
//
// One T per engine. Its On is one atomic load: the call path checks it
// before anything else, so telemetry that is off costs a plain call
// nothing. The names of spans, attributes and metrics follow the GenAI and
// MCP semantic conventions and are all in semconv.go.
//
// Trace context travels as W3C traceparent/tracestate: read from a
// request's or an MCP request's _meta (Extract), written into outgoing
// HTTP headers (InjectHeader) and MCP requests' _meta (InjectMeta).
// Decisions about calls (policy layers, rules) are span events plus a
// counter: RecordDecision.
//
// It imports nothing of Clara. The exporters it builds start their own
// goroutines (the batch span and log processors, the periodic metric
// reader); Apply and Close stop them.
package telemetry
