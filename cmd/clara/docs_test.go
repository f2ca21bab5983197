package main

// TestDocs_name_only_what_exists reads README.md and docs/*.md and checks
// that what they name in backticks exists, so that prose cannot drift from
// the code the way runnable blocks cannot (tests/run_doc_blocks.py):
//
//   - a C name (`clara_evaluate`, `clara_call_progress(call, ...)`) is
//     declared in include/clara.h or clips_bridge/clara_clips.h;
//   - a configuration key (`limits.timeout_ms`, `mcp.allow_remote = true`:
//     a dotted name whose first part is a table of the configuration) is
//     one of the key table of docs/configuration.md (config.DocTable);
//   - a tool (`rules_test` followed by the word "tool") is a built-in tool
//     (tools_list) or one a page declares in a code block (name = "...");
//   - a command line of bin/clara (`clara rules test --coverage`, also in
//     sh blocks) names commands and flags the command has, and one of
//     clara-clips its flags; a bare `--flag` in docs/cli.md is a flag of
//     some command;
//   - `libclara.so.X.Y.Z` is this version's file;
//   - a passage that says something is not built (a "Not built" section,
//     or a line with "not built", "not in this library yet", "does not
//     exist yet") names no built-in tool and no function of clara.h, in
//     backticks or as words, nor a handler clara.h sets ("event handler"
//     for clara_set_event_handler), nor, as a word, a table of the
//     configuration ("plugins").
//
// Each failure names the page, the line and the name.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/toolbox"
)

const repoRoot = "../.."

// known is what exists, for the docs to name.
type known struct {
	cNames       map[string]bool // identifiers of clara.h and clara_clips.h
	handlers     []string        // "event handler" for clara_set_event_handler
	keys         map[string]bool // configuration keys, dotted; "NAME" parts are wildcards
	tables       map[string]bool // the tables of the configuration (limits, llm, ...)
	builtinTools map[string]bool
	tools        map[string]bool // built-in, and declared in the docs' code blocks
	commands     map[string]*cobra.Command
	allFlags     map[string]bool // every flag of every clara command
	clipsFlags   map[string]bool
}

func TestDocs_name_only_what_exists(t *testing.T) {
	pages := docPages(t)
	k := knownNames(t, pages)
	var problems []string
	for _, p := range pages {
		problems = append(problems, checkPage(p, k)...)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDocs_check_catches what it is for, on a page made up here: each
// line names one thing that does not exist.
func TestDocs_check_catches(t *testing.T) {
	k := knownNames(t, docPages(t))
	lines := []string{
		"Call `clara_evaluatte(request)` and set `limits.timeout_mss`.", // 1
		"Run `clara rules tset` or `clara call echo --sesion s1`.",      // 2
		"The `rules_tests` tool, and `clara-clips -f3 x.clp`.",          // 3
		"```sh",
		"bin/clara --config c.toml chat hi --verbos", // 5
		"```",
		"",
		"## Not built yet",
		"",
		"- The `tools_list` tool and an event handler.", // 10
		"",
		"Plugins and `libclara.so.0.0.9` are not built", // 12
		"yet: nothing reads plugins.",                   // 13
		"## Fine",
		"Fine: `clara call echo '{}' --session s1 --trace`, `clara_evaluate`, `llm.base_url = \"x\"`,",
		"`rules.thresholds.mine`, `clara chat -- -x`, the `echo` tool, `clara-clips -f2 x.clp`,",
		"a `network` tool; a tool that is not built in, unlike `tools_list`, gives way; `mcp.types.ToolAnnotations`.",
	}
	got := checkPage(page{name: filepath.Join("docs", "cli.md"), lines: lines}, k)
	want := map[string][]string{
		"1":  {"clara_evaluatte", "limits.timeout_mss"},
		"2":  {`no command "tset"`, "no flag --sesion"},
		"3":  {"`rules_tests` tool", "clara-clips has no flag -f3"},
		"5":  {"no flag --verbos"},
		"10": {"`tools_list`", "an event handler"},
		"12": {"libclara.so.0.0.9"},
		"13": {"not built of plugins"},
	}
	for line, subs := range want {
		for _, sub := range subs {
			found := false
			for _, g := range got {
				if strings.HasPrefix(g, "docs/cli.md:"+line+": ") && strings.Contains(g, sub) {
					found = true
				}
			}
			if !found {
				t.Errorf("line %s: no problem with %q in\n%s", line, sub, strings.Join(got, "\n"))
			}
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "docs/cli.md:15:") || strings.HasPrefix(g, "docs/cli.md:16:") || strings.HasPrefix(g, "docs/cli.md:17:") || strings.HasPrefix(g, "docs/cli.md:18:") {
			t.Errorf("a false alarm: %s", g)
		}
	}
}

// page is a Markdown file, split into lines.
type page struct {
	name  string // as written in messages: README.md, docs/llm.md
	lines []string
}

func docPages(t *testing.T) []page {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	files = append([]string{filepath.Join(repoRoot, "README.md")}, files...)
	var out []page
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, f)
		out = append(out, page{name: rel, lines: strings.Split(string(text), "\n")})
	}
	if len(out) < 10 {
		t.Fatalf("only %d pages found", len(out))
	}
	return out
}

