package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clara-lib/clara/core"
)

// runChat asks the model: clara chat PROMPT [flags].
func runChat(env *environment, args []string) int {
	arguments := map[string]any{}
	session, verbose, stream, ask, typed := "", false, false, false, false
	var prompt []string
	for i := 0; i < len(args); {
		a := args[i]
		n, err := 1, error(nil)
		var v string
		switch {
		case a == "--allow-tools":
			arguments["allow_tools"] = true
		case a == "--verbose" || a == "-v":
			verbose = true
		case a == "--ask":
			ask = true
		case strings.HasPrefix(a, "--result-schema"):
			if v, n, err = flagValue(args, i, "--result-schema"); err == nil {
				var schema map[string]any
				if err = json.Unmarshal([]byte(v), &schema); err != nil {
					err = fmt.Errorf("chat: --result-schema must be a JSON Schema object: %v", err)
				}
				arguments["result_schema"], typed = schema, true
			}
		case a == "--stream":
			stream = true
			arguments["stream"] = true
		case strings.HasPrefix(a, "--max-tool-calls"):
			if v, n, err = flagValue(args, i, "--max-tool-calls"); err == nil {
				var k int
				if k, err = strconv.Atoi(v); err == nil {
					arguments["max_tool_calls"] = k
				}
			}
		case strings.HasPrefix(a, "--tools"):
			if v, n, err = flagValue(args, i, "--tools"); err == nil {
				arguments["tools"] = strings.Split(v, ",")
			}
		case strings.HasPrefix(a, "--session"):
			v, n, err = flagValue(args, i, "--session")
			session = v
		case strings.HasPrefix(a, "--model"):
			if v, n, err = flagValue(args, i, "--model"); err == nil {
				arguments["model"] = v
			}
		case strings.HasPrefix(a, "--"):
			err = fmt.Errorf("chat: unknown flag %s", a)
		default:
			prompt = append(prompt, a)
		}
		if err != nil {
			fmt.Fprintf(env.stderr, "clara: %v\n", err)
			return 2
		}
		i += n
	}
	if len(prompt) == 0 {
		fmt.Fprintln(env.stderr, "clara: chat needs a prompt")
		return 2
	}
	arguments["prompt"] = strings.Join(prompt, " ")
	if verbose || stream {
		env.engine.SetEventSink(progressPrinter(env, verbose, stream))
		defer env.engine.SetEventSink(nil)
	}
	if ask {
		env.engine.SetInputHandler(terminalInput(env))
		defer env.engine.SetInputHandler(nil)
	}
	request := map[string]any{"tool": "chat", "arguments": arguments}
	if session != "" {
		request["session"] = session
	}
	out, raw := env.call(request)
	if out["status"] != "success" {
		return env.failed(out, raw)
	}
	result, _ := out["result"].(map[string]any)
	if typed {
		b, _ := json.Marshal(result["result"])
		fmt.Fprintln(env.stdout, string(b))
		return 0
	}
	if !stream {
		fmt.Fprintln(env.stdout, result["content"])
	} else {
		fmt.Fprintln(env.stdout)
	}
	return 0
}

// progressPrinter shows a chat as it runs: the seed's status lines on
// stderr (↪ tool: NAME(ARGS…), ✔ tool result received (34ms), ✗ on
// failure) with --verbose, the answer's text as it streams with --stream.
func progressPrinter(env *environment, verbose, stream bool) func([]byte) {
	var mu sync.Mutex
	return func(raw []byte) {
		var ev struct {
			Event, Text, Tool, Status string
			Arguments                 json.RawMessage
			DurationMS                float64 `json:"duration_ms"`
		}
		if json.Unmarshal(raw, &ev) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Event == "token" && stream:
			fmt.Fprint(env.stdout, ev.Text)
		case ev.Event == "tool_call" && verbose:
			fmt.Fprintf(env.stderr, "↪ tool: %s(%s)\n", ev.Tool, shorten(string(ev.Arguments), 60))
		case ev.Event == "tool_result" && verbose && ev.Status == "success":
			fmt.Fprintf(env.stderr, "✔ tool result received (%s)\n", time.Duration(ev.DurationMS*float64(time.Millisecond)).Round(time.Millisecond))
		case ev.Event == "tool_result" && verbose:
			fmt.Fprintf(env.stderr, "✗ tool %s failed: %s (%s)\n", ev.Tool, ev.Status, time.Duration(ev.DurationMS*float64(time.Millisecond)).Round(time.Millisecond))
		}
	}
}

