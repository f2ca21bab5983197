package config

import "reflect"

// Defaults is the configuration every change starts from: each key's
// declared default.
func Defaults() Tree { return defaultsOf(schema()) }

func defaultsOf(s *spec) Tree {
	t := Tree{}
	for _, m := range s.members {
		if m.kind == kTable {
			t[m.name] = defaultsOf(m)
		} else {
			t[m.name] = m.def
		}
	}
	return t
}

// Merge applies over on top of base: a table merges key by key, any other
// value replaces. Neither input is modified. One-shot keys of base (clear)
// are not carried over: they act only in the change that gives them.
func Merge(base, over Tree) Tree {
	return merge(schema(), base, over)
}

func merge(s *spec, base, over Tree) Tree {
	out := make(Tree, len(base)+len(over))
	for k, v := range base {
		if m := s.member(k); m != nil && m.oneShot {
			continue
		}
		out[k] = v
	}
	for k, v := range over {
		if sub, ok := v.(Tree); ok {
			if cur, ok := out[k].(Tree); ok {
				ms := s.member(k)
				if ms == nil {
					ms = &spec{kind: kTable}
				}
				out[k] = merge(ms, cur, sub)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// WithoutOneShots is t without the one-shot keys, as it is kept in force.
func WithoutOneShots(t Tree) Tree {
	out := make(Tree, len(t))
	for k, v := range t {
		if m := schema().member(k); m != nil && m.oneShot {
			continue
		}
		out[k] = v
	}
	return out
}

// Build turns a complete, checked tree (Defaults merged with checked
// changes) into a Config.
func Build(t Tree) *Config {
	c := &Config{}
	build(schema(), t, reflect.ValueOf(c).Elem())
	return c
}

func build(s *spec, t Tree, v reflect.Value) {
	for _, m := range s.members {
		f := v.FieldByIndex(m.index[len(m.index)-1:])
		val, ok := t[m.name]
		if !ok {
			val = m.def
		}
		switch m.kind {
		case kTable:
			sub, _ := val.(Tree)
			build(m, sub, f)
		case kString:
			s, _ := val.(string)
			f.SetString(s)
		case kBool:
			b, _ := val.(bool)
			f.SetBool(b)
		case kInt:
			n, _ := val.(int64)
			f.SetInt(n)
		case kNumber:
			n, _ := val.(float64)
			f.SetFloat(n)
		case kStrings:
			list, _ := val.([]any)
			out := make([]string, 0, len(list))
			for _, e := range list {
				out = append(out, e.(string))
			}
			f.Set(reflect.ValueOf(out))
		case kEntries:
			list, _ := val.([]any)
			out := make([]map[string]any, 0, len(list))
			for _, e := range list {
				out = append(out, e.(map[string]any))
			}
			f.Set(reflect.ValueOf(out))
		}
	}
	if s.other != nil {
		f := v.FieldByIndex(s.other.index[len(s.other.index)-1:])
		m := map[string]float64{}
		for k, val := range t {
			if s.member(k) == nil {
				if n, ok := val.(float64); ok {
					m[k] = n
				}
			}
		}
		f.Set(reflect.ValueOf(m))
	}
}