var (
	cIdent      = regexp.MustCompile(`\bclara_[a-z0-9_]+\b`)
	handlerFunc = regexp.MustCompile(`^clara_set_([a-z]+)_handler$`)
	keyRow      = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	declName    = regexp.MustCompile(`(?:\bname\s*=\s*|"name"\s*:\s*|\\"name\\"\s*:\s*\\?)"([A-Za-z0-9_-]+)\\?"`)
	pyToolDef   = regexp.MustCompile(`@clara\.tool[^\n]*\n(?:@[^\n]*\n)*\s*(?:async\s+)?def\s+([a-z_][a-z0-9_]*)`)
	clipsFlag   = regexp.MustCompile(`(?m)^\s+"\s+(-[-a-z0-9]+)(?:, (--?[a-z-]+))?`)
)

func knownNames(t *testing.T, pages []page) *known {
	t.Helper()
	k := &known{cNames: map[string]bool{}, keys: map[string]bool{}, tables: map[string]bool{},
		builtinTools: map[string]bool{}, tools: map[string]bool{}, commands: map[string]*cobra.Command{},
		allFlags: map[string]bool{}, clipsFlags: map[string]bool{}}

	for _, h := range []string{"include/clara.h", "clips_bridge/clara_clips.h"} {
		text, err := os.ReadFile(filepath.Join(repoRoot, h))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range cIdent.FindAllString(string(text), -1) {
			if m := handlerFunc.FindStringSubmatch(name); m != nil && !k.cNames[name] {
				k.handlers = append(k.handlers, m[1]+" handler")
			}
			k.cNames[name] = true
		}
	}
	if !k.cNames["clara_evaluate"] || len(k.handlers) == 0 {
		t.Fatal("clara.h was not read")
	}

	for _, m := range keyRow.FindAllStringSubmatch(config.DocTable(), -1) {
		key := strings.Trim(m[1], "[]")
		k.keys[key] = true
		if i := strings.IndexByte(key, '.'); i > 0 {
			k.tables[key[:i]] = true
		}
	}
	if !k.keys["limits.timeout_ms"] || !k.tables["llm"] {
		t.Fatal("the key table was not read")
	}

	e := core.New(core.Options{})
	defer e.Close()
	var list struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(e.Evaluate([]byte(`{"tool":"tools_list"}`)), &list); err != nil || len(list.Result.Tools) < 20 {
		t.Fatalf("tools_list: %v %v", err, list)
	}
	for _, tool := range list.Result.Tools {
		k.builtinTools[tool.Name], k.tools[tool.Name] = true, true
	}
	// The tools the CLIPS bridge registers, and the kinds of tools a
	// page may speak of ("an `http` tool").
	bridge, err := os.ReadFile(filepath.Join(repoRoot, "clips_bridge", "clara_clips.c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\.name = "([a-z_]+)"`).FindAllStringSubmatch(string(bridge), -1) {
		k.tools[m[1]] = true
	}
	if !k.tools["clips_eval"] {
		t.Fatal("the CLIPS bridge's tools were not read")
	}
	k.tools["http"], k.tools["lua"] = true, true
	for _, c := range []string{toolbox.CapNetwork, toolbox.CapFSRead, toolbox.CapFSWrite, toolbox.CapExec, toolbox.CapCLIPSWrite} {
		k.tools[c] = true // "a `network` tool": a capability
	}
	for _, p := range pages {
		text := strings.Join(p.lines, "\n")
		for _, m := range declName.FindAllStringSubmatch(text, -1) {
			k.tools[m[1]] = true
		}
		for _, m := range pyToolDef.FindAllStringSubmatch(text, -1) {
			k.tools[m[1]] = true
		}
	}

	root := newRoot(&environment{})
	root.InitDefaultHelpCmd()
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "clara"), " ")
		k.commands[path] = c
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				k.allFlags["--"+f.Name] = true
				if f.Shorthand != "" {
					k.allFlags["-"+f.Shorthand] = true
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	usage, err := os.ReadFile(filepath.Join(repoRoot, "clips_bridge", "clara_clips_main.c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range clipsFlag.FindAllStringSubmatch(string(usage), -1) {
		k.clipsFlags[m[1]] = true
		if m[2] != "" {
			k.clipsFlags[m[2]] = true
		}
	}
	if !k.clipsFlags["-f2"] || !k.clipsFlags["--config"] {
		t.Fatalf("clara-clips's usage was not read: %v", k.clipsFlags)
	}
	return k
}

var (
	fence      = regexp.MustCompile("^```([A-Za-z0-9_+-]*)\\s*$")
	codeSpan   = regexp.MustCompile("`([^`\n]+)`")
	heading    = regexp.MustCompile(`^(#+)\s+(.*)$`)
	notBuiltRe = regexp.MustCompile(`(?i)\bnot (?:yet )?built\b(?:.?in\b)?|\bnot in (?:this|the) library yet\b|\bdoes not exist (?:in the library )?yet\b`)
	soVersion  = regexp.MustCompile(`libclara\.so\.[0-9]+\.[0-9]+\.[0-9]+`)
	dottedKey  = regexp.MustCompile(`^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$`)
	claraLine  = regexp.MustCompile(`^(?:\$ )?(?:\S*/)?(clara|clara-clips)(?:\s|$)`)
	toolAfter  = regexp.MustCompile("^`([a-z][a-z0-9_]*)` tool\\b")
)

// checkPage returns the problems of one page.
func checkPage(p page, k *known) []string {
	var out []string
	bad := func(line int, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...)))
	}
	inFence, fenceLang := false, ""
	notBuiltLevel := 0 // > 0: inside a "Not built" section of that heading level
	notBuiltLines := notBuiltPassages(p.lines)
	for i, line := range p.lines {
		n := i + 1
		if m := fence.FindStringSubmatch(line); m != nil && (!inFence || line == "```") {
			if inFence && line == "```" {
				inFence = false
			} else if !inFence {
				inFence, fenceLang = true, m[1]
			}
			continue
		}
		if inFence {
			if fenceLang == "sh" && claraLine.MatchString(strings.TrimSpace(line)) {
				for _, msg := range checkCommandLine(strings.TrimSpace(line), k) {
					bad(n, "%s", msg)
				}
			}
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			switch level := len(m[1]); {
			case saysNotBuilt(m[2]):
				notBuiltLevel = level
			case notBuiltLevel > 0 && level <= notBuiltLevel:
				notBuiltLevel = 0
			}
			continue
		}
		spans := codeSpan.FindAllStringSubmatchIndex(line, -1)
		for _, s := range spans {
			span := line[s[2]:s[3]]
			for _, msg := range checkSpan(span, line[s[1]:], p.name, k) {
				bad(n, "%s", msg)
			}
		}
		if notBuiltLevel > 0 || notBuiltLines[i] {
			for _, msg := range checkNotBuilt(line, k) {
				bad(n, "%s", msg)
			}
		}
	}
	return out
}

