package llm

import (
	"bufio"
	"bytes"
	"io"
)

// sseEvent is one server-sent event: its name ("" when the stream gives
// none, as OpenAI's does) and its data lines joined by "\n".
type sseEvent struct {
	name string
	data []byte
}

// sseReader splits a text/event-stream into events, as the HTML standard
// says: lines end in "\n", "\r\n" or "\r"; "field: value" with one space
// after the colon dropped; lines starting with ':' are comments; an empty
// line dispatches the event; an event cut off by the end of the stream is
// dropped.
type sseReader struct {
	sc   *bufio.Scanner
	data bytes.Buffer
}

func newSSEReader(r io.Reader, maxLine int) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), max(maxLine, 4096))
	sc.Split(scanSSELines)
	return &sseReader{sc: sc}
}

// next returns the next event; io.EOF at the end of the stream.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	hasData := false
	s.data.Reset()
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if len(line) == 0 {
			if !hasData {
				ev.name = ""
				continue
			}
			ev.data = s.data.Bytes()
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				s.data.WriteByte('\n')
			}
			s.data.Write(value)
			hasData = true
		}
	}
	if err := s.sc.Err(); err != nil {
		return sseEvent{}, err
	}
	return sseEvent{}, io.EOF
}

// scanSSELines is a bufio.SplitFunc for the three line endings.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, c := range data {
		switch c {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a "\n" may follow in the next read
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
