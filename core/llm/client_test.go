package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clara-lib/clara/core/llm/llmtest"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

const testKey = "sk-test-0123456789abcdef"

// logLines collects what a Logger writes.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) sink(level logging.Level, msg string) {
	l.mu.Lock()
	l.lines = append(l.lines, level.String()+": "+msg)
	l.mu.Unlock()
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func newTestClient(t *testing.T, o ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func protoErr(t *testing.T, err error, code protocol.Code) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *protocol.Error", err, err)
	}
	if pe.Code != code {
		t.Fatalf("error code %s, want %s: %s", pe.Code, code, pe.Message)
	}
	return pe
}

// countingServer answers each request with the next of its handlers (the
// last one again when they run out) and counts the requests.
func countingServer(t *testing.T, handlers ...http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		handlers[min(i, len(handlers)-1)](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func ok(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }
}

func status(code int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func TestHostList_entriesAndMatching(t *testing.T) {
	h, err := parseHostList([]string{"API.Example.com.", "*.corp.test", "10.1.2.3", "192.168.0.0/16", "[::1]"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"api.example.com": true, "API.EXAMPLE.COM": true, "example.com": false, "x.api.example.com": false,
		"a.corp.test": true, "a.b.corp.test": true, "corp.test": false, "xcorp.test": false,
		"10.1.2.3": true, "10.1.2.4": false, "192.168.7.7": true, "::1": true, "127.0.0.1": false,
	} {
		if got := h.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
	if !h.loopback {
		t.Error("[::1] listed: loopback should be allowed")
	}
	for _, bad := range []string{"http://x.com", "x.com:80", "x.com/path", "", "*.", "a..b", "user@x.com"} {
		if _, err := parseHostList([]string{bad}, true); err == nil {
			t.Errorf("entry %q accepted", bad)
		}
	}
	implicit, err := parseHostList([]string{"http://localhost:11434/v1", "https://api.openai.com/v1"}, false)
	if err != nil || !implicit.allows("localhost") || !implicit.allows("api.openai.com") || !implicit.loopback {
		t.Fatalf("implicit hosts from URLs: %v %+v", err, implicit)
	}
}

func TestHostList_dialChecks(t *testing.T) {
	noLoop, _ := parseHostList([]string{"*.example.test"}, true)
	withLoop, _ := parseHostList([]string{"*.example.test", "localhost"}, true)
	listed, _ := parseHostList([]string{"*.example.test", "169.254.169.254"}, true)
	for _, tc := range []struct {
		addr                    string
		noLoop, withLoop, listd bool
	}{
		{"93.184.216.34", true, true, true},
		{"10.0.0.1", true, true, true},
		{"127.0.0.1", false, true, false},
		{"127.1.2.3", false, true, false},
		{"::1", false, true, false},
		{"0.0.0.0", false, true, false},
		{"::", false, true, false},
		{"169.254.169.254", false, false, true},
		{"169.254.1.1", false, false, false},
		{"::ffff:169.254.169.254", false, false, true},
		{"64:ff9b::a9fe:a9fe", false, false, false}, // 169.254.169.254 through NAT64
		{"fe80::1", false, false, false},
		{"fd00:ec2::254", false, false, false},
		{"100.100.100.200", false, false, false},
		{"::ffff:127.0.0.1", false, true, false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := noLoop.dialAllowed(a); got != tc.noLoop {
			t.Errorf("without loopback: dialAllowed(%s) = %v", tc.addr, got)
		}
		if got := withLoop.dialAllowed(a); got != tc.withLoop {
			t.Errorf("with localhost: dialAllowed(%s) = %v", tc.addr, got)
		}
		if got := listed.dialAllowed(a); got != tc.listd {
			t.Errorf("with 169.254.169.254 listed: dialAllowed(%s) = %v", tc.addr, got)
		}
	}
}

func TestClient_hostOffTheListIsDeniedBeforeAnyConnection(t *testing.T) {
	srv, n := countingServer(t, ok("{}"))
	for _, o := range []ClientOptions{
		{AllowHosts: []string{"api.example.com"}},
		{ImplicitHosts: []string{"http://localhost:8000/evaluate"}},
		{AllowHosts: []string{}},
	} {
		c := newTestClient(t, o)
		_, err := c.Do(context.Background(), &Request{URL: srv.URL + "/x"})
		pe := protoErr(t, err, protocol.Denied)
		if !strings.Contains(pe.Message, `host "127.0.0.1" is not`) {
			t.Errorf("message %q", pe.Message)
		}
	}
	if n.Load() != 0 {
		t.Fatalf("the server got %d requests", n.Load())
	}
}

// A name on the list that resolves to 127.0.0.1 is refused when no
// loopback host is allowed, unless the address itself is listed.
func TestClient_nameResolvingToLoopbackIsRefused(t *testing.T) {
	srv, n := countingServer(t, ok(`{"ok":true}`))
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "svc.example.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "meta.example.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
	target := "http://svc.example.test:" + port + "/v1"

	c := newTestClient(t, ClientOptions{AllowHosts: []string{"*.example.test"}, LookupAddrs: lookup})
	_, err := c.Do(context.Background(), &Request{URL: target})
	pe := protoErr(t, err, protocol.Denied)
	if !strings.Contains(pe.Message, "loopback") || !strings.Contains(pe.Message, "127.0.0.1") {
		t.Errorf("message %q", pe.Message)
	}
	_, err = c.Do(context.Background(), &Request{URL: "http://meta.example.test/latest/meta-data"})
	pe = protoErr(t, err, protocol.Denied)
	if !strings.Contains(pe.Message, "169.254.169.254") {
		t.Errorf("message %q", pe.Message)
	}
	if n.Load() != 0 {
		t.Fatalf("the server got %d requests", n.Load())
	}

	for _, allow := range [][]string{{"*.example.test", "127.0.0.1"}, {"*.example.test", "localhost"}} {
		c := newTestClient(t, ClientOptions{AllowHosts: allow, LookupAddrs: lookup})
		resp, err := c.Do(context.Background(), &Request{URL: target})
		if err != nil || string(resp.Body) != `{"ok":true}` {
			t.Fatalf("allow %v: %v", allow, err)
		}
	}
	// The system resolver: "localhost" is itself on the list, so loopback is allowed.
	c = newTestClient(t, ClientOptions{AllowHosts: []string{"localhost"}})
	if _, err := c.Do(context.Background(), &Request{URL: "http://localhost:" + port + "/"}); err != nil {
		t.Fatal(err)
	}
}

// A connection pooled under one allowlist is not reused for a request
// once a new configuration forbids its address.
func TestClient_reconfigureChecksPooledConnections(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "first")
	}, ok("second"))
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	c := newTestClient(t, ClientOptions{AllowHosts: []string{"*.example.test", "127.0.0.1"}, LookupAddrs: lookup})
	url := "http://svc.example.test:" + port + "/"
	done := make(chan error)
	go func() {
		_, err := c.Do(context.Background(), &Request{URL: url, Body: []byte("{}")})
		done <- err
	}()
	<-arrived
	if err := c.Configure(ClientOptions{AllowHosts: []string{"*.example.test"}, LookupAddrs: lookup}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, err := c.Do(context.Background(), &Request{URL: url, Body: []byte("{}")})
	protoErr(t, err, protocol.Denied)
}

func TestClient_retries(t *testing.T) {
	t.Run("429, 503, then 200", func(t *testing.T) {
		srv, n := countingServer(t,
			status(429, map[string]string{"Retry-After": "0"}, "slow down"),
			status(503, map[string]string{"Retry-After-Ms": "5"}, "busy"),
			ok("done"))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}})
		resp, err := c.Do(context.Background(), &Request{URL: srv.URL})
		if err != nil || string(resp.Body) != "done" || n.Load() != 3 {
			t.Fatalf("%v %d", err, n.Load())
		}
	})
	t.Run("max_retries spent", func(t *testing.T) {
		srv, n := countingServer(t, status(502, map[string]string{"Retry-After": "0"}, "bad gateway"))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}})
		_, err := c.Do(context.Background(), &Request{URL: srv.URL + "/chat"})
		pe := protoErr(t, err, protocol.ToolFailed)
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 502 || string(pe.Details) != `{"status":502}` || n.Load() != 3 {
			t.Fatalf("%v %s %d", err, pe.Details, n.Load())
		}
		if !strings.Contains(pe.Message, "POST "+srv.URL+"/chat answered status 502 Bad Gateway: bad gateway") {
			t.Errorf("message %q", pe.Message)
		}
		n.Store(0)
		_, err = c.Do(context.Background(), &Request{URL: srv.URL, MaxRetries: NoRetries})
		protoErr(t, err, protocol.ToolFailed)
		if n.Load() != 1 {
			t.Fatalf("NoRetries made %d attempts", n.Load())
		}
	})
	// Issue 26 §5: as the official OpenAI SDK, 408, 409 and 500 are
	// retried too (they were not), and x-should-retry has the last word.
	t.Run("408, 409, 500, then 200", func(t *testing.T) {
		srv, n := countingServer(t,
			status(408, map[string]string{"Retry-After-Ms": "1"}, "timeout"),
			status(409, map[string]string{"Retry-After-Ms": "1"}, "conflict"),
			status(500, map[string]string{"Retry-After-Ms": "1"}, "oops"),
			ok("done"))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, MaxRetries: 5})
		resp, err := c.Do(context.Background(), &Request{URL: srv.URL})
		if err != nil || string(resp.Body) != "done" || n.Load() != 4 {
			t.Fatalf("%v %d", err, n.Load())
		}
	})
	t.Run("x-should-retry: false", func(t *testing.T) {
		srv, n := countingServer(t, status(500, map[string]string{"X-Should-Retry": "false"}, "oops"))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, MaxRetries: 5})
		_, err := c.Do(context.Background(), &Request{URL: srv.URL})
		protoErr(t, err, protocol.ToolFailed)
		if n.Load() != 1 {
			t.Fatalf("%d attempts", n.Load())
		}
	})
	t.Run("400 is not retried, unless x-should-retry says so", func(t *testing.T) {
		srv, n := countingServer(t, status(400, nil, "bad"))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, MaxRetries: 5})
		_, err := c.Do(context.Background(), &Request{URL: srv.URL})
		protoErr(t, err, protocol.ToolFailed)
		if n.Load() != 1 {
			t.Fatalf("%d attempts", n.Load())
		}
		srv, n = countingServer(t, status(400, map[string]string{"X-Should-Retry": "true", "Retry-After-Ms": "1"}, "again"), ok("done"))
		c = newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, MaxRetries: 5})
		if resp, err := c.Do(context.Background(), &Request{URL: srv.URL}); err != nil || string(resp.Body) != "done" || n.Load() != 2 {
			t.Fatalf("%v %d", err, n.Load())
		}
	})
	t.Run("a Retry-After past the deadline ends the call", func(t *testing.T) {
		srv, n := countingServer(t, status(429, map[string]string{"Retry-After": "30"}, ""))
		c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}})
		_, err := c.Do(context.Background(), &Request{URL: srv.URL, Timeout: 5 * time.Second})
		pe := protoErr(t, err, protocol.ToolFailed)
		if n.Load() != 1 || !strings.Contains(pe.Message, "429") {
			t.Fatalf("%d attempts: %v", n.Load(), err)
		}
	})
	// Issue 25, finding 21: 1e300 ms overflowed to a negative wait, and
	// 10 retries went out at once.
	t.Run("a Retry-After past any sensible wait ends the call at once", func(t *testing.T) {
		for _, h := range []map[string]string{{"Retry-After-Ms": "1e300"}, {"Retry-After-Ms": "+Inf"}, {"Retry-After": "1e300"},
			{"Retry-After-Ms": "9223372036854775807"}, {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}} {
			srv, n := countingServer(t, status(429, h, "slow down"))
			c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, MaxRetries: 10})
			start := time.Now()
			_, err := c.Do(context.Background(), &Request{URL: srv.URL})
			pe := protoErr(t, err, protocol.ToolFailed)
			if n.Load() != 1 || time.Since(start) > 2*time.Second ||
				!strings.Contains(pe.Message, "answered status 429 Too Many Requests: asked to retry after more than a day, longer than Clara waits (1m0s); slow down") {
				t.Errorf("%v: %d attempts in %v: %v", h, n.Load(), time.Since(start), err)
			}
		}
	})
	t.Run("a dropped connection is retried", func(t *testing.T) {
		for _, how := range []string{"reset", "close"} {
			script, err := llmtest.ParseScript("drop", []byte(`provider = "http"
[[exchange]]
reply.drop = "`+how+`"
[[exchange]]
reply.json = '{"after":"`+how+`"}'
`))
			if err != nil {
				t.Fatal(err)
			}
			srv, err := llmtest.NewServer("", script)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL()}})
			resp, err := c.Do(context.Background(), &Request{URL: srv.BaseURL("drop") + "/x", Body: []byte("{}")})
			if err != nil || string(resp.Body) != `{"after":"`+how+`"}` {
				t.Fatalf("%s: %v", how, err)
			}
			if err := srv.Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestClient_responseCap(t *testing.T) {
	big := strings.Repeat("x", 5000)
	srv, _ := countingServer(t, ok(big))
	chunked, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 50; i++ {
			io.WriteString(w, strings.Repeat("y", 100))
			w.(http.Flusher).Flush()
		}
	})
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, MaxResponseBytes: 1000})
	for _, u := range []string{srv.URL, chunked.URL} {
		_, err := c.Do(context.Background(), &Request{URL: u})
		pe := protoErr(t, err, protocol.ToolFailed)
		if !strings.Contains(pe.Message, "larger than max_response_bytes (1000)") {
			t.Errorf("message %q", pe.Message)
		}
		st, err := c.Open(context.Background(), &Request{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(st.Body)
		st.Body.Close()
		if len(b) != 1000 || err == nil || !strings.Contains(st.Fail(err).Message, "max_response_bytes") {
			t.Fatalf("stream: %d bytes, %v", len(b), err)
		}
	}
	// A per-request cap above the answer's size lets it through.
	resp, err := c.Do(context.Background(), &Request{URL: srv.URL, MaxResponseBytes: 6000})
	if err != nil || len(resp.Body) != 5000 {
		t.Fatal(err)
	}
}

func TestClient_cancellationAndTimeout(t *testing.T) {
	arrived := make(chan struct{}, 4)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}})

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := c.Do(ctx, &Request{URL: srv.URL})
	pe := protoErr(t, err, protocol.ToolFailed)
	if !strings.Contains(pe.Message, "cancelled") {
		t.Errorf("message %q", pe.Message)
	}

	_, err = c.Do(context.Background(), &Request{URL: srv.URL, Timeout: 50 * time.Millisecond})
	pe = protoErr(t, err, protocol.Timeout)
	if !strings.Contains(pe.Message, "within 50 ms") {
		t.Errorf("message %q", pe.Message)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = c.Do(ctx, &Request{URL: srv.URL})
	protoErr(t, err, protocol.Timeout)
}

