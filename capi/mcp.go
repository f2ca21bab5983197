package main

/*
#include "shim.h"
*/
import "C"

import (
	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// MCP: clara_mcp_serve_stdio, clara_mcp_listen, clara_mcp_stop (clara.h).
// All behaviour is in core.

//export claraGoMCPServeStdio
func claraGoMCPServeStdio(inFD, outFD C.int) (code C.int) {
	defer guard("clara_mcp_serve_stdio", func() { code = -C.CLARA_EINTERNAL })
	if inFD < 0 || outFD < 0 {
		engine.Logger().Logf(logging.Error, "clara_mcp_serve_stdio: descriptors %d and %d", int(inFD), int(outFD))
		return -C.CLARA_EINVAL
	}
	if err := engine.MCPServeFDs(int(inFD), int(outFD)); err != nil {
		engine.Logger().Logf(logging.Error, "clara_mcp_serve_stdio: %v", err)
		return -C.CLARA_EINVAL
	}
	return C.CLARA_OK
}

//export claraGoMCPListen
func claraGoMCPListen(addr *C.char, n C.size_t) (out *C.char) {
	defer guard("clara_mcp_listen", func() { out = internalEnvelope() })
	if addr == nil {
		return copyOut(protocol.AppendError(nil, nil, protocol.Errorf(protocol.InvalidRequest, "clara_mcp_listen: NULL address")))
	}
	bound, err := engine.MCPListen(string(bytesOf(addr, n)))
	if err != nil {
		return copyOut(protocol.AppendError(nil, nil, protocol.Errorf(protocol.InvalidRequest, "clara_mcp_listen: %v", err)))
	}
	env := append([]byte(`{"status":"success","result":{"url":`), protocol.AppendString(nil, "http://"+bound+"/mcp")...)
	return copyOut(append(env, "}}"...))
}

//export claraGoMCPStop
func claraGoMCPStop() {
	defer guard("clara_mcp_stop", nil)
	engine.MCPStop()
}
