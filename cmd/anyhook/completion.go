package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/provider"
)

const completionUsage = `usage: anyhook completion bash|zsh

Prints a shell completion script for anyhook's commands, subcommands and
flags (and file names, providers and log levels where a flag takes one).

  bash: source <(anyhook completion bash)    # in ~/.bashrc
        or: anyhook completion bash > /etc/bash_completion.d/anyhook
  zsh:  anyhook completion zsh > "${fpath[1]}/_anyhook"   # then restart zsh
        or: source <(anyhook completion zsh)   # after compinit, in ~/.zshrc`

// subcommands are the commands that take a command of their own.
var subcommands = map[string][]string{
	"log":        {"verify", "key", "rotate-key"},
	"config":     configSubcommands,
	"completion": {"bash", "zsh"},
}

// positionals are the words a command takes besides flags, for completion.
var positionals = map[string]func() []string{
	"help":           commandNames,
	"config example": provider.Names,
}

// flagValues are the values a flag takes, where there is a fixed set.
var flagValues = map[string]func() []string{
	"provider":  provider.Names,
	"log-level": func() []string { return []string{"debug", "info", "warn", "error"} },
}

func completion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("completion")
	var shell string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		shell, args = args[0], args[1:]
	}
	if code := parse(fs, args, stdout, stderr, completionUsage); code >= 0 {
		return code
	}
	if shell == "" {
		return fail(stderr, exitUsage, errors.New("completion: give a shell: anyhook completion bash or anyhook completion zsh"))
	}
	cmds, err := commandFlags(ctx)
	if err != nil {
		return fail(stderr, exitFail, fmt.Errorf("completion: %w", err))
	}
	switch shell {
	case "bash":
		io.WriteString(stdout, bashCompletion(cmds))
	case "zsh":
		io.WriteString(stdout, zshCompletion(cmds))
	default:
		msg := fmt.Sprintf("completion: unknown shell %q", shell)
		if s := cli.Suggest(shell, subcommands["completion"]); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return fail(stderr, exitUsage, errors.New(msg+"; the shells are bash and zsh"))
	}
	return exitOK
}

// cmdFlags is a command as typed after anyhook ("serve", "log verify")
// and its flags.
type cmdFlags struct {
	words []string
	does  string
	flags []flagInfo
}

func (c cmdFlags) name() string { return strings.Join(c.words, " ") }

type flagInfo struct {
	name   string   // without dashes
	arg    string   // FILE, DURATION, …; "" for a boolean flag
	does   string   // what the help says it does
	values []string // its fixed set of values, when the help lists them (sha1|sha256)
}

var (
	// helpFlag is a flag's line in the "flags:" part of a command's help
	// (cli.Usage).
	helpFlag = regexp.MustCompile(`^  --([A-Za-z0-9][-A-Za-z0-9_.]*)(?: ([A-Z][-A-Z0-9_]*))?\s{2,}(.*)$`)
	// helpMention is a flag written anywhere in a help of its own format
	// (send's): --name, --name ARG or --name a|b.
	helpMention = regexp.MustCompile(`--([a-z][-a-z0-9]*)(?:[ =]([A-Z][A-Z0-9_]*(?:=[A-Z]+)?\b|[a-z0-9]+(?:\|[a-z0-9]+)+))?`)
)

