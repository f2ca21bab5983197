package rules

import "regexp"

// TestOptions are the choices of a rule test run.
type TestOptions struct {
	// Run selects the cases whose name it matches; nil runs them all.
	Run *regexp.Regexp
	// Coverage measures what the cases fired of the rule set
	// (TestReport.Coverage). The cases then fire with trace on, which
	// tries every rule without the fast paths that skip some: the
	// verdicts are the same.
	Coverage bool
}

// Coverage is, for every rule of the set a test file ran against, in how
// many of its cases the rule matched, fired, and applied each action.
type Coverage struct {
	Rules []RuleCoverage `json:"rules"`
}

// RuleCoverage is one rule's part of a Coverage. A rule fires when its
// condition matches and its actions apply; since they apply all or none,
// an action is applied in exactly the cases its rule fired, and a rule
// that matched without firing was skipped (a template failed: the trace
// says why).
type RuleCoverage struct {
	ID      string           `json:"id"`
	File    string           `json:"file"`
	Line    int              `json:"line"`
	Trigger string           `json:"trigger"`
	Matched int              `json:"matched"` // cases in which its condition held
	Fired   int              `json:"fired"`   // cases in which its actions applied
	Actions []ActionCoverage `json:"actions"` // its actions, in the rule file's order
}

// ActionCoverage is one action of a rule: its place among the rule's
// actions (from 1), its type, and the cases in which it applied.
type ActionCoverage struct {
	Index   int    `json:"index"`
	Type    string `json:"type"`
	Applied int    `json:"applied"`
}

// coverageCounter counts, case by case, what each rule of a set did.
type coverageCounter struct {
	rules []RuleCoverage
	byID  map[string]int
}

func newCoverageCounter(set *Set) *coverageCounter {
	c := &coverageCounter{byID: map[string]int{}}
	for _, r := range set.Rules() {
		rc := RuleCoverage{ID: r.ID, File: r.File, Line: r.Line, Trigger: r.Trigger, Actions: []ActionCoverage{}}
		for i, a := range r.actions {
			rc.Actions = append(rc.Actions, ActionCoverage{Index: i + 1, Type: a.kind})
		}
		c.byID[r.ID] = len(c.rules)
		c.rules = append(c.rules, rc)
	}
	return c
}

// count takes in one case's outcome, fired with trace on: each rule
// counts once per case, however many of the case's events it fired on.
func (c *coverageCounter) count(out *Outcome) {
	if c == nil || out == nil {
		return
	}
	matched, fired := map[int]bool{}, map[int]bool{}
	for _, t := range out.Trace {
		i, ok := c.byID[t.Rule]
		if !ok || !t.Matched {
			continue
		}
		matched[i] = true
		if t.Skipped == "" {
			fired[i] = true
		}
	}
	for i := range matched {
		c.rules[i].Matched++
	}
	for i := range fired {
		c.rules[i].Fired++
		for j := range c.rules[i].Actions {
			c.rules[i].Actions[j].Applied++
		}
	}
}

func (c *coverageCounter) coverage() *Coverage {
	return &Coverage{Rules: c.rules}
}
