package core

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/fsread"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
)

// Rule files: the built-in rules, the files rules.paths matches, and the
// rules rules_load added at run time make one rule set.

// ruleSource is a rule file (or inline rules) added at run time.
type ruleSource = rules.Source

// Bounds of reading rule files: each is a regular file of at most
// maxRuleFile bytes, and a ** pattern looks at most at maxGlobEntries
// directory entries.
const (
	maxRuleFile    = 4 << 20
	maxGlobEntries = 100000
)

// loadRules compiles the rule set a configuration asks for. It also
// returns the configured patterns that matched no file.
// The plugins' rules come after the configured files, the rules added at
// run time last. It also returns the plugins found, enabled or not.
func (e *Engine) loadRules(c *config.Config, runtime runtimeRules) (*rules.Set, []string, []*plugin, error) {
	var sources []rules.Source
	if c.Rules.Builtin {
		sources = append(sources, rules.BuiltinSources()...)
	}
	if c.Rules.RedactSecrets {
		sources = append(sources, rules.RedactSecretsSource())
	}
	files, unmatched, err := readRuleFiles(c.ProjectRoot, c.ProjectRoot, c.Rules.Paths, false)
	if err != nil {
		return nil, nil, nil, err
	}
	sources = append(sources, files...)
	plugins, err := discoverPlugins(c, runtime.enabled)
	if err != nil {
		return nil, nil, nil, err
	}
	sources = append(sources, pluginSources(plugins)...)
	sources = append(sources, runtime.sources...)
	sources = append(sources, runtime.hostSources()...)
	for i := range sources {
		sources[i].Shadow = c.Rules.Mode == rules.ModeShadow // every rule watched, none enforced
	}
	set, err := rules.Load(sources, c.Rules.Thresholds.Map())
	if err != nil {
		return nil, nil, nil, err
	}
	return set, unmatched, plugins, nil
}

