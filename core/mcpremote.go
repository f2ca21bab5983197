package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/toolbox"
)

// Remote MCP servers' tools (issue 13 §2): [[mcp_servers]] become one
// mcp.Manager; each server's tools are registered as Clara tools
// (SERVER__TOOL) under Clara's policy, rules, limits and audit, and
// replaced whenever the server's list changes. A configuration change that
// leaves [[mcp_servers]] as they were keeps the connections.

// remoteServers is the Manager in force and the tools it registered.
type remoteServers struct {
	mu      sync.Mutex
	manager *mcp.Manager
	key     string                     // the [[mcp_servers]] it was made from
	tools   map[string][]*toolbox.Tool // per server, as registered
	// Lists a Manager delivered before it was put in force (its eager
	// servers connect while the configuration is prepared).
	early map[*mcp.Manager]map[string][]mcp.ToolSpec
}

// preparedRemote is a configuration's servers, ready to commit.
type preparedRemote struct {
	key     string
	manager *mcp.Manager // nil: no servers, or the same as in force
	lazy    []string     // servers to connect once committed
	// transport carries the url servers' requests: under the prepared
	// allowlist until committed, then the one in force.
	transport *llm.Transport
}

// serverConfigs reads the [[mcp_servers]] tables.
func serverConfigs(entries []map[string]any) ([]mcp.ServerConfig, bool, error) {
	var out []mcp.ServerConfig
	eager := false
	for i, m := range entries {
		sc, err := serverConfig(m)
		if err != nil {
			return nil, false, fmt.Errorf("mcp_servers[%d]: %v", i, err)
		}
		eager = eager || sc.Eager
		out = append(out, sc)
	}
	return out, eager, nil
}

func serverConfig(m map[string]any) (mcp.ServerConfig, error) {
	var sc mcp.ServerConfig
	str := func(k string) (string, error) {
		v, ok := m[k]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s must be a string", k)
		}
		return s, nil
	}
	strs := func(k string) ([]string, error) { return stringList(m, k) }
	ms := func(k string) (time.Duration, error) {
		v, ok := m[k]
		if !ok {
			return 0, nil
		}
		n, ok := v.(int64)
		if !ok || n < 1 || n > 86400000 {
			return 0, fmt.Errorf("%s must be an integer from 1 to 86400000", k)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	var err error
	for k := range m {
		switch k {
		case "name", "command", "args", "env_from", "url", "headers_env", "tools", "prefix", "eager", "init_timeout_ms", "timeout_ms":
		default:
			return sc, fmt.Errorf("unknown key %q", k)
		}
	}
	if sc.Name, err = str("name"); err != nil {
		return sc, err
	}
	if sc.Command, err = str("command"); err != nil {
		return sc, err
	}
	if sc.URL, err = str("url"); err != nil {
		return sc, err
	}
	if sc.Args, err = strs("args"); err != nil {
		return sc, err
	}
	if v, ok := m["tools"]; ok {
		if sc.Allow, sc.Deny, err = allowDeny(v); err != nil {
			return sc, err
		}
	}
	if _, ok := m["prefix"]; ok {
		p, err := str("prefix")
		if err != nil {
			return sc, err
		}
		sc.Prefix = &p
	}
	if v, ok := m["eager"]; ok {
		if sc.Eager, ok = v.(bool); !ok {
			return sc, fmt.Errorf("eager must be true or false")
		}
	}
	if sc.EnvFrom, err = variableTable(m, "env_from", `{ CHILD_VAR = "OUR_VAR" }`); err != nil {
		return sc, err
	}
	if sc.HeadersEnv, err = variableTable(m, "headers_env", `{ Authorization = "OUR_VAR" }`); err != nil {
		return sc, err
	}
	if sc.InitTimeout, err = ms("init_timeout_ms"); err != nil {
		return sc, err
	}
	timeout, err := ms("timeout_ms")
	if err != nil {
		return sc, err
	}
	sc.Limits.TimeoutMS = int(timeout / time.Millisecond)
	return sc, nil
}

// variableTable reads m[k] as a table of environment variable names (nil
// when absent); example shows its form in the error.
func variableTable(m map[string]any, k, example string) (map[string]string, error) {
	v, ok := m[k]
	if !ok {
		return nil, nil
	}
	table, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be a table: %s", k, example)
	}
	out := make(map[string]string, len(table))
	for name, x := range table {
		if out[name], ok = x.(string); !ok {
			return nil, fmt.Errorf("%s.%s must be the name of a variable", k, name)
		}
	}
	return out, nil
}

