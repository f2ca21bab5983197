package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// The tasks extension (io.modelcontextprotocol/tasks, revision 2026-07-28
// of the extension): a tools/call of a client that declares the extension
// in its request's capabilities, and that has not finished within
// TaskAfter, is answered with a task (resultType "task") instead of its
// result; the call runs on in the host's table of background calls
// (BackgroundHost: the engine's core/async), and the client follows it
// with tasks/get, answers its questions with tasks/update and stops it
// with tasks/cancel. A task is not bound to a session or a connection:
// a client that reconnects (or any request that names the task's id,
// which is unguessable, past the listener's bearer token) follows it on.

// TasksExtension names the extension in capabilities.
const TasksExtension = "io.modelcontextprotocol/tasks"

// codeMissingCapability is the extension's "Missing required client
// capability" error.
const codeMissingCapability = -32021

// metaTask marks, in a tool handler's result, a call that became a task;
// the middleware answers the task in its place.
const metaTask = "clara/task"

// Defaults of the task settings.
const (
	DefaultTaskAfter    = 2 * time.Second
	DefaultTaskTTL      = time.Hour
	taskPollIntervalMS  = 1000
	taskStatusWorking   = "working"
	taskStatusInput     = "input_required"
	taskStatusCompleted = "completed"
	taskStatusCancelled = "cancelled"
	taskStatusFailed    = "failed"
)

// BackgroundHost is a Host that runs calls in the background, in a table of
// its own (the engine's core/async), for tasks.
type BackgroundHost interface {
	Host
	// Background starts run on a goroutine of the host's, with ctx's
	// values but not its end, and returns its handle; it refuses past the
	// table's bounds.
	Background(ctx context.Context, tool string, run func(ctx context.Context) []byte) (handle int64, err error)
	// Collect waits at most timeout (0: not at all) or until ctx ends for
	// the call's bytes; done is false while it runs. Once done the handle
	// is spent. A cancelled call's bytes are not run's.
	Collect(ctx context.Context, handle int64, timeout time.Duration) (out []byte, done bool, err error)
	// CancelBackground cancels the call.
	CancelBackground(handle int64) error
}

// task is one tools/call followed as a task.
type task struct {
	id     string
	handle int64

	mu      sync.Mutex
	created time.Time
	updated time.Time
	status  string
	message string
	result  json.RawMessage // completed: the CallToolResult
	failure *jsonrpc.Error  // failed
	pending *question       // input_required: the question the client is to answer
	lastID  int
	asked   chan struct{} // closed at the first question, to end the wait for the result
	expiry  *time.Timer
}

// tasks holds the tasks.
type tasks struct {
	mu  sync.Mutex
	m   map[string]*task
	ttl time.Duration
}

// wantsTasks reports whether a request's capabilities declare the
// extension.
func wantsTasks(caps *sdk.ClientCapabilities) bool {
	if caps == nil || caps.Extensions == nil {
		return false
	}
	_, ok := caps.Extensions[TasksExtension]
	return ok
}

