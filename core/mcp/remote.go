package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/secrets"
	"github.com/clara-lib/clara/core/toolbox"
)

// Restart backoff: the first restart after a crash waits backoffBase, each
// failure in a row doubles it up to backoffMax; a connection that stayed
// up stableAfter starts the count again.
const (
	backoffBase = 250 * time.Millisecond
	backoffMax  = 30 * time.Second
	stableAfter = 30 * time.Second
)

// inheritedEnv is what a stdio server gets of Clara's environment besides
// env_from: what a program needs to run (the TypeScript SDK's list).
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

var errManagerClosed = errors.New("the MCP client manager is closed")

// remote is one configured server: its connection, restarted after a crash,
// and its tool list.
type remote struct {
	m      *Manager
	cfg    ServerConfig
	client *sdk.Client
	allow  map[string]bool
	deny   map[string]bool

	mu       sync.Mutex
	live     *conn    // the connection in use, nil when none
	attempt  *attempt // the connection being made (or scheduled), nil when none
	lastErr  error    // why the last attempt failed or the last connection ended
	retryAt  time.Time
	failures int // in a row, for the backoff
	closed   bool
	tools    []ToolSpec // the published list ...
	listedOn *conn      // ... and the connection it was listed on
	toolsKey string

	refreshMu sync.Mutex // one listing at a time
	// refreshWaiting: a listing of refreshAsync's waits for its turn. It
	// will see whatever changed until it starts, so a list_changed meanwhile
	// starts no other: a server sending them without end holds at most one
	// listing running and one waiting, not a goroutine for each.
	refreshWaiting bool

	callsMu  sync.Mutex
	inflight map[*inflightCall]struct{} // the tool calls waiting for the server

	oauthState // a URL server's OAuth, when it has an oauth table

	catalog    *remoteCatalog // resources and prompts, as last listed (r.mu)
	catalogKey string
}

// inflightCall is a Clara call of one of the server's tools, for the
// server's questions during it.
type inflightCall struct {
	ctx     context.Context
	session string
}

type inflightKey struct{}

// elicit answers a server's question: it goes to the person behind the
// Clara call the question came with. Under 2026-07-28 the SDK fulfils the
// question in that call's own context; under 2025-11-25 the question comes
// on its own, and is the call's when one call alone waits for the server
// (with several, Clara cannot tell whose it is, and declines).
func (r *remote) elicit(ctx context.Context, req *sdk.ElicitRequest) (res *sdk.ElicitResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			logPanic(r.m.log, fmt.Sprintf("mcp server %q: a question", r.cfg.Name), v)
			res, err = nil, fmt.Errorf("internal error")
		}
	}()
	call, _ := ctx.Value(inflightKey{}).(*inflightCall)
	if call == nil {
		r.callsMu.Lock()
		if len(r.inflight) == 1 {
			for c := range r.inflight {
				call = c
			}
		}
		n := len(r.inflight)
		r.callsMu.Unlock()
		if call == nil {
			logf(r.m.log, logging.Warn, "mcp server %q asked a question while %d of its tools' calls were waiting for it: whose it is cannot be told, declined", r.cfg.Name, n)
			return &sdk.ElicitResult{Action: ActionDecline}, nil
		}
	}
	if req.Params.Mode != "" && req.Params.Mode != "form" {
		return &sdk.ElicitResult{Action: ActionDecline}, nil // url mode: Clara opens no browser
	}
	var schema json.RawMessage
	if req.Params.RequestedSchema != nil {
		if schema, err = json.Marshal(req.Params.RequestedSchema); err != nil {
			return nil, err
		}
	}
	action, content, err := r.m.opts.Ask(call.ctx, call.session, r.m.red.String(req.Params.Message), schema)
	if err != nil {
		return nil, err
	}
	res = &sdk.ElicitResult{Action: action}
	if action == ActionAccept && len(content) > 0 && content[0] == '{' {
		var m map[string]any
		if err := json.Unmarshal(content, &m); err != nil {
			return nil, err
		}
		res.Content = m
	}
	return res, nil
}

