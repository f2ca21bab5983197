package core

import (
	"fmt"
	"strconv"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/toolbox"
)

// Whose name a tool may take (issue 25, finding 15: a remote MCP tool with
// prefix "" or a plugin's tool silently replaced the host's). Every tool
// has an owner, ranked: Clara's built-ins, then the host program's tools
// (clara_register_tool, Python's @tool), then the configuration's
// [[tools]], then its plugins' tools, then remote MCP servers' tools. A
// tool takes a name held by a lower rank (that tool leaves) or by its own
// owner (its own earlier version); a name held by a higher rank, or by
// another owner of the same rank (another server), only when its
// configuration says replace = true; a built-in's never. The host itself
// registers over anything but a built-in (toolbox.Registry.Register).
//
// Configuration problems are reported when the configuration is applied
// (withPluginTools; checkEagerNames for the servers connected then); a
// remote server's tools that arrive later (a lazy server, a restart, its
// list_changed) are refused one by one with a warning in the log.
const (
	rankRemote = iota + 1
	rankPlugin
	rankConfig
	rankHost
	rankBuiltin
)

// rankOf is the rank of t's owner.
func rankOf(t *toolbox.Tool) int {
	switch {
	case t.Builtin:
		return rankBuiltin
	case t.Origin.Rank == 0:
		return rankHost
	}
	return t.Origin.Rank
}

// ownerOf names t's owner, for messages.
func ownerOf(t *toolbox.Tool) string {
	switch rankOf(t) {
	case rankBuiltin:
		return "Clara (a built-in tool)"
	case rankHost:
		return "the host (clara_register_tool)"
	}
	return t.Origin.Name
}

// remoteOrigin is the Origin of a remote server's tool.
func remoteOrigin(server string, replaces bool) toolbox.Origin {
	return toolbox.Origin{Rank: rankRemote, Name: "mcp server " + strconv.Quote(server), Replaces: replaces}
}

// nameGuard is the registry's guard of the swaps of configured and remote
// tools (toolbox.Registry.SwapGuarded): nil when t may take prev's name.
// It logs a lower rank's tool giving way.
func (e *Engine) nameGuard(prev, t *toolbox.Tool) error {
	pr, tr := rankOf(prev), rankOf(t)
	switch {
	case pr == rankBuiltin:
		return fmt.Errorf("tool %q of %s is left out: %q is a built-in tool", t.Name, ownerOf(t), t.Name)
	case pr == tr && prev.Origin.Name == t.Origin.Name:
		return nil // its own
	case tr > pr:
		e.log.Logf(logging.Warn, "tool %q of %s gives way to the tool of %s with that name", t.Name, ownerOf(prev), ownerOf(t))
		return nil
	case t.Origin.Replaces:
		e.log.Logf(logging.Info, "tool %q of %s replaces the tool of %s (replace = true)", t.Name, ownerOf(t), ownerOf(prev))
		return nil
	}
	return fmt.Errorf("tool %q of %s is left out: it would replace the tool of %s with that name; replace = true in its configuration lets it", t.Name, ownerOf(t), ownerOf(prev))
}
