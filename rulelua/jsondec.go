package rulelua

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"

	"github.com/clara-lib/clara/core/jsonx"
)

// Estimates of what decoded values hold in memory (measured on gopher-lua v1.1.2), charged
// against the run's byte budget: 1 MiB of `{"a":1},` decoded to ~370 MiB of Lua tables, 1 MiB
// of `[],` to ~40 MiB.
const (
	jsonTableCost = 112  // an LTable and its slot in the parent
	jsonSlotCost  = 16   // a scalar value
	jsonArrayCost = 512  // the array part an array's first element allocates (32 slots)
	jsonHashCost  = 2560 // the maps and key list an object's first key allocates
	jsonKeyCost   = 96   // each further key of an object
)

// jsonDecoder decodes JSON straight into Lua values (json.decode, call_tool results), as
// encoding/json followed by toLua would, but polling the deadline and charging the values it
// builds as it goes: encoding/json takes ~100 ms on 1 MiB of small values and cannot be
// interrupted.
type jsonDecoder struct {
	st   *lstate
	L    *lua.LState
	data string
	pos  int
	n    int // values decoded
	// quiet: a limit or timeout is returned (and kept in st.fatal) rather than raised, for
	// decoding outside a protected call (a Lua tool's arguments).
	quiet bool
	// pending values and keys of the arrays and objects being decoded: a table is made once
	// its size is known (gopher-lua's first string key otherwise allocates a 32-slot map).
	vals []lua.LValue
	keys []string
	// boxes boxes the strings decoded.
	boxes valueBoxes
	// tables: where a tool's arguments take their objects from (nil: json.decode's values,
	// which are made anew).
	tables *tablePool
}

var errJSONEnd = errors.New("unexpected end of JSON input")

// decodeJSONLua decodes data. Syntax errors are returned; timeouts and limits are raised.
func (st *lstate) decodeJSONLua(L *lua.LState, data string) (lua.LValue, error) {
	d := jsonDecoder{st: st, L: L, data: data, vals: st.decVals, keys: st.decKeys}
	v, err := d.value(0)
	st.decVals, st.decKeys = d.vals[:0], d.keys[:0]
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos < len(d.data) {
		return nil, fmt.Errorf("invalid character %s after top-level value", quoteChar(d.data[d.pos]))
	}
	return v, nil
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

func (d *jsonDecoder) skipSpace() {
	// Compact JSON has none: one comparison says so.
	for d.pos < len(d.data) && d.data[d.pos] <= ' ' {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// count accounts for one value costing cost bytes.
func (d *jsonDecoder) count(cost int) error {
	d.n++
	if d.n > maxValues {
		return d.limit("value too large to convert (more than %d values)", maxValues)
	}
	if err := d.charge(cost); err != nil {
		return err
	}
	if d.n&1023 == 0 {
		if d.quiet {
			if d.st.dctx.expired() {
				return d.st.fail(d.st.timeoutError())
			}
		} else {
			d.st.checkDeadline(d.L)
		}
	}
	return nil
}

// charge accounts for cost bytes of decoded values.
func (d *jsonDecoder) charge(cost int) error {
	st := d.st
	st.bytes += int64(cost)
	if st.bytes > st.lim.MaxAllocBytes {
		return d.limit("run built more than %d bytes of strings and decoded values", st.lim.MaxAllocBytes)
	}
	return nil
}

// limit raises a limit error, or returns it when quiet.
func (d *jsonDecoder) limit(format string, args ...any) error {
	if d.quiet {
		name := d.st.script.name
		return d.st.fail(newError(KindLimit, name, name+": arguments: "+sprintf(format, args...), nil))
	}
	d.st.raiseLimit(d.L, format, args...)
	return nil
}

func (d *jsonDecoder) value(depth int) (lua.LValue, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, errJSONEnd
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		if err := d.count(jsonSlotCost); err != nil {
			return nil, err
		}
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return d.boxes.box(s), nil
	case c == '-' || c >= '0' && c <= '9':
		if err := d.count(jsonSlotCost); err != nil {
			return nil, err
		}
		return d.number()
	case c == 't':
		return d.literal("true", lua.LTrue)
	case c == 'f':
		return d.literal("false", lua.LFalse)
	case c == 'n':
		return d.literal("null", lua.LNil)
	default:
		return nil, fmt.Errorf("invalid character %s looking for beginning of value", quoteChar(c))
	}
}

func (d *jsonDecoder) literal(word string, v lua.LValue) (lua.LValue, error) {
	if err := d.count(jsonSlotCost); err != nil {
		return nil, err
	}
	for i := 0; i < len(word); i++ {
		if d.pos+i >= len(d.data) {
			return nil, errJSONEnd
		}
		if d.data[d.pos+i] != word[i] {
			return nil, fmt.Errorf("invalid character %s in literal %s (expecting %s)", quoteChar(d.data[d.pos+i]), word, quoteChar(word[i]))
		}
	}
	d.pos += len(word)
	return v, nil
}

func (d *jsonDecoder) enter(depth int) error {
	if depth >= maxDepth {
		if d.quiet {
			return fmt.Errorf("value nested more than %d levels", maxDepth)
		}
		d.L.RaiseError("value nested more than %d levels", maxDepth)
	}
	return d.count(jsonTableCost)
}

func (d *jsonDecoder) array(depth int) (lua.LValue, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	d.pos++ // [
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return d.L.CreateTable(0, 0), nil
	}
	mark := len(d.vals)
	defer d.pop(mark)
	for i := 1; ; i++ {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if i == 1 {
			if err := d.charge(jsonArrayCost); err != nil {
				return nil, err
			}
		}
		d.vals = append(d.vals, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, errJSONEnd
		}
		switch c := d.data[d.pos]; c {
		case ',':
			d.pos++
		case ']':
			d.pos++
			vals := d.vals[mark:]
			t := d.L.CreateTable(len(vals), 0)
			for j, v := range vals {
				t.RawSetInt(j+1, v)
			}
			return t, nil
		default:
			return nil, fmt.Errorf("invalid character %s after array element", quoteChar(c))
		}
	}
}

// pop drops the pending values (and keys) of a finished array or object.
func (d *jsonDecoder) pop(mark int) {
	clear(d.vals[mark:])
	d.vals = d.vals[:mark]
	if len(d.keys) > mark {
		clear(d.keys[mark:])
		d.keys = d.keys[:mark]
	}
}

func (d *jsonDecoder) object(depth int) (lua.LValue, error) {
	if err := d.enter(depth); err != nil {
		return nil, err
	}
	d.pos++ // {
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return d.L.CreateTable(0, 0), nil
	}
	// keys and vals grow together here: keys[i] is vals[i]'s key.
	for len(d.keys) < len(d.vals) {
		d.keys = append(d.keys, "")
	}
	mark := len(d.vals)
	defer d.pop(mark)
	for first := true; ; {
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, errJSONEnd
		}
		if c := d.data[d.pos]; c != '"' {
			return nil, fmt.Errorf("invalid character %s looking for beginning of object key string", quoteChar(c))
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, errJSONEnd
		}
		if c := d.data[d.pos]; c != ':' {
			return nil, fmt.Errorf("invalid character %s after object key", quoteChar(c))
		}
		d.pos++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		cost := jsonKeyCost
		if first {
			cost, first = jsonHashCost, false
		}
		if err := d.charge(cost); err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
		d.skipSpace()
		if d.pos >= len(d.data) {
			return nil, errJSONEnd
		}
		switch c := d.data[d.pos]; c {
		case ',':
			d.pos++
		case '}':
			d.pos++
			vals := d.vals[mark:]
			if t := newObjectTable(d.keys[mark:], vals, &d.boxes, d.tables); t != nil {
				return t, nil
			}
			t := d.L.CreateTable(0, len(vals))
			for j, v := range vals {
				t.RawSetString(d.keys[mark+j], v)
			}
			return t, nil
		default:
			return nil, fmt.Errorf("invalid character %s after object key:value pair", quoteChar(c))
		}
	}
}