// conn is one live connection (and, for stdio, its process).
type conn struct {
	cs     *sdk.ClientSession
	proc   *process // nil for URL servers
	since  time.Time
	stderr *stderrTail
}

// attempt is one connection being made; done is closed when it ends.
type attempt struct {
	done chan struct{}
	at   time.Time // when it dials: a restart waits out its backoff first
	c    *conn
	err  error
}

func newRemote(m *Manager, cfg ServerConfig) *remote {
	r := &remote{m: m, cfg: cfg, allow: set(cfg.Allow), deny: set(cfg.Deny), inflight: map[*inflightCall]struct{}{}}
	opts := &sdk.ClientOptions{
		Logger: newSlog(m.log),
		// No roots or sampling; elicitation when the owner can ask
		// someone (ManagerOptions.Ask).
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: r.listChanged,
		ResourceListChangedHandler: func(_ context.Context, req *sdk.ResourceListChangedRequest) {
			r.catalogChanged(req.Session)
		},
		PromptListChangedHandler: func(_ context.Context, req *sdk.PromptListChangedRequest) {
			r.catalogChanged(req.Session)
		},
	}
	if m.opts.Ask != nil {
		opts.ElicitationHandler = r.elicit
		opts.Capabilities = &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}}
	}
	r.client = sdk.NewClient(m.client, opts)
	r.client.AddReceivingMiddleware(r.recoverMiddleware)
	r.client.AddSendingMiddleware(r.telemetryMiddleware)
	return r
}

func set(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (r *remote) recoverMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
		defer func() {
			if v := recover(); v != nil {
				logPanic(r.m.log, fmt.Sprintf("mcp server %q: %s", r.cfg.Name, method), v)
				res, err = nil, fmt.Errorf("internal error")
			}
		}()
		return next(ctx, method, req)
	}
}

// session returns the live connection, connecting (or waiting for the
// restart under way) when there is none. Right after a failed attempt, and
// until its backoff has passed, it fails at once with the attempt's error.
func (r *remote) session(ctx context.Context) (*conn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errManagerClosed
	}
	if r.live != nil {
		c := r.live
		r.mu.Unlock()
		return c, nil
	}
	if r.attempt == nil {
		if wait := time.Until(r.retryAt); r.lastErr != nil && wait > 0 {
			err := fmt.Errorf("%w (next attempt in %s)", r.lastErr, wait.Round(time.Millisecond))
			r.mu.Unlock()
			return nil, err
		}
		r.startAttemptLocked(0)
	}
	a := r.attempt
	// A restart still in its backoff past the caller's deadline: say so now,
	// rather than let the call run into its deadline waiting for it.
	if deadline, ok := ctx.Deadline(); ok && r.lastErr != nil && a.at.After(deadline) {
		err := fmt.Errorf("%w; it restarts in %s, after this call's deadline", r.lastErr, time.Until(a.at).Round(time.Millisecond))
		r.mu.Unlock()
		return nil, err
	}
	r.mu.Unlock()
	select {
	case <-a.done:
		return a.c, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *remote) startAttemptLocked(delay time.Duration) {
	a := &attempt{done: make(chan struct{}), at: time.Now().Add(delay)}
	r.attempt = a
	r.m.wg.Add(1)
	go r.connect(a, delay)
}

