package resources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFile(path string, max int64) ([]byte, error) { return os.ReadFile(path) }

func TestTemplates_fillAndContain(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(root), "outside.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Compile([]map[string]any{
		{"name": "doc", "uri_template": "docs://{name}", "file": "{name}"},
		{"name": "json", "uri_template": "j://{id}", "mime_type": "application/json", "text": `{"id":"{id}"}`},
	}, nil, root, readFile)
	if err != nil {
		t.Fatal(err)
	}
	r, vars := set.Match("docs://a.txt")
	if r == nil || vars["name"] != "a.txt" {
		t.Fatalf("match: %v %v", r, vars)
	}
	if c, err := set.Read(r, "docs://a.txt", vars); err != nil || c.Text == nil || *c.Text != "alpha" {
		t.Errorf("read: %+v %v", c, err)
	}
	// A value is one path segment: .. and separators never leave the root.
	for _, v := range []string{"..", "."} {
		if _, err := set.Read(r, "docs://"+v, map[string]string{"name": v}); err == nil {
			t.Errorf("%q was read", v)
		}
	}
	if r, _ := set.Match("docs://../outside.txt"); r != nil {
		t.Errorf("a URI with a separator in a value matched")
	}
	// A JSON text stays JSON whatever the value.
	r, vars = set.Match(`j://a"b`)
	c, err := set.Read(r, `j://a"b`, vars)
	if err != nil || *c.Text != `{"id":"a\"b"}` {
		t.Errorf("json fill: %v %v", *c.Text, err)
	}
}

func TestCompile_problems(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		table map[string]any
		want  string
	}{
		{map[string]any{"name": "x", "uri": "a://b"}, "give text or file"},
		{map[string]any{"name": "x", "uri": "a://b", "text": "t", "file": "f"}, "give text or file"},
		{map[string]any{"name": "x", "text": "t"}, "give uri or uri_template"},
		{map[string]any{"name": "bad name", "uri": "a://b", "text": "t"}, "name"},
		{map[string]any{"name": "x", "uri": "a://b", "file": "../escape"}, "outside project_root"},
		{map[string]any{"name": "x", "uri": "a://b", "text": "t", "colour": "red"}, "unknown field"},
		{map[string]any{"name": "x", "uri_template": "a://{b}", "text": "t", "complete": map[string]any{"c": []any{"1"}}}, "not a variable"},
	} {
		if _, err := Compile([]map[string]any{c.table}, nil, root, readFile); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.table, err, c.want)
		}
	}
	if _, err := Compile(nil, []map[string]any{{"name": "p", "messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "image"}}}}}, root, readFile); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Errorf("a bad content block: %v", err)
	}
}
