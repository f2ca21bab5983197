package config

import (
	"encoding/json"
	"strconv"
	"strings"
)

// DefaultTOML renders the defaults as a commented TOML file: what
// default_config.toml holds (a test keeps the two equal).
func DefaultTOML() string {
	var b strings.Builder
	b.WriteString(`# Clara's default configuration: every key Clara knows, with its default.
#
# Generated from the declarations in core/config/config.go (go test
# ./core/config -run TestGenerated -update); do not edit by hand. The file
# named by CLARA_CONFIG and each clara_configure call are applied on top of
# these defaults: a key given replaces that key, a table given merges key by
# key, an array given replaces the array.
`)
	writeTable(&b, schema(), "")
	return b.String()
}

func writeTable(b *strings.Builder, s *spec, header string) {
	if header != "" {
		b.WriteString("\n")
		comment(b, s.doc)
		b.WriteString("[" + header + "]\n")
	}
	for _, m := range s.members {
		if m.kind == kTable {
			continue
		}
		if header == "" {
			b.WriteString("\n")
		}
		comment(b, m.doc)
		b.WriteString(m.name + " = " + tomlValue(m.def) + "\n")
	}
	if s.other != nil {
		comment(b, s.other.doc)
	}
	for _, m := range s.members {
		if m.kind == kTable {
			writeTable(b, m, strings.TrimPrefix(m.path, "."))
		}
	}
}

// comment writes text as # lines of at most 78 columns.
func comment(b *strings.Builder, text string) {
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 78 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	if line != "#" {
		b.WriteString(line + "\n")
	}
}

// tomlValue writes a normalised default as TOML (JSON's escapes are
// TOML's).
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		q, _ := json.Marshal(x)
		return string(q)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "?"
}

// DocTable renders every key as a Markdown table (key, default, what it
// is): the table of docs/configuration.md (a test keeps the two equal).
func DocTable() string {
	var b strings.Builder
	b.WriteString("| key | default | what it is |\n|---|---|---|\n")
	docRows(&b, schema())
	return b.String()
}

func docRows(b *strings.Builder, s *spec) {
	for _, m := range s.members {
		if m.kind != kTable {
			def := "`" + tomlValue(m.def) + "`"
			b.WriteString("| `" + docName(m) + "` | " + def + " | " + strings.ReplaceAll(m.doc, "|", "\\|") + " |\n")
		}
	}
	if s.other != nil {
		b.WriteString("| `" + strings.TrimPrefix(s.path, ".") + ".NAME` | | " + s.other.doc + " |\n")
	}
	for _, m := range s.members {
		if m.kind == kTable {
			docRows(b, m)
		}
	}
}
