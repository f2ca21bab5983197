package fsread

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// What a read refuses; the errors returned wrap them, with the file's
// name and the reason in their text.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("over the size limit")
	ErrOutside    = errors.New("outside the folder it must stay in")
)

// refusal is a refused read: its message says why, in full; it unwraps
// to the kind (ErrNotRegular, ErrTooLarge, ErrOutside).
type refusal struct {
	msg  string
	kind error
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{fmt.Sprintf(format, args...), kind}
}

// openFlags: a named pipe must not wait for a writer (it is refused once
// open), and a terminal must not become the process's controlling one.
// Regular files ignore both.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// File reads the regular file at path, of at most max bytes.
func File(path string, max int64) ([]byte, error) {
	// Refused before the open, which alone can have effects on a device.
	if info, err := os.Stat(path); err == nil {
		if err := regular(path, info); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpen(f, path, max)
}

// Open opens the regular file at path for a reader that follows it as it
// grows (bin/clara audit tail), checked as File checks: a named pipe, a
// device or a directory is refused, and the open never blocks. Reading it
// is the caller's, who bounds what it keeps.
func Open(path string) (*os.File, error) {
	if info, err := os.Stat(path); err == nil {
		if err := regular(path, info); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, openFlags, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil {
		err = regular(path, info)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// In reads the regular file at path (absolute, or relative to the working
// directory), of at most max bytes, if it lies inside the folder root
// once symbolic links are resolved; otherwise the error wraps ErrOutside.
func In(root, path string, max int64) ([]byte, error) {
	var data []byte
	err := inRoot(root, path, func(r *os.Root, rel string) error {
		if info, err := r.Stat(rel); err == nil {
			if err := regular(path, info); err != nil {
				return err
			}
		} else if escapes(err) {
			return err
		}
		f, err := r.OpenFile(rel, openFlags, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		data, err = readOpen(f, path, max)
		return err
	})
	return data, err
}

// Inside reports whether path names something that exists inside root
// once symbolic links are resolved.
func Inside(root, path string) bool {
	return inRoot(root, path, func(r *os.Root, rel string) error {
		_, err := r.Stat(rel)
		return err
	}) == nil
}

// inRoot runs do with an os.Root and path relative to it: root as
// written, or, when a symbolic link in root or in path makes them look
// apart (an absolute link, a root written through a link), both resolved.
// Every open goes through the os.Root, so a link swapped in meanwhile
// cannot lead out either.
func inRoot(root, path string, do func(r *os.Root, rel string) error) error {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if rel, ok := local(absRoot, abs); ok {
		err := within(absRoot, rel, do)
		if !escapes(err) {
			return named(err, path)
		}
	}
	// Resolved: a link that leads out is refused here.
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lexical := local(absRoot, abs); lexical {
			return named(err, path) // a link inside root to nothing
		}
		real, err = existingPart(abs), nil // outside, or missing: said below
	}
	if err != nil {
		return named(err, path)
	}
	rel, ok := local(realRoot, real)
	if !ok {
		if _, lexical := local(absRoot, abs); lexical {
			return refuse(ErrOutside, "%s leads outside %s through a symbolic link", path, root)
		}
		return refuse(ErrOutside, "%s is outside %s", path, root)
	}
	err = within(realRoot, rel, do)
	if escapes(err) { // a link swapped in since it was resolved
		return refuse(ErrOutside, "%s leads outside %s through a symbolic link", path, root)
	}
	return named(err, path)
}

// existingPart is abs with the symbolic links of its longest existing
// part resolved.
func existingPart(abs string) string {
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(p) == p {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// within runs do on rel in the folder dir, opened as an os.Root.
func within(dir, rel string, do func(r *os.Root, rel string) error) error {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return do(r, rel)
}

// local is p relative to root, when p is root or below it as written.
func local(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}

// escapes reports whether an os.Root refused a path that leads out of it
// (the os package does not export that error).
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// named is an error of an os.Root, which names the path relative to the
// root, naming path as the caller gave it.
func named(err error, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: "open", Path: path, Err: pe.Err}
	}
	return err
}

// regular refuses anything but a regular file, saying what it is.
func regular(path string, info fs.FileInfo) error {
	m := info.Mode()
	if m.IsRegular() {
		return nil
	}
	what := ""
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	if what == "" {
		return refuse(ErrNotRegular, "%s is not a regular file", path)
	}
	return refuse(ErrNotRegular, "%s is %s, not a regular file", path, what)
}

// readOpen reads the open file f, at most max bytes.
func readOpen(f *os.File, path string, max int64) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := regular(path, info); err != nil {
		return nil, err
	}
	if info.Size() > max {
		return nil, refuse(ErrTooLarge, "%s is %d bytes, over the %d-byte limit", path, info.Size(), max)
	}
	buf := make([]byte, 0, info.Size()+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if int64(len(buf)) > max {
			return nil, refuse(ErrTooLarge, "%s grew past the %d-byte limit while it was read", path, max)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
	return buf, nil
}
