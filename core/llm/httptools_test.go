package llm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// scriptDir holds the scripts shared with the C, Python and CLIPS tests.
var scriptDir = filepath.Join("..", "..", "tests", "llm")

// serveScripts starts a server for scripts of tests/llm; the test fails
// if the server saw a request it did not expect or a script was not
// served to its end.
func serveScripts(t testing.TB, names ...string) *llmtest.Server {
	t.Helper()
	var scripts []*llmtest.Script
	for _, n := range names {
		s, err := llmtest.LoadScript(filepath.Join(scriptDir, n+".toml"))
		if err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, s)
	}
	srv, err := llmtest.NewServer("", scripts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Err(); err != nil {
			t.Error(err)
		}
		srv.Close()
	})
	return srv
}

func TestEvaluator(t *testing.T) {
	srv := serveScripts(t, "evaluator")
	env := map[string]string{"EV_KEY": "ev-secret-42"}
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL()}, Getenv: func(k string) string { return env[k] }})
	run, err := HTTPToolFunc(c, Evaluator(srv.BaseURL("evaluator")+"/evaluate", 2*time.Second, map[string]string{"X-Key": "EV_KEY"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	call := toolbox.Call{Arguments: []byte(`{"question":"Is 7 prime?"}`)}

	out, err := run(context.Background(), call)
	if err != nil || string(out) != `{"answer":true,"confidence":0.99}` {
		t.Fatalf("%s %v", out, err)
	}
	_, err = run(context.Background(), call)
	pe := protoErr(t, err, protocol.ToolFailed)
	if !strings.Contains(pe.Message, "answered status 500 Internal Server Error: model crashed while using key [redacted]; see logs") {
		t.Errorf("message %q", pe.Message)
	}
	_, err = run(context.Background(), call)
	pe = protoErr(t, err, protocol.ToolFailed)
	if !strings.Contains(pe.Message, "not JSON: yes") {
		t.Errorf("message %q", pe.Message)
	}
}

func TestEvaluator_unreachable(t *testing.T) {
	srv := serveScripts(t) // no script: nothing listens under /gone, and the server is closed below
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL()}})
	run, err := HTTPToolFunc(c, Evaluator(srv.URL()+"/evaluate", time.Second, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	_, err = run(context.Background(), toolbox.Call{Arguments: []byte(`{}`)})
	pe := protoErr(t, err, protocol.ToolFailed)
	if !strings.Contains(pe.Message, "connection refused") {
		t.Errorf("message %q", pe.Message)
	}
}

func TestHTTPTool_getAndPost(t *testing.T) {
	srv := serveScripts(t, "http_tool")
	env := map[string]string{"LOOKUP_TOKEN": "Bearer lookup-token"}
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL()}, Getenv: func(k string) string { return env[k] }})
	get, err := HTTPToolFunc(c, HTTPTool{Name: "lookup", URL: srv.BaseURL("http_tool") + "/lookup", Method: "get",
		HeadersEnv: map[string]string{"Authorization": "LOOKUP_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := get(context.Background(), toolbox.Call{Arguments: []byte(`{"city":"Paris","tag":["old","river"],"limit":3,"none":null}`)})
	// returns = "json" and a text answer: a JSON string.
	if err != nil || string(out) != `"Paris: 12 results"` {
		t.Fatalf("%s %v", out, err)
	}
	post, err := HTTPToolFunc(c, HTTPTool{Name: "lookup", URL: srv.BaseURL("http_tool") + "/lookup", Returns: toolbox.ReturnsString})
	if err != nil {
		t.Fatal(err)
	}
	out, err = post(context.Background(), toolbox.Call{Arguments: []byte(`{"city":"Oslo"}`)})
	if err != nil || string(out) != `{"results":["fjord","museum"]}` {
		t.Fatalf("%s %v", out, err)
	}
	rec := srv.Received("http_tool")
	if len(rec) != 2 || rec[0].Header.Get("Authorization") != "Bearer lookup-token" {
		t.Fatalf("%+v", rec)
	}
}

func TestHTTPTool_badDefinitions(t *testing.T) {
	c := newTestClient(t, ClientOptions{})
	for _, tool := range []HTTPTool{
		{Name: "a", URL: "ftp://x/"},
		{Name: "b", URL: "http://x/", Method: "PUT"},
		{Name: "c", URL: "http://u:p@x/"},
		{Name: "d", URL: "http://x/", Returns: "xml"},
		{Name: "e", URL: "http://x/", HeadersEnv: map[string]string{"Bad Header": "V"}},
	} {
		if _, err := HTTPToolFunc(c, tool); err == nil {
			t.Errorf("%+v accepted", tool)
		}
	}
}
