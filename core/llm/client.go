package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/secrets"
	"github.com/clara-lib/clara/core/telemetry"
)

// Defaults of ClientOptions and Request fields left at zero.
const (
	DefaultMaxRetries       = 2
	DefaultMaxResponseBytes = 4 << 20
	// NoRetries, as a MaxRetries, makes one attempt only.
	NoRetries = -1
)

// Bounds of the retry schedule: the first wait, the largest computed one,
// and the longest Retry-After honoured (a longer one ends the call).
const (
	retryBase     = 250 * time.Millisecond
	retryCap      = 8 * time.Second
	retryAfterCap = 60 * time.Second
	// retryAfterMax is what a Retry-After past any sensible wait (1e300 ms)
	// reads as: more than retryAfterCap, and far from time.Duration's
	// overflow.
	retryAfterMax = 24 * time.Hour
)

// excerptBytes is the length of the body excerpt an HTTP failure quotes.
const excerptBytes = 200

// ClientOptions configure a Client. Zero values mean the defaults.
type ClientOptions struct {
	// AllowHosts is network.allow_hosts: when not nil, the only hosts
	// requests may reach (exact names, "*.example.com", addresses or CIDR
	// prefixes). An empty, non-nil list allows none.
	AllowHosts []string
	// ImplicitHosts, used when AllowHosts is nil, are the hosts the
	// configuration itself names: host names, or URLs whose host is taken
	// (llm.base_url, evaluator.url, each HTTP tool's url).
	ImplicitHosts []string
	// MaxRetries is how many times a request is retried after a 429, 502,
	// 503 or 504 answer or a dropped connection: DefaultMaxRetries when 0,
	// none when NoRetries.
	MaxRetries int
	// MaxResponseBytes caps a response body: DefaultMaxResponseBytes when 0.
	MaxResponseBytes int64
	// Getenv reads the environment variables secrets come from: os.Getenv
	// when nil.
	Getenv func(string) string
	// Logger receives retries and failures (never a secret); nil discards.
	Logger *logging.Logger
	// LookupAddrs resolves a host name when dialling: the system resolver
	// when nil. Tests use it to make a name resolve where they want.
	LookupAddrs func(ctx context.Context, host string) ([]netip.Addr, error)
	// Redactor learns every secret the Client reads and cuts the secrets it
	// knows out of answers, errors and excerpts: the engine's, which knows
	// every secret Clara holds. Read by NewClient only; nil gives the
	// Client one of its own.
	Redactor *secrets.Redactor
}

// clientSettings is one configuration of a Client, swapped whole.
type clientSettings struct {
	hosts      *hostList
	maxRetries int
	maxBytes   int64
	getenv     func(string) string
	log        *logging.Logger
	lookup     func(ctx context.Context, host string) ([]netip.Addr, error)
	gen        uint64
}

// Client makes every outbound HTTP request of Clara: model providers,
// the evaluator and HTTP tools. One Client keeps one pool of keep-alive
// connections for its whole life; Configure changes the allowlist and
// limits without dropping the pool (idle connections are closed, so every
// new request dials again under the new allowlist).
//
// A Client is safe for concurrent use.
type Client struct {
	http      *http.Client
	transport *http.Transport
	settings  atomic.Pointer[clientSettings]
	gen       atomic.Uint64
	redactor  *secrets.Redactor
	tel       atomic.Pointer[telemetry.T] // nil: none (observe.go)
}

