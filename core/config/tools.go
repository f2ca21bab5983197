package config

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clara-lib/clara/core/toolbox"
)

// ToolCode is what runs a tool declared in configuration: exactly one of
// its fields is set.
type ToolCode struct {
	Lua     *string   // lua: the script, inline
	LuaFile *string   // lua_file: a file relative to project_root
	HTTP    *HTTPCode // http: one HTTP request

	// A Lua tool's own limits (SPEC §8, the seed's per-script limits):
	// timeout_ms, 1 to MaxLuaTimeoutMS, sets the tool's deadline (0: the
	// descriptor's limits.timeout_ms or [limits] timeout_ms, as before);
	// memory_mb, 1 to MaxLuaMemoryMB, what the script may hold (0: the
	// default, DefaultLuaMemoryMB).
	TimeoutMS int
	MemoryMB  int

	// Replace (replace = true) lets the tool take the name of a tool the
	// host registered (clara_register_tool); without it that is a
	// configuration problem naming both. Never a built-in's.
	Replace bool
}

// Bounds of the Lua limits a [[tools]] table or a rule may ask for: the
// seed's 5 s is the ceiling, its 50 MB the default memory cap.
const (
	MaxLuaTimeoutMS    = 5000
	MaxLuaMemoryMB     = 1024
	DefaultLuaMemoryMB = 50
)

// LuaLimit reads a timeout_ms or memory_mb value: an integer from 1 to max.
func LuaLimit(key string, v any, max int) (int, error) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("%s must be a whole number from 1 to %d, not %v", key, max, x)
		}
		n = int64(x)
	default:
		return 0, fmt.Errorf("%s must be a whole number from 1 to %d", key, max)
	}
	if n < 1 || n > int64(max) {
		return 0, fmt.Errorf("%s must be from 1 to %d, not %d", key, max, n)
	}
	return int(n), nil
}

// HTTPCode is a [[tools]] table's http = {url, method, timeout_ms,
// headers_env, max_response_bytes}.
type HTTPCode struct {
	URL              string
	Method           string            // "POST" (default) or "GET"
	TimeoutMS        int               // 0: the tool's deadline alone
	HeadersEnv       map[string]string // header -> environment variable
	MaxResponseBytes int               // 0: llm.max_response_bytes
}

// codeKeys are the keys of a [[tools]] table that are not descriptor keys.
var codeKeys = map[string]bool{"lua": true, "lua_file": true, "http": true, "timeout_ms": true, "memory_mb": true, "replace": true}

// oneCode is the error of a table with no code or more than one.
const oneCode = "give one of lua (the script), lua_file (a file relative to project_root) or http (a table with url)"

// parseHTTPCode reads an http table.
func parseHTTPCode(v any) (*HTTPCode, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("http must be a table: {url, method, timeout_ms, headers_env, max_response_bytes}")
	}
	h := &HTTPCode{}
	for k, v := range m {
		var ok bool
		switch k {
		case "url":
			h.URL, ok = v.(string)
		case "method":
			h.Method, ok = v.(string)
		case "timeout_ms", "max_response_bytes":
			var n int64
			n, ok = v.(int64)
			ok = ok && n >= 0 && n <= 1<<30
			if k == "timeout_ms" {
				h.TimeoutMS = int(n)
			} else {
				h.MaxResponseBytes = int(n)
			}
		case "headers_env":
			var hm map[string]any
			hm, ok = v.(map[string]any)
			h.HeadersEnv = map[string]string{}
			for name, env := range hm {
				s, isString := env.(string)
				if !isString {
					return nil, fmt.Errorf("http.headers_env.%s must be a string: the name of an environment variable", name)
				}
				h.HeadersEnv[name] = s
			}
		default:
			return nil, fmt.Errorf("http: unknown key %q (known: url, method, timeout_ms, headers_env, max_response_bytes)", k)
		}
		if !ok {
			return nil, fmt.Errorf("http.%s has the wrong type", k)
		}
	}
	if h.URL == "" {
		return nil, errors.New("http.url is missing")
	}
	return h, nil
}

// SplitToolEntry separates a [[tools]] table's code from its descriptor,
// which it parses as strictly as clara_register_tool would.
func SplitToolEntry(m map[string]any) (toolbox.Descriptor, ToolCode, error) {
	var code ToolCode
	desc := make(map[string]any, len(m))
	for k, v := range m {
		if !codeKeys[k] {
			desc[k] = v
			continue
		}
		if k == "http" {
			h, err := parseHTTPCode(v)
			if err != nil {
				return toolbox.Descriptor{}, code, err
			}
			code.HTTP = h
			continue
		}
		if k == "timeout_ms" || k == "memory_mb" {
			max := MaxLuaTimeoutMS
			if k == "memory_mb" {
				max = MaxLuaMemoryMB
			}
			n, err := LuaLimit(k, v, max)
			if err != nil {
				return toolbox.Descriptor{}, code, err
			}
			if k == "timeout_ms" {
				code.TimeoutMS = n
			} else {
				code.MemoryMB = n
			}
			continue
		}
		if k == "replace" {
			b, ok := v.(bool)
			if !ok {
				return toolbox.Descriptor{}, code, errors.New("replace must be true or false")
			}
			code.Replace = b
			continue
		}
		s, ok := v.(string)
		if !ok {
			return toolbox.Descriptor{}, code, fmt.Errorf("%s must be a string", k)
		}
		switch k {
		case "lua":
			code.Lua = &s
		case "lua_file":
			code.LuaFile = &s
		}
	}
	given := 0
	for _, set := range []bool{code.Lua != nil, code.LuaFile != nil, code.HTTP != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return toolbox.Descriptor{}, code, errors.New(oneCode)
	}
	if (code.TimeoutMS != 0 || code.MemoryMB != 0) && code.HTTP != nil {
		return toolbox.Descriptor{}, code, errors.New("timeout_ms and memory_mb are a Lua tool's limits; an http tool's deadline is limits.timeout_ms or http.timeout_ms")
	}
	text, err := json.Marshal(desc)
	if err != nil {
		return toolbox.Descriptor{}, code, err
	}
	d, err := toolbox.ParseDescriptor(text)
	if err == nil && d.OnCallerThread {
		err = errors.New("on_caller_thread applies to tools registered with clara_register_tool, not to [[tools]]")
	}
	if err == nil && code.TimeoutMS != 0 {
		if d.Limits.TimeoutMS != 0 {
			return d, code, errors.New("give timeout_ms or limits.timeout_ms, not both")
		}
		d.Limits.TimeoutMS = code.TimeoutMS
	}
	return d, code, err
}

// checkToolEntries checks each [[tools]] table's descriptor and code, and
// that no name is declared twice.
func checkToolEntries(list []any, path string, ps *problems) {
	names := map[string]bool{}
	for i, item := range list {
		at := fmt.Sprintf("%s[%d]", path, i)
		d, _, err := SplitToolEntry(item.(map[string]any))
		if err != nil {
			ps.add(at, "%s: %v", at, err)
			continue
		}
		if names[d.Name] {
			ps.add(at, "%s: tool %q is declared twice", at, d.Name)
		}
		names[d.Name] = true
	}
}
