package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// embed answers POST /embeddings as OpenAI's embeddings API does, with the
// script's fixed vectors: {"model": ..., "input": "text" | ["text", ...]}
// gets {"object": "list", "data": [{"object": "embedding", "index": i,
// "embedding": [...]}], "model": ..., "usage": {...}}. A request that is
// not of that shape, names another model, or holds a text without a
// vector is refused (400) and recorded as a failure.
func (st *scriptState) embed(w http.ResponseWriter, r *http.Request, body []byte) {
	e := st.script.Embeddings
	st.mu.Lock()
	st.recv = append(st.recv, Received{Exchange: "embeddings", Method: r.Method, Path: "/embeddings", Header: r.Header.Clone(), Body: body})
	if len(st.recv) > keptRequests {
		st.recv = st.recv[len(st.recv)-keptRequests:]
	}
	st.embedded++
	st.mu.Unlock()
	if r.Method != http.MethodPost {
		st.refuse(w, http.StatusMethodNotAllowed, "invalid_request_error", "embeddings: POST, not "+r.Method, nil)
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Model == "" || req.Input == nil {
		st.refuse(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("embeddings: want {\"model\": ..., \"input\": ...}: %s", body), nil)
		return
	}
	if e.Model != "" && req.Model != e.Model {
		st.refuse(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("embeddings: model %q, want %q", req.Model, e.Model), nil)
		return
	}
	var texts []string
	if json.Unmarshal(req.Input, &texts) != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			st.refuse(w, http.StatusBadRequest, "invalid_request_error", "embeddings: input must be a string or an array of strings", nil)
			return
		}
		texts = []string{one}
	}
	if len(texts) == 0 {
		st.refuse(w, http.StatusBadRequest, "invalid_request_error", "embeddings: input is empty", nil)
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	data := make([]datum, len(texts))
	for i, t := range texts {
		v, ok := e.Vectors[t]
		if !ok {
			st.refuse(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("embeddings: the script has no vector for %q", t), nil)
			return
		}
		data[i] = datum{Object: "embedding", Index: i, Embedding: v}
	}
	w.Header().Set("Content-Type", "application/json")
	type usage struct {
		Prompt int `json:"prompt_tokens"`
		Total  int `json:"total_tokens"`
	}
	_ = json.NewEncoder(w).Encode(struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
		Usage  usage   `json:"usage"`
	}{"list", data, req.Model, usage{len(texts), len(texts)}})
}
