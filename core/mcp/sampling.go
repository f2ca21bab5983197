package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
)

// SampleFunc asks the model of the MCP client that made a call
// (sampling/createMessage, revision 2025-11-25; deprecated by 2026-07-28,
// which has no server-initiated requests): params and result are the
// method's, as JSON.
type SampleFunc func(ctx context.Context, params []byte) (result []byte, err error)

type sampleKey struct{}

// SamplerOf is the model of the MCP client that made the call ctx belongs
// to: nil when the call came from no MCP client, or from one that did not
// declare sampling.
func SamplerOf(ctx context.Context) SampleFunc {
	f, _ := ctx.Value(sampleKey{}).(SampleFunc)
	return f
}

// withSampler gives a tools/call of a client that declared sampling the
// way to its model.
func withSampler(ctx context.Context, ss *sdk.ServerSession, caps *sdk.ClientCapabilities, log *logging.Logger) context.Context {
	if ss == nil || caps == nil || caps.Sampling == nil {
		return ctx
	}
	withTools := caps.Sampling.Tools != nil
	sample := func(ctx context.Context, raw []byte) (out []byte, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(log, "a sampling request", r)
				out, err = nil, errors.New("internal error")
			}
		}()
		var p sdk.CreateMessageWithToolsParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("sampling request: %v", err)
		}
		if len(p.Tools) > 0 && !withTools {
			return nil, errors.New("the MCP client's sampling takes no tools (it did not declare sampling.tools); ask without allow_tools")
		}
		res, err := ss.CreateMessageWithTools(ctx, &p)
		if err != nil {
			return nil, fmt.Errorf("the MCP client's model did not answer: %w", err)
		}
		return json.Marshal(res)
	}
	return context.WithValue(ctx, sampleKey{}, SampleFunc(sample))
}
