package llm

import (
	"container/list"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/clara-lib/clara/core/protocol"
)

// Defaults of NewConversations' limits left at zero.
const (
	DefaultMaxHistoryMessages = 100
	DefaultMaxConversations   = 1024
)

// Conversations keeps the conversation of each session, so that the next
// chat with the same session continues it. It is bounded twice: each
// conversation keeps its last max_history_messages messages (cut where a
// user message starts, so a tool call is never kept without its answer),
// and the least recently used conversations are forgotten past
// maxConversations.
//
// Conversations is safe for concurrent use. Chats of one session run one
// after the other: a chat waits (until its deadline) for the previous one
// of its session to end.
type Conversations struct {
	mu       sync.Mutex
	maxMsgs  int
	maxConvs int
	m        map[string]*conversation
	lru      *list.List // of *conversation, most recently used first
}

// conversation is one session's history. Only the chat holding lock
// reads or writes the fields below it.
type conversation struct {
	session string
	elem    *list.Element
	lock    chan struct{}

	messages []message // without system messages: those are each chat's own
	// stored and storedTurns are messages and turns as the last chat left
	// them, read by History under Conversations.mu (messages belong to
	// the chat holding lock). Never changed in place: a chat builds new
	// slices.
	stored      []message
	storedTurns int
	turns       int      // model calls so far
	lastTokens  int      // prompt plus completion tokens of the last call
	notices     []string // raised by rules but not yet seen by the model
}

// NewConversations returns an empty store; zero limits mean the defaults.
func NewConversations(maxMessages, maxConversations int) *Conversations {
	c := &Conversations{m: map[string]*conversation{}, lru: list.New()}
	c.SetLimits(maxMessages, maxConversations)
	return c
}

// SetLimits changes the bounds (llm.max_history_messages); conversations
// are cut to them when next stored.
func (c *Conversations) SetLimits(maxMessages, maxConversations int) {
	if maxMessages <= 0 {
		maxMessages = DefaultMaxHistoryMessages
	}
	if maxConversations <= 0 {
		maxConversations = DefaultMaxConversations
	}
	c.mu.Lock()
	c.maxMsgs, c.maxConvs = maxMessages, maxConversations
	c.evictLocked()
	c.mu.Unlock()
}

// Forget drops a session's conversation (chat_reset, session_end). A chat
// of that session still running finishes, and its messages are dropped.
func (c *Conversations) Forget(session string) {
	c.mu.Lock()
	if conv := c.m[session]; conv != nil {
		c.removeLocked(conv)
	}
	c.mu.Unlock()
}

// ForgetAll drops every conversation (clara_reset).
func (c *Conversations) ForgetAll() {
	c.mu.Lock()
	for _, conv := range c.m {
		c.removeLocked(conv)
	}
	c.mu.Unlock()
}

// Len is the number of conversations kept.
func (c *Conversations) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// acquire returns the session's conversation, held until release.
func (c *Conversations) acquire(ctx context.Context, session string) (*conversation, error) {
	c.mu.Lock()
	conv := c.m[session]
	if conv == nil {
		session = strings.Clone(session) // the caller's may be borrowed (C memory)
		conv = &conversation{session: session, lock: make(chan struct{}, 1)}
		c.m[session] = conv
		conv.elem = c.lru.PushFront(conv)
		c.evictLocked()
	} else {
		c.lru.MoveToFront(conv.elem)
	}
	c.mu.Unlock()
	select {
	case conv.lock <- struct{}{}:
		return conv, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// release stores what the chat left in conv, cut to the limit, and lets
// the next chat of the session in.
func (c *Conversations) release(conv *conversation) {
	c.mu.Lock()
	conv.messages = trimHistory(conv.messages, c.maxMsgs)
	conv.stored, conv.storedTurns = conv.messages, conv.turns
	c.mu.Unlock()
	<-conv.lock
}

func (c *Conversations) evictLocked() {
	for len(c.m) > c.maxConvs {
		c.removeLocked(c.lru.Back().Value.(*conversation))
	}
}

func (c *Conversations) removeLocked(conv *conversation) {
	delete(c.m, conv.session)
	c.lru.Remove(conv.elem)
}

// trimHistory keeps at most max messages, starting at a user message.
func trimHistory(msgs []message, max int) []message {
	if len(msgs) <= max {
		return msgs
	}
	start := len(msgs) - max
	for start < len(msgs) && msgs[start].Role != roleUser {
		start++
	}
	return append([]message(nil), msgs[start:]...)
}

// History writes a session's conversation as chat_history answers it
// (seed 003's getMemory()): {"session":..., "turns":N, "messages":[...]}
// in the order they were said, each {"role":"user"|"assistant"|"tool",
// "content":...}, an assistant's with its "tool_calls" [{id, name,
// arguments}], a tool's with "tool_call_id", "name" and "is_error" when
// it failed. System messages are never kept. A session without a
// conversation has none. It does not wait for a chat of the session that
// is running: it reads what the last one that ended left.
func (c *Conversations) History(dst []byte, session string) []byte {
	c.mu.Lock()
	var msgs []message
	turns := 0
	if conv := c.m[session]; conv != nil {
		msgs, turns = conv.stored, conv.storedTurns
	}
	c.mu.Unlock()
	dst = append(dst, `{"session":`...)
	dst = protocol.AppendString(dst, session)
	dst = append(dst, `,"turns":`...)
	dst = strconv.AppendInt(dst, int64(turns), 10)
	dst = append(dst, `,"messages":[`...)
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"role":`...)
		dst = protocol.AppendString(dst, m.Role)
		dst = append(dst, `,"content":`...)
		dst = protocol.AppendString(dst, m.Content)
		if len(m.ToolCalls) > 0 {
			dst = append(dst, `,"tool_calls":[`...)
			for j, tc := range m.ToolCalls {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"id":`...)
				dst = protocol.AppendString(dst, tc.ID)
				dst = append(dst, `,"name":`...)
				dst = protocol.AppendString(dst, tc.Name)
				dst = append(dst, `,"arguments":`...)
				if args := strings.TrimSpace(tc.Arguments); args == "" {
					dst = append(dst, "{}"...)
				} else {
					dst = append(dst, eventValue([]byte(args))...)
				}
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
		if m.Role == roleTool {
			dst = append(dst, `,"tool_call_id":`...)
			dst = protocol.AppendString(dst, m.ToolCallID)
			dst = append(dst, `,"name":`...)
			dst = protocol.AppendString(dst, m.ToolName)
			if m.IsError {
				dst = append(dst, `,"is_error":true`...)
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}
