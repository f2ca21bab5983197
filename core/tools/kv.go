package tools

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"

	"github.com/clara-lib/clara/core/protocol"
	"github.com/clara-lib/clara/core/toolbox"
)

// Limits of the key-value store (SPEC §6.8). Going over one is an error,
// never a silent drop. A key's and a value's sizes are fixed; the rest are
// the defaults of the configuration's [kv] table (KVLimits).
const (
	KVMaxKeyBytes   = 256
	KVMaxValueBytes = 64 << 10
	KVMaxKeys       = 10000
)

// KVLimits bound what the store holds: in one session, and in all sessions
// together (each MCP session, each session a request names, has a store of
// its own). Bytes count keys and values as stored.
type KVLimits struct {
	MaxKeys       int   // kv.max_keys
	MaxBytes      int   // kv.max_bytes
	MaxTotalKeys  int64 // kv.max_total_keys
	MaxTotalBytes int64 // kv.max_total_bytes
}

// DefaultKVLimits are the [kv] table's defaults.
var DefaultKVLimits = KVLimits{MaxKeys: KVMaxKeys, MaxBytes: 16 << 20, MaxTotalKeys: 100000, MaxTotalBytes: 64 << 20}

// KV is the session-scoped in-memory store behind kv_set, kv_get,
// kv_delete and kv_list. Sessions do not contend: each has its own lock;
// the totals over all sessions are atomic counters.
type KV struct {
	sessions sync.Map // session name -> *kvSession
	limits   atomic.Pointer[KVLimits]
	keys     atomic.Int64 // in all sessions
	bytes    atomic.Int64
}

type kvSession struct {
	mu    sync.Mutex
	data  map[string][]byte // compact JSON values
	bytes int               // of its keys and values
	gone  bool              // dropped from the store: a writer that finds it takes a fresh one
}

// NewKV returns an empty store with the default limits.
func NewKV() *KV {
	kv := &KV{}
	kv.SetLimits(DefaultKVLimits)
	return kv
}

// SetLimits puts limits in force for the writes to come; what is stored
// stays, even over a lowered limit.
func (kv *KV) SetLimits(l KVLimits) { kv.limits.Store(&l) }

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
	kv.sessions.Range(func(k, _ any) bool { kv.DropSession(k.(string)); return true })
}

// DropSession frees a session's data.
func (kv *KV) DropSession(name string) {
	v, ok := kv.sessions.LoadAndDelete(name)
	if !ok {
		return
	}
	s := v.(*kvSession)
	s.mu.Lock()
	kv.keys.Add(-int64(len(s.data)))
	kv.bytes.Add(-int64(s.bytes))
	s.data, s.bytes, s.gone = nil, 0, true
	s.mu.Unlock()
}

// Usage is what the store holds in all sessions: keys and bytes.
func (kv *KV) Usage() (keys, bytes int64) { return kv.keys.Load(), kv.bytes.Load() }

// full is kv_set's refusal at a limit: tool_failed (the store cannot take
// the value; the call was well formed), its details naming the limit for
// programs.
func full(limit string, max int64, format string, args ...any) *protocol.Error {
	msg := "kv_set: " + fmt.Sprintf(format, args...)
	details := append([]byte(`{"limit":`), protocol.AppendString(nil, limit)...)
	details = append(append(append(details, `,"max":`...), strconv.FormatInt(max, 10)...), '}')
	return &protocol.Error{Code: protocol.ToolFailed, Message: msg, Details: details}
}

// store puts key = value in s (s.mu held) within the limits.
func (kv *KV) store(s *kvSession, session, key, value string) (created bool, err error) {
	lim := kv.limits.Load()
	old, exists := s.data[key]
	grow := len(value) - len(old)
	if !exists {
		grow += len(key)
		if len(s.data) >= lim.MaxKeys {
			return false, full("kv.max_keys", int64(lim.MaxKeys),
				"session %q already holds %d keys, the most kv.max_keys allows; delete some first", session, len(s.data))
		}
	}
	if grow > 0 && s.bytes+grow > lim.MaxBytes {
		return false, full("kv.max_bytes", int64(lim.MaxBytes),
			"session %q holds %d bytes; %d more would pass kv.max_bytes (%d); delete some first", session, s.bytes, grow, lim.MaxBytes)
	}
	if !exists {
		if n := kv.keys.Add(1); n > lim.MaxTotalKeys {
			kv.keys.Add(-1)
			return false, full("kv.max_total_keys", lim.MaxTotalKeys,
				"the store holds %d keys in all sessions, the most kv.max_total_keys allows; delete keys or end sessions first", n-1)
		}
	}
	if n := kv.bytes.Add(int64(grow)); grow > 0 && n > lim.MaxTotalBytes {
		kv.bytes.Add(-int64(grow))
		if !exists {
			kv.keys.Add(-1)
		}
		return false, full("kv.max_total_bytes", lim.MaxTotalBytes,
			"the store holds %d bytes in all sessions; %d more would pass kv.max_total_bytes (%d); delete keys or end sessions first", n-int64(grow), grow, lim.MaxTotalBytes)
	}
	s.data[key] = []byte(value) // gjson copied the key out of the arguments
	s.bytes += grow
	return !exists, nil
}

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
			var created bool
			for {
				s := kv.session(call.Session, true)
				s.mu.Lock()
				if s.gone { // the session ended meanwhile: this write starts its next store
					s.mu.Unlock()
					continue
				}
				var err error
				created, err = kv.store(s, call.Session, key, value)
				s.mu.Unlock()
				if err != nil {
					return nil, err
				}
				break
			}
			out := append([]byte(`{"key":`), protocol.AppendString(nil, key)...)
			return append(out, fmt.Sprintf(`,"created":%t}`, created)...), nil
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
				var old []byte
				if old, deleted = s.data[key]; deleted {
					delete(s.data, key)
					s.bytes -= len(key) + len(old)
					kv.keys.Add(-1)
					kv.bytes.Add(-int64(len(key) + len(old)))
				}
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