func backoff(failures int) time.Duration {
	d := backoffBase
	for i := 1; i < failures && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// connect makes one connection after delay. A failure after the server has
// once been up (a crash that does not come back) schedules the next
// attempt; a failure of a first start waits for the next use.
func (r *remote) connect(a *attempt, delay time.Duration) {
	defer r.m.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			logPanic(r.m.log, fmt.Sprintf("connecting to mcp server %q", r.cfg.Name), v)
			r.mu.Lock()
			if r.attempt == a {
				r.attempt = nil
			}
			r.lastErr = fmt.Errorf("mcp server %q: internal error while connecting", r.cfg.Name)
			r.retryAt = time.Now().Add(backoff(r.failures + 1))
			a.err = r.lastErr
			r.mu.Unlock()
			close(a.done)
		}
	}()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.m.ctx.Done():
			t.Stop()
		}
	}
	var c *conn
	var err error
	if r.m.ctx.Err() != nil {
		err = errManagerClosed
	} else {
		c, err = r.dial()
	}

	r.mu.Lock()
	r.attempt = nil
	if r.closed && err == nil {
		err = errManagerClosed
		r.mu.Unlock()
		c.close()
		r.mu.Lock()
	}
	if err != nil {
		a.err = err
		if !r.closed {
			r.failures++
			r.lastErr = err
			d := backoff(r.failures)
			r.retryAt = time.Now().Add(d)
			if r.listedOn != nil { // it was up before: keep trying
				logf(r.m.log, logging.Warn, "%v; trying again in %s", err, d)
				r.startAttemptLocked(d)
			} else {
				logf(r.m.log, logging.Warn, "%v", err)
			}
		}
		r.mu.Unlock()
		close(a.done)
		return
	}
	r.live, r.lastErr, r.retryAt = c, nil, time.Time{}
	a.c = c
	r.m.wg.Add(1)
	go r.watch(c)
	restarted := r.listedOn != nil
	r.mu.Unlock()
	close(a.done)
	logf(r.m.log, logging.Info, "mcp server %q connected", r.cfg.Name)
	if restarted {
		// The tools may differ after a restart: list them again (the owner
		// hears of it only if they changed).
		r.refreshAsync(c)
	}
}

// dial starts the server (stdio) or opens the session (URL) and runs the
// handshake within InitTimeout: 2026-07-28's server/discover first, and,
// when the server does not take it (an older server that answers it with
// something else than the refusal the SDK falls back on), 2025-11-25's
// initialize on a new connection.
func (r *remote) dial() (*conn, error) {
	ctx, cancel := context.WithTimeout(r.m.ctx, r.cfg.InitTimeout)
	defer cancel()
	c, err := r.dialVersion(ctx, ProtocolVersion)
	var ns noStart
	if err != nil && ctx.Err() == nil && r.m.ctx.Err() == nil && !errors.As(err, &ns) {
		logf(r.m.log, logging.Debug, "mcp server %q: %v; trying %s's handshake", r.cfg.Name, err, LegacyProtocolVersion)
		c, err = r.dialVersion(ctx, LegacyProtocolVersion)
	}
	return c, err
}

// noStart marks a server that could not even start (its message as it
// is): no other revision is tried.
type noStart struct{ error }

func (e noStart) Unwrap() error { return e.error }

