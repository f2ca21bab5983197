package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLP over HTTP with protobuf bodies, written on the SDK's exporter
// interfaces and the OTLP data messages (TracesData, MetricsData,
// LogsData), whose encoding is that of the export requests.
//
// Why not the otlp*http exporters: they import the collector packages of
// go.opentelemetry.io/proto/otlp for their request types, and those hold
// the gRPC service stubs too, so the whole of gRPC and grpc-gateway came
// into libclara.so with them: 8.5 MB more for the library against about
// 2.5 MB this way (docs/performance.md). The wire is the same; the tests'
// receiver decodes it with the collector's request types.

// poster sends one signal's protobuf bodies to its URL.
type poster struct {
	url     string
	headers map[string]string
	client  *http.Client
	stopped atomic.Bool
}

func newPoster(url string, headers map[string]string) *poster {
	return &poster{url: url, headers: headers, client: &http.Client{Timeout: 10 * time.Second}}
}

// post sends m; a non-2xx answer is an error naming its status (the
// SDK's processors report it to the error handler).
func (p *poster) post(ctx context.Context, m proto.Message) error {
	if p.stopped.Load() {
		return nil
	}
	body, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "clara-otlp/"+ScopeName)
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("otlp: POST %s: %w", p.url, err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("otlp: POST %s: status %d", p.url, resp.StatusCode)
	}
	return nil
}

func (p *poster) shutdown() {
	p.stopped.Store(true)
	p.client.CloseIdleConnections()
}

// ---- traces

type spanExporter struct{ p *poster }

func (e spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	return e.p.post(ctx, &tracepb.TracesData{ResourceSpans: resourceSpans(spans)})
}

func (e spanExporter) Shutdown(context.Context) error { e.p.shutdown(); return nil }

// groups gathers items by resource, then by scope, in order of first
// appearance.
type groups[T any] struct {
	order []*resource.Resource
	by    map[*resource.Resource]*scopes[T]
}

type scopes[T any] struct {
	order []instrumentation.Scope
	by    map[scopeKey][]T
}

type scopeKey struct{ name, version, schema string }

func keyOf(s instrumentation.Scope) scopeKey { return scopeKey{s.Name, s.Version, s.SchemaURL} }

func (g *groups[T]) add(r *resource.Resource, s instrumentation.Scope, item T) {
	if g.by == nil {
		g.by = map[*resource.Resource]*scopes[T]{}
	}
	sc := g.by[r]
	if sc == nil {
		sc = &scopes[T]{by: map[scopeKey][]T{}}
		g.by[r] = sc
		g.order = append(g.order, r)
	}
	k := keyOf(s)
	if _, ok := sc.by[k]; !ok {
		sc.order = append(sc.order, s)
	}
	sc.by[k] = append(sc.by[k], item)
}

func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	var g groups[*tracepb.Span]
	for _, s := range spans {
		g.add(s.Resource(), s.InstrumentationScope(), span(s))
	}
	var out []*tracepb.ResourceSpans
	for _, r := range g.order {
		rs := &tracepb.ResourceSpans{Resource: resourceOf(r), SchemaUrl: r.SchemaURL()}
		for _, sc := range g.by[r].order {
			rs.ScopeSpans = append(rs.ScopeSpans, &tracepb.ScopeSpans{Scope: scopeOf(sc), SchemaUrl: sc.SchemaURL, Spans: g.by[r].by[keyOf(sc)]})
		}
		out = append(out, rs)
	}
	return out
}

func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  uint32(sc.TraceFlags()) | 0x100, // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
		Name:                   s.Name(),
		Kind:                   tracepb.Span_SpanKind(s.SpanKind()), // the same numbers
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedEventsCount:     uint32(s.DroppedEvents()),
		DroppedLinksCount:      uint32(s.DroppedLinks()),
	}
	if p := s.Parent(); p.IsValid() {
		psid := p.SpanID()
		out.ParentSpanId = psid[:]
		if p.IsRemote() {
			out.Flags |= 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
		}
	}
	for _, ev := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{TimeUnixNano: unixNano(ev.Time), Name: ev.Name,
			Attributes: keyValues(ev.Attributes), DroppedAttributesCount: uint32(ev.DroppedAttributeCount)})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(l.DroppedAttributeCount), Flags: uint32(l.SpanContext.TraceFlags()) | 0x100})
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return out
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func resourceOf(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return &resourcepb.Resource{Attributes: keyValues(r.Attributes())}
}

