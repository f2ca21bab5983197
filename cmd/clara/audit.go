package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/fsread"
)

func auditCommand(env *environment) *cobra.Command {
	return groupCommand("audit", "Read the audit: the record of every call", auditTailCommand(env))
}

// followEvery is how often tail -f looks at the file.
const followEvery = 200 * time.Millisecond

func auditTailCommand(env *environment) *cobra.Command {
	var (
		follow bool
		lines  int
		file   string
	)
	c := &cobra.Command{
		Use:   "tail",
		Short: "Print the last records of the audit file (audit.path); -f follows it",
		Long: `Print the last records of the audit file: the JSONL file audit.path of the
configuration names (or --file), one line per call a process made with that
configuration: time, session, tool, status, error, duration, the SHA-256 of
the arguments (never the arguments), the deny reason.

The in-memory ring of the last 1000 calls (the audit_tail tool) belongs to
the process that made the calls; this command reads the file, which every
process of the configuration appends to. -f waits for new records until
interrupted (and for the file, when it does not exist yet). --json prints
the records as they are in the file.`,
		Example: `  clara --config clara.toml audit tail
  clara audit tail -n 50 --file /var/log/clara/audit.jsonl
  clara --config clara.toml audit tail -f --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 0 {
				return usageError("-n %d: give 0 or more lines", lines)
			}
			if file == "" {
				path, err := env.auditPath()
				if err != nil {
					return err
				}
				if path == "" {
					return usageError("the configuration has no audit.path: set it (a JSONL file every call is appended to), or give --file; " +
						"without it calls are kept only in memory, where the calling process's audit_tail tool reads them")
				}
				file = path
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return tailAudit(ctx, env, file, lines, follow)
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "wait for new records, until interrupted")
	c.Flags().IntVarP(&lines, "lines", "n", 10, "print the last `N` records")
	c.Flags().StringVar(&file, "file", "", "read this audit `FILE` instead of the configuration's audit.path")
	return c
}

// auditPath is audit.path of the configuration: the defaults, then
// CLARA_CONFIG, then --config, read without building an engine (which
// would load rules, start servers and open the file).
func (env *environment) auditPath() (string, error) {
	tree := config.Defaults()
	for _, f := range []struct{ what, path string }{{"CLARA_CONFIG", os.Getenv("CLARA_CONFIG")}, {"--config", env.configPath}} {
		if f.path == "" {
			continue
		}
		text, err := readConfigFile(f.path)
		if err != nil {
			return "", usageError("%s: %v", f.what, err)
		}
		over, err := config.Parse(text, f.path, 0)
		if err != nil {
			return "", env.configError(f.what, f.path, err)
		}
		tree = config.Merge(tree, over)
	}
	return config.Build(tree).Audit.Path, nil
}

// tailAudit prints the last n records of path, then, with follow, the
// records appended to it until ctx ends. A file that is truncated or
// replaced (rotated) is read again from its start.
func tailAudit(ctx context.Context, env *environment, path string, n int, follow bool) error {
	f, err := fsread.Open(path) // a named pipe would block here, /dev/zero never end
	for err != nil {
		if !follow || !errors.Is(err, os.ErrNotExist) {
			return failure("audit: %v", err)
		}
		select { // -f: wait for the file
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
		f, err = fsread.Open(path)
	}
	defer func() { f.Close() }()
	last, offset, err := lastLines(f, n)
	if err != nil {
		return failure("audit: %v", err)
	}
	for _, line := range last {
		env.printRecord(line)
	}
	if !follow {
		return nil
	}
	var partial []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
		now, serr := os.Stat(path)
		was, ferr := f.Stat()
		if serr == nil && ferr == nil && (!os.SameFile(now, was) || now.Size() < offset) {
			// Rotated or truncated: the new file from its start.
			if g, err := fsread.Open(path); err == nil {
				f.Close()
				f, offset, partial = g, 0, nil
			}
		}
		more, err := readFrom(f, offset)
		if err != nil {
			return failure("audit: %v", err)
		}
		offset += int64(len(more))
		partial = append(partial, more...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			env.printRecord(partial[:i])
			partial = partial[i+1:]
		}
	}
}

// lastLines returns the last n complete lines of f and the offset after
// the last one.
func lastLines(f *os.File, n int) ([][]byte, int64, error) {
	var all [][]byte
	var offset int64
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // a partial last line waits for its end
		}
		if err != nil {
			return nil, 0, err
		}
		offset += int64(len(line))
		all = append(all, bytes.TrimRight(line, "\n"))
		if len(all) > n {
			all = all[1:]
		}
	}
	return all, offset, nil
}

func readFrom(f *os.File, offset int64) ([]byte, error) {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// printRecord prints one audit record: as it is with --json, else as
//
//	2026-05-01T12:00:00.000000Z  s1  get_time  success  120µs
//	2026-05-01T12:00:01.000000Z  s1  exec  error denied  3µs  its deny list names it
func (env *environment) printRecord(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if env.json {
		fmt.Fprintln(env.stdout, string(line))
		return
	}
	var r struct {
		TS         string  `json:"ts"`
		Session    string  `json:"session"`
		Tool       string  `json:"tool"`
		Status     string  `json:"status"`
		Error      *string `json:"error"`
		DurationUS int64   `json:"duration_us"`
		Reason     string  `json:"reason"`
	}
	if json.Unmarshal(line, &r) != nil {
		fmt.Fprintln(env.stdout, string(line)) // not a record: as it is
		return
	}
	status := r.Status
	if r.Error != nil {
		status += " " + *r.Error
	}
	session := r.Session
	if session == "" {
		session = "-"
	}
	out := fmt.Sprintf("%s  %s  %s  %s  %dµs", r.TS, session, r.Tool, status, r.DurationUS)
	if r.Reason != "" {
		out += "  " + r.Reason
	}
	fmt.Fprintln(env.stdout, out)
}
