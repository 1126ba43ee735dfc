package config

import (
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A YAML parser's message ("mapping values are not allowed in this
// context", "did not find expected key") says what the parser saw, not
// what the person wrote wrong, and its line is often that of the mapping
// the mistake is in rather than the mistake. syntaxHint looks at the text
// for the usual mistakes — a tab in the indentation, a key without a space
// after its colon, an unquoted ": " inside a value, a line indented deeper
// than the line above it or to no enclosing key's depth — and returns the
// first line that shows one with a hint, or (0, a generic hint) when the
// message is about structure and no line stands out. Hints never quote a
// value: it may be a secret.
func syntaxHint(data []byte, msg string) (line int, hint string) {
	if l, h := suspectLine(string(data)); l > 0 {
		return l, h
	}
	if strings.Contains(msg, "found unexpected end of stream") {
		if l := unclosedQuote(string(data)); l > 0 {
			return l, "the quoted value on this line is not closed"
		}
	}
	switch {
	case strings.Contains(msg, "mapping values are not allowed"),
		strings.Contains(msg, "did not find expected key"),
		strings.Contains(msg, "could not find expected ':'"),
		strings.Contains(msg, "block sequence entries are not allowed"):
		return 0, `check the indentation (spaces only; keys of one mapping at the same depth, nested keys deeper) and that each "key:" is followed by a space`
	case strings.Contains(msg, "did not find expected ',' or"):
		return 0, "a [list] or {mapping} written on one line is not closed"
	case strings.Contains(msg, "found unexpected end of stream"):
		return 0, "a quoted value is not closed"
	}
	return 0, ""
}

var (
	// bareKey is "key:value" with no space after the colon: one plain
	// scalar to YAML, never a key in a block mapping.
	bareKey = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.-]*):[^\s:/]`)
	// keyValue is "key: value".
	keyValue = regexp.MustCompile(`^(?:- +)?([A-Za-z_][A-Za-z0-9_.-]*):(?: +(.*))?$`)
)

// suspectLine scans the block structure of a YAML text for the first line
// that shows a usual mistake, and says what it is.
func suspectLine(text string) (int, string) {
	levels := []int{0} // indentation of the enclosing keys, innermost last
	opens := false     // the previous line ends with "key:" (a nested block follows)
	prev := 0          // number of the previous content line
	block := -1        // inside a block scalar (| or >): its key's indentation
	flow := 0          // depth of [ and { still open from earlier lines
	flowStart := 0     // the line that opened them
	for i, raw := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		n := i + 1
		content := strings.TrimLeft(raw, " ")
		indent := len(raw) - len(content)
		if lead := raw[:len(raw)-len(strings.TrimLeft(raw, " \t"))]; strings.Contains(lead, "\t") && block < 0 {
			return n, "this line is indented with a tab: YAML indents with spaces only"
		}
		content = stripComment(content)
		if strings.TrimSpace(content) == "" {
			continue
		}
		if block >= 0 {
			if indent > block {
				continue // block scalar text
			}
			block = -1
		}
		if flow > 0 {
			flow = max(0, flow+flowDepth(content))
			prev = n
			continue
		}
		if m := bareKey.FindStringSubmatch(content); m != nil && !strings.ContainsAny(content, `"'`) {
			return n, fmt.Sprintf("a key needs a space after its colon (%q, not %q)", m[1]+": …", m[1]+":…")
		}
		top := levels[len(levels)-1]
		switch {
		case indent > top && !opens:
			where := "the line above it"
			if prev > 0 {
				where = "line " + strconv.Itoa(prev)
			}
			return n, fmt.Sprintf("this line is indented deeper than %s, which does not end with a bare \"key:\"; keys of one mapping line up", where)
		case indent > top:
			levels = append(levels, indent)
		case indent < top:
			above := slices.Clone(levels) // the keys it could have meant: the innermost (a sibling) too
			for len(levels) > 1 && levels[len(levels)-1] > indent {
				levels = levels[:len(levels)-1]
			}
			if levels[len(levels)-1] != indent {
				return n, fmt.Sprintf("this line is indented %d spaces, which lines up with no key above it (those are at %s)", indent, spaces(above))
			}
		}
		item := 0 // "- " list items: their keys line up after the dash
		for strings.HasPrefix(content[item:], "-") && len(content) > item+1 && content[item+1] == ' ' {
			item += 1 + len(content[item+1:]) - len(strings.TrimLeft(content[item+1:], " "))
		}
		if item > 0 {
			levels = append(levels, indent+item)
		}
		rest := content[item:]
		opens = false
		if m := keyValue.FindStringSubmatch(rest); m != nil {
			v := strings.TrimSpace(m[2])
			switch {
			case v == "":
				opens = true
			case v[0] == '|' || v[0] == '>':
				block = indent + item
			case v[0] == '[' || v[0] == '{':
				flow, flowStart = max(0, flowDepth(v)), n
			case v[0] != '"' && v[0] != '\'' && strings.Contains(v, ": "):
				return n, fmt.Sprintf("the value of %q contains \": \": quote it", m[1])
			case v[0] != '"' && v[0] != '\'' && strings.HasSuffix(v, ":"):
				return n, fmt.Sprintf("the value of %q ends with \":\": quote it (e.g. database: \"sqlite::memory:\")", m[1])
			}
		}
		prev = n
	}
	if flow > 0 {
		return flowStart, "the [list] or {mapping} that starts on this line is not closed"
	}
	return 0, ""
}

// unclosedQuote returns the first line with a quoted value that does not
// end on that line, or 0.
func unclosedQuote(text string) int {
	for i, raw := range strings.Split(text, "\n") {
		var quote byte
		for j := 0; j < len(raw); j++ {
			switch c := raw[j]; {
			case quote == '"' && c == '\\':
				j++
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '#' && (j == 0 || raw[j-1] == ' '):
				j = len(raw)
			case (c == '"' || c == '\'') && (j == 0 || strings.ContainsRune(" [{,:", rune(raw[j-1]))):
				quote = c
			}
		}
		if quote != 0 {
			return i + 1
		}
	}
	return 0
}

// unquoted yields each byte of s outside single or double quotes, with
// its index (the quotes themselves are not yielded).
func unquoted(s string) iter.Seq2[int, byte] {
	return func(yield func(int, byte) bool) {
		var quote byte
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			default:
				if !yield(i, c) {
					return
				}
			}
		}
	}
}

// stripComment removes a " #" comment outside quotes.
func stripComment(s string) string {
	for i, c := range unquoted(s) {
		if c == '#' && (i == 0 || s[i-1] == ' ') {
			return strings.TrimRight(s[:i], " ")
		}
	}
	return s
}

// flowDepth is how many [ and { s opens minus closes, outside quotes.
func flowDepth(s string) int {
	d := 0
	for _, c := range unquoted(s) {
		switch c {
		case '[', '{':
			d++
		case ']', '}':
			d--
		}
	}
	return d
}

func spaces(levels []int) string {
	s := make([]string, len(levels))
	for i, l := range levels {
		s[i] = strconv.Itoa(l)
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
