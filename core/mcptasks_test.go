package core_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/toolbox"
)

// The tasks extension (io.modelcontextprotocol/tasks, 2026-07-28), which
// no official SDK ships: a client written here from the extension's
// specification text speaks raw JSON-RPC over Streamable HTTP, each request
// on a new connection (as a client that reconnects does), to the engine's
// server. A long tool becomes a task; its question reaches the client in
// tasks/get and is answered by tasks/update; tasks/cancel stops another.

// taskClient is a 2026-07-28 client declaring the tasks extension (or
// not) and form elicitation.
type taskClient struct {
	t     *testing.T
	url   string
	tasks bool
	id    int
}

func (c *taskClient) call(method string, params map[string]any) (result map[string]any, rpcErr map[string]any) {
	c.t.Helper()
	c.id++
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if c.tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "spec-client", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	switch {
	case strings.HasPrefix(method, "tasks/"):
		req.Header.Set("Mcp-Name", params["taskId"].(string)) // the extension's routing header
	case method == "tools/call":
		req.Header.Set("Mcp-Name", params["name"].(string))
	}
	// A new connection each time: nothing of a session or a connection
	// carries the task.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var msg []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, fmt.Sprintf(`"id":%d`, c.id)) {
				msg = []byte(data)
				break
			}
		}
	} else {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		msg = buf.Bytes()
	}
	var answer struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(msg, &answer); err != nil {
		c.t.Fatalf("%s: HTTP %d, answer %q: %v", method, resp.StatusCode, msg, err)
	}
	return answer.Result, answer.Error
}

// poll asks tasks/get until the task's status is want (at most 10 s).
func (c *taskClient) poll(id, want string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, rpcErr := c.call("tasks/get", map[string]any{"taskId": id})
		if rpcErr != nil {
			c.t.Fatalf("tasks/get: %v", rpcErr)
		}
		if res["resultType"] != "complete" {
			c.t.Errorf("tasks/get's resultType: %v", res["resultType"])
		}
		if res["status"] == want {
			return res
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s is %v, not %s: %v", id, res["status"], want, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMCPTasks_extension(t *testing.T) {
	e := newEngine(t)
	defer e.Close()
	mustConfigure(t, e, "[mcp]\ntask_after_ms = 100\n")
	// A tool that works a while, then asks the person behind the call
	// (AskPerson: its MCP client here), then answers.
	slowAsk := func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r, err := e.AskPerson(ctx, call.Session, core.Question{Message: "Go on?"})
		if err != nil {
			return nil, err
		}
		return []byte(r.Action + " " + string(r.Content)), nil
	}
	if err := e.RegisterTool([]byte(`{"name":"slow_ask","returns":"string","limits":{"timeout_ms":60000}}`), toolbox.ToolOptions{Run: slowAsk}); err != nil {
		t.Fatal(err)
	}
	waitForever := func(ctx context.Context, _ toolbox.Call) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := e.RegisterTool([]byte(`{"name":"forever","limits":{"timeout_ms":60000}}`), toolbox.ToolOptions{Run: waitForever}); err != nil {
		t.Fatal(err)
	}
	addr, err := e.MCPListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.MCPStop()
	c := &taskClient{t: t, url: "http://" + addr + "/mcp", tasks: true}

	// server/discover declares the extension.
	res, rpcErr := c.call("server/discover", map[string]any{})
	if rpcErr != nil {
		t.Fatalf("server/discover: %v", rpcErr)
	}
	if ext, _ := res["capabilities"].(map[string]any)["extensions"].(map[string]any); ext["io.modelcontextprotocol/tasks"] == nil {
		t.Errorf("server/discover does not declare the extension: %v", res["capabilities"])
	}

	// A short call is answered at once, as usual.
	res, rpcErr = c.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"x": 1}})
	if rpcErr != nil || res["resultType"] == "task" {
		t.Fatalf("echo: %v %v", rpcErr, res)
	}

	// A long one is a task.
	res, rpcErr = c.call("tools/call", map[string]any{"name": "slow_ask", "arguments": map[string]any{}})
	if rpcErr != nil || res["resultType"] != "task" || res["taskId"] == "" || res["status"] != "working" {
		t.Fatalf("slow_ask: %v %v", rpcErr, res)
	}
	id := res["taskId"].(string)
	if res["ttlMs"] == nil || res["pollIntervalMs"] == nil || res["createdAt"] == nil {
		t.Errorf("the task lacks fields: %v", res)
	}
	// Its question comes in tasks/get ...
	got := c.poll(id, "input_required")
	reqs, _ := got["inputRequests"].(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("inputRequests: %v", got)
	}
	var key string
	for k, v := range reqs {
		key = k
		m := v.(map[string]any)
		if m["method"] != "elicitation/create" || m["params"].(map[string]any)["message"] != "Go on?" {
			t.Errorf("the input request: %v", m)
		}
	}
	// ... a response to no outstanding key is ignored ...
	if res, rpcErr = c.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"not-asked": map[string]any{"action": "accept", "content": map[string]any{"answer": "no"}}}}); rpcErr != nil || res["resultType"] != "complete" {
		t.Errorf("tasks/update of another key: %v %v", rpcErr, res)
	}
	c.poll(id, "input_required")
	// ... and the answer is taken by tasks/update.
	if res, rpcErr = c.call("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"answer": "yes"}}}}); rpcErr != nil || res["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v %v", rpcErr, res)
	}
	done := c.poll(id, "completed")
	result, _ := json.Marshal(done["result"])
	if !strings.Contains(string(result), `accept \"yes\"`) {
		t.Errorf("the task's result: %s", result)
	}
	// Polling a completed task again answers the same.
	if again := c.poll(id, "completed"); fmt.Sprint(again["result"]) != fmt.Sprint(done["result"]) {
		t.Errorf("a second poll: %v", again)
	}

	// tasks/cancel stops another.
	res, _ = c.call("tools/call", map[string]any{"name": "forever", "arguments": map[string]any{}})
	if res["resultType"] != "task" {
		t.Fatalf("forever: %v", res)
	}
	other := res["taskId"].(string)
	if res, rpcErr = c.call("tasks/cancel", map[string]any{"taskId": other}); rpcErr != nil || res["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v %v", rpcErr, res)
	}
	c.poll(other, "cancelled")

	// An unknown task, and a client that did not declare the extension.
	if _, rpcErr = c.call("tasks/get", map[string]any{"taskId": "no-such-task"}); rpcErr == nil || rpcErr["code"] != float64(-32602) {
		t.Errorf("an unknown task: %v", rpcErr)
	}
	plain := &taskClient{t: t, url: c.url}
	if _, rpcErr = plain.call("tasks/get", map[string]any{"taskId": id}); rpcErr == nil || rpcErr["code"] != float64(-32021) {
		t.Errorf("tasks/get without the extension: %v", rpcErr)
	}
	if res, rpcErr = plain.call("tools/call", map[string]any{"name": "slow_ask", "arguments": map[string]any{}}); rpcErr != nil || res["resultType"] == "task" {
		t.Errorf("a client without the extension got a task: %v %v", rpcErr, res)
	}
}
