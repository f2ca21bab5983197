package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

// Plugins (seed 004's Oracle plugins): a folder holding plugin.toml (name,
// version, description, enabled, priority), rules in rules/*.toml (or
// .json) and their Lua scripts in scripts/. plugins.paths finds the
// folders. A plugin's rules load after the configured rule files, highest
// plugin priority first; their state lives in the plugin's own namespace
// (rules.StateScope). on_plugin_load and on_plugin_unload fire when a
// plugin comes into force or leaves it.

// Events of a plugin's life.
const (
	evPluginLoad   = "on_plugin_load"
	evPluginUnload = "on_plugin_unload"
)

// pluginManifest is plugin.toml.
type pluginManifest struct {
	Name        string `toml:"name"`
	Version     string `toml:"version"`
	Description string `toml:"description"`
	Enabled     *bool  `toml:"enabled"`
	Priority    int    `toml:"priority"`
}

// plugin is one plugin found through plugins.paths. Read-only once made.
type plugin struct {
	name, version, description string
	priority                   int
	dir                        string
	enabled                    bool   // in force: plugin.toml's enabled, or plugin_enable's word
	enabledBy                  string // "plugin.toml" or "plugin_enable"
	sources                    []rules.Source
	scripts                    []string          // scripts/*.lua
	tools                      []map[string]any  // tools/*.toml's [[tools]], lua_file made absolute
	luaFiles                   map[string][]byte // tool name -> its lua_file's text, read inside the folder
	fingerprint                [32]byte          // of everything read, to tell a plugin edited from one left alone

	toolAt []protocol.Problem // where each of tools is declared (File, Line)
}

var pluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Bounds of a plugin folder: its manifest, rule files and scripts.
const maxManifest = 64 << 10

// discoverPlugins finds the plugins of configuration c, enabled as
// plugin.toml says unless enabled (plugin_enable's overrides) says
// otherwise, in load order (priority, highest first, then name). Every
// problem is positioned; any problem fails the whole discovery, as a
// broken rule file does.
func discoverPlugins(c *config.Config, enabled map[string]bool) ([]*plugin, error) {
	patterns := make([]string, len(c.Plugins.Paths))
	for i, p := range c.Plugins.Paths {
		patterns[i] = strings.TrimRight(p, "/") + "/plugin.toml"
	}
	manifests, _, err := readRuleFiles(c.ProjectRoot, c.ProjectRoot, patterns, false)
	if ps, ok := asProblems(err); ok {
		for i := range ps { // a pattern's problem is plugins.paths'
			if ps[i].File == "rules.paths" {
				ps[i].File = "plugins.paths"
			}
		}
	}
	if err != nil {
		return nil, err
	}
	var out []*plugin
	var problems protocol.Problems
	byName := map[string]string{}
	for _, m := range manifests {
		p, err := readPlugin(m)
		if err != nil {
			if ps, ok := asProblems(err); ok {
				problems = append(problems, ps...)
				continue
			}
			return nil, err
		}
		if first, dup := byName[p.name]; dup {
			problems = append(problems, protocol.Problem{File: m.Name, Line: 1,
				Message: fmt.Sprintf("plugin %q is defined twice (first in %s)", p.name, first)})
			continue
		}
		byName[p.name] = m.Name
		if on, ok := enabled[p.name]; ok {
			p.enabled, p.enabledBy = on, "plugin_enable"
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority > out[j].priority
		}
		return out[i].name < out[j].name
	})
	if len(problems) > 0 {
		return out, problems // the plugins that did read, for Check
	}
	return out, nil
}

