package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
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
	replace map[string]replaceRule     // per server: the names its tools may take from others
	// Lists a Manager delivered before it was put in force (its eager
	// servers connect while the configuration is prepared).
	early map[*mcp.Manager]map[string][]mcp.ToolSpec
	// watchers hear that a server's resources or prompts changed (the
	// MCP server, which serves them on).
	watchers toolbox.Watchers
}

// currentManager is the Manager in force, nil when none.
func (e *Engine) currentManager() *mcp.Manager {
	e.remote.mu.Lock()
	defer e.remote.mu.Unlock()
	return e.remote.manager
}

// onRemoteCatalog arranges for fn to run when a remote server's resources
// or prompts change; stop ends it.
func (e *Engine) onRemoteCatalog(fn func()) (stop func()) { return e.remote.watchers.Add(fn) }

func (e *Engine) remoteCatalogChanged(string) { e.remote.watchers.Notify() }

// preparedRemote is a configuration's servers, ready to commit.
type preparedRemote struct {
	key     string
	manager *mcp.Manager // nil: no servers, or the same as in force
	lazy    []string     // servers to connect once committed
	// transport carries the url servers' requests: under the prepared
	// allowlist until committed, then the one in force.
	transport *llm.Transport
	eager     []string // servers connected while preparing, in configuration order
	replace   map[string]replaceRule
}

