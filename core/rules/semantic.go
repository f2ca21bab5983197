package rules

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Semantic conditions (the seed's stretch goal): a rule matches when a
// text of the event is close in meaning to a concept,
//
//	[condition]
//	semantic = { concept = "authentication", field = "tool.args.query", threshold = 0.7 }
//
// by the cosine similarity of their embeddings. The concept's vector is
// computed once per load (the engine asks for Concepts and gives
// BindConcepts the vectors before the set is used); the text's at
// evaluation, through the Host, which must be an Embedder.

// Embedder is what a Host gives semantic conditions: the vector of a text
// for a session (which may cache it), within ctx's deadline.
type Embedder interface {
	Embed(ctx context.Context, session, text string) ([]float32, error)
}

type semanticDoc struct {
	Concept   string   `toml:"concept" json:"concept"`
	Field     string   `toml:"field" json:"field"`
	Threshold *float64 `toml:"threshold" json:"threshold"`
}

// semanticCond is a compiled semantic condition.
type semanticCond struct {
	concept   string
	field     string   // as written, for messages
	path      []string // under context
	threshold float64
	vector    []float32 // the concept's, normalised; set by BindConcepts
}

// maxConceptBytes bounds a concept's text.
const maxConceptBytes = 1024

// compileSemantic checks a semantic condition. The field is a path under
// context ("context." may be left out); the seed's tool.args is Clara's
// tool.arguments.
func compileSemantic(d *semanticDoc) (*semanticCond, string, error) {
	if strings.TrimSpace(d.Concept) == "" || len(d.Concept) > maxConceptBytes {
		return nil, "", fmt.Errorf("concept must be a text of 1 to %d bytes", maxConceptBytes)
	}
	if d.Threshold == nil || math.IsNaN(*d.Threshold) || *d.Threshold < -1 || *d.Threshold > 1 {
		return nil, "", errors.New("threshold must be a number from -1 to 1 (a cosine similarity)")
	}
	field := strings.TrimPrefix(d.Field, "context.")
	if !simplePath.MatchString("context." + field) {
		return nil, "", fmt.Errorf("field %q must be a path under context, such as tool.arguments.query", d.Field)
	}
	path := strings.Split(field, ".")
	if len(path) >= 2 && path[0] == "tool" && path[1] == "args" {
		path[1] = "arguments"
	}
	full := "context." + strings.Join(path, ".")
	return &semanticCond{concept: d.Concept, field: full, path: path, threshold: *d.Threshold}, full, nil
}

// Concept is a semantic condition's concept, with the rule that names it.
type Concept struct {
	Text string
	Rule string
	File string
	Line int
}

// Concepts lists the concepts of the set's semantic conditions, one entry
// per rule, in load order.
func (s *Set) Concepts() []Concept {
	if s == nil {
		return nil
	}
	var out []Concept
	for _, r := range s.all {
		if r.semantic != nil {
			out = append(out, Concept{Text: r.semantic.concept, Rule: r.ID, File: r.File, Line: r.Line})
		}
	}
	return out
}

// BindConcepts gives the semantic conditions their concepts' vectors
// (concept text -> vector). Call it before the set is used: it writes into
// the set's rules. A concept left without a vector makes its conditions
// fail (and not match).
func (s *Set) BindConcepts(vectors map[string][]float32) {
	if s == nil {
		return
	}
	for _, r := range s.all {
		if r.semantic != nil {
			r.semantic.vector = normalised(vectors[r.semantic.concept])
		}
	}
}

// normalised is v scaled to length 1 (nil for nil or a zero vector).
func normalised(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return nil
	}
	n := math.Sqrt(sum)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// cosine is the cosine similarity of unit vector u and vector v.
func cosine(u, v []float32) (float64, error) {
	if len(u) != len(v) {
		return 0, fmt.Errorf("the text's vector has %d dimensions, the concept's %d", len(v), len(u))
	}
	var dot, sum float64
	for i := range u {
		dot += float64(u[i]) * float64(v[i])
		sum += float64(v[i]) * float64(v[i])
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return 0, errors.New("the text's vector is zero or not finite")
	}
	return dot / math.Sqrt(sum), nil
}

// semantic evaluates a semantic condition: its value is the similarity
// (nil when the field is absent, null or empty: nothing to compare, no
// match). matched is similarity >= threshold.
func (e *emission) semantic(c *semanticCond) (value any, matched bool, err error) {
	if c.vector == nil {
		return nil, false, fmt.Errorf("semantic: concept %q has no vector (the set was loaded without an embedding model)", c.concept)
	}
	var text any
	if v, ok := e.ev.Context.Lookup(c.path); ok && v.kind == 's' {
		text = v.str
	} else {
		text, _ = walk(e.ev.Context.Context(), c.path)
	}
	s, ok := text.(string)
	switch {
	case text == nil || ok && s == "":
		return nil, false, nil
	case !ok:
		return nil, false, fmt.Errorf("semantic: %s is %s, not a text", c.field, pyType(text))
	}
	emb, ok := e.host.(Embedder)
	if !ok {
		return nil, false, errors.New("semantic: no embedding model here")
	}
	v, err := emb.Embed(e.ctx, e.ev.Session, s)
	if err != nil {
		return nil, false, fmt.Errorf("semantic: embedding %s: %v", c.field, err)
	}
	sim, err := cosine(c.vector, v)
	if err != nil {
		return nil, false, fmt.Errorf("semantic: %v", err)
	}
	return sim, sim >= c.threshold, nil
}
