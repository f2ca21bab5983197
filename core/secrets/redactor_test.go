package secrets

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

const key = "sk-test-0123456789abcdef"

// escapeAll writes every character of s as a \uXXXX escape.
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > 0xFFFF {
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// escapeSome escapes every other character, in upper-case hex.
func escapeSome(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i%2 == 0 {
			fmt.Fprintf(&b, `\u%04X`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestRedactor_forms(t *testing.T) {
	r := New()
	r.Add(key, "a/b/c-token", "🔑-secret-🔑", "short") // "short" is under MinLength
	for _, tc := range []struct{ in, want string }{
		{"no secret here, short", "no secret here, short"},
		{"the key is " + key + ".", "the key is [redacted]."},
		{key + key, "[redacted][redacted]"},
		{`"` + escapeAll(key) + `"`, `"[redacted]"`},
		{`x ` + escapeSome(key) + ` y`, `x [redacted] y`},
		{`a\/b\/c-token`, `[redacted]`},
		{`a\u002fb/c-token`, `[redacted]`},
		{escapeAll("🔑-secret-🔑"), `[redacted]`},
		{`\\` + key, `\\[redacted]`},                     // an escaped backslash, then the key
		{`\` + key, `\[redacted]`},                       // a backslash that escapes nothing
		{`\u00` + key[:3], `\u00` + key[:3]},             // a broken escape, and only a prefix
		{key[:len(key)-1] + "!", key[:len(key)-1] + "!"}, // not the whole key
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(r.Bytes([]byte(tc.in))); got != tc.want {
			t.Errorf("Bytes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedactor_JSON(t *testing.T) {
	r := New()
	r.Add(key, "1234567890")
	for _, tc := range []struct{ in, want string }{
		{`{"content":"` + escapeAll(key) + `","n":1}`, `{"content":"[redacted]","n":1}`},
		{`{"k\"":"say \"` + key + `\""}`, `{"k\"":"say \"[redacted]\""}`},
		{`{"n":1234567890}`, `{"n":"[redacted]"}`},
		{`["sk-test-0123","456789abcdef"]`, `["sk-test-0123","456789abcdef"]`}, // two strings are two texts
		{`{"` + key + `":true}`, `{"[redacted]":true}`},
	} {
		got := string(r.JSON([]byte(tc.in)))
		if got != tc.want || r.JSONString(tc.in) != tc.want {
			t.Errorf("JSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("JSON(%s) = %s: not JSON", tc.in, got)
		}
	}
	in := []byte(`{"a":"nothing"}`)
	if out := r.JSON(in); &out[0] != &in[0] {
		t.Error("JSON copied a text that holds no secret")
	}
}

func TestRedactor_head(t *testing.T) {
	r := New()
	r.Add(key)
	for _, tc := range []struct{ in, want string }{
		{"status 401: you sent Bearer " + key[:12], "status 401: you sent Bearer "},
		{"status 401: " + escapeAll(key)[:40], "status 401: "},
		{"status 401: " + escapeAll(key)[:3], "status 401: "}, // `\u0`
		{"all of it " + key + " and sk-", "all of it [redacted] and "},
		{"ends with s", "ends with "},
		{"ends with x", "ends with x"},
	} {
		if got := r.Head(tc.in); got != tc.want {
			t.Errorf("Head(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Every way of cutting a text that holds the key, plain or escaped, into
// two or three pieces: the pieces put together never hold it, and nothing
// but the key is lost.
func TestStream_split(t *testing.T) {
	r := New()
	r.Add(key)
	for _, form := range []string{key, escapeAll(key), escapeSome(key)} {
		text := "before " + form + " after"
		want := "before [redacted] after"
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j += 3 {
				var got []string
				st := r.NewStream(func(s string) {
					if s == "" {
						t.Fatal("emit called with nothing")
					}
					got = append(got, s)
				})
				st.Write(text[:i])
				st.Write(text[i:j])
				st.Write(text[j:])
				st.Flush()
				if all := strings.Join(got, ""); all != want {
					t.Fatalf("pieces %q %q %q: got %q", text[:i], text[i:j], text[j:], got)
				}
			}
		}
	}
	// A text that is not a secret is held no longer than it may be one.
	var got []string
	st := r.NewStream(func(s string) { got = append(got, s) })
	st.Write("the sk-")
	st.Write("test-x and more")
	if strings.Join(got, "") != "the sk-test-x and more" {
		t.Fatalf("got %q", got)
	}
	st.Write("sk-test-01")
	st.Flush()
	if strings.Join(got, "") != "the sk-test-x and moresk-test-01" {
		t.Fatalf("after Flush: %q", got)
	}
}

func TestRedactor_nilAndShort(t *testing.T) {
	var r *Redactor
	r.Add(key)
	if r.String(key) != key || string(r.JSON([]byte(`"`+key+`"`))) != `"`+key+`"` || r.Head(key) != key || r.Len() != 0 {
		t.Error("a nil Redactor changed a text")
	}
	var got string
	st := r.NewStream(func(s string) { got += s })
	st.Write(key)
	st.Flush()
	if got != key {
		t.Errorf("nil stream: %q", got)
	}
	r = New()
	r.Add("12345", "")
	if r.Len() != 0 || r.String("12345") != "12345" {
		t.Error("a value under MinLength became a secret")
	}
}

func TestRedactor_longestFirstAndBound(t *testing.T) {
	r := New()
	r.Add("abcdef", "abcdefghij")
	if got := r.String("xabcdefghijx"); got != "x[redacted]x" {
		t.Errorf("got %q", got)
	}
	for i := 0; i < maxValues+10; i++ {
		r.Add(fmt.Sprintf("value-%04d", i))
	}
	if got := r.String("value-0000 value-0265"); got != "value-0000 [redacted]" {
		t.Errorf("after the bound: %q", got)
	}
	if r.Len() != 10 {
		t.Errorf("Len %d", r.Len())
	}
}

func TestRedactor_concurrent(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				v := fmt.Sprintf("secret-%d-%d", g, i%50)
				r.Add(v)
				if out := r.String("x " + v + " y"); out != "x [redacted] y" {
					t.Errorf("got %q", out)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func FuzzRedactor(f *testing.F) {
	f.Add(`{"a":"` + escapeAll(key) + `"}`)
	f.Add(`\` + key[:5] + `\u00`)
	f.Fuzz(func(t *testing.T, s string) {
		r := New()
		r.Add(key)
		out := r.String(s)
		if strings.Contains(out, key) {
			t.Fatalf("String(%q) = %q", s, out)
		}
		j := r.JSON([]byte(s))
		if json.Valid([]byte(s)) && !json.Valid(j) {
			t.Fatalf("JSON(%q) = %q: no longer JSON", s, j)
		}
		var v any
		if json.Unmarshal(j, &v) == nil {
			if b, _ := json.Marshal(v); strings.Contains(string(b), key) {
				t.Fatalf("JSON(%q) decodes to the key", s)
			}
		}
		h := r.Head(s)
		if strings.Contains(h, key) {
			t.Fatalf("Head(%q) = %q", s, h)
		}
	})
}
