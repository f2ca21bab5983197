package core

import (
	"context"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/toolbox"
)

// The rule of whose name a tool may take (toolnames.go), owner by owner.
func TestNameGuard_ranks(t *testing.T) {
	e := New(Options{})
	mk := func(builtin bool, origin toolbox.Origin) *toolbox.Tool {
		tl, err := toolbox.NewTool(toolbox.Descriptor{Name: "x"}, toolbox.ToolOptions{Builtin: builtin, Origin: origin,
			Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	builtin := mk(true, toolbox.Origin{})
	host := mk(false, toolbox.Origin{})
	config := mk(false, toolbox.Origin{Rank: rankConfig, Name: "the configuration's [[tools]]"})
	configReplaces := mk(false, toolbox.Origin{Rank: rankConfig, Name: "the configuration's [[tools]]", Replaces: true})
	plugin := mk(false, toolbox.Origin{Rank: rankPlugin, Name: `plugin "p"`})
	serverA := mk(false, remoteOrigin("a", false))
	serverB := mk(false, remoteOrigin("b", false))
	serverBReplaces := mk(false, remoteOrigin("b", true))
	for _, c := range []struct {
		prev, t *toolbox.Tool
		refused string // "" when t may take the name
	}{
		{builtin, configReplaces, `"x" is a built-in tool`},
		{builtin, serverBReplaces, `"x" is a built-in tool`},
		{host, config, `would replace the tool of the host (clara_register_tool)`},
		{host, configReplaces, ""},
		{host, serverA, `tool "x" of mcp server "a" is left out`},
		{config, plugin, `would replace the tool of the configuration's [[tools]]`},
		{plugin, config, ""},
		{serverA, config, ""},
		{serverA, plugin, ""},
		{serverA, serverA, ""},
		{serverA, serverB, `would replace the tool of mcp server "a"`},
		{serverA, serverBReplaces, ""},
		{config, config, ""},
	} {
		err := e.nameGuard(c.prev, c.t)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s over %s: %v", ownerOf(c.t), ownerOf(c.prev), err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s over %s: %v, want %q", ownerOf(c.t), ownerOf(c.prev), err, c.refused)
		}
	}
}