// terminalInput answers ask_user from the terminal: the question on
// stderr, the answer one line of stdin; end of input declines. Questions
// asked at once are put one after the other.
func terminalInput(env *environment) core.InputHandler {
	var mu sync.Mutex
	lines := bufio.NewReader(env.stdin)
	return func(request []byte) (string, bool) {
		var q struct{ Prompt string }
		if json.Unmarshal(request, &q) != nil {
			return "", false
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(env.stderr, "? %s\n> ", q.Prompt)
		line, err := lines.ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(env.stderr)
			return "", false
		}
		return strings.TrimRight(line, "\r\n"), true
	}
}

func shorten(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// runCall calls a tool: clara call TOOL [JSON] [--session S].
func runCall(env *environment, args []string) int {
	var positional []string
	session := ""
	for i := 0; i < len(args); {
		if strings.HasPrefix(args[i], "--session") {
			v, n, err := flagValue(args, i, "--session")
			if err != nil {
				fmt.Fprintf(env.stderr, "clara: %v\n", err)
				return 2
			}
			session, i = v, i+n
			continue
		}
		positional = append(positional, args[i])
		i++
	}
	if len(positional) < 1 || len(positional) > 2 {
		fmt.Fprintln(env.stderr, `clara: usage: clara call TOOL ['{"key":"value"}'] [--session S]`)
		return 2
	}
	request := map[string]any{"tool": positional[0]}
	if len(positional) == 2 {
		var arguments json.RawMessage
		if err := json.Unmarshal([]byte(positional[1]), &arguments); err != nil {
			fmt.Fprintf(env.stderr, "clara: the arguments are not JSON: %v\n", err)
			return 2
		}
		request["arguments"] = arguments
	}
	if session != "" {
		request["session"] = session
	}
	out, raw := env.call(request)
	if out["status"] != "success" {
		return env.failed(out, raw)
	}
	fmt.Fprintln(env.stdout, string(raw))
	return 0
}

// runTools lists the tools: clara tools [--format F].
func runTools(env *environment, args []string) int {
	format := "clara"
	for i := 0; i < len(args); {
		if !strings.HasPrefix(args[i], "--format") {
			fmt.Fprintf(env.stderr, "clara: tools: unexpected %q\n", args[i])
			return 2
		}
		v, n, err := flagValue(args, i, "--format")
		if err != nil {
			fmt.Fprintf(env.stderr, "clara: %v\n", err)
			return 2
		}
		format, i = v, i+n
	}
	out, raw := env.call(map[string]any{"tool": "tools_list", "arguments": map[string]any{"format": format}})
	if out["status"] != "success" {
		return env.failed(out, raw)
	}
	result, _ := json.MarshalIndent(out["result"], "", "  ")
	fmt.Fprintln(env.stdout, string(result))
	return 0
}

// runRules tests rule files: clara rules test [FILE...] (default: the
// built-in rules' own tests).
func runRules(env *environment, args []string) int {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(env.stderr, "clara: usage: clara rules test [FILE...]")
		return 2
	}
	files := args[1:]
	if len(files) == 0 {
		fmt.Fprintln(env.stderr, "clara: rules test needs test files (NAME.test.toml)")
		return 2
	}
	status := 0
	for _, f := range files {
		out, raw := env.call(map[string]any{"tool": "rules_test", "arguments": map[string]any{"path": f}})
		if out["status"] != "success" {
			env.failed(out, raw)
			status = 1
			continue
		}
		result, _ := out["result"].(map[string]any)
		failed, _ := result["failed"].(float64)
		passed, _ := result["passed"].(float64)
		fmt.Fprintf(env.stdout, "%s: %d passed, %d failed\n", f, int(passed), int(failed))
		if failed > 0 {
			text, _ := json.MarshalIndent(result, "", "  ")
			fmt.Fprintln(env.stdout, string(text))
			status = 1
		}
	}
	return status
}

func runVersion(env *environment, _ []string) int {
	fmt.Fprintf(env.stdout, "clara %s\n", core.Version)
	return 0
}
