package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Wire formats a script speaks.
const (
	OpenAI    = "openai"    // POST .../chat/completions
	Anthropic = "anthropic" // POST .../v1/messages
	Gemini    = "gemini"    // POST .../v1beta/models/MODEL:generateContent (or :streamGenerateContent?alt=sse)
	HTTP      = "http"      // any request: an evaluator or an HTTP tool's server
)

// Orders in which a script's exchanges answer requests.
const (
	// Sequence answers requests with the exchanges in the order written:
	// a retried request meets the next exchange.
	Sequence = "sequence"
	// ByTurn picks the exchange by the number of assistant messages the
	// request carries (0 for the first call of a conversation), so that
	// many conversations may run at once. OpenAI and Anthropic only.
	ByTurn = "turn"
)

// Script is one conversation: the requests Clara must send and what the
// server answers, in order. Scripts are TOML files (see the package
// documentation); Name is the file's name without its extension.
type Script struct {
	Name        string     `toml:"-"`
	Description string     `toml:"description"`
	Provider    string     `toml:"provider"`
	Order       string     `toml:"order"`
	Repeat      bool       `toml:"repeat"` // Sequence: start over after the last exchange
	Exchanges   []Exchange `toml:"exchange"`
	// Embeddings, when given, answers POST /NAME/embeddings (OpenAI's
	// embeddings API) with fixed vectors, outside the exchanges.
	Embeddings *Embeddings `toml:"embeddings"`
}

// Embeddings are the fixed vectors of an OpenAI-compatible embeddings
// endpoint: each input text must have one, or the request is refused.
type Embeddings struct {
	Model   string               `toml:"model"` // the model the request must name ("" any)
	Vectors map[string][]float64 `toml:"vectors"`
}

// Exchange is one request and its answer.
type Exchange struct {
	Name   string `toml:"name"`
	Expect Expect `toml:"expect"`
	Reply  Reply  `toml:"reply"`
}

// Expect lists what the request must hold; every field is optional. On
// top of these, an OpenAI or Anthropic request must be well formed for
// its API (see checkOpenAI and checkAnthropic).
type Expect struct {
	Method  string            `toml:"method"` // "POST" when the provider is openai or anthropic
	Path    string            `toml:"path"`   // after the script's prefix; by default the provider's path
	Headers map[string]string `toml:"headers"`
	// HeadersAbsent names headers the request must not carry.
	HeadersAbsent []string `toml:"headers_absent"`
	Contains      []string `toml:"contains"`     // substrings of the raw body
	NotContains   []string `toml:"not_contains"` // substrings the raw body must not hold

	// OpenAI and Anthropic.
	Model       string   `toml:"model"`
	Stream      *bool    `toml:"stream"`
	Tools       []string `toml:"tools"`    // the names of the tools offered, in any order
	NoTools     bool     `toml:"no_tools"` // no tool may be offered
	ToolChoice  string   `toml:"tool_choice"`
	System      string   `toml:"system"`    // a substring of the system prompt
	LastUser    string   `toml:"last_user"` // the text of the last user message, exactly
	Messages    int      `toml:"messages"`  // how many messages the request holds
	MaxTokens   int      `toml:"max_tokens"`
	Temperature *float64 `toml:"temperature"`
	// ToolResults are the answers to the previous assistant message's
	// tool calls, each found by id.
	ToolResults []ToolResult `toml:"tool_results"`

	// HTTP.
	JSON  string            `toml:"json"`  // the body, compared as JSON
	Query map[string]string `toml:"query"` // query parameters, exactly
}

// ToolResult expects the answer to one tool call.
type ToolResult struct {
	ID       string `toml:"id"`
	Content  string `toml:"content"`  // exactly
	Contains string `toml:"contains"` // a substring
	IsError  *bool  `toml:"is_error"` // Anthropic's is_error; for OpenAI, whether the content is an {"error":...} object
}

// Reply is the answer. Give one of JSON, SSE and Body (or none with Drop).
type Reply struct {
	Status  int               `toml:"status"` // 200 by default
	Headers map[string]string `toml:"headers"`
	JSON    string            `toml:"json"` // sent as application/json; checked to be JSON when the script loads
	SSE     string            `toml:"sse"`  // sent as text/event-stream, as written
	Body    string            `toml:"body"` // sent as ContentType (text/plain by default)
	// ContentType overrides the type of the body.
	ContentType string `toml:"content_type"`
	// Chunk splits the body into writes of this many bytes, each flushed
	// (a separate TCP write), ChunkDelayMS apart: SSE events arrive cut
	// at arbitrary places.
	Chunk        int `toml:"chunk"`
	ChunkDelayMS int `toml:"chunk_delay_ms"`
	// DelayMS waits before answering (a slow model); the wait ends early
	// if the client goes away.
	DelayMS int `toml:"delay_ms"`
	// DropAfter writes the status, headers and this many bytes of the
	// body, then drops the connection (a stream cut in the middle).
	DropAfter int `toml:"drop_after"`
	// Drop answers nothing: "close" closes the connection, "reset"
	// resets it (TCP RST).
	Drop string `toml:"drop"`
}

