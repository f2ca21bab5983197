package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of everything Clara emits.
const ScopeName = "github.com/clara-lib/clara"

// Settings say what to export and where. The zero value exports nothing.
type Settings struct {
	Traces, Metrics, Logs bool
	// Endpoint is the OTLP/HTTP base URL ("http://localhost:4318"); the
	// signals go to its /v1/traces, /v1/metrics and /v1/logs. The
	// per-signal endpoints, when set, are full URLs and win.
	Endpoint                                      string
	TracesEndpoint, MetricsEndpoint, LogsEndpoint string
	Headers                                       map[string]string // sent with every export (OTEL_EXPORTER_OTLP_HEADERS)
	ServiceName                                   string
	ResourceAttributes                            string // OTEL_RESOURCE_ATTRIBUTES: k=v,k2=v2
	// Content records prompts, answers, tool arguments and results on
	// spans, after redaction (Redact). Off by default.
	Content bool
	// MetricInterval is how often metrics are exported (0: 60 s).
	MetricInterval time.Duration
	// A Go host's own providers; each one given is used instead of an
	// exporter of that signal (and never shut down by Clara).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	LoggerProvider otellog.LoggerProvider
	Version        string // Clara's version, for the resource and the scope
}

// On reports whether s exports anything.
func (s *Settings) On() bool {
	return s.Traces || s.Metrics || s.Logs || s.TracerProvider != nil || s.MeterProvider != nil || s.LoggerProvider != nil
}

// same reports whether s and o would build the same exporters.
func (s *Settings) same(o *Settings) bool {
	if s.Traces != o.Traces || s.Metrics != o.Metrics || s.Logs != o.Logs || s.Endpoint != o.Endpoint ||
		s.TracesEndpoint != o.TracesEndpoint || s.MetricsEndpoint != o.MetricsEndpoint || s.LogsEndpoint != o.LogsEndpoint ||
		s.ServiceName != o.ServiceName || s.ResourceAttributes != o.ResourceAttributes || s.Content != o.Content ||
		s.MetricInterval != o.MetricInterval || s.TracerProvider != o.TracerProvider || s.MeterProvider != o.MeterProvider ||
		s.LoggerProvider != o.LoggerProvider || len(s.Headers) != len(o.Headers) {
		return false
	}
	for k, v := range s.Headers {
		if o.Headers[k] != v {
			return false
		}
	}
	return true
}

// T is one engine's telemetry: off (the zero value) until Apply turns it
// on. Every method is safe for concurrent use and cheap when off: On is
// one atomic load, and nothing else runs on the call path while it is
// false.
type T struct {
	on  atomic.Bool
	cur atomic.Pointer[state]
	mu  sync.Mutex // serialises Apply

	// Redact cuts secrets out of content before it is recorded; nil
	// records nothing (content needs a redactor).
	Redact func(string) string
	// Gauges, when set, reports the queue depths observed at each metric
	// export.
	Gauges func() Gauges
	// Go runs the shutdown of exporters that Apply replaced, so that it
	// does not hold up the configuration (a goroutine when nil).
	Go func(what string, f func())
	// OnError receives the export errors of the exporters Clara builds
	// (a collector that is down), instead of the SDK's default, which
	// writes them to standard error. At most one a minute.
	OnError func(error)
}

// errorSink is the OnError of the T that built exporters last: the SDK's
// error handler is one per process.
var (
	errorSink     atomic.Pointer[T]
	errorHandler  sync.Once
	lastErrorTime atomic.Int64
)

func handleExportError(err error) {
	t := errorSink.Load()
	if t == nil || t.OnError == nil {
		return
	}
	now := time.Now().UnixNano()
	if last := lastErrorTime.Load(); now-last < int64(time.Minute) || !lastErrorTime.CompareAndSwap(last, now) {
		return
	}
	t.OnError(err)
}

// Gauges are the depths reported by the observable instruments.
type Gauges struct {
	AsyncRunning, AsyncPending, CallbacksRunning int
}

// state is what one Apply built.
type state struct {
	settings Settings
	tracer   trace.Tracer // nil: no traces
	inst     *instruments // nil: no metrics
	logger   otellog.Logger
	stop     func(context.Context) error // shuts down what Clara built
	flush    func(context.Context) error
}

// On reports whether anything is exported.
func (t *T) On() bool { return t != nil && t.on.Load() }

func (t *T) state() *state {
	if t == nil || !t.on.Load() {
		return nil
	}
	return t.cur.Load()
}

// Tracing reports whether spans are recorded.
func (t *T) Tracing() bool {
	st := t.state()
	return st != nil && st.tracer != nil
}

