package docsearch

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/fsnotify/fsnotify"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, with FTS5
)

// Bounds of the index, whatever the options say.
const (
	maxWalkEntries = 200000 // directory entries one scan looks at
	maxWatchedDirs = 4096   // folders watched; past it searches look for changes themselves
	maxChunkLines  = 20     // lines of one indexed piece
	maxQueryWords  = 16
	settleDelay    = 100 * time.Millisecond // a burst of changes is one update
)

// Options configure an Index.
type Options struct {
	Root         string   // absolute
	Patterns     []string // relative to Root, "/"-separated; ** is any number of folders
	MaxFiles     int      // files indexed at most
	MaxFileBytes int64    // larger files are left out
	Watch        bool     // keep the index current with a file watcher
	// Read reads a file of at most max bytes (the host's safe reader).
	Read func(path string, max int64) ([]byte, error)
	// Go starts the watcher's goroutine (the host's guarded starter).
	Go func(what string, f func())
	// Log receives what the index has to say ("debug", "info", "warn").
	Log func(level, msg string)
}

// Hit is one search result: the file (relative to the root, "/"-separated),
// the line (from 1) where the match is, and a snippet with the matched
// words in [brackets].
type Hit struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Snippet string `json:"snippet"`
}

type fileEntry struct {
	mod         time.Time
	size        int64
	first, last int64 // the rowids of its pieces; last < first: none
}

// Index is the index of one root and set of patterns. Safe for concurrent
// use.
type Index struct {
	o        Options
	patterns [][]string

	mu      sync.Mutex // guards what follows and the database
	db      *sql.DB
	files   map[string]*fileEntry // by relative path
	full    bool                  // MaxFiles reached
	watcher *fsnotify.Watcher
	watched map[string]bool
	partial bool // some folder is not watched: searches refresh first
	closed  bool
	done    chan struct{} // closed by Close; the watcher ends
	ended   chan struct{} // closed when the watcher has ended
}

// CheckPatterns checks patterns: relative, inside the root, valid globs.
func CheckPatterns(patterns []string) ([][]string, error) {
	var out [][]string
	for _, p := range patterns {
		if p == "" || strings.HasPrefix(p, "/") || filepath.IsAbs(p) {
			return nil, fmt.Errorf("doc_search.patterns: %q must be relative to project_root", p)
		}
		parts := strings.Split(path.Clean(p), "/")
		for _, part := range parts {
			if part == ".." {
				return nil, fmt.Errorf("doc_search.patterns: %q leaves project_root", p)
			}
			if _, err := path.Match(part, ""); err != nil {
				return nil, fmt.Errorf("doc_search.patterns: %q: %v", p, err)
			}
		}
		out = append(out, parts)
	}
	return out, nil
}

// Open builds the index of o.Root's matching files and, with o.Watch,
// starts its watcher.
func Open(o Options) (*Index, error) {
	pats, err := CheckPatterns(o.Patterns)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one connection: one in-memory database
	if _, err := db.Exec(`CREATE VIRTUAL TABLE pieces USING fts5(path UNINDEXED, line UNINDEXED, text, tokenize = 'unicode61')`); err != nil {
		db.Close()
		return nil, fmt.Errorf("doc_search: %v", err)
	}
	ix := &Index{o: o, patterns: pats, db: db, files: map[string]*fileEntry{}, watched: map[string]bool{},
		done: make(chan struct{}), ended: make(chan struct{})}
	if o.Log == nil {
		ix.o.Log = func(string, string) {}
	}
	if o.Watch {
		if w, err := fsnotify.NewWatcher(); err == nil {
			ix.watcher = w
		} else {
			ix.o.Log("warn", fmt.Sprintf("doc_search: no file watcher (%v): each search looks for changes first", err))
		}
	}
	ix.partial = ix.watcher == nil
	ix.mu.Lock()
	ix.scan(".", nil)
	ix.mu.Unlock()
	if ix.watcher != nil {
		start := o.Go
		if start == nil {
			start = func(_ string, f func()) { go f() }
		}
		start("doc_search's file watcher", ix.watch)
	} else {
		close(ix.ended)
	}
	return ix, nil
}

// Close stops the watcher and frees the index.
func (ix *Index) Close() {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return
	}
	ix.closed = true
	close(ix.done)
	if ix.watcher != nil {
		ix.watcher.Close()
	}
	ix.mu.Unlock()
	<-ix.ended
	ix.mu.Lock()
	ix.db.Close()
	ix.mu.Unlock()
}

// Files is how many files the index holds.
func (ix *Index) Files() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.files)
}

// matchName matches one component: a wildcard never matches a name
// starting with a dot (a hidden file or folder) unless the pattern's
// component starts with one too.
func matchName(pat, name string) bool {
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(pat, ".") {
		return false
	}
	ok, _ := path.Match(pat, name)
	return ok
}

