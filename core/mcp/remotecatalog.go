package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// What a remote server offers beside its tools (issue 30, §4): its
// resources, templates and prompts, listed with its tools (and again on
// its list_changed), kept per connection, and served on by Clara under
// the prefixed names the policy governs (a prompt's name is prefixed as a
// tool's is; a resource keeps its URI, and its name is prefixed). Reads
// and renders go to the server; every secret is cut out of what comes
// back. max_tools bounds each list as it bounds the tools.

// RemoteCatalog is a server's resources and prompts as Clara serves them.
type RemoteCatalog struct {
	Resources []ResourceInfo // Name prefixed
	Prompts   []PromptInfo   // Name prefixed
}

// remoteCatalog is what refresh keeps: the catalog and the names it maps.
type remoteCatalog struct {
	RemoteCatalog
	prompts map[string]string // prefixed name -> the server's
}

// listCatalog lists the server's resources, templates and prompts, those
// its capabilities declare.
func (r *remote) listCatalog(ctx context.Context, c *conn) (*remoteCatalog, error) {
	out := &remoteCatalog{prompts: map[string]string{}}
	init := c.cs.InitializeResult()
	if init == nil || init.Capabilities == nil {
		return out, nil
	}
	cut := func(s string) string { return cutUTF8(r.m.red.String(s), r.cfg.MaxDescriptionBytes) }
	if init.Capabilities.Resources != nil {
		for res, err := range c.cs.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("mcp server %q: listing resources: %v", r.cfg.Name, err)
			}
			if len(out.Resources) == r.cfg.MaxTools {
				break
			}
			if res != nil && res.URI != "" {
				out.Resources = append(out.Resources, ResourceInfo{Name: *r.cfg.Prefix + res.Name, Title: cut(res.Title),
					Description: cut(res.Description), MIMEType: res.MIMEType, URI: res.URI})
			}
		}
		for tpl, err := range c.cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("mcp server %q: listing resource templates: %v", r.cfg.Name, err)
			}
			if len(out.Resources) == r.cfg.MaxTools {
				break
			}
			if tpl != nil && tpl.URITemplate != "" {
				out.Resources = append(out.Resources, ResourceInfo{Name: *r.cfg.Prefix + tpl.Name, Title: cut(tpl.Title),
					Description: cut(tpl.Description), MIMEType: tpl.MIMEType, URITemplate: tpl.URITemplate})
			}
		}
	}
	if init.Capabilities.Prompts != nil {
		for p, err := range c.cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("mcp server %q: listing prompts: %v", r.cfg.Name, err)
			}
			if len(out.Prompts) == r.cfg.MaxTools {
				break
			}
			if p == nil || p.Name == "" {
				continue
			}
			info := PromptInfo{Name: *r.cfg.Prefix + p.Name, Title: cut(p.Title), Description: cut(p.Description)}
			for _, a := range p.Arguments {
				if a != nil {
					info.Arguments = append(info.Arguments, PromptArgument{Name: a.Name, Title: cut(a.Title), Description: cut(a.Description), Required: a.Required})
				}
			}
			out.Prompts = append(out.Prompts, info)
			out.prompts[info.Name] = p.Name
		}
	}
	return out, nil
}

// catalogChanged is a server's list_changed of resources or prompts.
func (r *remote) catalogChanged(session *sdk.ClientSession) {
	r.mu.Lock()
	c := r.live
	r.mu.Unlock()
	if c != nil && c.cs == session {
		r.refreshAsync(c)
	}
}

