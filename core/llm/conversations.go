package llm

import (
	"container/list"
	"context"
	"strings"
	"sync"
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

	messages   []message // without system messages: those are each chat's own
	turns      int       // model calls so far
	lastTokens int       // prompt plus completion tokens of the last call
	notices    []string  // raised by rules but not yet seen by the model
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
	max := c.maxMsgs
	c.mu.Unlock()
	conv.messages = trimHistory(conv.messages, max)
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