// NewClient returns a Client configured with o.
func NewClient(o ClientOptions) (*Client, error) {
	c := &Client{redactor: o.Redactor}
	if c.redactor == nil {
		c.redactor = secrets.New()
	}
	c.transport = newHTTPTransport(c.settings.Load)
	c.http = &http.Client{
		Transport: c.transport,
		// A redirect is answered as it is (a non-2xx failure): following
		// it would send the secret headers to wherever it points.
		CheckRedirect: noRedirects,
	}
	if err := c.Configure(o); err != nil {
		return nil, err
	}
	return c, nil
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// newHTTPTransport is a pool of connections dialled under the allowlist
// settings returns at the time.
func newHTTPTransport(settings func() *clientSettings) *http.Transport {
	return &http.Transport{
		Proxy:                  nil, // a proxy would make the dial check see the proxy, not the host
		DialContext:            dialer{settings}.dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// Redactor is the Client's redactor (ClientOptions.Redactor).
func (c *Client) Redactor() *secrets.Redactor { return c.redactor }

// Configure replaces the allowlist and limits. On error the Client keeps
// its previous configuration.
func (c *Client) Configure(o ClientOptions) error {
	s, err := c.newSettings(o)
	if err != nil {
		return err
	}
	old := c.settings.Swap(s)
	if old != nil {
		c.transport.CloseIdleConnections()
	}
	return nil
}

// newSettings checks o and makes the settings it gives, with a new
// generation (a connection dialled under another generation is checked
// again before it is used).
func (c *Client) newSettings(o ClientOptions) (*clientSettings, error) {
	explicit := o.AllowHosts != nil
	entries := o.AllowHosts
	if !explicit {
		entries = o.ImplicitHosts
	}
	hosts, err := parseHostList(entries, explicit)
	if err != nil {
		return nil, err
	}
	if o.MaxRetries < NoRetries {
		return nil, fmt.Errorf("max_retries must be 0 or more, not %d", o.MaxRetries)
	}
	if o.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("max_response_bytes must be positive, not %d", o.MaxResponseBytes)
	}
	s := &clientSettings{
		hosts:      hosts,
		maxRetries: o.MaxRetries,
		maxBytes:   o.MaxResponseBytes,
		getenv:     o.Getenv,
		log:        o.Logger,
		lookup:     o.LookupAddrs,
		gen:        c.gen.Add(1),
	}
	if s.maxRetries == 0 {
		s.maxRetries = DefaultMaxRetries
	} else if s.maxRetries == NoRetries {
		s.maxRetries = 0
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxResponseBytes
	}
	if s.getenv == nil {
		s.getenv = os.Getenv
	}
	if s.lookup == nil {
		s.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	return s, nil
}

// CheckHost says why the allowlist refuses requests to rawURL's host
// (nil when it does not): the name check, made before any connection; the
// dial check comes when connecting.
func (c *Client) CheckHost(rawURL string) error {
	host, err := urlHost(rawURL)
	if err != nil {
		return err
	}
	if s := c.settings.Load(); !s.hosts.allows(host) {
		return fmt.Errorf("host %q is %s", host, s.hosts.refusal())
	}
	return nil
}

// Close closes the idle connections of the pool.
func (c *Client) Close() { c.transport.CloseIdleConnections() }

// Request is one outbound HTTP request.
type Request struct {
	Method  string // "" is POST
	URL     string
	Header  http.Header    // plain headers
	Secrets []SecretHeader // headers whose values come from the environment
	Body    []byte
	// Timeout bounds the whole call: every attempt, the waits between
	// them, and reading the answer (for Open, until the body is closed).
	// 0 leaves only ctx's deadline.
	Timeout          time.Duration
	MaxRetries       int   // 0: the Client's; NoRetries: one attempt
	MaxResponseBytes int64 // 0: the Client's
}

// SecretHeader is a header whose value is read from an environment
// variable when the request is made; the value never appears in an error
// or a log line, and is cut out of any body excerpt.
type SecretHeader struct {
	Name   string // the header, e.g. "Authorization"
	Env    string // the environment variable holding the value
	Prefix string // written before the value, e.g. "Bearer "
	Key    string // the configuration key that named Env, for messages
}

// Response is a complete 2xx answer. A secret the server echoes back is
// cut out of its body.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Stream is a 2xx answer whose body is read as it arrives. Reading past
// the response cap fails; Close must be called, and cancels the request.
type Stream struct {
	StatusCode int
	Header     http.Header
	Body       io.ReadCloser
	cr         *call
	ctx        context.Context
}

// Fail turns an error met reading the body into the call's error: timeout,
// the response cap, or a dropped connection, secrets cut out.
func (s *Stream) Fail(err error) *protocol.Error {
	return s.cr.bodyError(s.ctx, err)
}

// StatusError is the Cause of a failure for a non-2xx answer.
type StatusError struct {
	StatusCode int
	Excerpt    string // the start of the body, secrets cut out
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("status %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Excerpt != "" {
		s += ": " + e.Excerpt
	}
	return s
}

// Do sends req and reads the whole answer. Errors are *protocol.Error:
// denied for a host off the allowlist, timeout past req.Timeout or ctx's
// deadline, tool_failed for everything else (a non-2xx status has a
// *StatusError cause and details {"status": N}).
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	var out *Response
	err := c.send(ctx, req, func(ctx context.Context, cr *call, resp *http.Response) (bool, error) {
		body, err := readCapped(resp, cr.maxBytes)
		resp.Body.Close()
		if err != nil {
			return cr.retryable(err), cr.bodyError(ctx, err)
		}
		out = &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: c.redactBody(body)}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Open sends req and returns the answer's body unread, for streaming.
// Failures before the body are as Do's; reading the body fails past the
// response cap, at the timeout, or when the connection drops.
func (c *Client) Open(ctx context.Context, req *Request) (*Stream, error) {
	var out *Stream
	err := c.send(ctx, req, func(ctx context.Context, cr *call, resp *http.Response) (bool, error) {
		out = &Stream{
			StatusCode: resp.StatusCode,
			Header:     resp.Header,
			Body:       &cappedBody{rc: resp.Body, left: cr.maxBytes, max: cr.maxBytes, cancel: cr.cancel},
			cr:         cr,
			ctx:        ctx,
		}
		cr.cancel = nil // the body owns it now
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// call is the state of one Do or Open.
type call struct {
	c        *Client
	s        *clientSettings
	method   string
	describe string // "POST http://host/path": no query, no credentials
	host     string
	maxBytes int64
	timeout  time.Duration
	parent   context.Context
	cancel   context.CancelFunc
}

// send runs the attempts of req; finish reads a 2xx answer and says
// whether a failure to read it may be retried.
func (c *Client) send(ctx context.Context, req *Request, finish func(context.Context, *call, *http.Response) (bool, error)) error {
	s := c.settings.Load()
	cr := &call{c: c, s: s, method: req.Method, maxBytes: req.MaxResponseBytes, timeout: req.Timeout, parent: ctx}
	if cr.method == "" {
		cr.method = http.MethodPost
	}
	if cr.maxBytes <= 0 {
		cr.maxBytes = s.maxBytes
	}
	retries := s.maxRetries
	switch {
	case req.MaxRetries == NoRetries:
		retries = 0
	case req.MaxRetries > 0:
		retries = req.MaxRetries
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return protocol.Errorf(protocol.ToolFailed, "invalid URL %q: %v", req.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return protocol.Errorf(protocol.ToolFailed, "invalid URL %q: give http:// or https:// and a host", req.URL)
	}
	if u.User != nil {
		return protocol.Errorf(protocol.ToolFailed, "the URL for %s carries credentials; give them with headers_env instead", u.Host)
	}
	cr.describe = cr.method + " " + u.Scheme + "://" + u.Host + u.EscapedPath()
	cr.host = u.Hostname()
	if !s.hosts.allows(u.Hostname()) {
		return &protocol.Error{Code: protocol.Denied, Message: fmt.Sprintf("%s: host %q is %s", cr.describe, u.Hostname(), s.hosts.refusal())}
	}
	header := make(http.Header, len(req.Header)+len(req.Secrets)+2)
	for k, v := range req.Header {
		header[k] = v
	}
	for _, sh := range req.Secrets {
		v := s.getenv(sh.Env)
		if v == "" {
			key := sh.Key
			if key == "" {
				key = "the configuration"
			}
			return protocol.Errorf(protocol.ToolFailed, "environment variable %s (named by %s) is not set or empty", sh.Env, key)
		}
		c.redactor.Add(v) // known before anything comes back
		header.Set(sh.Name, sh.Prefix+v)
	}
	if len(req.Body) > 0 && header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/json")
	}

	if cr.timeout > 0 {
		ctx, cr.cancel = context.WithTimeout(ctx, cr.timeout)
	} else {
		ctx, cr.cancel = context.WithCancel(ctx)
	}
	defer func() {
		if cr.cancel != nil {
			cr.cancel()
		}
	}()

	for attempt := 0; ; attempt++ {
		hreq, err := http.NewRequestWithContext(ctx, cr.method, u.String(), bytes.NewReader(req.Body))
		if err != nil {
			return cr.fail(protocol.ToolFailed, err, "%s: %v", cr.describe, err)
		}
		hreq.Header = header.Clone()
		hreq.ContentLength = int64(len(req.Body))
		c.telemetry().InjectHeader(ctx, hreq.Header) // traceparent, with telemetry on
		resp, err := c.http.Do(hreq)
		if err != nil {
			var denied *dialDeniedError
			if errors.As(err, &denied) {
				return cr.fail(protocol.Denied, err, "%s: %v", cr.describe, denied)
			}
			if ctx.Err() != nil {
				return cr.ctxError(ctx, err, "waiting for an answer")
			}
			if attempt < retries && cr.retryable(err) && cr.pause(ctx, attempt, retries, backoff(attempt), "the connection failed") {
				continue
			}
			return cr.fail(protocol.ToolFailed, err, "%s: %s", cr.describe, connError(err))
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			serr := &StatusError{StatusCode: resp.StatusCode, Excerpt: cr.excerpt(resp)}
			_, _ = io.CopyN(io.Discard, resp.Body, 16<<10) // a drained body lets the connection be reused
			resp.Body.Close()
			if attempt < retries && retryStatus(resp.StatusCode) {
				wait, given := retryAfter(resp.Header)
				if !given {
					wait = backoff(attempt)
				}
				if wait > retryAfterCap {
					serr.Excerpt = shorten(fmt.Sprintf("asked to retry after %s, longer than Clara waits (%s); %s",
						roundWait(wait), retryAfterCap, serr.Excerpt), excerptBytes)
				} else if cr.pause(ctx, attempt, retries, wait, fmt.Sprintf("it answered %d", resp.StatusCode)) {
					continue
				}
			}
			if resp.StatusCode >= 300 && resp.StatusCode < 400 {
				serr.Excerpt = "redirects are not followed"
			}
			return &protocol.Error{Code: protocol.ToolFailed, Message: cr.describe + " answered " + serr.Error(),
				Details: []byte(fmt.Sprintf(`{"status":%d}`, resp.StatusCode)), Cause: serr}
		}
		retry, err := finish(ctx, cr, resp)
		if err == nil {
			return nil
		}
		if retry && attempt < retries && ctx.Err() == nil && cr.pause(ctx, attempt, retries, backoff(attempt), "the answer was cut") {
			continue
		}
		return err
	}
}

// pause logs a retry and waits for it; false when the wait would pass the
// deadline or ctx ends first.
func (cr *call) pause(ctx context.Context, attempt, retries int, wait time.Duration, why string) bool {
	if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
		cr.s.log.Logf(logging.Debug, "llm: %s: %s; no retry, the deadline comes first", cr.describe, why)
		return false
	}
	cr.s.log.Logf(logging.Info, "llm: %s: %s; retry %d of %d in %v", cr.describe, why, attempt+1, retries, wait.Round(time.Millisecond))
	cr.c.telemetry().Retry(ctx, cr.host, why)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryable: a dropped or reset connection, not a refusal, a deadline or
// a size cap.
func (cr *call) retryable(err error) bool {
	if errors.Is(err, errTooLarge) {
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func retryStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// backoff is the wait before retry attempt+1: doubling from retryBase, up
// to retryCap, with jitter so that clients retrying together spread out.
func backoff(attempt int) time.Duration {
	d := retryBase << min(attempt, 10)
	if d > retryCap {
		d = retryCap
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter reads Retry-After-Ms (milliseconds, as OpenAI and Anthropic
// send it) or Retry-After (seconds, or an HTTP date), between 0 and
// retryAfterMax: the product is taken in floating point and clamped
// before it becomes a Duration, which 1e300 ms would overflow.
func retryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return clampWait(ms * float64(time.Millisecond)), true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return clampWait(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return min(max(time.Until(t), 0), retryAfterMax), true
		}
	}
	return 0, false
}

// clampWait is a wait in nanoseconds as a Duration of at most
// retryAfterMax (+Inf included; NaN never gets here: ParseFloat's NaN
// fails the >= 0 test).
func clampWait(ns float64) time.Duration {
	if ns >= float64(retryAfterMax) {
		return retryAfterMax
	}
	return time.Duration(ns)
}

// roundWait writes a wait for a message: retryAfterMax as "more than a day".
func roundWait(d time.Duration) string {
	if d >= retryAfterMax {
		return "more than a day"
	}
	return d.Round(time.Second).String()
}

// ctxError is the error for a call whose context ended: timeout when a
// deadline passed (the call's or the caller's), tool_failed when the
// caller cancelled.
func (cr *call) ctxError(ctx context.Context, err error, doing string) *protocol.Error {
	if errors.Is(cr.parent.Err(), context.Canceled) {
		return cr.fail(protocol.ToolFailed, err, "%s: cancelled while %s", cr.describe, doing)
	}
	if cr.timeout > 0 && cr.parent.Err() == nil {
		return cr.fail(protocol.Timeout, err, "%s: no complete answer within %d ms (%s)", cr.describe, cr.timeout.Milliseconds(), doing)
	}
	return cr.fail(protocol.Timeout, err, "%s: the deadline passed while %s", cr.describe, doing)
}

// bodyError is the error for a failure reading a 2xx body.
func (cr *call) bodyError(ctx context.Context, err error) *protocol.Error {
	if errors.Is(err, errTooLarge) {
		return cr.fail(protocol.ToolFailed, err, "%s: the answer is larger than max_response_bytes (%d)", cr.describe, cr.maxBytes)
	}
	if ctx.Err() != nil {
		return cr.ctxError(ctx, err, "reading the answer")
	}
	return cr.fail(protocol.ToolFailed, err, "%s: the connection dropped while reading the answer (%s)", cr.describe, connError(err))
}

// fail builds an error whose message has every secret cut out. The cause
// is kept for errors.Is/As but never reaches an envelope.
func (cr *call) fail(code protocol.Code, cause error, format string, args ...any) *protocol.Error {
	return &protocol.Error{Code: code, Message: cr.c.redactor.String(fmt.Sprintf(format, args...)), Cause: cause}
}

// excerpt reads the start of a failed answer's body: secrets cut out
// (plain or escaped) before it is shortened, so that no prefix of one
// survives, whitespace folded, at most excerptBytes.
func (cr *call) excerpt(resp *http.Response) string {
	// Enough that a secret starting within the excerpt is read whole, even
	// written with escapes (12 bytes for a character at most).
	limit := int64(excerptBytes + 12*cr.c.redactor.Len() + 64)
	buf, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	text := string(buf)
	if int64(len(buf)) == limit {
		text = cr.c.redactor.Head(text) // the body goes on: a secret may start at the cut
	} else {
		text = cr.c.redactor.String(text)
	}
	return shorten(strings.Join(strings.Fields(text), " "), excerptBytes)
}

// shorten cuts s to at most n bytes at a character boundary, marking the
// cut with "…".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// redactBody cuts the secrets out of a whole answer: inside its strings
// when it is JSON (so that it stays JSON), as text otherwise.
func (c *Client) redactBody(body []byte) []byte {
	for _, b := range body {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[', '"':
			return c.redactor.JSON(body)
		}
		break
	}
	return c.redactor.Bytes(body)
}

// connError describes a connection failure without Go's error chain
// (which repeats the URL).
func connError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the connection"
	}
	return err.Error()
}

var errTooLarge = errors.New("response too large")

// readCapped reads a whole body of at most max bytes.
func readCapped(resp *http.Response, max int64) ([]byte, error) {
	if resp.ContentLength > max {
		return nil, errTooLarge
	}
	size := 512
	if resp.ContentLength > 0 {
		size = int(resp.ContentLength) + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if n > max {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// cappedBody is a streamed body that fails past the response cap and
// cancels its request when closed.
type cappedBody struct {
	rc     io.ReadCloser
	left   int64
	max    int64
	cancel context.CancelFunc
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the answer is larger than max_response_bytes (%d): %w", b.max, errTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error {
	err := b.rc.Close()
	if b.cancel != nil {
		b.cancel()
	}
	return err
}

// dialDeniedError refuses to dial an address the allowlist does not
// allow.
type dialDeniedError struct {
	host  string
	addrs []netip.Addr
	why   string
}

func (e *dialDeniedError) Error() string {
	return fmt.Sprintf("host %q resolves to %v, %s; list the address in network.allow_hosts to allow it", e.host, e.addrs, e.why)
}

func (h *hostList) refusal() string {
	if h.explicit {
		return "not in network.allow_hosts"
	}
	return "not among the hosts the configuration names (set network.allow_hosts to allow others)"
}

// dialer dials under the allowlist its settings function returns: the
// Client's in force, or a Transport's.
type dialer struct {
	settings func() *clientSettings
}

// dial resolves the host itself and dials only addresses the allowlist
// allows, so that a permitted name cannot lead to a link-local, metadata
// or (unless allowed) loopback address.
func (d dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s := d.settings()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = s.lookup(ctx, host)
		if err != nil {
			return nil, err
		}
	}
	var allowed []netip.Addr
	for _, a := range addrs {
		if s.hosts.dialAllowed(a) {
			allowed = append(allowed, a.Unmap())
		}
	}
	if len(allowed) == 0 {
		why := "an address that is not allowed (link-local or metadata)"
		for _, a := range addrs {
			if addressClass(a) == classLoopback {
				why = "a loopback address, and no loopback host is allowed"
			}
		}
		if len(addrs) == 0 {
			why = "no address"
		}
		return nil, &dialDeniedError{host: host, addrs: addrs, why: why}
	}
	nd := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	var firstErr error
	for _, a := range allowed {
		conn, err := nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			gc := &guardedConn{Conn: conn, settings: d.settings, host: host, ip: a}
			gc.gen.Store(s.gen)
			return gc, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// guardedConn checks its address again when the configuration changed
// since it was dialled: a pooled connection never outlives the allowlist
// that let it be made.
type guardedConn struct {
	net.Conn
	settings func() *clientSettings
	host     string
	ip       netip.Addr
	gen      atomic.Uint64
}

func (g *guardedConn) Write(p []byte) (int, error) {
	if s := g.settings(); s.gen != g.gen.Load() {
		if !s.hosts.dialAllowed(g.ip) {
			g.Conn.Close()
			return 0, &dialDeniedError{host: g.host, addrs: []netip.Addr{g.ip}, why: "an address the new configuration does not allow"}
		}
		g.gen.Store(s.gen)
	}
	return g.Conn.Write(p)
}

// urlHost is the host of a URL, for implicit allowlist entries.
func urlHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("%q is not a URL with a host", raw)
	}
	return u.Hostname(), nil
}
