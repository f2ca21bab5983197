package rulelua

import (
	"context"
	"errors"
	"testing"
	"time"
)

// FuzzRun compiles and runs arbitrary source with a 10 ms deadline: it must never panic, never
// hang (5 s is the bound: fuzzing workers on a loaded 2-core machine stall for ~1 s at times;
// the corpus test checks the tight 250 ms margin), and only ever fail with an *Error.
func FuzzRun(f *testing.F) {
	for _, a := range attacks {
		if len(a.src) < 4096 {
			f.Add(a.src)
		}
	}
	f.Add(seedRule)
	f.Add(wordCount)
	f.Add(cleanCheck)
	f.Fuzz(func(t *testing.T, src string) {
		s, err := CompileWithLimits("fuzz.lua", src, Limits{Deadline: 10 * time.Millisecond})
		if err != nil {
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("Compile error %v is not an *Error", err)
			}
			return
		}
		start := time.Now()
		_, err = s.Run(context.Background(), seedCtx, &testHost{})
		if el := time.Since(start); el > 5*time.Second*raceScale {
			t.Fatalf("run took %v", el)
		}
		var le *Error
		if err != nil && !errors.As(err, &le) {
			t.Fatalf("Run error %v is not an *Error", err)
		}
		if err != nil && le.Kind == KindInternal {
			t.Fatalf("internal error: %v", err)
		}
	})
}
