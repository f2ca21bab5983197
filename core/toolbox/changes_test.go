package toolbox_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/clara-lib/clara/core/toolbox"
)

func changesTool(t *testing.T, descriptor string) *toolbox.Tool {
	t.Helper()
	d, err := toolbox.ParseDescriptor([]byte(descriptor))
	if err != nil {
		t.Fatal(err)
	}
	tool, err := toolbox.NewTool(d, toolbox.ToolOptions{Run: func(context.Context, toolbox.Call) ([]byte, error) { return []byte("{}"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func TestChangesFiles_namesAndPointers(t *testing.T) {
	tool := changesTool(t, `{"name":"edit","changes_files":["file_path","/edits/1/path","/paths","/a~1b/~0c","/missing/0"]}`)
	if !tool.ChangesFiles() || !reflect.DeepEqual(tool.Descriptor.ChangesFiles, []string{"file_path", "/edits/1/path", "/paths", "/a~1b/~0c", "/missing/0"}) {
		t.Fatalf("%+v", tool.Descriptor.ChangesFiles)
	}
	got := tool.ChangedPaths([]byte(`{"file_path":"src/main.rs","edits":[{"path":"x"},{"path":"y.rs"}],"paths":["p1","p2"],"a/b":{"~c":"z.rs"}}`))
	if want := []string{"src/main.rs", "y.rs", "p1", "p2", "z.rs"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
	// What is not a path, or not there, names nothing.
	for _, args := range []string{`{}`, `{"file_path":7,"edits":[{"path":"x"}],"paths":["p",1]}`, `{"edits":{"1":{"path":3}}}`, `{"edits":[{},{}]}`} {
		if got := tool.ChangedPaths([]byte(args)); len(got) != 0 {
			t.Errorf("%s: %q", args, got)
		}
	}
	// An object's key that looks like an index is a key.
	if got := tool.ChangedPaths([]byte(`{"edits":{"1":{"path":"k.rs"}}}`)); !reflect.DeepEqual(got, []string{"k.rs"}) {
		t.Errorf("%q", got)
	}
	if plain := changesTool(t, `{"name":"plain"}`); plain.ChangesFiles() || plain.ChangedPaths([]byte(`{"file_path":"x"}`)) != nil {
		t.Fatal("a tool without changes_files changes nothing")
	}
}

func TestChangesFiles_errors(t *testing.T) {
	for text, want := range map[string]string{
		`{"name":"e","changes_files":[""]}`:     "changes_files holds an empty entry",
		`{"name":"e","changes_files":["/a~2"]}`: `"/a~2" is not a JSON pointer`,
		`{"name":"e","changes_files":"path"}`:   `"changes_files" must not be string`,
		`{"name":"e","changes_files":[1]}`:      `must not be number`,
		`{"name":"e","changes_files":["/a~"]}`:  `is not a JSON pointer`,
		`{"name":"e","changes_file":["path"]}`:  `unknown key "changes_file"`,
	} {
		_, err := toolbox.ParseDescriptor([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
}