// saysNotBuilt: text says something is not built ("not built in", of a
// tool that is not a built-in one, does not count).
func saysNotBuilt(text string) bool {
	for _, m := range notBuiltRe.FindAllString(text, -1) {
		if !strings.HasSuffix(strings.ToLower(m), "in") {
			return true
		}
	}
	return false
}

// notBuiltPassages marks the lines of the passages (paragraphs, list
// items, table rows) that say something is not built.
func notBuiltPassages(lines []string) []bool {
	marked := make([]bool, len(lines))
	start, inFence := 0, false
	end := func(i int) { // the passage lines[start:i] ends
		text := strings.Join(lines[start:i], " ")
		if saysNotBuilt(text) {
			for j := start; j < i; j++ {
				marked[j] = true
			}
		}
		start = i
	}
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			end(i)
			inFence = !inFence
			start = i + 1
		case inFence:
			start = i + 1
		case trimmed == "" || heading.MatchString(line):
			end(i)
			start = i + 1
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* ") || strings.HasPrefix(trimmed, "|"):
			end(i) // a list item or a table row starts a passage
		}
	}
	end(len(lines))
	return marked
}

// checkSpan checks one backticked span; after is the text that follows it
// on its line.
func checkSpan(span, after, pageName string, k *known) []string {
	var out []string
	// A C name: the identifier it starts with.
	if strings.HasPrefix(span, "clara_") {
		id := cIdent.FindString(span)
		rest := span[len(id):]
		// clara_clips.c is a file, clara_* all the functions.
		if id != "" && !strings.HasPrefix(rest, ".") && !strings.HasPrefix(rest, "*") && !k.cNames[id] {
			out = append(out, fmt.Sprintf("`%s`: no %s in include/clara.h or clips_bridge/clara_clips.h", span, id))
		}
	}
	// A configuration key: a dotted name whose first part is a table.
	key := strings.TrimSpace(strings.SplitN(span, "=", 2)[0])
	if dottedKey.MatchString(key) && k.tables[strings.SplitN(key, ".", 2)[0]] && !strings.HasPrefix(span, "[") && !isFileName(key) {
		if !k.isKey(key) {
			out = append(out, fmt.Sprintf("`%s`: %s is not a configuration key (the key table of docs/configuration.md lists them)", span, key))
		}
	}
	// The library's file: this version's.
	if v := soVersion.FindString(span); v != "" && v != "libclara.so."+core.Version {
		out = append(out, fmt.Sprintf("`%s`: the library of this version is libclara.so.%s", span, core.Version))
	}
	// A tool: `name` tool.
	if m := toolAfter.FindStringSubmatch("`" + span + "`" + after); m != nil && !k.tools[m[1]] {
		out = append(out, fmt.Sprintf("`%s` tool: no such built-in tool (tools_list), and no page declares one", m[1]))
	}
	// A command line of bin/clara or clara-clips.
	if claraLine.MatchString(span) {
		out = append(out, checkCommandLine(span, k)...)
	}
	// A bare flag on the CLI's own page.
	if pageName == filepath.Join("docs", "cli.md") && regexp.MustCompile(`^--?[a-z][a-z0-9-]*$`).MatchString(span) && !k.allFlags[span] {
		out = append(out, fmt.Sprintf("`%s`: no command of bin/clara has this flag", span))
	}
	return out
}

