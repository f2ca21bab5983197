// Command conformanceclient is the client under test of the official MCP
// conformance suite's client scenarios: Clara's [[mcp_servers]] client, in
// an engine configured with the suite's server (the URL, the last
// argument) as its one remote server, calling the tool the scenario
// (MCP_CONFORMANCE_SCENARIO) expects through Clara's pipeline. The host's
// input handler accepts every question as it comes: a form's fields are
// left to their defaults.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
)

// calls are the tool calls of each scenario (by the remote tool's name,
// s__ being the server's prefix in Clara); a scenario not listed only
// connects, which lists the tools.
var calls = map[string][]string{
	"tools_call":                          {`{"tool":"s__add_numbers","arguments":{"a":5,"b":3}}`},
	"elicitation-sep1034-client-defaults": {`{"tool":"s__test_client_elicitation_defaults","arguments":{}}`},
	"sse-retry":                           {`{"tool":"s__test_reconnection","arguments":{}}`},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: conformanceclient SERVER_URL")
		os.Exit(2)
	}
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	e := core.New(core.Options{})
	defer e.Close()
	e.SetLogSink(func(l logging.Level, m string) { fmt.Fprintf(os.Stderr, "%s: %s\n", l, m) }, logging.Debug)
	e.SetInputHandler(func(req []byte) (string, bool) {
		fmt.Fprintf(os.Stderr, "asked: %s\n", req)
		if strings.Contains(string(req), `"schema"`) {
			return "{}", true
		}
		return "yes", true
	})
	cfg := fmt.Sprintf("state_dir = \"\"\nrules.builtin = false\n\n[[mcp_servers]]\nname = \"s\"\nurl = %q\neager = true\ntimeout_ms = 20000\n", url)
	if out := e.Configure([]byte(cfg)); !ok(out) {
		fmt.Fprintf(os.Stderr, "configure: %s\n", out)
		os.Exit(1)
	}
	fmt.Println("connected")
	for _, req := range calls[scenario] {
		out := e.Evaluate([]byte(req))
		fmt.Printf("%s -> %s\n", req, out)
		if !ok(out) {
			os.Exit(1)
		}
	}
}

func ok(envelope []byte) bool {
	var v struct {
		Status string `json:"status"`
		Config any    `json:"config"`
		Result any    `json:"result"`
	}
	return json.Unmarshal(envelope, &v) == nil && (v.Status == "success" || v.Result != nil)
}
