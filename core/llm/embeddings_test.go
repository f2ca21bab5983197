package llm

import (
	"context"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/llm/llmtest"
)

func TestVectorCache_bounded_lru_per_session(t *testing.T) {
	c := NewVectorCache(2)
	c.Put("m", "s1", "a", []float32{1})
	c.Put("m", "s1", "b", []float32{2})
	if _, ok := c.Get("m", "s2", "a"); ok {
		t.Fatal("a session read another's vector")
	}
	if _, ok := c.Get("m2", "s1", "a"); ok {
		t.Fatal("a model read another's vector")
	}
	c.Get("m", "s1", "a") // a is now the most recent
	c.Put("m", "s1", "c", []float32{3})
	if _, ok := c.Get("m", "s1", "b"); ok || c.Len() != 2 {
		t.Fatalf("b should have gone (len %d)", c.Len())
	}
	if v, ok := c.Get("m", "s1", "a"); !ok || v[0] != 1 {
		t.Fatal("a should have stayed")
	}
	c.Put("m", "s2", "a", []float32{4})
	c.Forget("s1")
	if _, ok := c.Get("m", "s2", "a"); !ok || c.Len() != 1 {
		t.Fatalf("Forget(s1) left %d", c.Len())
	}
}

func TestEmbeddings_against_the_scripted_server(t *testing.T) {
	sc, err := llmtest.ParseScript("emb", []byte("provider = \"openai\"\n[embeddings]\nmodel = \"m\"\nvectors = { \"a\" = [1.0, 0.5], \"b\" = [0.0, 2.0] }\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer("", sc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := NewClient(ClientOptions{ImplicitHosts: []string{srv.URL()}, MaxRetries: NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	e, err := NewEmbeddings(client, EmbeddingConfig{BaseURL: srv.BaseURL("emb") + "/", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Embed(context.Background(), []string{"b", "a"})
	if err != nil || len(vs) != 2 || vs[0][1] != 2 || vs[1][0] != 1 {
		t.Fatalf("%v %v", vs, err)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(context.Background(), []string{"c"}); err == nil || !strings.Contains(err.Error(), "status 400") {
		t.Fatalf("a text without a vector: %v", err)
	}
	if _, err := NewEmbeddings(client, EmbeddingConfig{BaseURL: "ftp://x", Model: "m"}); err == nil {
		t.Fatal("ftp URL accepted")
	}
	if got := cut("aé", 2); got != "a" {
		t.Fatalf("cut %q", got)
	}
}
