package llmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody bounds a request body the server reads.
const maxBody = 64 << 20

// keptRequests bounds the requests kept per script for Received.
const keptRequests = 64

// Server serves scripts on loopback. Script NAME answers under the path
// prefix /NAME: its base URL is URL()+"/NAME" (BaseURL). Besides the
// scripts, GET /_llmtest/report answers Reports as JSON and POST
// /_llmtest/reset rewinds every script.
//
// A Server is safe for concurrent use, and serves requests concurrently.
type Server struct {
	url     string
	ln      net.Listener
	srv     *http.Server
	scripts map[string]*scriptState
	// servePanic is what the accept loop panicked with, if it did: Err
	// reports it instead of the panic taking the test process down.
	servePanic atomic.Pointer[string]
}

type scriptState struct {
	script *Script
	mu     sync.Mutex
	next   int // Sequence: the next exchange
	served int
	fails  []string
	// embedded counts the requests answered on /embeddings.
	embedded int
	recv     []Received
}

// Received is a request a script got.
type Received struct {
	Exchange string // the exchange that answered it ("" when none was left)
	Method   string
	Path     string // after the script's prefix, with the query
	Header   http.Header
	Body     []byte
}

// Report is how far a script went.
type Report struct {
	Script    string   `json:"script"`
	Exchanges int      `json:"exchanges"`
	Served    int      `json:"served"`
	Failures  []string `json:"failures"`
	Embedded  int      `json:"embedded,omitempty"` // requests answered on /embeddings
	// Complete: every exchange of a script that does not repeat was
	// served (always true for repeating and by-turn scripts).
	Complete bool `json:"complete"`
}

// NewServer starts a server for scripts on addr ("127.0.0.1:0" when
// empty). Script names must differ.
func NewServer(addr string, scripts ...*Script) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s := &Server{scripts: map[string]*scriptState{}}
	for _, sc := range scripts {
		if _, dup := s.scripts[sc.Name]; dup {
			return nil, fmt.Errorf("llmtest: two scripts named %q", sc.Name)
		}
		s.scripts[sc.Name] = &scriptState{script: sc}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("llmtest: %v", err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: discardLog}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				msg := fmt.Sprintf("the server stopped: panic: %v", v)
				s.servePanic.Store(&msg)
			}
		}()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the server's address, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// BaseURL is the base URL of a script: the llm.base_url (or the URL
// prefix of an HTTP tool) that reaches it.
func (s *Server) BaseURL(script string) string { return s.url + "/" + script }

// Close stops the server and ends the requests it is serving.
func (s *Server) Close() error { return s.srv.Close() }

// Reset rewinds every script: its next request meets its first exchange,
// and its counts and failures are cleared.
func (s *Server) Reset() {
	for _, st := range s.scripts {
		st.mu.Lock()
		st.next, st.served, st.fails, st.recv, st.embedded = 0, 0, nil, nil, 0
		st.mu.Unlock()
	}
}

// Reports lists every script's report, sorted by name.
func (s *Server) Reports() []Report {
	out := make([]Report, 0, len(s.scripts))
	for _, st := range s.scripts {
		st.mu.Lock()
		r := Report{Script: st.script.Name, Exchanges: len(st.script.Exchanges), Served: st.served,
			Failures: append([]string{}, st.fails...), Embedded: st.embedded}
		r.Complete = st.script.Repeat || st.script.Order == ByTurn || st.served >= r.Exchanges
		st.mu.Unlock()
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Script < out[j].Script })
	return out
}