// helpFlags reads the flags of a command from its --help: the "flags:"
// part that cli.Usage writes, or else every --flag the text mentions.
// TestCompletionFlagsExist checks that each is a flag of the command.
func helpFlags(help string) []flagInfo {
	var flags []flagInfo
	lines := strings.Split(help, "\n")
	if i := slices.Index(lines, "flags:"); i >= 0 {
		for _, line := range lines[i+1:] {
			if m := helpFlag.FindStringSubmatch(line); m != nil {
				flags = append(flags, flagInfo{name: m[1], arg: m[2], does: m[3]})
			}
		}
		return flags
	}
	// A flag may be mentioned before the line that defines it: keep the
	// mention that shows its argument, and the text after it on a line of
	// its own.
	at := map[string]int{}
	for _, line := range lines[1:] { // not the synopsis line
		trimmed := strings.TrimSpace(line)
		for _, m := range helpMention.FindAllStringSubmatch(line, -1) {
			f := flagInfo{name: m[1], arg: m[2]}
			if strings.Contains(m[2], "|") {
				f.values = strings.Split(m[2], "|")
				f.arg = "VALUE"
			}
			if rest, ok := strings.CutPrefix(trimmed, m[0]); ok {
				f.does = strings.TrimSpace(rest)
			}
			i, seen := at[f.name]
			switch {
			case !seen:
				at[f.name] = len(flags)
				flags = append(flags, f)
			case flags[i].arg == "" && f.arg != "":
				flags[i].arg, flags[i].values = f.arg, f.values
				fallthrough
			case flags[i].does == "":
				flags[i].does = cmp.Or(flags[i].does, f.does)
			}
		}
	}
	return flags
}

// commandFlags returns every command and subcommand with its flags, read
// from the command's own --help, so that completion follows the flag
// sets as they are defined.
func commandFlags(ctx context.Context) ([]cmdFlags, error) {
	var out []cmdFlags
	for _, c := range commands {
		subs := subcommands[c.name]
		if len(subs) > 0 || c.name == "help" {
			out = append(out, cmdFlags{words: []string{c.name}, does: c.does}) // takes a command, not flags
		}
		if len(subs) == 0 && c.name != "help" {
			subs = []string{""}
		}
		for _, s := range subs {
			words := []string{c.name}
			if s != "" {
				words = append(words, s)
			}
			cf := cmdFlags{words: words, does: c.does}
			if c.name == "completion" {
				out = append(out, cf) // bash, zsh: no flags
				continue
			}
			var help, errOut bytes.Buffer
			if code := run(ctx, append(slices.Clone(words), "--help"), &help, &errOut); code != exitOK {
				return nil, fmt.Errorf("anyhook %s --help: exit %d: %s", cf.name(), code, errOut.String())
			}
			cf.flags = helpFlags(help.String())
			out = append(out, cf)
		}
	}
	return out, nil
}

// valuesFor is the fixed set of values of flag f, if any.
func valuesFor(f flagInfo) []string {
	if v, ok := flagValues[f.name]; ok {
		return v()
	}
	return f.values
}

