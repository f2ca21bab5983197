package main

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// Asynchronous calls: clara_submit, clara_ready, clara_wait, clara_cancel,
// clara_async_fd, clara_async_take (clara.h). All behaviour is in core.

//export claraGoSubmit
func claraGoSubmit(req *C.char, n C.size_t) (out C.int64_t) {
	defer guard("clara_submit", func() { out = -C.CLARA_EINTERNAL })
	h, perr := engine.Submit(bytesOf(req, n))
	switch {
	case perr == nil:
		return C.int64_t(h)
	case perr.Code == protocol.RateLimited:
		return -C.CLARA_EBUSY
	case perr.Code == protocol.Internal:
		return -C.CLARA_EINTERNAL
	}
	return -C.CLARA_EINVAL
}

//export claraGoReady
func claraGoReady(h C.int64_t) (out C.int) {
	defer guard("clara_ready", func() { out = -C.CLARA_EINTERNAL })
	ready, perr := engine.Ready(int64(h))
	switch {
	case perr != nil:
		return -C.CLARA_ENOENT
	case ready:
		return 1
	}
	return 0
}

//export claraGoWait
func claraGoWait(h C.int64_t, timeoutMS C.int) (out *C.char) {
	defer guard("clara_wait", func() { out = internalEnvelope() })
	timeout := time.Duration(timeoutMS) * time.Millisecond
	if timeoutMS < 0 {
		timeout = -1
	}
	return copyOut(engine.Wait(context.Background(), int64(h), timeout))
}

//export claraGoCancel
func claraGoCancel(h C.int64_t) (out C.int) {
	defer guard("clara_cancel", func() { out = -C.CLARA_EINTERNAL })
	if perr := engine.Cancel(int64(h)); perr != nil {
		return -C.CLARA_ENOENT
	}
	return C.CLARA_OK
}

//export claraGoAsyncFD
func claraGoAsyncFD() (out C.int) {
	defer guard("clara_async_fd", func() { out = -C.CLARA_EINTERNAL })
	fd, err := engine.AsyncFD()
	if err != nil {
		engine.Logger().Logf(logging.Error, "clara_async_fd: %v", err)
		return -C.CLARA_EINTERNAL
	}
	return C.int(fd)
}

//export claraGoAsyncTake
func claraGoAsyncTake(max C.int) (out *C.char) {
	defer guard("clara_async_take", func() { out = copyOut([]byte("[]")) })
	return copyOut(engine.AsyncTake(int(max)))
}
