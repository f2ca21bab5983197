package toolbox

import (
	"encoding/json"
	"fmt"
	"strings"
)

// maxChangesFiles bounds a descriptor's changes_files entries.
const maxChangesFiles = 64

// compileChangesFiles reads a descriptor's changes_files: each entry the
// name of a top-level argument ("file_path") or an RFC 6901 JSON pointer
// into the arguments ("/edits/0/path"). It returns each as its tokens.
func compileChangesFiles(entries []string) ([][]string, error) {
	if len(entries) > maxChangesFiles {
		return nil, fmt.Errorf("changes_files has %d entries, at most %d", len(entries), maxChangesFiles)
	}
	out := make([][]string, 0, len(entries))
	for _, e := range entries {
		if e == "" {
			return nil, fmt.Errorf("changes_files holds an empty entry: give an argument's name or a JSON pointer such as \"/edits/0/path\"")
		}
		if !strings.HasPrefix(e, "/") {
			out = append(out, []string{e})
			continue
		}
		var toks []string
		for _, t := range strings.Split(e[1:], "/") {
			// ~1 is '/', ~0 is '~' (RFC 6901 §4: ~1 first).
			if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(t), "~") {
				return nil, fmt.Errorf("changes_files: %q is not a JSON pointer: '~' must be followed by 0 or 1", e)
			}
			toks = append(toks, strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~"))
		}
		out = append(out, toks)
	}
	return out, nil
}

// ChangesFiles reports whether the descriptor names arguments holding
// changed paths.
func (t *Tool) ChangesFiles() bool { return len(t.changes) > 0 }

// ChangedPaths returns the paths a call's arguments name where the
// descriptor's changes_files points: a string is one path, an array of
// strings one path each; anything else there (absent, a number, an array
// holding a non-string) names nothing. Paths are in the order of
// changes_files, duplicates kept (the callbacks drop them).
func (t *Tool) ChangedPaths(args []byte) []string {
	if len(t.changes) == 0 {
		return nil
	}
	var root any
	if err := json.Unmarshal(args, &root); err != nil {
		return nil
	}
	var out []string
	for _, toks := range t.changes {
		v := root
		for _, tok := range toks {
			switch x := v.(type) {
			case map[string]any:
				v = x[tok]
			case []any:
				i, ok := arrayIndex(tok)
				if !ok || i >= len(x) {
					v = nil
				} else {
					v = x[i]
				}
			default:
				v = nil
			}
			if v == nil {
				break
			}
		}
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			paths := make([]string, 0, len(x))
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					paths = nil
					break
				}
				paths = append(paths, s)
			}
			out = append(out, paths...)
		}
	}
	return out
}

// arrayIndex reads a pointer token as an array index: digits, no leading
// zero (RFC 6901 §4).
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
		n = n*10 + int(tok[i]-'0')
	}
	return n, true
}