// matches reports whether the relative path's components match a pattern.
func matches(p, s []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			for i := 0; i <= len(s); i++ {
				if matches(p[1:], s[i:]) {
					return true
				}
				if i < len(s) && strings.HasPrefix(s[i], ".") {
					return false
				}
			}
			return false
		}
		if len(s) == 0 || !matchName(p[0], s[0]) {
			return false
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// mayHold reports whether a folder (its relative components) may hold a
// file a pattern matches, directly or below.
func mayHold(p, d []string) bool {
	if len(d) == 0 {
		return len(p) > 0
	}
	if len(p) == 0 {
		return false
	}
	if p[0] == "**" {
		return mayHold(p[1:], d) || (!strings.HasPrefix(d[0], ".") && mayHold(p, d[1:]))
	}
	if len(p) == 1 {
		return false // the last component names the file
	}
	return matchName(p[0], d[0]) && mayHold(p[1:], d[1:])
}

func split(rel string) []string {
	if rel == "." || rel == "" {
		return nil
	}
	return strings.Split(filepath.ToSlash(rel), "/")
}

func (ix *Index) wanted(rel string) bool {
	s := split(rel)
	for _, p := range ix.patterns {
		if matches(p, s) {
			return true
		}
	}
	return false
}

func (ix *Index) folderWanted(rel string) bool {
	d := split(rel)
	for _, p := range ix.patterns {
		if mayHold(p, d) {
			return true
		}
	}
	return false
}

// scan indexes what changed below the folder rel (ix.mu held): new and
// changed files, and (with seen) records which files it saw, so that
// refresh can drop the others. It watches the folders it enters.
func (ix *Index) scan(rel string, seen map[string]bool) {
	budget := maxWalkEntries
	var walk func(rel string)
	walk = func(rel string) {
		if budget <= 0 || !ix.folderWanted(rel) {
			return
		}
		dir := filepath.Join(ix.o.Root, rel)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		budget -= len(entries)
		ix.watchFolder(rel, dir)
		for _, en := range entries {
			child := path.Join(filepath.ToSlash(rel), en.Name())
			switch {
			case en.Type()&fs.ModeSymlink != 0: // never followed: it may lead outside the root
			case en.IsDir():
				walk(child)
			case en.Type().IsRegular() && ix.wanted(child):
				if seen != nil {
					seen[child] = true
				}
				ix.update(child)
			}
		}
	}
	walk(rel)
	if budget <= 0 {
		ix.o.Log("warn", fmt.Sprintf("doc_search: the scan looked at %d directory entries and stopped; narrow doc_search.patterns", maxWalkEntries))
	}
}

func (ix *Index) watchFolder(rel, dir string) {
	if ix.watcher == nil || ix.watched[rel] {
		return
	}
	if len(ix.watched) >= maxWatchedDirs {
		if !ix.partial {
			ix.o.Log("warn", fmt.Sprintf("doc_search: more than %d folders to watch: each search looks for changes first", maxWatchedDirs))
		}
		ix.partial = true
		return
	}
	if err := ix.watcher.Add(dir); err != nil {
		ix.partial = true
		ix.o.Log("warn", fmt.Sprintf("doc_search: cannot watch %s (%v): each search looks for changes first", dir, err))
		return
	}
	ix.watched[rel] = true
}

// update (re)indexes one file when it changed, or drops it when it is
// gone, too large or not text (ix.mu held).
func (ix *Index) update(rel string) {
	full := filepath.Join(ix.o.Root, filepath.FromSlash(rel))
	info, err := os.Lstat(full)
	old := ix.files[rel]
	if err != nil || !info.Mode().IsRegular() || info.Size() > ix.o.MaxFileBytes || !ix.wanted(rel) {
		ix.drop(rel)
		return
	}
	if old != nil && old.mod.Equal(info.ModTime()) && old.size == info.Size() {
		return
	}
	if old == nil && ix.o.MaxFiles > 0 && len(ix.files) >= ix.o.MaxFiles {
		if !ix.full {
			ix.o.Log("warn", fmt.Sprintf("doc_search: %d files indexed, doc_search.max_files; the others are left out", ix.o.MaxFiles))
		}
		ix.full = true
		return
	}
	text, err := ix.o.Read(full, ix.o.MaxFileBytes)
	if err != nil || bytes.IndexByte(text, 0) >= 0 {
		ix.drop(rel)
		return
	}
	tx, err := ix.db.Begin()
	if err != nil {
		return
	}
	defer tx.Rollback()
	if old != nil && old.last >= old.first {
		if _, err := tx.Exec(`DELETE FROM pieces WHERE rowid BETWEEN ? AND ?`, old.first, old.last); err != nil {
			return
		}
	}
	e := &fileEntry{mod: info.ModTime(), size: info.Size(), first: 0, last: -1}
	for _, p := range pieces(strings.ToValidUTF8(string(text), "\uFFFD")) {
		res, err := tx.Exec(`INSERT INTO pieces(path, line, text) VALUES (?, ?, ?)`, rel, p.line, p.text)
		if err != nil {
			return
		}
		id, _ := res.LastInsertId()
		if e.last < e.first {
			e.first = id
		}
		e.last = id
	}
	if tx.Commit() == nil {
		ix.files[rel] = e
	}
}

func (ix *Index) drop(rel string) {
	old := ix.files[rel]
	if old == nil {
		return
	}
	if old.last >= old.first {
		if _, err := ix.db.Exec(`DELETE FROM pieces WHERE rowid BETWEEN ? AND ?`, old.first, old.last); err != nil {
			return
		}
	}
	delete(ix.files, rel)
	ix.full = false
}

type piece struct {
	line int
	text string
}

// pieces cuts a text into paragraphs (runs of lines between blank ones),
// at most maxChunkLines lines each, with the line each starts on.
func pieces(text string) []piece {
	var out []piece
	lines := strings.Split(text, "\n")
	start := -1
	flush := func(end int) {
		if start >= 0 {
			out = append(out, piece{line: start + 1, text: strings.Join(lines[start:end], "\n")})
			start = -1
		}
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
		}
		if i-start+1 >= maxChunkLines {
			flush(i + 1)
		}
	}
	flush(len(lines))
	return out
}

