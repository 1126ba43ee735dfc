// Package cli is what every anyhook command shares on its command line:
// flags are written --name in help texts (Go's flag package accepts -name
// too), -h and --help print the command's usage on stdout, and a bad flag
// is one line on stderr that names it as --name and suggests the flag
// meant ("did you mean --config?") instead of printing the whole usage.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// NewFlagSet returns a flag set for the command name (e.g. "serve",
// "log verify") that prints nothing by itself: Parse returns errors and
// the caller prints them, and Usage prints help.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("anyhook "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args into fs. It returns flag.ErrHelp for -h and --help,
// an error for positional arguments, and otherwise the flag package's
// error rewritten to name the flag as --name, with a suggestion for an
// unknown flag.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		return flagError(fs, err)
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (flags are written --name value)", fs.Arg(0))
	}
	return nil
}

var (
	undefinedRe = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	// The flag package names a flag "-name" in its other messages.
	dashNameRe = regexp.MustCompile(`(\s)-([A-Za-z][A-Za-z0-9_.-]*)`)
)

func flagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if m := undefinedRe.FindStringSubmatch(msg); m != nil {
		name := m[1]
		if s := Suggest(name, FlagNames(fs)); s != "" {
			return fmt.Errorf("unknown flag --%s (did you mean --%s?)", name, s)
		}
		return fmt.Errorf("unknown flag --%s (see '%s --help')", name, fs.Name())
	}
	return errors.New(dashNameRe.ReplaceAllString(msg, "$1--$2"))
}

// FlagNames returns the names of the flags defined in fs, sorted.
func FlagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// Usage writes help for fs to w: the synopsis (a usage line and, after a
// blank line, what the command does), then one line per flag, written
// --name ARG, with its default when it has one. ARG is the back-quoted
// word of the flag's usage string (see flag.UnquoteUsage).
func Usage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintln(w, strings.TrimRight(synopsis, "\n"))
	type row struct{ left, right string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if arg != "" {
			left += " " + strings.ToUpper(arg)
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" && !strings.Contains(text, "(default") {
			text += " (default " + d + ")"
		}
		rows = append(rows, row{left, text})
		width = max(width, len(left))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.right)
	}
}

// Suggest returns the candidate closest to s by edit distance when it is
// close enough to be what was meant (at most 2 edits, and fewer than half
// of s), else "".
func Suggest(s string, candidates []string) string {
	best, bestDist := "", 3
	low := strings.ToLower(s)
	for _, c := range slices.Sorted(slices.Values(candidates)) {
		d := EditDistance(low, strings.ToLower(c))
		if d < bestDist && d*2 < max(len(s), 2) {
			best, bestDist = c, d
		}
	}
	return best
}

// EditDistance is the number of single-letter insertions, deletions,
// substitutions and swaps of two adjacent letters that turn a into b (the
// optimal string alignment distance: "sned" is one swap from "send"); 64
// for strings longer than 64 bytes: never a suggestion.
func EditDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	// Three rows: two back for a swap.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
