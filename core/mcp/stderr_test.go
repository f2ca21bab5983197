package mcp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/secrets"
)

// A stdio server's stderr line is redacted before it is cut, whatever the
// writes it arrives in: no 8 characters of the secret reach the log
// (issue 25, finding 7: the cut came first and kept 12).
func TestStderrTail_redactsBeforeCutting(t *testing.T) {
	const secret = "env-secret-Vt7qXc2Rm9Lw"
	red := secrets.New()
	red.Add(secret)
	escaped := ""
	for _, r := range secret {
		escaped += fmt.Sprintf(`\u%04x`, r)
	}
	for _, line := range []string{
		strings.Repeat("x", 500) + secret + " and more\n",
		strings.Repeat("x", 505) + secret + strings.Repeat("y", 3000) + "\n",
		strings.Repeat("x", 490) + escaped + strings.Repeat("y", 3000) + "\n",
		"short " + secret + "\n",
	} {
		for _, piece := range []int{1, 3, 7, 64, 4096} {
			sink := &logSink{}
			tail := newStderrTail(sink.logger(), "s", red)
			for i := 0; i < len(line); i += piece {
				tail.Write([]byte(line[i:min(i+piece, len(line))]))
			}
			text := sink.text() + tail.String()
			for i := 0; i+8 <= len(secret); i++ {
				if strings.Contains(text, secret[i:i+8]) || strings.Contains(text, escaped[6*i:6*i+30]) {
					t.Fatalf("pieces of %d: %q holds part of the secret", piece, text)
				}
			}
			if !strings.Contains(text, "xxxx") && !strings.Contains(text, "short [redacted]") {
				t.Fatalf("pieces of %d: nothing logged: %q", piece, text)
			}
		}
	}
}
