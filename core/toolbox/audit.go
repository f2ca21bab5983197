package toolbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	// Decided is what the decisions beyond allow and deny did to the call
	// (issue 28); nil for most calls. Clara's own, kept as it is.
	Decided *Decided
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
// {"ts","session","tool","args_sha256","duration_us","status","error"}.
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
	file   atomic.Pointer[auditFile]
	log    *logging.Logger
}

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
	hashed  bool   // rec.ArgsSHA256 is set; otherwise hash args
	args    []byte // small arguments, kept to hash on read
	session []byte // the session name (a request's bytes must not be kept)
	id      []byte // the request's id
	meta    []byte // the request's _meta (capped)
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

type auditFile struct {
	path   string
	mu     sync.Mutex // one write per line, never interleaved
	f      *os.File
	bad    bool // a write failed; reported once
	closed bool // replaced by SetFile: write to the current file instead
}

// NewAudit returns an audit that logs through log.
func NewAudit(log *logging.Logger) *Audit {
	n := runtime.GOMAXPROCS(0)
	if n > maxAuditShards {
		n = maxAuditShards
	}
	a := &Audit{log: log, shards: make([]auditShard, n)}
	a.picker.New = func() any {
		i := int(a.next.Add(1)-1) % len(a.shards)
		return &i
	}
	return a
}

// Add records one call. r.Session, r.ID, r.Meta, r.Reason and args are
// copied; r.Tool must be a string Clara owns. r.Seq and r.ArgsSHA256 are
// filled in here.
func (a *Audit) Add(r Record, args []byte) {
	r.Meta = cappedMeta(r.Meta)
	af := a.file.Load()
	logged := a.log.Enabled(logging.Debug)
	hashNow := af != nil || logged || len(args) > lazyHashMax
	if hashNow {
		r.ArgsSHA256 = sha256.Sum256(args)
	}
	pick := a.picker.Get().(*int)
	sh := &a.shards[*pick]
	a.picker.Put(pick)
	n := sh.head.Add(1)
	r.Seq = n
	s := &sh.slots[(n-1)%AuditRingSize]
	s.mu.Lock()
	if s.seq < n { // a slower writer of an older call must not overwrite a newer one
		s.seq = n
		s.rec = r
		s.rec.Session, s.rec.ID, s.rec.Meta = "", nil, nil
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
	if af != nil {
		line := append(r.AppendJSON(make([]byte, 0, 256)), '\n')
		// A file swapped out meanwhile is closed: follow to the new one.
		for af != nil && !af.write(line, a.log) {
			af = a.file.Load()
		}
	}
}

// write appends one line; false when the file was closed by SetFile.
func (af *auditFile) write(line []byte, log *logging.Logger) bool {
	af.mu.Lock()
	defer af.mu.Unlock()
	if af.closed {
		return false
	}
	if _, err := af.f.Write(line); err != nil && !af.bad {
		af.bad = true
		log.Logf(logging.Error, "audit file %s: %v (further write errors are not reported)", af.path, err)
	}
	return true
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
		lo := uint64(0)
		if hi := sh.head.Load(); hi > uint64(n) {
			lo = hi - uint64(n) // nothing older than this shard's last n can be among them
		}
		for j := range sh.slots {
			s := &sh.slots[j]
			s.mu.Lock()
			if s.seq > lo {
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
				all = append(all, shardRecord{r, i})
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
// The previous file, if any, is closed.
func (a *Audit) SetFile(path string) error {
	var next *auditFile
	if path != "" {
		if cur := a.file.Load(); cur != nil && cur.path == path {
			return nil
		}
		// O_NONBLOCK: a named pipe must not stall the caller (it is refused
		// just below, as is anything but a regular file: /proc/self/mem, a
		// device); regular files ignore the flag.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
		if err != nil {
			return fmt.Errorf("audit.path: %w", err)
		}
		if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() || pseudoFile(f) {
			f.Close()
			return fmt.Errorf("audit.path: %s is not a regular file", path)
		}
		next = &auditFile{path: path, f: f}
	}
	if old := a.file.Swap(next); old != nil {
		old.mu.Lock()
		old.closed = true
		old.f.Close()
		old.mu.Unlock()
	}
	return nil
}
