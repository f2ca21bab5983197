package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/secrets"
	"github.com/clara-lib/clara/core/telemetry"
	"github.com/clara-lib/clara/core/toolbox"
)

// DefaultInitTimeout bounds a remote server's start and initialize.
const DefaultInitTimeout = 10 * time.Second

// Defaults of what a server's tool list may bring (ServerConfig): a server
// that listed 100,000 tools held 370 MB and filled every chat's catalog.
const (
	DefaultMaxTools            = 256
	DefaultMaxDescriptionBytes = 8 << 10
	DefaultMaxSchemaBytes      = 64 << 10
)

// ServerConfig is one [[mcp_servers]] entry: a command spoken to over
// stdio, or the URL of a Streamable HTTP endpoint.
type ServerConfig struct {
	Name string // names the server in logs and errors, and the default prefix

	Command string   // stdio: the program (looked up in PATH) ...
	Args    []string // ... and its arguments
	Dir     string   // ... and the folder it runs in ("": this process's)
	// EnvFrom gives the child variables whose values are read from this
	// process's environment when the server starts: {"API_KEY": "MY_KEY"}
	// sets API_KEY to $MY_KEY. The values never reach a log or an error.
	// Besides them the child inherits only HOME, LOGNAME, PATH, SHELL,
	// TERM and USER.
	EnvFrom map[string]string

	URL string // Streamable HTTP endpoint, http or https
	// HeadersEnv gives a URL server's requests headers whose values are
	// read from the environment at each connection: {"Authorization":
	// "SEARCH_TOKEN"} sends Authorization: $SEARCH_TOKEN. They go only to
	// the URL's own host (not where a redirect leads), and the values never
	// reach a log or an error.
	HeadersEnv map[string]string
	// OAuth, for a URL server, authorizes Clara with the authorization
	// code flow and a client registered beforehand (oauth.go).
	OAuth *OAuthConfig

	Allow []string // remote tool names to keep; empty keeps all
	Deny  []string // remote tool names to drop (deny wins)
	// Prefix goes before each remote name to make its Clara name; nil
	// means Name + "__". An empty prefix is allowed.
	Prefix *string

	Eager       bool           // Start connects it; otherwise the first listing or call does
	InitTimeout time.Duration  // start + initialize; 0 means DefaultInitTimeout
	Limits      toolbox.Limits // the limits of every tool of this server

	// What a server's list may bring (0: the defaults below): the first
	// MaxTools tools (after allow and deny) are kept, the rest left out
	// with a warning, and the listing stops there; a description or title
	// longer than MaxDescriptionBytes is cut there; a tool whose input or
	// output schema is longer than MaxSchemaBytes is left out.
	MaxTools            int
	MaxDescriptionBytes int
	MaxSchemaBytes      int

	// dial replaces the transport (tests use the SDK's in-memory one).
	dial func(ctx context.Context) (sdk.Transport, error)
}

// ToolSpec is a remote tool ready to become a Clara tool:
// toolbox.NewTool(spec.Descriptor, toolbox.ToolOptions{Run: spec.Run}).
type ToolSpec struct {
	Server     string // the configured server's Name
	RemoteName string // the tool's name on that server
	// Descriptor has the Clara name (prefix + remote name), the server's
	// description and input schema, capability network (exec for stdio
	// servers), the server's limits, returns "json" when the tool declares
	// an output schema (the result is its structuredContent) and "string"
	// otherwise (the text of its content), and llm_visible.
	Descriptor   toolbox.Descriptor
	Title        string          // the remote tool's title, if any
	OutputSchema json.RawMessage // the remote tool's output schema, if any
	Idempotent   bool            // the remote tool's idempotentHint
	// Run calls the remote tool: connecting (or waiting for a restart) if
	// needed, cancelling the remote call when ctx ends. A remote isError is
	// tool_failed with the tool's text as message.
	Run toolbox.Func `json:"-"`
}

