// Command capi is libclara.so: the //export functions behind clara.h.
//
// Each export recovers panics, turns C strings into byte slices, calls the
// core and copies the answer into C memory. Nothing else belongs here: the
// public names and their const-correct prototypes live in shim.c, and all
// behaviour lives in core/.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -Wall -Wextra -Werror
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/clara-lib/clara/core"
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

func main() {}

// engine is the process's Clara, built from the environment when the
// library is loaded.
var engine = core.FromEnvironment(os.Getenv, os.Stderr)

// bufs recycles response buffers; the answer is copied to C memory before
// a buffer goes back.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledBuf = 64 << 10

// jsonGetMaxDepth bounds documents read by clara_json_get. It is not
// limits.max_depth: an envelope is one level deeper than its request, and
// reading must not depend on the request limits in force. The scan does not
// recurse, so a generous bound costs nothing.
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

// recovered turns a panic that escaped the core into an internal envelope.
func recovered(r any, where string) *C.char {
	engine.Logger().Logf(logging.Error, "panic in %s: %v\n%s", where, r, debug.Stack())
	return copyOut(protocol.AppendError(nil, nil, protocol.InternalError(nil)))
}

// claraGoEvaluate answers req. When the envelope fits the C buffer dst
// (dstCap bytes, NUL included) it is written there and dst is returned;
// otherwise a new malloc'd string is returned and dst is left to the caller.
//
//export claraGoEvaluate
func claraGoEvaluate(req *C.char, n C.size_t, dst *C.char, dstCap C.size_t) (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = recovered(r, "clara_evaluate")
		}
	}()
	bp := bufs.Get().(*[]byte)
	b := engine.AppendEvaluate((*bp)[:0], bytesOf(req, n))
	if dst != nil && len(b) < int(dstCap) {
		d := unsafe.Slice((*byte)(unsafe.Pointer(dst)), len(b)+1)
		copy(d, b)
		d[len(b)] = 0
		out = dst
	} else {
		out = copyOut(b)
	}
	if cap(b) <= maxPooledBuf {
		*bp = b
		bufs.Put(bp)
	}
	return out
}

//export claraGoConfigure
func claraGoConfigure(cfg *C.char, n C.size_t) (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = recovered(r, "clara_configure")
		}
	}()
	return copyOut(engine.Configure(bytesOf(cfg, n)))
}

//export claraGoReset
func claraGoReset() (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = recovered(r, "clara_reset")
		}
	}()
	return copyOut(engine.Reset())
}

//export claraGoJSONGet
func claraGoJSONGet(doc *C.char, n C.size_t, path *C.char, pn C.size_t, text **C.char, length *C.size_t) (code C.int) {
	defer func() {
		if r := recover(); r != nil {
			engine.Logger().Logf(logging.Error, "panic in clara_json_get: %v\n%s", r, debug.Stack())
			code = -C.CLARA_EINTERNAL
		}
	}()
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

//export claraGoSetLogHandler
func claraGoSetLogHandler(fn C.clara_log_fn, userdata C.uintptr_t, minLevel C.int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "clara: panic in clara_set_log_handler: %v\n", r)
		}
	}()
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
		msg := make([]byte, len(message)+1) // NUL-terminated copy for C
		copy(msg, message)
		C.shim_call_log(fn, userdata, C.int(level), (*C.char)(unsafe.Pointer(&msg[0])))
	}, min)
}
