package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// Resources, prompts and completion: what a CatalogHost offers beside its
// tools. The server serves them when its Host is a CatalogHost, and keeps
// them in step with it on the same signal as the tools (OnToolsChanged).

// ResourceInfo is what resources/list shows of a resource, or
// resources/templates/list of a template (URITemplate set).
type ResourceInfo struct {
	Name, Title, Description, MIMEType string
	URI                                string // a direct resource
	URITemplate                        string // a template: {var} parts
	// Version changes when the resource's contents change: its
	// subscribers are then told (notifications/resources/updated).
	Version string
}

// ResourceContents are a read resource's contents: Text, or Blob when
// Text is nil.
type ResourceContents struct {
	URI, MIMEType string
	Text          *string
	Blob          []byte
}

// PromptInfo is what prompts/list shows of a prompt.
type PromptInfo struct {
	Name, Title, Description string
	Arguments                []PromptArgument
}

// PromptArgument is one of a prompt's arguments.
type PromptArgument struct {
	Name, Title, Description string
	Required                 bool
}

// PromptMessage is one message of a rendered prompt: a role and one MCP
// content block.
type PromptMessage struct {
	Role    string
	Content json.RawMessage
}

// CompletionRef names what a completion is for: a prompt's argument
// (Prompt) or a resource template's variable (URITemplate).
type CompletionRef struct {
	Prompt      string
	URITemplate string
}

// Completion is the values offered for one argument.
type Completion struct {
	Values  []string
	Total   int
	HasMore bool
}

// CatalogHost is a Host that also offers resources and prompts. Its
// methods are called concurrently; what they return is the server's
// afterwards.
type CatalogHost interface {
	Host
	// Resources lists the resources and templates to serve (those the
	// server's policy allows).
	Resources() []ResourceInfo
	// ReadResource reads uri for a client of session. An unknown or
	// denied uri is a protocol.UnknownTool error.
	ReadResource(ctx context.Context, session, uri string) ([]ResourceContents, *protocol.Error)
	// Prompts lists the prompts to serve.
	Prompts() []PromptInfo
	// GetPrompt renders a prompt with a client's arguments. An unknown or
	// denied prompt is a protocol.UnknownTool error, bad arguments
	// protocol.InvalidArgs.
	GetPrompt(ctx context.Context, session, name string, args map[string]string) (description string, messages []PromptMessage, err *protocol.Error)
	// Complete offers values for an argument, given what was typed.
	Complete(ctx context.Context, session string, ref CompletionRef, argument, value string) (Completion, *protocol.Error)
}

// codeResourceNotFound is MCP's error for a resource it does not have.
const codeResourceNotFound = -32002

// rpcError turns a host's error into the JSON-RPC error of a resource,
// prompt or completion request.
func rpcError(perr *protocol.Error, notFound int64) error {
	code := int64(jsonrpc.CodeInternalError)
	switch perr.Code {
	case protocol.UnknownTool, protocol.Denied:
		code = notFound
	case protocol.InvalidArgs, protocol.InvalidRequest:
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: perr.Message}
}

// servedFeatures are the resources and prompts the server publishes; only
// the sync goroutine (and NewServer) touches them.
type servedFeatures struct {
	resources map[string]ResourceInfo // by URI or URI template
	prompts   map[string]string       // name -> the prompt's JSON, to see it change
}

// serverCatalogOptions sets the server options a CatalogHost needs.
func (s *Server) serverCatalogOptions(o *sdk.ServerOptions) {
	o.Capabilities.Resources = &sdk.ResourceCapabilities{ListChanged: true, Subscribe: true}
	o.Capabilities.Prompts = &sdk.PromptCapabilities{ListChanged: true}
	o.Capabilities.Completions = &sdk.CompletionCapabilities{}
	o.CompletionHandler = s.complete
	o.SubscribeHandler = s.subscribe
	o.UnsubscribeHandler = func(context.Context, *sdk.UnsubscribeRequest) error { return nil }
}