// readRuleFiles reads the files matching patterns, sorted. A relative
// pattern is relative to base and may not leave root (the project root);
// an absolute one is taken as given unless insideOnly (paths that requests
// name, through rules_load and rules_test, must stay inside root whatever
// they say). A wildcard does not match rule tests (NAME.test.toml), which
// may sit beside the rules they test. unmatched lists the patterns that
// matched nothing.
//
// Each source's Root is the folder the scripts its rules name must stay
// in: root, or, for a file an absolute pattern finds outside root, the
// folder the pattern starts from (the host named that folder, not what
// lies beside it).
func readRuleFiles(base, root string, patterns []string, insideOnly bool) (out []rules.Source, unmatched []string, err error) {
	var names []string
	found := map[string]ruleMatch{}
	for _, p := range patterns {
		matches, how, err := globRuleFiles(base, root, p, insideOnly)
		if err != nil {
			return nil, nil, err
		}
		if len(matches) == 0 {
			unmatched = append(unmatched, p)
		}
		wildcard := strings.ContainsAny(p, "*?[")
		for _, m := range matches {
			if wildcard && isRuleTest(m) {
				continue // a test kept beside the rules, as the shipped ones are
			}
			if _, seen := found[m]; !seen {
				found[m] = how
				names = append(names, m)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		how := found[n]
		var text []byte
		if how.inside != "" {
			text, err = fsread.In(how.inside, n, maxRuleFile)
		} else {
			text, err = fsread.File(n, maxRuleFile)
		}
		if err != nil {
			return nil, nil, protocol.Problems{{File: n, Message: err.Error()}}
		}
		scripts := how.inside
		if scripts == "" {
			scripts = how.from
			if abs, err := filepath.Abs(root); err == nil && fsread.Inside(abs, n) {
				scripts = abs
			}
		}
		out = append(out, rules.Source{Name: n, Text: text, Root: scripts})
	}
	return out, unmatched, nil
}

// ruleMatch says how the files one pattern matched are read: inside a
// folder (the root, absolute), or, when inside is "", as given; from is
// the folder the pattern starts from.
type ruleMatch struct{ inside, from string }

// globRuleFiles expands one pattern: path.Match syntax in each component,
// and "**" as a whole component for any number of directories. Only
// regular files match; directories reached through a ** are walked without
// following symbolic links.
func globRuleFiles(base, root, pattern string, insideOnly bool) ([]string, ruleMatch, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, ruleMatch{}, err
	}
	absBase, err := filepath.Abs(base)
	if err != nil {
		return nil, ruleMatch{}, err
	}
	p := filepath.FromSlash(pattern)
	if !filepath.IsAbs(p) {
		p = filepath.Join(absBase, p)
	} else if !insideOnly {
		absRoot = "" // an absolute pattern in the configuration is taken as given
	}
	p = filepath.Clean(p)
	if absRoot != "" && !within(absRoot, p) {
		return nil, ruleMatch{}, protocol.Problems{{File: "rules.paths", Message: fmt.Sprintf("%q leaves project_root", pattern)}}
	}
	how := ruleMatch{inside: absRoot}
	// The part before the first wildcard is a directory to start from.
	parts := strings.Split(filepath.ToSlash(p), "/")
	start := 0
	for start < len(parts) && !strings.ContainsAny(parts[start], "*?[") {
		start++
	}
	if start == len(parts) { // no wildcard: one file
		how.from = filepath.Dir(p)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && insideRoot(absRoot, p) {
			return []string{p}, how, nil
		}
		return nil, how, nil
	}
	for _, part := range parts[start:] {
		if _, err := path.Match(part, ""); err != nil {
			return nil, ruleMatch{}, protocol.Problems{{File: "rules.paths", Message: fmt.Sprintf("%q: %v", pattern, err)}}
		}
	}
	dir := filepath.FromSlash(strings.Join(parts[:start], "/"))
	if dir == "" {
		dir = "/"
	}
	how.from = dir
	g := globber{budget: maxGlobEntries}
	g.expand(dir, parts[start:])
	if g.budget < 0 {
		return nil, ruleMatch{}, protocol.Problems{{File: "rules.paths", Message: fmt.Sprintf("%q looks at more than %d directory entries", pattern, maxGlobEntries)}}
	}
	var out []string
	for _, m := range g.found {
		if insideRoot(absRoot, m) {
			out = append(out, m)
		}
	}
	return out, how, nil
}

type globber struct {
	found  []string
	budget int
}

// expand matches the pattern components parts below dir.
func (g *globber) expand(dir string, parts []string) {
	if len(parts) == 0 || g.budget < 0 {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	g.budget -= len(entries)
	if g.budget < 0 {
		return
	}
	part, rest := parts[0], parts[1:]
	if part == "**" {
		g.expand(dir, rest) // zero directories
		for _, en := range entries {
			if en.IsDir() { // a symbolic link to a directory is not followed
				g.expand(filepath.Join(dir, en.Name()), parts)
			}
		}
		return
	}
	for _, en := range entries {
		if ok, _ := path.Match(part, en.Name()); !ok {
			continue
		}
		full := filepath.Join(dir, en.Name())
		if len(rest) == 0 {
			if info, err := os.Stat(full); err == nil && info.Mode().IsRegular() {
				g.found = append(g.found, full)
			}
			continue
		}
		if info, err := os.Stat(full); err == nil && info.IsDir() {
			g.expand(full, rest)
		}
	}
}

// within reports whether p is root or below it, as written.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// insideRoot reports whether the file p really is below root once
// symbolic links are resolved (always true when root is "").
func insideRoot(root, p string) bool {
	return root == "" || fsread.Inside(root, p)
}

// isRuleTest reports whether a file is a rule test (NAME.test.toml or
// NAME.test.json) rather than a rule file.
func isRuleTest(name string) bool {
	base := strings.ToLower(filepath.Base(name))
	return strings.HasSuffix(base, ".test.toml") || strings.HasSuffix(base, ".test.json")
}

// asProblems finds the positioned problems in an error.
func asProblems(err error) (protocol.Problems, bool) {
	var ps protocol.Problems
	if errors.As(err, &ps) {
		return ps, true
	}
	return nil, false
}
