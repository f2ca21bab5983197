package config

import (
	"reflect"
	"testing"

	"github.com/clara-lib/clara/core/protocol"
)

// TestParse_positions_count_the_lines_before_the_first_key: a file that
// starts with blank lines (or a JSON object indented by spaces) has its
// problems at the lines an editor shows, not counted from its first key.
func TestParse_positions_count_the_lines_before_the_first_key(t *testing.T) {
	cases := []struct {
		name, text string
		want       protocol.Problems
	}{
		{"toml key", "\n\n[limits]\nbogus = 1\n", protocol.Problems{{File: "f", Line: 4, Col: 1, Message: `unknown key "limits.bogus"`}}},
		{"toml syntax", "\xef\xbb\xbf\n\nx = [\n", protocol.Problems{{File: "f", Line: 3, Col: 6, Message: "expected newline but got end of file"}}},
		{"json key on the first line", "\n  {\"bogus\": 1}", protocol.Problems{{File: "f", Line: 2, Col: 4, Message: `unknown key "bogus"`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.text), "f", 0)
			ps := problemsOf(t, err)
			if c.name == "toml syntax" { // the parser's own words
				if len(ps) != 1 || ps[0].Line != c.want[0].Line {
					t.Fatalf("got %#v, want line %d", ps, c.want[0].Line)
				}
				return
			}
			if !reflect.DeepEqual(ps, c.want) {
				t.Fatalf("\n got %#v\nwant %#v", ps, c.want)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	toml := "\n# tools\n[[tools]]\nname = \"a\"\n\n[[tools]]\nname = \"b\"\nlua = 'x'\n[network]\nallow_hosts = []\n"
	for path, want := range map[string][2]int{
		"tools[0]": {3, 3}, "tools[1]": {6, 3}, "tools[1].lua": {8, 1}, "tools[1].lua.deeper": {8, 1},
		"network.allow_hosts": {10, 1}, "network": {9, 2}, "mcp_servers[0]": {0, 0},
	} {
		if l, c := Locate([]byte(toml), path); l != want[0] || c != want[1] {
			t.Errorf("toml %s: %d:%d, want %d:%d", path, l, c, want[0], want[1])
		}
	}
	json := "\n{\"tools\": [{\"name\": \"a\"},\n  {\"name\": \"b\"}]}"
	if l, c := Locate([]byte(json), "tools[1].name"); l != 3 || c != 4 {
		t.Errorf("json tools[1].name: %d:%d", l, c)
	}
}
