package tools

import (
	"context"

	"github.com/clara-lib/clara/core/toolbox"
)

// docSearch is seed 002's starter tool doc_search: full-text search over
// the project's documents ([doc_search] patterns under project_root).
func docSearch(d Docs) toolbox.Builtin {
	return toolbox.Builtin{Name: "doc_search", LLMVisible: true, Timed: true, Capabilities: []string{toolbox.CapFSRead},
		Description: "Searches the project's documents for words; the best matches first, each with its file, line and a snippet " +
			"(matched words in [brackets]). Result: {results: [{path, line, snippet}]}.",
		Schema: `{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":1000,"description":"The words to look for."},` +
			`"limit":{"type":"integer","minimum":1,"maximum":100,"description":"How many results at most (10 by default)."}},` +
			`"required":["query"],"additionalProperties":false}`,
		TimeoutMS: 30000,
		Run: func(ctx context.Context, call toolbox.Call) ([]byte, error) {
			return d.Search(ctx, call.Session, call.Arguments)
		}}
}