func isFileName(s string) bool {
	for _, ext := range []string{".md", ".toml", ".json", ".lua", ".c", ".h", ".py", ".go", ".so", ".clp", ".log", ".txt", ".db", ".sh"} {
		if strings.HasSuffix(s, ext) {
			return true
		}
	}
	return false
}

// isKey: key is a configuration key, or a table, or under a table of
// free names (rules.thresholds.NAME).
func (k *known) isKey(key string) bool {
	if k.keys[key] || k.tables[key] {
		return true
	}
	for known := range k.keys {
		if strings.HasPrefix(known, key+".") {
			return true // a table such as rules.thresholds
		}
		if base, ok := strings.CutSuffix(known, ".NAME"); ok && strings.HasPrefix(key, base+".") {
			return true
		}
	}
	return false
}

// checkCommandLine checks the commands and flags of a bin/clara or
// clara-clips command line.
func checkCommandLine(line string, k *known) []string {
	words := shellWords(line)
	if len(words) > 0 && words[0] == "$" {
		words = words[1:]
	}
	if len(words) == 0 {
		return nil
	}
	prog := filepath.Base(words[0])
	var out []string
	if prog == "clara-clips" {
		for _, w := range words[1:] {
			for _, f := range flagsOf(w) {
				if !k.clipsFlags[f] {
					out = append(out, fmt.Sprintf("`%s`: clara-clips has no flag %s", line, f))
				}
			}
		}
		return out
	}
	// bin/clara: the command is the longest path of subcommands among the
	// words (flags may come first, positionals after).
	path, cmd := "", k.commands[""]
	for _, w := range words[1:] {
		if w == "--" {
			break
		}
		if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "[]|.") || strings.ToUpper(w) == w {
			continue
		}
		next := strings.TrimSpace(path + " " + w)
		if c, ok := k.commands[next]; ok {
			path, cmd = next, c
			continue
		}
		// A word after a command that only holds commands must be one.
		if cmd.HasSubCommands() && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(w) {
			out = append(out, fmt.Sprintf("`%s`: %q has no command %q", line, strings.TrimSpace("clara "+path), w))
		}
		break
	}
	for _, w := range words[1:] {
		if w == "--" {
			break
		}
		for _, f := range flagsOf(w) {
			if cmd.Flags().Lookup(strings.TrimLeft(f, "-")) == nil && cmd.InheritedFlags().Lookup(strings.TrimLeft(f, "-")) == nil &&
				!(len(f) == 2 && cmd.Flags().ShorthandLookup(f[1:]) != nil) && !(len(f) == 2 && cmd.InheritedFlags().ShorthandLookup(f[1:]) != nil) {
				out = append(out, fmt.Sprintf("`%s`: %q has no flag %s", line, strings.TrimSpace("clara "+path), f))
			}
		}
	}
	return out
}