func TestClient_secretsNeverShow(t *testing.T) {
	var logs logLines
	env := map[string]string{"TEST_KEY": testKey}
	echo := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			fmt.Fprintf(w, "you sent %q and %q", r.Header.Get("Authorization"), r.Header.Get("X-Token"))
		}
	}
	srv, _ := countingServer(t, echo(503), echo(401), echo(200))
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}, Getenv: func(k string) string { return env[k] },
		Logger: logging.New(logs.sink, logging.Debug)})
	req := &Request{URL: srv.URL, Secrets: []SecretHeader{
		{Name: "Authorization", Env: "TEST_KEY", Prefix: "Bearer ", Key: "llm.api_key_env"},
		{Name: "X-Token", Env: "TEST_KEY"},
	}, MaxRetries: NoRetries}
	var all []string
	for i := 0; i < 3; i++ {
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			all = append(all, err.Error(), fmt.Sprint(errors.Unwrap(err)))
		} else {
			all = append(all, string(resp.Body))
		}
	}
	all = append(all, logs.all())
	text := strings.Join(all, "\n")
	if strings.Contains(text, testKey) || strings.Contains(text, testKey[:12]) {
		t.Fatalf("the key shows:\n%s", text)
	}
	if !strings.Contains(text, `you sent "Bearer [redacted]" and "[redacted]"`) {
		t.Fatalf("the excerpt was not redacted:\n%s", text)
	}

	_, err := c.Do(context.Background(), &Request{URL: srv.URL, Secrets: []SecretHeader{{Name: "X", Env: "MISSING_VAR", Key: "llm.api_key_env"}}})
	pe := protoErr(t, err, protocol.ToolFailed)
	if pe.Message != "environment variable MISSING_VAR (named by llm.api_key_env) is not set or empty" {
		t.Errorf("message %q", pe.Message)
	}
}