// stringList reads m[k] as an array of strings (nil when absent).
func stringList(m map[string]any, k string) ([]string, error) {
	v, ok := m[k]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an array of strings", k)
	}
	out := make([]string, len(list))
	for i, x := range list {
		if out[i], ok = x.(string); !ok {
			return nil, fmt.Errorf("%s must be an array of strings", k)
		}
	}
	return out, nil
}

// allowDeny reads tools = { allow = [...], deny = [...] }.
func allowDeny(v any) (allow, deny []string, err error) {
	t, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("tools must be a table: { allow = [...], deny = [...] }")
	}
	for k := range t {
		if k != "allow" && k != "deny" {
			return nil, nil, fmt.Errorf("tools: unknown key %q (allow, deny)", k)
		}
	}
	if allow, err = stringList(t, "allow"); err != nil {
		return nil, nil, fmt.Errorf("tools.%v", err)
	}
	if deny, err = stringList(t, "deny"); err != nil {
		return nil, nil, fmt.Errorf("tools.%v", err)
	}
	return allow, deny, nil
}

// prepareRemote makes the Manager of c's servers when they differ from
// those in force, and connects the eager ones now (under netOpts, the
// configuration's outbound options): a server that does not answer its
// initialize makes the configuration fail. The rest connect once the
// configuration is committed.
func (e *Engine) prepareRemote(c *config.Config, netOpts llm.ClientOptions) (*preparedRemote, error) {
	keyBytes, _ := json.Marshal(c.MCPServers)
	p := &preparedRemote{key: string(keyBytes)}
	e.remote.mu.Lock()
	same := e.remote.key == p.key
	e.remote.mu.Unlock()
	if same || len(c.MCPServers) == 0 {
		return p, nil
	}
	configs, eager, err := serverConfigs(c.MCPServers)
	if err != nil {
		return nil, err
	}
	if p.transport, err = e.out.client.NewTransport(netOpts); err != nil {
		return nil, fmt.Errorf("network.allow_hosts: %v", err) // checked by prepareModels already
	}
	var m *mcp.Manager
	m, err = mcp.NewManager(configs, mcp.ManagerOptions{Logger: e.log, HTTPClient: p.transport.HTTPClient(), Redactor: e.out.secrets, Telemetry: &e.tel,
		ClientName: "clara", ClientVersion: Version, Getenv: e.env.Getenv,
		OnToolsChanged: func(server string, tools []mcp.ToolSpec) { e.remoteToolsChanged(m, server, tools) }})
	if err != nil {
		return nil, fmt.Errorf("mcp_servers: %v", err)
	}
	if eager {
		if err := m.Start(context.Background()); err != nil {
			m.Close()
			return nil, fmt.Errorf("mcp_servers: %v", err)
		}
	}
	for _, sc := range configs {
		if !sc.Eager {
			p.lazy = append(p.lazy, sc.Name)
			continue
		}
		// The eager servers' tools are there when the configuration is.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		specs, err := m.Tools(ctx, sc.Name)
		cancel()
		if err != nil {
			e.dropEarly(m)
			m.Close()
			return nil, fmt.Errorf("mcp_servers: %s: %v", sc.Name, err)
		}
		e.remoteToolsChanged(m, sc.Name, specs)
	}
	p.manager = m
	return p, nil
}

