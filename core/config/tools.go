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
	Lua     *string // lua: the script, inline
	LuaFile *string // lua_file: a file relative to project_root
}

// codeKeys are the keys of a [[tools]] table that are not descriptor keys.
var codeKeys = map[string]bool{"lua": true, "lua_file": true}

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
	if (code.Lua == nil) == (code.LuaFile == nil) {
		return toolbox.Descriptor{}, code, errors.New("give one of lua (the script) or lua_file (a file relative to project_root)")
	}
	text, err := json.Marshal(desc)
	if err != nil {
		return toolbox.Descriptor{}, code, err
	}
	d, err := toolbox.ParseDescriptor(text)
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
