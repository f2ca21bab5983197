package toolbox

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/protocol"
)

// AuditRingSize is how many records audit_tail can return.
const AuditRingSize = 1000

// Record is what the audit keeps of one call. Argument values are never
// kept, only their SHA-256.
type Record struct {
	Seq        uint64 // order among the records of one shard of the ring (see Audit)
	Time       time.Time
	Session    string
	Tool       string
	ArgsSHA256 [32]byte
	Duration   time.Duration
	Code       protocol.Code // "" for success
	ID         []byte        // the request's id (raw JSON string or number), nil when none
	Meta       []byte        // the request's _meta (a raw JSON object), nil when none
	Reason     string        // why a denied call was denied (policy or rule)

	// Decision is the record's own id (Reserve), which the envelope
	// returns; Parent the id of the call that made this one (a rule's, a
	// script's, a tool's, or the chat whose model asked for it).
	Decision, Parent Ticket
	// TraceID and SpanID place the call in a trace, when tracing is on.
	TraceID [16]byte
	SpanID  [8]byte
	Chat    *ChatRecord // what a chat did, for the chat tool's records
	// Decided is what the decisions beyond allow and deny did to the call
	// (issue 28); nil for most calls. Clara's own, kept as it is.
	Decided *Decided
}

// ChatRecord is what the record of a chat adds: the model it talked to and
// what that cost.
type ChatRecord struct {
	Provider     string
	Model        string
	InputTokens  int64
	OutputTokens int64
	Turns        int
	ModelCalls   int
	ModelMS      float64 // time spent waiting for the model, all calls together
}

// Ticket identifies one record: the audit's process prefix, its shard and
// its sequence in that shard. Its text (AppendText) is the decision id.
type Ticket struct {
	proc  uint32
	shard uint32
	seq   uint64
}

// Valid reports whether t was reserved (the zero Ticket is none).
func (t Ticket) Valid() bool { return t.seq != 0 }

// AppendText writes the decision id: 8 hex digits that differ between
// processes, the shard and the sequence ("3fa2c91e-0-1042").
func (t Ticket) AppendText(dst []byte) []byte {
	const digits = "0123456789abcdef"
	for i := 28; i >= 0; i -= 4 {
		dst = append(dst, digits[(t.proc>>uint(i))&0xf])
	}
	dst = append(dst, '-')
	dst = strconv.AppendUint(dst, uint64(t.shard), 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, t.seq, 10)
}

// String is the decision id.
func (t Ticket) String() string {
	if !t.Valid() {
		return ""
	}
	return string(t.AppendText(make([]byte, 0, 32)))
}

// Decided is what the audit keeps of a call's decisions beyond allow and
// deny: a rewrite of its arguments, a person's approval, a result
// blocked or redacted, what rules in shadow mode would have decided, a
// budget spent.
type Decided struct {
	Rewrite   *Rewritten
	Approval  *Approval
	BlockedBy string   // the rule that blocked the result
	Redacted  []string // the rules that redacted the result
	Shadow    []Shadowed
	Budget    string // "chat" or "session": the budget that refused the call
}

// Rewritten is a rule's rewrite of a call's arguments: both hashes.
type Rewritten struct {
	Rule          string
	Before, After [32]byte
}

// Approval is how a call held for approval was decided.
type Approval struct {
	ID       int64
	Decision string // "approved", "rejected", "timed_out", "cancelled"
	By       string // who decided: "handler", "approval_decide", "timeout", "no handler", ...
	Rule     string // the rule that asked; "" for needs_approval: true
	Waited   time.Duration
	// Edited: the approver gave other arguments (their hash is the
	// record's args_sha256); Before is the hash of those it was shown.
	Edited bool
	Before [32]byte
}

// Shadowed is a decision a rule in shadow mode would have taken.
type Shadowed struct {
	Decision, Rule, Reason string
}