// commitRemote puts p in force (e.admin held): the previous servers'
// tools leave the registry now (returned, to retire), and on a goroutine
// the previous Manager closes and the lazy servers connect.
func (e *Engine) commitRemote(p *preparedRemote) (left []*toolbox.Tool) {
	e.remote.mu.Lock()
	defer e.remote.mu.Unlock()
	if p.key == e.remote.key {
		return nil
	}
	old, oldTools := e.remote.manager, e.remote.tools
	e.remote.manager, e.remote.key, e.remote.tools = p.manager, p.key, map[string][]*toolbox.Tool{}
	if p.transport != nil {
		p.transport.Commit() // the client is configured already (commitModels)
	}
	gone := map[*toolbox.Tool]bool{}
	for _, list := range oldTools {
		for _, t := range list {
			gone[t] = true
		}
	}
	if len(gone) > 0 {
		left, _ = e.tools.Swap(func(t *toolbox.Tool) bool { return gone[t] }, nil)
	}
	early := e.remote.early[p.manager]
	delete(e.remote.early, p.manager)
	for server, specs := range early {
		left = append(left, e.registerRemoteLocked(server, specs)...)
	}
	e.Go("mcp servers", func() {
		if old != nil {
			old.Close()
		}
		if m := p.manager; m != nil {
			for _, name := range p.lazy {
				e.Go("mcp server "+name, func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					if _, err := m.Tools(ctx, name); err != nil {
						e.log.Logf(logging.Error, "mcp server %s: %v", name, err)
					}
				})
			}
		}
	})
	return left
}

// forgetRemote makes the next configuration connect afresh (clara_reset
// dropped the servers' tools with every other host tool).
func (e *Engine) forgetRemote() {
	e.remote.mu.Lock()
	e.remote.key = "\x00forgotten"
	e.remote.tools = map[string][]*toolbox.Tool{}
	e.remote.mu.Unlock()
}

// remoteToolsChanged registers a server's tools in place of its previous
// ones. A Manager not yet in force keeps them for its commit; one no
// longer in force is ignored.
func (e *Engine) remoteToolsChanged(m *mcp.Manager, server string, specs []mcp.ToolSpec) {
	e.remote.mu.Lock()
	defer e.remote.mu.Unlock()
	if e.remote.manager != m {
		if e.remote.early == nil {
			e.remote.early = map[*mcp.Manager]map[string][]mcp.ToolSpec{}
		}
		if e.remote.early[m] == nil {
			e.remote.early[m] = map[string][]mcp.ToolSpec{}
		}
		e.remote.early[m][server] = specs
		return
	}
	left := e.registerRemoteLocked(server, specs)
	e.Go("retiring tools", func() { retire(left) })
}

// dropEarly forgets what a Manager that will not be committed delivered.
func (e *Engine) dropEarly(m *mcp.Manager) {
	e.remote.mu.Lock()
	delete(e.remote.early, m)
	e.remote.mu.Unlock()
}

// registerRemoteLocked puts a server's tools in the registry in place of
// its previous ones and returns those that left (e.remote.mu held).
func (e *Engine) registerRemoteLocked(server string, specs []mcp.ToolSpec) []*toolbox.Tool {
	var add []*toolbox.Tool
	for _, spec := range specs {
		d := spec.Descriptor
		d.Title, d.OutputSchema, d.Idempotent = spec.Title, spec.OutputSchema, spec.Idempotent
		t, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: spec.Run, SelfTimed: true})
		if oe := (*toolbox.OutputSchemaError)(nil); errors.As(err, &oe) {
			// An output schema Clara cannot compile (an external $ref, say)
			// costs the tool its check of results, not the tool itself.
			e.log.Logf(logging.Warn, "mcp server %s: tool %s: %v; served without its output schema", server, spec.Descriptor.Name, err)
			d.OutputSchema = nil
			t, err = toolbox.NewTool(d, toolbox.ToolOptions{Run: spec.Run, SelfTimed: true})
		}
		if err != nil {
			e.log.Logf(logging.Warn, "mcp server %s: tool %s: %v", server, spec.Descriptor.Name, err)
			continue
		}
		add = append(add, t)
	}
	old := map[*toolbox.Tool]bool{}
	for _, t := range e.remote.tools[server] {
		old[t] = true
	}
	left, err := e.tools.Swap(func(t *toolbox.Tool) bool { return old[t] }, add)
	if err != nil {
		e.log.Logf(logging.Error, "mcp server %s: %v", server, err)
		return nil
	}
	e.remote.tools[server] = add
	e.log.Logf(logging.Info, "mcp server %s: %d tools", server, len(add))
	return left
}
