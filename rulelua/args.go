package rulelua

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// Argument helpers in the style of gopher-lua's Check* functions, with Lua 5.1's wording:
// "bad argument #1 to 'notify' (string expected, got nil)".

func argError(L *lua.LState, n int, fname, msg string) {
	L.RaiseError("bad argument #%d to '%s' (%s)", n, fname, msg)
}

func typeName(L *lua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

func typeError(L *lua.LState, n int, fname, want string) {
	argError(L, n, fname, want+" expected, got "+typeName(L, n))
}

func checkAny(L *lua.LState, n int, fname string) lua.LValue {
	if n > L.GetTop() {
		argError(L, n, fname, "value expected")
	}
	return L.Get(n)
}

func checkStr(L *lua.LState, n int, fname string) string {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return v.String()
	}
	typeError(L, n, fname, "string")
	return ""
}

func optStr(L *lua.LState, n int, fname, def string) string {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkStr(L, n, fname)
}

// toNumber converts a number or a numeric string as Lua's arithmetic does.
func toNumber(v lua.LValue) (float64, bool) {
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x), true
	case lua.LString:
		s := strings.TrimSpace(string(x))
		if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
			u, err := strconv.ParseUint(s[2:], 16, 64)
			return float64(u), err == nil
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	return 0, false
}

func checkNum(L *lua.LState, n int, fname string) float64 {
	f, ok := toNumber(L.Get(n))
	if !ok {
		typeError(L, n, fname, "number")
	}
	return f
}

// clampInt converts a Lua number to an int the way a C cast does, but saturating at ±2^53 so
// that later arithmetic cannot overflow.
func clampInt(f float64) int {
	const lim = 1 << 53
	switch {
	case math.IsNaN(f):
		return 0
	case f >= lim:
		return lim
	case f <= -lim:
		return -lim
	}
	return int(f)
}

func checkInt(L *lua.LState, n int, fname string) int {
	return clampInt(checkNum(L, n, fname))
}

func optInt(L *lua.LState, n int, fname string, def int) int {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkInt(L, n, fname)
}

func checkTable(L *lua.LState, n int, fname string) *lua.LTable {
	t, ok := L.Get(n).(*lua.LTable)
	if !ok {
		typeError(L, n, fname, "table")
	}
	return t
}

// posrelat turns a negative string position into a positive one (Lua 5.1's posrelat).
func posrelat(pos, l int) int {
	if pos < 0 {
		return l + pos + 1
	}
	return pos
}