func (r *remote) dialVersion(ctx context.Context, version string) (*conn, error) {
	c := &conn{}
	var t sdk.Transport
	switch {
	case r.cfg.dial != nil:
		var err error
		if t, err = r.cfg.dial(ctx); err != nil {
			return nil, noStart{fmt.Errorf("mcp server %q: %v", r.cfg.Name, err)}
		}
	case r.cfg.URL != "":
		client, err := r.httpClient()
		if err != nil {
			return nil, noStart{err}
		}
		st := &sdk.StreamableClientTransport{Endpoint: r.cfg.URL, HTTPClient: client, MaxEventSize: r.m.maxEventSize()}
		if r.cfg.OAuth != nil {
			h, err := r.oauthHandler()
			if err != nil {
				return nil, noStart{err}
			}
			st.OAuthHandler = h
		}
		t = st
	default:
		env, err := r.environment()
		if err != nil {
			return nil, noStart{err}
		}
		cmd := exec.Command(r.cfg.Command, r.cfg.Args...)
		cmd.Env = env
		c.stderr = newStderrTail(r.m.log, r.cfg.Name, r.m.red)
		cmd.Stderr = c.stderr
		c.proc = newProcess(cmd)
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	cs, err := r.client.Connect(ctx, t, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		c.proc.kill() // Connect closed the session; this ends what the server started
		switch {
		case r.m.ctx.Err() != nil:
			return nil, errManagerClosed
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, fmt.Errorf("mcp server %q did not answer initialize within %s%s", r.cfg.Name, r.cfg.InitTimeout, c.stderr.String())
		}
		var ee *exec.Error
		if errors.As(err, &ee) {
			return nil, noStart{fmt.Errorf("mcp server %q: %s%s", r.cfg.Name, startError(err), c.stderr.String())}
		}
		return nil, fmt.Errorf("mcp server %q: %s%s", r.cfg.Name, startError(err), c.stderr.String())
	}
	c.cs, c.since = cs, time.Now()
	return c, nil
}

// startError says why a server did not start, without the SDK's wrapping
// where the cause is plain.
func startError(err error) string {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return fmt.Sprintf("cannot start %q: %v", ee.Name, ee.Err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		return fmt.Sprintf("cannot start %q: %v", pe.Path, pe.Err)
	}
	if errors.Is(err, sdk.ErrConnectionClosed) || strings.Contains(err.Error(), "EOF") {
		return "the server closed the connection during initialize: " + err.Error()
	}
	return err.Error()
}

// environment is the child's environment; lookupEnv makes the env_from
// values secrets.
func (r *remote) environment() (env []string, err error) {
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(r.cfg.EnvFrom))
	for k := range r.cfg.EnvFrom {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, child := range keys {
		source := r.cfg.EnvFrom[child]
		v, ok := r.m.lookupEnv(source)
		if !ok {
			return nil, fmt.Errorf("mcp server %q: env_from: %s is not set (it gives %s)", r.cfg.Name, source, child)
		}
		env = append(env, child+"="+v)
	}
	return env, nil
}

// httpClient is the Manager's client, with the server's headers_env read
// now when it has some.
func (r *remote) httpClient() (*http.Client, error) {
	base := r.m.opts.HTTPClient
	if len(r.cfg.HeadersEnv) == 0 {
		return base, nil
	}
	h := http.Header{}
	for header, source := range r.cfg.HeadersEnv {
		v, ok := r.m.lookupEnv(source)
		if !ok {
			return nil, fmt.Errorf("mcp server %q: headers_env: %s is not set (it gives the %s header)", r.cfg.Name, source, header)
		}
		h.Set(header, v)
	}
	u, err := url.Parse(r.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: %v", r.cfg.Name, err)
	}
	c := *base // keeps its redirect policy (the host allowlist) and jar
	c.Transport = &headerTransport{base: base.Transport, host: u.Host, header: h}
	return &c, nil
}

// headerTransport adds headers to the requests that go to one host: a
// redirect elsewhere must not carry a server's credentials.
type headerTransport struct {
	base   http.RoundTripper // nil: http.DefaultTransport
	host   string
	header http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.URL.Host != t.host {
		return base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not change its request
	for k, v := range t.header {
		req.Header[k] = v
	}
	return base.RoundTrip(req)
}

// watch waits for a connection to end. Unless the Manager closed it, the
// server crashed or went away: it is restarted after the backoff.
func (r *remote) watch(c *conn) {
	defer r.m.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			logPanic(r.m.log, fmt.Sprintf("watching mcp server %q", r.cfg.Name), v)
		}
	}()
	err := c.cs.Wait()
	c.close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live != c || r.closed {
		return
	}
	why := "it exited"
	if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
		why = err.Error()
	}
	r.lostLocked(c, fmt.Errorf("mcp server %q stopped: %s%s", r.cfg.Name, why, c.stderr.String()))
}

