package core

import (
	"context"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/telemetry/otlptest"
)

// BenchmarkEvaluate_echo_telemetry is the echo with tracing, metrics and
// the audit as OTLP logs on, each exported in batches to a receiver on
// loopback that decodes them (the bench row "telemetry", beside
// BenchmarkEvaluate_echo, where telemetry is off): what an operator's
// telemetry costs a call.
func BenchmarkEvaluate_echo_telemetry(b *testing.B) {
	rcv := otlptest.Start(b)
	var eng *Engine
	benchEcho(b, func(e *Engine) {
		if out := e.Configure([]byte(`{"telemetry":{"enabled":true,"endpoint":"` + rcv.URL + `"}}`)); !e.TelemetryOn() {
			b.Fatalf("telemetry off: %s", out)
		}
		eng = e
		b.Cleanup(func() { _ = e.tel.Close(context.Background()) })
	})
	_ = eng.FlushTelemetry(10 * time.Second)
	if !rcv.Wait(10*time.Second, func() bool { return len(rcv.Spans()) > 0 }) {
		b.Fatal("no span reached the receiver")
	}
}