// Err is nil when no script saw a request it did not expect and each was
// served to its end; otherwise it lists what went wrong.
func (s *Server) Err() error {
	var msgs []string
	if p := s.servePanic.Load(); p != nil {
		msgs = append(msgs, *p)
	}
	for _, r := range s.Reports() {
		for _, f := range r.Failures {
			msgs = append(msgs, r.Script+": "+f)
		}
		if !r.Complete {
			msgs = append(msgs, fmt.Sprintf("%s: %d of %d exchanges served", r.Script, r.Served, r.Exchanges))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New("llmtest: " + strings.Join(msgs, "\n"))
}

// Received returns the last requests a script got (at most 64).
func (s *Server) Received(script string) []Received {
	st := s.scripts[script]
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Received(nil), st.recv...)
}

// ServeHTTP routes a request to its script.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_llmtest/report":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Reports())
		return
	case "/_llmtest/reset":
		if r.Method != http.MethodPost {
			http.Error(w, "POST to reset", http.StatusMethodNotAllowed)
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	st := s.scripts[name]
	if st == nil {
		http.Error(w, fmt.Sprintf("llmtest: no script named %q (the path starts with the script's name)", name), http.StatusNotFound)
		return
	}
	st.serve(w, r, "/"+rest)
}

func (st *scriptState) serve(w http.ResponseWriter, r *http.Request, path string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		st.failure("reading the request: %v", err)
		return
	}
	sc := st.script
	if sc.Embeddings != nil && path == "/embeddings" {
		st.embed(w, r, body)
		return
	}
	var v *view
	var wireErr error
	switch sc.Provider {
	case OpenAI:
		v, wireErr = checkOpenAI(r.Header, body)
	case Anthropic:
		v, wireErr = checkAnthropic(r.Header, body)
	case Gemini:
		v, wireErr = checkGemini(r.Header, path, r.URL.Query(), body)
	}

	st.mu.Lock()
	var x *Exchange
	switch {
	case sc.Order == ByTurn && v != nil:
		x = &sc.Exchanges[v.assistants%len(sc.Exchanges)]
	case sc.Order == ByTurn:
	case st.next < len(sc.Exchanges):
		x = &sc.Exchanges[st.next]
		st.next++
		if sc.Repeat && st.next == len(sc.Exchanges) {
			st.next = 0
		}
	}
	rec := Received{Method: r.Method, Path: path, Header: r.Header.Clone(), Body: body}
	if r.URL.RawQuery != "" {
		rec.Path += "?" + r.URL.RawQuery
	}
	if x != nil {
		rec.Exchange = x.Name
		st.served++
	}
	st.recv = append(st.recv, rec)
	if len(st.recv) > keptRequests {
		st.recv = st.recv[len(st.recv)-keptRequests:]
	}
	st.mu.Unlock()

	if wireErr != nil {
		st.refuse(w, http.StatusBadRequest, "invalid_request_error", wireErr.Error(), x)
		return
	}
	if x == nil {
		st.refuse(w, http.StatusGone, "invalid_request_error", fmt.Sprintf("every exchange of script %s was served; request %s %s was not expected", sc.Name, r.Method, path), nil)
		return
	}
	if bad := checkExpect(&x.Expect, r, path, body, v); len(bad) > 0 {
		st.refuse(w, http.StatusBadRequest, "invalid_request_error", strings.Join(bad, "; "), x)
		return
	}
	answer(w, r, &x.Reply, sc.Provider)
}

// failure records a problem of the script.
func (st *scriptState) failure(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	st.mu.Lock()
	st.fails = append(st.fails, msg)
	st.mu.Unlock()
	return msg
}

// refuse records a failure and answers it as the API would answer a bad
// request, so that the client fails too.
func (st *scriptState) refuse(w http.ResponseWriter, status int, kind, msg string, x *Exchange) {
	if x != nil {
		msg = fmt.Sprintf("%s: %s", x.Name, msg)
	}
	msg = st.failure("%s", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var out any
	switch st.script.Provider {
	case Anthropic:
		out = map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": "llmtest: " + msg}}
	case Gemini:
		out = map[string]any{"error": map[string]any{"code": status, "message": "llmtest: " + msg, "status": "INVALID_ARGUMENT"}}
	default:
		out = map[string]any{"error": map[string]any{"message": "llmtest: " + msg, "type": kind}}
	}
	_ = json.NewEncoder(w).Encode(out)
}

// answer writes an exchange's reply.
func answer(w http.ResponseWriter, r *http.Request, rep *Reply, provider string) {
	if rep.DelayMS > 0 {
		t := time.NewTimer(time.Duration(rep.DelayMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if rep.Drop != "" {
		drop(w, rep.Drop == "reset")
		return
	}
	var body, ctype string
	switch {
	case rep.JSON != "":
		body, ctype = rep.JSON, "application/json"
	case rep.SSE != "":
		body, ctype = rep.SSE, "text/event-stream"
	default:
		body, ctype = rep.Body, "text/plain; charset=utf-8"
	}
	if rep.ContentType != "" {
		ctype = rep.ContentType
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	if rep.SSE != "" {
		h.Set("Cache-Control", "no-cache")
	}
	for k, v := range rep.Headers {
		h.Set(k, v)
	}
	if rep.Chunk == 0 && rep.DropAfter == 0 && rep.SSE == "" {
		h.Set("Content-Length", fmt.Sprint(len(body)))
	}
	w.WriteHeader(rep.Status)
	flusher, _ := w.(http.Flusher)
	if rep.DropAfter > 0 && rep.DropAfter < len(body) {
		body = body[:rep.DropAfter]
		defer drop(w, false)
	}
	step := rep.Chunk
	if step <= 0 {
		step = len(body)
	}
	for len(body) > 0 {
		n := min(step, len(body))
		if _, err := io.WriteString(w, body[:n]); err != nil {
			return
		}
		body = body[n:]
		if flusher != nil {
			flusher.Flush()
		}
		if rep.ChunkDelayMS > 0 && len(body) > 0 {
			select {
			case <-time.After(time.Duration(rep.ChunkDelayMS) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	}
}

// drop ends the connection without finishing the answer: reset sends a
// TCP RST, otherwise the connection is closed.
func drop(w http.ResponseWriter, reset bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discardLog silences the http.Server's own log: dropped connections are
// what the scripts ask for.
var discardLog = log.New(io.Discard, "", 0)
