package jsonx

import (
	"strconv"
	"unicode/utf8"
)

// DecodeAny reads one JSON document into the values encoding/json gives
// an any (map[string]any, []any, string, float64, bool, nil), without
// reflection: rules read a call's arguments and result this way on every
// call they decide. ok is false where the two could differ (the document
// is not valid JSON, is nested deeper than MaxDepth, holds a string that is
// not UTF-8 or a number out of range): decode it with encoding/json then.
func DecodeAny(b []byte) (v any, ok bool) {
	r := NewReader(b)
	d := anyDecoder{r: r, ok: true}
	v = d.value()
	if r.End() != nil || !d.ok {
		return nil, false
	}
	return v, true
}

type anyDecoder struct {
	r  *Reader
	ok bool
}

func (d *anyDecoder) value() any {
	r := d.r
	switch c := r.peek(); {
	case c == '{':
		m := map[string]any{}
		r.Object(func(key []byte) {
			k := d.text(key) // before the value: reading it may reuse the key's bytes
			m[k] = d.value()
		})
		return m
	case c == '[':
		a := []any{}
		r.Array(func(int) { a = append(a, d.value()) })
		return a
	case c == '"':
		return d.text(r.stringBytes())
	case c == 't' || c == 'f':
		return r.Bool()
	case c == 'n':
		r.literal("null")
		return nil
	case c == '-' || c >= '0' && c <= '9':
		n := r.number()
		if r.err != nil {
			return nil
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			d.ok = false
		}
		return f
	case r.err == nil:
		r.Fail("expected a JSON value, found %s", r.found())
	}
	return nil
}

// text is b as a string; encoding/json would replace invalid UTF-8.
func (d *anyDecoder) text(b []byte) string {
	if !utf8.Valid(b) {
		d.ok = false
	}
	return string(b)
}
