package llm

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
	// store, when set, keeps every conversation outside the process (the
	// shared store, issue 31): a chat reads its session's conversation
	// there when it starts and writes it back when it ends.
	store atomic.Pointer[conversationBacking]
}

// ConversationStore keeps conversations outside the process, each an
// opaque text with a version that only the holder of that version may
// replace (a compare and swap), so that chats of one session in two
// processes never overwrite each other unseen.
type ConversationStore interface {
	LoadConversation(ctx context.Context, session string) (data []byte, version int64, err error)
	StoreConversation(ctx context.Context, session string, data []byte, version int64) (bool, error)
	ForgetConversation(ctx context.Context, session string) error
}

type conversationBacking struct {
	store ConversationStore
	local bool // when the store fails, go on with the conversation in memory
	log   func(error)
}

// SetStore keeps conversations in store from now on (nil: in memory).
// When the store fails, local goes on with the conversation this process
// holds; otherwise the chat fails with the store's error. log hears every
// failure.
func (c *Conversations) SetStore(store ConversationStore, local bool, log func(error)) {
	if store == nil {
		c.store.Store(nil)
		return
	}
	c.store.Store(&conversationBacking{store: store, local: local, log: log})
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

	// With a store: the version read when the chat started, and how many
	// messages and turns were read then (what the chat adds comes after).
	backed           *conversationBacking
	version          int64
	readMsgs, readTs int
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
	if b := c.store.Load(); b != nil {
		if err := b.store.ForgetConversation(context.Background(), session); err != nil {
			b.log(err)
		}
	}
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
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	conv.backed = nil
	if b := c.store.Load(); b != nil {
		if err := conv.read(ctx, b); err != nil {
			b.log(err)
			if !b.local {
				<-conv.lock
				return nil, err
			}
		} else {
			conv.backed = b
		}
	}
	return conv, nil
}

// read replaces what conv holds by the store's version of it.
func (conv *conversation) read(ctx context.Context, b *conversationBacking) error {
	data, version, err := b.store.LoadConversation(ctx, conv.session)
	if err != nil {
		return err
	}
	var sc storedConversation
	if data != nil {
		if err := json.Unmarshal(data, &sc); err != nil {
			return errors.New("the stored conversation of session " + strconv.Quote(conv.session) + " does not read: " + err.Error())
		}
	}
	conv.messages, conv.turns, conv.lastTokens, conv.notices = sc.messages(), sc.Turns, sc.LastTokens, sc.Notices
	conv.version, conv.readMsgs, conv.readTs = version, len(conv.messages), sc.Turns
	return nil
}

// write stores what the chat left in conv. When another process stored
// the conversation meanwhile, what this chat added goes after what it
// stored, and the store is tried again.
func (conv *conversation) write(b *conversationBacking, max int) {
	ctx := context.Background() // the store bounds each use by its own timeout
	added := conv.messages[min(conv.readMsgs, len(conv.messages)):]
	addedTurns := conv.turns - conv.readTs
	for attempt := 0; attempt < 5; attempt++ {
		data, err := json.Marshal(storeConversation(conv, trimHistory(conv.messages, max)))
		if err == nil {
			var ok bool
			ok, err = b.store.StoreConversation(ctx, conv.session, data, conv.version)
			if ok {
				return
			}
			if err == nil {
				notices := conv.notices
				if err = conv.read(ctx, b); err == nil {
					conv.messages = append(conv.messages, added...)
					conv.turns += addedTurns
					conv.notices = notices
					continue
				}
			}
		}
		b.log(err)
		return
	}
	b.log(errors.New("the conversation of session " + strconv.Quote(conv.session) + " was not stored: other chats of the session kept storing theirs first"))
}

// storedConversation is a conversation as the store keeps it.
type storedConversation struct {
	Messages   []storedMessage `json:"messages"`
	Turns      int             `json:"turns"`
	LastTokens int             `json:"last_tokens"`
	Notices    []string        `json:"notices,omitempty"`
}

type storedMessage struct {
	Role       string       `json:"role"`
	Content    string       `json:"content"`
	ToolCalls  []storedCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
	ToolName   string       `json:"tool_name,omitempty"`
	IsError    bool         `json:"is_error,omitempty"`
}

type storedCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Signature string `json:"signature,omitempty"`
	MadeID    bool   `json:"made_id,omitempty"`
}

func storeConversation(conv *conversation, msgs []message) *storedConversation {
	sc := &storedConversation{Messages: make([]storedMessage, len(msgs)), Turns: conv.turns, LastTokens: conv.lastTokens, Notices: conv.notices}
	for i, m := range msgs {
		sm := storedMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError}
		for _, tc := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, storedCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Signature: tc.Signature, MadeID: tc.madeID})
		}
		sc.Messages[i] = sm
	}
	return sc
}

func (sc *storedConversation) messages() []message {
	if len(sc.Messages) == 0 {
		return nil
	}
	out := make([]message, len(sc.Messages))
	for i, sm := range sc.Messages {
		m := message{Role: sm.Role, Content: sm.Content, ToolCallID: sm.ToolCallID, ToolName: sm.ToolName, IsError: sm.IsError}
		for _, tc := range sm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, toolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Signature: tc.Signature, madeID: tc.MadeID})
		}
		out[i] = m
	}
	return out
}

// release stores what the chat left in conv, cut to the limit, and lets
// the next chat of the session in.
func (c *Conversations) release(conv *conversation) {
	c.mu.Lock()
	max := c.maxMsgs
	c.mu.Unlock()
	if b := conv.backed; b != nil {
		conv.write(b, max)
		conv.backed = nil
	}
	c.mu.Lock()
	conv.messages = trimHistory(conv.messages, max)
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
	return appendHistory(dst, session, msgs, turns)
}

// HistoryOf is History read from the store when there is one (the
// conversation as any process last left it); with local, a store that
// fails leaves History's answer.
func (c *Conversations) HistoryOf(ctx context.Context, dst []byte, session string) ([]byte, error) {
	b := c.store.Load()
	if b == nil {
		return c.History(dst, session), nil
	}
	conv := &conversation{session: session}
	if err := conv.read(ctx, b); err != nil {
		b.log(err)
		if !b.local {
			return nil, err
		}
		return c.History(dst, session), nil
	}
	c.mu.Lock()
	max := c.maxMsgs
	c.mu.Unlock()
	return appendHistory(dst, session, trimHistory(conv.messages, max), conv.turns), nil
}

func appendHistory(dst []byte, session string, msgs []message, turns int) []byte {
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
