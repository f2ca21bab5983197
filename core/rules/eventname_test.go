package rules

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidEventName_asTheRegexp: the loop accepts exactly what
// ^[a-z][a-z0-9_.]*$ (at most 128 bytes) does, on every string of one and
// two bytes and on longer ones.
func TestValidEventName_asTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[a-z][a-z0-9_.]*$`)
	check := func(name string) {
		if got, want := ValidEventName(name), len(name) <= 128 && re.MatchString(name); got != want {
			t.Fatalf("ValidEventName(%q) = %v, want %v", name, got, want)
		}
	}
	check("")
	for a := 0; a < 256; a++ {
		check(string([]byte{byte(a)}))
		for b := 0; b < 256; b++ {
			check(string([]byte{byte(a), byte(b)}))
			check("on_x" + string([]byte{byte(a), byte(b)}))
		}
	}
	check(strings.Repeat("a", 128))
	check(strings.Repeat("a", 129))
	check("bench.tick\n")
}