// lostLocked makes live connection c no longer the live one, for why, and
// schedules the restart after the backoff (r.mu held).
func (r *remote) lostLocked(c *conn, why error) {
	r.live = nil
	if time.Since(c.since) > stableAfter {
		r.failures = 0
	}
	r.failures++
	d := backoff(r.failures)
	r.lastErr = why
	r.retryAt = time.Now().Add(d)
	logf(r.m.log, logging.Warn, "%v; restarting in %s", r.lastErr, d)
	if r.attempt == nil {
		r.startAttemptLocked(d)
	}
}

// close ends a connection: the session, then what is left of the process
// group.
func (c *conn) close() {
	if c == nil {
		return
	}
	if c.cs != nil {
		_ = c.cs.Close()
	}
	c.proc.kill()
}

func (r *remote) shutdown() {
	r.mu.Lock()
	r.closed = true
	c := r.live
	r.live = nil
	r.mu.Unlock()
	c.close()
}

// listChanged is the server's notifications/tools/list_changed. It runs on
// the connection's reading goroutine, so the listing goes elsewhere.
func (r *remote) listChanged(_ context.Context, req *sdk.ToolListChangedRequest) {
	r.mu.Lock()
	c := r.live
	r.mu.Unlock()
	if c != nil && c.cs == req.Session {
		r.refreshAsync(c)
	}
}

func (r *remote) refreshAsync(c *conn) {
	// Close sets closed before it waits for the goroutines: none starts after.
	r.mu.Lock()
	if r.closed || r.refreshWaiting {
		r.mu.Unlock()
		return
	}
	r.refreshWaiting = true
	r.m.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.m.wg.Done()
		defer func() {
			if v := recover(); v != nil {
				logPanic(r.m.log, fmt.Sprintf("listing the tools of mcp server %q", r.cfg.Name), v)
			}
		}()
		// Its turn: from now on a list_changed may come after the listing
		// has begun, and needs one of its own.
		r.refreshMu.Lock()
		r.mu.Lock()
		r.refreshWaiting = false
		r.mu.Unlock()
		r.refreshMu.Unlock()
		ctx, cancel := context.WithTimeout(r.m.ctx, r.cfg.InitTimeout)
		defer cancel()
		if _, err := r.refresh(ctx, c); err != nil && r.m.ctx.Err() == nil {
			logf(r.m.log, logging.Warn, "%v", err)
		}
	}()
}

// toolList returns the tools, connecting and listing when needed.
func (r *remote) toolList(ctx context.Context) ([]ToolSpec, error) {
	c, err := r.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("mcp server %q: %w", r.cfg.Name, ctx.Err())
		}
		return nil, err
	}
	r.mu.Lock()
	if r.listedOn == c {
		tools := r.tools
		r.mu.Unlock()
		return tools, nil
	}
	r.mu.Unlock()
	return r.refresh(ctx, c)
}

// refresh lists the tools on c and publishes them if they changed.
func (r *remote) refresh(ctx context.Context, c *conn) ([]ToolSpec, error) {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	// Only what allow and deny keep is kept, and no more than MaxTools:
	// the listing stops there (the SDK fetches no further page).
	var listed []*sdk.Tool
	more := false
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: listing tools: %v", r.cfg.Name, err)
		}
		if t == nil || (r.allow != nil && !r.allow[t.Name]) || r.deny[t.Name] {
			continue
		}
		if len(listed) == r.cfg.MaxTools {
			more = true
			break
		}
		listed = append(listed, t)
	}
	if more {
		logf(r.m.log, logging.Warn, "mcp server %q lists more than %d tools (its max_tools): the first %d are kept, the rest left out; tools = { allow = [...] } chooses them",
			r.cfg.Name, r.cfg.MaxTools, r.cfg.MaxTools)
	}
	tools := r.specs(listed)
	key, err := json.Marshal(tools) // Run is not marshalled: the key is the descriptors
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: %v", r.cfg.Name, err)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errManagerClosed
	}
	changed := r.listedOn == nil || string(key) != r.toolsKey
	if !changed {
		tools = r.tools // keep the slice the owner has
	}
	r.tools, r.toolsKey, r.listedOn = tools, string(key), c
	r.mu.Unlock()
	r.refreshCatalog(ctx, c)
	if changed {
		r.m.publish(r.cfg.Name, tools)
	}
	return tools, nil
}

