package resources

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/clara-lib/clara/core/toolbox"
)

// ReadFile reads a regular file of at most max bytes (the engine's reader).
type ReadFile func(path string, max int64) ([]byte, error)

// DefaultMaxBytes bounds what a file resource reads unless its max_bytes
// says otherwise.
const DefaultMaxBytes = 4 << 20

// maxCompletions bounds the values one completion answers (MCP's own cap).
const maxCompletions = 100

// Resource is one [[resources]] table: a resource at a fixed URI, or a
// template whose {var} parts match many.
type Resource struct {
	Name        string
	Title       string
	Description string
	MIMEType    string
	URI         string // a direct resource's URI; "" for a template
	URITemplate string // a template's, with {var} parts; "" for a direct resource
	// Its contents: a text, or a file under the project root (relative
	// paths are), either with the template's {var} parts filled.
	Text     *string
	File     string
	MaxBytes int64
	// Complete lists, per template variable, the values completion offers.
	Complete map[string][]string

	vars    []string
	pattern *regexp.Regexp // matches the URIs of a template
}

// Template reports whether r is a template.
func (r *Resource) Template() bool { return r.URITemplate != "" }

// Contents are what a read returns: text or binary data.
type Contents struct {
	URI      string
	MIMEType string
	Text     *string // nil for binary contents
	Blob     []byte
}

// Set is a configuration's resources and prompts.
type Set struct {
	resources []*Resource
	prompts   []*Prompt
	root      string
	read      ReadFile
}

// Resources lists the resources, direct ones and templates, by name.
func (s *Set) Resources() []*Resource {
	if s == nil {
		return nil
	}
	return s.resources
}

// Prompts lists the prompts, by name.
func (s *Set) Prompts() []*Prompt {
	if s == nil {
		return nil
	}
	return s.prompts
}

