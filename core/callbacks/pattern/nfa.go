package pattern

import "math/bits"

// nfa.go: a byte-exact matcher for a token list, by simulating the automaton with bit sets: time
// O(len(text) × len(tokens)), never exponential, no gobwas. It serves candidates that are not
// ASCII (gobwas matches runes, git bytes, and gobwas' fixed-length Row matcher mis-measures
// multi-byte runes) and patterns too complex to hand to gobwas, whose backtracking is exponential
// in the number of stars and whose compile time grows quadratically with the pattern.
//
// States: 2i is "before token i", 2i+1 is "inside the "**/" of token i" (something consumed, the
// closing '/' not yet), 2n is "accepted".

type nfa struct {
	toks  []token
	words int // uint64 words per state set
}

func newNFA(toks []token) *nfa {
	return &nfa{toks: toks, words: (2*len(toks) + 1 + 63) / 64}
}

func (a *nfa) match(text string) bool {
	var small [2][4]uint64
	var cur, next []uint64
	if a.words <= 4 {
		cur, next = small[0][:a.words], small[1][:a.words]
	} else {
		cur, next = make([]uint64, a.words), make([]uint64, a.words)
	}
	set := func(s []uint64, i int) { s[i>>6] |= 1 << (i & 63) }
	n := len(a.toks)
	set(cur, 0)
	a.closure(cur)
	for k := 0; k < len(text); k++ {
		c := text[k]
		clear(next)
		alive := false
		for w, word := range cur {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &= word - 1
				st := w<<6 | b
				i := st >> 1
				if i >= n {
					continue // accepted, but text remains
				}
				t := &a.toks[i]
				if st&1 == 1 { // inside "**/"
					set(next, st)
					if c == '/' {
						set(next, 2*(i+1))
					}
					alive = true
					continue
				}
				switch t.kind {
				case tLit:
					if c == t.b {
						set(next, 2*(i+1))
						alive = true
					}
				case tAny1:
					if c != '/' {
						set(next, 2*(i+1))
						alive = true
					}
				case tClass:
					if t.set[c] {
						set(next, 2*(i+1))
						alive = true
					}
				case tStar:
					if c != '/' {
						set(next, st)
						alive = true
					}
				case tSuper:
					set(next, st)
					alive = true
				case tSuperSlash:
					set(next, st+1)
					if c == '/' {
						set(next, 2*(i+1))
					}
					alive = true
				}
			}
		}
		if !alive {
			return false
		}
		a.closure(next)
		cur, next = next, cur
	}
	f := 2 * n
	return cur[f>>6]&(1<<(f&63)) != 0
}

// closure adds the empty moves: past a star, a "**" or a "**/" (edges only go forward).
func (a *nfa) closure(s []uint64) {
	for i, t := range a.toks {
		st := 2 * i
		if s[st>>6]&(1<<(st&63)) == 0 {
			continue
		}
		switch t.kind {
		case tStar, tSuper, tSuperSlash:
			nx := 2 * (i + 1)
			s[nx>>6] |= 1 << (nx & 63)
		}
	}
}