// specs turns the server's tools into ToolSpecs: filtered by allow and
// deny, prefixed, and checked as Clara descriptors (a tool whose name or
// schema Clara cannot take is left out, with a warning).
func (r *remote) specs(listed []*sdk.Tool) []ToolSpec {
	capability := toolbox.CapExec
	if r.cfg.URL != "" {
		capability = toolbox.CapNetwork
	}
	seen := map[string]bool{}
	var out []ToolSpec
	for _, t := range listed {
		if t == nil || (r.allow != nil && !r.allow[t.Name]) || r.deny[t.Name] || seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		name := *r.cfg.Prefix + t.Name
		if !toolbox.ValidName(name) {
			logf(r.m.log, logging.Warn, "mcp server %q: tool %q left out: %q is not a valid Clara tool name", r.cfg.Name, t.Name, name)
			continue
		}
		schema, err := remarshal(t.InputSchema)
		if err != nil {
			logf(r.m.log, logging.Warn, "mcp server %q: tool %q left out: input schema: %v", r.cfg.Name, t.Name, err)
			continue
		}
		output, err := remarshal(t.OutputSchema)
		if err != nil {
			output = nil
		}
		if n := max(len(schema), len(output)); n > r.cfg.MaxSchemaBytes {
			logf(r.m.log, logging.Warn, "mcp server %q: tool %q left out: its schema is %d bytes, over the %d of max_schema_bytes",
				r.cfg.Name, t.Name, n, r.cfg.MaxSchemaBytes)
			continue
		}
		description, title := t.Description, t.Title
		if t.Annotations != nil && title == "" {
			title = t.Annotations.Title
		}
		if len(description) > r.cfg.MaxDescriptionBytes || len(title) > r.cfg.MaxDescriptionBytes {
			logf(r.m.log, logging.Warn, "mcp server %q: tool %q: description of %d bytes cut to the %d of max_description_bytes",
				r.cfg.Name, t.Name, max(len(description), len(title)), r.cfg.MaxDescriptionBytes)
			description, title = cutUTF8(description, r.cfg.MaxDescriptionBytes), cutUTF8(title, r.cfg.MaxDescriptionBytes)
		}
		// JSON always: a result's structuredContent is its value whenever
		// the server sends one, with an output schema or not; a result of
		// text only is a JSON string.
		returns := toolbox.ReturnsJSON
		spec := ToolSpec{
			Server:     r.cfg.Name,
			RemoteName: t.Name,
			Descriptor: toolbox.Descriptor{
				Name:         name,
				Description:  description,
				InputSchema:  schema,
				Returns:      returns,
				Capabilities: []string{capability},
				Limits:       r.cfg.Limits,
				LLMVisible:   true,
			},
			Title:        title,
			OutputSchema: output,
			Run:          r.runner(t.Name, output != nil),
		}
		if a := t.Annotations; a != nil {
			// The server's hints are kept, but for those Clara's own
			// capabilities contradict (a stdio server's tool runs where
			// Clara started a program: never read-only for Clara's policy).
			spec.Idempotent = a.IdempotentHint
			spec.Descriptor.Idempotent = a.IdempotentHint
			declared := &toolbox.Annotations{Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint}
			if a.ReadOnlyHint {
				declared.ReadOnly = &a.ReadOnlyHint
			}
			if declared.Destructive != nil || declared.OpenWorld != nil || declared.ReadOnly != nil {
				spec.Descriptor.Annotations = declared
			}
			if _, err := toolbox.NewTool(spec.Descriptor, toolbox.ToolOptions{Run: spec.Run}); err != nil && spec.Descriptor.Annotations != nil {
				kept := *declared
				kept.ReadOnly = nil
				spec.Descriptor.Annotations = &kept
				if _, err := toolbox.NewTool(spec.Descriptor, toolbox.ToolOptions{Run: spec.Run}); err != nil {
					kept.OpenWorld = nil
				}
			}
		}
		// What the engine will do with it: refuse it here rather than there.
		if _, err := toolbox.NewTool(spec.Descriptor, toolbox.ToolOptions{Run: spec.Run}); err != nil {
			logf(r.m.log, logging.Warn, "mcp server %q: tool %q left out: %v", r.cfg.Name, t.Name, err)
			continue
		}
		out = append(out, spec)
	}
	return out
}

