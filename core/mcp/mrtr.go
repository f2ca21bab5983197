package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/protocol"
)

// Multi-round-trip requests (revision 2026-07-28, SEP-2322): a server no
// longer sends requests of its own (elicitation/create,
// sampling/createMessage); a tools/call that needs the client's input
// answers with resultType "input_required", the input requests and an
// opaque requestState, and the client calls again with the same
// arguments, its inputResponses and that requestState.
//
// Clara's tools do not start over: a tool that asks (ask_user, the
// approvals, a chat on the client's model) blocks where it asks. So the
// call runs on, parked, between the rounds: the first tools/call starts
// it on a context of its own and answers with its first question; the
// retry that names the parked call hands it the answer and waits for its
// next question or its result. A parked call whose client does not come
// back within ParkTimeout is cancelled; at most MaxParked are parked at
// once (a call beyond is answered with an error result).

// Defaults of the parking.
const (
	DefaultParkTimeout = 10 * time.Minute
	DefaultMaxParked   = 256
)

// question is one input a running call needs from its client.
type question struct {
	id     string
	req    sdk.InputRequest
	answer chan sdk.InputResponse // buffered: the answer never waits for a reader
}

// parkedCall is a tools/call of a 2026-07-28 client running between its
// rounds.
type parkedCall struct {
	token     string
	questions chan *question           // the call's questions, one at a time
	done      chan *sdk.CallToolResult // buffered: the result never waits for a reader
	cancel    context.CancelFunc       // ends the call
	lastID    int

	pending *question   // asked of the client, not answered yet
	expiry  *time.Timer // while parked
}

// parking holds the calls between their rounds.
type parking struct {
	mu      sync.Mutex
	calls   map[string]*parkedCall
	max     int
	timeout time.Duration
}

func newParking(max int, timeout time.Duration) *parking {
	if max <= 0 {
		max = DefaultMaxParked
	}
	if timeout <= 0 {
		timeout = DefaultParkTimeout
	}
	return &parking{calls: map[string]*parkedCall{}, max: max, timeout: timeout}
}

// usesInputRequired reports whether a request comes from a client of
// 2026-07-28 or later, which takes input_required results.
func usesInputRequired(version string) bool { return version >= "2026-07-28" }

// ask is the asking side: the running call hands its question over and
// waits for the answer (or for its context to end).
func (p *parkedCall) ask(ctx context.Context, req sdk.InputRequest) (sdk.InputResponse, error) {
	q := &question{req: req, answer: make(chan sdk.InputResponse, 1)}
	select {
	case p.questions <- q:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-q.answer:
		if a == nil {
			return nil, errors.New("the MCP client sent no answer to the question")
		}
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// askClient is how a call that waits on its client puts a request to it:
// a parked call of a 2026-07-28 client (an input_required round) or a
// task (tasks/get and tasks/update).
type askClient func(ctx context.Context, req sdk.InputRequest) (sdk.InputResponse, error)

// elicitor is the call's ElicitFunc: its question goes to the client as
// an input request.
func (ask askClient) elicitor() ElicitFunc {
	return func(ctx context.Context, message string, schema json.RawMessage) (string, json.RawMessage, error) {
		var requested any
		if len(schema) > 0 {
			requested = schema
		}
		a, err := ask(ctx, &sdk.ElicitParams{Mode: "form", Message: message, RequestedSchema: requested})
		if err != nil {
			return "", nil, err
		}
		res, ok := a.(*sdk.ElicitResult)
		if !ok {
			return "", nil, fmt.Errorf("the MCP client answered the question with %T, not an elicitation result", a)
		}
		return elicitAnswer(res)
	}
}

// sampler is the call's SampleFunc: its request goes to the client as an
// input request.
func (ask askClient) sampler(withTools bool) SampleFunc {
	return func(ctx context.Context, raw []byte) ([]byte, error) {
		var params sdk.CreateMessageWithToolsParams
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, fmt.Errorf("sampling request: %v", err)
		}
		if len(params.Tools) > 0 && !withTools {
			return nil, errors.New("the MCP client's sampling takes no tools (it did not declare sampling.tools); ask without allow_tools")
		}
		a, err := ask(ctx, &params)
		if err != nil {
			return nil, err
		}
		return json.Marshal(a)
	}
}

// startParked runs a tool call of a 2026-07-28 client on a context of its
// own (values from ctx, its end from stop and the call), so that it runs
// on between the client's rounds, and waits for its first question or
// its result.
func (s *Server) startParked(ctx context.Context, req *sdk.CallToolRequest, caps *sdk.ClientCapabilities,
	run func(ctx context.Context) *sdk.CallToolResult) (*sdk.CallToolResult, error) {
	p := &parkedCall{questions: make(chan *question), done: make(chan *sdk.CallToolResult, 1)}
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	stopAfter := context.AfterFunc(s.currentStopCtx(), cancel)
	if canElicitForm(caps) {
		callCtx = context.WithValue(callCtx, elicitKey{}, askClient(p.ask).elicitor())
	}
	if caps != nil && caps.Sampling != nil {
		callCtx = context.WithValue(callCtx, sampleKey{}, askClient(p.ask).sampler(caps.Sampling.Tools != nil))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		stopAfter()
		return errorResult(protocol.Errorf(protocol.ToolFailed, "the MCP server is closing")), nil
	}
	s.wg.Add(1)
	s.mu.Unlock()
	release := s.holds.hold(s.sessionName(req.Session))
	go func() {
		defer s.wg.Done()
		defer release()
		defer stopAfter()
		defer cancel()
		var res *sdk.CallToolResult
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "a parked tool call", r)
				res = errorResult(protocol.InternalError(nil))
			}
			p.done <- res
		}()
		res = run(callCtx)
	}()
	return s.await(ctx, p)
}

