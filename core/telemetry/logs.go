package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
)

// LogsOn reports whether records are exported as OTLP logs.
func (t *T) LogsOn() bool {
	st := t.state()
	return st != nil && st.logger != nil
}

// AuditRecord exports one audit record (its JSON line as the body, its
// main fields as attributes) as an OTLP log record, in the trace of the
// call when there is one.
func (t *T) AuditRecord(ctx context.Context, at time.Time, line []byte, attrs ...attribute.KeyValue) {
	st := t.state()
	if st == nil || st.logger == nil {
		return
	}
	var r otellog.Record
	r.SetTimestamp(at)
	r.SetObservedTimestamp(time.Now())
	r.SetSeverity(otellog.SeverityInfo)
	r.SetSeverityText("INFO")
	r.SetEventName("clara.audit")
	r.SetBody(attribute.StringValue(string(line)))
	r.AddAttributes(attrs...)
	st.logger.Emit(ctx, r)
}