// Prompt is the prompt of that name, nil if none.
func (s *Set) Prompt(name string) *Prompt {
	for _, p := range s.Prompts() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Resource is the resource of that name, nil if none.
func (s *Set) Resource(name string) *Resource {
	for _, r := range s.Resources() {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Empty reports whether the set offers nothing.
func (s *Set) Empty() bool { return s == nil || len(s.resources)+len(s.prompts) == 0 }

// Compile checks the configuration's [[resources]] and [[prompts]] tables.
// root is the project root files are under; read reads them. A problem is
// an error naming the table ("resources[2] (logo): ...").
func Compile(resources, prompts []map[string]any, root string, read ReadFile) (*Set, error) {
	s := &Set{root: root, read: read}
	names := map[string]bool{}
	uris := map[string]bool{}
	for i, t := range resources {
		r, err := compileResource(t)
		if err != nil {
			return nil, fmt.Errorf("resources[%d]%s: %v", i, nameOf(t), err)
		}
		if names[r.Name] {
			return nil, fmt.Errorf("resources[%d] (%s): the name is taken by another resource", i, r.Name)
		}
		if r.File != "" && !r.Template() {
			if _, err := s.filePath(r, nil); err != nil {
				return nil, fmt.Errorf("resources[%d] (%s): file: %v", i, r.Name, err)
			}
		}
		key := r.URI + r.URITemplate
		if uris[key] {
			return nil, fmt.Errorf("resources[%d] (%s): %s is another resource's too", i, r.Name, key)
		}
		names[r.Name], uris[key] = true, true
		s.resources = append(s.resources, r)
	}
	names = map[string]bool{}
	for i, t := range prompts {
		p, err := compilePrompt(t)
		if err != nil {
			return nil, fmt.Errorf("prompts[%d]%s: %v", i, nameOf(t), err)
		}
		if names[p.Name] {
			return nil, fmt.Errorf("prompts[%d] (%s): the name is taken by another prompt", i, p.Name)
		}
		names[p.Name] = true
		s.prompts = append(s.prompts, p)
	}
	sort.Slice(s.resources, func(i, j int) bool { return s.resources[i].Name < s.resources[j].Name })
	sort.Slice(s.prompts, func(i, j int) bool { return s.prompts[i].Name < s.prompts[j].Name })
	return s, nil
}

func nameOf(t map[string]any) string {
	if n, ok := t["name"].(string); ok && n != "" {
		return " (" + n + ")"
	}
	return ""
}

// decodeTable decodes a configuration table into v, refusing keys v does
// not have.
func decodeTable(t map[string]any, v any) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func compileResource(t map[string]any) (*Resource, error) {
	var raw struct {
		Name        string              `json:"name"`
		Title       string              `json:"title"`
		Description string              `json:"description"`
		MIMEType    string              `json:"mime_type"`
		URI         string              `json:"uri"`
		URITemplate string              `json:"uri_template"`
		Text        *string             `json:"text"`
		File        string              `json:"file"`
		MaxBytes    int64               `json:"max_bytes"`
		Complete    map[string][]string `json:"complete"`
	}
	if err := decodeTable(t, &raw); err != nil {
		return nil, err
	}
	r := &Resource{Name: raw.Name, Title: raw.Title, Description: raw.Description, MIMEType: raw.MIMEType,
		URI: raw.URI, URITemplate: raw.URITemplate, Text: raw.Text, File: raw.File, MaxBytes: raw.MaxBytes, Complete: raw.Complete}
	if !toolbox.ValidName(r.Name) {
		return nil, fmt.Errorf("name %q: use 1 to 64 letters, digits, '_' or '-' (the policy names resources as it names tools)", r.Name)
	}
	if (r.URI == "") == (r.URITemplate == "") {
		return nil, errors.New("give uri or uri_template (one of them)")
	}
	if (r.Text == nil) == (r.File == "") {
		return nil, errors.New("give text or file (one of them)")
	}
	if r.MaxBytes < 0 {
		return nil, errors.New("max_bytes must not be negative")
	}
	if r.MaxBytes == 0 {
		r.MaxBytes = DefaultMaxBytes
	}
	if r.URI != "" {
		if !validURI(r.URI) {
			return nil, fmt.Errorf("uri %q is not an absolute URI (scheme:...)", r.URI)
		}
		if len(r.Complete) > 0 {
			return nil, errors.New("complete is for a uri_template's variables")
		}
	} else {
		vars, pattern, err := compileTemplate(r.URITemplate)
		if err != nil {
			return nil, fmt.Errorf("uri_template: %v", err)
		}
		r.vars, r.pattern = vars, pattern
		for v := range r.Complete {
			if !contains(vars, v) {
				return nil, fmt.Errorf("complete names %q, which is not a variable of the uri_template", v)
			}
		}
	}
	if r.File != "" {
		if strings.ContainsRune(r.File, 0) {
			return nil, errors.New("file holds a NUL byte")
		}
	}
	if r.MIMEType == "" && r.File != "" {
		r.MIMEType = mime.TypeByExtension(filepath.Ext(r.File))
	}
	if r.MIMEType == "" && r.Text != nil {
		r.MIMEType = "text/plain"
	}
	return r, nil
}

func validURI(u string) bool {
	i := strings.IndexByte(u, ':')
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := u[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return !strings.ContainsAny(u, " \t\n\r")
}

// compileTemplate reads a URI template of simple {var} expressions (RFC
// 6570 level 1) and returns its variables and the pattern of the URIs it
// matches: each variable one or more characters other than / ? # and the
// template's literal text as it is.
func compileTemplate(t string) ([]string, *regexp.Regexp, error) {
	if !validURI(strings.NewReplacer("{", "", "}", "").Replace(t)) {
		return nil, nil, fmt.Errorf("%q is not an absolute URI with {var} parts", t)
	}
	var vars []string
	var re strings.Builder
	re.WriteString("^")
	rest := t
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return nil, nil, fmt.Errorf("%q has a } without its {", t)
			}
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		if strings.IndexByte(rest[:i], '}') >= 0 {
			return nil, nil, fmt.Errorf("%q has a } without its {", t)
		}
		re.WriteString(regexp.QuoteMeta(rest[:i]))
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, nil, fmt.Errorf("%q has a { without its }", t)
		}
		name := rest[i+1 : i+j]
		if !validVar(name) {
			return nil, nil, fmt.Errorf("{%s}: a variable is letters, digits and '_' (only simple {var} expressions)", name)
		}
		if contains(vars, name) {
			return nil, nil, fmt.Errorf("{%s} comes twice", name)
		}
		vars = append(vars, name)
		re.WriteString("([^/?#]+)")
		rest = rest[i+j+1:]
	}
	if len(vars) == 0 {
		return nil, nil, fmt.Errorf("%q has no {var} part (a fixed URI is a uri)", t)
	}
	re.WriteString("$")
	return vars, regexp.MustCompile(re.String()), nil
}

func validVar(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Match finds the resource of uri: a direct resource at that URI, or the
// first template (by name) that matches it, with its variables' values.
func (s *Set) Match(uri string) (*Resource, map[string]string) {
	for _, r := range s.Resources() {
		if r.URI == uri {
			return r, nil
		}
	}
	for _, r := range s.Resources() {
		if r.pattern == nil {
			continue
		}
		if m := r.pattern.FindStringSubmatch(uri); m != nil {
			vars := make(map[string]string, len(r.vars))
			for i, v := range r.vars {
				vars[v] = m[i+1]
			}
			return r, vars
		}
	}
	return nil, nil
}

// Read reads r at uri, vars its template's values (Match).
func (s *Set) Read(r *Resource, uri string, vars map[string]string) (Contents, error) {
	c := Contents{URI: uri, MIMEType: r.MIMEType}
	if r.Text != nil {
		text := fill(*r.Text, vars, isJSON(r.MIMEType))
		c.Text = &text
		return c, nil
	}
	path, err := s.filePath(r, vars)
	if err != nil {
		return Contents{}, err
	}
	if s.read == nil {
		return Contents{}, errors.New("no file reader")
	}
	data, err := s.read(path, r.MaxBytes)
	if err != nil {
		return Contents{}, err
	}
	if textual(r.MIMEType, data) {
		text := string(data)
		c.Text = &text
		if c.MIMEType == "" {
			c.MIMEType = "text/plain"
		}
	} else {
		c.Blob = data
		if c.MIMEType == "" {
			c.MIMEType = "application/octet-stream"
		}
	}
	return c, nil
}

// filePath is r's file with the template's values filled in, under the
// project root: a value is one path element (no separator, not . or ..),
// and the path, once cleaned, must not leave the root (a file the
// configuration names is under it too).
func (s *Set) filePath(r *Resource, vars map[string]string) (string, error) {
	for _, v := range vars {
		if v == "." || v == ".." || strings.ContainsAny(v, "/\\\x00") {
			return "", fmt.Errorf("%q cannot name a file", v)
		}
	}
	p := fill(r.File, vars, false)
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.root, p)
	}
	p = filepath.Clean(p)
	if s.root != "" {
		rel, err := filepath.Rel(s.root, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("%s is outside project_root", p)
		}
	}
	return p, nil
}

