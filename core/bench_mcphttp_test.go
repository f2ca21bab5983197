package core_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/mcp"
)

// serveMCPHTTPChild serves MCP's Streamable HTTP transport on loopback
// (BenchmarkScaling_mcpHTTP): it prints the address, then serves until
// its stdin closes.
func serveMCPHTTPChild() int {
	e := core.New(core.Options{})
	if out := string(e.Configure([]byte("state_dir = \"\"\n[mcp]\nmax_sessions = 2000\nmax_calls = 2000\n"))); !strings.HasPrefix(out, `{"status":"success"`) {
		fmt.Fprintln(os.Stderr, out)
		return 1
	}
	addr, err := e.MCPListen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// CLARA_BENCH_MCP_PROFILE=PREFIX writes the server's CPU profile of
	// the run (PREFIX.cpu) and its heap profile (PREFIX.heap) when the
	// bench says "heap", with every client connected.
	prefix := os.Getenv("CLARA_BENCH_MCP_PROFILE")
	if prefix != "" {
		if f, err := os.Create(prefix + ".cpu"); err == nil {
			pprof.StartCPUProfile(f)
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Println(addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "heap" && prefix != "" {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Fprintf(os.Stderr, "server: %d goroutines, heap in use %d KiB, stacks %d KiB, sys %d KiB\n",
				runtime.NumGoroutine(), m.HeapInuse>>10, m.StackInuse>>10, m.Sys>>10)
			if f, err := os.Create(prefix + ".heap"); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
			if f, err := os.Create(prefix + ".goroutines"); err == nil {
				pprof.Lookup("goroutine").WriteTo(f, 1)
				f.Close()
			}
		}
	}
	e.MCPStop()
	return 0
}

// BenchmarkScaling_mcpHTTP is a curve of make bench's scaling section: 1
// to 1,000 MCP clients at once, each a session of its own over Streamable
// HTTP on loopback (the Go SDK's client, its standalone SSE stream open,
// as clients keep it), calling echo one call after the other for
// mcpHTTPWindow. It reports the calls per second of all clients together,
// the median and 99th percentile of one call's latency, and the server's
// resident memory with every client connected. The server (the engine,
// default configuration but for mcp.max_sessions and mcp.max_calls, which
// would refuse the 101st client and the 65th call at once) is a child process, so
// that its memory is its own; clients and server share the machine's
// processors.
func BenchmarkScaling_mcpHTTP(b *testing.B) {
	for _, clients := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for b.Loop() {
				benchMCPHTTP(b, clients)
			}
		})
	}
}

const mcpHTTPWindow = 2 * time.Second

func benchMCPHTTP(b *testing.B, clients int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mcpChildEnv+"=http", "CLARA_CONFIG=", "CLARA_LOG=")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("no address from the server: %v", err)
	}
	endpoint := "http://" + strings.TrimSpace(line) + "/mcp"

	transport := &http.Transport{MaxIdleConns: 4 * clients, MaxIdleConnsPerHost: 4 * clients}
	defer transport.CloseIdleConnections()
	httpClient := &http.Client{Transport: transport}
	ctx := context.Background()
	sessions := make([]*sdk.ClientSession, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range sessions {
		wg.Go(func() {
			client := sdk.NewClient(&sdk.Implementation{Name: "bench"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
			cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: httpClient},
				&sdk.ClientSessionOptions{ProtocolVersion: mcp.ProtocolVersion})
			if err != nil {
				errs <- err
				return
			}
			sessions[i] = cs
		})
	}
	wg.Wait()
	defer func() {
		for _, cs := range sessions {
			if cs != nil {
				cs.Close()
			}
		}
	}()
	select {
	case err := <-errs:
		b.Fatalf("connecting %d clients: %v", clients, err)
	default:
	}
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
	latencies := make([][]time.Duration, clients)
	start := time.Now()
	end := start.Add(mcpHTTPWindow)
	for i, cs := range sessions {
		wg.Go(func() {
			for time.Now().Before(end) {
				t0 := time.Now()
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					errs <- fmt.Errorf("echo: %v %+v", err, res)
					return
				}
				latencies[i] = append(latencies[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	rss := residentKiB(cmd.Process.Pid)
	fmt.Fprintln(stdin, "heap")
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) == 0 {
		b.Fatal("no call finished")
	}
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(rss)/1024, "server-MiB")
}

// residentKiB is a process's resident set size (VmRSS), 0 if unknown.
func residentKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}
