package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// What ServeStdio puts between the client's streams and the SDK's stdio
// transport, which ends the session at the first line it cannot decode and
// drops the answers still being worked on when its input ends (issue 25,
// finding 23):
//
//   - a line that is not JSON, not a JSON-RPC message, or longer than
//     maxStdioLine is answered here with the JSON-RPC error (parse error or
//     invalid request) and kept from the SDK: the session goes on;
//   - at the end of the input, the end is told to the SDK only once every
//     request it was given has been answered (or cancelled by the client),
//     or serving stops: the answers in flight reach the client.
//
// The client's lines and the server's answers are matched by their ids, as
// the SDK reads them (jsonrpc.MakeID).

// maxStdioLine bounds one message from a stdio client.
const maxStdioLine = sdk.DefaultMaxLineLength

// stdioStreams are one stdio session's two ends.
type stdioStreams struct {
	ctx context.Context // serving stops: the end of input is told at once
	in  *bufio.Reader
	out io.Writer

	wmu sync.Mutex // one message at a time on out

	mu      sync.Mutex
	pending map[jsonrpc.ID]int // requests given to the SDK, not answered yet
	changed chan struct{}      // pending went down
	version string             // the protocol revision of the session, from its initialize

	line []byte // what is left of the line being handed to the SDK
}

func newStdioStreams(ctx context.Context, in io.Reader, out io.Writer) *stdioStreams {
	return &stdioStreams{ctx: ctx, in: bufio.NewReaderSize(in, 64<<10), out: out,
		pending: map[jsonrpc.ID]int{}, changed: make(chan struct{}, 1)}
}

// reader and writer are the two ends as the SDK's IOTransport takes them.
func (s *stdioStreams) reader() io.ReadCloser  { return stdioReader{s} }
func (s *stdioStreams) writer() io.WriteCloser { return stdioWriter{s} }

type stdioReader struct{ s *stdioStreams }
type stdioWriter struct{ s *stdioStreams }

func (r stdioReader) Close() error { return nil } // the streams are the caller's
func (w stdioWriter) Close() error { return nil }

// Read hands the SDK the client's next good line.
func (r stdioReader) Read(p []byte) (int, error) {
	s := r.s
	for len(s.line) == 0 {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				s.drain()
			}
			return 0, err
		}
		if s.admit(line) {
			s.line = append(line, '\n')
		}
	}
	n := copy(p, s.line)
	s.line = s.line[n:]
	return n, nil
}

// readLine reads the next line that is not blank, trimmed. A line longer
// than maxStdioLine is answered and skipped.
func (s *stdioStreams) readLine() ([]byte, error) {
	for {
		line, over, err := s.nextLine()
		if over {
			s.answerError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a message longer than %d MiB, the most Clara reads", maxStdioLine>>20))
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil // a last line without its end too: the error comes again on the next read
		}
		if err != nil {
			return nil, err
		}
	}
}

// nextLine reads through the next '\n', or to the end of the input; over:
// it was longer than maxStdioLine, and what was read of it is dropped.
func (s *stdioStreams) nextLine() (line []byte, over bool, err error) {
	for {
		chunk, err := s.in.ReadSlice('\n')
		if !over {
			if len(line)+len(chunk) > maxStdioLine+1 {
				over, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, over, err
		}
	}
}

// admit checks a line as the SDK will read it and counts the requests in
// it; a line the SDK would end the session on is answered here instead.
func (s *stdioStreams) admit(line []byte) bool {
	if !json.Valid(line) {
		var v any
		err := json.Unmarshal(line, &v)
		s.answerError(nil, jsonrpc.CodeParseError, "Parse error: "+err.Error())
		return false
	}
	var raws []json.RawMessage
	if line[0] == '[' {
		s.mu.Lock()
		version := s.version
		s.mu.Unlock()
		switch {
		case version >= "2025-06-18": // the SDK would end the session
			s.answerError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not part of MCP "+version)
			return false
		case json.Unmarshal(line, &raws) != nil || len(raws) == 0:
			s.answerError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
			return false
		}
	} else {
		raws = []json.RawMessage{line}
	}
	var calls []jsonrpc.ID
	var cancelled []jsonrpc.ID
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			id, _ := idOf(gjson.GetBytes(raw, "id"))
			s.answerError(&id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
			return false
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			continue // a response to a request of ours
		}
		if req.Method == "initialize" {
			s.mu.Lock()
			s.version = negotiated(gjson.GetBytes(req.Params, "protocolVersion").Str)
			s.mu.Unlock()
		}
		if req.IsCall() {
			calls = append(calls, req.ID)
		} else if req.Method == "notifications/cancelled" {
			if id, ok := idOf(gjson.GetBytes(req.Params, "requestId")); ok {
				cancelled = append(cancelled, id)
			}
		}
	}
	s.mu.Lock()
	for _, id := range calls {
		s.pending[id]++
	}
	for _, id := range cancelled { // the client expects no answer to it
		s.answeredLocked(id)
	}
	s.mu.Unlock()
	return true
}

// negotiated is the revision the server answers an initialize asking for
// asked with: that one when it serves it, else its own.
func negotiated(asked string) string {
	for _, v := range servedVersions() {
		if v == asked {
			return v
		}
	}
	return ProtocolVersion
}

// idOf is a JSON-RPC id as the SDK reads it.
func idOf(v gjson.Result) (jsonrpc.ID, bool) {
	var id jsonrpc.ID
	var err error
	switch v.Type {
	case gjson.String:
		id, err = jsonrpc.MakeID(v.Str)
	case gjson.Number:
		id, err = jsonrpc.MakeID(v.Num)
	default:
		return jsonrpc.ID{}, false
	}
	return id, err == nil && id.IsValid()
}

func (s *stdioStreams) answeredLocked(id jsonrpc.ID) {
	if s.pending[id] <= 1 {
		delete(s.pending, id)
	} else {
		s.pending[id]--
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// drain waits, at the end of the input, until every request has been
// answered or serving stops.
func (s *stdioStreams) drain() {
	for {
		s.mu.Lock()
		n := len(s.pending)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-s.changed:
		case <-s.ctx.Done():
			return
		}
	}
}

// answerError writes a JSON-RPC error for a line the SDK never sees.
func (s *stdioStreams) answerError(id *jsonrpc.ID, code int64, message string) {
	var rawID any
	if id != nil && id.IsValid() {
		rawID = id.Raw()
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rawID, "error": map[string]any{"code": code, "message": message}})
	if err != nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = s.out.Write(append(b, '\n'))
}

// Write passes one message of the SDK's on (it writes each in one call)
// and counts the answers in it.
func (w stdioWriter) Write(p []byte) (int, error) {
	s := w.s
	s.wmu.Lock()
	n, err := s.out.Write(p)
	s.wmu.Unlock()
	s.mu.Lock()
	if len(s.pending) > 0 {
		msg := gjson.ParseBytes(p)
		answer := func(m gjson.Result) {
			if m.Get("method").Exists() {
				return // a request or notification of ours
			}
			if id, ok := idOf(m.Get("id")); ok {
				s.answeredLocked(id)
			}
		}
		if msg.IsArray() {
			msg.ForEach(func(_, m gjson.Result) bool { answer(m); return true })
		} else {
			answer(msg)
		}
	}
	s.mu.Unlock()
	return n, err
}
