package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml3 "gopkg.in/yaml.v3"
)

// positions maps key paths (schema_list[0].shard[2].key) to the lines of the
// YAML they were parsed from. yaml.v2, which decodes the file, keeps no
// positions, so the same bytes are parsed a second time with yaml.v3's node
// API for this index alone. A nil *positions is valid and knows no lines.
type positions struct {
	lines  map[string]int         // path -> line of its key (or sequence item)
	values map[string]*yaml3.Node // path -> its value node
	byLine map[int][]string       // line -> paths starting on it, in document order
}

// indexPositions returns the position index of data, or nil if yaml.v3
// cannot parse it (decoding then reports the syntax error).
func indexPositions(data []byte) *positions {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil
	}
	p := &positions{
		lines:  make(map[string]int),
		values: make(map[string]*yaml3.Node),
		byLine: make(map[int][]string),
	}
	if doc.Kind == yaml3.DocumentNode && len(doc.Content) > 0 {
		p.walk("", doc.Content[0])
	}
	return p
}

func (p *positions) walk(path string, n *yaml3.Node) {
	switch n.Kind {
	case yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				// Merged keys point at the anchor's lines; not worth it.
				continue
			}
			child := joinKey(path, k.Value)
			p.add(child, k.Line, v)
			p.walk(child, v)
		}
	case yaml3.SequenceNode:
		for i, item := range n.Content {
			child := joinIndex(path, i)
			p.add(child, item.Line, item)
			p.walk(child, item)
		}
	}
}

func (p *positions) add(path string, line int, v *yaml3.Node) {
	p.byLine[line] = append(p.byLine[line], path)
	if _, ok := p.lines[path]; ok {
		return // a repeated key: keep the first, decoding reports the repeat
	}
	p.lines[path] = line
	p.values[path] = v
}

// line returns the line of path or, when path is absent from the file (a
// missing key), of its nearest ancestor that is present; 0 if none is.
func (p *positions) line(path string) int {
	if p == nil {
		return 0
	}
	for path != "" {
		if l, ok := p.lines[path]; ok {
			return l
		}
		path = parentPath(path)
	}
	return 0
}

// pathAt guesses which key a decode error on line refers to: the path on
// that line whose last key is name when name is given, else the first path
// starting on that line.
func (p *positions) pathAt(line int, name string) string {
	if p == nil {
		return ""
	}
	paths := p.byLine[line]
	if name != "" {
		for _, path := range paths {
			if path == name || strings.HasSuffix(path, "."+name) {
				return path
			}
		}
	}
	if len(paths) > 0 {
		return paths[0]
	}
	return ""
}

var (
	lineRE       = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	notFoundRE   = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	fieldSetRE   = regexp.MustCompile(`^field (\S+) already set in type \S+$`)
	keySetRE     = regexp.MustCompile(`^key "(.*)" already set in map$`)
	cannotDecRE  = regexp.MustCompile("^cannot unmarshal (\\S+)(?: `(.*)`)? into (\\S+)$")
	durationKeys = []string{
		"shutdown_timeout",
		"backend.dial_timeout",
		"backend.read_timeout",
		"backend.acquire_timeout",
		"backend.idle_timeout",
		"backend.max_lifetime",
		"backend.ping_after_idle",
		"backend.health_interval",
	}
)

// decodeProblem turns one of yaml.v2's strict-decoding messages
// ("line 5: field bogus not found in type config.Node") into a Problem with
// the key path filled in from the position index.
func (p *positions) decodeProblem(msg string) Problem {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	rest := m[2]
	if s := notFoundRE.FindStringSubmatch(rest); s != nil {
		return Problem{Path: p.pathAt(line, s[1]), Line: line, Msg: fmt.Sprintf("unknown key %q%s", s[1], didYouMean(s[1], knownKeys(s[2])))}
	}
	if s := fieldSetRE.FindStringSubmatch(rest); s != nil {
		return Problem{Path: p.pathAt(line, s[1]), Line: line, Msg: fmt.Sprintf("key %q is repeated", s[1])}
	}
	if s := keySetRE.FindStringSubmatch(rest); s != nil {
		return Problem{Path: p.pathAt(line, s[1]), Line: line, Msg: fmt.Sprintf("key %q is repeated", s[1])}
	}
	if s := cannotDecRE.FindStringSubmatch(rest); s != nil {
		what := tagName(s[1])
		if s[2] != "" {
			what = strconv.Quote(s[2])
		}
		return Problem{Path: p.pathAt(line, ""), Line: line, Msg: fmt.Sprintf("cannot use %s as %s", what, goTypeName(s[3]))}
	}
	return Problem{Path: p.pathAt(line, ""), Line: line, Msg: rest}
}

