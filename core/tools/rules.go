package tools

import (
	"context"
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

func rulesLoad(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "rules_load", Admin: true,
		Description:    "Loads rules: inline TOML (toml, with a name), more rule files (paths, inside project_root), or, with no argument, the configured files again. A failed load keeps the rules in force.",
		Schema:         `{"type":"object","properties":{"toml":{"type":"string"},"name":{"type":"string","minLength":1},"paths":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			var a RulesLoad
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "rules_load: %v", err)
			}
			return e.LoadRules(ctx, a)
		}}
}

func rulesList(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "rules_list", Admin: true,
		Description:    "Lists the rules in force, and the configured rule paths that match no file.",
		Schema:         `{"type":"object","properties":{"trigger":{"type":"string"}},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			return e.ListRules(gjson.GetBytes(call.Arguments, "trigger").Str)
		}}
}

func rulesTest(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "rules_test", Admin: true,
		Description:    "Runs a rule test file (path inside project_root, or inline toml) against the rules in force, or against the rule files it names; run (a regular expression) selects cases by name, coverage lists what the cases fired.",
		Schema:         `{"type":"object","properties":{"path":{"type":"string"},"toml":{"type":"string"},"run":{"type":"string"},"coverage":{"type":"boolean"}},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			var a struct {
				Path     string  `json:"path"`
				TOML     *string `json:"toml"`
				Run      string  `json:"run"`
				Coverage bool    `json:"coverage"`
			}
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "rules_test: %v", err)
			}
			return e.TestRules(ctx, a.Path, a.TOML, a.Run, a.Coverage)
		}}
}

func pluginsList(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "plugins_list", Admin: true,
		Description:    "Lists the plugins plugins.paths finds (folders with a plugin.toml), enabled or not, in load order, with the ids of their rules in force.",
		Schema:         `{"type":"object","properties":{},"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(context.Context, toolbox.Call) ([]byte, error) {
			return e.ListPlugins()
		}}
}

func pluginEnable(e Engine) toolbox.Builtin {
	return toolbox.Builtin{Name: "plugin_enable", Admin: true,
		Description:    "Enables or disables a plugin (until a reset): its rules come into force or leave it, firing on_plugin_load or on_plugin_unload. A plugin whose rules do not load leaves the rules in force as they were.",
		Schema:         `{"type":"object","properties":{"name":{"type":"string","minLength":1},"enabled":{"type":"boolean"}},"required":["name","enabled"],"additionalProperties":false}`,
		MaxOutputBytes: 16 << 20,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			var a struct {
				Name    string `json:"name"`
				Enabled bool   `json:"enabled"`
			}
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				return nil, protocol.Errorf(protocol.InvalidArgs, "plugin_enable: %v", err)
			}
			return e.EnablePlugin(ctx, a.Name, a.Enabled)
		}}
}
