//go:build unix

package callbacks

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkTrigger_dryRun_10000x50 is SPEC §12's globs row: 10,000 changed
// paths against 50 active callbacks, dry run (goal ≤ 20 ms).
func BenchmarkTrigger_dryRun_10000x50(b *testing.B) { benchTriggerDryRun(b, 10000) }

// BenchmarkTrigger_dryRun_scaling is the curve of make bench's scaling
// section: 1,000 to 100,000 changed paths against the same 50 callbacks.
func BenchmarkTrigger_dryRun_scaling(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("paths=%d", n), func(b *testing.B) { benchTriggerDryRun(b, n) })
	}
}

func benchTriggerDryRun(b *testing.B, paths int) {
	e := newEnv(b)
	kinds := []func(i int) any{
		func(i int) any { return fmt.Sprintf("*.ext%d", i) },
		func(i int) any { return fmt.Sprintf("src/pkg%d/**/*.go", i) },
		func(i int) any { return []string{fmt.Sprintf("/module%d/", i), "!*.md"} },
		func(i int) any { return fmt.Sprintf("**/test_%d_*.py", i) },
		func(i int) any { return fmt.Sprintf("docs/**/chapter%d?.[mt]d", i) },
	}
	for i := range 50 {
		e.create(b, "w", map[string]any{"name": fmt.Sprintf("cb%d", i), "pattern": kinds[i%len(kinds)](i), "script_content": "true"})
	}
	files := make([]string, paths)
	for i := range files {
		switch i % 5 {
		case 0:
			files[i] = fmt.Sprintf("src/pkg%d/sub/dir/file%d.go", i%60, i)
		case 1:
			files[i] = fmt.Sprintf("module%d/a/b/readme%d.md", i%60, i)
		case 2:
			files[i] = fmt.Sprintf("%s/tests/test_%d_x.py", e.root, i%60)
		case 3:
			files[i] = fmt.Sprintf("docs/book/part/chapter%d.md", i%60)
		default:
			files[i] = fmt.Sprintf("assets/img/pic%d.ext%d", i, i%60)
		}
	}
	o, err := e.m.Trigger(context.Background(), "w", files, true)
	if err != nil || len(o.Matches) == 0 {
		b.Fatal(o, err)
	}
	n := 0
	for _, m := range o.Matches {
		n += len(m.Files)
	}
	b.ReportMetric(float64(n), "matches")
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.m.Trigger(context.Background(), "w", files, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBlockingRun_true is one blocking run of `true`: process start,
// log, list file, group clean-up.
func BenchmarkBlockingRun_true(b *testing.B) {
	e := newEnv(b)
	e.create(b, "w", map[string]any{"name": "t", "pattern": "*.a", "blocking": true, "timeout_secs": 10, "script_content": "true"})
	files := []string{"x.a"}
	b.ResetTimer()
	for b.Loop() {
		o, err := e.m.Trigger(context.Background(), "w", files, false)
		if err != nil || len(o.Runs) != 1 || !o.Runs[0].OK {
			b.Fatal(o, err)
		}
	}
}
