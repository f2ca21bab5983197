// Package docsearch is the full-text index of seed 002's starter tool
// doc_search: the project's documents (the files under a root that
// configured patterns match) cut into paragraphs and indexed with
// SQLite's FTS5 (modernc.org/sqlite, in memory), searched with ranked
// results that say where: the file, the line, a snippet.
//
// The index is kept current by a file watcher (fsnotify) on the folders
// that may hold matching files; where a folder cannot be watched (too many,
// or no watcher), each search first looks at what changed.
//
// It imports nothing of Clara; its host gives it the way to read a file
// and to start a goroutine. An Index starts one goroutine, the watcher's,
// which Close stops and waits for.
package docsearch
