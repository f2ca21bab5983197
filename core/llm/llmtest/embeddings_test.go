package llmtest

import (
	"strings"
	"testing"
)

func TestServer_embeddings(t *testing.T) {
	srv := serve(t, "emb", `provider = "openai"
[embeddings]
model = "m"
vectors = { "a" = [1.0, 0.5], "b" = [0.0, 2.0] }
`)
	url := srv.BaseURL("emb") + "/embeddings"
	status, body := post(t, url, nil, `{"model":"m","input":["b","a"]}`)
	want := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0,2]},{"object":"embedding","index":1,"embedding":[1,0.5]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`
	if status != 200 || strings.TrimSpace(body) != want {
		t.Fatalf("%d %s", status, body)
	}
	if status, body = post(t, url, nil, `{"model":"m","input":"a"}`); status != 200 || !strings.Contains(body, `"embedding":[1,0.5]`) {
		t.Fatalf("one string: %d %s", status, body)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","input":["c"]}`, `no vector for "c"`},
		{`{"model":"other","input":["a"]}`, `model "other", want "m"`},
		{`{"model":"m","input":[1]}`, `input must be a string or an array of strings`},
		{`{"model":"m","input":["a"],"extra":1}`, `want {"model": ..., "input": ...}`},
	} {
		status, body := post(t, url, nil, c.body)
		if status != 400 || !strings.Contains(strings.ReplaceAll(body, `\"`, `"`), c.want) {
			t.Errorf("%s: %d %s", c.body, status, body)
		}
	}
	r := srv.Reports()[0]
	if r.Embedded != 6 || len(r.Failures) != 4 || !r.Complete {
		t.Fatalf("report %+v", r)
	}
	srv.Reset()
	if r := srv.Reports()[0]; r.Embedded != 0 || len(r.Failures) != 0 {
		t.Fatalf("after reset %+v", r)
	}
	if _, err := ParseScript("x", []byte("provider = \"anthropic\"\n[embeddings]\nvectors = { a = [1.0] }\n")); err == nil || !strings.Contains(err.Error(), "[embeddings] needs provider") {
		t.Fatalf("anthropic embeddings: %v", err)
	}
}