// cutUTF8 is s cut to at most n bytes, at a character's start.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// remarshal is a schema the client decoded (a map), as compact JSON.
func remarshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	return b, nil
}

// runner is the toolbox.Func of one remote tool. Every secret is cut out
// of what it returns: the server may echo a header, or its environment.
func (r *remote) runner(tool string, returnsJSON bool) toolbox.Func {
	run := r.run(tool, returnsJSON)
	return func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		out, err := run(ctx, call)
		var perr *protocol.Error
		if errors.As(err, &perr) {
			return nil, &protocol.Error{Code: perr.Code, Message: r.m.red.String(perr.Message), Details: r.m.red.JSON(perr.Details), Cause: perr.Cause}
		}
		if err != nil {
			return nil, err // the call's context ended
		}
		return r.m.red.JSON(out), nil
	}
}

func (r *remote) run(tool string, returnsJSON bool) toolbox.Func {
	return func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		start := time.Now()
		c, err := r.session(ctx)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				if why := r.restarting(); why != nil { // the deadline came while it started again
					return nil, &protocol.Error{Code: protocol.Timeout, Cause: ctx.Err(),
						Message: fmt.Sprintf("%v; it was starting again and was not back within this call's deadline", why)}
				}
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &protocol.Error{Code: protocol.ToolFailed, Message: err.Error(), Cause: err}
		}
		args := json.RawMessage(bytes.Clone(call.Arguments))
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage("{}")
		}
		in := &inflightCall{ctx: ctx, session: call.Session}
		r.callsMu.Lock()
		r.inflight[in] = struct{}{}
		r.callsMu.Unlock()
		res, err := c.cs.CallTool(context.WithValue(ctx, inflightKey{}, in), &sdk.CallToolParams{Name: tool, Arguments: args})
		r.callsMu.Lock()
		delete(r.inflight, in)
		r.callsMu.Unlock()
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.since.After(start) {
				return nil, &protocol.Error{Code: protocol.Timeout, Cause: ctx.Err(),
					Message: fmt.Sprintf("mcp server %q was starting again and did not answer within this call's deadline", r.cfg.Name)}
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			msg := fmt.Sprintf("mcp server %q: %s", r.cfg.Name, callError(err))
			if why := r.broken(c, err); why != nil {
				msg = why.Error()
			}
			return nil, &protocol.Error{Code: protocol.ToolFailed, Message: msg, Cause: err}
		}
		return claraResult(r.cfg.Name, tool, res, returnsJSON)
	}
}

// callError is the text of a failed call. The SDK's own cap on an event
// of the server's stream is the transport's (ManagerOptions.HTTPClient):
// say which key sets it.
func callError(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "SSE event exceeded") {
		msg += " (llm.max_response_bytes)"
	}
	return msg
}

// restarting is why the server is down while it starts again, nil when
// it is up or never was.
func (r *remote) restarting() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil && r.listedOn != nil {
		return r.lastErr
	}
	return nil
}

