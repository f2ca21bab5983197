// Command conformanceclient is the client under test of the official MCP
// conformance suite's client scenarios: Clara's [[mcp_servers]] client, in
// an engine configured with the suite's server (the URL, the last
// argument) as its one remote server, calling the tool the scenario
// (MCP_CONFORMANCE_SCENARIO) expects through Clara's pipeline. The host's
// input handler accepts every question as it comes: a form's fields are
// left to their defaults, and an authorization is done as a person's
// browser would: the authorization URL is opened, and the address the
// authorization server sends back to is the answer. The auth scenarios'
// client credentials (MCP_CONFORMANCE_CONTEXT) reach Clara through the
// environment, as Clara takes them.
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
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
	"auth/pre-registration":               {`{"tool":"s__test-tool","arguments":{}}`},
	"auth/client-credentials-basic":       {`{"tool":"s__test-tool","arguments":{}}`},
}

// oauth is the [[mcp_servers]] entry's oauth table of each auth scenario.
var oauth = map[string]string{
	"auth/pre-registration":         `{ client_id_env = "CONFORMANCE_CLIENT_ID", client_secret_env = "CONFORMANCE_CLIENT_SECRET", redirect_url = "http://localhost:3000/callback" }`,
	"auth/client-credentials-basic": `{ client_id_env = "CONFORMANCE_CLIENT_ID", client_secret_env = "CONFORMANCE_CLIENT_SECRET", grant = "client_credentials" }`,
}

var authorizeURL = regexp.MustCompile(`open (\S+) and give`)

// browse opens the authorization URL and returns where it sends back to.
func browse(u string) (string, error) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(u)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.Header.Get("Location"), nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: conformanceclient SERVER_URL")
		os.Exit(2)
	}
	url := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var context struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &context)
	os.Setenv("CONFORMANCE_CLIENT_ID", context.ClientID)
	os.Setenv("CONFORMANCE_CLIENT_SECRET", context.ClientSecret)
	e := core.New(core.Options{})
	defer e.Close()
	e.SetLogSink(func(l logging.Level, m string) { fmt.Fprintf(os.Stderr, "%s: %s\n", l, m) }, logging.Debug)
	e.SetInputHandler(func(req []byte) (string, bool) {
		fmt.Fprintf(os.Stderr, "asked: %s\n", req)
		var q struct{ Prompt string }
		_ = json.Unmarshal(req, &q)
		if m := authorizeURL.FindStringSubmatch(q.Prompt); m != nil {
			back, err := browse(m[1])
			if err != nil {
				fmt.Fprintf(os.Stderr, "authorizing: %v\n", err)
				return "", false
			}
			b, _ := json.Marshal(map[string]string{"redirected_to": back})
			return string(b), true
		}
		if strings.Contains(string(req), `"schema"`) {
			return "{}", true
		}
		return "yes", true
	})
	cfg := fmt.Sprintf("state_dir = \"\"\nrules.builtin = false\n\n[[mcp_servers]]\nname = \"s\"\nurl = %q\neager = true\ntimeout_ms = 20000\n", url)
	if o := oauth[scenario]; o != "" {
		cfg += "oauth = " + o + "\n"
	}
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
