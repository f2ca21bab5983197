package rulelua

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// strFormat is Lua 5.1's string.format: flags "-+ #0", width and precision of at most two digits
// each (so no single item can be huge), conversions c d i o u x X e E f g G q s. The result is
// capped at Limits.MaxStringBytes.
func (st *lstate) strFormat(L *lua.LState) int {
	fs := checkStr(L, 1, "format")
	top := L.GetTop()
	limit := st.lim.MaxStringBytes
	var b strings.Builder
	arg := 1
	for i := 0; i < len(fs); {
		if b.Len() > limit {
			st.raiseLimit(L, "string.format result over %d bytes", limit)
		}
		c := fs[i]
		i++
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i < len(fs) && fs[i] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		arg++
		if arg > top {
			argError(L, arg, "format", "no value")
		}
		start := i
		for i < len(fs) && strings.IndexByte("-+ #0", fs[i]) >= 0 {
			i++
		}
		if i-start > 5 {
			L.RaiseError("invalid format (repeated flags)")
		}
		flags := fs[start:i]
		ws := i
		for k := 0; k < 2 && i < len(fs) && isDigit(fs[i]); k++ {
			i++
		}
		width, _ := strconv.Atoi(fs[ws:i])
		prec, hasPrec := -1, false
		if i < len(fs) && fs[i] == '.' {
			hasPrec = true
			i++
			ps := i
			for k := 0; k < 2 && i < len(fs) && isDigit(fs[i]); k++ {
				i++
			}
			prec, _ = strconv.Atoi(fs[ps:i])
		}
		if i < len(fs) && isDigit(fs[i]) {
			L.RaiseError("invalid format (width or precision too long)")
		}
		if i >= len(fs) {
			L.RaiseError("invalid option '%%' to 'format'")
		}
		conv := fs[i]
		i++
		spec := "%" + flags + fs[ws:i-1]
		switch conv {
		case 'c':
			n := checkNum(L, arg, "format")
			b.WriteString(pad(string([]byte{byte(clampInt(n))}), flags, width))
		case 'd', 'i':
			n := checkNum(L, arg, "format")
			b.WriteString(sprintf(spec+"d", int64(clampInt(n))))
		case 'o', 'u', 'x', 'X':
			n := checkNum(L, arg, "format")
			verb := string(conv)
			if conv == 'u' {
				verb = "d"
			}
			b.WriteString(sprintf(spec+verb, uint64(int64(clampInt(n)))))
		case 'e', 'E', 'f', 'g', 'G':
			n := checkNum(L, arg, "format")
			if math.IsInf(n, 0) || math.IsNaN(n) {
				s := "nan"
				if math.IsInf(n, 1) {
					s = "inf"
				} else if math.IsInf(n, -1) {
					s = "-inf"
				}
				b.WriteString(pad(s, flags, width))
				break
			}
			if !hasPrec {
				spec += ".6"
			}
			b.WriteString(sprintf(spec+string(conv), n))
		case 'q':
			s := checkStr(L, arg, "format")
			if b.Len()+2*len(s) > limit {
				st.raiseLimit(L, "string.format result over %d bytes", limit)
			}
			addQuoted(&b, s)
		case 's':
			s := L.ToStringMeta(L.Get(arg)).String()
			if hasPrec && prec < len(s) {
				s = s[:prec]
			}
			if b.Len()+len(s) > limit {
				st.raiseLimit(L, "string.format result over %d bytes", limit)
			}
			b.WriteString(pad(s, flags, width))
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
	}
	st.charge(L, b.Len(), "string.format")
	L.Push(lua.LString(b.String()))
	return 1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func pad(s, flags string, width int) string {
	if len(s) >= width {
		return s
	}
	fill := strings.Repeat(" ", width-len(s))
	if strings.IndexByte(flags, '-') >= 0 {
		return s + fill
	}
	return fill + s
}

func addQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString("\\\n")
		case '\r':
			b.WriteString("\\r")
		case 0:
			b.WriteString("\\000")
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