// checkEagerNames finds the tools of the servers connected while preparing
// that would take a name another owner will hold once the configuration is
// in force (the built-ins, the host's tools, configured, those of a server
// before them), unless their entry's replace lets them: each is a
// configuration problem naming both (toolnames.go).
func (e *Engine) checkEagerNames(p *preparedRemote, entries []map[string]any, configured []*toolbox.Tool) error {
	if p == nil || p.manager == nil || len(p.eager) == 0 {
		return nil
	}
	e.remote.mu.Lock()
	// A copy: the manager's servers may deliver again (a list_changed)
	// while this runs, writing into the map under the lock.
	delivered := make(map[string][]mcp.ToolSpec, len(e.remote.early[p.manager]))
	for server, specs := range e.remote.early[p.manager] {
		delivered[server] = specs
	}
	e.remote.mu.Unlock()
	type owner struct {
		rank int
		name string
	}
	holder := map[string]owner{}
	for _, t := range e.tools.List() {
		if r := rankOf(t); r == rankBuiltin || r == rankHost { // the rest is replaced by the configuration
			holder[t.Name] = owner{r, ownerOf(t)}
		}
	}
	for _, t := range configured {
		if _, taken := holder[t.Name]; !taken {
			holder[t.Name] = owner{rankOf(t), ownerOf(t)}
		}
	}
	index := map[string]int{}
	for i, m := range entries {
		if name, ok := m["name"].(string); ok {
			index[name] = i
		}
	}
	var problems []string
	for _, server := range p.eager {
		rule := p.replace[server]
		for _, spec := range delivered[server] {
			name := spec.Descriptor.Name
			by, taken := holder[name]
			switch {
			case !taken:
				holder[name] = owner{rankRemote, "mcp server " + strconv.Quote(server)}
				continue
			case by.rank == rankBuiltin:
				problems = append(problems, fmt.Sprintf("mcp_servers[%d] (%s): its tool %q would take the name of the built-in tool %q; leave it out with tools = { deny = [%q] } or give the server a prefix",
					index[server], server, spec.RemoteName, name, spec.RemoteName))
			case !rule.allows(spec.RemoteName):
				problems = append(problems, fmt.Sprintf("mcp_servers[%d] (%s): its tool %q would replace the tool %q of %s; say replace = true (or replace = [%q]) in this entry to let it",
					index[server], server, spec.RemoteName, name, by.name, spec.RemoteName))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// replaceRule is an [[mcp_servers]] entry's replace: true (all) or the
// remote names of the tools that may take a name another owner holds
// (toolnames.go).
type replaceRule struct {
	all   bool
	names map[string]bool
}

func (r replaceRule) allows(remoteName string) bool { return r.all || r.names[remoteName] }

// serverConfigs reads the [[mcp_servers]] tables.
func serverConfigs(entries []map[string]any, root string) ([]mcp.ServerConfig, map[string]replaceRule, bool, error) {
	var out []mcp.ServerConfig
	replace := map[string]replaceRule{}
	eager := false
	for i, m := range entries {
		sc, err := serverConfig(m, root)
		if err == nil {
			replace[sc.Name], err = replaceOf(m)
		}
		if err != nil {
			return nil, nil, false, fmt.Errorf("mcp_servers[%d]: %v", i, err)
		}
		eager = eager || sc.Eager
		out = append(out, sc)
	}
	return out, replace, eager, nil
}

// replaceOf reads an entry's replace: true, false or a list of remote tool
// names.
func replaceOf(m map[string]any) (replaceRule, error) {
	switch v := m["replace"].(type) {
	case nil:
		return replaceRule{}, nil
	case bool:
		return replaceRule{all: v}, nil
	case []any:
		names, err := stringList(m, "replace")
		if err != nil {
			break
		}
		r := replaceRule{names: map[string]bool{}}
		for _, n := range names {
			r.names[n] = true
		}
		return r, nil
	}
	return replaceRule{}, fmt.Errorf("replace must be true, false or a list of the server's tool names")
}

// serverConfig reads one [[mcp_servers]] table. A stdio server runs in
// cwd (relative to root, the absolute project_root), root by default; a
// command written as a path (with a "/") is relative to root too, a bare
// name is looked up in PATH.
func serverConfig(m map[string]any, root string) (mcp.ServerConfig, error) {
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
		case "name", "command", "cwd", "args", "env_from", "url", "headers_env", "oauth", "tools", "prefix", "eager", "init_timeout_ms", "timeout_ms", "replace",
			"max_tools", "max_description_bytes", "max_schema_bytes":
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
	if strings.Contains(sc.Command, "/") && !filepath.IsAbs(sc.Command) {
		sc.Command = filepath.Join(root, sc.Command)
	}
	cwd, err := str("cwd")
	if err != nil {
		return sc, err
	}
	if cwd != "" && sc.Command == "" {
		return sc, fmt.Errorf("cwd is for a server started with command")
	}
	if sc.Command != "" {
		sc.Dir = root
		if filepath.IsAbs(cwd) {
			sc.Dir = filepath.Clean(cwd)
		} else if cwd != "" {
			sc.Dir = filepath.Join(root, cwd)
		}
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
	if v, ok := m["oauth"]; ok {
		t, ok := v.(map[string]any)
		if !ok {
			return sc, fmt.Errorf(`oauth must be a table: { client_id_env = "VAR", client_secret_env = "VAR", redirect_url = "http://localhost:PORT/callback" }`)
		}
		o := &mcp.OAuthConfig{}
		for k, v := range t {
			s, isStr := v.(string)
			switch {
			case !isStr:
				return sc, fmt.Errorf("oauth.%s must be a string", k)
			case k == "client_id_env":
				o.ClientIDEnv = s
			case k == "client_secret_env":
				o.ClientSecretEnv = s
			case k == "redirect_url":
				o.RedirectURL = s
			case k == "grant" && (s == "authorization_code" || s == "client_credentials"):
				o.ClientCredentials = s == "client_credentials"
			case k == "grant":
				return sc, fmt.Errorf(`oauth.grant must be "authorization_code" or "client_credentials", not %q`, s)
			default:
				return sc, fmt.Errorf("oauth: unknown key %q (client_id_env, client_secret_env, redirect_url, grant)", k)
			}
		}
		sc.OAuth = o
	}
	if sc.InitTimeout, err = ms("init_timeout_ms"); err != nil {
		return sc, err
	}
	timeout, err := ms("timeout_ms")
	if err != nil {
		return sc, err
	}
	sc.Limits.TimeoutMS = int(timeout / time.Millisecond)
	for _, b := range []struct {
		key      string
		min, max int64
		to       *int
	}{{"max_tools", 1, 100000, &sc.MaxTools}, {"max_description_bytes", 64, 1 << 20, &sc.MaxDescriptionBytes},
		{"max_schema_bytes", 256, 16 << 20, &sc.MaxSchemaBytes}} {
		v, ok := m[b.key]
		if !ok {
			continue
		}
		n, ok := v.(int64)
		if !ok || n < b.min || n > b.max {
			return sc, fmt.Errorf("%s must be an integer from %d to %d", b.key, b.min, b.max)
		}
		*b.to = int(n)
	}
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
	configs, replace, eager, err := serverConfigs(c.MCPServers, projectRoot(c))
	if err != nil {
		return nil, err
	}
	if p.transport, err = e.out.client.NewTransport(netOpts); err != nil {
		return nil, fmt.Errorf("network.allow_hosts: %v", err) // checked by prepareModels already
	}
	p.replace = replace
	var m *mcp.Manager
	m, err = mcp.NewManager(configs, mcp.ManagerOptions{Logger: e.log, HTTPClient: p.transport.HTTPClient(), Redactor: e.out.secrets, Telemetry: &e.tel,
		ClientName: "clara", ClientVersion: Version, Getenv: e.env.Getenv,
		OnToolsChanged:   func(server string, tools []mcp.ToolSpec) { e.remoteToolsChanged(m, server, tools) },
		OnCatalogChanged: e.remoteCatalogChanged,
		// A server's question goes to the person behind the call, as
		// ask_user's does.
		Ask: func(ctx context.Context, session, message string, schema json.RawMessage) (string, json.RawMessage, error) {
			r, err := e.AskPerson(ctx, session, Question{Message: message, Schema: schema})
			return r.Action, r.Content, err
		}})
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
		p.eager = append(p.eager, sc.Name)
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
	e.remote.manager, e.remote.key, e.remote.tools, e.remote.replace = p.manager, p.key, map[string][]*toolbox.Tool{}, p.replace
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
// its previous ones and returns those that left (e.remote.mu held). A tool
// whose name another owner holds is left out with a warning, unless the
// entry's replace lets it (toolnames.go); what was registered is what the
// server is known to own, so that all of it goes with the server (issue
// 25, finding 20).
func (e *Engine) registerRemoteLocked(server string, specs []mcp.ToolSpec) []*toolbox.Tool {
	var add []*toolbox.Tool
	rule := e.remote.replace[server]
	for _, spec := range specs {
		d := spec.Descriptor
		d.Title, d.OutputSchema, d.Idempotent = spec.Title, spec.OutputSchema, spec.Idempotent
		origin := remoteOrigin(server, rule.allows(spec.RemoteName))
		t, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: spec.Run, SelfTimed: true, Origin: origin})
		if oe := (*toolbox.OutputSchemaError)(nil); errors.As(err, &oe) {
			// An output schema Clara cannot compile (an external $ref, say)
			// costs the tool its check of results, not the tool itself.
			e.log.Logf(logging.Warn, "mcp server %s: tool %s: %v; served without its output schema", server, spec.Descriptor.Name, err)
			d.OutputSchema = nil
			t, err = toolbox.NewTool(d, toolbox.ToolOptions{Run: spec.Run, SelfTimed: true, Origin: origin})
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
	left, refused := e.tools.SwapGuarded(func(t *toolbox.Tool) bool { return old[t] }, add, e.nameGuard)
	for _, err := range refused {
		e.log.Logf(logging.Warn, "mcp server %s: %v", server, err)
	}
	registered := add[:0:0]
	for _, t := range add {
		if now, ok := e.tools.Lookup(t.Name); ok && now == t {
			registered = append(registered, t)
		}
	}
	e.remote.tools[server] = registered
	e.log.Logf(logging.Info, "mcp server %s: %d tools", server, len(registered))
	return left
}
