package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"github.com/clara-lib/clara/core/toolbox"
)

// kind says what a key holds.
type kind int

const (
	kString  kind = iota
	kInt          // an integer within min..max
	kBool         //
	kNumber       // an integer or a float (kept as float64)
	kStrings      // an array of strings
	kTable        // a table of declared keys
	kEntries      // an array of tables ([[tools]]), checked by the key's check
)

// spec is one declared key, read from Config's tags.
type spec struct {
	path     string // dotted, from the top: "limits.timeout_ms"
	name     string // in its table: "timeout_ms"
	kind     kind
	def      any    // the default, normalised ("" for tables)
	defText  string // the default as written in the tag
	doc      string
	min, max int64
	check    string // name of an extra check (checks)
	oneShot  bool
	index    []int   // the field's index path in Config
	members  []*spec // kTable: declared members, in field order
	other    *spec   // kTable: the spec of undeclared members (a "*" field), nil when refused
}

// Tree is configuration as a generic document: string, int64, float64,
// bool, []any and map[string]any, checked against the declarations.
type Tree = map[string]any

var (
	rootOnce sync.Once
	root     *spec
)

// schema returns the declarations, read once from Config's tags.
func schema() *spec {
	rootOnce.Do(func() {
		root = &spec{kind: kTable}
		root.members, root.other = specsOf(reflect.TypeOf(Config{}), "", nil)
	})
	return root
}

// specsOf reads the keys of a struct type.
func specsOf(t reflect.Type, prefix string, index []int) (members []*spec, other *spec) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("key")
		if !ok {
			panic(fmt.Sprintf("config: field %s.%s has no key tag", t.Name(), f.Name))
		}
		s := &spec{name: name, path: prefix + name, doc: f.Tag.Get("doc"), check: f.Tag.Get("check"),
			oneShot: f.Tag.Get("oneshot") == "true", index: append(append([]int(nil), index...), i), defText: f.Tag.Get("default")}
		switch f.Type.Kind() {
		case reflect.String:
			s.kind = kString
		case reflect.Bool:
			s.kind = kBool
		case reflect.Int:
			s.kind = kInt
			s.min, _ = strconv.ParseInt(f.Tag.Get("min"), 10, 64)
			s.max, _ = strconv.ParseInt(f.Tag.Get("max"), 10, 64)
		case reflect.Float64:
			s.kind = kNumber
		case reflect.Slice:
			switch f.Type.Elem().Kind() {
			case reflect.String:
				s.kind = kStrings
			case reflect.Map:
				s.kind = kEntries
			}
		case reflect.Map: // the "*" member of a table: map[string]float64
			s.kind = kNumber
		case reflect.Struct:
			s.kind = kTable
			s.members, s.other = specsOf(f.Type, s.path+".", s.index)
		}
		if name == "*" {
			other = s
			continue
		}
		if s.kind != kTable {
			s.def = parseDefault(s)
		}
		members = append(members, s)
	}
	return members, other
}

// parseDefault reads a default tag as a TOML value and normalises it; a
// default that does not pass its own declaration is a bug of this package,
// caught by its tests (every declaration is read at the first Parse).
func parseDefault(s *spec) any {
	var doc map[string]any
	if err := toml.Unmarshal([]byte("v = "+s.defText), &doc); err != nil {
		panic(fmt.Sprintf("config: default of %s: %v", s.path, err))
	}
	var ps problems
	v, ok := normaliseValue(s, doc["v"], s.path, &ps)
	if !ok || len(ps) > 0 {
		panic(fmt.Sprintf("config: default of %s does not pass its declaration: %v", s.path, ps))
	}
	return v
}

// lookup finds the spec of a dotted path ("" parts of arrays skipped).
func (s *spec) member(name string) *spec {
	for _, m := range s.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// identifier is a name expressions can reach with a dot (thresholds.NAME).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checks are the extra checks a string key may name.
var checks = map[string]func(string) error{
	"tool_name": func(s string) error {
		if !toolbox.ValidName(s) {
			return fmt.Errorf("%q is not a tool name (1 to 64 letters, digits, '_' or '-')", s)
		}
		return nil
	},
	"log_format": func(s string) error {
		switch s {
		case "text", "json":
			return nil
		}
		return fmt.Errorf("%q is not a log format (text, json)", s)
	},
	"rule_mode": func(s string) error {
		if s != "enforce" && s != "shadow" {
			return fmt.Errorf("%q is not a mode of rules (enforce, shadow)", s)
		}
		return nil
	},
	"store_backend": func(s string) error {
		if s != BackendSQLite && s != BackendPostgres {
			return fmt.Errorf("%q is not a store backend (sqlite, postgres)", s)
		}
		return nil
	},
	"on_unavailable": func(s string) error {
		if s != UnavailableFail && s != UnavailableLocal {
			return fmt.Errorf("%q is not what to do when the store is unavailable (fail, local)", s)
		}
		return nil
	},
	"clear": func(s string) error {
		switch s {
		case ClearRules, ClearSessionPolicies:
			return nil
		}
		return fmt.Errorf("%q is not something clear forgets (%s, %s)", s, ClearRules, ClearSessionPolicies)
	},
}

// What the clear key may name.
const (
	ClearRules           = "rules"
	ClearSessionPolicies = "session_policies"
)

func kindName(k kind) string {
	switch k {
	case kString:
		return "a string"
	case kInt:
		return "an integer"
	case kBool:
		return "true or false"
	case kNumber:
		return "a number"
	case kStrings:
		return "an array of strings"
	case kEntries:
		return "an array of tables"
	}
	return "a table"
}

// docName is how the documentation writes a key's path.
func docName(s *spec) string {
	if s.kind == kEntries {
		return "[[" + s.path + "]]"
	}
	return strings.TrimPrefix(s.path, ".")
}
