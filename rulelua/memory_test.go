package rulelua

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A script that builds a large table is stopped by the memory cap with an error saying so,
// whether it holds tables, strings or closures, and pcall cannot swallow it.
func TestMemoryCap_stopsWhatAScriptHolds(t *testing.T) {
	lim := Limits{MaxMemoryBytes: 8 << 20, Deadline: 20 * time.Second}
	for name, src := range map[string]string{
		"tables":   `local t = {} for i = 1, 1e8 do t[i] = {i} end return #t`,
		"strings":  `local t = {} for i = 1, 1e8 do t[i] = string.rep("x", 200) .. i end return #t`,
		"hash":     `local t = {} for i = 1, 1e8 do t["k" .. i] = i end return 1`,
		"globals":  `big = {} for i = 1, 1e8 do big[i] = i end return #big`,
		"closures": `local t = {} for i = 1, 1e8 do local v = {i} t[i] = function() return v end end return #t`,
		"pcall":    `local ok = pcall(function() local t = {} for i = 1, 1e8 do t[i] = {i} end end) return ok`,
		"upvalue":  `local t = {} local function f() for i = 1, 1e8 do t[#t + 1] = {i} end end f() return #t`,
	} {
		t.Run(name, func(t *testing.T) {
			s, err := CompileWithLimits(name, src, lim)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Run(context.Background(), nil, nil)
			var le *Error
			if !errors.As(err, &le) || le.Kind != KindLimit || !errors.Is(err, ErrLimit) {
				t.Fatalf("got %#v, %v; want a limit error", res.Value, err)
			}
			if !strings.Contains(err.Error(), "over its memory limit of 8 MiB (memory_mb)") {
				t.Fatalf("message: %v", err)
			}
		})
	}
}

// A script that allocates far more than the cap but holds little at any time runs to the end:
// garbage is not counted. One that holds less than the cap runs too.
func TestMemoryCap_normalScriptsRun(t *testing.T) {
	lim := Limits{MaxMemoryBytes: 8 << 20, Deadline: 20 * time.Second}
	for name, c := range map[string]struct {
		src  string
		want any
	}{
		"churn": {`local n = 0 for j = 1, 60 do local t = {} for i = 1, 5000 do t[i] = {i} end n = n + #t end return n`, 300000.0},
		"holds": {`local t = {} for i = 1, 20000 do t[i] = {i} end return #t`, 20000.0},
	} {
		s, err := CompileWithLimits(name, c.src, lim)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(context.Background(), nil, nil)
		if err != nil || res.Value != c.want {
			t.Errorf("%s: got %#v, %v", name, res.Value, err)
		}
	}
}

// The default cap is the seed's 50 MiB.
func TestMemoryCap_default(t *testing.T) {
	s := mustCompile(t, "d", `return 1`)
	if s.lim.MaxMemoryBytes != 50<<20 {
		t.Fatalf("default %d", s.lim.MaxMemoryBytes)
	}
}
