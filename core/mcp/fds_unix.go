//go:build unix

package mcp

import (
	"context"
	"fmt"
	"os"
	"syscall"
)

// ServeFDs is ServeStdio over two file descriptors that stay the caller's:
// it serves on duplicates, closed on return. While it serves, the two
// descriptors are in non-blocking mode (a flag their duplicates share with
// them), so that Stop can release a read or a write in progress; the mode
// they had is restored on return. Nothing else may read in_fd or write
// out_fd meanwhile: that would break the protocol anyway.
func (s *Server) ServeFDs(ctx context.Context, inFD, outFD int) error {
	in, restoreIn, err := pollableDup(inFD, "mcp-in")
	if err != nil {
		return err
	}
	defer restoreIn()
	out, restoreOut, err := pollableDup(outFD, "mcp-out")
	if err != nil {
		return err
	}
	defer restoreOut()
	return s.ServeStdio(ctx, in, out)
}

// pollableDup duplicates fd (close-on-exec) in non-blocking mode, as a
// File the runtime's poller can interrupt. restore closes the duplicate and
// gives fd back the blocking mode it had.
func pollableDup(fd int, name string) (*os.File, func(), error) {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		return nil, nil, fmt.Errorf("mcp: descriptor %d: %v", fd, errno)
	}
	dup, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil, nil, fmt.Errorf("mcp: duplicating descriptor %d: %v", fd, errno)
	}
	if err := syscall.SetNonblock(int(dup), true); err != nil {
		syscall.Close(int(dup))
		return nil, nil, fmt.Errorf("mcp: descriptor %d: %v", fd, err)
	}
	f := os.NewFile(dup, name)
	restore := func() {
		f.Close()
		if flags&syscall.O_NONBLOCK == 0 {
			_ = syscall.SetNonblock(fd, false)
		}
	}
	return f, restore, nil
}
