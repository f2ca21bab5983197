package llm

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/clara-lib/clara/core/protocol"
)

// Embeddings asks an OpenAI-compatible server for the vectors of texts:
// POST {base_url}/embeddings with {"model": ..., "input": [...]} (OpenAI,
// vLLM, llama.cpp's server, Ollama and LiteLLM speak it). Semantic rule
// conditions use it.
type Embeddings struct {
	client *Client
	cfg    EmbeddingConfig
}

// EmbeddingConfig is where embeddings come from.
type EmbeddingConfig struct {
	BaseURL   string // llm.base_url
	Model     string // llm.embedding_model
	APIKeyEnv string // sent as Authorization: Bearer, as the chat's
	// Timeout bounds one request, retries included (DefaultModelTimeout
	// when 0); the caller's deadline may be shorter.
	Timeout          time.Duration
	MaxRetries       int
	MaxResponseBytes int64
}

// MaxEmbeddingText bounds the bytes of a text sent to be embedded: a
// longer one is cut there (at a character's boundary).
const MaxEmbeddingText = 16 << 10

// NewEmbeddings checks cfg and returns an Embeddings that sends through
// client.
func NewEmbeddings(client *Client, cfg EmbeddingConfig) (*Embeddings, error) {
	if _, err := urlHost(cfg.BaseURL); err != nil || !(strings.HasPrefix(cfg.BaseURL, "http://") || strings.HasPrefix(cfg.BaseURL, "https://")) {
		return nil, fmt.Errorf("llm.base_url %q is not an http:// or https:// URL", cfg.BaseURL)
	}
	if cfg.Model == "" {
		return nil, errors.New("llm.embedding_model is empty")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultModelTimeout
	}
	return &Embeddings{client: client, cfg: cfg}, nil
}

// WithClient is e sending through another client (one built with the
// allowlist of a configuration not yet in force).
func (e *Embeddings) WithClient(c *Client) *Embeddings { return &Embeddings{client: c, cfg: e.cfg} }

// Source names where e's vectors come from (server and model), for a
// cache that must not mix vectors of different models.
func (e *Embeddings) Source() string { return e.cfg.BaseURL + " " + e.cfg.Model }

// Embed returns the vectors of texts, in their order.
func (e *Embeddings) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	input := make([]string, len(texts))
	for i, t := range texts {
		input[i] = cut(t, MaxEmbeddingText)
	}
	body, err := json.Marshal(map[string]any{"model": e.cfg.Model, "input": input})
	if err != nil {
		return nil, protocol.InternalError(err)
	}
	var secrets []SecretHeader
	if e.cfg.APIKeyEnv != "" {
		secrets = []SecretHeader{{Name: "Authorization", Env: e.cfg.APIKeyEnv, Prefix: "Bearer ", Key: "llm.api_key_env"}}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	resp, err := e.client.Do(ctx, &Request{Method: http.MethodPost, URL: e.cfg.BaseURL + "/embeddings", Header: h,
		Secrets: secrets, Body: body, Timeout: e.cfg.Timeout, MaxRetries: e.cfg.MaxRetries, MaxResponseBytes: e.cfg.MaxResponseBytes})
	if err != nil {
		return nil, err
	}
	var reply struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &reply); err != nil {
		return nil, fmt.Errorf("embeddings: the answer is not OpenAI's shape: %v", err)
	}
	out := make([][]float32, len(texts))
	for _, d := range reply.Data {
		if d.Index < 0 || d.Index >= len(out) || out[d.Index] != nil || len(d.Embedding) == 0 {
			return nil, fmt.Errorf("embeddings: the answer's data has a bad or repeated index %d, or an empty vector", d.Index)
		}
		v := make([]float32, len(d.Embedding))
		for i, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, errors.New("embeddings: a vector holds a value that is not finite")
			}
			v[i] = float32(x)
		}
		out[d.Index] = v
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("embeddings: the answer has no vector for input %d", i)
		}
	}
	return out, nil
}

// cut returns s cut to at most n bytes, at a character's boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// VectorCache keeps the vectors of texts per session: a bounded LRU over
// (model, session, text), so a session that sends the same query again is
// not embedded again, and no session reads another's entries. Safe for
// concurrent use.
type VectorCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used
	items map[vectorKey]*list.Element
}

type vectorKey struct{ model, session, text string }

type vectorEntry struct {
	key vectorKey
	vec []float32
}

// NewVectorCache keeps at most max vectors.
func NewVectorCache(max int) *VectorCache {
	return &VectorCache{max: max, order: list.New(), items: map[vectorKey]*list.Element{}}
}

// Get returns the vector of text in the session, if kept.
func (c *VectorCache) Get(model, session, text string) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[vectorKey{model, session, text}]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*vectorEntry).vec, true
}

// Put keeps a vector, forgetting the least recently used past the bound.
func (c *VectorCache) Put(model, session, text string, vec []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := vectorKey{model, session, text}
	if el, ok := c.items[k]; ok {
		el.Value.(*vectorEntry).vec = vec
		c.order.MoveToFront(el)
		return
	}
	c.items[k] = c.order.PushFront(&vectorEntry{key: k, vec: vec})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*vectorEntry).key)
	}
}

// Forget drops a session's vectors (the session ended).
func (c *VectorCache) Forget(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.items {
		if k.session == session {
			c.order.Remove(el)
			delete(c.items, k)
		}
	}
}

// Len is how many vectors are kept.
func (c *VectorCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
