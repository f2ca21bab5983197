package rulelua

import "fmt"

// maxListLength bounds the commas in one argument, name or value list.
const maxListLength = 250

// prescan bounds how deeply a source nests before the parser sees it. gopher-lua's parser is
// table-driven (it cannot overflow the Go stack), but its state stack costs hundreds of bytes per
// level, so a 256 KiB source of nested brackets would take tens of MiB to parse. prescan is a
// small lexer: it skips comments and strings and counts blocks (function, do, if, repeat ..
// end/until), brackets, runs of unary operators and right-associative operator chains (.. and
// ^), each of which grows the parser's stack.
func prescan(src string) error {
	depth := 0
	line := 1
	unary := 0         // consecutive unary operators
	chain := []int{0}  // right-associative operators in the current expression, per bracket level
	commas := []int{0} // commas in the current list, per bracket level (0 inside {})
	inTable := []bool{false}
	tooDeep := func() error {
		return fmt.Errorf("line %d: too many syntax levels (more than %d nested blocks or expressions)", line, maxSyntaxDepth)
	}
	resetChain := func() { chain[len(chain)-1] = 0 }
	resetList := func() { commas[len(commas)-1] = 0 }
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && i+1 < len(src) && src[i+1] == '-': // comment
			i += 2
			if lvl, ok := longBracket(src, i); ok {
				i = skipLong(src, i, lvl, &line)
			} else {
				for i < len(src) && src[i] != '\n' {
					i++
				}
			}
			continue
		case c == '\'' || c == '"':
			i++
			for i < len(src) && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
					if i < len(src) && src[i] == '\n' {
						line++
					}
				}
				i++
			}
			i++
			unary = 0
			continue
		case c == '[':
			if lvl, ok := longBracket(src, i); ok {
				i = skipLong(src, i, lvl, &line)
				unary = 0
				continue
			}
		}
		isUnary := false
		switch {
		case c == '(' || c == '{' || c == '[':
			depth++
			chain = append(chain, 0)
			commas = append(commas, 0)
			inTable = append(inTable, c == '{')
			i++
		case c == ')' || c == '}' || c == ']':
			depth--
			if len(chain) > 1 {
				chain = chain[:len(chain)-1]
				commas = commas[:len(commas)-1]
				inTable = inTable[:len(inTable)-1]
			}
			i++
		case c == '.' && i+1 < len(src) && src[i+1] == '.' && (i+2 >= len(src) || src[i+2] != '.'):
			chain[len(chain)-1]++
			i += 2
		case c == '^':
			chain[len(chain)-1]++
			i++
		case c == '-' || c == '#':
			isUnary = true
			i++
		case c == ',':
			resetChain()
			// Argument, name and value lists live in registers (at most 250 per function);
			// table constructors are flushed every 50 items and may be long.
			if !inTable[len(inTable)-1] {
				commas[len(commas)-1]++
				if commas[len(commas)-1] > maxListLength {
					return fmt.Errorf("line %d: too many values in a list (more than %d)", line, maxListLength)
				}
			}
			i++
		case c == ';' || c == '=':
			resetChain()
			resetList()
			i++
		case isAlpha(c) || c == '_':
			j := i
			for j < len(src) && (isAlpha(src[j]) || isDigit(src[j]) || src[j] == '_') {
				j++
			}
			switch src[i:j] {
			case "function", "do", "if", "repeat":
				depth++
				resetChain()
				resetList()
			case "end", "until":
				depth--
				resetChain()
				resetList()
			case "not":
				isUnary = true
			case "then", "else", "elseif", "local", "return", "while", "for", "in", "break", "goto":
				resetChain()
				resetList()
			}
			i = j
		default:
			i++
		}
		if isUnary {
			unary++
		} else {
			unary = 0
		}
		if depth > maxSyntaxDepth || unary > maxSyntaxDepth || chain[len(chain)-1] > maxSyntaxDepth {
			return tooDeep()
		}
	}
	return nil
}

// longBracket reports whether src[i:] opens a long bracket [[ or [==[ and returns its level.
func longBracket(src string, i int) (int, bool) {
	if i >= len(src) || src[i] != '[' {
		return 0, false
	}
	j := i + 1
	for j < len(src) && src[j] == '=' {
		j++
	}
	if j < len(src) && src[j] == '[' {
		return j - i - 1, true
	}
	return 0, false
}

// skipLong skips a long string or comment opened at src[i] and returns the index after it.
func skipLong(src string, i, lvl int, line *int) int {
	i += lvl + 2
	for i < len(src) {
		if src[i] == '\n' {
			*line++
		}
		if src[i] == ']' {
			j := i + 1
			for j < len(src) && src[j] == '=' {
				j++
			}
			if j-i-1 == lvl && j < len(src) && src[j] == ']' {
				return j + 1
			}
		}
		i++
	}
	return i
}