// readPlugin reads a plugin's folder from its manifest.
func readPlugin(m rules.Source) (*plugin, error) {
	var doc pluginManifest
	if ps := decodeManifest(m.Name, m.Text, &doc); ps != nil {
		return nil, ps
	}
	dir := filepath.Dir(m.Name)
	p := &plugin{name: doc.Name, version: doc.Version, description: doc.Description, priority: doc.Priority,
		dir: dir, enabled: true, enabledBy: "plugin.toml"}
	if p.name == "" {
		p.name = filepath.Base(dir)
	}
	if !pluginName.MatchString(p.name) {
		return nil, protocol.Problems{{File: m.Name, Line: lineOf(m.Text, "name"),
			Message: fmt.Sprintf("plugin name %q: letters, digits, '_', '.', '-', at most 64", p.name)}}
	}
	if doc.Enabled != nil {
		p.enabled = *doc.Enabled
	}
	h := sha256.New()
	h.Write(m.Text)
	// The folder is the plugin's: nothing it names may leave it.
	ruleFiles, _, err := readRuleFiles(dir, dir, []string{"rules/*.toml", "rules/*.json"}, true)
	if err != nil {
		return nil, err
	}
	for _, f := range ruleFiles {
		f.Dir, f.Namespace = dir, p.name // script = "scripts/x.lua" is relative to the folder
		p.sources = append(p.sources, f)
		fmt.Fprintf(h, "\x00%s\x00%d\x00", f.Name, len(f.Text))
		h.Write(f.Text)
	}
	scripts, _, err := readRuleFiles(dir, dir, []string{"scripts/*.lua"}, true)
	if err != nil {
		return nil, err
	}
	for _, s := range scripts {
		p.scripts = append(p.scripts, s.Name)
		fmt.Fprintf(h, "\x00%s\x00%d\x00", s.Name, len(s.Text))
		h.Write(s.Text)
	}
	toolFiles, _, err := readRuleFiles(dir, dir, []string{"tools/*.toml"}, true)
	if err != nil {
		return nil, err
	}
	for _, f := range toolFiles {
		tools, err := readPluginTools(dir, f, p)
		if err != nil {
			return nil, err
		}
		p.tools = append(p.tools, tools...)
		for i := range tools {
			p.toolAt = append(p.toolAt, protocol.Problem{File: f.Name, Line: lineOfNth(f.Text, "[[tools]]", i)})
		}
		fmt.Fprintf(h, "\x00%s\x00%d\x00", f.Name, len(f.Text))
		h.Write(f.Text)
	}
	for _, m := range p.tools {
		d, code, _ := config.SplitToolEntry(m) // checked when read
		if code.LuaFile != nil {
			fmt.Fprintf(h, "\x00%s\x00%d\x00", *code.LuaFile, len(p.luaFiles[d.Name]))
			h.Write(p.luaFiles[d.Name])
		}
	}
	copy(p.fingerprint[:], h.Sum(nil))
	return p, nil
}

// readPluginTools reads a plugin's tools/NAME.toml: [[tools]] tables as in
// the configuration, a lua_file relative to the plugin's folder and, once
// symbolic links are resolved, inside it (an absolute one too). The Lua
// files are read here, into p.luaFiles.
func readPluginTools(dir string, f rules.Source, p *plugin) ([]map[string]any, error) {
	var doc struct {
		Tools []map[string]any `toml:"tools"`
	}
	if ps := decodeManifest(f.Name, f.Text, &doc); ps != nil {
		return nil, ps
	}
	for i, m := range doc.Tools {
		d, code, err := config.SplitToolEntry(m)
		if err != nil {
			return nil, protocol.Problems{{File: f.Name, Line: lineOfNth(f.Text, "[[tools]]", i), Message: err.Error()}}
		}
		if code.LuaFile == nil {
			continue
		}
		path := *code.LuaFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		text, err := fsread.In(dir, path, maxLuaToolFile)
		if err != nil {
			msg := fmt.Sprintf("tool %q: lua_file: %v", d.Name, err)
			if errors.Is(err, fsread.ErrOutside) {
				msg = fmt.Sprintf("tool %q: lua_file %q leaves the plugin's folder (%v)", d.Name, *code.LuaFile, err)
			}
			return nil, protocol.Problems{{File: f.Name, Line: lineOfNth(f.Text, "[[tools]]", i), Message: msg}}
		}
		m["lua_file"] = path
		if p.luaFiles == nil {
			p.luaFiles = map[string][]byte{}
		}
		p.luaFiles[d.Name] = text
	}
	return doc.Tools, nil
}