// ask is the task's way to its client: the question waits in tasks/get
// until a tasks/update answers it.
func (t *task) ask(ctx context.Context, req sdk.InputRequest) (sdk.InputResponse, error) {
	q := &question{req: req, answer: make(chan sdk.InputResponse, 1)}
	t.mu.Lock()
	t.lastID++
	q.id = "q" + strconv.Itoa(t.lastID)
	t.pending, t.status, t.updated = q, taskStatusInput, time.Now()
	select {
	case <-t.asked:
	default:
		close(t.asked)
	}
	t.mu.Unlock()
	select {
	case a := <-q.answer:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runAsTask runs a tool call that may become a task: it waits TaskAfter
// (or until the call asks a question) for the result, which it answers
// as usual; otherwise it answers the task.
func (s *Server) runAsTask(ctx context.Context, bh BackgroundHost, req *sdk.CallToolRequest, caps *sdk.ClientCapabilities,
	session string, run func(ctx context.Context) *sdk.CallToolResult) (*sdk.CallToolResult, error) {
	t := &task{id: rand.Text(), status: taskStatusWorking, asked: make(chan struct{})}
	t.created, t.updated = time.Now(), time.Now()
	callCtx := ctx
	if canElicitForm(caps) {
		callCtx = context.WithValue(callCtx, elicitKey{}, askClient(t.ask).elicitor())
	}
	if caps != nil && caps.Sampling != nil {
		callCtx = context.WithValue(callCtx, sampleKey{}, askClient(t.ask).sampler(caps.Sampling.Tools != nil))
	}
	release := s.holds.hold(session)
	handle, err := bh.Background(callCtx, req.Params.Name, func(ctx context.Context) []byte {
		defer release()
		stop := context.AfterFunc(s.currentStopCtx(), func() { _ = bh.CancelBackground(t.handle) })
		defer stop()
		b, err := json.Marshal(run(ctx))
		if err != nil {
			b, _ = json.Marshal(errorResult(protocol.InternalError(err)))
		}
		return b
	})
	if err != nil {
		release()
		return errorResult(protocol.Errorf(protocol.RateLimited, "%v", err)), nil
	}
	t.handle = handle
	// The wait ends at TaskAfter, or at the call's first question: a
	// question makes the task at once (its client answers it through
	// tasks/get and tasks/update).
	wait, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // only waits: nothing here can panic
		select {
		case <-t.asked:
			cancel()
		case <-wait.Done():
		}
	}()
	out, done, err := bh.Collect(wait, handle, s.opts.TaskAfter)
	if err != nil {
		return errorResult(protocol.Errorf(protocol.Internal, "%v", err)), nil
	}
	if done {
		var res sdk.CallToolResult
		if err := json.Unmarshal(out, &res); err != nil {
			return errorResult(protocol.Errorf(protocol.Internal, "the call's result: %v", err)), nil
		}
		return &res, nil
	}
	if ctx.Err() != nil { // the client left before the task was made
		_ = bh.CancelBackground(handle)
		_, _, _ = bh.Collect(context.Background(), handle, 0)
		return nil, ctx.Err()
	}
	s.tasks.add(t, func() { s.expire(bh, t) })
	return &sdk.CallToolResult{Meta: sdk.Meta{metaTask: t.id}, Content: []sdk.Content{}}, nil
}

func (k *tasks) add(t *task, expire func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]*task{}
	}
	k.m[t.id] = t
	t.mu.Lock()
	t.expiry = time.AfterFunc(k.ttl, expire)
	t.mu.Unlock()
}

func (k *tasks) get(id string) *task {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[id]
}

func (k *tasks) remove(id string) {
	k.mu.Lock()
	delete(k.m, id)
	k.mu.Unlock()
}

// all lists the tasks (Stop cancels them).
func (k *tasks) all() []*task {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*task, 0, len(k.m))
	for _, t := range k.m {
		out = append(out, t)
	}
	return out
}

// expire forgets a task whose time to live has passed, cancelling it if it
// still runs.
func (s *Server) expire(bh BackgroundHost, t *task) {
	defer func() {
		if r := recover(); r != nil {
			logPanic(s.log, "a task's expiry", r)
		}
	}()
	s.tasks.remove(t.id)
	s.cancelTask(bh, t, "the task's time to live (mcp.task_ttl_ms) passed")
}

// refresh brings a task's status up to date with its call.
func (s *Server) refresh(ctx context.Context, bh BackgroundHost, t *task) {
	t.mu.Lock()
	terminal := t.status == taskStatusCompleted || t.status == taskStatusCancelled || t.status == taskStatusFailed
	t.mu.Unlock()
	if terminal {
		return
	}
	out, done, err := bh.Collect(ctx, t.handle, 0)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil:
		t.status, t.failure = taskStatusFailed, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task's result is gone: " + err.Error()}
		t.message, t.updated = t.failure.Message, time.Now()
	case done && t.status != taskStatusCancelled:
		t.status, t.result, t.pending, t.updated = taskStatusCompleted, json.RawMessage(out), nil, time.Now()
	}
}

// cancelTask cancels a task that has not ended, saying why.
func (s *Server) cancelTask(bh BackgroundHost, t *task, why string) {
	t.mu.Lock()
	if t.status == taskStatusCompleted || t.status == taskStatusCancelled || t.status == taskStatusFailed {
		t.mu.Unlock()
		return
	}
	t.status, t.message, t.pending, t.updated = taskStatusCancelled, why, nil, time.Now()
	t.mu.Unlock()
	if err := bh.CancelBackground(t.handle); err == nil {
		_, _, _ = bh.Collect(context.Background(), t.handle, 0) // the handle spent
	}
}

// The extension's wire shapes.

type taskIDParams struct {
	sdk.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses sdk.InputResponseMap `json:"inputResponses,omitempty"`
}

