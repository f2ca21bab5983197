package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/clara-lib/clara/core/logging"
	"github.com/clara-lib/clara/core/pgstore"
	"github.com/clara-lib/clara/core/protocol"
)

// Approvals in the shared store (issue 31): a call held for approval is a
// row of the store, which approvals_list shows in every process and
// approval_decide decides from any of them. The store is the arbiter of
// the first decision (the process's own approver, approval_decide here or
// elsewhere, the timeout): each decision is written there first, and the
// waiting call takes whatever the store kept. The asking process is told
// of a decision made elsewhere by a notification, and looks at its
// approvals again whenever its listener reconnects.

// localApprovalBase numbers the approvals a process keeps to itself while
// the store is unavailable (on_unavailable.approvals = "local"), apart
// from the store's ids.
const localApprovalBase = 1 << 50

// storedDecision is a decision as the store keeps it.
type storedDecision struct {
	Approve   bool            `json:"approve"`
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	By        string          `json:"by,omitempty"`
}

func decisionText(d ApprovalDecision) (state string, text []byte) {
	state = "rejected"
	if d.Approve {
		state = "approved"
	}
	text, _ = json.Marshal(storedDecision{Approve: d.Approve, Reason: d.Reason, Arguments: d.Arguments, By: d.By})
	return state, text
}

// storedOutcome reads the decision the store kept of an approval: ok
// false while it has none (pending, timed out, cancelled).
func storedOutcome(st *pgstore.Store, id int64) (ApprovalDecision, bool, error) {
	state, text, err := st.ApprovalOutcome(context.Background(), id)
	if err != nil || (state != "approved" && state != "rejected") {
		return ApprovalDecision{}, false, err
	}
	var sd storedDecision
	if err := json.Unmarshal(text, &sd); err != nil {
		return ApprovalDecision{}, false, err
	}
	return ApprovalDecision{Approve: sd.Approve, Reason: sd.Reason, Arguments: sd.Arguments, By: sd.By}, true, nil
}

// approvalID numbers a new approval: the store's id (the approval is then
// recorded there, st not nil), or this process's own.
func (e *Engine) approvalID(ctx context.Context, s *snapshot, req *ApprovalRequest, timeout time.Duration) (int64, *pgstore.Store, *protocol.Error) {
	if s.shared == nil {
		return e.approvals.lastID.Add(1), nil, nil
	}
	text, _ := json.Marshal(req)
	id, err := s.shared.AskApproval(ctx, text, timeout)
	switch {
	case err == nil:
		return id, s.shared, nil
	case local(err, s.config.Store.OnUnavailable.Approvals):
		e.log.Logf(logging.Warn, "%s; the approval is this process's own", e.out.secrets.String(err.Error()))
		return localApprovalBase + e.approvals.lastID.Add(1), nil, nil
	}
	perr := e.storeError(err)
	perr.Message = fmt.Sprintf("tool %q was not run: it waits for a person's approval, which is kept in %s", req.Tool, perr.Message)
	return 0, nil, perr
}

// settle gives approval p the decision d: in the store first when p is
// there (the first decision the store keeps wins, wherever it was made),
// then to the waiting call. It reports whether d is the decision.
func (e *Engine) settle(p *pendingApproval, d ApprovalDecision) (bool, error) {
	if p.store == nil {
		return p.decide(d), nil
	}
	if p.taken.Load() {
		return false, nil
	}
	state, text := decisionText(d)
	err := p.store.DecideApproval(context.Background(), p.req.ID, state, text)
	switch {
	case err == nil:
		p.decide(d) // the timer or a cancel may have taken p meanwhile: they read the store's decision
		return true, nil
	case errors.Is(err, pgstore.ErrApprovalGone):
		e.approvalDecidedElsewhere(p.req.ID)
		return false, nil
	case local(err, e.current.Load().config.Store.OnUnavailable.Approvals):
		return p.decide(d), nil
	}
	return false, e.storeError(err)
}

// pendingHere is the approval of that id waiting in this process, if any.
func (e *Engine) pendingHere(id int64) *pendingApproval {
	e.approvals.pmu.Lock()
	defer e.approvals.pmu.Unlock()
	return e.approvals.pending[id]
}

// approvalDecidedElsewhere hands an approval of this process the decision
// the store kept of it.
func (e *Engine) approvalDecidedElsewhere(id int64) {
	p := e.pendingHere(id)
	if p == nil || p.store == nil || p.taken.Load() {
		return
	}
	d, ok, err := storedOutcome(p.store, id)
	if err != nil {
		e.log.Logf(logging.Warn, "approval %d: %s", id, e.out.secrets.String(err.Error()))
	}
	if ok {
		p.decide(d)
	}
}

// recheckApprovals looks at every approval waiting here: decisions made
// while the listener was away were not announced to it.
func (e *Engine) recheckApprovals() {
	e.approvals.pmu.Lock()
	ids := make([]int64, 0, len(e.approvals.pending))
	for id, p := range e.approvals.pending {
		if p.store != nil {
			ids = append(ids, id)
		}
	}
	e.approvals.pmu.Unlock()
	for _, id := range ids {
		e.approvalDecidedElsewhere(id)
	}
}

// endStoredApproval closes p in the store when its call stops waiting
// (timed out, cancelled). When a decision reached the store first, that
// decision is returned: the call takes it.
func (e *Engine) endStoredApproval(p *pendingApproval, state string) (ApprovalDecision, bool) {
	if p.store == nil {
		return ApprovalDecision{}, false
	}
	ended, err := p.store.EndApproval(context.Background(), p.req.ID, state)
	if err != nil || ended {
		return ApprovalDecision{}, false
	}
	d, ok, _ := storedOutcome(p.store, p.req.ID)
	return d, ok
}

// decideElsewhere decides an approval that waits in another process.
func (e *Engine) decideElsewhere(s *snapshot, id int64, d ApprovalDecision) error {
	state, text := decisionText(d)
	err := s.shared.DecideApproval(context.Background(), id, state, text)
	if errors.Is(err, pgstore.ErrApprovalGone) {
		return fmt.Errorf("%w (%d): decided already, timed out, its call ended, or the process that asked is gone", ErrNoApproval, id)
	}
	if err != nil {
		return e.storeError(err)
	}
	return nil
}

// sharedPending lists the approvals waiting in every process.
func (e *Engine) sharedPending(s *snapshot) ([]PendingApproval, error) {
	rows, err := s.shared.PendingApprovals(context.Background())
	if err != nil {
		return nil, e.storeError(err)
	}
	out := make([]PendingApproval, 0, len(rows))
	for _, r := range rows {
		var req ApprovalRequest
		if json.Unmarshal(r.Request, &req) != nil {
			continue
		}
		req.ID = r.ID
		out = append(out, PendingApproval{ApprovalRequest: req, WaitingMS: max(time.Since(r.AskedAt).Milliseconds(), 0)})
	}
	// and those this process keeps to itself (the store was away)
	e.approvals.pmu.Lock()
	for _, p := range e.approvals.pending {
		if p.store == nil && !p.taken.Load() {
			out = append(out, PendingApproval{ApprovalRequest: p.req, WaitingMS: e.clock.since(p.since).Milliseconds()})
		}
	}
	e.approvals.pmu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