// Content reports whether content is recorded (and can be redacted).
func (t *T) Content() bool {
	st := t.state()
	return st != nil && st.settings.Content && t.Redact != nil
}

// Apply puts s in force, building exporters when it differs from what is
// in force; the previous ones are flushed and shut down. An error leaves
// the telemetry in force unchanged.
func (t *T) Apply(s Settings) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Load()
	if old != nil && old.settings.same(&s) {
		return nil
	}
	var next *state
	if s.On() {
		var err error
		if next, err = t.build(s); err != nil {
			return err
		}
	}
	t.cur.Store(next)
	t.on.Store(next != nil)
	if old != nil && old.stop != nil {
		stop := func() {
			// An exporter's shutdown is not Clara's code: whoever runs
			// this (t.Go recovers too), a panic in it must not end the host.
			defer func() {
				if r := recover(); r != nil && t.OnError != nil {
					t.OnError(fmt.Errorf("shutting down replaced exporters: panic: %v", r))
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = old.stop(ctx)
		}
		if t.Go != nil {
			t.Go("shutting down replaced telemetry exporters", stop)
		} else {
			go stop()
		}
	}
	return nil
}

// Flush exports what is buffered, waiting at most until ctx ends.
func (t *T) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	st := t.cur.Load()
	if st == nil || st.flush == nil {
		return nil
	}
	return st.flush(ctx)
}

// Close flushes and shuts down the exporters; telemetry is off after.
func (t *T) Close(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.cur.Swap(nil)
	t.on.Store(false)
	if st == nil || st.stop == nil {
		return nil
	}
	return st.stop(ctx)
}

func (t *T) build(s Settings) (*state, error) {
	ctx := context.Background()
	res, err := newResource(s)
	if err != nil {
		return nil, err
	}
	for _, u := range []string{signalURL(s.Endpoint, s.TracesEndpoint, "/v1/traces"), signalURL(s.Endpoint, s.MetricsEndpoint, "/v1/metrics"),
		signalURL(s.Endpoint, s.LogsEndpoint, "/v1/logs")} {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("telemetry: the OTLP endpoint %q is not an http:// or https:// URL", u)
		}
	}
	if s.TracerProvider == nil || s.MeterProvider == nil || s.LoggerProvider == nil {
		errorSink.Store(t)
		errorHandler.Do(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(handleExportError)) })
	}
	st := &state{settings: s}
	var stops, flushes []func(context.Context) error
	fail := func(err error) (*state, error) {
		for _, stop := range stops {
			_ = stop(ctx)
		}
		return nil, err
	}
	scopeOpts := []trace.TracerOption{trace.WithInstrumentationVersion(s.Version), trace.WithSchemaURL(SchemaURL)}
	switch {
	case s.TracerProvider != nil:
		st.tracer = s.TracerProvider.Tracer(ScopeName, scopeOpts...)
		if f, ok := s.TracerProvider.(interface{ ForceFlush(context.Context) error }); ok {
			flushes = append(flushes, f.ForceFlush)
		}
	case s.Traces:
		exp := spanExporter{newPoster(signalURL(s.Endpoint, s.TracesEndpoint, "/v1/traces"), s.Headers)}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		st.tracer = tp.Tracer(ScopeName, scopeOpts...)
		stops, flushes = append(stops, tp.Shutdown), append(flushes, tp.ForceFlush)
	}
	var mp metric.MeterProvider
	switch {
	case s.MeterProvider != nil:
		mp = s.MeterProvider
		if f, ok := mp.(interface{ ForceFlush(context.Context) error }); ok {
			flushes = append(flushes, f.ForceFlush)
		}
	case s.Metrics:
		exp := metricExporter{newPoster(signalURL(s.Endpoint, s.MetricsEndpoint, "/v1/metrics"), s.Headers)}
		var ropts []sdkmetric.PeriodicReaderOption
		if s.MetricInterval > 0 {
			ropts = append(ropts, sdkmetric.WithInterval(s.MetricInterval))
		}
		p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, ropts...)), sdkmetric.WithResource(res))
		mp = p
		stops, flushes = append(stops, p.Shutdown), append(flushes, p.ForceFlush)
	}
	if mp != nil {
		inst, err := newInstruments(mp.Meter(ScopeName, metric.WithInstrumentationVersion(s.Version), metric.WithSchemaURL(SchemaURL)), t)
		if err != nil {
			return fail(fmt.Errorf("telemetry: metrics: %w", err))
		}
		st.inst = inst
	}
	switch {
	case s.LoggerProvider != nil:
		st.logger = s.LoggerProvider.Logger(ScopeName, otellog.WithInstrumentationVersion(s.Version), otellog.WithSchemaURL(SchemaURL))
		if f, ok := s.LoggerProvider.(interface{ ForceFlush(context.Context) error }); ok {
			flushes = append(flushes, f.ForceFlush)
		}
	case s.Logs:
		exp := &logExporter{p: newPoster(signalURL(s.Endpoint, s.LogsEndpoint, "/v1/logs"), s.Headers)}
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
		st.logger = lp.Logger(ScopeName, otellog.WithInstrumentationVersion(s.Version), otellog.WithSchemaURL(SchemaURL))
		stops, flushes = append(stops, lp.Shutdown), append(flushes, lp.ForceFlush)
	}
	st.flush = func(ctx context.Context) error {
		var errs []error
		for _, f := range flushes {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}
	st.stop = func(ctx context.Context) error {
		var errs []error
		for _, f := range stops {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}
	return st, nil
}

// signalURL is a signal's endpoint: its own when given, else the base's
// path plus the signal's, else the OTLP/HTTP default on localhost.
func signalURL(base, own, path string) string {
	if own != "" {
		return own
	}
	if base == "" {
		base = "http://localhost:4318"
	}
	return strings.TrimRight(base, "/") + path
}

// newResource describes this process: service.name (OTEL_SERVICE_NAME or
// the configuration, "clara" by default), the SDK's own attributes, and
// OTEL_RESOURCE_ATTRIBUTES.
func newResource(s Settings) (*resource.Resource, error) {
	attrs, err := ParseResourceAttributes(s.ResourceAttributes)
	if err != nil {
		return nil, err
	}
	name := s.ServiceName
	if name == "" {
		for _, a := range attrs {
			if a.Key == "service.name" {
				name = a.Value.AsString()
			}
		}
	}
	if name == "" {
		name = "clara"
	}
	attrs = append(attrs, attribute.String("service.name", name), attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.name", "opentelemetry"))
	if s.Version != "" {
		attrs = append(attrs, attribute.String("service.version", s.Version))
	}
	return resource.NewWithAttributes(SchemaURL, attrs...), nil
}

// ParseResourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: key=value pairs
// separated by commas, values percent-encoded.
func ParseResourceAttributes(v string) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	for _, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("telemetry: OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", pair)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTEL_RESOURCE_ATTRIBUTES: %q: %v", pair, err)
		}
		out = append(out, attribute.String(k, dec))
	}
	return out, nil
}