// str decodes the string starting at d.pos (a '"'). Plain strings are sliced; strings with
// escapes or invalid UTF-8 are decoded by jsonx.AppendUnescaped, as encoding/json decodes them;
// one it refuses goes through encoding/json for encoding/json's message.
func (d *jsonDecoder) str() (string, error) {
	start := d.pos
	i := start + 1
	plain := true
	data := d.data
	for {
		// Runs of plain bytes are most of a string: one table lookup each.
		for i < len(data) && jsonx.Plain(data[i]) {
			i++
		}
		if i >= len(d.data) {
			return "", errJSONEnd
		}
		c := d.data[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			plain = false
			i += 2
			continue
		}
		if c < 0x20 {
			return "", fmt.Errorf("invalid character %s in string literal", quoteChar(c))
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
		i++
	}
	d.pos = i + 1
	raw := d.data[start:d.pos]
	if plain {
		return raw[1 : len(raw)-1], nil
	}
	if !utf8.ValidString(raw) || strings.IndexByte(raw, '\\') >= 0 {
		out, ok := jsonx.AppendUnescaped(make([]byte, 0, len(raw)), []byte(raw[1:len(raw)-1]))
		if !ok {
			var s string
			if err := json.Unmarshal([]byte(raw), &s); err != nil {
				return "", err
			}
			return s, nil
		}
		return string(out), nil
	}
	return raw[1 : len(raw)-1], nil
}

// number decodes a JSON number (RFC 8259 grammar) at d.pos.
func (d *jsonDecoder) number() (lua.LValue, error) {
	start := d.pos
	i := start
	data := d.data
	digits := func() int {
		n := 0
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if data[i] == '-' {
		i++
	}
	if i >= len(data) {
		return nil, errJSONEnd
	}
	if data[i] == '0' {
		i++
	} else if digits() == 0 {
		return nil, fmt.Errorf("invalid character %s in numeric literal", quoteChar(data[i]))
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) {
			return nil, errJSONEnd
		}
		if digits() == 0 {
			return nil, fmt.Errorf("invalid character %s after decimal point in numeric literal", quoteChar(data[i]))
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) {
			return nil, errJSONEnd
		}
		if digits() == 0 {
			return nil, fmt.Errorf("invalid character %s in exponent of numeric literal", quoteChar(data[i]))
		}
	}
	d.pos = i
	if f, ok := smallInteger(data[start:i]); ok {
		return d.boxes.number(f), nil
	}
	f, err := strconv.ParseFloat(data[start:i], 64)
	if err != nil {
		return nil, fmt.Errorf("cannot unmarshal number %s into Go value of type float64", data[start:i])
	}
	return d.boxes.number(f), nil
}

// smallInteger is ParseFloat for an integer of at most 15 digits (exact in a float64), the
// usual number of a tool's arguments, without its general path. "-0" is left to ParseFloat.
func smallInteger(s string) (float64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 15 || neg && s == "0" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return float64(n), true
}