var scriptName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// ParseScript reads a script from TOML text, strictly: an unknown key is
// an error, so a typo in an expectation cannot pass unnoticed.
func ParseScript(name string, text []byte) (*Script, error) {
	if !scriptName.MatchString(name) {
		return nil, fmt.Errorf("llmtest: script name %q: use letters, digits, '_', '-' and '.'", name)
	}
	var s Script
	dec := toml.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		var se *toml.StrictMissingError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("llmtest: script %s: %s", name, se.String())
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("llmtest: script %s:%d:%d: %v", name, row, col, err)
		}
		return nil, fmt.Errorf("llmtest: script %s: %v", name, err)
	}
	s.Name = name
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("llmtest: script %s: %v", name, err)
	}
	return &s, nil
}

// LoadScript reads a script file; its name is the file's base name
// without the extension.
func LoadScript(path string) (*Script, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llmtest: %v", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return ParseScript(name, text)
}

// LoadScripts reads script files and every *.toml file of directories.
func LoadScripts(paths ...string) ([]*Script, error) {
	var out []*Script
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("llmtest: %v", err)
		}
		files := []string{p}
		if st.IsDir() {
			if files, err = filepath.Glob(filepath.Join(p, "*.toml")); err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			s, err := LoadScript(f)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func (s *Script) check() error {
	switch s.Provider {
	case OpenAI, Anthropic, Gemini, HTTP:
	default:
		return fmt.Errorf("provider must be %q, %q, %q or %q, not %q", OpenAI, Anthropic, Gemini, HTTP, s.Provider)
	}
	switch s.Order {
	case "":
		s.Order = Sequence
	case Sequence:
	case ByTurn:
		if s.Provider == HTTP {
			return fmt.Errorf("order = %q needs a model provider", ByTurn)
		}
	default:
		return fmt.Errorf("order must be %q or %q, not %q", Sequence, ByTurn, s.Order)
	}
	if e := s.Embeddings; e != nil {
		if s.Provider != OpenAI {
			return errors.New("[embeddings] needs provider = \"openai\"")
		}
		for text, v := range e.Vectors {
			if len(v) == 0 {
				return fmt.Errorf("[embeddings] vector of %q is empty", text)
			}
		}
	}
	if len(s.Exchanges) == 0 && s.Embeddings == nil {
		return errors.New("no [[exchange]] (nor [embeddings])")
	}
	for i := range s.Exchanges {
		x := &s.Exchanges[i]
		if x.Name == "" {
			x.Name = fmt.Sprintf("exchange %d", i+1)
		}
		if err := x.check(s.Provider); err != nil {
			return fmt.Errorf("[[exchange]] %d (%s): %v", i+1, x.Name, err)
		}
	}
	return nil
}

func (x *Exchange) check(provider string) error {
	r := &x.Reply
	given := 0
	for _, b := range []string{r.JSON, r.SSE, r.Body} {
		if b != "" {
			given++
		}
	}
	if given > 1 {
		return errors.New("reply: give one of json, sse and body")
	}
	if given == 0 && r.Drop == "" && r.Status == 0 {
		return errors.New("reply: give json, sse, body, a status or drop")
	}
	if r.JSON != "" && !json.Valid([]byte(r.JSON)) {
		return errors.New("reply.json is not JSON")
	}
	if r.Drop != "" && r.Drop != "close" && r.Drop != "reset" {
		return fmt.Errorf("reply.drop must be \"close\" or \"reset\", not %q", r.Drop)
	}
	if r.Status == 0 {
		r.Status = 200
	}
	if r.Status < 100 || r.Status > 599 {
		return fmt.Errorf("reply.status %d is not an HTTP status", r.Status)
	}
	if r.Chunk < 0 || r.ChunkDelayMS < 0 || r.DelayMS < 0 || r.DropAfter < 0 {
		return errors.New("reply: chunk, chunk_delay_ms, delay_ms and drop_after must not be negative")
	}
	e := &x.Expect
	if e.JSON != "" && !json.Valid([]byte(e.JSON)) {
		return errors.New("expect.json is not JSON")
	}
	if provider != HTTP && (e.JSON != "" || e.Query != nil) {
		return errors.New("expect.json and expect.query are for provider = \"http\"")
	}
	if provider == HTTP && (e.Model != "" || e.Tools != nil || e.NoTools || e.LastUser != "" || e.ToolResults != nil ||
		e.System != "" || e.Stream != nil || e.ToolChoice != "" || e.Messages != 0 || e.MaxTokens != 0 || e.Temperature != nil) {
		return errors.New("model expectations need provider = \"openai\", \"anthropic\" or \"gemini\"")
	}
	if e.Tools != nil && e.NoTools {
		return errors.New("expect: give tools or no_tools, not both")
	}
	for _, tr := range e.ToolResults {
		if tr.ID == "" {
			return errors.New("expect.tool_results: each needs an id")
		}
	}
	if e.Method == "" && provider != HTTP {
		e.Method = "POST"
	}
	if e.Path == "" {
		switch provider {
		case OpenAI:
			e.Path = "/chat/completions"
		case Anthropic:
			e.Path = "/v1/messages"
		}
		// Gemini's path names the model and the method: checkGemini reads
		// them, and path stays free unless the script sets it.
	}
	return nil
}
