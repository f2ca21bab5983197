package rules

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed builtin/*.toml builtin/optional/*.toml
var builtinFS embed.FS

// BuiltinSources returns the shipped rules (SPEC §7.6), named
// "builtin/NAME.toml" in errors and listings.
func BuiltinSources() []Source { return builtinFiles(false) }

// RedactSecretsSource returns the built-in rules that redact what looks
// like an API key, a token or a private key from results and answers
// (redact_secrets, redact_secrets_answer), which load only when asked for
// (rules.redact_secrets).
func RedactSecretsSource() Source {
	text, _ := builtinFS.ReadFile("builtin/optional/redact_secrets.toml") // embedded: cannot fail
	return Source{Name: "builtin/redact_secrets.toml", Text: text}
}

// BuiltinTests returns the shipped rules' own test files
// ("builtin/NAME.test.toml"), written for the default thresholds.
func BuiltinTests() []Source { return builtinFiles(true) }

// builtinFiles returns the shipped rule files, or with tests their test
// files (NAME.test.toml).
func builtinFiles(tests bool) []Source { return builtinFilesIn("builtin", tests) }

// builtinFilesIn is builtinFiles of one folder of the shipped files.
func builtinFilesIn(dir string, tests bool) []Source {
	names, _ := fs.Glob(builtinFS, dir+"/*.toml")
	sort.Strings(names)
	var out []Source
	for _, n := range names {
		if strings.HasSuffix(n, ".test.toml") != tests {
			continue
		}
		text, err := builtinFS.ReadFile(n)
		if err != nil {
			continue // embedded: cannot happen
		}
		out = append(out, Source{Name: path.Join("builtin", path.Base(n)), Text: text})
	}
	return out
}
