package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clara-lib/clara/core/pgstore"
	"github.com/clara-lib/clara/core/pgstore/pgtest"
	"github.com/clara-lib/clara/core/state"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on url, closed at the end of the test. Each store is
// what one process has: its own pool and listener.
func open(t *testing.T, url string, h *pgstore.Handlers) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(pgstore.Options{URL: url, PoolSize: 4, StatementTimeout: 3 * time.Second,
		Log: func(m string) { t.Log(m) }})
	if err != nil {
		t.Fatal(err)
	}
	if h != nil {
		s.SetHandlers(*h)
	}
	t.Cleanup(s.Close)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// listening waits until the store's listener is connected.
func listening(t *testing.T, s *pgstore.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !s.Listening() {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not connect")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMigrate_concurrent_starts_migrate_once(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				errs <- err
				return
			}
			defer pool.Close()
			errs <- pgstore.Migrate(context.Background(), pool)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.Migrate(context.Background(), pool); err != nil { // idempotent
		t.Fatal(err)
	}
	var n, v int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), max(version) FROM clara_schema`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != pgstore.SchemaVersion || v != pgstore.SchemaVersion {
		t.Fatalf("clara_schema has %d rows, version %d; want %d", n, v, pgstore.SchemaVersion)
	}
	// A schema newer than this Clara's is refused, not used.
	if _, err := pool.Exec(context.Background(), `INSERT INTO clara_schema (version) VALUES (999)`); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.Open(pgstore.Options{URL: url, StatementTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(context.Background()); err == nil || errors.Is(err, pgstore.ErrUnavailable) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a newer schema: %v", err)
	}
}

func TestState_shared_and_cache_invalidated(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url, nil), open(t, url, nil)
	listening(t, a)
	listening(t, b)
	ctx := context.Background()
	if err := a.StateApply(ctx, []state.Write{{Scope: "s", Key: "n", Value: []byte(`1`)}, {Scope: "s", Key: "o", Value: []byte(`{ "x" : [1, 2] }`)}}); err != nil {
		t.Fatal(err)
	}
	m, err := b.StateScope(ctx, "s") // cached in b
	if err != nil || m["n"] != float64(1) {
		t.Fatalf("b reads %v, %v", m, err)
	}
	raw, ok, err := b.StateGet(ctx, "s", "o")
	if err != nil || !ok || string(raw) != `{"x":[1,2]}` {
		t.Fatalf("b gets %s %v %v", raw, ok, err)
	}
	if err := a.StateApply(ctx, []state.Write{{Scope: "s", Key: "n", Value: []byte(`2`)}, {Scope: "s", Key: "o"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := b.StateScope(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if m["n"] == float64(2) && m["o"] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b still reads %v: the change was not announced", m)
		}
		time.Sleep(5 * time.Millisecond)
	}
	keys, err := a.StateKeys(ctx, "s")
	if err != nil || fmt.Sprint(keys) != "[n]" {
		t.Fatalf("keys %v %v", keys, err)
	}
	// Checked as SQLite's state checks: nothing is written.
	if err := a.StateApply(ctx, []state.Write{{Scope: "s", Key: "n", Value: []byte(`3`)}, {Scope: "s", Key: "bad", Value: []byte(`{`)}}); err == nil {
		t.Fatal("invalid JSON was accepted")
	}
	if raw, _, _ := a.StateGet(ctx, "s", "n"); string(raw) != "2" {
		t.Fatalf("a refused batch wrote: n = %s", raw)
	}
}

// TestAdmit_never_more_than_n_in_any_window: four stores (four processes'
// pools) admit calls of one key as fast as they can; on the database's
// clock, no window of the span holds more than n admitted calls, and the
// window is used (the limit is reached).
func TestAdmit_never_more_than_n_in_any_window(t *testing.T) {
	url := pgtest.URL(t)
	const n, span = 25, 400 * time.Millisecond
	var mu sync.Mutex
	var admitted []time.Time
	var refused atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(1500 * time.Millisecond)
	for p := 0; p < 4; p++ {
		s := open(t, url, nil)
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					wait, at, err := s.Admit(context.Background(), "tool", n, span)
					if err != nil {
						t.Error(err)
						return
					}
					if wait > 0 {
						refused.Add(1)
						continue
					}
					mu.Lock()
					admitted = append(admitted, at)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	sort.Slice(admitted, func(i, j int) bool { return admitted[i].Before(admitted[j]) })
	for i := n; i < len(admitted); i++ {
		if d := admitted[i].Sub(admitted[i-n]); d < span {
			t.Fatalf("%d calls admitted within %v (calls %d..%d), more than %d in a window of %v", n+1, d, i-n, i, n, span)
		}
	}
	if len(admitted) < 2*n || refused.Load() == 0 {
		t.Fatalf("admitted %d, refused %d: the limit was not reached", len(admitted), refused.Load())
	}
	t.Logf("admitted %d, refused %d in 1.5 s, limit %d per %v", len(admitted), refused.Load(), n, span)
}

func TestBudget_shared_exactly(t *testing.T) {
	url := pgtest.URL(t)
	const max = 50
	var taken atomic.Int64
	var wg sync.WaitGroup
	var stores []*pgstore.Store
	for p := 0; p < 4; p++ {
		stores = append(stores, open(t, url, nil))
	}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[g%4]
			for i := 0; i < 25; i++ {
				ok, err := s.TakeBudget(context.Background(), "sess", "tool", max)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					taken.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if taken.Load() != max {
		t.Fatalf("%d calls taken from a budget of %d", taken.Load(), max)
	}
	ctx := context.Background()
	if err := stores[0].GiveBackBudget(ctx, "sess", "tool"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := stores[1].TakeBudget(ctx, "sess", "tool", max); !ok {
		t.Fatal("a call given back cannot be taken again")
	}
	if err := stores[2].EndSession(ctx, "sess"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := stores[3].TakeBudget(ctx, "sess", "tool", max); !ok {
		t.Fatal("session_end did not reset the budget")
	}
}

func TestNotices_drained_once_in_order(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := context.Background()
	var ns []pgstore.Notice
	for i := 0; i < 12; i++ {
		ns = append(ns, pgstore.Notice{Text: []byte(fmt.Sprintf(`{"message":"n%d"}`, i))})
	}
	if err := a.QueueNotices(ctx, "s", ns[:5], 0); err != nil {
		t.Fatal(err)
	}
	if err := b.QueueNotices(ctx, "s", ns[5:], time.Minute); err != nil {
		t.Fatal(err)
	}
	got, dropped, err := b.DrainNotices(ctx, "s", 10)
	if err != nil || dropped != 2 || len(got) != 10 || string(got[0].Text) != `{"message":"n2"}` || string(got[9].Text) != `{"message":"n11"}` {
		t.Fatalf("drained %+v, dropped %d, %v", got, dropped, err)
	}
	got, dropped, err = a.DrainNotices(ctx, "s", 10)
	if err != nil || dropped != 0 || len(got) != 0 {
		t.Fatalf("drained again: %+v %d %v", got, dropped, err)
	}
}

// Seed 004's accumulator in the store (issue 32): repeats within the
// window counted in one row, also from two processes at once; outside it
// or after a drain, a row of their own; a notice held until its event
// (only that event, only its session), one deferred by a time.
func TestNotices_merged_and_held(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := context.Background()
	n := pgstore.Notice{Text: []byte(`{"message":"same"}`)}
	var wg sync.WaitGroup
	for _, st := range []*pgstore.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.QueueNotices(ctx, "s", []pgstore.Notice{n, n}, time.Minute); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, _, err := b.DrainNotices(ctx, "s", 10)
	if err != nil || len(got) != 1 || got[0].Count != 8 {
		t.Fatalf("eight repeats: %+v %v", got, err)
	}
	// A window of 50 ms: a repeat 100 ms later is a notice of its own.
	if err := a.QueueNotices(ctx, "s", []pgstore.Notice{n}, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := a.QueueNotices(ctx, "s", []pgstore.Notice{n}, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := a.DrainNotices(ctx, "s", 10); len(got) != 2 || got[0].Count != 1 || got[1].Count != 1 {
		t.Fatalf("outside the window: %+v", got)
	}

	held := pgstore.Notice{Text: []byte(`{"message":"next turn"}`), DeliverOn: "on_turn_start"}
	later := pgstore.Notice{Text: []byte(`{"message":"later"}`), DeliverAfterMS: 200}
	if err := a.QueueNotices(ctx, "s", []pgstore.Notice{held, later, held}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, release := range [][2]string{{"s", "on_turn_end"}, {"other", "on_turn_start"}} {
		if err := b.ReleaseNotices(ctx, release[0], release[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _ := b.DrainNotices(ctx, "s", 10); len(got) != 0 {
		t.Fatalf("delivered before their event and time: %+v", got)
	}
	if err := b.ReleaseNotices(ctx, "s", "on_turn_start"); err != nil {
		t.Fatal(err)
	}
	// A repeat of a released notice is held on its own.
	if err := a.QueueNotices(ctx, "s", []pgstore.Notice{held}, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, _, _ = a.DrainNotices(ctx, "s", 10)
	if len(got) != 1 || string(got[0].Text) != `{"message":"next turn"}` || got[0].Count != 2 {
		t.Fatalf("released: %+v", got)
	}
	time.Sleep(250 * time.Millisecond)
	got, _, _ = a.DrainNotices(ctx, "s", 10)
	if len(got) != 1 || string(got[0].Text) != `{"message":"later"}` {
		t.Fatalf("after its time: %+v", got)
	}
	if err := b.ReleaseNotices(ctx, "s", "on_turn_start"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = a.DrainNotices(ctx, "s", 10); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("the repeat held on its own: %+v", got)
	}
}

func TestConversation_compare_and_swap(t *testing.T) {
	url := pgtest.URL(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := context.Background()
	if ok, err := a.StoreConversation(ctx, "s", []byte("one"), 0); !ok || err != nil {
		t.Fatal(ok, err)
	}
	data, v, err := b.LoadConversation(ctx, "s")
	if err != nil || string(data) != "one" || v != 1 {
		t.Fatalf("%q %d %v", data, v, err)
	}
	if ok, _ := a.StoreConversation(ctx, "s", []byte("two"), 1); !ok {
		t.Fatal("store at the version read failed")
	}
	if ok, _ := b.StoreConversation(ctx, "s", []byte("stale"), 1); ok {
		t.Fatal("a stale version replaced the conversation")
	}
	if ok, _ := b.StoreConversation(ctx, "s", []byte("again"), 0); ok {
		t.Fatal("a second first version replaced the conversation")
	}
	if err := b.ForgetConversation(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if data, v, _ := a.LoadConversation(ctx, "s"); data != nil || v != 0 {
		t.Fatalf("forgotten conversation reads %q %d", data, v)
	}
}

func TestApproval_asked_in_one_decided_in_another(t *testing.T) {
	url := pgtest.URL(t)
	decided := make(chan int64, 4)
	a := open(t, url, &pgstore.Handlers{ApprovalDecided: func(id int64) { decided <- id }})
	b := open(t, url, nil)
	listening(t, a)
	ctx := context.Background()
	id, err := a.AskApproval(ctx, []byte(`{"tool":"t"}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.PendingApprovals(ctx)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Mine || string(list[0].Request) != `{"tool":"t"}` {
		t.Fatalf("b lists %+v %v", list, err)
	}
	if err := b.DecideApproval(ctx, id, "approved", []byte(`{"decision":"approve"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-decided:
		if got != id {
			t.Fatalf("told of %d, want %d", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the asker was not told")
	}
	st, dec, err := a.ApprovalOutcome(ctx, id)
	if err != nil || st != "approved" || string(dec) != `{"decision":"approve"}` {
		t.Fatalf("outcome %q %s %v", st, dec, err)
	}
	if err := a.DecideApproval(ctx, id, "rejected", []byte(`{}`)); !errors.Is(err, pgstore.ErrApprovalGone) {
		t.Fatalf("second decision: %v", err)
	}
	if ok, _ := a.EndApproval(ctx, id, "timed_out"); ok {
		t.Fatal("a decided approval timed out")
	}

	// The asker gone (its connections closed): the approval is not
	// listed, and deciding it says so.
	c, err := pgstore.Open(pgstore.Options{URL: url, StatementTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := c.AskApproval(ctx, []byte(`{"tool":"u"}`), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := b.PendingApprovals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a gone asker's approval is still listed: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.DecideApproval(ctx, id2, "approved", []byte(`{}`)); !errors.Is(err, pgstore.ErrApprovalGone) {
		t.Fatalf("deciding a gone asker's approval: %v", err)
	}
	if st, _, _ := b.ApprovalOutcome(ctx, id2); st != "abandoned" {
		t.Fatalf("state %q, want abandoned", st)
	}
}

func TestRuleChanges_announced_in_order(t *testing.T) {
	url := pgtest.URL(t)
	told := make(chan int64, 4)
	a := open(t, url, nil)
	b := open(t, url, &pgstore.Handlers{RulesChanged: func(seq int64) { told <- seq }})
	listening(t, b)
	ctx := context.Background()
	s1, err := a.AnnounceRules(ctx, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := a.AnnounceRules(ctx, []byte("second"))
	for _, want := range []int64{s1, s2} {
		select {
		case got := <-told:
			if got != want {
				t.Fatalf("told %d, want %d", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not told")
		}
	}
	cs, err := b.RuleChanges(ctx, 0)
	if err != nil || len(cs) != 2 || string(cs[1].Change) != "second" || cs[0].Origin != a.Instance() {
		t.Fatalf("%+v %v", cs, err)
	}
	if cs, _ := b.RuleChanges(ctx, s1); len(cs) != 1 {
		t.Fatalf("after %d: %+v", s1, cs)
	}
}

// TestUnavailable_names_the_store_in_time: nothing listens at the URL's
// port: every use fails within the statement timeout with ErrUnavailable,
// naming the store, never the password.
func TestUnavailable_names_the_store_in_time(t *testing.T) {
	const password = "s3cr3t-pw-in-url"
	s, err := pgstore.Open(pgstore.Options{URL: "postgres://clara:" + password + "@127.0.0.1:1/clara", StatementTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, _, err = s.Admit(context.Background(), "k", 1, time.Minute)
	if !errors.Is(err, pgstore.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
	msg := err.Error()
	if !strings.Contains(msg, "PostgreSQL at 127.0.0.1:1, database clara") || strings.Contains(msg, password) {
		t.Fatalf("message %q", msg)
	}
	if _, err := pgstore.Open(pgstore.Options{URL: "postgres://clara:" + password + "@[::1"}); err == nil || strings.Contains(err.Error(), password) {
		t.Fatalf("bad URL: %v", err)
	}
}

// TestRestart_reconnects: the server restarted under a store in use: uses
// during the restart fail as unavailable (none hangs), the pool and the
// listener reconnect by themselves, and committed state is there.
func TestRestart_reconnects(t *testing.T) {
	url := pgtest.URL(t)
	if pgtest.Dir() == "" {
		t.Skip("CLARA_TEST_PG_URL: not a server this test may restart")
	}
	var connects atomic.Int64
	s := open(t, url, &pgstore.Handlers{Connected: func() { connects.Add(1) }})
	listening(t, s)
	ctx := context.Background()
	if err := s.StateApply(ctx, []state.Write{{Scope: "r", Key: "k", Value: []byte(`"before"`)}}); err != nil {
		t.Fatal(err)
	}
	root, _ := pgtest.Root()
	out, err := exec.Command("bash", filepath.Join(root, "tests", "pg.sh"), "restart", pgtest.Dir()).CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		start := time.Now()
		raw, ok, err := s.StateGet(ctx, "r", "k")
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("a use took %v", took)
		}
		if err == nil {
			if !ok || string(raw) != `"before"` {
				t.Fatalf("after the restart: %s %v", raw, ok)
			}
			break
		}
		if !errors.Is(err, pgstore.ErrUnavailable) {
			t.Fatalf("during the restart: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for connects.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSweep_retention(t *testing.T) {
	url := pgtest.URL(t)
	s := open(t, url, nil)
	ctx := context.Background()
	for _, sess := range []string{"old", "new"} {
		if ok, err := s.StoreConversation(ctx, sess, []byte(sess), 0); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `UPDATE clara_conversations SET updated_at = now() - interval '3 hours' WHERE session = 'old'`); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx, 0); err != nil { // 0: kept
		t.Fatal(err)
	}
	if data, _, _ := s.LoadConversation(ctx, "old"); string(data) != "old" {
		t.Fatal("retention 0 deleted a conversation")
	}
	if err := s.Sweep(ctx, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := s.LoadConversation(ctx, "old"); data != nil {
		t.Fatal("a conversation idle past the retention was kept")
	}
	if data, _, _ := s.LoadConversation(ctx, "new"); string(data) != "new" {
		t.Fatal("a recent conversation was deleted")
	}
}