// errFrameTooLarge is the SDK's word for a message over its frame limit
// (it does not export the error).
const errFrameTooLarge = "frame exceeded the configured maximum line length"

// broken looks at a call's error on c: when it says the connection is
// gone (a message over the frame limit, the server's end of it closed),
// c stops being the live one at once and the restart is scheduled, so
// that the next call waits for the new connection instead of failing on
// the dying one ("client is closing"); the reason is returned. nil: the
// connection may still serve.
func (r *remote) broken(c *conn, err error) error {
	var why error
	switch {
	case strings.Contains(err.Error(), errFrameTooLarge):
		why = fmt.Errorf("mcp server %q sent a message of more than %d MiB, the most Clara reads, and its connection was closed",
			r.cfg.Name, sdk.DefaultMaxLineLength>>20)
	case errors.Is(err, sdk.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.ErrClosedPipe):
		why = fmt.Errorf("mcp server %q closed the connection during the call", r.cfg.Name)
	default:
		return nil
	}
	r.mu.Lock()
	if r.live != c || r.closed {
		// Already dropped: the first to see it said why.
		if r.lastErr != nil {
			why = r.lastErr
		}
		r.mu.Unlock()
		return fmt.Errorf("%w; it starts again", why)
	}
	r.lostLocked(c, why)
	r.m.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.m.wg.Done()
		defer func() {
			if v := recover(); v != nil {
				logPanic(r.m.log, fmt.Sprintf("closing mcp server %q", r.cfg.Name), v)
			}
		}()
		c.close()
	}()
	return fmt.Errorf("%w; it starts again", why)
}

// stderrTail logs a stdio server's stderr at debug level, a line at a
// time with every secret cut out, and keeps its last lines for the error
// that says why the server stopped. A line is redacted before it is cut
// to maxLineSize (cut first, a secret across the cut would keep its
// start); past the room to see a secret whole, the rest of a line is
// dropped.
type stderrTail struct {
	log    *logging.Logger
	server string
	red    *secrets.Redactor

	mu       sync.Mutex
	partial  []byte
	skipping bool // the rest of a line already cut
	lines    []string
}

const (
	tailLines   = 5
	maxLineSize = 512
)

func newStderrTail(log *logging.Logger, server string, red *secrets.Redactor) *stderrTail {
	return &stderrTail{log: log, server: server, red: red}
}

func (t *stderrTail) Write(p []byte) (int, error) {
	n := len(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !t.skipping {
				t.partial = append(t.partial, p...)
				// Room for a secret that starts at the cut, escaped.
				if len(t.partial) > maxLineSize+12*t.red.Len() {
					t.line(t.partial, true)
					t.partial, t.skipping = t.partial[:0], true
				}
			}
			break
		}
		if t.skipping {
			t.skipping = false
		} else {
			t.line(append(t.partial, p[:i]...), false)
		}
		t.partial = t.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

// line logs and keeps one line; cut says that it goes on.
func (t *stderrTail) line(b []byte, cut bool) {
	s := strings.ToValidUTF8(strings.TrimRight(string(b), "\r"), "?")
	if cut {
		s = t.red.Head(s) // nor the start of a secret the cut left
	} else {
		s = t.red.String(s)
	}
	if len(s) > maxLineSize || cut {
		end := min(len(s), maxLineSize)
		for end > 0 && end < len(s) && !utf8.RuneStart(s[end]) {
			end--
		}
		s = s[:end] + "…"
	}
	if strings.TrimSpace(s) == "" {
		return
	}
	logf(t.log, logging.Debug, "mcp server %q stderr: %s", t.server, s)
	t.lines = append(t.lines, s)
	if len(t.lines) > tailLines {
		t.lines = t.lines[1:]
	}
}

// String is the last lines, as the end of an error message ("" if none).
func (t *stderrTail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ends with: " + strings.Join(t.lines, " | ")
}