// appendJSON writes the decisions as the record's further keys.
func (d *Decided) appendJSON(dst []byte) []byte {
	if rw := d.Rewrite; rw != nil {
		dst = append(dst, `,"rewrite":{"rule":`...)
		dst = protocol.AppendString(dst, rw.Rule)
		dst = append(dst, `,"before_sha256":"`...)
		dst = hex.AppendEncode(dst, rw.Before[:])
		dst = append(dst, `","after_sha256":"`...)
		dst = hex.AppendEncode(dst, rw.After[:])
		dst = append(dst, `"}`...)
	}
	if a := d.Approval; a != nil {
		dst = append(dst, `,"approval":{"id":`...)
		dst = strconv.AppendInt(dst, a.ID, 10)
		dst = append(dst, `,"decision":`...)
		dst = protocol.AppendString(dst, a.Decision)
		dst = append(dst, `,"by":`...)
		dst = protocol.AppendString(dst, a.By)
		if a.Rule != "" {
			dst = append(dst, `,"rule":`...)
			dst = protocol.AppendString(dst, a.Rule)
		}
		dst = append(dst, `,"waited_ms":`...)
		dst = strconv.AppendFloat(dst, float64(a.Waited.Microseconds())/1000, 'f', -1, 64)
		if a.Edited {
			dst = append(dst, `,"edited":true,"shown_sha256":"`...)
			dst = hex.AppendEncode(dst, a.Before[:])
			dst = append(dst, '"')
		}
		dst = append(dst, '}')
	}
	if d.BlockedBy != "" {
		dst = append(dst, `,"blocked_by":`...)
		dst = protocol.AppendString(dst, d.BlockedBy)
	}
	if len(d.Redacted) > 0 {
		dst = append(dst, `,"redacted_by":[`...)
		for i, r := range d.Redacted {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = protocol.AppendString(dst, r)
		}
		dst = append(dst, ']')
	}
	if len(d.Shadow) > 0 {
		dst = append(dst, `,"shadow":[`...)
		for i, sh := range d.Shadow {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"decision":`...)
			dst = protocol.AppendString(dst, sh.Decision)
			dst = append(dst, `,"rule":`...)
			dst = protocol.AppendString(dst, sh.Rule)
			if sh.Reason != "" {
				dst = append(dst, `,"reason":`...)
				dst = protocol.AppendString(dst, sh.Reason)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if d.Budget != "" {
		dst = append(dst, `,"budget":`...)
		dst = protocol.AppendString(dst, d.Budget)
	}
	return dst
}

// maxAuditMeta bounds the _meta an audit record keeps; a larger one is
// recorded as its SHA-256 and size.
const maxAuditMeta = 1024

// AppendJSON writes the record as one JSON object:
// {"ts","id","session","tool","args_sha256","duration_us","status","error",
// "reason","meta","decision_id","parent_id","trace_id","span_id","chat"},
// the optional ones only when set.
func (r *Record) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"ts":`...)
	dst = protocol.AppendString(dst, r.Time.UTC().Format("2006-01-02T15:04:05.000000Z"))
	if r.ID != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, r.ID...)
	}
	dst = append(dst, `,"session":`...)
	dst = protocol.AppendString(dst, r.Session)
	dst = append(dst, `,"tool":`...)
	dst = protocol.AppendString(dst, r.Tool)
	dst = append(dst, `,"args_sha256":"`...)
	dst = hex.AppendEncode(dst, r.ArgsSHA256[:])
	dst = append(dst, `","duration_us":`...)
	dst = strconv.AppendInt(dst, r.Duration.Microseconds(), 10)
	if r.Code == "" {
		dst = append(dst, `,"status":"success","error":null`...)
	} else {
		dst = append(dst, `,"status":"error","error":`...)
		dst = protocol.AppendString(dst, string(r.Code))
	}
	if r.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = protocol.AppendString(dst, r.Reason)
	}
	if r.Meta != nil {
		dst = append(dst, `,"meta":`...)
		dst = append(dst, r.Meta...)
	}
	if r.Decided != nil {
		dst = r.Decided.appendJSON(dst)
	}
	if r.Decision.Valid() {
		dst = append(dst, `,"decision_id":"`...)
		dst = append(r.Decision.AppendText(dst), '"')
	}
	if r.Parent.Valid() {
		dst = append(dst, `,"parent_id":"`...)
		dst = append(r.Parent.AppendText(dst), '"')
	}
	if r.TraceID != ([16]byte{}) {
		dst = append(dst, `,"trace_id":"`...)
		dst = hex.AppendEncode(dst, r.TraceID[:])
		dst = append(dst, `","span_id":"`...)
		dst = append(hex.AppendEncode(dst, r.SpanID[:]), '"')
	}
	if c := r.Chat; c != nil {
		dst = append(dst, `,"chat":{"provider":`...)
		dst = protocol.AppendString(dst, c.Provider)
		dst = append(dst, `,"model":`...)
		dst = protocol.AppendString(dst, c.Model)
		dst = append(dst, `,"input_tokens":`...)
		dst = strconv.AppendInt(dst, c.InputTokens, 10)
		dst = append(dst, `,"output_tokens":`...)
		dst = strconv.AppendInt(dst, c.OutputTokens, 10)
		dst = append(dst, `,"turns":`...)
		dst = strconv.AppendInt(dst, int64(c.Turns), 10)
		dst = append(dst, `,"model_calls":`...)
		dst = strconv.AppendInt(dst, int64(c.ModelCalls), 10)
		dst = append(dst, `,"model_ms":`...)
		dst = strconv.AppendFloat(dst, c.ModelMS, 'f', -1, 64)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// Audit records every call: in a ring of the last AuditRingSize records,
// in a JSONL file when one is set, and at debug level in the log.
//
// The ring costs the call path no allocation and no shared write. It is
// sharded: a call writes into the shard of its thread (or processor), and
// each shard keeps its own last AuditRingSize records and counts its own
// sequence, so threads calling at once never write the same cache line (a
// single shared counter made two threads slower than one). Tail merges the
// shards by time. Small arguments are copied and hashed only when someone
// reads the ring (the file and the log, when on, hash at once).
type Audit struct {
	shards []auditShard
	picker sync.Pool // *int: a shard index; sync.Pool caches it per processor
	next   atomic.Uint32
	proc   uint32 // the decision ids' prefix: random, per process
	file   atomic.Pointer[auditFile]
	export atomic.Pointer[ExportFunc]
	log    *logging.Logger
}

// ExportFunc receives every record with its JSON line (without the
// newline), on the caller's goroutine: the OTLP logs of telemetry. It
// must not keep line or the record's slices.
type ExportFunc func(r *Record, line []byte)

// SetExport sends every record to f from now on (nil stops).
func (a *Audit) SetExport(f ExportFunc) {
	if f == nil {
		a.export.Store(nil)
		return
	}
	a.export.Store(&f)
}

// Exporting reports whether records are exported (SetExport).
func (a *Audit) Exporting() bool { return a.export.Load() != nil }

// Shipped reports whether records leave the process (a file, a pipe,
// standard output, OTLP logs): then every envelope carries its decision id.
func (a *Audit) Shipped() bool { return a.file.Load() != nil || a.export.Load() != nil }

type auditShard struct {
	head  atomic.Uint64 // records written into this shard
	slots [AuditRingSize]auditSlot
	_     [64]byte // keep the next shard's head off this one's last line
}

// maxAuditShards bounds the memory of the ring (a shard is about 200 KiB).
const maxAuditShards = 8

// lazyHashMax is the largest argument copied to be hashed on read; larger
// ones are hashed when the call is recorded.
const lazyHashMax = 512

type auditSlot struct {
	mu      sync.Mutex
	seq     uint64
	rec     Record
	chat    ChatRecord // the copy of rec.Chat: records own what they keep
	hashed  bool       // rec.ArgsSHA256 is set; otherwise hash args
	args    []byte     // small arguments, kept to hash on read
	session []byte     // the session name (a request's bytes must not be kept)
	id      []byte     // the request's id
	meta    []byte     // the request's _meta (capped)
	hasID   bool
	hasMeta bool
}

// cappedMeta is the _meta a record keeps: as given up to maxAuditMeta
// bytes, else {"sha256": its hash, "bytes": its size}.
func cappedMeta(meta []byte) []byte {
	if len(meta) <= maxAuditMeta {
		return meta
	}
	sum := sha256.Sum256(meta)
	out := append([]byte(`{"sha256":"`), hex.EncodeToString(sum[:])...)
	return append(strconv.AppendInt(append(out, `","bytes":`...), int64(len(meta)), 10), '}')
}

// AuditSink is where records go besides the ring (the [audit] table).
type AuditSink struct {
	// Path is a regular file, a named pipe, "-" or "/dev/stdout" for
	// standard output, "/dev/stderr"; "" is none.
	Path string
	// MaxSizeMB > 0 rotates a regular file at that size (lumberjack), keeping
	// MaxBackups files (0: all) for MaxAgeDays (0: forever), gzipped when
	// Compress.
	MaxSizeMB, MaxBackups, MaxAgeDays int
	Compress                          bool
}

type auditFile struct {
	sink   AuditSink
	mu     sync.Mutex // one write per line, never interleaved
	w      io.Writer  // f, lj, or a standard stream
	f      *os.File   // the file or pipe opened at Path (nil: a standard stream or lj)
	lj     *lumberjack.Logger
	bad    bool // a write failed; reported once
	closed bool // replaced by SetSink: write to the current one instead
}

// NewAudit returns an audit that logs through log.
func NewAudit(log *logging.Logger) *Audit {
	n := runtime.GOMAXPROCS(0)
	if n > maxAuditShards {
		n = maxAuditShards
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	a := &Audit{log: log, shards: make([]auditShard, n), proc: binary.LittleEndian.Uint32(b[:])}
	a.picker.New = func() any {
		i := int(a.next.Add(1)-1) % len(a.shards)
		return &i
	}
	return a
}

// Reserve takes the ticket of a record to come: the decision id of a call
// that starts, which the calls it makes name as their parent. The record
// goes into its slot when Add is given the ticket.
func (a *Audit) Reserve() Ticket {
	pick := a.picker.Get().(*int)
	i := *pick
	a.picker.Put(pick)
	return Ticket{proc: a.proc, shard: uint32(i), seq: a.shards[i].head.Add(1)}
}

// Add records one call. r.Session, r.ID, r.Meta, r.Reason, r.Chat and
// args are copied; r.Tool must be a string Clara owns. r.Seq and
// r.ArgsSHA256 are filled in here, and r.Decision when it was not
// reserved.
func (a *Audit) Add(r Record, args []byte) { a.AddRecord(&r, args) }

// AddRecord is Add without copying the record on the way in (the call
// path's: a Record is a few hundred bytes). r is changed (Seq, the hash,
// the decision id) and not kept.
func (a *Audit) AddRecord(r *Record, args []byte) {
	r.Meta = cappedMeta(r.Meta)
	af := a.file.Load()
	ex := a.export.Load()
	logged := a.log.Enabled(logging.Debug)
	hashNow := af != nil || ex != nil || logged || len(args) > lazyHashMax
	if hashNow {
		r.ArgsSHA256 = sha256.Sum256(args)
	}
	if !r.Decision.Valid() || r.Decision.proc != a.proc || int(r.Decision.shard) >= len(a.shards) {
		r.Decision = a.Reserve()
	}
	sh := &a.shards[r.Decision.shard]
	n := r.Decision.seq
	r.Seq = n
	s := &sh.slots[(n-1)%AuditRingSize]
	s.mu.Lock()
	if s.seq < n { // a slower writer of an older call must not overwrite a newer one
		s.seq = n
		s.rec = *r
		s.rec.Session, s.rec.ID, s.rec.Meta = "", nil, nil
		if r.Chat != nil {
			s.chat = *r.Chat
			s.rec.Chat = &s.chat
		}
		s.session = append(s.session[:0], r.Session...)
		s.id = append(s.id[:0], r.ID...)
		s.hasID = r.ID != nil
		s.meta = append(s.meta[:0], r.Meta...)
		s.hasMeta = r.Meta != nil
		s.hashed = hashNow
		if hashNow {
			s.args = s.args[:0]
		} else {
			s.args = append(s.args[:0], args...)
		}
	}
	s.mu.Unlock()
	if logged {
		a.log.Log(logging.Debug, "audit "+string(r.AppendJSON(nil)))
	}
	if af != nil || ex != nil {
		line := append(r.AppendJSON(make([]byte, 0, 320)), '\n')
		// A file swapped out meanwhile is closed: follow to the new one.
		for af != nil && !af.write(line, a.log) {
			af = a.file.Load()
		}
		if ex != nil {
			rc := *r // its own copy: handing r on would put the caller's record on the heap on every call
			(*ex)(&rc, line[:len(line)-1])
		}
	}
}

// write appends one line; false when the sink was replaced by SetSink.
func (af *auditFile) write(line []byte, log *logging.Logger) bool {
	af.mu.Lock()
	defer af.mu.Unlock()
	if af.closed {
		return false
	}
	if _, err := af.w.Write(line); err != nil && !af.bad {
		af.bad = true
		log.Logf(logging.Error, "audit.path %s: %v (further write errors are not reported)", af.sink.Path, err)
	}
	return true
}

// close closes what the sink opened (never a standard stream).
func (af *auditFile) close() {
	af.closed = true
	if af.f != nil {
		af.f.Close()
	}
	if af.lj != nil {
		af.lj.Close()
	}
}

// pseudoFile reports whether f lives on a kernel's pseudo file system,
// whose files pass for regular ones (/proc/self/mem, /sys/...) but are not
// a place to append records to.
func pseudoFile(f *os.File) bool {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil {
		return true
	}
	switch uint32(st.Type) {
	case 0x9fa0, // proc
		0x62656572, // sysfs
		0x64626720, // debugfs
		0x74726163, // tracefs
		0x73636673, // securityfs
		0x27e0eb,   // cgroup
		0x63677270, // cgroup2
		0x1cd1,     // devpts
		0xcafe4a11: // bpf
		return true
	}
	return false
}

// Tail returns up to n of the most recent records, oldest first.
func (a *Audit) Tail(n int) []Record {
	if n > AuditRingSize {
		n = AuditRingSize
	}
	if n <= 0 {
		return nil
	}
	type shardRecord struct {
		Record
		shard int
	}
	var all []shardRecord
	for i := range a.shards {
		sh := &a.shards[i]
		// Walk back from the newest ticket: a ticket of a call still
		// running (audit_tail's own, one left to a C tool) has no record
		// yet, and must not hide an older one.
		hi := sh.head.Load()
		found := 0
		for k := hi; k > 0 && hi-k < AuditRingSize && found < n; k-- {
			s := &sh.slots[(k-1)%AuditRingSize]
			s.mu.Lock()
			if s.seq == k {
				r := s.rec
				r.Session = string(s.session)
				if s.hasID {
					r.ID = bytes.Clone(s.id)
				}
				if s.hasMeta {
					r.Meta = bytes.Clone(s.meta)
				}
				if !s.hashed {
					r.ArgsSHA256 = sha256.Sum256(s.args)
				}
				if r.Chat != nil {
					c := *r.Chat
					r.Chat = &c
				}
				all = append(all, shardRecord{r, i})
				found++
			}
			s.mu.Unlock()
		}
	}
	sort.Slice(all, func(i, j int) bool {
		x, y := &all[i], &all[j]
		if !x.Time.Equal(y.Time) {
			return x.Time.Before(y.Time)
		}
		if x.shard != y.shard {
			return x.shard < y.shard
		}
		return x.Seq < y.Seq
	})
	if len(all) > n {
		all = all[len(all)-n:]
	}
	out := make([]Record, len(all))
	for i := range all {
		out[i] = all[i].Record
	}
	return out
}

// SetFile appends records to the JSONL file at path from now on ("" stops).
func (a *Audit) SetFile(path string) error { return a.SetSink(AuditSink{Path: path}) }

// SetSink sends records to sink from now on (a Path of "" stops). The
// previous sink, if any, is closed.
func (a *Audit) SetSink(sink AuditSink) error {
	var next *auditFile
	if sink.Path != "" {
		if cur := a.file.Load(); cur != nil && cur.sink == sink {
			return nil
		}
		var err error
		if next, err = openSink(sink); err != nil {
			return err
		}
	}
	if old := a.file.Swap(next); old != nil {
		old.mu.Lock()
		old.close()
		old.mu.Unlock()
	}
	return nil
}

// Reopen closes and opens the sink's file again: after a rotation moved
// it away, records go to a new file at the configured path (audit_reopen,
// clara_audit_reopen, a SIGHUP handler). A standard stream is left as it
// is. It reports why the file cannot be opened; records then keep going
// where they went.
func (a *Audit) Reopen() error {
	af := a.file.Load()
	if af == nil {
		return nil
	}
	af.mu.Lock()
	defer af.mu.Unlock()
	if af.closed {
		return nil // replaced meanwhile: the new sink is freshly open
	}
	switch {
	case af.lj != nil:
		// lumberjack opens the file at its path again on the next write.
		if err := af.lj.Close(); err != nil {
			return fmt.Errorf("audit.path: %w", err)
		}
	case af.f != nil:
		f, _, err := openAuditPath(af.sink.Path)
		if err != nil {
			return err
		}
		af.f.Close()
		af.f, af.w, af.bad = f, f, false
	}
	return nil
}

// openSink opens what sink names.
func openSink(sink AuditSink) (*auditFile, error) {
	af := &auditFile{sink: sink}
	switch sink.Path {
	case "-", "/dev/stdout":
		af.w = os.Stdout
		return af, nil
	case "/dev/stderr":
		af.w = os.Stderr
		return af, nil
	}
	f, regular, err := openAuditPath(sink.Path)
	if err != nil {
		return nil, err
	}
	if regular && sink.MaxSizeMB > 0 {
		f.Close() // checked; lumberjack opens it itself, and reopens it after each rotation
		af.lj = &lumberjack.Logger{Filename: sink.Path, MaxSize: sink.MaxSizeMB, MaxBackups: sink.MaxBackups,
			MaxAge: sink.MaxAgeDays, Compress: sink.Compress}
		af.w = af.lj
		return af, nil
	}
	af.f, af.w = f, f
	return af, nil
}

// openAuditPath opens path for appending records: a regular file (created
// when missing) or a named pipe some process reads. Anything else (a
// device, /proc/self/mem, a directory) is refused.
func openAuditPath(path string) (f *os.File, regular bool, err error) {
	// O_NONBLOCK: opening a named pipe must not stall the caller until a
	// reader comes (it fails at once, ENXIO, when none reads it); regular
	// files ignore the flag, and writes to a pipe wait in Go's poller, not
	// in a thread, when the reader is behind.
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ENXIO) {
		return nil, false, fmt.Errorf("audit.path: %s is a named pipe that no process reads", path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("audit.path: %w", err)
	}
	info, err := f.Stat()
	switch {
	case err != nil || pseudoFile(f):
	case info.Mode().IsRegular():
		return f, true, nil
	case info.Mode()&os.ModeNamedPipe != 0:
		return f, false, nil
	}
	f.Close()
	return nil, false, fmt.Errorf("audit.path: %s is not a regular file or a named pipe", path)
}
