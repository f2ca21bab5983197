package tools

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Limits of the key-value store (SPEC §6.8). Going over one is an error,
// never a silent drop.
const (
	KVMaxKeyBytes   = 256
	KVMaxValueBytes = 64 << 10
	KVMaxKeys       = 10000
)

// KV is the session-scoped in-memory store behind kv_set, kv_get,
// kv_delete and kv_list. Sessions do not contend: each has its own lock.
type KV struct {
	sessions sync.Map // session name -> *kvSession
}

type kvSession struct {
	mu   sync.Mutex
	data map[string][]byte // compact JSON values
}

// NewKV returns an empty store.
func NewKV() *KV { return &KV{} }

func (kv *KV) session(name string, create bool) *kvSession {
	if s, ok := kv.sessions.Load(name); ok {
		return s.(*kvSession)
	}
	if !create {
		return nil
	}
	s, _ := kv.sessions.LoadOrStore(name, &kvSession{data: map[string][]byte{}}) // session names are Clara's own
	return s.(*kvSession)
}

// Reset forgets every session's data.
func (kv *KV) Reset() {
	kv.sessions.Range(func(k, _ any) bool { kv.sessions.Delete(k); return true })
}

// DropSession frees a session's data.
func (kv *KV) DropSession(name string) { kv.sessions.Delete(name) }

const keySchema = `"key":{"type":"string","minLength":1,"description":"at most 256 bytes"}`

func checkKey(tool, key string) error {
	if len(key) > KVMaxKeyBytes {
		return protocol.Errorf(protocol.InvalidArgs, "%s: key is %d bytes, more than the %d allowed", tool, len(key), KVMaxKeyBytes)
	}
	return nil
}

func kvSet(kv *KV) toolbox.Builtin {
	return toolbox.Builtin{Name: "kv_set", Description: "Stores a JSON value under a key in this session's key-value store.",
		Schema:     `{"type":"object","properties":{` + keySchema + `,"value":{"description":"any JSON value, at most 64 KiB"}},"required":["key","value"],"additionalProperties":false}`,
		LLMVisible: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			key := gjson.GetBytes(call.Arguments, "key").Str
			if err := checkKey("kv_set", key); err != nil {
				return nil, err
			}
			value := gjson.GetBytes(call.Arguments, "value").Raw
			if len(value) > KVMaxValueBytes {
				return nil, protocol.Errorf(protocol.InvalidArgs, "kv_set: value is %d bytes, more than the %d allowed", len(value), KVMaxValueBytes)
			}
			s := kv.session(call.Session, true)
			s.mu.Lock()
			defer s.mu.Unlock()
			_, exists := s.data[key]
			if !exists && len(s.data) >= KVMaxKeys {
				return nil, fmt.Errorf("kv_set: session %q already holds %d keys, the most allowed; delete some first", call.Session, KVMaxKeys)
			}
			s.data[key] = []byte(value) // gjson copied the key out of the arguments
			out := append([]byte(`{"key":`), protocol.AppendString(nil, key)...)
			return append(out, fmt.Sprintf(`,"created":%t}`, !exists)...), nil
		}}
}

func kvGet(kv *KV) toolbox.Builtin {
	return toolbox.Builtin{Name: "kv_get", Description: "Reads the JSON value stored under a key in this session's key-value store.",
		Schema:     `{"type":"object","properties":{` + keySchema + `},"required":["key"],"additionalProperties":false}`,
		LLMVisible: true,
		// Room for a value of the largest size kv_set accepts, and its wrapping.
		MaxOutputBytes: KVMaxValueBytes + KVMaxKeyBytes*6 + 64,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			key := gjson.GetBytes(call.Arguments, "key").Str
			if err := checkKey("kv_get", key); err != nil {
				return nil, err
			}
			out := append([]byte(`{"key":`), protocol.AppendString(nil, key)...)
			if s := kv.session(call.Session, false); s != nil {
				s.mu.Lock()
				v, ok := s.data[key]
				s.mu.Unlock()
				if ok {
					out = append(out, `,"found":true,"value":`...)
					return append(append(out, v...), '}'), nil
				}
			}
			return append(out, `,"found":false}`...), nil
		}}
}

func kvDelete(kv *KV) toolbox.Builtin {
	return toolbox.Builtin{Name: "kv_delete", Description: "Deletes a key from this session's key-value store.",
		Schema:     `{"type":"object","properties":{` + keySchema + `},"required":["key"],"additionalProperties":false}`,
		LLMVisible: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			key := gjson.GetBytes(call.Arguments, "key").Str
			if err := checkKey("kv_delete", key); err != nil {
				return nil, err
			}
			deleted := false
			if s := kv.session(call.Session, false); s != nil {
				s.mu.Lock()
				_, deleted = s.data[key]
				delete(s.data, key)
				s.mu.Unlock()
			}
			out := append([]byte(`{"key":`), protocol.AppendString(nil, key)...)
			return append(out, fmt.Sprintf(`,"deleted":%t}`, deleted)...), nil
		}}
}

func kvList(kv *KV) toolbox.Builtin {
	return toolbox.Builtin{Name: "kv_list", Description: "Lists the keys of this session's key-value store, optionally those starting with a prefix.",
		Schema:     `{"type":"object","properties":{"prefix":{"type":"string"}},"additionalProperties":false}`,
		LLMVisible: true,
		Run: func(_ context.Context, call toolbox.Call) ([]byte, error) {
			prefix := gjson.GetBytes(call.Arguments, "prefix").Str
			var keys []string
			if s := kv.session(call.Session, false); s != nil {
				s.mu.Lock()
				for k := range s.data {
					if strings.HasPrefix(k, prefix) {
						keys = append(keys, k)
					}
				}
				s.mu.Unlock()
			}
			sort.Strings(keys)
			out := []byte(`{"keys":[`)
			for i, k := range keys {
				if i > 0 {
					out = append(out, ',')
				}
				out = protocol.AppendString(out, k)
			}
			return append(out, fmt.Sprintf(`],"count":%d}`, len(keys))...), nil
		}}
}