// syncFeatures makes the SDK server's resources and prompts those of the
// host, and tells subscribers of a resource whose version changed.
func (s *Server) syncFeatures(h CatalogHost) {
	want := map[string]ResourceInfo{}
	for _, r := range h.Resources() {
		key := r.URI + r.URITemplate
		if key == "" {
			continue
		}
		want[key] = r
	}
	var goneURIs, goneTemplates []string
	for key, old := range s.features.resources {
		if _, ok := want[key]; !ok {
			if old.URITemplate != "" {
				goneTemplates = append(goneTemplates, key)
			} else {
				goneURIs = append(goneURIs, key)
			}
		}
	}
	if len(goneURIs) > 0 {
		s.mcp.RemoveResources(goneURIs...)
	}
	if len(goneTemplates) > 0 {
		s.mcp.RemoveResourceTemplates(goneTemplates...)
	}
	for _, key := range sortedKeys(want) {
		r := want[key]
		old, had := s.features.resources[key]
		if had && old == r {
			continue
		}
		if had && old.Version != r.Version && r.URI != "" {
			defer s.resourceUpdated(r.URI) // once the new one is served
		}
		if had && sameListing(old, r) {
			continue // only the contents changed: the listing stays
		}
		if r.URITemplate != "" {
			s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: r.URITemplate, Name: r.Name, Title: r.Title,
				Description: r.Description, MIMEType: r.MIMEType}, s.readResource(h))
		} else {
			s.mcp.AddResource(&sdk.Resource{URI: r.URI, Name: r.Name, Title: r.Title,
				Description: r.Description, MIMEType: r.MIMEType}, s.readResource(h))
		}
	}
	s.features.resources = want

	prompts := map[string]string{}
	infos := map[string]PromptInfo{}
	for _, p := range h.Prompts() {
		b, _ := json.Marshal(p)
		prompts[p.Name], infos[p.Name] = string(b), p
	}
	var gone []string
	for name := range s.features.prompts {
		if _, ok := prompts[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemovePrompts(gone...)
	}
	for _, name := range sortedKeys(prompts) {
		if s.features.prompts[name] == prompts[name] {
			continue
		}
		p := infos[name]
		sp := &sdk.Prompt{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			sp.Arguments = append(sp.Arguments, &sdk.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		s.mcp.AddPrompt(sp, s.getPrompt(h, name))
	}
	s.features.prompts = prompts
}

func sameListing(a, b ResourceInfo) bool {
	a.Version, b.Version = "", ""
	return a == b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// resourceUpdated tells the subscribers of uri that it changed.
func (s *Server) resourceUpdated(uri string) {
	defer func() {
		if r := recover(); r != nil {
			logPanic(s.log, "a resource update notification", r)
		}
	}()
	if err := s.mcp.ResourceUpdated(context.Background(), &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		logf(s.log, logging.Debug, "resource update notification not sent: %v", err)
	}
}

// readResource is the handler of resources/read for the host's resources.
func (s *Server) readResource(h CatalogHost) sdk.ResourceHandler {
	return func(ctx context.Context, req *sdk.ReadResourceRequest) (res *sdk.ReadResourceResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "resources/read", r)
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
		}()
		uri := req.Params.URI
		contents, perr := h.ReadResource(ctx, s.sessionName(req.Session), uri)
		if perr != nil {
			if perr.Code == protocol.UnknownTool || perr.Code == protocol.Denied {
				return nil, sdk.ResourceNotFoundError(uri)
			}
			return nil, rpcError(perr, codeResourceNotFound)
		}
		res = &sdk.ReadResourceResult{}
		for _, c := range contents {
			rc := &sdk.ResourceContents{URI: c.URI, MIMEType: c.MIMEType}
			if c.Text != nil {
				rc.Text = *c.Text
			} else {
				rc.Blob = c.Blob
				if rc.Blob == nil {
					rc.Blob = []byte{}
				}
			}
			res.Contents = append(res.Contents, rc)
		}
		return res, nil
	}
}

// getPrompt is the handler of prompts/get for one of the host's prompts.
func (s *Server) getPrompt(h CatalogHost, name string) sdk.PromptHandler {
	return func(ctx context.Context, req *sdk.GetPromptRequest) (res *sdk.GetPromptResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				logPanic(s.log, "prompts/get", r)
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
		}()
		desc, msgs, perr := h.GetPrompt(ctx, s.sessionName(req.Session), name, req.Params.Arguments)
		if perr != nil {
			return nil, rpcError(perr, jsonrpc.CodeInvalidParams)
		}
		res = &sdk.GetPromptResult{Description: desc, Messages: []*sdk.PromptMessage{}}
		for i, m := range msgs {
			var pm sdk.PromptMessage
			body, _ := json.Marshal(map[string]any{"role": m.Role, "content": m.Content})
			if err := json.Unmarshal(body, &pm); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("prompt %q: message %d: %v", name, i, err)}
			}
			res.Messages = append(res.Messages, &pm)
		}
		return res, nil
	}
}

// complete is the handler of completion/complete.
func (s *Server) complete(ctx context.Context, req *sdk.CompleteRequest) (res *sdk.CompleteResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			logPanic(s.log, "completion/complete", r)
			res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
	}()
	h, ok := s.host.(CatalogHost)
	if !ok || req.Params == nil || req.Params.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion needs a ref"}
	}
	ref := CompletionRef{Prompt: req.Params.Ref.Name}
	if req.Params.Ref.Type == "ref/resource" {
		ref = CompletionRef{URITemplate: req.Params.Ref.URI}
	}
	c, perr := h.Complete(ctx, s.sessionName(req.Session), ref, req.Params.Argument.Name, req.Params.Argument.Value)
	if perr != nil {
		return nil, rpcError(perr, jsonrpc.CodeInvalidParams)
	}
	if c.Values == nil {
		c.Values = []string{}
	}
	return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: c.Values, Total: c.Total, HasMore: c.HasMore}}, nil
}

// subscribe accepts a subscription to a resource the client can read.
func (s *Server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	h, ok := s.host.(CatalogHost)
	if !ok {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no resources"}
	}
	if _, perr := h.ReadResource(ctx, s.sessionName(req.Session), req.Params.URI); perr != nil {
		if perr.Code == protocol.UnknownTool || perr.Code == protocol.Denied {
			return sdk.ResourceNotFoundError(req.Params.URI)
		}
		return rpcError(perr, codeResourceNotFound)
	}
	return nil
}