// Catalog is what the server offers beside its tools, as last listed (an
// empty catalog before its first listing).
func (m *Manager) Catalog(server string) RemoteCatalog {
	r := m.remotes[server]
	if r == nil {
		return RemoteCatalog{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.catalog == nil {
		return RemoteCatalog{}
	}
	return r.catalog.RemoteCatalog
}

// ReadResource reads uri on the server.
func (m *Manager) ReadResource(ctx context.Context, server, uri string) ([]ResourceContents, error) {
	r := m.remotes[server]
	if r == nil {
		return nil, fmt.Errorf("no mcp server %q", server)
	}
	c, err := r.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, protocol.Errorf(protocol.ToolFailed, "mcp server %q: %s", server, r.m.red.String(err.Error()))
	}
	var out []ResourceContents
	for _, rc := range res.Contents {
		if rc == nil {
			continue
		}
		item := ResourceContents{URI: rc.URI, MIMEType: rc.MIMEType}
		if rc.Blob != nil {
			item.Blob = rc.Blob
		} else {
			text := r.m.red.String(rc.Text)
			item.Text = &text
		}
		out = append(out, item)
	}
	return out, nil
}

// GetPrompt renders the server's prompt of the prefixed name.
func (m *Manager) GetPrompt(ctx context.Context, server, name string, args map[string]string) (string, []PromptMessage, error) {
	r := m.remotes[server]
	if r == nil {
		return "", nil, fmt.Errorf("no mcp server %q", server)
	}
	r.mu.Lock()
	remoteName := ""
	if r.catalog != nil {
		remoteName = r.catalog.prompts[name]
	}
	r.mu.Unlock()
	if remoteName == "" {
		return "", nil, protocol.Errorf(protocol.UnknownTool, "no prompt %q", name)
	}
	c, err := r.session(ctx)
	if err != nil {
		return "", nil, err
	}
	res, err := c.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: remoteName, Arguments: args})
	if err != nil {
		return "", nil, protocol.Errorf(protocol.InvalidArgs, "mcp server %q: %s", server, r.m.red.String(err.Error()))
	}
	var out []PromptMessage
	for _, msg := range res.Messages {
		if msg == nil {
			continue
		}
		b, err := json.Marshal(msg.Content)
		if err != nil {
			continue
		}
		out = append(out, PromptMessage{Role: string(msg.Role), Content: r.m.red.JSON(b)})
	}
	return r.m.red.String(res.Description), out, nil
}

// refreshCatalog lists the catalog on c after the tools, and tells the
// owner when it changed.
func (r *remote) refreshCatalog(ctx context.Context, c *conn) {
	cat, err := r.listCatalog(ctx, c)
	if err != nil {
		logf(r.m.log, logging.Warn, "%v", err)
		return
	}
	key, _ := json.Marshal(cat.RemoteCatalog)
	r.mu.Lock()
	changed := string(key) != r.catalogKey
	r.catalog, r.catalogKey = cat, string(key)
	r.mu.Unlock()
	if changed && r.m.opts.OnCatalogChanged != nil {
		r.m.opts.OnCatalogChanged(r.cfg.Name)
	}
}

// templateMatches reports whether uri is one of template's: its literal
// text as it is, each {var} part one or more characters but / ? #.
func templateMatches(template, uri string) bool {
	var re strings.Builder
	re.WriteString("^")
	for {
		i := strings.IndexByte(template, '{')
		j := strings.IndexByte(template, '}')
		if i < 0 || j < i {
			re.WriteString(regexp.QuoteMeta(template))
			break
		}
		re.WriteString(regexp.QuoteMeta(template[:i]))
		re.WriteString("[^/?#]+")
		template = template[j+1:]
	}
	re.WriteString("$")
	ok, err := regexp.MatchString(re.String(), uri)
	return err == nil && ok
}

// ResourceServer is the server whose resource uri is (a direct resource,
// or one of its templates'), "" if none.
func (m *Manager) ResourceServer(uri string) string {
	for _, name := range m.order {
		cat := m.Catalog(name)
		for _, res := range cat.Resources {
			if res.URI == uri || (res.URITemplate != "" && templateMatches(res.URITemplate, uri)) {
				return name
			}
		}
	}
	return ""
}

// ResourceName is the Clara name of the resource uri is on its server.
func (m *Manager) ResourceName(server, uri string) string {
	for _, res := range m.Catalog(server).Resources {
		if res.URI == uri || (res.URITemplate != "" && templateMatches(res.URITemplate, uri)) {
			return res.Name
		}
	}
	return ""
}