// Info is the ToolInfo of a remote tool, for serving it on over MCP.
func (t *ToolSpec) Info() ToolInfo {
	info := InfoFromDescriptor(&t.Descriptor)
	info.Title, info.OutputSchema, info.Idempotent = t.Title, t.OutputSchema, t.Idempotent
	return info
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	Logger *logging.Logger
	// HTTPClient carries the requests to URL servers: pass one on the
	// engine's outbound path (llm.Transport), so that its host allowlist
	// and response cap apply. When its Transport tells its cap
	// (MaxResponseBytes, as llm.Transport does), the SDK is told too: an
	// event of a server's stream past it fails the connection, saying so.
	// It must not set Timeout (the server's event stream is a long
	// request); nil is http.DefaultClient. Close closes its idle
	// connections.
	HTTPClient *http.Client
	// Redactor learns the values of env_from and headers_env as they are
	// read, and cuts every secret it knows out of what a server sends back:
	// results, errors, tool lists, stderr. The engine's knows every secret
	// Clara holds; nil gives the Manager one of its own.
	Redactor *secrets.Redactor
	// OnToolsChanged receives a server's tools whenever its list changes
	// (first listing included, and after a restart or a list_changed that
	// changed something). It runs on one goroutine of the Manager, one call
	// at a time, in order; it may call Tools, never Close.
	OnToolsChanged func(server string, tools []ToolSpec)
	// OnCatalogChanged hears that a server's resources or prompts
	// (Catalog) changed. It runs on a goroutine of the Manager and must
	// return at once.
	OnCatalogChanged func(server string)
	// Getenv reads the values of env_from and headers_env, at each
	// connection (an empty value counts as unset); nil reads the process's
	// environment with os.LookupEnv.
	Getenv        func(string) string
	ClientName    string // what initialize reports; "clara" by default
	ClientVersion string
	// Telemetry, when on, gets a client span per request to a server,
	// whose trace context travels in the request's _meta (observe.go).
	Telemetry *telemetry.T
	// Ask, when set, answers a server's questions (elicitation, form
	// mode; the client then declares the capability): it asks the person
	// behind the Clara call that called the tool the question came with,
	// ctx and session being that call's, and returns the action (accept,
	// decline, cancel) and, on accept, the form's object.
	Ask func(ctx context.Context, session, message string, schema json.RawMessage) (action string, content json.RawMessage, err error)
}

// Manager owns the connections to the configured MCP servers. Its methods
// are safe for concurrent use.
type Manager struct {
	opts    ManagerOptions
	red     *secrets.Redactor
	log     *logging.Logger
	client  *sdk.Implementation
	remotes map[string]*remote
	order   []string

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	qmu     sync.Mutex
	pending map[string][]ToolSpec // the lists not yet delivered, the latest per server
	queue   []string
	wake    chan struct{}

	closeOnce sync.Once
}

