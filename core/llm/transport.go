package llm

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
)

// Transport carries the requests of another protocol's client (the MCP
// SDK's, for servers reached by URL) on Clara's outbound path: the host
// allowlist checked on each request's URL and again on every address
// dialled, no redirect followed, and every answer capped at
// max_response_bytes: a whole body, or each event of an event stream
// (which may stay open for as long as the session).
//
// A Transport checks against the settings it was made with until Commit,
// then against its Client's settings in force: a configuration being
// prepared connects its servers under its own allowlist, before it is put
// in force. It keeps its own pool of connections (Close closes them).
type Transport struct {
	c        *Client
	prepared atomic.Pointer[clientSettings] // nil once committed
	http     *http.Transport
}

// NewTransport returns a Transport that checks requests against o until
// Commit.
func (c *Client) NewTransport(o ClientOptions) (*Transport, error) {
	s, err := c.newSettings(o)
	if err != nil {
		return nil, err
	}
	t := &Transport{c: c}
	t.prepared.Store(s)
	t.http = newHTTPTransport(t.settings)
	return t, nil
}

// settings are the prepared settings until Commit, the Client's after.
func (t *Transport) settings() *clientSettings {
	if s := t.prepared.Load(); s != nil {
		return s
	}
	return t.c.settings.Load()
}

// Commit makes the Transport follow its Client's settings in force (once
// the configuration it was prepared for is).
func (t *Transport) Commit() { t.prepared.Store(nil) }

// MaxResponseBytes is the cap of an answer (of an event, in a stream).
func (t *Transport) MaxResponseBytes() int64 { return t.settings().maxBytes }

// CloseIdleConnections closes the pool's idle connections (http.Client's
// CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() { t.http.CloseIdleConnections() }

// HTTPClient is an http.Client on t that follows no redirect (one would
// take the request's headers wherever it points). It has no Timeout:
// callers bound their requests with contexts.
func (t *Transport) HTTPClient() *http.Client {
	return &http.Client{Transport: t, CheckRedirect: noRedirects}
}

// RoundTrip implements http.RoundTripper. Its errors say what was
// refused: a host off the allowlist, an answer past the cap (errors.Is
// errTooLarge); what net/http says otherwise.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.settings()
	u := req.URL
	describe := req.Method + " " + u.Scheme + "://" + u.Host + u.EscapedPath()
	refuse := func(format string, args ...any) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, errors.New(t.c.redactor.String(describe + ": " + fmt.Sprintf(format, args...)))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "":
		return refuse("give http:// or https:// and a host")
	case u.User != nil:
		return refuse("the URL carries credentials; give them with headers_env instead")
	case !s.hosts.allows(u.Hostname()):
		return refuse("host %q is %s", u.Hostname(), s.hosts.refusal())
	}
	resp, err := t.http.RoundTrip(req)
	if err != nil {
		var denied *dialDeniedError
		if errors.As(err, &denied) {
			return nil, fmt.Errorf("%s: %w", describe, denied)
		}
		return nil, err
	}
	if resp.ContentLength > s.maxBytes {
		resp.Body.Close()
		return nil, tooLargeError(describe, resp.ContentLength, s.maxBytes)
	}
	if isEventStream(resp.Header) {
		resp.Body = &eventCappedBody{ReadCloser: resp.Body, max: s.maxBytes + eventSlack, describe: describe}
	} else {
		resp.Body = &transportBody{ReadCloser: resp.Body, left: s.maxBytes, max: s.maxBytes, describe: describe}
	}
	return resp, nil
}

func tooLargeError(describe string, size, max int64) error {
	what := "is larger than"
	if size > 0 {
		what = fmt.Sprintf("is %d bytes, more than", size)
	}
	return fmt.Errorf("%s: the answer %s llm.max_response_bytes (%d)%w", describe, what, max, quiet{errTooLarge})
}

// quiet wraps an error for errors.Is without adding to the message.
type quiet struct{ err error }

func (q quiet) Error() string { return "" }
func (q quiet) Unwrap() error { return q.err }

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// transportBody fails once more than max bytes were read.
type transportBody struct {
	io.ReadCloser
	left, max int64
	describe  string
}

func (b *transportBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, tooLargeError(b.describe, 0, b.max)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the cap tells a body that ends there from a longer one
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), tooLargeError(b.describe, 0, b.max)
	}
	return n, err
}

// eventSlack is what an event may pass the cap by before eventCappedBody
// fails it: the client reading the stream (the MCP SDK, told the cap as
// its MaxEventSize) reads ahead, and its own check, which comes first,
// fails the connection with a message that says why. This one is the
// backstop.
const eventSlack = 64 << 10

// eventCappedBody fails once an event of a text/event-stream (the bytes
// between two empty lines) passes max bytes; the stream itself may go on
// for ever.
type eventCappedBody struct {
	io.ReadCloser
	max      int64
	describe string
	event    int64 // bytes of the event so far, line ends left out
	line     int64 // bytes of the line so far
	cr       bool  // the last byte was '\r' (a '\n' may complete its line end)
	failed   bool
}

func (b *eventCappedBody) Read(p []byte) (int, error) {
	if b.failed {
		return 0, b.fail()
	}
	n, err := b.ReadCloser.Read(p)
	for i, c := range p[:n] {
		switch {
		case c == '\n' && b.cr:
			b.cr = false
		case c == '\n' || c == '\r':
			if b.line == 0 {
				b.event = 0 // an empty line ends the event
			}
			b.line, b.cr = 0, c == '\r'
		default:
			b.cr = false
			b.line++
			b.event++
			if b.event > b.max {
				b.failed = true
				return i, b.fail()
			}
		}
	}
	return n, err
}

func (b *eventCappedBody) fail() error {
	return fmt.Errorf("%s: an event of the stream is larger than llm.max_response_bytes (%d)%w", b.describe, b.max-eventSlack, quiet{errTooLarge})
}
