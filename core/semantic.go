package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clara-lib/clara/core/config"
	"github.com/clara-lib/clara/core/llm"
	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/rules"
)

// Semantic rule conditions: the vectors of their concepts are computed
// when a configuration is prepared (outside the admin lock), those of the
// texts they compare when a rule is evaluated, within the request's
// deadline, and kept per session in e.out.vectors.

// maxVectors bounds the vectors kept, every session together.
const maxVectors = 4096

// conceptSession is the cache's session of the concepts' vectors, which no
// request's session can be ("" is not a session name).
const conceptSession = ""

// maxConceptBatch bounds the texts of one embeddings request.
const maxConceptBatch = 256

// prepareConcepts makes the configuration's embeddings client, if it has
// an embedding model, and gives set the vectors of its semantic
// conditions' concepts. A failure is a problem of each rule whose concept
// has no vector, at its file and line.
func (e *Engine) prepareConcepts(c *config.Config, m *models, set *rules.Set) error {
	if c.LLM.EmbeddingModel != "" && c.LLM.BaseURL != "" {
		// base_url must speak OpenAI's format: llm.provider says so, or,
		// when empty, llm.model's name (any but claude-*).
		if p := orProvider(c.LLM.Provider, c.LLM.Model); p == llm.ProviderAnthropic || p == llm.ProviderGemini {
			return fmt.Errorf("llm.embedding_model: embeddings are requested in OpenAI's format; llm.provider is %q", p)
		}
		emb, err := llm.NewEmbeddings(e.out.client, llm.EmbeddingConfig{BaseURL: c.LLM.BaseURL, Model: c.LLM.EmbeddingModel,
			APIKeyEnv: c.LLM.APIKeyEnv, Timeout: time.Duration(c.LLM.TimeoutMS) * time.Millisecond,
			MaxRetries: retries(c.LLM.MaxRetries), MaxResponseBytes: int64(c.LLM.MaxResponseBytes)})
		if err != nil {
			return err
		}
		m.embed = emb
	}
	concepts := set.Concepts()
	if len(concepts) == 0 {
		return nil
	}
	fail := func(bad func(text string) bool, msg string) error {
		var problems protocol.Problems
		for _, k := range concepts {
			if bad(k.Text) {
				problems = append(problems, protocol.Problem{File: k.File, Line: k.Line,
					Message: fmt.Sprintf("rule %q: semantic condition: %s", k.Rule, msg)})
			}
		}
		return problems
	}
	if m.embed == nil {
		return fail(func(string) bool { return true }, "no embedding model: set llm.base_url and llm.embedding_model")
	}
	source := m.embed.Source()
	vectors := map[string][]float32{}
	var missing []string
	for _, k := range concepts {
		if _, done := vectors[k.Text]; done {
			continue
		}
		v, ok := e.out.vectors.Get(source, conceptSession, k.Text)
		vectors[k.Text] = v
		if !ok {
			missing = append(missing, k.Text)
		}
	}
	if len(missing) > 0 {
		// The configuration is not in force yet: its allowlist is not the
		// engine client's, so the concepts go through a client of its own.
		client, err := llm.NewClient(m.clientOptions)
		if err != nil {
			return err
		}
		defer client.Close()
		emb := m.embed.WithClient(client)
		for start := 0; start < len(missing); start += maxConceptBatch {
			batch := missing[start:min(start+maxConceptBatch, len(missing))]
			vs, err := emb.Embed(context.Background(), batch)
			if err != nil {
				in := map[string]bool{}
				for _, t := range missing[start:] {
					in[t] = true
				}
				return fail(func(t string) bool { return in[t] }, fmt.Sprintf("the concept's vector: %s", errorMessage(err)))
			}
			for i, t := range batch {
				vectors[t] = vs[i]
				e.out.vectors.Put(source, conceptSession, t, vs[i])
			}
		}
	}
	set.BindConcepts(vectors)
	return nil
}

// errorMessage is an error's message (a protocol.Error's without its code).
func errorMessage(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

var _ rules.Embedder = (*ruleHost)(nil)

// Embed gives a semantic condition the vector of a text, from the
// session's cache or the configuration's embedding model.
func (h *ruleHost) Embed(ctx context.Context, session, text string) ([]float32, error) {
	emb := h.s.models.embed
	if emb == nil {
		return nil, errors.New("no embedding model (llm.embedding_model)")
	}
	source := emb.Source()
	if v, ok := h.e.out.vectors.Get(source, session, text); ok {
		return v, nil
	}
	vs, err := emb.Embed(ctx, []string{text})
	if err != nil {
		return nil, errors.New(errorMessage(err))
	}
	h.e.out.vectors.Put(source, session, text, vs[0])
	return vs[0], nil
}
