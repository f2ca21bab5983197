package core

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

//go:embed default_config.toml
var defaultConfigTOML []byte

// Config is the typed configuration in force. It is immutable once built;
// a change builds a new one and swaps it in.
type Config struct {
	DefaultEvaluator string // default_evaluator: the tool of simple-form requests ("echo")
	TestMode         bool   // test_mode: tools with network, fs_write or exec capabilities do not run (false)
	Limits           Limits
	Policy           PolicyConfig
	Audit            AuditConfig
	ProjectRoot      string // project_root: where rule paths and state_dir are resolved (".")
	StateDir         string // state_dir: relative to project_root (".clara"); "" keeps state in memory
	Rules            RulesConfig
	Tools            []map[string]any // [[tools]]: Lua tools (SPEC §8), each a descriptor plus lua or lua_file
}

// RulesConfig is the [rules] table.
type RulesConfig struct {
	Paths      []string       // paths: glob patterns of rule files, relative to project_root
	Builtin    bool           // builtin: load the shipped rules (true)
	Thresholds map[string]any // thresholds: what rules see as `thresholds` (the built-in rules' settings)
}

// Limits is the [limits] table.
type Limits struct {
	TimeoutMS       int // timeout_ms: a tool's default deadline (1000)
	MaxOutputBytes  int // max_output_bytes: a tool's default output cap (65536)
	MaxRequestBytes int // max_request_bytes (16 MiB)
	MaxDepth        int // max_depth (512)
}

// PolicyConfig is the [policy] table: the configuration's layer of policy.
type PolicyConfig struct {
	Allow []string // allow: empty allows every registered tool
	Deny  []string // deny: always wins
}

// AuditConfig is the [audit] table.
type AuditConfig struct {
	Path string // path: a JSONL file every call is appended to; "" keeps only the in-memory ring
}

// tree is configuration as a generic document: strings, int64, bool,
// []any and map[string]any, checked against schema.
type tree = map[string]any

// keyKind says what a configuration key holds.
type keyKind int

const (
	kString keyKind = iota
	kInt
	kBool
	kTable
	kStrings // an array of strings
	kNumber  // an integer or a float
	kTools   // the [[tools]] array (luatools.go checks its entries)
)

type keySpec struct {
	kind     keyKind
	min, max int64              // kInt bounds
	check    func(string) error // kString extra check
	keys     map[string]keySpec // kTable members
	other    *keySpec           // kTable: the spec of members keys does not name (nil: refused)
	help     string             // what the key is, for messages
}

var schema = map[string]keySpec{
	"default_evaluator": {kind: kString, check: checkToolName, help: "the tool of simple-form requests"},
	"test_mode":         {kind: kBool},
	"limits": {kind: kTable, keys: map[string]keySpec{
		"timeout_ms":        {kind: kInt, min: 1, max: 24 * 3600 * 1000},
		"max_output_bytes":  {kind: kInt, min: 1, max: 1 << 30},
		"max_request_bytes": {kind: kInt, min: 1, max: 1 << 30},
		"max_depth":         {kind: kInt, min: 1, max: 1 << 20},
	}},
	"policy": {kind: kTable, keys: map[string]keySpec{
		"allow": {kind: kStrings, check: checkToolName},
		"deny":  {kind: kStrings, check: checkToolName},
	}},
	"audit": {kind: kTable, keys: map[string]keySpec{
		"path": {kind: kString},
	}},
	"tools":        {kind: kTools},
	"project_root": {kind: kString},
	"state_dir":    {kind: kString},
	"rules": {kind: kTable, keys: map[string]keySpec{
		"paths":   {kind: kStrings},
		"builtin": {kind: kBool},
		// The built-in rules' thresholds, and any a project's own rules
		// read as thresholds.NAME.
		"thresholds": {kind: kTable, keys: map[string]keySpec{
			"token_budget":       {kind: kNumber},
			"iteration_budget":   {kind: kNumber},
			"large_result_bytes": {kind: kNumber},
			"repeated_failures":  {kind: kNumber},
		}, other: &keySpec{kind: kNumber}},
	}},
}

// identifier is a name expressions can reach with a dot (thresholds.NAME).
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkToolName(s string) error {
	if !toolbox.ValidName(s) {
		return fmt.Errorf("%q is not a tool name (1 to 64 letters, digits, '_' or '-')", s)
	}
	return nil
}

// ConfigError lists every problem found in one configuration text.
type ConfigError struct {
	Source   string   // where the text came from ("clara_configure", a file path)
	Problems []string // one per problem, sorted
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return e.Source + ": " + e.Problems[0]
	}
	return fmt.Sprintf("%s: %d problems: %s", e.Source, len(e.Problems), strings.Join(e.Problems, "; "))
}

// protocolError turns a ConfigError into an invalid_request envelope error
// whose details list the problems.
func (e *ConfigError) protocolError() *protocol.Error {
	details := []byte{'['}
	for i, p := range e.Problems {
		if i > 0 {
			details = append(details, ',')
		}
		details = protocol.AppendString(details, p)
	}
	details = append(details, ']')
	return &protocol.Error{Code: protocol.InvalidRequest, Message: e.Error(), Details: details}
}

