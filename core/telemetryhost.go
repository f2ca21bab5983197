package core

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/callbacks"
	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/toolbox"
)

// The engine's side of telemetry and of the audit's sinks: what the
// environment and [telemetry] ask for, put in force with each
// configuration; the audit records exported as OTLP logs.

// telemetryEnv is what the OTEL_* variables asked for, read once at New.
type telemetryEnv struct {
	settings telemetry.Settings
	asked    bool // an exporter is on by the environment alone
	disabled bool // OTEL_SDK_DISABLED=true
	content  bool // OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
}

func (e *Engine) setupTelemetry() {
	e.tel.Redact = e.out.secrets.String
	e.tel.Go = e.Go
	e.tel.OnError = func(err error) {
		e.log.Logf(logging.Warn, "telemetry: %v (further export errors within a minute are not reported)", err)
	}
	e.tel.Gauges = func() telemetry.Gauges {
		return telemetry.Gauges{AsyncRunning: e.async.Running(), AsyncPending: e.async.Pending()}
	}
	e.out.client.SetTelemetry(&e.tel)
	s, asked, disabled, err := telemetry.FromEnvironment(e.env.Getenv)
	if err != nil {
		e.log.Logf(logging.Error, "%v; telemetry from the environment is off", err)
		s, asked = telemetry.Settings{}, false
	}
	for _, v := range s.Headers {
		e.out.secrets.Add(v) // an exporter's token is a secret like any other
	}
	e.telEnv = telemetryEnv{settings: s, asked: asked, disabled: disabled,
		content: isOn(e.env.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))}
}

// telemetrySettings is what configuration c and the environment ask for.
// [telemetry] enabled turns the signals it names on; the OTEL_* variables
// turn on what they name; OTEL_SDK_DISABLED turns Clara's exporters off
// (a Go host's own providers stay theirs).
func (e *Engine) telemetrySettings(c *config.Config) telemetry.Settings {
	env := e.telEnv
	s := env.settings
	if env.disabled {
		s = telemetry.Settings{}
	}
	t := c.Telemetry
	if t.Enabled && !env.disabled {
		s.Traces, s.Metrics, s.Logs = t.Traces, t.Metrics, t.Logs
	}
	if t.Endpoint != "" {
		s.Endpoint = t.Endpoint
	}
	if t.ServiceName != "" {
		s.ServiceName = t.ServiceName
	}
	if s.MetricInterval == 0 {
		s.MetricInterval = time.Duration(t.MetricIntervalMS) * time.Millisecond
	}
	s.Content = t.Content || env.content
	s.TracerProvider, s.MeterProvider, s.LoggerProvider = e.env.TracerProvider, e.env.MeterProvider, e.env.LoggerProvider
	s.Version = Version
	return s
}

// checkTelemetry refuses a [telemetry] endpoint that is not an http(s) URL.
func checkTelemetry(c *config.Config) error {
	if c.Telemetry.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(c.Telemetry.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("telemetry.endpoint: %q is not an http:// or https:// URL", c.Telemetry.Endpoint)
	}
	return nil
}

// commitObservability puts configuration c's log format and telemetry in
// force. A telemetry that cannot start is logged, never fatal: the calls
// go on without it.
func (e *Engine) commitObservability(c *config.Config) {
	e.log.SetFormat(logging.ParseFormat(c.Log.Format))
	if err := e.tel.Apply(e.telemetrySettings(c)); err != nil {
		e.log.Logf(logging.Error, "%v; telemetry unchanged", err)
	}
	if e.tel.LogsOn() {
		e.audit.SetExport(e.exportAudit)
	} else {
		e.audit.SetExport(nil)
	}
}

// auditSink is where configuration c sends the audit.
func auditSink(c *config.Config) toolbox.AuditSink {
	a := c.Audit
	return toolbox.AuditSink{Path: a.Path, MaxSizeMB: a.MaxSizeMB, MaxBackups: a.MaxBackups, MaxAgeDays: a.MaxAgeDays, Compress: a.Compress}
}

// exportAudit sends one audit record as an OTLP log record, in its call's
// trace.
func (e *Engine) exportAudit(r *toolbox.Record, line []byte) {
	ctx := context.Background()
	if r.TraceID != ([16]byte{}) {
		ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: r.TraceID, SpanID: r.SpanID, TraceFlags: trace.FlagsSampled}))
	}
	status := "success"
	if r.Code != "" {
		status = string(r.Code)
	}
	attrs := []attribute.KeyValue{
		attribute.String(telemetry.AttrToolName, r.Tool),
		attribute.String(telemetry.AttrSession, r.Session),
		attribute.String(telemetry.AttrStatus, status),
		attribute.String(telemetry.AttrDecisionID, r.Decision.String()),
	}
	if r.Parent.Valid() {
		attrs = append(attrs, attribute.String(telemetry.AttrParentDecision, r.Parent.String()))
	}
	e.tel.AuditRecord(ctx, r.Time, line, attrs...)
}

// FlushTelemetry exports what telemetry holds in its batches, waiting at
// most timeout: a short-lived process calls it before it exits.
func (e *Engine) FlushTelemetry(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return e.tel.Flush(ctx)
}

// TelemetryOn reports whether anything is exported.
func (e *Engine) TelemetryOn() bool { return e.tel.On() }

// ReopenAudit reopens the audit's file (after a rotation moved it).
func (e *Engine) ReopenAudit() error { return e.audit.Reopen() }

// callbackSpans records the runs a trigger waited for as spans, children
// of the call that changed the files, when tracing.
func (e *Engine) callbackSpans(ctx context.Context, runs []callbacks.RunResult) {
	if !e.tel.Tracing() {
		return
	}
	now := time.Now()
	for _, r := range runs {
		start := now.Add(-time.Duration(r.DurationMS) * time.Millisecond)
		_, span := e.tel.StartAt(ctx, "callback "+r.Name, start,
			attribute.String(telemetry.AttrCallback, r.Name), attribute.Int("clara.callback.exit_code", r.ExitCode),
			attribute.Int("clara.callback.files", len(r.Files)))
		if !r.OK {
			msg := r.Error
			if msg == "" {
				msg = strings.TrimSpace(r.OutputTail)
			}
			telemetry.Fail(span, "callback_failed", msg)
		}
		span.End()
	}
}