// refresh brings the index up to date by looking at the files (ix.mu
// held): for searches where folders are not all watched.
func (ix *Index) refresh() {
	seen := map[string]bool{}
	ix.scan(".", seen)
	for rel := range ix.files {
		if !seen[rel] {
			ix.drop(rel)
		}
	}
}

// watch applies the watcher's events: the files named change in the
// index once the burst of changes settles; a new folder is scanned.
func (ix *Index) watch() {
	defer close(ix.ended)
	pending := map[string]bool{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ix.done:
			timer.Stop()
			return
		case ev, ok := <-ix.watcher.Events:
			if !ok {
				return
			}
			rel, err := filepath.Rel(ix.o.Root, ev.Name)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			pending[filepath.ToSlash(rel)] = true
			timer.Reset(settleDelay)
		case err, ok := <-ix.watcher.Errors:
			if !ok {
				return
			}
			ix.mu.Lock()
			ix.partial = true // an overflow lost events: look for changes at each search
			ix.mu.Unlock()
			ix.o.Log("warn", fmt.Sprintf("doc_search: the file watcher: %v; each search looks for changes first", err))
		case <-timer.C:
			ix.mu.Lock()
			if !ix.closed {
				for rel := range pending {
					ix.changed(rel)
				}
			}
			ix.mu.Unlock()
			clear(pending)
		}
	}
}

// changed applies one path's change (ix.mu held).
func (ix *Index) changed(rel string) {
	full := filepath.Join(ix.o.Root, filepath.FromSlash(rel))
	info, err := os.Lstat(full)
	switch {
	case err == nil && info.IsDir():
		ix.scan(rel, nil)
	case err != nil:
		// Gone: the file, or a folder with everything below it.
		ix.drop(rel)
		prefix := rel + "/"
		for f := range ix.files {
			if strings.HasPrefix(f, prefix) {
				ix.drop(f)
			}
		}
		delete(ix.watched, rel)
	default:
		ix.update(rel)
	}
}

// ErrNoWords is Search's error for a query without a word.
var ErrNoWords = errors.New("the query has no word to search for")

// Search returns the pieces that hold every word of the query (each also
// as the start of a longer word), best first, at most limit; when none
// holds them all, those that hold any.
func (ix *Index) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	words := queryWords(query)
	if len(words) == 0 {
		return nil, ErrNoWords
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil, errors.New("doc_search: the index is closed")
	}
	if ix.partial {
		ix.refresh()
	}
	terms := make([]string, len(words))
	for i, w := range words {
		terms[i] = `"` + w + `"*`
	}
	hits, err := ix.query(ctx, strings.Join(terms, " "), words, limit)
	if err == nil && len(hits) == 0 && len(words) > 1 {
		hits, err = ix.query(ctx, strings.Join(terms, " OR "), words, limit)
	}
	return hits, err
}

func (ix *Index) query(ctx context.Context, match string, words []string, limit int) ([]Hit, error) {
	rows, err := ix.db.QueryContext(ctx, `SELECT path, line, text, snippet(pieces, 2, '[', ']', '…', 16) FROM pieces
		WHERE pieces MATCH ? ORDER BY bm25(pieces), path, line LIMIT ?`, match, limit)
	if err != nil {
		return nil, fmt.Errorf("doc_search: %v", err)
	}
	defer rows.Close()
	hits := []Hit{}
	for rows.Next() {
		var h Hit
		var text string
		if err := rows.Scan(&h.Path, &h.Line, &text, &h.Snippet); err != nil {
			return nil, fmt.Errorf("doc_search: %v", err)
		}
		h.Line += lineOf(text, words)
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// queryWords are the query's words, lower case, each once.
func queryWords(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !seen[w] && len(out) < maxQueryWords {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// lineOf is the offset of the first line of a piece that holds a word of
// the query (0 when none does, by the tokenizer's lights only).
func lineOf(text string, words []string) int {
	for i, l := range strings.Split(text, "\n") {
		ll := strings.ToLower(l)
		for _, w := range words {
			if strings.Contains(ll, w) {
				return i
			}
		}
	}
	return 0
}