// parseConfig reads configuration text: JSON when it starts with '{',
// TOML otherwise. It checks every key against the schema and reports all
// problems at once.
func parseConfig(text []byte, source string) (tree, error) {
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")), " \t\r\n")
	var t tree
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&t); err != nil {
			return nil, &ConfigError{Source: source, Problems: []string{"invalid JSON: " + err.Error()}}
		}
		if tok, err := dec.Token(); err != io.EOF {
			return nil, &ConfigError{Source: source, Problems: []string{fmt.Sprintf("invalid JSON: data after the object (%v)", tokenOrErr(tok, err))}}
		}
	} else {
		if err := toml.Unmarshal(trimmed, &t); err != nil {
			var de *toml.DecodeError
			if errors.As(err, &de) {
				row, col := de.Position()
				return nil, &ConfigError{Source: source, Problems: []string{fmt.Sprintf("line %d, column %d: %s", row, col, de.Error())}}
			}
			return nil, &ConfigError{Source: source, Problems: []string{"invalid TOML: " + err.Error()}}
		}
	}
	if t == nil {
		t = tree{}
	}
	var problems []string
	t = normalise(t, schema, nil, "", &problems).(tree)
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, &ConfigError{Source: source, Problems: problems}
	}
	return t, nil
}

func tokenOrErr(tok json.Token, err error) any {
	if err != nil {
		return err
	}
	return tok
}

// normalise checks v against a table's members and converts numbers to
// int64, appending a problem for every key that is unknown or ill-typed.
func normalise(v any, keys map[string]keySpec, other *keySpec, prefix string, problems *[]string) any {
	m, _ := v.(map[string]any)
	out := make(tree, len(m))
	for k, val := range m {
		path := prefix + k
		spec, ok := keys[k]
		if !ok && other != nil && identifier.MatchString(k) {
			spec, ok = *other, true
		}
		if !ok {
			*problems = append(*problems, fmt.Sprintf("unknown key %q", path))
			continue
		}
		switch spec.kind {
		case kTable:
			if _, ok := val.(map[string]any); !ok {
				*problems = append(*problems, fmt.Sprintf("%s must be a table", path))
				continue
			}
			out[k] = normalise(val, spec.keys, spec.other, path+".", problems)
		case kString:
			s, ok := val.(string)
			if !ok {
				*problems = append(*problems, fmt.Sprintf("%s must be a string", path))
				continue
			}
			if spec.check != nil {
				if err := spec.check(s); err != nil {
					*problems = append(*problems, fmt.Sprintf("%s: %v", path, err))
					continue
				}
			}
			out[k] = s
		case kStrings:
			list, ok := val.([]any)
			if !ok {
				*problems = append(*problems, fmt.Sprintf("%s must be an array of strings", path))
				continue
			}
			strs := make([]any, 0, len(list))
			for i, item := range list {
				str, ok := item.(string)
				if !ok {
					*problems = append(*problems, fmt.Sprintf("%s[%d] must be a string", path, i))
					continue
				}
				if spec.check != nil {
					if err := spec.check(str); err != nil {
						*problems = append(*problems, fmt.Sprintf("%s[%d]: %v", path, i, err))
						continue
					}
				}
				strs = append(strs, str)
			}
			out[k] = strs
		case kTools:
			if list, ok := checkToolEntries(val, path, problems); ok {
				out[k] = list
			}
		case kBool:
			b, ok := val.(bool)
			if !ok {
				*problems = append(*problems, fmt.Sprintf("%s must be true or false", path))
				continue
			}
			out[k] = b
		case kNumber:
			f, ok := asFloat(val)
			if !ok {
				*problems = append(*problems, fmt.Sprintf("%s must be a number", path))
				continue
			}
			out[k] = f
		case kInt:
			n, ok := asInt(val)
			if !ok || n < spec.min || n > spec.max {
				*problems = append(*problems, fmt.Sprintf("%s must be an integer from %d to %d", path, spec.min, spec.max))
				continue
			}
			out[k] = n
		}
	}
	return out
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

// merge applies over on top of base: a table merges key by key, any other
// value replaces. Neither input is modified.
func merge(base, over tree) tree {
	out := make(tree, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if sub, ok := v.(tree); ok {
			if cur, ok := out[k].(tree); ok {
				out[k] = merge(cur, sub)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// build turns a complete, checked tree into a Config.
func build(t tree) *Config {
	c := &Config{}
	c.DefaultEvaluator, _ = t["default_evaluator"].(string)
	c.TestMode, _ = t["test_mode"].(bool)
	lim, _ := t["limits"].(tree)
	c.Limits = Limits{
		TimeoutMS:       intOf(lim, "timeout_ms"),
		MaxOutputBytes:  intOf(lim, "max_output_bytes"),
		MaxRequestBytes: intOf(lim, "max_request_bytes"),
		MaxDepth:        intOf(lim, "max_depth"),
	}
	pol, _ := t["policy"].(tree)
	c.Policy = PolicyConfig{Allow: stringsOf(pol, "allow"), Deny: stringsOf(pol, "deny")}
	aud, _ := t["audit"].(tree)
	c.Audit.Path, _ = aud["path"].(string)
	c.ProjectRoot, _ = t["project_root"].(string)
	c.StateDir, _ = t["state_dir"].(string)
	list, _ := t["tools"].([]any)
	for _, v := range list {
		c.Tools = append(c.Tools, v.(map[string]any))
	}
	ru, _ := t["rules"].(tree)
	c.Rules.Paths = stringsOf(ru, "paths")
	c.Rules.Builtin, _ = ru["builtin"].(bool)
	c.Rules.Thresholds = map[string]any{}
	if th, ok := ru["thresholds"].(tree); ok {
		for k, v := range th {
			c.Rules.Thresholds[k] = v
		}
	}
	return c
}

func intOf(t tree, key string) int {
	n, _ := t[key].(int64)
	return int(n)
}

func stringsOf(t tree, key string) []string {
	list, _ := t[key].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, v.(string))
	}
	return out
}

// defaultTree is the embedded default configuration, parsed.
func defaultTree() tree {
	t, err := parseConfig(defaultConfigTOML, "default_config.toml")
	if err != nil {
		panic("clara: the embedded default configuration is invalid: " + err.Error())
	}
	return t
}
