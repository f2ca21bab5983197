package callbacks

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"crypto/sha256"

	"github.com/clara-lib/clara/core/fsread"
)

// The files under the state directory (SPEC §9.3).
const (
	defsFile    = "callbacks.json"
	workersDir  = "workers"
	scriptsDir  = "scripts"
	logsDir     = "logs"
	lockFile    = ".callbacks.lock"
	tmpInfix    = ".tmp-"
	fileVersion = 1
)

// maxStoreFile bounds what is read of callbacks.json and a worker's file:
// far more than the callback_* tools write (at most maxCallbacksStored
// definitions), while a device or a named pipe put in their place is
// refused rather than read without end.
const maxStoreFile = 256 << 20

// maxScriptFile bounds what is read of a stored script: its content
// (maxScriptBytes) and Clara's header.
const maxScriptFile = maxScriptBytes + 64<<10

// defsDoc is callbacks.json.
type defsDoc struct {
	Version   int           `json:"version"`
	NextID    int           `json:"next_id"`
	Callbacks []*Definition `json:"callbacks"`

	dropped []string // entries of the file left out as invalid (why), for the log
}

// workerDoc is workers/<worker>.json.
type workerDoc struct {
	Worker string   `json:"worker"`
	Active []string `json:"active"`
}

// stamp identifies one version of a file written by rename: a new version
// is a new inode with its own change time.
type stamp struct {
	ino, size    uint64
	mtime, ctime int64
}

func statStamp(path string) (stamp, bool, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return stamp{}, false, nil
		}
		return stamp{}, false, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return stamp{ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true, nil
}

// readDefs reads callbacks.json; a missing file (or directory) is an empty
// set whose next id is 1.
func readDefs(dir string) (*defsDoc, stamp, error) {
	path := filepath.Join(dir, defsFile)
	for range 3 {
		st, ok, err := statStamp(path)
		if err != nil {
			return nil, stamp{}, err
		}
		if !ok {
			return &defsDoc{Version: fileVersion, NextID: 1}, stamp{}, nil
		}
		data, err := fsread.File(path, maxStoreFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue // replaced between stat and open: look again
		}
		if err != nil {
			return nil, stamp{}, err
		}
		st2, _, _ := statStamp(path)
		if st2 != st {
			continue // replaced while reading
		}
		var doc defsDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, stamp{}, fmt.Errorf("%s: %w", path, err)
		}
		if doc.NextID < 1 {
			doc.NextID = 1
		}
		// Never hand out an id that is in the file, whatever next_id says.
		for _, d := range doc.Callbacks {
			if d == nil {
				return nil, stamp{}, fmt.Errorf("%s: a null callback", path)
			}
			if n, ok := idNumber(d.ID); ok && n >= doc.NextID {
				doc.NextID = n + 1
			}
		}
		doc.Callbacks, doc.dropped = validDefs(compactDefs(doc.Callbacks))
		return &doc, st, nil
	}
	return nil, stamp{}, fmt.Errorf("%s: changes too fast to read", path)
}

// validDefs keeps the definitions a hand-edited file may have broken out:
// a name that is not a script name (it would name a path outside
// scripts/), an id that is not CB<n>, a name or id given twice. They are
// left out of every operation, and out of the file when it is next written.
func validDefs(ds []*Definition) (kept []*Definition, dropped []string) {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, d := range ds {
		_, idOK := idNumber(d.ID)
		switch {
		case !nameRE.MatchString(d.Name):
			dropped = append(dropped, fmt.Sprintf("callback %q: name %q is not valid", d.ID, d.Name))
		case !idOK:
			dropped = append(dropped, fmt.Sprintf("callback %q: id %q is not CB<n>", d.Name, d.ID))
		case ids[d.ID] || names[d.Name]:
			dropped = append(dropped, fmt.Sprintf("callback %q (%s) is defined twice", d.Name, d.ID))
		case checkOnBusy(d.OnBusy) != nil && d.OnBusy != "":
			dropped = append(dropped, fmt.Sprintf("callback %q: %v", d.Name, checkOnBusy(d.OnBusy)))
		case checkPassFiles(d.PassFiles) != nil && d.PassFiles != "":
			dropped = append(dropped, fmt.Sprintf("callback %q: %v", d.Name, checkPassFiles(d.PassFiles)))
		default:
			ids[d.ID], names[d.Name] = true, true
			d.Configured = false // only the configuration declares those
			d.normalize()
			kept = append(kept, d)
		}
	}
	return kept, dropped
}

