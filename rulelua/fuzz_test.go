package rulelua

import (
	"context"
	"encoding/json"
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

// FuzzCallJSON decodes arbitrary JSON arguments into a Lua tool and encodes them back, run
// after run on the same states (argument tables are recycled and shaped from run to run): the
// text must be what the map-based door (Call on encoding/json's decoding) gives, and a script
// that rewrites its arguments must leave nothing to the next run.
func FuzzCallJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":"x"}`, `{"b":"x","a":1}`, `{"a":{"b":[1,2,{"c":null}]},"d":-0}`,
		`{"city":"Lyon","country":"FR","days":3,"units":"metric","detailed":false}`, `{"k":"\u00e9\n","n":1e300}`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	echo := mustCompile(f, "fuzz_echo", `return function(args) return args end`)
	mangle := mustCompile(f, "fuzz_mangle", `return function(args)
  for k in pairs(args) do args[k] = nil end
  args.zz = {1, 2}
  return true
end`)
	f.Fuzz(func(t *testing.T, args string) {
		var m map[string]any
		if json.Unmarshal([]byte(args), &m) != nil || m == nil {
			return // CallJSON's errors are tested elsewhere; objects only here
		}
		ctx := context.Background()
		want, werr := echo.Call(ctx, m, nil)
		got, gerr := echo.CallJSON(ctx, []byte(args), nil)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: Call %v, CallJSON %v", args, werr, gerr)
		}
		if werr != nil {
			return
		}
		text, err := EncodeJSON(want.Value)
		if err != nil {
			return
		}
		if string(got.JSON) != string(text) {
			t.Fatalf("%s:\n CallJSON %s\n Call     %s", args, got.JSON, text)
		}
		if _, err := mangle.CallJSON(ctx, []byte(args), nil); err != nil {
			t.Fatalf("%s: mangle: %v", args, err)
		}
		again, err := echo.CallJSON(ctx, []byte(args), nil)
		if err != nil || string(again.JSON) != string(text) {
			t.Fatalf("%s: after a run that rewrote its arguments: %s, %v; want %s", args, again.JSON, err, text)
		}
	})
}