// flagsOf is the flags a word of a usage line names: --a, [--a|--b], --a=v.
func flagsOf(w string) []string {
	var out []string
	for _, part := range strings.Split(strings.Trim(w, "[]"), "|") {
		part = strings.SplitN(part, "=", 2)[0]
		if regexp.MustCompile(`^--?[a-zA-Z][a-zA-Z0-9-]*$`).MatchString(part) {
			out = append(out, part)
		}
	}
	return out
}

// shellWords splits a command line as a shell would, roughly: quotes
// group, and it stops at a redirection, a pipe or a comment.
func shellWords(line string) []string {
	var out []string
	var cur strings.Builder
	in := rune(0)
	has := false
	for _, r := range line {
		switch {
		case in != 0 && r == in:
			in = 0
		case in != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			in, has = r, true
		case r == ' ' || r == '\t':
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		case (r == '>' || r == '|' || r == '#' || r == ';' || r == '&' || r == '<') && !has:
			return out
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if has {
		out = append(out, cur.String())
	}
	return out
}

// checkNotBuilt: a passage that says something is not built names no
// built-in tool, no function of clara.h, no handler clara.h sets.
func checkNotBuilt(line string, k *known) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
		name := strings.TrimSuffix(strings.SplitN(m[1], "(", 2)[0], "()")
		if k.builtinTools[name] {
			out = append(out, fmt.Sprintf("says not built of `%s`, a built-in tool (tools_list has it)", m[1]))
		}
		if k.cNames[name] {
			out = append(out, fmt.Sprintf("says not built of `%s`, which include/clara.h declares", m[1]))
		}
	}
	plain := codeSpan.ReplaceAllString(line, "")
	lower := strings.ToLower(plain)
	for name := range k.builtinTools {
		if strings.Contains(name, "_") && regexp.MustCompile(`\b`+name+`\b`).MatchString(plain) {
			out = append(out, fmt.Sprintf("says not built of %s, a built-in tool (tools_list has it)", name))
		}
	}
	for table := range k.tables {
		if regexp.MustCompile(`\b` + table + `\b`).MatchString(plain) {
			out = append(out, fmt.Sprintf("says not built of %s, a table of the configuration (docs/configuration.md: %s.*)", table, table))
		}
	}
	for _, h := range k.handlers {
		if strings.Contains(lower, h) {
			out = append(out, fmt.Sprintf("says not built of an %s, which include/clara.h sets (clara_set_%s)", h, strings.ReplaceAll(h, " ", "_")))
		}
	}
	sort.Strings(out)
	return out
}