// textual reports whether a file's contents are served as text: a text/*
// type or one of JSON, XML, YAML, TOML, JavaScript; with no type, valid
// UTF-8.
func textual(mimeType string, data []byte) bool {
	mt, _, _ := mime.ParseMediaType(mimeType)
	switch {
	case mt == "":
		return utf8.Valid(data)
	case strings.HasPrefix(mt, "text/"), isJSON(mt), strings.HasSuffix(mt, "+xml"), mt == "application/xml",
		mt == "application/yaml", mt == "application/toml", mt == "application/javascript":
		return utf8.Valid(data)
	}
	return false
}

func isJSON(mimeType string) bool {
	mt, _, _ := mime.ParseMediaType(mimeType)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// fill replaces each {name} of vars in text by its value, JSON-escaped
// (without the quotes) when the text is JSON, so that a value cannot
// change the document's shape.
func fill(text string, vars map[string]string, jsonText bool) string {
	if len(vars) == 0 {
		return text
	}
	pairs := make([]string, 0, 2*len(vars))
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := vars[k]
		if jsonText {
			b, _ := json.Marshal(v)
			v = string(b[1 : len(b)-1])
		}
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// Version names what r holds now, so that a subscriber can be told when
// it changes: its configuration, and for a direct file resource the
// file's size and modification time (a template's: its configuration
// only).
func (s *Set) Version(r *Resource) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", r.URI, r.URITemplate, r.MIMEType, r.File)
	if r.Text != nil {
		h.Write([]byte(*r.Text))
	} else if !r.Template() {
		if path, err := s.filePath(r, nil); err == nil {
			if info, err := os.Stat(path); err == nil {
				fmt.Fprintf(h, "%d\x00%d", info.Size(), info.ModTime().UnixNano())
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// FilePath is the file a direct file resource reads ("" for the others),
// for a watcher.
func (s *Set) FilePath(r *Resource) string {
	if r.File == "" || r.Template() {
		return ""
	}
	p, _ := s.filePath(r, nil)
	return p
}

// Completion is what completion answers for one argument: the values that
// start with what was typed, at most 100, how many there are in all.
type Completion struct {
	Values  []string
	Total   int
	HasMore bool
}

// Complete offers the values of list that start with prefix.
func Complete(list []string, prefix string) Completion {
	var c Completion
	for _, v := range list {
		if strings.HasPrefix(v, prefix) {
			c.Total++
			if len(c.Values) < maxCompletions {
				c.Values = append(c.Values, v)
			}
		}
	}
	c.HasMore = c.Total > len(c.Values)
	if c.Values == nil {
		c.Values = []string{}
	}
	return c
}
