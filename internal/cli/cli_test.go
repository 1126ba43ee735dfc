package cli

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	t.Parallel()
	names := []string{"config", "event", "events", "status", "since", "until", "source"}
	for _, tt := range []struct{ in, want string }{
		{"confg", "config"},
		{"CONFIG", "config"},
		{"evnt", "event"},
		{"sinse", "since"},
		{"untill", "until"},
		{"sotrue", "source"}, // a swap of two letters is one edit
		{"stauts", "status"},
		{"x", ""},       // one edit of one letter is not a suggestion
		{"dry", ""},     // too far from everything
		{"verbose", ""}, // unrelated
	} {
		if got := Suggest(tt.in, names); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"send", "send", 0}, {"sned", "send", 1}, {"serv", "serve", 1}, {"relpay", "replay", 1},
		{"ca", "abc", 3}, {"kitten", "sitting", 3}, {"abc", "", 3}, {strings.Repeat("a", 65), "a", 64},
	} {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := EditDistance(tt.b, tt.a); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d (it is symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
	if got := Suggest("sned", []string{"serve", "send", "sink", "replay"}); got != "send" {
		t.Errorf(`Suggest("sned") = %q, want send`, got)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	newFS := func() *flag.FlagSet {
		fs := NewFlagSet("replay")
		fs.String("config", "", "config `file`")
		fs.Bool("dry-run", false, "")
		fs.Int("limit", 0, "")
		return fs
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--confg", "x"}, "unknown flag --confg (did you mean --config?)"},
		{[]string{"-dryrun"}, "unknown flag --dryrun (did you mean --dry-run?)"},
		{[]string{"--zzz"}, "unknown flag --zzz (see 'anyhook replay --help')"},
		{[]string{"--config"}, "flag needs an argument: --config"},
		{[]string{"--limit", "x"}, `invalid value "x" for flag --limit: parse error`},
		{[]string{"--dry-run=maybe"}, `invalid boolean value "maybe" for --dry-run: parse error`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		err := Parse(newFS(), tt.args)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.args, err, tt.want)
		}
	}
	for _, h := range []string{"-h", "--help", "-help"} {
		if err := Parse(newFS(), []string{h}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("Parse(%s) = %v, want flag.ErrHelp", h, err)
		}
	}
	// Both styles are accepted.
	fs := newFS()
	if err := Parse(fs, []string{"-config", "a", "--limit=3"}); err != nil || fs.Lookup("config").Value.String() != "a" {
		t.Errorf("single and double dashes: %v", err)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	fs := NewFlagSet("replay")
	fs.String("config", "", "config `file`")
	fs.Bool("dry-run", false, "print what would be replayed")
	fs.Duration("lag", 5e9, "how long")
	var b strings.Builder
	Usage(&b, fs, "usage: anyhook replay [flags]\n\nReplays.")
	want := `usage: anyhook replay [flags]

Replays.

flags:
  --config FILE   config file
  --dry-run       print what would be replayed
  --lag DURATION  how long (default 5s)
`
	if b.String() != want {
		t.Errorf("Usage:\n%s\nwant:\n%s", b.String(), want)
	}
}