type taskWire struct {
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          int64               `json:"ttlMs"`
	PollIntervalMs int                 `json:"pollIntervalMs"`
	InputRequests  sdk.InputRequestMap `json:"inputRequests,omitempty"`
	Result         json.RawMessage     `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// taskResult answers tools/call with a task, and tasks/get with one.
type taskResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
	taskWire
}

// ackResult answers tasks/update and tasks/cancel.
type ackResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

func (s *Server) wire(t *task, detailed bool) taskWire {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := taskWire{TaskID: t.id, Status: t.status, StatusMessage: t.message,
		CreatedAt: t.created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		TTLMs: s.tasks.ttl.Milliseconds(), PollIntervalMs: taskPollIntervalMS}
	if !detailed {
		return w
	}
	switch t.status {
	case taskStatusInput:
		if t.pending != nil {
			w.InputRequests = sdk.InputRequestMap{t.pending.id: t.pending.req}
		}
	case taskStatusCompleted:
		w.Result = t.result
	case taskStatusFailed:
		w.Error = t.failure
	}
	return w
}

// taskMiddleware answers a tools/call that became a task with the task.
func (s *Server) taskMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" || err != nil {
			return res, err
		}
		r, ok := res.(*sdk.CallToolResult)
		if !ok || r == nil || r.Meta == nil {
			return res, err
		}
		id, ok := r.Meta[metaTask].(string)
		if !ok {
			return res, err
		}
		t := s.tasks.get(id)
		if t == nil {
			return errorResult(protocol.Errorf(protocol.Internal, "the task vanished")), nil
		}
		return &taskResult{ResultType: "task", taskWire: s.wire(t, false)}, nil
	}
}

// declaresTasks reads the tasks extension in a request's own _meta.
func declaresTasks(meta sdk.Meta) bool {
	raw, ok := meta[sdk.MetaKeyClientCapabilities]
	if !ok {
		return false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return false
	}
	var caps sdk.ClientCapabilities
	return json.Unmarshal(b, &caps) == nil && wantsTasks(&caps)
}

var errMissingTasks = func() error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: codeMissingCapability, Message: "Missing required client capability", Data: data}
}

func taskNotFound() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Failed to retrieve task: Task not found"}
}

// addTaskMethods serves tasks/get, tasks/update and tasks/cancel.
func (s *Server) addTaskMethods(bh BackgroundHost) {
	guard := func(name string, f func(ctx context.Context, p *taskIDParams) (sdk.Result, error)) func(ctx context.Context, _ *sdk.ServerSession, p *taskIDParams) (sdk.Result, error) {
		return func(ctx context.Context, _ *sdk.ServerSession, p *taskIDParams) (res sdk.Result, err error) {
			defer func() {
				if r := recover(); r != nil {
					logPanic(s.log, name, r)
					res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
				}
			}()
			if p == nil || !declaresTasks(p.Meta) {
				return nil, errMissingTasks()
			}
			return f(ctx, p)
		}
	}
	must := func(err error) {
		if err != nil {
			logf(s.log, logging.Error, "%v", err)
		}
	}
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/get", guard("tasks/get", func(ctx context.Context, p *taskIDParams) (sdk.Result, error) {
		t := s.tasks.get(p.TaskID)
		if t == nil {
			return nil, taskNotFound()
		}
		s.refresh(ctx, bh, t)
		return &taskResult{ResultType: "complete", taskWire: s.wire(t, true)}, nil
	})))
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/update", guard("tasks/update", func(_ context.Context, p *taskIDParams) (sdk.Result, error) {
		t := s.tasks.get(p.TaskID)
		if t == nil {
			return nil, taskNotFound()
		}
		t.mu.Lock()
		if q := t.pending; q != nil {
			if a, ok := p.InputResponses[q.id]; ok && a != nil {
				t.pending, t.status, t.updated = nil, taskStatusWorking, time.Now()
				q.answer <- a
			}
		}
		t.mu.Unlock() // responses to keys not outstanding are ignored, as the extension asks
		return &ackResult{ResultType: "complete"}, nil
	})))
	must(sdk.AddReceivingCustomMethod(s.mcp, "tasks/cancel", guard("tasks/cancel", func(_ context.Context, p *taskIDParams) (sdk.Result, error) {
		t := s.tasks.get(p.TaskID)
		if t == nil {
			return nil, taskNotFound()
		}
		s.cancelTask(bh, t, "cancelled by the client")
		return &ackResult{ResultType: "complete"}, nil
	})))
}