// await waits for the call's next question (parking it and answering
// input_required) or its result. When the client's request ends first,
// the call is cancelled.
func (s *Server) await(ctx context.Context, p *parkedCall) (*sdk.CallToolResult, error) {
	select {
	case res := <-p.done:
		return res, nil
	case q := <-p.questions:
		p.lastID++
		q.id = "q" + strconv.Itoa(p.lastID)
		p.pending = q
		if err := s.parking.park(p); err != nil {
			p.cancel()
			return errorResult(protocol.Errorf(protocol.ToolFailed, "%v", err)), nil
		}
		res := &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{q.id: q.req}, RequestState: p.token}
		return res, nil
	case <-ctx.Done():
		p.cancel()
		return nil, ctx.Err()
	}
}

// resume is a client's retry of a parked call: its answer goes to the
// call, which is then awaited again.
func (s *Server) resume(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p := s.parking.take(req.Params.RequestState)
	if p == nil {
		return errorResult(protocol.Errorf(protocol.InvalidRequest,
			"requestState names no call waiting for input (it ended, was cancelled, or waited longer than %s)", s.parking.timeout)), nil
	}
	q := p.pending
	a, ok := req.Params.InputResponses[q.id]
	if !ok || a == nil {
		// Not answered: ask again.
		if err := s.parking.park(p); err != nil {
			p.cancel()
			return errorResult(protocol.Errorf(protocol.ToolFailed, "%v", err)), nil
		}
		return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{q.id: q.req}, RequestState: p.token}, nil
	}
	p.pending = nil
	q.answer <- a
	return s.await(ctx, p)
}

// park keeps p until its client's retry, under a new token, for at most
// the parking's timeout.
func (k *parking) park(p *parkedCall) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.calls) >= k.max {
		return fmt.Errorf("%d tool calls are already waiting for their clients' input (mcp.max_waiting_calls); this one is cancelled", k.max)
	}
	p.token = rand.Text()
	k.calls[p.token] = p
	token := p.token
	p.expiry = time.AfterFunc(k.timeout, func() {
		if q := k.take(token); q != nil {
			q.cancel()
		}
	})
	return nil
}

// take removes and returns the call parked under token, nil if none: only
// one retry can have it.
func (k *parking) take(token string) *parkedCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.calls[token]
	if p == nil {
		return nil
	}
	delete(k.calls, token)
	p.expiry.Stop()
	return p
}

// cancelAll cancels every parked call (Stop).
func (k *parking) cancelAll() {
	k.mu.Lock()
	calls := k.calls
	k.calls = map[string]*parkedCall{}
	k.mu.Unlock()
	for _, p := range calls {
		p.expiry.Stop()
		p.cancel()
	}
}
