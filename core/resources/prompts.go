package resources

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clara-lib/clara/core/toolbox"
)

// Prompt is one [[prompts]] table.
type Prompt struct {
	Name        string
	Title       string
	Description string
	Arguments   []Argument
	Messages    []Message
}

// Argument is one of a prompt's arguments.
type Argument struct {
	Name        string   `json:"name"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Required    bool     `json:"required"`
	Values      []string `json:"values"` // what completion offers
}

// Message is one of a prompt's messages: its role and one MCP content
// block, whose strings hold {argument} parts.
type Message struct {
	Role    string
	Content json.RawMessage
}

func compilePrompt(t map[string]any) (*Prompt, error) {
	var raw struct {
		Name        string     `json:"name"`
		Title       string     `json:"title"`
		Description string     `json:"description"`
		Arguments   []Argument `json:"arguments"`
		Messages    []struct {
			Role    string         `json:"role"`
			Text    *string        `json:"text"`
			Content map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := decodeTable(t, &raw); err != nil {
		return nil, err
	}
	p := &Prompt{Name: raw.Name, Title: raw.Title, Description: raw.Description, Arguments: raw.Arguments}
	if !toolbox.ValidName(p.Name) {
		return nil, fmt.Errorf("name %q: use 1 to 64 letters, digits, '_' or '-' (the policy names prompts as it names tools)", p.Name)
	}
	seen := map[string]bool{}
	for i, a := range p.Arguments {
		if !validVar(a.Name) {
			return nil, fmt.Errorf("arguments[%d]: name %q: use letters, digits and '_'", i, a.Name)
		}
		if seen[a.Name] {
			return nil, fmt.Errorf("arguments[%d]: %q comes twice", i, a.Name)
		}
		seen[a.Name] = true
	}
	if len(raw.Messages) == 0 {
		return nil, errors.New("a prompt needs messages")
	}
	for i, m := range raw.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("messages[%d]: role must be \"user\" or \"assistant\", not %q", i, m.Role)
		}
		var block json.RawMessage
		switch {
		case m.Text != nil && m.Content != nil, m.Text == nil && m.Content == nil:
			return nil, fmt.Errorf("messages[%d]: give text or content (one of them)", i)
		case m.Text != nil:
			block, _ = json.Marshal(map[string]string{"type": "text", "text": *m.Text})
		default:
			var err error
			if block, err = json.Marshal(m.Content); err != nil {
				return nil, fmt.Errorf("messages[%d]: content: %v", i, err)
			}
			if err := toolbox.CheckContentBlock(block); err != nil {
				return nil, fmt.Errorf("messages[%d]: content: %v", i, err)
			}
		}
		p.Messages = append(p.Messages, Message{Role: m.Role, Content: block})
	}
	return p, nil
}

// Render fills the prompt's messages with args: every {name} of an
// argument, in every string of the content blocks, becomes its value. A
// required argument missing, or an argument the prompt does not have, is
// an error for the client.
func (p *Prompt) Render(args map[string]string) ([]Message, error) {
	for k := range args {
		if p.argument(k) == nil {
			return nil, fmt.Errorf("prompt %q has no argument %q", p.Name, k)
		}
	}
	vars := map[string]string{}
	var missing []string
	for _, a := range p.Arguments {
		v, ok := args[a.Name]
		if !ok && a.Required {
			missing = append(missing, a.Name)
		}
		vars[a.Name] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("prompt %q needs the argument %s", p.Name, strings.Join(missing, ", "))
	}
	out := make([]Message, len(p.Messages))
	for i, m := range p.Messages {
		var v any
		if err := json.Unmarshal(m.Content, &v); err != nil {
			return nil, err
		}
		b, err := json.Marshal(fillValue(v, vars))
		if err != nil {
			return nil, err
		}
		out[i] = Message{Role: m.Role, Content: b}
	}
	return out, nil
}

// fillValue fills every string of a JSON value.
func fillValue(v any, vars map[string]string) any {
	switch x := v.(type) {
	case string:
		return fill(x, vars, false)
	case map[string]any:
		for k, e := range x {
			x[k] = fillValue(e, vars)
		}
	case []any:
		for i, e := range x {
			x[i] = fillValue(e, vars)
		}
	}
	return v
}

func (p *Prompt) argument(name string) *Argument {
	for i := range p.Arguments {
		if p.Arguments[i].Name == name {
			return &p.Arguments[i]
		}
	}
	return nil
}

// CompleteArgument offers the values of the prompt's argument that start
// with prefix; ok is false when it has no such argument.
func (p *Prompt) CompleteArgument(name, prefix string) (Completion, bool) {
	a := p.argument(name)
	if a == nil {
		return Completion{}, false
	}
	return Complete(a.Values, prefix), true
}

// CompleteVariable offers the values of the template's variable that
// start with prefix; ok is false when it has no such variable.
func (r *Resource) CompleteVariable(name, prefix string) (Completion, bool) {
	if !contains(r.vars, name) {
		return Completion{}, false
	}
	return Complete(r.Complete[name], prefix), true
}
