package main

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
)

// vouches is what shim_json_compact must say of b: exactly what
// protocol.Scan accepts as one compact value filling b, nested at most 64
// deep. It may never say yes to anything else (Go would then take invalid
// or spaced JSON as it is), and it should say yes to all of that (else the
// check saves nothing).
func vouches(b []byte) bool {
	sc, err := protocol.Scan(b, 10000)
	return err == nil && !sc.Spaced && sc.Start == 0 && sc.End == len(b) && sc.Depth <= 64
}

func checkAgrees(t *testing.T, b []byte) {
	t.Helper()
	if got, want := compactInC(b), vouches(b); got != want {
		t.Fatalf("shim_json_compact(%q) = %v, protocol.Scan says %v", b, got, want)
	}
}

func TestCompactInC_cases(t *testing.T) {
	yes := []string{
		`0`, `-0`, `1`, `-12`, `1.5`, `-0.0e+1`, `1E9`, `2e-3`, `true`, `false`, `null`, `""`, `"a"`,
		`{}`, `[]`, `[[]]`, `{"a":{}}`, `{"a":1,"b":[1,2,{"c":null}]}`, `["\"\\\/\b\f\n\r\t\u00e9\uD83D"]`,
		`"é"`, `"\u0000"`, "\"\xef\xbf\xbd\"", "\"\xf0\x9f\x98\x80\"", "\"\xf4\x8f\xbf\xbf\"", "\"\xed\x9f\xbf\"",
		`{"":""}`, `{"a":1,"a":2}`, // duplicate keys: Scan (not ScanStrict) takes them
		strings.Repeat("[", 64) + strings.Repeat("]", 64),
		strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat("}", 64),
	}
	no := []string{
		``, ` `, ` 1`, `1 `, `[1, 2]`, `{"a": 1}`, "[\n]", `{ }`, // whitespace: Go compacts
		`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `NaN`, `tru`, `nul`, `falsey`, `truefalse`,
		`"`, `"a`, `"\"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"\x01\"", "\"\t\"", "\"\x7f\"" + "x",
		"\"\xff\"", "\"\xc0\x80\"", "\"\xc1\xbf\"", "\"\xe0\x80\x80\"", "\"\xed\xa0\x80\"", "\"\xf0\x80\x80\x80\"",
		"\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"", "\"\xc3\"", "\"\xe2\x82\"", "\xc3\xa9",
		`{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{1:2}`, `[1}`, `{"a":1]`,
		`[1][2]`, `1,2`, `{}{}`, `"a""b"`, `[1 2]`, `{"a":1"b":2}`,
		strings.Repeat("[", 65) + strings.Repeat("]", 65), // valid, deeper than the C check goes
		strings.Repeat("[", 64) + "[]" + strings.Repeat("]", 64),
	}
	for _, s := range yes {
		if !compactInC([]byte(s)) || !vouches([]byte(s)) {
			t.Errorf("%q: C %v, Scan %v; want both true", s, compactInC([]byte(s)), vouches([]byte(s)))
		}
	}
	for _, s := range no {
		if compactInC([]byte(s)) {
			t.Errorf("%q: C vouches for it", s)
		}
		checkAgrees(t, []byte(s))
	}
	if compactInC(nil) {
		t.Error("nil: C vouches for it")
	}
}

// Every sequence of one or two bytes in a string, and longer ones with
// every first two bytes and the others at every boundary, against Go's
// reading of UTF-8.
func TestCompactInC_utf8(t *testing.T) {
	b := make([]byte, 0, 6)
	str := func(seq ...byte) []byte { return append(append(append(b[:0], '"'), seq...), '"') }
	edges := []byte{0x00, 0x22, 0x5c, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff}
	for c0 := 0; c0 < 256; c0++ {
		checkAgrees(t, str(byte(c0)))
		for c1 := 0; c1 < 256; c1++ {
			checkAgrees(t, str(byte(c0), byte(c1)))
			if c0 < 0xE0 || c0 > 0xEF {
				continue
			}
			for _, c2 := range edges {
				checkAgrees(t, str(byte(c0), byte(c1), c2))
			}
		}
	}
	for c0 := 0xF0; c0 <= 0xFF; c0++ {
		for c1 := 0; c1 < 256; c1++ {
			for _, c2 := range edges {
				for _, c3 := range edges {
					checkAgrees(t, str(byte(c0), byte(c1), c2, c3))
				}
			}
		}
	}
}

// Random documents, and the same cut, spliced and with bytes changed.
func TestCompactInC_random(t *testing.T) {
	rng := rand.New(rand.NewSource(16))
	atoms := []string{`0`, `-1`, `2.5e-3`, `true`, `false`, `null`, `""`, `"ab"`, `"\u00e9\n"`, "\"\xc3\xa9\"", `{}`, `[]`}
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth > 70 || rng.Intn(3) == 0 {
			return atoms[rng.Intn(len(atoms))]
		}
		n := rng.Intn(4)
		parts := make([]string, n)
		obj := rng.Intn(2) == 0
		for i := range parts {
			parts[i] = gen(depth + 1)
			if obj {
				parts[i] = `"k` + string(rune('a'+rng.Intn(3))) + `":` + parts[i]
			}
		}
		if obj {
			return "{" + strings.Join(parts, ",") + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	noise := []byte(" \t\n\r,:[]{}\"\\/u0189-+.eEtfn\x00\x1f\x7f\x80\xbf\xc3\xed\xf0\xff")
	n := 5000 // and more with go test -fuzz FuzzCompactInC
	if testing.Short() {
		n = 1000
	}
	for i := 0; i < n; i++ {
		doc := []byte(gen(0))
		if rng.Intn(4) == 0 {
			doc = []byte(strings.Repeat("[", 60+rng.Intn(8)) + string(doc) + strings.Repeat("]", 60+rng.Intn(8)))
		}
		checkAgrees(t, doc)
		for j := 0; j < 8 && len(doc) > 0; j++ {
			m := append([]byte(nil), doc...)
			switch at := rng.Intn(len(m)); rng.Intn(4) {
			case 0:
				m[at] = noise[rng.Intn(len(noise))]
			case 1:
				m = append(m[:at], m[at+1:]...)
			case 2:
				m = append(m[:at], append([]byte{noise[rng.Intn(len(noise))]}, m[at:]...)...)
			case 3:
				m = m[:at]
			}
			checkAgrees(t, m)
		}
	}
}

func FuzzCompactInC(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x\u00e9"],"b":{"c":null}}`, `[1, 2]`, "\"\xed\xa0\x80\"", `-0.0e+1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgrees(t, b) })
}
