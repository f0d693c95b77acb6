package doccheck

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package's directory (go test
// runs a package's tests there).
const root = "../.."

// maxReadmeLines bounds README.md: about 300 lines of front door, with room to
// breathe.
const maxReadmeLines = 320

// TestLinks checks every relative link of README.md and docs/*.md.
func TestLinks(t *testing.T) {
	problems, checked, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: is the link pattern still right?", checked)
	}
}

// TestCheckFindsBrokenLinks runs the check on a small tree with one link of
// each kind, good and bad.
func TestCheckFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n[ok](docs/a.md#two-words) [ok](#top) [ok](etc/) [gone](docs/gone.md) [bad](docs/a.md#nope)\n"+
		"[web](https://example.com/x#y) `[code](docs/gone.md)`\n```\n[fenced](docs/gone.md)\n```\n")
	write("docs/a.md", "# A\n\n## Two words\n\n[up](../README.md#top) [out](../../x.md) [self](#a) [img](pic.png#x)\n"+
		"`../etc/ks.yaml` and `../../shared/BENCH.md`, `../shared/BENCH.md`, `cd .. && make`\n```\n../../fenced\n`../../fenced`\n```\n")
	write("docs/pic.png", "")
	write("etc/ks.yaml", "")
	problems, checked, err := check(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`README.md:3: link "docs/gone.md": docs/gone.md does not exist`,
		`README.md:3: link "docs/a.md#nope": no heading of docs/a.md makes anchor #nope`,
		`docs/a.md:5: link "../../x.md" leaves the repository`,
		`docs/a.md:6: path "../../shared/BENCH.md" leaves the repository`,
		`docs/a.md:6: path "../shared/BENCH.md": shared/BENCH.md does not exist`,
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if checked != 9 {
		t.Errorf("checked %d links, want 9", checked)
	}
}

// check reads README.md and docs/*.md under dir and returns a line for each
// broken relative link, and how many relative links it checked.
func check(dir string) (problems []string, checked int, err error) {
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		return nil, 0, err
	}
	for _, d := range docs {
		rel, err := filepath.Rel(dir, d)
		if err != nil {
			return nil, 0, err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	anchors := map[string]map[string]bool{} // Markdown file (relative to dir) -> its heading anchors
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, 0, err
		}
		for _, l := range links(string(text)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			bad := func(format string, args ...any) {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q", file, l.line, l.target)+fmt.Sprintf(format, args...))
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			resolved := file // a bare #anchor points into the same file
			if path != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				if resolved == ".." || strings.HasPrefix(resolved, "../") || filepath.IsAbs(path) {
					bad(" leaves the repository")
					continue
				}
				if _, err := os.Stat(filepath.Join(dir, resolved)); err != nil {
					bad(": %s does not exist", resolved)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			a, ok := anchors[resolved]
			if !ok {
				text, err := os.ReadFile(filepath.Join(dir, resolved))
				if err != nil {
					bad(": %v", err)
					continue
				}
				a = headingAnchors(string(text))
				anchors[resolved] = a
			}
			if !a[anchor] {
				bad(": no heading of %s makes anchor #%s", resolved, anchor)
			}
		}
		for _, l := range pathSpans(string(text)) {
			resolved := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), l.target)))
			switch _, err := os.Stat(filepath.Join(dir, resolved)); {
			case resolved == ".." || strings.HasPrefix(resolved, "../"):
				problems = append(problems, fmt.Sprintf("%s:%d: path %q leaves the repository", file, l.line, l.target))
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s:%d: path %q: %s does not exist", file, l.line, l.target, resolved))
			}
		}
	}
	return problems, checked, nil
}

// TestReadmeLength keeps README.md a front door.
func TestReadmeLength(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page in docs/ and link to it", n, maxReadmeLines)
	}
}

// link is one Markdown link or image: its target and the line it is on.
type link struct {
	target string
	line   int
}