func scopeOf(s instrumentation.Scope) *commonpb.InstrumentationScope {
	return &commonpb.InstrumentationScope{Name: s.Name, Version: s.Version, Attributes: keyValues(s.Attributes.ToSlice())}
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return arrayValue(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return arrayValue(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return arrayValue(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return arrayValue(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return arrayValue(v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	}
	return &commonpb.AnyValue{}
}

// arrayValue is the OTLP array of xs, each made an attribute value by as.
func arrayValue[T any](xs []T, as func(T) attribute.Value) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, 0, len(xs))
	for _, x := range xs {
		vals = append(vals, anyValue(as(x)))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}

// ---- metrics

type metricExporter struct{ p *poster }

func (metricExporter) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (metricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	out := &metricspb.ResourceMetrics{Resource: resourceOf(rm.Resource)}
	if rm.Resource != nil {
		out.SchemaUrl = rm.Resource.SchemaURL()
	}
	for _, sm := range rm.ScopeMetrics {
		s := &metricspb.ScopeMetrics{Scope: scopeOf(sm.Scope), SchemaUrl: sm.Scope.SchemaURL}
		for _, m := range sm.Metrics {
			if pm := metricOf(m); pm != nil {
				s.Metrics = append(s.Metrics, pm)
			}
		}
		if len(s.Metrics) > 0 {
			out.ScopeMetrics = append(out.ScopeMetrics, s)
		}
	}
	if len(out.ScopeMetrics) == 0 {
		return nil
	}
	return e.p.post(ctx, &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{out}})
}

func (metricExporter) ForceFlush(context.Context) error { return nil }

func (e metricExporter) Shutdown(context.Context) error { e.p.shutdown(); return nil }

func temporality(t metricdata.Temporality) metricspb.AggregationTemporality {
	if t == metricdata.DeltaTemporality {
		return metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	return metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
}

// metricOf converts the aggregations Clara's instruments make (sums,
// gauges, explicit-bucket histograms); nil for any other.
func metricOf(m metricdata.Metrics) *metricspb.Metric {
	out := &metricspb.Metric{Name: m.Name, Description: m.Description, Unit: m.Unit}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		out.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{AggregationTemporality: temporality(d.Temporality), IsMonotonic: d.IsMonotonic, DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Sum[float64]:
		out.Data = &metricspb.Metric_Sum{Sum: &metricspb.Sum{AggregationTemporality: temporality(d.Temporality), IsMonotonic: d.IsMonotonic, DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Gauge[int64]:
		out.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Gauge[float64]:
		out.Data = &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: numberPoints(d.DataPoints)}}
	case metricdata.Histogram[int64]:
		out.Data = &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{AggregationTemporality: temporality(d.Temporality), DataPoints: histogramPoints(d.DataPoints)}}
	case metricdata.Histogram[float64]:
		out.Data = &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{AggregationTemporality: temporality(d.Temporality), DataPoints: histogramPoints(d.DataPoints)}}
	default:
		return nil
	}
	return out
}

func numberPoints[N int64 | float64](pts []metricdata.DataPoint[N]) []*metricspb.NumberDataPoint {
	out := make([]*metricspb.NumberDataPoint, 0, len(pts))
	for _, p := range pts {
		np := &metricspb.NumberDataPoint{Attributes: keyValues(p.Attributes.ToSlice()), StartTimeUnixNano: unixNano(p.StartTime), TimeUnixNano: unixNano(p.Time)}
		switch v := any(p.Value).(type) {
		case int64:
			np.Value = &metricspb.NumberDataPoint_AsInt{AsInt: v}
		case float64:
			np.Value = &metricspb.NumberDataPoint_AsDouble{AsDouble: v}
		}
		out = append(out, np)
	}
	return out
}

func histogramPoints[N int64 | float64](pts []metricdata.HistogramDataPoint[N]) []*metricspb.HistogramDataPoint {
	out := make([]*metricspb.HistogramDataPoint, 0, len(pts))
	for _, p := range pts {
		sum := float64(p.Sum)
		hp := &metricspb.HistogramDataPoint{Attributes: keyValues(p.Attributes.ToSlice()), StartTimeUnixNano: unixNano(p.StartTime),
			TimeUnixNano: unixNano(p.Time), Count: p.Count, Sum: &sum, BucketCounts: p.BucketCounts, ExplicitBounds: p.Bounds}
		if v, ok := p.Min.Value(); ok {
			f := float64(v)
			hp.Min = &f
		}
		if v, ok := p.Max.Value(); ok {
			f := float64(v)
			hp.Max = &f
		}
		out = append(out, hp)
	}
	return out
}

// ---- logs

type logExporter struct {
	p  *poster
	mu sync.Mutex // Export may be called concurrently by the batch processor
}

func (e *logExporter) Export(ctx context.Context, records []sdklog.Record) error {
	if len(records) == 0 {
		return nil
	}
	var g groups[*logspb.LogRecord]
	for i := range records {
		r := &records[i]
		g.add(r.Resource(), r.InstrumentationScope(), logRecord(r))
	}
	var out []*logspb.ResourceLogs
	for _, res := range g.order {
		rl := &logspb.ResourceLogs{Resource: resourceOf(res), SchemaUrl: res.SchemaURL()}
		for _, sc := range g.by[res].order {
			rl.ScopeLogs = append(rl.ScopeLogs, &logspb.ScopeLogs{Scope: scopeOf(sc), SchemaUrl: sc.SchemaURL, LogRecords: g.by[res].by[keyOf(sc)]})
		}
		out = append(out, rl)
	}
	return e.p.post(ctx, &logspb.LogsData{ResourceLogs: out})
}

func logRecord(r *sdklog.Record) *logspb.LogRecord {
	tid, sid := r.TraceID(), r.SpanID()
	out := &logspb.LogRecord{
		TimeUnixNano:           unixNano(r.Timestamp()),
		ObservedTimeUnixNano:   unixNano(r.ObservedTimestamp()),
		SeverityNumber:         logspb.SeverityNumber(r.Severity()), // the same numbers
		SeverityText:           r.SeverityText(),
		Body:                   anyValue(r.Body()),
		DroppedAttributesCount: uint32(r.DroppedAttributes()),
		Flags:                  uint32(r.TraceFlags()),
		EventName:              r.EventName(),
	}
	if tid.IsValid() {
		out.TraceId = tid[:]
	}
	if sid.IsValid() {
		out.SpanId = sid[:]
	}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		out.Attributes = append(out.Attributes, &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
		return true
	})
	return out
}

func (e *logExporter) Shutdown(context.Context) error { e.p.shutdown(); return nil }

func (e *logExporter) ForceFlush(context.Context) error { return nil }
