package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/clara-lib/clara/core/protocol"
)

// problem is one problem of a text before it is positioned: the dotted
// path of the key it is about.
type problem struct {
	path string
	msg  string
}

type problems []problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, problem{path: path, msg: fmt.Sprintf(format, args...)})
}

// Parse reads configuration text: JSON when it starts with '{', TOML
// otherwise. It checks every key against the declarations and reports
// every problem at once, each positioned in the text; source names the
// text in problems ("clara_configure", a file path). maxBytes > 0 refuses
// longer texts before reading them.
func Parse(text []byte, source string, maxBytes int) (Tree, error) {
	if maxBytes > 0 && len(text) > maxBytes {
		return nil, protocol.Problems{{File: source, Message: fmt.Sprintf(
			"the configuration is %d bytes, more than limits.max_request_bytes (%d)", len(text), maxBytes)}}
	}
	body := bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	// Positions are found in the trimmed text; the lines trimmed off are
	// added back, so that they are the file's.
	lead := body[:len(body)-len(trimmed)]
	var t Tree
	var where positions
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var err error
		if t, where, err = parseJSON(trimmed, source); err != nil {
			return nil, shiftProblems(err, lead)
		}
	} else {
		if err := toml.Unmarshal(trimmed, &t); err != nil {
			var de *toml.DecodeError
			if errors.As(err, &de) {
				row, col := de.Position()
				return nil, shiftProblems(protocol.Problems{{File: source, Line: row, Col: col, Message: strings.TrimPrefix(de.Error(), "toml: ")}}, lead)
			}
			return nil, protocol.Problems{{File: source, Message: "invalid TOML: " + err.Error()}}
		}
		where = tomlPositions(trimmed)
	}
	where.shift(lead)
	if t == nil {
		t = Tree{}
	}
	var ps problems
	t = normaliseTable(schema(), t, "", &ps)
	if len(ps) == 0 {
		return t, nil
	}
	out := make(protocol.Problems, len(ps))
	for i, p := range ps {
		pos := where.of(p.path)
		out[i] = protocol.Problem{File: source, Line: pos.Line, Col: pos.Col, Message: p.msg}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		if out[i].Col != out[j].Col {
			return out[i].Col < out[j].Col
		}
		return out[i].Message < out[j].Message
	})
	return nil, out
}

// parseJSON decodes a JSON configuration as strictly as a request: one
// object, no key given twice.
func parseJSON(text []byte, source string) (Tree, positions, error) {
	if _, serr := protocol.ScanStrict(text, 1<<16); serr != nil {
		line, col := lineCol(text, serr.Offset)
		return nil, nil, protocol.Problems{{File: source, Line: line, Col: col, Message: "invalid JSON: " + serr.Error()}}
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var t Tree
	if err := dec.Decode(&t); err != nil {
		return nil, nil, protocol.Problems{{File: source, Message: "invalid JSON: " + err.Error()}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, protocol.Problems{{File: source, Message: "invalid JSON: data after the object"}}
	}
	return t, jsonPositions(text), nil
}

// normaliseTable checks a table's members against s, converting numbers,
// and returns the table as it is kept.
func normaliseTable(s *spec, m map[string]any, prefix string, ps *problems) Tree {
	out := make(Tree, len(m))
	for k, val := range m {
		path := prefix + k
		ks := s.member(k)
		if ks == nil && s.other != nil && identifier.MatchString(k) {
			ks = s.other
		}
		if ks == nil {
			ps.add(path, "unknown key %q", path)
			continue
		}
		if v, ok := normaliseValue(ks, val, path, ps); ok {
			out[k] = v
		}
	}
	return out
}

// normaliseValue checks one value against its declaration.
func normaliseValue(s *spec, val any, path string, ps *problems) (any, bool) {
	switch s.kind {
	case kTable:
		m, ok := val.(map[string]any)
		if !ok {
			ps.add(path, "%s must be a table", path)
			return nil, false
		}
		return normaliseTable(s, m, path+".", ps), true
	case kString:
		str, ok := val.(string)
		if !ok {
			ps.add(path, "%s must be a string", path)
			return nil, false
		}
		if check := checks[s.check]; check != nil {
			if err := check(str); err != nil {
				ps.add(path, "%s: %v", path, err)
				return nil, false
			}
		}
		return str, true
	case kStrings:
		list, ok := val.([]any)
		if !ok {
			ps.add(path, "%s must be an array of strings", path)
			return nil, false
		}
		strs := make([]any, 0, len(list))
		for i, item := range list {
			str, ok := item.(string)
			if !ok {
				ps.add(path, "%s[%d] must be a string", path, i)
				continue
			}
			if check := checks[s.check]; check != nil {
				if err := check(str); err != nil {
					ps.add(path, "%s[%d]: %v", path, i, err)
					continue
				}
			}
			strs = append(strs, str)
		}
		return strs, true
	case kEntries:
		return checkEntries(s, val, path, ps)
	case kBool:
		b, ok := val.(bool)
		if !ok {
			ps.add(path, "%s must be true or false", path)
			return nil, false
		}
		return b, true
	case kNumber:
		f, ok := asFloat(val)
		if !ok {
			ps.add(path, "%s must be a number", path)
			return nil, false
		}
		return f, true
	case kInt:
		n, ok := asInt(val)
		if !ok || n < s.min || n > s.max {
			ps.add(path, "%s must be an integer from %d to %d", path, s.min, s.max)
			return nil, false
		}
		return n, true
	}
	return nil, false
}

// checkEntries checks an array of tables with the check its key names.
func checkEntries(s *spec, val any, path string, ps *problems) (any, bool) {
	list, ok := val.([]any)
	if !ok {
		ps.add(path, "%s must be an array of tables ([[%s]])", path, path)
		return nil, false
	}
	out := make([]any, 0, len(list))
	for i, item := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		m, ok := item.(map[string]any)
		if !ok {
			ps.add(at, "%s must be a table", at)
			continue
		}
		out = append(out, normaliseNumbers(m))
	}
	if s.check == "tools" {
		checkToolEntries(out, path, ps)
	}
	return out, true
}

// normaliseNumbers turns the json.Number of a JSON text into int64 or
// float64, as TOML decodes them, inside a free-form table.
func normaliseNumbers(v any) map[string]any {
	m, _ := normaliseAny(v).(map[string]any)
	return m
}

func normaliseAny(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normaliseAny(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normaliseAny(e)
		}
		return out
	}
	return v
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}
