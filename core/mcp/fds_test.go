//go:build unix

package mcp

import (
	"context"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func blocking(t *testing.T, fd int) bool {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	return flags&syscall.O_NONBLOCK == 0
}

// TestServeFDsStop serves on two blocking pipes, as a C host's descriptors
// are: Stop releases the blocked read, the descriptors get their blocking
// mode back, and no reader is left behind to steal what comes next.
func TestServeFDsStop(t *testing.T) {
	var toServer, fromServer [2]int
	if err := syscall.Pipe2(toServer[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Pipe2(fromServer[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	inFD, outFD := toServer[0], fromServer[1]
	defer syscall.Close(inFD)
	defer syscall.Close(outFD)
	// The client's ends are pollable, so that closing them ends its reader.
	syscall.SetNonblock(toServer[1], true)
	syscall.SetNonblock(fromServer[0], true)
	clientOut := os.NewFile(uintptr(toServer[1]), "client-out")
	clientIn := os.NewFile(uintptr(fromServer[0]), "client-in")
	defer clientOut.Close()
	defer clientIn.Close()

	srv := NewServer(newTestHost(echoTool("echo")), ServerOptions{})
	defer srv.Close()
	rc := make(chan error, 1)
	go func() { rc <- srv.ServeFDs(context.Background(), inFD, outFD) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&sdk.IOTransport{Reader: clientIn, Writer: nopWriteCloser{clientOut}}, legacySession)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "fd"}})
	if err != nil || text(res) != `{"message":"fd"}` {
		t.Fatalf("echo: %v %v", err, res)
	}
	if blocking(t, inFD) {
		t.Errorf("in_fd is blocking while served")
	}
	srv.Stop() // the server sits in a read of in_fd
	if err := within(t, rc, "ServeFDs' return after Stop"); err != nil {
		t.Errorf("ServeFDs: %v", err)
	}
	if !blocking(t, inFD) || !blocking(t, outFD) {
		t.Errorf("the descriptors did not get their blocking mode back")
	}
	// No reader of the SDK is left blocked in in_fd (the client's goes
	// with its Close).
	cs.Close()
	waitFor(t, func() bool { return stdioReaders() == 0 }, "the end of the stdio readers")
	// What the host writes next is the host's to read.
	if _, err := clientOut.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 16)
		n, _ := syscall.Read(inFD, buf)
		got <- string(buf[:n])
	}()
	if s := within(t, got, "the host's own read"); s != "after\n" {
		t.Errorf("the host read %q", s)
	}
}

// stdioReaders counts the goroutines of the SDK that read a stream.
func stdioReaders() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "mcp.newIOConnLimited.func1(")
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
