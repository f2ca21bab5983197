package core

import (
	"context"
	"errors"

	"github.com/clara-lib/clara/core/mcp"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/resources"
	"github.com/clara-lib/clara/core/toolbox"
)

// The resources and prompts of the configuration as the MCP server serves
// them (mcp.CatalogHost): the policy names them as it names tools, so a
// deny hides one and an allow list that does not name it hides it too;
// the session's policy narrows reads and renders as it narrows calls.

var _ mcp.CatalogHost = mcpHost{}

// mcpScope is the policy an MCP client's request of session is under.
func (h mcpHost) mcpScope(s *snapshot, session string) toolbox.Scope {
	return toolbox.Scope{Config: s.policy, Session: h.e.sessions.Policy(session)}
}

// Resources lists the resources and templates the configuration's policy
// allows.
func (h mcpHost) Resources() []mcp.ResourceInfo {
	s := h.e.current.Load()
	scope := toolbox.Scope{Config: s.policy}
	var out []mcp.ResourceInfo
	for _, r := range s.catalog.Resources() {
		if !scope.Allows(r.Name) {
			continue
		}
		out = append(out, mcp.ResourceInfo{Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType,
			URI: r.URI, URITemplate: r.URITemplate, Version: s.catalog.Version(r)})
	}
	// The remote servers', by their prefixed names (a URI the
	// configuration has is its own).
	if m := h.e.currentManager(); m != nil {
		for _, server := range m.Servers() {
			for _, r := range m.Catalog(server).Resources {
				if scope.Allows(r.Name) {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// ReadResource reads a resource the client's policy allows.
func (h mcpHost) ReadResource(ctx context.Context, session, uri string) ([]mcp.ResourceContents, *protocol.Error) {
	s := h.e.current.Load()
	r, vars := s.catalog.Match(uri)
	if r == nil {
		return h.readRemoteResource(ctx, s, session, uri)
	}
	if !h.mcpScope(s, session).Allows(r.Name) {
		return nil, protocol.Errorf(protocol.UnknownTool, "no resource %s", uri)
	}
	c, err := s.catalog.Read(r, uri, vars)
	if err != nil {
		perr := protocol.Errorf(protocol.ToolFailed, "resource %s: %v", uri, err)
		h.e.logFailure("resource "+r.Name, perr)
		return nil, perr
	}
	return []mcp.ResourceContents{{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text, Blob: c.Blob}}, nil
}

// readRemoteResource reads a remote server's resource the client's policy
// allows, by its prefixed name.
func (h mcpHost) readRemoteResource(ctx context.Context, s *snapshot, session, uri string) ([]mcp.ResourceContents, *protocol.Error) {
	m := h.e.currentManager()
	if m == nil {
		return nil, protocol.Errorf(protocol.UnknownTool, "no resource %s", uri)
	}
	server := m.ResourceServer(uri)
	if server == "" || !h.mcpScope(s, session).Allows(m.ResourceName(server, uri)) {
		return nil, protocol.Errorf(protocol.UnknownTool, "no resource %s", uri)
	}
	out, err := m.ReadResource(ctx, server, uri)
	if err != nil {
		return nil, asProtocolError(err)
	}
	return out, nil
}

// asProtocolError keeps a *protocol.Error, and makes any other error
// tool_failed.
func asProtocolError(err error) *protocol.Error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr
	}
	return protocol.Errorf(protocol.ToolFailed, "%v", err)
}

// Prompts lists the prompts the configuration's policy allows.
func (h mcpHost) Prompts() []mcp.PromptInfo {
	s := h.e.current.Load()
	scope := toolbox.Scope{Config: s.policy}
	var out []mcp.PromptInfo
	for _, p := range s.catalog.Prompts() {
		if !scope.Allows(p.Name) {
			continue
		}
		info := mcp.PromptInfo{Name: p.Name, Title: p.Title, Description: p.Description}
		for _, a := range p.Arguments {
			info.Arguments = append(info.Arguments, mcp.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
		}
		out = append(out, info)
	}
	if m := h.e.currentManager(); m != nil {
		for _, server := range m.Servers() {
			for _, p := range m.Catalog(server).Prompts {
				if scope.Allows(p.Name) {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// GetPrompt renders a prompt the client's policy allows.
func (h mcpHost) GetPrompt(ctx context.Context, session, name string, args map[string]string) (string, []mcp.PromptMessage, *protocol.Error) {
	s := h.e.current.Load()
	p := s.catalog.Prompt(name)
	if !h.mcpScope(s, session).Allows(name) {
		return "", nil, protocol.Errorf(protocol.UnknownTool, "no prompt %q", name)
	}
	if p == nil {
		return h.getRemotePrompt(ctx, name, args)
	}
	msgs, err := p.Render(args)
	if err != nil {
		return "", nil, protocol.Errorf(protocol.InvalidArgs, "%v", err)
	}
	out := make([]mcp.PromptMessage, len(msgs))
	for i, m := range msgs {
		out[i] = mcp.PromptMessage{Role: m.Role, Content: m.Content}
	}
	return p.Description, out, nil
}

// getRemotePrompt renders a remote server's prompt of that prefixed name.
func (h mcpHost) getRemotePrompt(ctx context.Context, name string, args map[string]string) (string, []mcp.PromptMessage, *protocol.Error) {
	if m := h.e.currentManager(); m != nil {
		for _, server := range m.Servers() {
			for _, p := range m.Catalog(server).Prompts {
				if p.Name == name {
					desc, msgs, err := m.GetPrompt(ctx, server, name, args)
					if err != nil {
						return "", nil, asProtocolError(err)
					}
					return desc, msgs, nil
				}
			}
		}
	}
	return "", nil, protocol.Errorf(protocol.UnknownTool, "no prompt %q", name)
}

// Complete offers the values a prompt's argument or a template's variable
// lists; one the client may not see offers nothing.
func (h mcpHost) Complete(_ context.Context, session string, ref mcp.CompletionRef, argument, value string) (mcp.Completion, *protocol.Error) {
	s := h.e.current.Load()
	scope := h.mcpScope(s, session)
	var c resources.Completion
	var ok bool
	switch {
	case ref.Prompt != "":
		if p := s.catalog.Prompt(ref.Prompt); p != nil && scope.Allows(p.Name) {
			c, ok = p.CompleteArgument(argument, value)
		}
	case ref.URITemplate != "":
		for _, r := range s.catalog.Resources() {
			if r.URITemplate == ref.URITemplate && scope.Allows(r.Name) {
				c, ok = r.CompleteVariable(argument, value)
			}
		}
	}
	if !ok {
		return mcp.Completion{Values: []string{}}, nil
	}
	return mcp.Completion{Values: c.Values, Total: c.Total, HasMore: c.HasMore}, nil
}
