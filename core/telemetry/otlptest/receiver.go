// Package otlptest is an OTLP/HTTP receiver for tests: it listens on
// loopback, decodes what the real exporters send (protobuf, as
// go.opentelemetry.io/proto/otlp defines it) and keeps the spans, metric
// names and log records for the test to look at.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Name                      string
	Kind                      int32
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Attrs                     map[string]any
	Events                    []Event
	StatusError               bool
	StatusMessage             string
	Resource                  map[string]any
}

// Event is one span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Metric is one received data point's metric and attributes.
type Metric struct {
	Name  string
	Attrs map[string]any
	Value float64 // a sum's or gauge's value, a histogram's count
}

// Log is one received log record.
type Log struct {
	Body            string
	EventName       string
	Attrs           map[string]any
	TraceID, SpanID string
}

// Receiver collects what is exported to it.
type Receiver struct {
	URL string // http://127.0.0.1:PORT, the OTLP endpoint
	srv *http.Server

	mu      sync.Mutex
	spans   []Span
	metrics []Metric
	logs    []Log
	bodies  [][]byte // every request body, decoded from gzip
}

// Start starts a receiver on loopback; it stops when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", r.traces)
	mux.HandleFunc("/v1/metrics", r.metricsHandler)
	mux.HandleFunc("/v1/logs", r.logsHandler)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // a test's receiver; net/http recovers its handlers' panics
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *Receiver) body(w http.ResponseWriter, req *http.Request) ([]byte, bool) {
	var rd io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return nil, false
		}
		rd = z
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	r.mu.Unlock()
	return b, true
}

func reply(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func (r *Receiver) traces(w http.ResponseWriter, req *http.Request) {
	b, ok := r.body(w, req)
	if !ok {
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, Kind: int32(s.Kind), TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					Attrs: attrs(s.Attributes), Resource: res}
				if len(s.ParentSpanId) > 0 {
					sp.ParentID = hex.EncodeToString(s.ParentSpanId)
				}
				if s.Status != nil && s.Status.Code == 2 {
					sp.StatusError, sp.StatusMessage = true, s.Status.Message
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, Event{Name: e.Name, Attrs: attrs(e.Attributes)})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	reply(w, &coltrace.ExportTraceServiceResponse{})
}

func (r *Receiver) metricsHandler(w http.ResponseWriter, req *http.Request) {
	b, ok := r.body(w, req)
	if !ok {
		return
	}
	var msg colmetrics.ExportMetricsServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Metric
	for _, rm := range msg.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if s := m.GetSum(); s != nil {
					for _, p := range s.DataPoints {
						got = append(got, Metric{Name: m.Name, Attrs: attrs(p.Attributes), Value: float64(p.GetAsInt()) + p.GetAsDouble()})
					}
				}
				if g := m.GetGauge(); g != nil {
					for _, p := range g.DataPoints {
						got = append(got, Metric{Name: m.Name, Attrs: attrs(p.Attributes), Value: float64(p.GetAsInt()) + p.GetAsDouble()})
					}
				}
				if h := m.GetHistogram(); h != nil {
					for _, p := range h.DataPoints {
						got = append(got, Metric{Name: m.Name, Attrs: attrs(p.Attributes), Value: float64(p.Count)})
					}
				}
			}
		}
	}
	r.mu.Lock()
	r.metrics = append(r.metrics, got...)
	r.mu.Unlock()
	reply(w, &colmetrics.ExportMetricsServiceResponse{})
}

func (r *Receiver) logsHandler(w http.ResponseWriter, req *http.Request) {
	b, ok := r.body(w, req)
	if !ok {
		return
	}
	var msg collogs.ExportLogsServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Log
	for _, rl := range msg.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, l := range sl.LogRecords {
				got = append(got, Log{Body: l.GetBody().GetStringValue(), EventName: l.EventName, Attrs: attrs(l.Attributes),
					TraceID: hex.EncodeToString(l.TraceId), SpanID: hex.EncodeToString(l.SpanId)})
			}
		}
	}
	r.mu.Lock()
	r.logs = append(r.logs, got...)
	r.mu.Unlock()
	reply(w, &collogs.ExportLogsServiceResponse{})
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = value(kv.Value)
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Metrics returns the data points received so far.
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Metric(nil), r.metrics...)
}

// MetricNames returns the names of the metrics received, sorted.
func (r *Receiver) MetricNames() []string {
	seen := map[string]bool{}
	for _, m := range r.Metrics() {
		seen[m.Name] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Logs returns the log records received so far.
func (r *Receiver) Logs() []Log {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Log(nil), r.logs...)
}

// Bodies returns every request body received (decoded protobuf bytes), to
// search for what must not be there.
func (r *Receiver) Bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// Wait polls until ok holds or the timeout passes; it reports whether ok
// held.
func (r *Receiver) Wait(timeout time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
