package core

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

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
func (e *Engine) loadRules(c *config.Config, runtime runtimeRules, strict strictPaths) (*rules.Set, []string, []*plugin, error) {
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
	plugins, pluginsUnmatched, err := discoverPlugins(c, runtime.enabled)
	if err != nil {
		return nil, nil, nil, err
	}
	if ps := strict.problems(c, unmatched, pluginsUnmatched); len(ps) > 0 {
		return nil, nil, nil, ps
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
		wildcard := hasWildcard(filepath.ToSlash(p))
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

// globRuleFiles expands one pattern with doublestar's syntax ("**" for
// any number of directories, {a,b} alternatives, path.Match's wildcards
// within a name). Only regular files match (a symbolic link to one
// counts); directories are walked through an os.Root opened at root (or,
// for an absolute pattern outside it, at the folder the pattern starts
// from), without following symbolic links, and a walk looks at most at
// maxGlobEntries directory entries.
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
	slashed := filepath.ToSlash(p)
	if !doublestar.ValidatePattern(slashed) {
		return nil, ruleMatch{}, protocol.Problems{{File: "rules.paths", Message: fmt.Sprintf("%q is not a valid pattern (a [ or { left open)", pattern)}}
	}
	how := ruleMatch{inside: absRoot}
	if !hasWildcard(slashed) { // one file
		how.from = filepath.Dir(p)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && insideRoot(absRoot, p) {
			return []string{p}, how, nil
		}
		return nil, how, nil
	}
	from, rest := doublestar.SplitPattern(slashed)
	how.from = filepath.FromSlash(from)
	// The walk's root: project_root when the pattern lies inside it, so
	// that no link leads the walk out; else the folder it starts from.
	walkRoot, sub := how.from, rest
	if absRoot != "" {
		rel, err := filepath.Rel(absRoot, how.from)
		if err != nil {
			return nil, how, nil
		}
		walkRoot, sub = absRoot, path.Join(filepath.ToSlash(rel), rest)
	}
	r, err := os.OpenRoot(walkRoot)
	if err != nil {
		return nil, how, nil // a folder that does not exist (yet) holds nothing
	}
	defer r.Close()
	fsys := &countedFS{FS: r.FS(), left: maxGlobEntries}
	var out []string
	_ = doublestar.GlobWalk(fsys, sub, func(name string, d fs.DirEntry) error {
		full := filepath.Join(walkRoot, filepath.FromSlash(name))
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			if info, err := os.Stat(full); err == nil && info.Mode().IsRegular() && insideRoot(absRoot, full) {
				out = append(out, full)
			}
		}
		return nil
	}, doublestar.WithNoFollow())
	if fsys.left < 0 {
		return nil, ruleMatch{}, protocol.Problems{{File: "rules.paths", Message: fmt.Sprintf("%q looks at more than %d directory entries", pattern, maxGlobEntries)}}
	}
	return out, how, nil
}

// hasWildcard reports whether a pattern has any of doublestar's special
// characters (a file name holding one is written escaped, \*).
func hasWildcard(p string) bool { return strings.ContainsAny(p, "*?[{\\") }

// countedFS is a file system whose ReadDir counts the entries it returns,
// failing once more than left were read: a pattern's walk stays bounded.
type countedFS struct {
	fs.FS
	left int
}

func (c *countedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if c.left < 0 {
		return nil, errGlobBudget
	}
	entries, err := fs.ReadDir(c.FS, name)
	c.left -= len(entries)
	if c.left < 0 {
		return nil, errGlobBudget
	}
	return entries, err
}

func (c *countedFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(c.FS, name) }

var errGlobBudget = errors.New("too many directory entries")

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

// problems are the configured patterns that matched nothing and had to
// match something: those the change's own text gave (strict), but for
// the defaults, which may match nothing (a project without rules or
// plugins). Each is a problem of its key, positioned by positionIn.
func (strict strictPaths) problems(c *config.Config, rules, plugins []string) protocol.Problems {
	defaults := config.Build(config.Defaults())
	var ps protocol.Problems
	for _, k := range []struct {
		on        bool
		key, what string
		unmatched []string
		defaults  []string
	}{{strict.rules, "rules.paths", "file", rules, defaults.Rules.Paths},
		{strict.plugins, "plugins.paths", "plugin folder (a folder holding a plugin.toml)", plugins, defaults.Plugins.Paths}} {
		if !k.on {
			continue
		}
		for _, u := range k.unmatched {
			if !contains(k.defaults, u) {
				ps = append(ps, protocol.Problem{File: k.key, Message: fmt.Sprintf("%q matches no %s under %s", u, k.what, projectRoot(c))})
			}
		}
	}
	return ps
}

// asProblems finds the positioned problems in an error.
func asProblems(err error) (protocol.Problems, bool) {
	var ps protocol.Problems
	if errors.As(err, &ps) {
		return ps, true
	}
	return nil, false
}
