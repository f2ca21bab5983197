package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
)

// Check reads configuration text as the start-up file is read (on top of
// the defaults) and compiles everything it names — rule files, plugins,
// Lua conditions, scripts and tools, HTTP tools, callbacks, the model's
// settings, [[mcp_servers]] entries — the way a configuration change
// prepares them, but puts nothing in force and starts nothing: no MCP
// server is started, no embedding is fetched, no script runs, the audit
// file is not opened. It returns every problem it finds, each with its
// file, line and column where they are known (a problem of a key of text
// at that key; source names text). It is what `clara check` runs.
//
// It needs no engine: it makes one of its own with no configuration in
// force (New would load the rules of the current directory and fire its
// plugins' events).
func Check(text []byte, source string) protocol.Problems {
	return newEngine(Options{}).check(text, source, false)
}

// CheckFile is Check of a configuration file's text, read as the start-up
// file and bin/clara --config are: its relative paths anchored to the
// file's folder (issue 26 §1).
func CheckFile(text []byte, path string) protocol.Problems {
	return newEngine(Options{}).check(text, path, true)
}

func (e *Engine) check(text []byte, source string, file bool) protocol.Problems {
	var over config.Tree
	var err error
	if file {
		over, err = fileTree(text, source, config.Defaults(), MaxConfigFile)
	} else {
		over, err = config.Parse(text, source, MaxConfigFile)
	}
	if err != nil {
		return problemsIn(err, source)
	}
	c := config.Build(config.Merge(config.Defaults(), over))
	var out protocol.Problems
	add := func(err error) {
		if err != nil {
			out = append(out, problemsIn(err, source)...)
		}
	}

	// The rules: each stage on its own, so that a bad plugin manifest does
	// not hide a bad rule file.
	var sources []rules.Source
	if c.Rules.Builtin {
		sources = append(sources, rules.BuiltinSources()...)
	}
	files, unmatched, err := readRuleFiles(c.ProjectRoot, c.ProjectRoot, c.Rules.Paths, false)
	add(err)
	sources = append(sources, files...)
	plugins, pluginsUnmatched, err := discoverPlugins(c, nil)
	add(err)
	if ps := strictFor(over).problems(c, unmatched, pluginsUnmatched); len(ps) > 0 {
		add(ps)
	}
	sources = append(sources, pluginSources(plugins)...)
	set, err := rules.Load(sources, c.Rules.Thresholds.Map())
	add(err)
	if ps, ok := asProblems(err); ok {
		// The files without problems, for what is checked of the set.
		bad := map[string]bool{}
		for _, p := range ps {
			bad[p.File] = true
		}
		var good []rules.Source
		for _, src := range sources {
			if !bad[src.Name] {
				good = append(good, src)
			}
		}
		set, _ = rules.Load(good, c.Rules.Thresholds.Map())
	}

	withTools, origins, pluginLua, err := withPluginTools(c, plugins, e.tools.Lookup)
	add(err)
	if err != nil { // the configuration's own tools, then
		withTools, origins, pluginLua, _ = withPluginTools(c, nil, e.tools.Lookup)
	}
	var httpURLs []string
	if withTools != nil {
		_, httpURLs, err = e.compileConfigTools(withTools, origins, pluginLua)
		add(err)
	}
	_, err = configuredCallbacks(c)
	add(err)
	_, err = e.prepareModels(c, httpURLs)
	add(err)
	if set != nil {
		add(checkConcepts(c, set))
	}
	if _, _, _, err := serverConfigs(c.MCPServers, projectRoot(c)); err != nil {
		add(err)
	}
	add(checkAuditPath(auditPath(c)))

	out = positionIn(out, text, source).(protocol.Problems)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File { // the configuration's own first, then each file's
			return a.File == source || (b.File != source && a.File < b.File)
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return out
}

// positionIn gives the problems in err that are about a key of the
// configuration text (tools[1] (name): ..., network.allow_hosts: ...,
// rules.paths) that key's place in text, named source; the others (a rule
// file's) are left as they are. An err without problems is returned as
// it is.
func positionIn(err error, text []byte, source string) error {
	ps, ok := asProblems(err)
	if !ok {
		return err
	}
	out := make(protocol.Problems, len(ps))
	copy(out, ps)
	for i := range out {
		p := &out[i]
		if p.Line > 0 || (p.File != "" && p.File != source && p.File != "rules.paths" && p.File != "plugins.paths") {
			continue
		}
		key := p.File
		if key == "" || key == source {
			key = keyOfMessage(p.Message)
		} else {
			p.Message = key + ": " + p.Message
		}
		p.File = source
		if key != "" {
			p.Line, p.Col = config.Locate(text, key)
		}
	}
	return out
}

// problemsIn is err as problems: its own when it has them, else one
// problem of source.
func problemsIn(err error, source string) protocol.Problems {
	if ps, ok := asProblems(err); ok {
		return append(protocol.Problems(nil), ps...)
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if ps, ok := asProblems(pe.Cause); ok {
			return append(protocol.Problems(nil), ps...)
		}
		return protocol.Problems{{File: source, Message: pe.Message}}
	}
	return protocol.Problems{{File: source, Message: err.Error()}}
}

// leadingKey is the key path a problem's message starts with:
// "tools[1] (name): ...", "network.allow_hosts: ...",
// "configuration: callbacks[0]: ...".
var leadingKey = regexp.MustCompile(`^(?:configuration: )?([a-z_]+(?:\[[0-9]+\])?(?:\.[a-z_]+(?:\[[0-9]+\])?)*)[ :]`)

func keyOfMessage(msg string) string {
	if m := leadingKey.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return ""
}

// checkConcepts is what prepareConcepts finds without fetching anything:
// semantic conditions need an embedding model, in OpenAI's format.
func checkConcepts(c *config.Config, set *rules.Set) error {
	if c.LLM.EmbeddingModel != "" && c.LLM.BaseURL != "" {
		if p := orProvider(c.LLM.Provider, c.LLM.Model); p == llm.ProviderAnthropic || p == llm.ProviderGemini {
			return fmt.Errorf("llm.embedding_model: embeddings are requested in OpenAI's format; llm.provider is %q", p)
		}
		return nil
	}
	concepts := set.Concepts()
	if len(concepts) == 0 {
		return nil
	}
	var problems protocol.Problems
	for _, k := range concepts {
		problems = append(problems, protocol.Problem{File: k.File, Line: k.Line,
			Message: fmt.Sprintf("rule %q: semantic condition: no embedding model: set llm.base_url and llm.embedding_model", k.Rule)})
	}
	return problems
}

// checkAuditPath is what opening the audit file would find, without
// creating it: an existing path must be a regular file, a new one needs
// its directory.
func checkAuditPath(path string) error {
	if path == "" {
		return nil
	}
	if info, err := os.Stat(path); err == nil {
		if !info.Mode().IsRegular() {
			return fmt.Errorf("audit.path: %s is not a regular file", path)
		}
		return nil
	}
	if info, err := os.Stat(filepath.Dir(path)); err != nil || !info.IsDir() {
		return fmt.Errorf("audit.path: %s: its directory %s does not exist", path, filepath.Dir(path))
	}
	return nil
}
