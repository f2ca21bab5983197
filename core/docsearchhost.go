package core

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/clara-lib/clara/core/fsread"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/docsearch"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// doc_search (seed 002's starter tool): the engine keeps one index, made at
// the first search of a configuration and made again when project_root or
// [doc_search] change; Close stops its watcher.

// docSearchHost holds the index.
type docSearchHost struct {
	e   *Engine
	mu  sync.Mutex
	ix  *docsearch.Index
	key string // what the index was made for
}

// Search serves doc_search {query, limit}: {"results": [{path, line, snippet}]}.
func (h *docSearchHost) Search(ctx context.Context, _ string, args []byte) ([]byte, error) {
	query := gjson.GetBytes(args, "query").Str
	limit := 10
	if l := gjson.GetBytes(args, "limit"); l.Exists() {
		limit = int(l.Int())
	}
	ix, err := h.index(h.e.current.Load())
	if err != nil {
		return nil, err
	}
	hits, err := ix.Search(ctx, query, limit)
	if errors.Is(err, docsearch.ErrNoWords) {
		return nil, protocol.Errorf(protocol.InvalidArgs, "doc_search: %v", err)
	}
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(struct {
		Results []docsearch.Hit `json:"results"`
	}{hits})
	return out, err
}

// index returns the index of configuration s, made (or made again) when
// needed.
func (h *docSearchHost) index(s *snapshot) (*docsearch.Index, error) {
	c := s.config
	root := projectRoot(c)
	key, _ := json.Marshal([]any{root, c.DocSearch})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ix != nil && h.key == string(key) {
		return h.ix, nil
	}
	if h.ix != nil {
		h.ix.Close()
		h.ix = nil
	}
	if _, err := docsearch.CheckPatterns(c.DocSearch.Patterns); err != nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
	}
	e := h.e
	// Files are read with fsread.In: regular files only, bounded, and
	// inside project_root (a symbolic link that leads out is refused).
	read := func(path string, max int64) ([]byte, error) { return fsread.In(root, path, max) }
	ix, err := docsearch.Open(docsearch.Options{Root: root, Patterns: c.DocSearch.Patterns, MaxFiles: c.DocSearch.MaxFiles,
		MaxFileBytes: int64(c.DocSearch.MaxFileBytes), Watch: c.DocSearch.Watch, Read: read, Go: e.Go,
		Log: func(level, msg string) { e.log.Log(logging.MessageLevel(level), msg) }})
	if err != nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "%v", err)
	}
	e.log.Logf(logging.Debug, "doc_search: %d files of %s indexed (%s)", ix.Files(), root, strings.Join(c.DocSearch.Patterns, ", "))
	h.ix, h.key = ix, string(key)
	return ix, nil
}

// close stops the index's watcher and frees it.
func (h *docSearchHost) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ix != nil {
		h.ix.Close()
		h.ix, h.key = nil, ""
	}
}
