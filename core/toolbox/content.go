package toolbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ReturnsContent is the third way a tool's result is encoded: a JSON array
// of MCP content blocks, written as the MCP specification writes them
// (docs/tools.md, "Results with content"): text, image, audio,
// resource_link and resource (an embedded resource). An MCP client gets
// the blocks as they are; a chat's model gets their text.
const ReturnsContent = "content"

// contentFields are the fields each kind of block may have, beside "type",
// "annotations" and "_meta"; required ones are marked.
var contentFields = map[string]map[string]bool{
	"text":          {"text": true},
	"image":         {"data": true, "mimeType": true},
	"audio":         {"data": true, "mimeType": true},
	"resource_link": {"uri": true, "name": true, "title": false, "description": false, "mimeType": false, "size": false, "icons": false},
	"resource":      {"resource": true},
}

// CheckContent checks that out is a JSON array of MCP content blocks and
// says, for people, what is wrong with the first one that is not.
func CheckContent(out []byte) error {
	out = bytes.TrimSpace(out)
	var blocks []json.RawMessage
	if len(out) == 0 || out[0] != '[' || json.Unmarshal(out, &blocks) != nil {
		return fmt.Errorf("a tool that returns \"content\" returns a JSON array of MCP content blocks")
	}
	for i, b := range blocks {
		if err := CheckContentBlock(b); err != nil {
			return fmt.Errorf("content block %d: %v", i, err)
		}
	}
	return nil
}

// CheckContentBlock checks one MCP content block.
func CheckContentBlock(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf("not a JSON object")
	}
	var typ string
	if json.Unmarshal(m["type"], &typ) != nil {
		return fmt.Errorf(`"type" must be one of %s`, kinds())
	}
	fields, ok := contentFields[typ]
	if !ok {
		return fmt.Errorf(`type %q is not one of %s`, typ, kinds())
	}
	for k := range m {
		if _, known := fields[k]; !known && k != "type" && k != "annotations" && k != "_meta" {
			return fmt.Errorf("the %s block has no field %q", typ, k)
		}
	}
	for k, required := range fields {
		if _, ok := m[k]; required && !ok {
			return fmt.Errorf("the %s block needs %q", typ, k)
		}
	}
	str := func(k string) (string, error) {
		var s string
		if err := json.Unmarshal(m[k], &s); err != nil {
			return "", fmt.Errorf("%q must be a string", k)
		}
		return s, nil
	}
	for _, k := range []string{"text", "mimeType", "uri", "name", "title", "description"} {
		if _, ok := m[k]; ok {
			if _, err := str(k); err != nil {
				return err
			}
		}
	}
	if _, ok := m["data"]; ok {
		s, err := str("data")
		if err != nil {
			return err
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			return fmt.Errorf(`"data" must be base64: %v`, err)
		}
	}
	if r, ok := m["resource"]; ok {
		if err := checkResourceContents(r); err != nil {
			return fmt.Errorf("resource: %v", err)
		}
	}
	return nil
}

// checkResourceContents checks an embedded resource: a uri and a text or a
// base64 blob.
func checkResourceContents(raw json.RawMessage) error {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(raw, &r); err != nil || r == nil {
		return fmt.Errorf("not a JSON object")
	}
	for k := range r {
		switch k {
		case "uri", "mimeType", "text", "blob", "_meta":
		default:
			return fmt.Errorf("no field %q (uri, mimeType, text or blob)", k)
		}
	}
	var s string
	if json.Unmarshal(r["uri"], &s) != nil || s == "" {
		return fmt.Errorf(`"uri" must be a string`)
	}
	_, text := r["text"]
	blob, hasBlob := r["blob"]
	if text == hasBlob {
		return fmt.Errorf(`needs "text" or "blob", not both`)
	}
	if text && json.Unmarshal(r["text"], &s) != nil {
		return fmt.Errorf(`"text" must be a string`)
	}
	if hasBlob {
		if json.Unmarshal(blob, &s) != nil {
			return fmt.Errorf(`"blob" must be a string`)
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			return fmt.Errorf(`"blob" must be base64: %v`, err)
		}
	}
	return nil
}

func kinds() string {
	var ks []string
	for k := range contentFields {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// ContentText is what a model reads of content blocks: the text blocks,
// one a line, and for every other block a line saying what the host keeps
// ("[image image/png, 68 bytes]", "[resource test://x]"). out must have
// passed CheckContent.
func ContentText(out []byte) string {
	var blocks []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		MIMEType string `json:"mimeType"`
		Data     string `json:"data"`
		URI      string `json:"uri"`
		Resource struct {
			URI      string  `json:"uri"`
			Text     *string `json:"text"`
			MIMEType string  `json:"mimeType"`
		} `json:"resource"`
	}
	if json.Unmarshal(out, &blocks) != nil {
		return string(out)
	}
	var b strings.Builder
	for i, c := range blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
		case "image", "audio":
			fmt.Fprintf(&b, "[%s %s, %d bytes]", c.Type, c.MIMEType, base64.StdEncoding.DecodedLen(len(c.Data)))
		case "resource_link":
			fmt.Fprintf(&b, "[resource link %s]", c.URI)
		case "resource":
			if c.Resource.Text != nil {
				b.WriteString(*c.Resource.Text)
			} else {
				fmt.Fprintf(&b, "[resource %s %s]", c.Resource.URI, c.Resource.MIMEType)
			}
		}
	}
	return b.String()
}
