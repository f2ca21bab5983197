package telemetry_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/telemetry/otlptest"
)

func TestOff_costsNothing(t *testing.T) {
	var tel telemetry.T
	ctx := context.Background()
	meta := []byte(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`)
	allocs := testing.AllocsPerRun(100, func() {
		if tel.On() {
			t.Fatal("on")
		}
		c, span := tel.Start(ctx, "x", trace.SpanKindInternal)
		span.End()
		_ = tel.Extract(c, meta)
		telemetry.RecordDecision(c, telemetry.Decision{Layer: "rule", Outcome: telemetry.OutcomeDeny})
	})
	if allocs != 0 {
		t.Fatalf("%v allocations with telemetry off", allocs)
	}
}

func TestExport_spansMetricsLogsAndPropagation(t *testing.T) {
	rcv := otlptest.Start(t)
	var tel telemetry.T
	if err := tel.Apply(telemetry.Settings{Traces: true, Metrics: true, Logs: true, Endpoint: rcv.URL, ServiceName: "svc",
		ResourceAttributes: "deployment.environment=test%20one"}); err != nil {
		t.Fatal(err)
	}
	defer tel.Close(context.Background())
	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := tel.Extract(context.Background(), []byte(`{"traceparent":"`+parent+`","other":1}`))
	ctx, span := tel.Start(ctx, "execute_tool echo", trace.SpanKindInternal)
	telemetry.RecordDecision(ctx, telemetry.Decision{Tool: "echo", Layer: "rule", Rule: "no_echo", Outcome: telemetry.OutcomeDeny, Reason: "because"})
	h := http.Header{}
	tel.InjectHeader(ctx, h)
	meta := tel.InjectMeta(ctx, nil)
	tel.ToolCall(ctx, "echo", "denied", time.Millisecond)
	tel.AuditRecord(ctx, time.Now(), []byte(`{"tool":"echo"}`))
	span.End()
	if err := tel.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.Get("traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-") || meta["traceparent"] != h.Get("traceparent") {
		t.Fatalf("injected %q, meta %v", h.Get("traceparent"), meta)
	}
	spans := rcv.Spans()
	if len(spans) != 1 {
		t.Fatalf("spans %+v", spans)
	}
	s := spans[0]
	if s.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.ParentID != "00f067aa0ba902b7" || s.Resource["service.name"] != "svc" ||
		s.Resource["deployment.environment"] != "test one" {
		t.Fatalf("span %+v", s)
	}
	if len(s.Events) != 1 || s.Events[0].Name != telemetry.EventDecision || s.Events[0].Attrs[telemetry.AttrDecisionRule] != "no_echo" {
		t.Fatalf("events %+v", s.Events)
	}
	names := strings.Join(rcv.MetricNames(), " ")
	for _, want := range []string{telemetry.MetricToolCalls, telemetry.MetricDecisions, telemetry.MetricRateLimited} {
		if want == telemetry.MetricRateLimited {
			continue // only on rate_limited
		}
		if !strings.Contains(names, want) {
			t.Errorf("metric %s missing from %s", want, names)
		}
	}
	logs := rcv.Logs()
	if len(logs) != 1 || logs[0].Body != `{"tool":"echo"}` || logs[0].TraceID != s.TraceID {
		t.Fatalf("logs %+v", logs)
	}
}

func TestFromEnvironment(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if _, asked, _, _ := telemetry.FromEnvironment(get); asked {
		t.Fatal("asked with nothing set")
	}
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:1"
	env["OTEL_LOGS_EXPORTER"] = "none"
	s, asked, _, err := telemetry.FromEnvironment(get)
	if err != nil || !asked || !s.Traces || !s.Metrics || s.Logs {
		t.Fatalf("%+v %v %v", s, asked, err)
	}
	env["OTEL_SDK_DISABLED"] = "true"
	if _, asked, disabled, _ := telemetry.FromEnvironment(get); asked || !disabled {
		t.Fatal("OTEL_SDK_DISABLED ignored")
	}
	delete(env, "OTEL_SDK_DISABLED")
	env["OTEL_RESOURCE_ATTRIBUTES"] = "novalue"
	if _, _, _, err := telemetry.FromEnvironment(get); err == nil {
		t.Fatal("bad OTEL_RESOURCE_ATTRIBUTES accepted")
	}
}