// ParseHeaders reads OTEL_EXPORTER_OTLP_HEADERS: key=value pairs
// separated by commas, values percent-encoded.
func ParseHeaders(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	kv, err := ParseResourceAttributes(v)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_HEADERS", 1))
	}
	m := make(map[string]string, len(kv))
	for _, a := range kv {
		m[string(a.Key)] = a.Value.AsString()
	}
	return m, nil
}

// FromEnvironment reads the standard variables (getenv): an exporter is
// on when OTEL_EXPORTER_OTLP_ENDPOINT (or its signal's endpoint) is set,
// or OTEL_{TRACES,METRICS,LOGS}_EXPORTER says "otlp"; "none" turns a
// signal off, and OTEL_SDK_DISABLED=true everything. It returns the
// settings and whether the environment asked for anything (or disabled
// it: then disabled is true).
func FromEnvironment(getenv func(string) string) (s Settings, asked, disabled bool, err error) {
	if b, _ := strconv.ParseBool(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); b {
		return Settings{}, false, true, nil
	}
	s.Endpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	s.TracesEndpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	s.MetricsEndpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
	s.LogsEndpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"))
	s.ServiceName = strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	s.ResourceAttributes = getenv("OTEL_RESOURCE_ATTRIBUTES")
	if _, err := ParseResourceAttributes(s.ResourceAttributes); err != nil {
		return Settings{}, false, false, err
	}
	if s.Headers, err = ParseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS")); err != nil {
		return Settings{}, false, false, err
	}
	if v := strings.TrimSpace(getenv("OTEL_METRIC_EXPORT_INTERVAL")); v != "" {
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			s.MetricInterval = time.Duration(ms) * time.Millisecond
		}
	}
	signal := func(exporterVar, endpoint string) bool {
		switch strings.ToLower(strings.TrimSpace(getenv(exporterVar))) {
		case "none":
			return false
		case "otlp":
			return true
		}
		return s.Endpoint != "" || endpoint != ""
	}
	s.Traces = signal("OTEL_TRACES_EXPORTER", s.TracesEndpoint)
	s.Metrics = signal("OTEL_METRICS_EXPORTER", s.MetricsEndpoint)
	s.Logs = signal("OTEL_LOGS_EXPORTER", s.LogsEndpoint)
	return s, s.Traces || s.Metrics || s.Logs, false, nil
}