// linkRE matches an inline link or image, [text](target) or
// [text](target "title"); the text may hold one level of nested brackets
// (an image inside a link).
var linkRE = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// links returns the links of a Markdown text, outside fenced code blocks and
// inline code spans.
func links(text string) []link {
	var out []link
	var f fences
	for i, line := range strings.Split(text, "\n") {
		if f.skip(line) {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// relativePathRE matches the text of a code span that is a relative path
// going up: ../x, ../../y/z.md.
var relativePathRE = regexp.MustCompile(`^(\.\./)+[^\s]*$`)

// pathSpans returns the inline code spans of a Markdown text (outside fenced
// blocks) that name a path going up from the file, such as
// `../shared/BENCH.md`: a reader of a clone has only what is inside it, so
// such a path must stay inside the repository and exist.
func pathSpans(text string) []link {
	var out []link
	var f fences
	for i, line := range strings.Split(text, "\n") {
		if f.skip(line) {
			continue
		}
		for _, span := range codeSpanRE.FindAllString(line, -1) {
			if p := strings.Trim(span, "` "); relativePathRE.MatchString(p) {
				out = append(out, link{target: p, line: i + 1})
			}
		}
	}
	return out
}

// fences follows fenced code blocks (``` or ~~~, three or more) line by line.
type fences struct {
	open string // the fence of the block we are in, "" outside
}

// skip reports whether line is a fence or inside a fenced block.
func (f *fences) skip(line string) bool {
	trimmed := strings.TrimLeft(line, " ")
	fence := ""
	for _, c := range []string{"`", "~"} {
		if n := len(trimmed) - len(strings.TrimLeft(trimmed, c)); n >= 3 {
			fence = trimmed[:n]
		}
	}
	switch {
	case f.open == "" && fence != "":
		f.open = fence
		return true
	case f.open != "" && strings.HasPrefix(fence, f.open) && strings.TrimSpace(trimmed[len(fence):]) == "":
		f.open = ""
		return true
	}
	return f.open != ""
}

// codeSpanRE matches an inline code span of one or two backticks.
var codeSpanRE = regexp.MustCompile("``[^`].*?``|`[^`]*`")

// stripCode blanks inline code spans, where brackets are not links.
func stripCode(line string) string {
	return codeSpanRE.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat(" ", len(s)) })
}

// isExternal reports whether a link target leaves the repository by URL
// scheme (http, https, mailto, ...).
func isExternal(target string) bool {
	scheme, _, ok := strings.Cut(target, ":")
	if !ok || strings.ContainsAny(scheme, "/#.") {
		return false
	}
	return scheme != ""
}

// headingAnchors returns the anchors GitHub makes for the ATX headings of a
// Markdown text (fenced code skipped): the heading's rendered text in lower
// case, with every character that is not a letter, a digit, a space, '-' or
// '_' dropped and each space turned into '-'; a repeated anchor gets -1, -2,
// ... in order.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	var f fences
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if f.skip(line) || len(line)-len(trimmed) > 3 {
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if level < 1 || level > 6 || (len(trimmed) > level && trimmed[level] != ' ') {
			continue
		}
		slug := slug(trimmed[level:])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// inlineLinkRE matches [text](target) inside a heading, whose text is what
// renders.
var inlineLinkRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug returns GitHub's anchor for a heading's Markdown text.
func slug(heading string) string {
	h := strings.TrimSpace(heading)
	h = strings.TrimRight(h, "#") // closing hashes of an ATX heading
	h = strings.TrimSpace(h)
	h = inlineLinkRE.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlug pins the anchor rules against headings whose anchors GitHub
// renders.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Two-phase commit (transaction_mode: xa)", "two-phase-commit-transaction_mode-xa"},
		{"Global sequences (AUTO_INCREMENT)", "global-sequences-auto_increment"},
		{"Dump, restore and import", "dump-restore-and-import"},
		{"Moving rows: online resharding and import", "moving-rows-online-resharding-and-import"},
		{"`make run` and `make test`", "make-run-and-make-test"},
		{"Where a COM_QUERY goes", "where-a-com_query-goes"},
		{"See [the docs](docs/README.md) ##", "see-the-docs"},
		{"Überblick & mehr", "überblick--mehr"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
	a := headingAnchors("# A\n```\n# not a heading\n```\n## A\n#nospace\n    # indented code\n### B\n")
	want := map[string]bool{"a": true, "a-1": true, "b": true}
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Errorf("headingAnchors = %v, want %v", a, want)
	}
}