var (
	serverNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	prefixPattern     = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,63}$`)
	envNamePattern    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerNamePattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// NewManager checks the configurations and returns a Manager that has
// connected to nothing yet.
func NewManager(configs []ServerConfig, opts ManagerOptions) (*Manager, error) {
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.ClientName == "" {
		opts.ClientName = "clara"
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "0"
	}
	if opts.Redactor == nil {
		opts.Redactor = secrets.New()
	}
	m := &Manager{
		opts:    opts,
		red:     opts.Redactor,
		log:     opts.Logger,
		client:  &sdk.Implementation{Name: opts.ClientName, Version: opts.ClientVersion},
		remotes: map[string]*remote{},
		pending: map[string][]ToolSpec{},
		wake:    make(chan struct{}, 1),
	}
	var problems []error
	for i := range configs {
		c := configs[i]
		if err := checkConfig(&c); err != nil {
			problems = append(problems, err)
			continue
		}
		if m.remotes[c.Name] != nil {
			problems = append(problems, fmt.Errorf("mcp_servers: %q is configured twice", c.Name))
			continue
		}
		m.remotes[c.Name] = newRemote(m, c)
		m.order = append(m.order, c.Name)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.deliver()
	return m, nil
}

func checkConfig(c *ServerConfig) error {
	if !serverNamePattern.MatchString(c.Name) {
		return fmt.Errorf("mcp_servers: invalid name %q: use 1 to 64 letters, digits, '_' or '-'", c.Name)
	}
	where := fmt.Sprintf("mcp_servers %q", c.Name)
	switch {
	case c.dial != nil:
	case c.Command != "" && c.URL != "":
		return fmt.Errorf("%s: give command or url, not both", where)
	case c.Command == "" && c.URL == "":
		return fmt.Errorf("%s: give command (stdio) or url (Streamable HTTP)", where)
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: url must be an http or https URL, not %q", where, c.URL)
		}
		if len(c.EnvFrom) > 0 {
			return fmt.Errorf("%s: env_from is for command servers", where)
		}
	}
	if len(c.HeadersEnv) > 0 && c.URL == "" {
		return fmt.Errorf("%s: headers_env is for url servers", where)
	}
	if o := c.OAuth; o != nil {
		if c.URL == "" {
			return fmt.Errorf("%s: oauth is for url servers", where)
		}
		if !envNamePattern.MatchString(o.ClientIDEnv) || (o.ClientSecretEnv != "" && !envNamePattern.MatchString(o.ClientSecretEnv)) {
			return fmt.Errorf("%s: oauth: client_id_env and client_secret_env name environment variables", where)
		}
		if o.ClientCredentials && o.ClientSecretEnv == "" {
			return fmt.Errorf("%s: oauth: the client_credentials grant needs client_secret_env", where)
		}
		if u, err := url.Parse(o.RedirectURL); !o.ClientCredentials && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return fmt.Errorf("%s: oauth: redirect_url must be an http or https URL, not %q", where, o.RedirectURL)
		}
	}
	for header, source := range c.HeadersEnv {
		if !headerNamePattern.MatchString(header) || !envNamePattern.MatchString(source) {
			return fmt.Errorf("%s: headers_env: %q = %q is not a header name and an environment variable name", where, header, source)
		}
	}
	for child, source := range c.EnvFrom {
		if !envNamePattern.MatchString(child) || !envNamePattern.MatchString(source) {
			return fmt.Errorf("%s: env_from: %q = %q is not a pair of environment variable names", where, child, source)
		}
	}
	if c.Prefix == nil {
		p := c.Name + "__"
		c.Prefix = &p
	}
	if !prefixPattern.MatchString(*c.Prefix) {
		return fmt.Errorf("%s: invalid prefix %q: use up to 63 letters, digits, '_' or '-'", where, *c.Prefix)
	}
	if c.InitTimeout < 0 {
		return fmt.Errorf("%s: init timeout must not be negative", where)
	}
	if c.InitTimeout == 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	for _, v := range []struct {
		n   *int
		def int
		key string
	}{{&c.MaxTools, DefaultMaxTools, "max_tools"}, {&c.MaxDescriptionBytes, DefaultMaxDescriptionBytes, "max_description_bytes"},
		{&c.MaxSchemaBytes, DefaultMaxSchemaBytes, "max_schema_bytes"}} {
		switch {
		case *v.n < 0:
			return fmt.Errorf("%s: %s must not be negative", where, v.key)
		case *v.n == 0:
			*v.n = v.def
		}
	}
	// The limits are checked as a descriptor would be.
	if _, err := toolbox.NewTool(toolbox.Descriptor{Name: c.Name, Limits: c.Limits},
		toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return nil, nil }}); err != nil {
		return fmt.Errorf("%s: %s", where, strings.TrimPrefix(err.Error(), fmt.Sprintf("tool %q: ", c.Name)))
	}
	c.Args = append([]string(nil), c.Args...)
	c.Allow = append([]string(nil), c.Allow...)
	c.Deny = append([]string(nil), c.Deny...)
	env := make(map[string]string, len(c.EnvFrom))
	for k, v := range c.EnvFrom {
		env[k] = v
	}
	c.EnvFrom = env
	headers := make(map[string]string, len(c.HeadersEnv))
	for k, v := range c.HeadersEnv {
		headers[k] = v
	}
	c.HeadersEnv = headers
	return nil
}

// lookupEnv reads a variable through ManagerOptions.Getenv; the value is
// a secret from then on.
func (m *Manager) lookupEnv(name string) (string, bool) {
	var v string
	var ok bool
	if m.opts.Getenv == nil {
		v, ok = os.LookupEnv(name)
	} else {
		v = m.opts.Getenv(name)
		ok = v != ""
	}
	m.red.Add(v)
	return v, ok
}

// maxEventSize is the cap of the HTTP client's transport, if it tells it
// (0: the SDK's default).
func (m *Manager) maxEventSize() int {
	if c, ok := m.opts.HTTPClient.Transport.(interface{ MaxResponseBytes() int64 }); ok {
		return int(min(c.MaxResponseBytes(), 1<<30))
	}
	return 0
}

// Servers lists the configured servers' names, in configuration order.
func (m *Manager) Servers() []string { return append([]string(nil), m.order...) }

// Start connects the eager servers (concurrently, each within its
// InitTimeout) and lists their tools; the error names every server that
// failed. The others keep their connections.
func (m *Manager) Start(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, name := range m.order {
		if !m.remotes[name].cfg.Eager {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					logPanic(m.log, "starting mcp server "+name, r)
				}
			}()
			if _, err := m.Tools(ctx, name); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// Tools returns a server's tools, connecting it first if it is not
// connected (within its InitTimeout).
func (m *Manager) Tools(ctx context.Context, server string) ([]ToolSpec, error) {
	r := m.remotes[server]
	if r == nil {
		return nil, fmt.Errorf("mcp: no server %q is configured", server)
	}
	tools, err := r.toolList(ctx)
	if err != nil {
		return nil, errors.New(m.red.String(err.Error()))
	}
	return m.redactSpecs(tools), nil
}

// Close shuts every server down (a stdio server's stdin is closed, then it
// is sent SIGTERM, then SIGKILL, and what it started in its process group
// is killed) and returns once the Manager's goroutines are gone.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.cancel()
		var wg sync.WaitGroup
		for _, r := range m.remotes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if v := recover(); v != nil {
						logPanic(m.log, fmt.Sprintf("closing mcp server %q", r.cfg.Name), v)
					}
				}()
				r.shutdown()
			}()
		}
		wg.Wait()
		m.wg.Wait()
		if m.opts.HTTPClient != http.DefaultClient {
			m.opts.HTTPClient.CloseIdleConnections()
		}
	})
	return nil
}

// publish queues a server's new tool list for OnToolsChanged.
func (m *Manager) publish(server string, tools []ToolSpec) {
	if m.opts.OnToolsChanged == nil {
		return
	}
	tools = m.redactSpecs(tools)
	m.qmu.Lock()
	if _, queued := m.pending[server]; !queued {
		m.queue = append(m.queue, server)
	}
	m.pending[server] = tools
	m.qmu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// redactSpecs cuts every secret out of what a server says of its tools
// (descriptions, titles, schemas); a tool whose name holds one is left out.
// The slice is copied only when something changes.
func (m *Manager) redactSpecs(tools []ToolSpec) []ToolSpec {
	var out []ToolSpec
	for i := range tools {
		t := tools[i]
		t.Descriptor.Description = m.red.String(t.Descriptor.Description)
		t.Title = m.red.String(t.Title)
		t.Descriptor.InputSchema = m.red.JSON(t.Descriptor.InputSchema)
		t.OutputSchema = m.red.JSON(t.OutputSchema)
		leftOut := m.red.String(t.Descriptor.Name) != t.Descriptor.Name
		changed := leftOut || t.Descriptor.Description != tools[i].Descriptor.Description || t.Title != tools[i].Title ||
			!sameBytes(t.Descriptor.InputSchema, tools[i].Descriptor.InputSchema) || !sameBytes(t.OutputSchema, tools[i].OutputSchema)
		if changed && out == nil {
			out = append(make([]ToolSpec, 0, len(tools)), tools[:i]...)
		}
		if leftOut {
			logf(m.log, logging.Warn, "mcp server %q: a tool whose name holds a secret is left out", t.Server)
			continue
		}
		if out != nil {
			out = append(out, t)
		}
	}
	if out == nil {
		return tools
	}
	return out
}

// sameBytes: the same slice (a redaction that found nothing returns its input).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// deliver runs OnToolsChanged, one list at a time.
func (m *Manager) deliver() {
	defer m.wg.Done()
	// The callback has its own recover below; this one guards the loop
	// itself, so that nothing here can take the host process down.
	defer func() {
		if r := recover(); r != nil {
			logPanic(m.log, "delivering tools/list_changed", r)
		}
	}()
	for {
		m.qmu.Lock()
		if len(m.queue) == 0 {
			m.qmu.Unlock()
			select {
			case <-m.ctx.Done():
				return
			case <-m.wake:
			}
			continue
		}
		server := m.queue[0]
		m.queue = m.queue[1:]
		tools := m.pending[server]
		delete(m.pending, server)
		m.qmu.Unlock()
		if m.ctx.Err() != nil {
			return
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					logPanic(m.log, "OnToolsChanged", r)
				}
			}()
			m.opts.OnToolsChanged(server, tools)
		}()
	}
}
