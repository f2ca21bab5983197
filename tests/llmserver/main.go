// Command llmserver serves test scripts as a model provider on loopback,
// for the C, Python and CLIPS tests (Go tests use core/llm/llmtest
// directly).
//
//	llmserver [-addr 127.0.0.1:0] SCRIPT.toml|DIR ...
//
// It prints its address ("http://127.0.0.1:PORT") on the first line of
// stdout once it listens; script NAME answers under URL/NAME (set
// llm.base_url, evaluator.url or an HTTP tool's url to it). It runs until
// its stdin closes, or until SIGINT or SIGTERM, then prints each script's
// report on stderr and exits 1 if a script saw a request it did not
// expect (with -complete, also if a script was not served to its end),
// 0 otherwise. GET URL/_llmtest/report answers the reports as
// JSON while it runs; POST URL/_llmtest/reset rewinds every script.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/clara-lib/clara/core/llm/llmtest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the address to listen on")
	complete := flag.Bool("complete", false, "exit 1 also when a script was not served to its end")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: llmserver [-addr HOST:PORT] [-complete] SCRIPT.toml|DIR ...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	scripts, err := llmtest.LoadScripts(flag.Args()...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv, err := llmtest.NewServer(*addr, scripts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(srv.URL())

	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		done <- struct{}{}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		done <- struct{}{}
	}()
	<-done
	_ = srv.Close()

	failed := false
	enc := json.NewEncoder(os.Stderr)
	for _, r := range srv.Reports() {
		_ = enc.Encode(r)
		if len(r.Failures) > 0 || *complete && !r.Complete {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