func compactDefs(ds []*Definition) []*Definition {
	out := ds[:0]
	for _, d := range ds {
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

// readWorker reads a worker's active ids; missing means none.
func readWorker(dir, worker string) ([]string, stamp, error) {
	path := filepath.Join(dir, workersDir, workerFileName(worker))
	for range 3 {
		st, ok, err := statStamp(path)
		if err != nil {
			return nil, stamp{}, err
		}
		if !ok {
			return nil, stamp{}, nil
		}
		data, err := fsread.File(path, maxStoreFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, stamp{}, err
		}
		if st2, _, _ := statStamp(path); st2 != st {
			continue
		}
		var doc workerDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, stamp{}, fmt.Errorf("%s: %w", path, err)
		}
		return doc.Active, st, nil
	}
	return nil, stamp{}, fmt.Errorf("%s: changes too fast to read", path)
}

// workerFileName turns any session string into one safe file name, one to
// one: bytes outside [A-Za-z0-9_-] become %XX (so no '/', no '.', no
// "..", nothing hidden), and a name that would be too long keeps a prefix
// and the SHA-256 of the whole after "%h", a sequence escaping never makes.
func workerFileName(worker string) string {
	const maxEscaped = 160
	var b strings.Builder
	for i := 0; i < len(worker); i++ {
		c := worker[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if len(s) > maxEscaped {
		sum := sha256.Sum256([]byte(worker))
		cut := 64
		for cut > 0 && strings.IndexByte(s[max(cut-2, 0):cut], '%') >= 0 {
			cut-- // do not split an escape
		}
		s = s[:cut] + "%h" + hex.EncodeToString(sum[:])
	}
	return s + ".json"
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, written, synced, renamed over path, and the directory synced.
// A crash leaves the old file or the new one, never part of one.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// removeSynced removes a file (missing is fine) and syncs its directory.
func removeSynced(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

func encodeDefs(doc *defsDoc) ([]byte, error) {
	if doc.Callbacks == nil {
		doc.Callbacks = []*Definition{}
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	return append(data, '\n'), err
}

func encodeWorker(worker string, active []string) ([]byte, error) {
	if active == nil {
		active = []string{}
	}
	data, err := json.MarshalIndent(workerDoc{Worker: worker, Active: active}, "", "  ")
	return append(data, '\n'), err
}

// storeLock is held around every read-modify-write of the stored files:
// the in-process mutex of the Manager plus an flock on a lock file, for
// several processes sharing one state directory.
type storeLock struct{ f *os.File }

// lockStore creates the state directory and its sub-directories (something
// is about to be stored) and takes the lock file.
func lockStore(dir string) (*storeLock, error) {
	for _, d := range []string{dir, filepath.Join(dir, workersDir), filepath.Join(dir, scriptsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	removeStaleTemps(dir, filepath.Join(dir, workersDir), filepath.Join(dir, scriptsDir))
	return &storeLock{f: f}, nil
}

func (l *storeLock) unlock() {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// removeStaleTemps removes the temporary files a writer killed mid-write
// left behind. Every atomic write happens under the lock, so with the lock
// held any temporary file is stale.
func removeStaleTemps(dirs ...string) {
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if n := e.Name(); strings.HasPrefix(n, ".") && strings.Contains(n, tmpInfix) && !e.IsDir() {
				os.Remove(filepath.Join(d, n))
			}
		}
	}
}

// The script file: a fixed header, a marker line, then the user's script.
const scriptMarker = "# ---- end of the Clara header; the callback's script follows ----"

func scriptText(d *Definition, content string) []byte {
	var b bytes.Buffer
	b.WriteString("#!/usr/bin/env bash\nset -euo pipefail\n")
	fmt.Fprintf(&b, "# Clara callback %q (%s), written %s.\n", d.Name, d.ID, time.Now().UTC().Format(time.RFC3339))
	b.WriteString(`# Run as "bash <this file>" in its own process group, in the callback's cwd
# (or the project root), with the host's environment plus:
#   CLARA_CHANGED_FILES       the matched files, absolute paths, one per line
#                             (empty when the list is longer than 96 KiB)
#   CLARA_CHANGED_FILES_LIST  the path of a file holding the same list
#   CLARA_CHANGED_FILES_COUNT how many files the list holds
#   CLARA_PROJECT_ROOT        the project root, absolute
#   CLARA_CALLBACK_NAME       this callback's name
#   CLARA_CALLBACK_ID         this callback's id
#   CP_CHANGED_FILES, CP_PROJECT_ROOT, CP_CALLBACK_NAME: the same, by the
#                             names of the design Clara's callbacks come from
# With pass_files = "args" the files are also the script's arguments; with
# "stdin", a JSON object on its standard input holds them.
# Exit 0 for success; output (stdout and stderr) goes to a log kept on failure.
`)
	b.WriteString(scriptMarker)
	b.WriteByte('\n')
	b.WriteString(content)
	if content != "" && !strings.HasSuffix(content, "\n") {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// scriptContent returns the user's part of a script file: what follows
// the marker line, or the whole file when the marker is gone (edited by
// hand). It is what was written, with a final newline added if it had
// none.
func scriptContent(file []byte) string {
	s := string(file)
	if i := strings.Index(s, scriptMarker+"\n"); i >= 0 {
		return s[i+len(scriptMarker)+1:]
	}
	return s
}
