// Command capi is libclara.so: the //export functions behind clara.h.
//
// Each export recovers panics, turns C strings into byte slices, calls the
// core and copies the answer into C memory. Nothing else belongs here: the
// public names and their const-correct prototypes live in shim.c, and all
// behaviour lives in core/.
package main

/*
// -Wno-unused-parameter: before Go 1.26 the wrappers cgo generates for
// exports have unused parameters, and these flags apply to them too.
#cgo CFLAGS: -I${SRCDIR}/../include -Wall -Wextra -Werror -Wno-unused-parameter
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
	"github.com/clara-lib/clara/core/toolbox"
)

func main() {}

// engine is the process's Clara, built from the environment when the
// library is loaded.
var engine = core.FromEnvironment(cGetenv, os.Stderr)

// cGetenv reads the C environment: Go's os.Getenv reads a copy taken when
// the library was loaded, and a host may setenv an API key later.
func cGetenv(name string) string {
	cname := copyOut([]byte(name))
	if cname == nil {
		return ""
	}
	defer C.shim_free(unsafe.Pointer(cname))
	v := C.getenv(cname)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}

// jsonGetMaxDepth bounds documents read by clara_json_get. It is not
// limits.max_depth: an envelope is one level deeper than its request, and
// reading must not depend on the request limits in force. Neither the scan
// nor a gjson path (modifiers are disabled) recurses over the document.
const jsonGetMaxDepth = 1 << 20

// bytesOf borrows C memory as a byte slice; nil for a NULL pointer.
func bytesOf(p *C.char, n C.size_t) []byte {
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

// copyOut returns a malloc'd copy of b (NULL if malloc fails).
func copyOut(b []byte) *C.char {
	if len(b) == 0 {
		return C.shim_copy_out(nil, 0)
	}
	return C.shim_copy_out((*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b)))
}

// guard is deferred first in every export: a panic that escaped the core
// is logged with its stack and onPanic, when not nil, sets the answer.
func guard(where string, onPanic func()) {
	if r := recover(); r != nil {
		logging.Panic(engine.Logger(), where, r)
		if onPanic != nil {
			onPanic()
		}
	}
}

// internalEnvelope is the answer of an export whose panic escaped the core.
func internalEnvelope() *C.char {
	return copyOut(protocol.AppendError(nil, nil, protocol.InternalError(nil)))
}

// answerInto writes an envelope straight into the caller's C buffer dst
// (dstCap bytes, one kept for the NUL) through appendTo, and returns dst
// when it fit. Only an envelope too long for it moves to Go memory, and
// then to a fresh malloc'd copy; dst is then left to the caller. No Go
// buffer is shared between calls, so threads calling at once touch no
// common memory here.
func answerInto(dst *C.char, dstCap C.size_t, appendTo func([]byte) []byte) *C.char {
	var cbuf []byte
	if dst != nil && dstCap > 1 {
		cbuf = unsafe.Slice((*byte)(unsafe.Pointer(dst)), int(dstCap))[: 0 : int(dstCap)-1]
	}
	b := appendTo(cbuf)
	if cbuf != nil && len(b) > 0 && unsafe.SliceData(b) == unsafe.SliceData(cbuf) {
		unsafe.Slice((*byte)(unsafe.Pointer(dst)), int(dstCap))[len(b)] = 0
		return dst
	}
	return copyOut(b)
}

// claraGoEvaluate answers req, into the C buffer dst when the envelope
// fits (see answerInto).
//
//export claraGoEvaluate
func claraGoEvaluate(req *C.char, n C.size_t, dst *C.char, dstCap C.size_t) (out *C.char) {
	defer guard("clara_evaluate", func() { out = internalEnvelope() })
	return answerInto(dst, dstCap, func(b []byte) []byte { return engine.AppendEvaluate(b, bytesOf(req, n)) })
}

// The version comes from the core, its one source; clara.h's macros are
// checked against it by a test.
var versionC = C.CString(core.Version) // static for the life of the process

//export claraGoVersion
func claraGoVersion() *C.char { return versionC }

//export claraGoVersionNumber
func claraGoVersionNumber() C.int { return C.int(core.VersionNumber) }

//export claraGoConfigure
func claraGoConfigure(cfg *C.char, n C.size_t) (out *C.char) {
	defer guard("clara_configure", func() { out = internalEnvelope() })
	return copyOut(engine.Configure(bytesOf(cfg, n)))
}

//export claraGoReset
func claraGoReset() (out *C.char) {
	defer guard("clara_reset", func() { out = internalEnvelope() })
	return copyOut(engine.Reset())
}

// claraGoEmit answers an event, into the C buffer dst when the envelope
// fits (see answerInto).
//
//export claraGoEmit
func claraGoEmit(event *C.char, n C.size_t, dst *C.char, dstCap C.size_t) (out *C.char) {
	defer guard("clara_emit", func() { out = internalEnvelope() })
	return answerInto(dst, dstCap, func(b []byte) []byte { return engine.AppendEmit(b, bytesOf(event, n)) })
}

//export claraGoJSONGet
func claraGoJSONGet(doc *C.char, n C.size_t, path *C.char, pn C.size_t, text **C.char, length *C.size_t) (code C.int) {
	defer guard("clara_json_get", func() { code = -C.CLARA_EINTERNAL })
	kind, value, err := protocol.Get(bytesOf(doc, n), string(bytesOf(path, pn)), jsonGetMaxDepth)
	if err != nil {
		return -C.CLARA_EINVAL
	}
	if kind == protocol.KindMissing {
		return C.CLARA_JSON_MISSING
	}
	p := copyOut([]byte(value))
	if p == nil {
		return -C.CLARA_ENOMEM
	}
	*text = p
	if length != nil {
		*length = C.size_t(len(value))
	}
	return C.int(kind)
}

//export claraGoAuditReopen
func claraGoAuditReopen() (rc C.int) {
	defer guard("clara_audit_reopen", func() { rc = -1 })
	if err := engine.ReopenAudit(); err != nil {
		engine.Logger().Logf(logging.Error, "clara_audit_reopen: %v", err)
		return -1
	}
	return 0
}

//export claraGoTelemetryFlush
func claraGoTelemetryFlush(timeoutMS C.int) (rc C.int) {
	defer guard("clara_telemetry_flush", func() { rc = -1 })
	if timeoutMS < 0 {
		timeoutMS = 0
	}
	if err := engine.FlushTelemetry(time.Duration(timeoutMS) * time.Millisecond); err != nil {
		engine.Logger().Logf(logging.Warn, "clara_telemetry_flush: %v", err)
		return -1
	}
	return 0
}

//export claraGoSetLogHandler
func claraGoSetLogHandler(fn C.clara_log_fn, userdata C.uintptr_t, minLevel C.int) {
	defer guard("clara_set_log_handler", nil)
	if fn == nil {
		engine.SetLogSink(nil, 0)
		return
	}
	min := logging.Level(minLevel)
	if min < logging.Debug {
		min = logging.Debug
	}
	if min > logging.Off {
		min = logging.Off
	}
	engine.SetLogSink(func(level logging.Level, message string) {
		// A C copy, so that the handler never reads Go memory (which tools
		// like valgrind cannot follow).
		msg := copyOut([]byte(message))
		if msg == nil {
			return
		}
		defer C.shim_free(unsafe.Pointer(msg))
		C.shim_call_log(fn, userdata, C.int(level), msg)
	}, min)
}

//export claraGoSetEventHandler
func claraGoSetEventHandler(fn C.clara_event_fn, userdata C.uintptr_t) {
	defer guard("clara_set_event_handler", nil)
	if fn == nil {
		engine.SetEventSink(nil)
		return
	}
	engine.SetEventSink(func(event []byte) {
		defer guard("the event handler", nil)
		ev := copyOut(event) // C memory, as for the log handler
		if ev == nil {
			return
		}
		defer C.shim_free(unsafe.Pointer(ev))
		C.shim_call_event(fn, userdata, ev)
	})
}

// claraGoSetInputHandler installs fn as the engine's input handler. The
// request is handed over in C memory and the answer, malloc'd by the host,
// is copied into Go memory and freed at once, so nothing is left behind
// when the call stopped waiting for it.
//
//export claraGoSetInputHandler
func claraGoSetInputHandler(fn C.clara_input_fn, userdata C.uintptr_t) {
	defer guard("clara_set_input_handler", nil)
	if fn == nil {
		engine.SetInputHandler(nil)
		return
	}
	engine.SetInputHandler(func(request []byte) (string, bool) {
		req := copyOut(request)
		if req == nil {
			return "", false
		}
		defer C.shim_free(unsafe.Pointer(req))
		answer := C.shim_call_input(fn, userdata, req)
		if answer == nil {
			return "", false
		}
		defer C.shim_free(unsafe.Pointer(answer))
		return C.GoString(answer), true
	})
}

// claraGoSetApprovalHandler installs fn as the engine's approver (issue
// 28). The request is handed over in C memory; the decision, malloc'd by
// the host, is copied into Go memory and freed at once. NULL leaves the
// approval pending (approval_decide, or the timeout). A decision that
// cannot be read rejects the call: nothing runs on an answer Clara does
// not understand.
//
//export claraGoSetApprovalHandler
func claraGoSetApprovalHandler(fn C.clara_approval_fn, userdata C.uintptr_t) {
	defer guard("clara_set_approval_handler", nil)
	if fn == nil {
		engine.SetApprover(nil)
		return
	}
	engine.SetApprover(core.ApproverFunc(func(_ context.Context, r *core.ApprovalRequest) (core.ApprovalDecision, bool) {
		req := copyOut(r.JSON())
		if req == nil {
			return core.ApprovalDecision{Reason: "out of memory asking the approval handler"}, true
		}
		defer C.shim_free(unsafe.Pointer(req))
		answer := C.shim_call_approval(fn, userdata, req)
		if answer == nil {
			return core.ApprovalDecision{}, false
		}
		defer C.shim_free(unsafe.Pointer(answer))
		d, err := core.ParseApprovalDecision([]byte(C.GoString(answer)))
		if err != nil {
			engine.Logger().Logf(logging.Warn, "approval %d: the approval handler's answer: %v; the call is rejected", r.ID, err)
			return core.ApprovalDecision{Reason: "the approval handler's answer could not be read: " + err.Error()}, true
		}
		return d, true
	}))
}

// ---- C tools --------------------------------------------------------------

// toolCall collects what a running C tool reports through its clara_call.
// C sees the call as an integer id, never a Go pointer.
type toolCall struct {
	mu     sync.Mutex
	id     uintptr        // the call's id; a toolCall is reused for other calls once done
	key    atomic.Uintptr // id, for callTable's lookups without mu
	done   bool
	result []byte
	hasErr bool
	errMsg string
	tool   *toolbox.Tool // released when an abandoned job ends
	// The call's scope, which clara_call_evaluate's requests inherit: made
	// into caller on the first such request (most tools make none).
	ctx    context.Context
	call   toolbox.Call // without its arguments
	caller *core.Caller
	// What the tool reports from its own thread, written by C (shim.h):
	// C memory, taken with the toolCall and given back after it (a
	// cleanup; report.c says why from slabs rather than malloc). A
	// Go pointer passed to C is checked for Go pointers inside, which cost
	// a C tool's call 350 instructions for this struct; a C pointer is let
	// through at once.
	res    *C.struct_shim_result
	status C.int
	// out receives a worker's result (shim_call_worker) when the call has
	// no room of its request's; kept with the toolCall from call to call,
	// up to maxKeptOut bytes.
	out []byte
	// toldToStop: clara_call_cancelled answered 1 because the call's
	// context had ended; whatever the tool answers after that is dropped
	// (finishCall), even when its caller woke too late to have given up.
	toldToStop bool
	// room: the request's memory for the call (toolbox.Call.Room), nil
	// when it has none. A result goes to room.Out and stays there (read
	// until the answer is written): no copy of its own to allocate.
	room *toolbox.CallRoom
}

// maxKeptOut bounds the result buffer a reused toolCall keeps.
const maxKeptOut = 16 << 10

// toolCalls of calls that ended in time are reused: a C tool call then
// allocates no toolCall. Who looked one up by id checks the id again under
// its lock (running), since it may have gone on to another call.
var toolCallPool = sync.Pool{New: func() any { return new(toolCall) }}

// newToolCall: nil when there is no memory for the reports.
func newToolCall(ctx context.Context, call toolbox.Call, id uintptr) *toolCall {
	tc := toolCallPool.Get().(*toolCall)
	if tc.res == nil {
		if tc.res = C.shim_result_new(); tc.res == nil {
			return nil
		}
		runtime.AddCleanup(tc, releaseResult, tc.res)
	}
	call.Arguments = nil // borrowed; the scope needs the rest
	tc.mu.Lock()
	tc.id, tc.done = id, false
	tc.result, tc.hasErr, tc.errMsg = nil, false, ""
	tc.tool, tc.room = call.Tool, call.Room
	tc.ctx, tc.call, tc.caller = ctx, call, nil
	*tc.res = C.struct_shim_result{call: C.uintptr_t(id)}
	if call.Tool == nil || call.Tool.Returns != toolbox.ReturnsString {
		tc.res.check_json = 1 // its JSON is checked in C as it is reported (shim_json_compact)
	}
	tc.status = 0
	tc.mu.Unlock()
	return tc
}

// releaseResult gives a collected toolCall's shim_result back to C,
// freeing any report it still holds first.
func releaseResult(res *C.struct_shim_result) {
	if res.result != nil || res.error != nil {
		C.shim_result_clear(res)
	}
	C.shim_result_release(res)
}

// shimResults: how many shim_results toolCalls hold, and how many C has
// made (tests).
func shimResults() (out, made int) {
	var o, m C.size_t
	C.shim_result_counts(&o, &m)
	return int(o), int(m)
}

// recycle gives back a toolCall whose call has ended in time (never one
// that a worker may still finish).
func (tc *toolCall) recycle() {
	tc.mu.Lock()
	tc.result, tc.ctx, tc.call, tc.caller, tc.tool, tc.room, tc.toldToStop = nil, nil, toolbox.Call{}, nil, nil, nil, false
	if cap(tc.out) > maxKeptOut {
		tc.out = nil
	}
	tc.mu.Unlock()
	toolCallPool.Put(tc)
}

// running: tc is still the call id and its tool has not returned. tc.mu held.
func (tc *toolCall) running(id C.uintptr_t) bool { return !tc.done && tc.id == uintptr(id) }

// callerScope is the scope of the running call id, made once; nil when
// the tool has returned. tc.mu held.
func (tc *toolCall) callerScope(id C.uintptr_t) *core.Caller {
	if !tc.running(id) {
		return nil
	}
	if tc.caller == nil {
		tc.caller = core.CallerOf(tc.ctx, tc.call)
	}
	return tc.caller
}

// callTable maps the ids C tools are given to their running calls. A call
// takes the slot of its id (consecutive ids, consecutive slots), one
// atomic pointer on a cache line of its own, so that storing and deleting
// are a compare-and-swap each (a map under a mutex cost about 500
// instructions a call); a call whose slot is still taken, by an abandoned
// call whose tool runs on, goes to a map under a mutex instead. Who looked
// a call up checks its id again under its lock (running), since it may
// have gone on to another call.
type callTable struct {
	slots [64]callSlot
	mu    sync.Mutex
	more  map[uintptr]*toolCall // calls whose slot was taken; under mu
	nmore atomic.Int32          // len(more): a lookup skips mu when 0
}

type callSlot struct {
	tc atomic.Pointer[toolCall]
	_  [56]byte // a cache line each: calls on other threads take other slots
}

func (t *callTable) slot(id uintptr) *callSlot { return &t.slots[id%uintptr(len(t.slots))] }

func (t *callTable) store(id uintptr, tc *toolCall) {
	tc.key.Store(id)
	if t.slot(id).tc.CompareAndSwap(nil, tc) {
		return
	}
	t.mu.Lock()
	if t.more == nil {
		t.more = make(map[uintptr]*toolCall)
	}
	t.more[id] = tc
	t.nmore.Store(int32(len(t.more)))
	t.mu.Unlock()
}

func (t *callTable) load(id uintptr) *toolCall {
	if tc := t.slot(id).tc.Load(); tc != nil && tc.key.Load() == id {
		return tc
	}
	if t.nmore.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	tc := t.more[id]
	t.mu.Unlock()
	return tc
}

// delete removes tc, the call id, by the one who ends the call.
func (t *callTable) delete(id uintptr, tc *toolCall) {
	if t.slot(id).tc.CompareAndSwap(tc, nil) {
		return
	}
	t.mu.Lock()
	delete(t.more, id)
	t.nmore.Store(int32(len(t.more)))
	t.mu.Unlock()
}

func (t *callTable) loadAndDelete(id uintptr) *toolCall {
	tc := t.load(id)
	if tc != nil {
		t.delete(id, tc)
	}
	return tc
}

var (
	toolCalls  callTable
	nextCallID atomic.Uintptr
	// overdueCalls counts the calls given up on at their deadline whose
	// tool has not returned yet: each holds a worker thread until it does
	// (Clara cannot stop C code). Past limits.max_overdue_calls, calls of
	// C tools are refused instead of each taking one more thread, so that
	// a tool that never returns cannot exhaust the process's threads. The
	// worker may report the end (claraGoJobAbandoned) before the caller
	// counts the call: the count may dip below zero for that moment.
	overdueCalls atomic.Int64
)

// overdueRefusal is why a call of tool is not started, or "" when it may
// be: one atomic load while no call is overdue.
func overdueRefusal(tool *toolbox.Tool) string {
	n := overdueCalls.Load()
	if n <= 0 {
		return ""
	}
	max := int64(engine.Config().Limits.MaxOverdueCalls)
	if n < max {
		return ""
	}
	name := ""
	if tool != nil {
		name = tool.Name
	}
	return fmt.Sprintf("tool %q was not started: %d calls of C or Python tools ran past their deadline and have not "+
		"returned (limits.max_overdue_calls), each holding a thread; calls run again once one of them returns", name, max)
}

// cTool wraps a C function as a self-timed toolbox.Func: the function runs
// on a worker thread of workers.c while the caller waits there, in C, until
// the call's deadline. A call past its deadline is abandoned: the worker
// finishes it later and claraGoJobAbandoned releases the tool then; while
// limits.max_overdue_calls such calls run on, the next is refused before it
// is handed over (overdueCalls). A tool whose descriptor says "on_caller_thread" is called right here instead,
// on the caller's thread: no handoff, and no way to stop waiting for it.
func cTool(fn C.clara_tool_fn, userdata C.uintptr_t) toolbox.Func {
	return func(ctx context.Context, call toolbox.Call) ([]byte, error) {
		var timeout C.longlong
		if d, ok := ctx.Deadline(); ok {
			if timeout = C.longlong(time.Until(d)); timeout <= 0 {
				timeout = 1
			}
		}
		onCaller := call.Tool != nil && call.Tool.OnCallerThread
		if !onCaller {
			if why := overdueRefusal(call.Tool); why != "" {
				return nil, errors.New(why)
			}
		}
		id := nextCallID.Add(1)
		tc := newToolCall(ctx, call, id)
		if tc == nil {
			return nil, errors.New("out of memory starting the call")
		}
		toolCalls.store(id, tc)
		failed := func(why string) ([]byte, error) { // before the tool ran, or with nothing kept of it
			toolCalls.delete(id, tc)
			tc.recycle()
			return nil, errors.New(why)
		}
		// One crossing into C either way: the arguments are copied there,
		// the tool runs, and its reports stay in tc.res (shim.h).
		var argp *C.char
		if len(call.Arguments) > 0 {
			argp = (*C.char)(unsafe.Pointer(&call.Arguments[0]))
		}
		n := C.size_t(len(call.Arguments))
		if onCaller {
			rc := C.shim_call_here(fn, userdata, argp, n, tc.res)
			if tc.res.ran == 0 {
				return failed("out of memory copying the arguments")
			}
			return finishCleared(ctx, tc, id, rc, true)
		}
		// Room for a result about the size of the arguments, in the
		// request's room if it has one; a larger result comes malloc'd.
		// C writes it there before shim_call_worker returns, never after.
		buf := &tc.out
		if tc.room != nil {
			buf = &tc.room.Out
		}
		if want := len(call.Arguments) + 256; cap(*buf) < want && want <= maxKeptOut {
			*buf = make([]byte, want)
		}
		*buf = (*buf)[:cap(*buf)]
		var out *C.char
		if len(*buf) > 0 {
			out = (*C.char)(unsafe.Pointer(&(*buf)[0]))
		}
		switch C.shim_call_worker(fn, userdata, argp, n, timeout, tc.res, &tc.status, out, C.size_t(len(*buf))) {
		case 1:
			return finishCleared(ctx, tc, id, tc.status, false)
		case 0: // abandoned: the tool still runs, and owns the job now
			overdueCalls.Add(1)
			core.HandOnContext(ctx) // it may still make requests in its call
			return nil, toolbox.ErrStillRunning
		case C.SHIM_NO_MEMORY:
			return failed("out of memory starting the call")
		case C.SHIM_NO_MEMORY_RESULT:
			return failed("out of memory keeping the tool's result")
		default:
			return failed("no thread could be started for the call")
		}
	}
}

// finishCleared is finishCall on tc.res, then frees what tc.res holds and
// gives tc back.
func finishCleared(ctx context.Context, tc *toolCall, id uintptr, rc C.int, onCaller bool) ([]byte, error) {
	out, err := finishCall(ctx, tc, id, rc, tc.res, onCaller)
	if tc.res.result != nil || tc.res.error != nil {
		C.shim_result_clear(tc.res)
	}
	tc.recycle()
	return out, err
}

// finishCall ends a call whose tool has returned rc: what it reported is
// the answer, from res (its own thread's reports, kept in C) or else from
// tc (reports from other threads, through Go). A tool that ran on the
// caller's thread (onCaller) is checked against its deadline afterwards:
// past it, its answer is dropped and the call is a timeout, as it would
// have been on a worker thread.
func finishCall(ctx context.Context, tc *toolCall, id uintptr, rc C.int, res *C.struct_shim_result, onCaller bool) ([]byte, error) {
	toolCalls.delete(id, tc)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.done = true
	if res.has_error != 0 {
		tc.hasErr = true
		tc.errMsg = ""
		if res.error != nil {
			tc.errMsg = C.GoString(res.error)
		}
	}
	checked := false // compact, valid JSON (shim_json_compact)
	if res.has_result != 0 {
		tc.result = nil // null
		checked = res.compact != 0
		n := int(res.result_len)
		switch {
		case res.result_in_out != 0 && tc.room != nil:
			tc.result = tc.room.Out[:n:n] // written there by C: it stays
			tc.room.Out = tc.room.Out[:0]
		case res.result_in_out != 0:
			// make and copy, which the compiler turns into one allocation
			// left unzeroed (bytes.Clone's append went through growslice).
			out := tc.out[:n]
			kept := make([]byte, len(out))
			copy(kept, out)
			tc.result = kept
		case res.result != nil && tc.room != nil:
			tc.result = append(tc.room.Out[:0], unsafe.Slice((*byte)(unsafe.Pointer(res.result)), n)...)
			tc.room.Out = tc.result[:0]
			tc.result = tc.result[:n:n]
		case res.result != nil:
			tc.result = C.GoBytes(unsafe.Pointer(res.result), C.int(n))
		}
	}
	if onCaller && ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &protocol.Error{Code: protocol.Timeout, Message: fmt.Sprintf(
				"tool %q ran past its timeout (on the caller's thread, where it cannot be cut short; its answer was dropped)", tc.tool.Name)}
		}
		return nil, ctx.Err()
	}
	if tc.toldToStop {
		// Its caller woke late (a loaded machine): the tool was told the
		// call had ended, so its answer is not the call's.
		return nil, toolbox.ErrAnsweredLate
	}
	switch {
	case tc.hasErr && tc.errMsg != "":
		return nil, errors.New(tc.errMsg)
	case tc.hasErr || rc != 0:
		return nil, fmt.Errorf("tool failed (code %d)", int(rc))
	}
	// The tool is registered with CompactJSON: what C could not vouch for
	// (reports from other threads, whitespace, deep nesting, or invalid)
	// gets the toolbox's own check, and its message.
	if len(tc.result) > 0 && !checked && res.check_json != 0 {
		out, perr := toolbox.CheckJSON(tc.tool.Name, tc.result, engine.Config().Limits.MaxDepth)
		if perr != nil {
			return nil, perr
		}
		return out, nil
	}
	return tc.result, nil
}

// compactInC is shim_json_compact for Go's tests (check_test.go).
func compactInC(b []byte) bool {
	nul := append(b[:len(b):len(b)], 0) // a copy, ended as C strings are
	return C.shim_json_compact((*C.char)(unsafe.Pointer(&nul[0])), C.size_t(len(b))) != 0
}

// claraGoJobAbandoned: the job of a call that timed out has ended (its
// late result is dropped); the tool may now be released.
//
//export claraGoJobAbandoned
func claraGoJobAbandoned(id C.uintptr_t) {
	defer guard("ending an abandoned tool call", nil)
	overdueCalls.Add(-1)
	tc := toolCalls.loadAndDelete(uintptr(id))
	if tc == nil {
		return
	}
	tc.mu.Lock()
	tc.done = true
	tc.mu.Unlock()
	if tc.tool != nil {
		tc.tool.Finished()
	}
}

func lookupCall(id C.uintptr_t) *toolCall {
	tc := toolCalls.load(uintptr(id))
	if tc == nil {
		engine.Logger().Logf(logging.Warn, "clara_call_result/clara_call_error with a call that is not running (ignored)")
	}
	return tc
}

//export claraGoCallResult
func claraGoCallResult(id C.uintptr_t, p *C.char, n C.size_t) {
	defer guard("clara_call_result", nil)
	if tc := lookupCall(id); tc != nil {
		tc.mu.Lock()
		if tc.running(id) {
			tc.result = bytes.Clone(bytesOf(p, n)) // nil for NULL: the result is null
		}
		tc.mu.Unlock()
	}
}

//export claraGoCallError
func claraGoCallError(id C.uintptr_t, p *C.char, n C.size_t) {
	defer guard("clara_call_error", nil)
	if tc := lookupCall(id); tc != nil {
		tc.mu.Lock()
		if tc.running(id) {
			tc.hasErr = true
			tc.errMsg = string(bytesOf(p, n))
		}
		tc.mu.Unlock()
	}
}

// claraGoCallEvaluate answers req, a request made by a running C tool,
// inside that tool's call (core.Engine.AppendEvaluateWithin), into dst
// when it fits. A handle whose tool has returned (or that never was one)
// gets an error envelope.
//
//export claraGoCallEvaluate
func claraGoCallEvaluate(id C.uintptr_t, req *C.char, n C.size_t, dst *C.char, dstCap C.size_t) (out *C.char) {
	defer guard("clara_call_evaluate", func() { out = internalEnvelope() })
	var caller *core.Caller
	if tc := toolCalls.load(uintptr(id)); tc != nil {
		tc.mu.Lock()
		caller = tc.callerScope(id)
		tc.mu.Unlock()
	}
	if caller == nil {
		return copyOut(protocol.AppendError(nil, nil, protocol.Errorf(protocol.InvalidRequest,
			"clara_call_evaluate: the clara_call is not running (a handle is valid only until its tool returns)")))
	}
	return answerInto(dst, dstCap, func(b []byte) []byte { return engine.AppendEvaluateWithin(caller, b, bytesOf(req, n)) })
}

//export claraGoCallProgress
func claraGoCallProgress(id C.uintptr_t, done, total C.double, p *C.char, n C.size_t) {
	defer guard("clara_call_progress", nil)
	tc := lookupCall(id)
	if tc == nil {
		return
	}
	// The MCP client that asked for progress (nil: nobody listens), looked
	// up here: most calls report none, and a lookup in the context cost
	// every call 150 instructions.
	var report core.ProgressFunc
	tc.mu.Lock()
	if tc.running(id) {
		report = core.ProgressOf(tc.ctx)
	}
	tc.mu.Unlock()
	if report != nil {
		report(float64(done), float64(total), string(bytesOf(p, n)))
	}
}

// clientLogLevels are MCP's names of the CLARA_LOG_* levels a tool may log at.
var clientLogLevels = [...]string{C.CLARA_LOG_DEBUG: "debug", C.CLARA_LOG_INFO: "info", C.CLARA_LOG_WARN: "warning", C.CLARA_LOG_ERROR: "error"}

//export claraGoCallLog
func claraGoCallLog(id C.uintptr_t, level C.int, p *C.char, n C.size_t) {
	defer guard("clara_call_log", nil)
	tc := lookupCall(id)
	if tc == nil {
		return
	}
	if level < 0 || int(level) >= len(clientLogLevels) {
		engine.Logger().Logf(logging.Warn, "clara_call_log: level %d is not one of CLARA_LOG_DEBUG to CLARA_LOG_ERROR (message dropped)", int(level))
		return
	}
	var send core.ClientLogFunc
	tc.mu.Lock()
	if tc.running(id) {
		send = core.ClientLogOf(tc.ctx)
	}
	tc.mu.Unlock()
	if send != nil {
		send(clientLogLevels[level], string(bytesOf(p, n)))
	}
}

// claraGoCallSession returns the session of the running call id,
// malloc'd; NULL when the call is not running.
//
//export claraGoCallSession
func claraGoCallSession(id C.uintptr_t) (out *C.char) {
	defer guard("clara_call_session", func() { out = nil })
	tc := toolCalls.load(uintptr(id))
	if tc == nil {
		return nil
	}
	tc.mu.Lock()
	session, ok := tc.call.Session, tc.running(id)
	tc.mu.Unlock()
	if !ok {
		return nil
	}
	return copyOut([]byte(session))
}

// claraGoCallCancelled: 1 when the running call id was cancelled or ran
// past its deadline (its answer will be dropped), or is not running; 0
// while it goes on.
//
//export claraGoCallCancelled
func claraGoCallCancelled(id C.uintptr_t) (stop C.int) {
	defer guard("clara_call_cancelled", func() { stop = 1 })
	tc := toolCalls.load(uintptr(id))
	if tc == nil {
		return 1
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if !tc.running(id) {
		return 1
	}
	if tc.ctx.Err() != nil {
		tc.toldToStop = true
		return 1
	}
	return 0
}

//export claraGoRegisterTool
func claraGoRegisterTool(desc *C.char, n C.size_t, fn C.clara_tool_fn, userdata C.uintptr_t, freeUserdata C.shim_free_fn) (code C.int) {
	release := func() {}
	if freeUserdata != nil {
		release = func() { C.shim_free_userdata(freeUserdata, userdata) }
	}
	defer guard("clara_register_tool", func() { code = -C.CLARA_EINTERNAL })
	if desc == nil || fn == nil {
		release()
		engine.Logger().Logf(logging.Error, "clara_register_tool: the descriptor and the function must not be NULL")
		return -C.CLARA_EINVAL
	}
	// KeepsNothing: cTool hands its context on where it goes past the call
	// (an abandoned call); requests made inside the call do so in core.
	// CompactJSON: cTool checks a JSON result itself, most often in C as
	// the tool reports it (finishCall).
	err := engine.RegisterTool(bytesOf(desc, n), toolbox.ToolOptions{Run: cTool(fn, userdata), SelfTimed: true, PollsDeadline: true,
		CompactJSON: true, KeepsNothing: true, OnRelease: release})
	if err != nil {
		engine.Logger().Logf(logging.Error, "clara_register_tool: %v", err)
		if errors.Is(err, toolbox.ErrBuiltin) {
			return -C.CLARA_EPERM
		}
		return -C.CLARA_EINVAL
	}
	return C.CLARA_OK
}

//export claraGoUnregisterTool
func claraGoUnregisterTool(name *C.char, n C.size_t) (code C.int) {
	defer guard("clara_unregister_tool", func() { code = -C.CLARA_EINTERNAL })
	if name == nil {
		return -C.CLARA_EINVAL
	}
	err := engine.UnregisterTool(string(bytesOf(name, n)))
	switch {
	case err == nil:
		return C.CLARA_OK
	case errors.Is(err, toolbox.ErrBuiltin):
		return -C.CLARA_EPERM
	case errors.Is(err, toolbox.ErrNotFound):
		return -C.CLARA_ENOENT
	}
	return -C.CLARA_EINVAL
}

//export claraGoSetToolLimits
func claraGoSetToolLimits(name *C.char, n C.size_t, limits *C.char, ln C.size_t) (code C.int) {
	defer guard("clara_set_tool_limits", func() { code = -C.CLARA_EINTERNAL })
	perr := engine.SetToolLimits(string(bytesOf(name, n)), bytesOf(limits, ln))
	if perr == nil {
		return C.CLARA_OK
	}
	engine.Logger().Logf(logging.Error, "clara_set_tool_limits: %s", perr.Message)
	switch perr.Code {
	case protocol.UnknownTool:
		return -C.CLARA_ENOENT
	case protocol.Denied:
		return -C.CLARA_EPERM
	case protocol.InvalidArgs, protocol.InvalidRequest:
		return -C.CLARA_EINVAL
	}
	return -C.CLARA_EINTERNAL
}

// ---- Rules of the host -----------------------------------------------------

// claraGoRegisterRule registers a rule whose condition and action are C
// functions (seed 004's Tier 1). Each gets the event in C memory, copied
// for the call and freed after it; the action's answer, malloc'd by the
// host, is copied into Go memory and freed at once.
//
//export claraGoRegisterRule
func claraGoRegisterRule(desc *C.char, n C.size_t, cond C.clara_rule_condition_fn, action C.clara_rule_action_fn,
	userdata C.uintptr_t, freeUserdata C.shim_free_fn) (code C.int) {
	release := func() {}
	if freeUserdata != nil {
		release = func() { C.shim_free_userdata(freeUserdata, userdata) }
	}
	defer guard("clara_register_rule", func() { code = -C.CLARA_EINTERNAL })
	if desc == nil {
		release()
		engine.Logger().Logf(logging.Error, "clara_register_rule: the descriptor must not be NULL")
		return -C.CLARA_EINVAL
	}
	funcs := &rules.HostFuncs{Release: release}
	if cond != nil {
		funcs.Condition = func(_ context.Context, event []byte) (bool, error) {
			ev := copyOut(event)
			if ev == nil {
				return false, errors.New("out of memory for the event")
			}
			defer C.shim_free(unsafe.Pointer(ev))
			rc := C.shim_call_rule_condition(cond, userdata, ev)
			if rc < 0 {
				return false, fmt.Errorf("the host's condition could not tell (it returned %d)", int(rc))
			}
			return rc > 0, nil
		}
	}
	if action != nil {
		funcs.Action = func(_ context.Context, event []byte) ([]byte, error) {
			ev := copyOut(event)
			if ev == nil {
				return nil, errors.New("out of memory for the event")
			}
			defer C.shim_free(unsafe.Pointer(ev))
			out := C.shim_call_rule_action(action, userdata, ev)
			if out == nil {
				return nil, nil
			}
			defer C.shim_free(unsafe.Pointer(out))
			return []byte(C.GoString(out)), nil
		}
	}
	err := engine.RegisterRule(bytesOf(desc, n), funcs)
	if err != nil {
		engine.Logger().Logf(logging.Error, "clara_register_rule: %v", err)
		if errors.Is(err, core.ErrRuleTaken) {
			return -C.CLARA_EPERM
		}
		return -C.CLARA_EINVAL
	}
	return C.CLARA_OK
}

//export claraGoUnregisterRule
func claraGoUnregisterRule(id *C.char, n C.size_t) (code C.int) {
	defer guard("clara_unregister_rule", func() { code = -C.CLARA_EINTERNAL })
	if id == nil {
		return -C.CLARA_EINVAL
	}
	err := engine.UnregisterRule(string(bytesOf(id, n)))
	switch {
	case err == nil:
		return C.CLARA_OK
	case errors.Is(err, core.ErrRuleNotFound):
		return -C.CLARA_ENOENT
	case errors.Is(err, core.ErrRuleTaken):
		return -C.CLARA_EPERM
	}
	engine.Logger().Logf(logging.Error, "clara_unregister_rule: %v", err)
	return -C.CLARA_EINVAL
}

//export claraGoJSON5ToJSON
func claraGoJSON5ToJSON(text *C.char, n C.size_t, out **C.char) (code C.int) {
	defer guard("clara_json5_to_json", func() { code = -C.CLARA_EINTERNAL })
	json, err := engine.JSON5(bytesOf(text, n))
	code = C.CLARA_OK
	if err != nil {
		json, code = []byte(err.Error()), -C.CLARA_EINVAL
	}
	p := copyOut(json)
	if p == nil {
		return -C.CLARA_ENOMEM
	}
	*out = p
	return code
}