// lineOfNth is the line of the n-th (from 0) line starting with prefix.
func lineOfNth(text []byte, prefix string, n int) int {
	for i, line := range bytes.Split(text, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte(prefix)) {
			if n == 0 {
				return i + 1
			}
			n--
		}
	}
	return 1
}

// withPluginTools is c with the tools of its enabled plugins after its
// own [[tools]], for compileConfigTools (c itself when there are none),
// who declares each entry, and the text of their lua_files, by tool name
// (read, inside their plugin's folder, when the plugin was). A name
// declared twice is a problem; so is a name a tool the host registered
// holds (clara_register_tool, a Python @tool), unless the entry says
// replace = true (issue 25, finding 15).
func withPluginTools(c *config.Config, plugins []*plugin, registered func(string) (*toolbox.Tool, bool)) (*config.Config, []toolbox.Origin, map[string][]byte, error) {
	var extra []map[string]any
	var problems protocol.Problems
	var luaFiles map[string][]byte
	names := map[string]string{}
	origins := make([]toolbox.Origin, 0, len(c.Tools))
	hostTool := func(d toolbox.Descriptor, code config.ToolCode, by string) string {
		if t, ok := registered(d.Name); ok && !code.Replace && !t.Builtin && rankOf(t) == rankHost {
			return fmt.Sprintf("tool %q of %s would replace the tool %q the host registered; say replace = true in its entry to let it", d.Name, by, d.Name)
		}
		return ""
	}
	for i, m := range c.Tools {
		d, code, err := config.SplitToolEntry(m)
		origins = append(origins, toolbox.Origin{Rank: rankConfig, Name: "the configuration's [[tools]]", Replaces: code.Replace})
		if err != nil {
			continue // compileConfigTools says why
		}
		names[d.Name] = "the configuration"
		if msg := hostTool(d, code, "the configuration's [[tools]]"); msg != "" {
			problems = append(problems, protocol.Problem{Message: fmt.Sprintf("tools[%d] (%s): %s", i, d.Name, msg)})
		}
	}
	for _, p := range plugins {
		if !p.enabled {
			continue
		}
		for i, m := range p.tools {
			d, code, _ := config.SplitToolEntry(m) // checked when read
			at := p.toolAt[i]
			if first, dup := names[d.Name]; dup {
				return nil, nil, nil, protocol.Problems{{File: at.File, Line: at.Line,
					Message: fmt.Sprintf("tool %q of plugin %q is declared by %s too", d.Name, p.name, first)}}
			}
			by := "plugin " + strconv.Quote(p.name)
			names[d.Name] = by
			if msg := hostTool(d, code, by); msg != "" {
				problems = append(problems, protocol.Problem{File: at.File, Line: at.Line, Message: msg})
			}
			extra = append(extra, m)
			origins = append(origins, toolbox.Origin{Rank: rankPlugin, Name: by, Replaces: code.Replace})
			if text, ok := p.luaFiles[d.Name]; ok {
				if luaFiles == nil {
					luaFiles = map[string][]byte{}
				}
				luaFiles[d.Name] = text
			}
		}
	}
	if len(problems) > 0 {
		return nil, nil, nil, problems
	}
	if len(extra) == 0 {
		return c, origins, luaFiles, nil
	}
	with := *c
	with.Tools = append(append([]map[string]any(nil), c.Tools...), extra...)
	return &with, origins, luaFiles, nil
}

// decodeManifest reads plugin.toml strictly: an unknown key or a value of
// the wrong type is a problem at its line.
func decodeManifest(name string, text []byte, v any) protocol.Problems {
	if len(text) > maxManifest {
		return protocol.Problems{{File: name, Message: fmt.Sprintf("%d bytes, over the %d-byte limit", len(text), maxManifest)}}
	}
	return rules.DecodeTOML(name, text, v)
}

// lineOf is the line where key is first written, 1 when it is not.
func lineOf(text []byte, key string) int {
	for i, line := range bytes.Split(text, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte(key)) {
			return i + 1
		}
	}
	return 1
}

