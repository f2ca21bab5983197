package protocol

import (
	"strconv"
	"strings"
)

// Problem is one thing wrong with a text Clara reads (configuration, a rule
// file, a script), with its position when known: File is what the text is
// called ("clara_configure", a path), Line and Col count from 1 (0 when
// unknown). Configuration, rule and Lua errors all report Problems, and
// every envelope that refuses such a text lists them in "details".
type Problem struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"`
}

// String renders the problem as file:line:col: message, leaving out what
// is unknown.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(":")
	}
	if p.Line > 0 {
		b.WriteString(strconv.Itoa(p.Line))
		b.WriteString(":")
		if p.Col > 0 {
			b.WriteString(strconv.Itoa(p.Col))
			b.WriteString(":")
		}
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found in one load. It is an error.
type Problems []Problem

func (ps Problems) Error() string {
	switch len(ps) {
	case 0:
		return "no problem"
	case 1:
		return ps[0].String()
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strconv.Itoa(len(ps)) + " problems: " + strings.Join(parts, "; ")
}

// AppendJSON writes the problems as a JSON array of
// {"file","line","col","message"} (unknown parts left out).
func (ps Problems) AppendJSON(dst []byte) []byte {
	dst = append(dst, '[')
	for i, p := range ps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if p.File != "" {
			dst = append(dst, `"file":`...)
			dst = AppendString(dst, p.File)
			dst = append(dst, ',')
		}
		if p.Line > 0 {
			dst = append(dst, `"line":`...)
			dst = strconv.AppendInt(dst, int64(p.Line), 10)
			dst = append(dst, ',')
			if p.Col > 0 {
				dst = append(dst, `"col":`...)
				dst = strconv.AppendInt(dst, int64(p.Col), 10)
				dst = append(dst, ',')
			}
		}
		dst = append(dst, `"message":`...)
		dst = AppendString(dst, p.Message)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// Refusal is the envelope error for a text refused because of ps: code,
// prefix + ps as the message, and ps as details.
func (ps Problems) Refusal(code Code, prefix string) *Error {
	return &Error{Code: code, Message: prefix + ps.Error(), Details: ps.AppendJSON(nil), Cause: ps}
}