// shellWord quotes s for a shell single-quoted string.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func bashCompletion(cmds []cmdFlags) string {
	var b strings.Builder
	b.WriteString(`# bash completion for anyhook. Generated by 'anyhook completion bash'; load it with
#   source <(anyhook completion bash)
_anyhook() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[1]} key=${COMP_WORDS[1]} first=2
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W ` + shellWord(strings.Join(commandNames(), " ")) + ` -- "$cur"))
        return
    fi
    case $cmd in
`)
	for _, c := range commands {
		subs := subcommands[c.name]
		if len(subs) == 0 {
			continue
		}
		fmt.Fprintf(&b, `    %s)
        if [[ $COMP_CWORD -eq 2 ]]; then
            COMPREPLY=($(compgen -W %s -- "$cur"))
            return
        fi
        key="$cmd ${COMP_WORDS[2]}" first=3 ;;
`, c.name, shellWord(strings.Join(subs, " ")))
	}
	b.WriteString(`    esac
    local flags="" valued="" files="" words=""
    case $key in
`)
	for _, c := range cmds {
		var flags, valued, files []string
		for _, f := range c.flags {
			flags = append(flags, "--"+f.name)
			if f.arg != "" {
				valued = append(valued, "--"+f.name)
			}
			if f.arg == "FILE" {
				files = append(files, "--"+f.name)
			}
		}
		var words []string
		if p, ok := positionals[c.name()]; ok {
			words = p()
		}
		if len(flags) == 0 && len(words) == 0 {
			continue
		}
		fmt.Fprintf(&b, "    %s) flags=%s valued=%s files=%s words=%s ;;\n", shellWord(c.name()),
			shellWord(strings.Join(flags, " ")), shellWord(strings.Join(valued, " ")),
			shellWord(strings.Join(files, " ")), shellWord(strings.Join(words, " ")))
	}
	b.WriteString(`    esac
    # The value of a flag (--name VALUE; -name works too): a file, one of a
    # fixed set, or anything.
    local p=${prev#-}
    p=--${p#-}
    if [[ $COMP_CWORD -gt $first && " $valued " == *" $p "* ]]; then
        case $p in
`)
	seen := map[string]bool{}
	for _, c := range cmds {
		for _, f := range c.flags {
			if v := valuesFor(f); v != nil && !seen[f.name] {
				seen[f.name] = true
				fmt.Fprintf(&b, "            --%s) COMPREPLY=($(compgen -W %s -- \"$cur\")) ;;\n", f.name, shellWord(strings.Join(v, " ")))
			}
		}
	}
	b.WriteString(`            *) if [[ " $files " == *" $p "* ]]; then
                   compopt -o filenames 2>/dev/null
                   COMPREPLY=($(compgen -f -- "$cur"))
               fi ;;
        esac
        return
    fi
    if [[ $cur == -* || -z $words ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}
complete -F _anyhook anyhook
`)
	return b.String()
}

// zshEscape makes s safe inside a single-quoted _arguments spec: no
// brackets or colons, which the spec syntax uses.
func zshEscape(s string) string {
	s = strings.NewReplacer("[", "(", "]", ")", "\\", "", ":", `\:`).Replace(s)
	if i := strings.Index(s, " (default"); i > 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 70 {
		s = string(r[:67]) + "..."
	}
	return s
}

func zshCompletion(cmds []cmdFlags) string {
	var b strings.Builder
	b.WriteString(`#compdef anyhook
# zsh completion for anyhook. Generated by 'anyhook completion zsh'; save it
# as _anyhook in a directory of $fpath, or source it after compinit.
_anyhook() {
    local -a cmds
    cmds=(
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "        %s\n", shellWord(c.name+":"+zshEscape(c.does)))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'anyhook command' cmds
        return
    fi
    local key=${words[2]}
    case $key in
`)
	for _, c := range commands {
		subs := subcommands[c.name]
		if len(subs) == 0 {
			continue
		}
		fmt.Fprintf(&b, `    %s)
        if (( CURRENT == 3 )); then
            compadd -- %s
            return
        fi
        key="$key ${words[3]}"
        shift words; (( CURRENT-- )) ;;
`, c.name, strings.Join(subs, " "))
	}
	b.WriteString(`    esac
    shift words; (( CURRENT-- ))
    case $key in
`)
	for _, c := range cmds {
		var specs []string
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + zshEscape(f.does) + "]"
			switch v := valuesFor(f); {
			case v != nil:
				spec += ":" + strings.ToLower(f.arg) + ":(" + strings.Join(v, " ") + ")"
			case f.arg == "FILE":
				spec += ":file:_files"
			case f.arg != "":
				spec += ":" + strings.ToLower(f.arg) + ": "
			}
			specs = append(specs, shellWord(spec))
		}
		if p, ok := positionals[c.name()]; ok {
			specs = append(specs, shellWord("1:"+c.words[len(c.words)-1]+":("+strings.Join(p(), " ")+")"))
		}
		if len(specs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "    %s)\n        _arguments -S \\\n            %s ;;\n", shellWord(c.name()), strings.Join(specs, " \\\n            "))
	}
	b.WriteString(`    esac
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _anyhook "$@"
else
    compdef _anyhook anyhook
fi
`)
	return b.String()
}
