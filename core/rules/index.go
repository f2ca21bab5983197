package rules

// A trigger whose rules mostly test one context path for equality with a
// literal (`context.group == 3 and ...`, one rule per group, kind or tool)
// is indexed on that path: Fire reads the event's value once and tries
// only the rules that value leaves possible, as rule engines index their
// alpha tests, instead of deciding each comparison false in turn.
//
// A rule is left out only when trying it could have done nothing else:
// its key is the first term of its simple `and` condition, or one of its
// guards, and the comparison is decided false (the event's value is a
// scalar of the literal's kind, and a different one). The simple evaluator
// then returns "not matched" for the first, and ruledOut skips the VM for
// the second, both silently; so the index changes neither the verdicts,
// nor the order of firing, nor the log. It is used neither with trace
// (every candidate is explained) nor when rules watch before_rule_eval
// (emitted before each rule tried).

// minIndexed is how many rules of a trigger must be keyed on one path for
// an index to pay for its lookup.
const minIndexed = 4

// ruleIndex is the index of a trigger's rules on one context path.
// Positions are into Trigger.rules, ascending (firing order).
type ruleIndex struct {
	key operand // the path, with its slot
	// rest[kind] are the rules a value of that kind ('n', 's', 'b' at 0,
	// 1, 2) cannot rule out: those not keyed on the path, and those keyed
	// on a literal of another kind (the comparison is then expr's).
	rest [3][]int32
	// keyed are the rules keyed on a literal equal to the value.
	keyed map[Value][]int32
}

func kindIndex(kind byte) int {
	switch kind {
	case 'n':
		return 0
	case 's':
		return 1
	}
	return 2
}

// indexKey returns the comparison of rule that can stand for it in an
// index: one that, decided false, decides the rule's condition false
// without a word (see above). ok is false when it has none.
func indexKey(r *Rule) (path []string, lit Value, slot int, ok bool) {
	if r.luaCond != nil || r.semantic != nil {
		return nil, Value{}, 0, false
	}
	eq := func(c *comparison) bool {
		if cmpOf(c.op) != cmpEQ {
			return false
		}
		o, l := &c.left, &c.right
		if o.literal {
			o, l = l, o
		}
		if o.literal || !l.literal || o.root != "context" || l.value.kind == 0 {
			return false
		}
		path, lit, slot = o.path, l.value, o.slot
		return true
	}
	if r.folded != nil {
		// Terms are decided left to right: only the first is decided
		// whatever the others hold.
		return path, lit, slot, !r.folded.or && len(r.folded.terms) > 0 && eq(&r.folded.terms[0])
	}
	for i := range r.foldedGuards {
		if eq(&r.foldedGuards[i]) {
			return path, lit, slot, true
		}
	}
	return nil, Value{}, 0, false
}

// buildIndex returns the index of rules (a trigger's, in firing order) on
// the path most of them are keyed on, or nil when too few are.
func buildIndex(rules []*Rule) *ruleIndex {
	type keyOf struct {
		path string
		lit  Value
		slot int
		ok   bool
	}
	keys := make([]keyOf, len(rules))
	count := map[string]int{}
	best := ""
	for i, r := range rules {
		path, lit, slot, ok := indexKey(r)
		if !ok {
			continue
		}
		p := joinPath(path)
		keys[i] = keyOf{p, lit, slot, true}
		if count[p]++; count[p] > count[best] || (count[p] == count[best] && p < best) {
			best = p
		}
	}
	if count[best] < minIndexed {
		return nil
	}
	idx := &ruleIndex{keyed: map[Value][]int32{}}
	for i, r := range rules {
		k := keys[i]
		if !k.ok || k.path != best {
			for kind := range idx.rest {
				idx.rest[kind] = append(idx.rest[kind], int32(i))
			}
			continue
		}
		if idx.key.path == nil {
			path, _, _, _ := indexKey(r)
			idx.key = operand{root: "context", path: path, slot: k.slot}
		}
		idx.keyed[k.lit] = append(idx.keyed[k.lit], int32(i))
		for kind := range idx.rest {
			if kind != kindIndex(k.lit.kind) {
				idx.rest[kind] = append(idx.rest[kind], int32(i))
			}
		}
	}
	return idx
}

func joinPath(path []string) string {
	n := 0
	for _, p := range path {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range path {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, p...)
	}
	return string(b)
}

// candidates returns the two lists whose union, in position order, is
// the rules a key's value v (decided: a scalar) leaves possible.
func (idx *ruleIndex) candidates(v Value) (rest, keyed []int32) {
	return idx.rest[kindIndex(v.kind)], idx.keyed[v]
}
