package config

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/clara-lib/clara/core/protocol"
)

type pos struct{ Line, Col int }

// positions maps the dotted path of each key of a text to where it is
// written ("tools[1]" for the second [[tools]] table).
type positions map[string]pos

// of returns where path, or the nearest table that holds it, is written;
// zero when unknown.
func (w positions) of(path string) pos {
	for path != "" {
		if p, ok := w[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return pos{}
}

// shift moves positions found in a text that had lead cut off its start
// to where they are in the whole text.
func (w positions) shift(lead []byte) {
	for k, p := range w {
		p.Line, p.Col = shiftPos(lead, p.Line, p.Col)
		w[k] = p
	}
}

// shiftPos moves a line and column of a text that had lead cut off its
// start to where they are in the whole text (line 0 stays unknown).
func shiftPos(lead []byte, line, col int) (int, int) {
	if line <= 0 || len(lead) == 0 {
		return line, col
	}
	if line == 1 && col > 0 {
		col += len(lead) - (bytes.LastIndexByte(lead, '\n') + 1)
	}
	return line + bytes.Count(lead, []byte{'\n'}), col
}

// shiftProblems applies shiftPos to the problems in err.
func shiftProblems(err error, lead []byte) error {
	ps, ok := err.(protocol.Problems)
	if !ok || len(lead) == 0 {
		return err
	}
	for i := range ps {
		ps[i].Line, ps[i].Col = shiftPos(lead, ps[i].Line, ps[i].Col)
	}
	return ps
}

// tomlPositions reads where each key of a TOML text is. The text has
// already decoded, so the parser finds no error here.
func tomlPositions(text []byte) positions {
	w := positions{}
	var p unstable.Parser
	p.Reset(text)
	var table string
	arrays := map[string]int{}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			name, at := keyOf(&p, e.Key())
			if e.Kind == unstable.ArrayTable {
				n := arrays[name]
				arrays[name] = n + 1
				name += "[" + strconv.Itoa(n) + "]"
			}
			table = name
			if _, seen := w[name]; !seen {
				w[name] = at
			}
		case unstable.KeyValue:
			walkKeyValue(&p, e, table, w)
		}
	}
	return w
}

// walkKeyValue records a key = value, and the keys of an inline table.
func walkKeyValue(p *unstable.Parser, e *unstable.Node, table string, w positions) {
	name, at := keyOf(p, e.Key())
	if table != "" {
		name = table + "." + name
	}
	if _, seen := w[name]; !seen {
		w[name] = at
	}
	v := e.Value()
	if v == nil || v.Kind != unstable.InlineTable {
		return
	}
	it := v.Children()
	for it.Next() {
		if c := it.Node(); c.Kind == unstable.KeyValue {
			walkKeyValue(p, c, name, w)
		}
	}
}

// keyOf joins a dotted key's parts and returns where it starts.
func keyOf(p *unstable.Parser, it unstable.Iterator) (string, pos) {
	var parts []string
	var at pos
	for it.Next() {
		n := it.Node()
		if len(parts) == 0 {
			s := p.Shape(n.Raw)
			at = pos{s.Start.Line, s.Start.Column}
		}
		parts = append(parts, string(n.Data))
	}
	return strings.Join(parts, "."), at
}

// jsonPositions reads where each key of a JSON text is.
func jsonPositions(text []byte) positions {
	w := positions{}
	dec := json.NewDecoder(bytes.NewReader(text))
	type frame struct {
		path    string
		array   bool
		index   int    // arrays: the next element's index
		key     string // objects: the key whose value comes next
		wantKey bool   // objects: a key comes next
	}
	var stack []*frame
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		return a + "." + b
	}
	for {
		offset := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return w
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && !top.array && top.wantKey {
			key, _ := tok.(string)
			top.key, top.wantKey = key, false
			line, col := lineCol(text, keyStart(text, offset))
			w[join(top.path, key)] = pos{line, col}
			continue
		}
		path := ""
		switch {
		case top == nil:
		case top.array:
			path = top.path + "[" + strconv.Itoa(top.index) + "]"
			top.index++
			line, col := lineCol(text, keyStart(text, offset))
			w[path] = pos{line, col}
		default:
			path = join(top.path, top.key)
			top.wantKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{path: path, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{path: path, array: true})
		}
	}
}

// keyStart skips the separators before a token (the decoder's offset is
// where the previous token ended).
func keyStart(text []byte, offset int) int {
	for offset < len(text) {
		switch text[offset] {
		case ' ', '\t', '\r', '\n', ',', ':':
			offset++
			continue
		}
		break
	}
	return offset
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(text []byte, offset int) (int, int) {
	if offset > len(text) {
		offset = len(text)
	}
	line := 1 + bytes.Count(text[:offset], []byte{'\n'})
	col := offset - bytes.LastIndexByte(text[:offset], '\n')
	return line, col
}

// Locate returns where the key at path ("limits.timeout_ms", "tools[1]"
// for the second [[tools]] table), or the nearest table that holds it, is
// written in configuration text that Parse accepted; 0, 0 when it is not
// there. Problems found after Parse (a tool's Lua, a rule path) are
// positioned with it.
func Locate(text []byte, path string) (line, col int) {
	body := bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	var w positions
	if len(trimmed) > 0 && trimmed[0] == '{' {
		w = jsonPositions(trimmed)
	} else {
		w = tomlPositions(trimmed)
	}
	p := w.of(path)
	return shiftPos(body[:len(body)-len(trimmed)], p.Line, p.Col)
}
