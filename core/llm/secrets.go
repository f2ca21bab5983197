package llm

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// redacted replaces a secret's value wherever text might carry it.
const redacted = "[redacted]"

// redact cuts every occurrence of each secret out of s.
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return s
}

// shorten cuts s to at most n bytes at a character boundary, marking the
// cut with "…".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// redactBytes cuts every occurrence of each secret out of b, copying only
// when one is found.
func redactBytes(b []byte, secrets []string) []byte {
	for _, v := range secrets {
		if v != "" && bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(redacted))
		}
	}
	return b
}