// pluginSources are the rule sources of the enabled plugins, in load order.
func pluginSources(list []*plugin) []rules.Source {
	var out []rules.Source
	for _, p := range list {
		if p.enabled {
			out = append(out, p.sources...)
		}
	}
	return out
}

// pluginInfo is one plugin of plugins_list.
type pluginInfo struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Description string   `json:"description"`
	Enabled     bool     `json:"enabled"`
	EnabledBy   string   `json:"enabled_by"`
	Priority    int      `json:"priority"`
	Path        string   `json:"path"`
	Rules       []string `json:"rules"`
}

// ListPlugins serves plugins_list: every plugin found, enabled or not,
// in load order, with the ids of its rules in force.
func (a adminTools) ListPlugins() ([]byte, error) {
	s := a.e.current.Load()
	byPlugin := map[string][]string{}
	for _, r := range s.rules.Rules() {
		if r.Namespace != "" {
			byPlugin[r.Namespace] = append(byPlugin[r.Namespace], r.ID)
		}
	}
	list := []pluginInfo{}
	for _, p := range s.plugins {
		ids := byPlugin[p.name]
		if ids == nil {
			ids = []string{}
		}
		list = append(list, pluginInfo{p.name, p.version, p.description, p.enabled, p.enabledBy, p.priority, p.dir, ids})
	}
	return json.Marshal(struct {
		Plugins []pluginInfo `json:"plugins"`
	}{list})
}

// EnablePlugin serves plugin_enable: the plugin's rules come into force
// or leave it, through the same prepare and commit as rules_load (a plugin
// whose rules do not load stays as it was). The choice holds until a
// reset.
func (a adminTools) EnablePlugin(_ context.Context, name string, on bool) ([]byte, error) {
	e := a.e
	known := false
	for _, p := range e.current.Load().plugins {
		known = known || p.name == name
	}
	if !known {
		return nil, protocol.Errorf(protocol.InvalidArgs, "plugin_enable: no plugin %q (plugins_list lists them)", name)
	}
	left, err := e.change(func(cur *snapshot) (config.Tree, runtimeRules) {
		return cur.tree, cur.runtime.withEnabled(name, on)
	}, nil)
	retire(left)
	if err != nil {
		return nil, loadRefusal(err, "plugin_enable: ", " (the rules in force are unchanged)")
	}
	e.announceRules(e.current.Load(), ruleChange{Plugin: name, Enabled: on})
	return a.ListPlugins()
}

// firePluginEvents fires on_plugin_unload for the plugins that left the
// rules in force (with the rules they left: a plugin hears its own
// unload) and on_plugin_load for those that came in (with the new rules),
// a plugin whose files changed doing both. Called without e.admin: the
// rules may call tools.
func (e *Engine) firePluginEvents(old, cur *snapshot) {
	loaded := func(s *snapshot) map[string]*plugin {
		m := map[string]*plugin{}
		if s != nil {
			for _, p := range s.plugins {
				if p.enabled {
					m[p.name] = p
				}
			}
		}
		return m
	}
	before, after := loaded(old), loaded(cur)
	same := func(a, b *plugin) bool {
		return a != nil && b != nil && a.fingerprint == b.fingerprint && a.dir == b.dir
	}
	if old != nil {
		for _, p := range old.plugins {
			if p.enabled && !same(p, after[p.name]) {
				e.firePluginEvent(old, evPluginUnload, p)
			}
		}
	}
	for _, p := range cur.plugins {
		if p.enabled && !same(before[p.name], p) {
			e.firePluginEvent(cur, evPluginLoad, p)
		}
	}
}

func (e *Engine) firePluginEvent(s *snapshot, event string, p *plugin) {
	payload := func() map[string]any { return map[string]any{"plugin": p.name, "version": p.version, "path": p.dir} }
	ctx := withEmissionBudget(context.Background(), s)
	if perr := e.fireOnly(ctx, s, event, protocol.DefaultSession, payload); perr != nil {
		e.log.Logf(logging.Warn, "%s %q: %s", event, p.name, perr.Message)
	}
}