// tagName describes a YAML tag from a yaml.v2 message (!!seq) in words.
func tagName(tag string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	}
	return tag
}

// goTypeName describes a Go type from a yaml.v2 message (int) in words.
func goTypeName(t string) string {
	switch t {
	case "time.Duration":
		return "a duration like \"5s\""
	case "int", "int64":
		return "an integer"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	}
	if strings.HasPrefix(t, "[]") {
		return "a list"
	}
	if strings.HasPrefix(t, "config.") {
		return "a mapping"
	}
	return t
}

// durationProblems reports duration keys written as bare integers. yaml.v2
// would decode "dial_timeout: 5" as 5ns, which is never what was meant; 0 is
// unambiguous and allowed.
func (p *positions) durationProblems() []Problem {
	if p == nil {
		return nil
	}
	var out []Problem
	for _, k := range durationKeys {
		v := p.values[k]
		if v == nil || v.Kind != yaml3.ScalarNode || v.Tag != "!!int" {
			continue
		}
		if n, err := strconv.ParseInt(v.Value, 0, 64); err == nil && n == 0 {
			continue
		}
		out = append(out, Problem{Path: k, Line: p.lines[k],
			Msg: fmt.Sprintf("duration %s has no unit; write it like \"%ss\" or \"%sms\"", v.Value, v.Value, v.Value)})
	}
	return out
}

// syntaxProblem turns a yaml.v2 syntax error ("yaml: line 3: mapping values
// are not allowed in this context") in data into a Problem on the line of
// the mistake. yaml.v2 reports the line of the token the parser stopped at,
// counted from 0 for parser errors (the line before) and, for a key
// without its colon, after the comments and blank lines that follow it;
// yaml.v3 reports where the construct began (the key, the quote, the
// bracket), counted from 0 for parser errors too. Each message is raised in
// one place of libyaml, so it says which line is right; a line that is
// blank, a comment or past the end is then moved back to the line with
// content before it, where the mistake is.
func syntaxProblem(data []byte, err error) Problem {
	line, msg, ok := yamlError(err)
	if !ok {
		return Problem{Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var doc yaml3.Node
	line3, msg3, ok3 := yamlError(yaml3.Unmarshal(data, &doc))
	same := ok3 && msg3 == msg && line3 > 0
	switch {
	case (msg == "did not find expected ',' or ']'" || msg == "did not find expected ',' or '}'") && same:
		line = line3 + 1 // the bracket never closed
	case parserErrors[msg]:
		line++
	case same && !parserErrors[msg3]:
		line = line3 // a scanner error: where its token began
	}
	return Problem{Line: contentLine(data, line), Msg: "invalid YAML: " + msg + syntaxHint(msg)}
}

// parserErrors are libyaml's parser (not scanner) messages, whose lines
// yaml.v2 and yaml.v3 count from 0.
var parserErrors = map[string]bool{
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected key":              true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
}

// syntaxHint says what usually causes msg.
func syntaxHint(msg string) string {
	switch msg {
	case "could not find expected ':'":
		return " (write a key as key: value, with a space after the colon)"
	case "did not find expected key", "did not find expected '-' indicator":
		return " (check this line's indentation: it must line up with the keys of its block)"
	case "found character that cannot start any token":
		return " (indent with spaces, not tabs; quote values that start with @ or `)"
	case "mapping values are not allowed in this context":
		return " (quote a value that holds \": \")"
	}
	return ""
}

// yamlError splits a yaml library error into its line and message; ok is
// false for nil and for errors of another shape.
func yamlError(err error) (line int, msg string, ok bool) {
	if err == nil {
		return 0, "", false
	}
	s := err.Error()
	if m := lineRE.FindStringSubmatch(s); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2], true
	}
	if rest, found := strings.CutPrefix(s, "yaml: "); found && !strings.Contains(rest, "\n") {
		return 0, rest, true
	}
	return 0, "", false
}

// contentLine returns line, or when line is blank, a comment or past the end
// of data, the nearest line before it that holds YAML (0 when none does).
func contentLine(data []byte, line int) int {
	lines := strings.Split(string(data), "\n")
	if line > len(lines) {
		line = len(lines)
	}
	for ; line > 0; line-- {
		t := strings.TrimSpace(lines[line-1])
		if t != "" && !strings.HasPrefix(t, "#") {
			return line
		}
	}
	return 0
}

// coveredBy reports whether path is at or under the path of one of problems,
// so a validation problem caused by a failed decode is not reported twice.
func coveredBy(path string, problems []Problem) bool {
	for _, p := range problems {
		if p.Path == "" {
			continue
		}
		if path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// parentPath drops the last key or index of path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}