func TestClient_refusals(t *testing.T) {
	srv, n := countingServer(t, status(302, map[string]string{"Location": "http://169.254.169.254/"}, ""))
	c := newTestClient(t, ClientOptions{ImplicitHosts: []string{srv.URL}})
	_, err := c.Do(context.Background(), &Request{URL: srv.URL})
	pe := protoErr(t, err, protocol.ToolFailed)
	if !strings.Contains(pe.Message, "redirects are not followed") || n.Load() != 1 {
		t.Errorf("message %q, %d requests", pe.Message, n.Load())
	}
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("me", "hunter2")
	_, err = c.Do(context.Background(), &Request{URL: u.String()})
	pe = protoErr(t, err, protocol.ToolFailed)
	if strings.Contains(pe.Message, "hunter2") {
		t.Errorf("message %q", pe.Message)
	}
	for _, bad := range []string{"ftp://127.0.0.1/", "http:///x", "::"} {
		_, err = c.Do(context.Background(), &Request{URL: bad})
		protoErr(t, err, protocol.ToolFailed)
	}
	if _, err := NewClient(ClientOptions{AllowHosts: []string{"http://x"}}); err == nil {
		t.Error("a URL in allow_hosts was accepted")
	}
}

func TestRetryAfter_clamped(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1e300": retryAfterMax, "+Inf": retryAfterMax, "9223372036854775807": retryAfterMax,
		"86400001": retryAfterMax, "1500": 1500 * time.Millisecond, "0": 0,
	} {
		got, ok := retryAfter(http.Header{"Retry-After-Ms": {v}})
		if !ok || got != want {
			t.Errorf("Retry-After-Ms %s: %v %v", v, got, ok)
		}
	}
	for _, v := range []string{"-1", "NaN", "soon"} {
		if _, ok := retryAfter(http.Header{"Retry-After-Ms": {v}}); ok {
			t.Errorf("Retry-After-Ms %s was taken", v)
		}
	}
	if got, _ := retryAfter(http.Header{"Retry-After": {"1e300"}}); got != retryAfterMax {
		t.Errorf("Retry-After 1e300: %v", got)
	}
}
