package toolbox_test

import (
	"testing"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/toolbox"
)

// BenchmarkAudit_add is what recording one call costs the call path (the
// ring only, as configured by default): make bench's audit row.
func BenchmarkAudit_add(b *testing.B) {
	a := toolbox.NewAudit(&logging.Logger{})
	args := []byte(`{"message":"hello","n":42}`)
	r := toolbox.Record{Time: time.Now(), Session: "default", Tool: "echo", Duration: time.Microsecond}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Add(r, args)
	}
	b.StopTimer()
	if got := a.Tail(1); len(got) != 1 || got[0].Tool != "echo" {
		b.Fatal(got)
	}
}
