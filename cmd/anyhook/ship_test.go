package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/provider"
)

// A binary stamped at link time (as scripts/release.sh and the Dockerfile
// do) reports what it was stamped with; the test binary built by TestMain
// reports a version all the same.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := exe(t, "version")
	if code != 0 || !regexp.MustCompile(`^anyhook \S+\ncommit: +\S.*\ndate: +\S+\ngo: +go1\.\S+\nplatform: +\w+/\w+\n$`).MatchString(out) {
		t.Errorf("anyhook version: exit %d, %q", code, out)
	}

	stamped := filepath.Join(t.TempDir(), "anyhook")
	const pkg = "github.com/anyhook/anyhook/internal/buildinfo"
	ldflags := fmt.Sprintf("-X %s.version=v9.8.7 -X %s.commit=0123456789abcdef0123456789abcdef01234567 -X %s.date=2026-12-01T10:00:00Z", pkg, pkg, pkg)
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", stamped, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	got, err := exec.Command(stamped, "version").Output()
	if want := "anyhook v9.8.7\ncommit:   0123456789abcdef0123456789abcdef01234567\ndate:     2026-12-01T10:00:00Z\n"; err != nil || !strings.HasPrefix(string(got), want) {
		t.Errorf("stamped anyhook version: %v, %q; want it to start %q", err, got, want)
	}
	got, err = exec.Command(stamped, "version", "--json").Output()
	var v map[string]any
	if err != nil || json.Unmarshal(got, &v) != nil || v["version"] != "v9.8.7" || v["commit"] != "0123456789abcdef0123456789abcdef01234567" ||
		v["date"] != "2026-12-01T10:00:00Z" || !strings.HasPrefix(fmt.Sprint(v["go"]), "go1.") || v["platform"] == "" {
		t.Errorf("stamped anyhook version --json: %v, %s", err, got)
	}
	// serve announces the same version.
	cfg := writeConfig(t, t.TempDir(), "listen: 127.0.0.1:0\ndatabase: \"sqlite::memory:\"\nsources:\n  stripe: {provider: stripe, secrets: ["+secret+"]}\n")
	cmd := exec.Command(stamped, "serve", "--config", cfg)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line := make([]byte, 200)
	n, _ := stdout.Read(line)
	if !strings.HasPrefix(string(line[:n]), "anyhook v9.8.7 listening on http://127.0.0.1:") {
		t.Errorf("serve says %q", line[:n])
	}
}

// healthcheck answers 0 for a running gateway, found from its config or
// --url, and 1 when nothing answers.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := "database: \"sqlite::memory:\"\nsources:\n  stripe: {provider: stripe, secrets: [" + secret + "]}\n"
	p := start(t, writeConfig(t, dir, "listen: 127.0.0.1:0\n"+cfg))
	if code, out, errOut := exe(t, "healthcheck", "--url", p.url+"/healthz"); code != 0 || !strings.HasPrefix(out, "ok: GET ") {
		t.Errorf("healthcheck --url: exit %d, %q, %q", code, out, errOut)
	}
	other := filepath.Join(t.TempDir(), "anyhook.yaml")
	if err := os.WriteFile(other, []byte("listen: "+strings.TrimPrefix(p.url, "http://")+"\n"+cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := exe(t, "healthcheck", "--config", other); code != 0 {
		t.Errorf("healthcheck --config: exit %d, %q", code, errOut)
	}
	p.kill()
	code, out, errOut := exe(t, "healthcheck", "--config", other, "--timeout", "2s")
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "anyhook: healthcheck: ") {
		t.Errorf("healthcheck of a stopped gateway: exit %d, %q, %q; want 1 and one line", code, out, errOut)
	}
	for listen, want := range map[string]string{
		"0.0.0.0:8080": "127.0.0.1:8080", ":8080": "127.0.0.1:8080", "[::]:8080": "[::1]:8080",
		"10.0.0.1:8080": "10.0.0.1:8080", "localhost:9": "localhost:9",
	} {
		if got := loopbackFor(listen); got != want {
			t.Errorf("loopbackFor(%q) = %q, want %q", listen, got, want)
		}
	}
}

// config check validates as serve would (the provider's secret form
// included) and prints the effective config without secrets.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeConfig(t, dir, "admin_token: tok-SECRET-1\nsources:\n  stripe:\n    provider: stripe\n    secrets: [whsec_SECRET-2]\n    record_only: true\n")
	code, out, errOut := exe(t, "config", "check", "--config", good)
	if code != 0 || errOut != "" || strings.Contains(out, "SECRET") ||
		!strings.Contains(out, "admin_token: <redacted>\n") || !strings.Contains(out, "listen: 127.0.0.1:8080\n") ||
		!strings.Contains(out, "key_file: anyhook-log.key # "+filepath.Join(dir, "anyhook-log.key")+" (created at the first start)") {
		t.Errorf("config check of a good file: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "anyhook-log.key")); err == nil {
		t.Error("config check created the log key")
	}

	for name, tt := range map[string]struct{ src, want string }{
		"api key for a Stripe secret": {"sources:\n  stripe:\n    provider: stripe\n    record_only: true\n    secrets: [sk_live_SECRET]\n", "anyhook.yaml:5: sources.stripe.secrets[0]: "},
		"unknown key":                 {"sources:\n  stripe:\n    provider: stripe\n    record_only: true\n    secret: [whsec_x]\n", `anyhook.yaml:5: sources.stripe.secret: unknown key (did you mean "secrets"?)`},
		"bad log key":                 {"log: {key_file: bad.key}\nsources:\n  stripe: {provider: stripe, secrets: [whsec_x], record_only: true}\n", "anyhook.yaml:1: log.key_file: "},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "bad.key"), []byte("not a key\n"), 0o600)
		code, out, errOut := exe(t, "config", "check", "--config", writeConfig(t, dir, tt.src))
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "SECRET") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", name, code, out, errOut, tt.want)
		}
	}
}

// Every provider has an example; each names its docs page and is, with
// its secret's variable set, a config that passes config check.
func TestConfigExamples(t *testing.T) {
	t.Parallel()
	for _, name := range provider.Names() {
		code, out, errOut := exe(t, "config", "example", name)
		if code != 0 || errOut != "" {
			t.Errorf("config example %s: exit %d, %q", name, code, errOut)
			continue
		}
		page := "docs/providers/" + name + ".md"
		if !strings.Contains(out, page) {
			t.Errorf("config example %s does not name %s:\n%s", name, page, out)
		}
		if _, err := os.Stat("../../" + page); err != nil {
			t.Errorf("config example %s: %v", name, err)
		}
		variable := strings.ToUpper(name) + "_WEBHOOK_SECRET"
		if !strings.Contains(out, `secrets: ["${`+variable+`}"]`) {
			t.Errorf("config example %s does not read its secret from $%s:\n%s", name, variable, out)
		}
		cfg := writeConfig(t, t.TempDir(), out)
		cmd := exec.Command(binary, "config", "check", "--config", cfg)
		cmd.Env = append(os.Environ(), variable+"=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("config example %s does not pass config check: %v\n%s\n%s", name, err, b, out)
		}
	}
	code, out, _ := exe(t, "config", "example", "--name", "payments", "stripe")
	if code != 0 || !strings.Contains(out, "\n  payments:\n") || !strings.Contains(out, "${PAYMENTS_WEBHOOK_SECRET}") || !strings.Contains(out, "/webhooks/payments") {
		t.Errorf("config example --name payments stripe: exit %d:\n%s", code, out)
	}
	for args, want := range map[string]string{
		"strpe":          `unknown provider "strpe" (did you mean stripe?)`,
		"":               "give one provider",
		"stripe github":  "give one provider",
		"stripe --nme x": "unknown flag --nme (did you mean --name?)",
	} {
		code, out, errOut := exe(t, append([]string{"config", "example"}, strings.Fields(args)...)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
			t.Errorf("config example %s: exit %d, %q, %q; want exit 2 and %q", args, code, out, errOut, want)
		}
	}
}

// The completion scripts name every command, subcommand and flag, and are
// valid bash and zsh.
func TestCompletion(t *testing.T) {
	t.Parallel()
	cmds, err := commandFlags(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, shell := range []string{"bash", "zsh"} {
		code, script, errOut := exe(t, "completion", shell)
		if code != 0 || errOut != "" {
			t.Fatalf("completion %s: exit %d, %q", shell, code, errOut)
		}
		for _, c := range commands {
			if !regexp.MustCompile(`\b` + c.name + `\b`).MatchString(script) {
				t.Errorf("the %s completion lacks the command %s", shell, c.name)
			}
			for _, s := range subcommands[c.name] {
				if !strings.Contains(script, " "+s) {
					t.Errorf("the %s completion lacks %s %s", shell, c.name, s)
				}
			}
		}
		for _, c := range cmds {
			for _, f := range c.flags {
				if !strings.Contains(script, "--"+f.name) {
					t.Errorf("the %s completion lacks %s --%s", shell, c.name(), f.name)
				}
			}
		}
		path := filepath.Join(t.TempDir(), "anyhook."+shell)
		if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(shell); err != nil {
			msg := fmt.Sprintf("%s is not installed (scripts/tools.sh installs it): the %s completion is not checked", shell, shell)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Log(msg)
			continue
		}
		if out, err := exec.Command(shell, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", shell, err, out)
		}
		if shell == "zsh" {
			// Sourced after compinit, it registers itself for anyhook.
			prog := fmt.Sprintf(`autoload -U compinit && compinit -u -d %q && source %q && [[ ${_comps[anyhook]} == _anyhook ]]`, filepath.Join(t.TempDir(), "zcompdump"), path)
			if out, err := exec.Command("zsh", "-f", "-c", prog).CombinedOutput(); err != nil {
				t.Errorf("zsh: sourcing the completion after compinit: %v\n%s", err, out)
			}
		}
	}
	// Each flag the scripts offer is one of its command's, and takes a
	// value exactly when the scripts say so: without its value it is
	// missing one; a boolean flag refuses a non-boolean.
	var checked int
	for _, c := range cmds {
		for _, f := range c.flags {
			args := append(slices.Clone(c.words), "--"+f.name)
			want := "flag needs an argument: --" + f.name
			if f.arg == "" {
				args[len(args)-1] += "=maybe"
				want = "invalid boolean value"
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), want) {
				t.Errorf("anyhook %s: exit %d, %q; want exit 2 and %q", strings.Join(args, " "), code, stderr.String(), want)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Errorf("only %d flags found: is the help format still read right?", checked)
	}
}

// bash really completes: commands, subcommands, flags, flag values.
func TestBashCompletes(t *testing.T) {
	t.Parallel()
	_, script, _ := exe(t, "completion", "bash")
	path := filepath.Join(t.TempDir(), "anyhook.bash")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string]string{
		"anyhook se":                       "send serve",
		"anyhook log ":                     "key rotate-key verify",
		"anyhook config ex":                "example",
		"anyhook config example st":        "standard stripe",
		"anyhook serve --c":                "--config",
		"anyhook serve --log-level w":      "warn",
		"anyhook send --provider gi":       "github gitlab",
		"anyhook send --algorithm sha5":    "sha512",
		"anyhook log verify --j":           "--json",
		"anyhook replay --dry-run --js":    "--json",
		"anyhook help rep":                 "replay",
		"anyhook completion z":             "zsh",
		"anyhook healthcheck --url http:x": "",
	} {
		words := strings.Split(line, " ")
		prog := fmt.Sprintf(`source %q; COMP_WORDS=(%s); COMP_CWORD=%d; _anyhook; printf '%%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '`,
			path, strings.Join(quoteAll(words), " "), len(words)-1)
		out, err := exec.Command("bash", "-c", prog).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("%q<TAB>: %v, %q; want %q", line, err, got, want)
		}
	}
}

func quoteAll(words []string) []string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellWord(w)
	}
	return q
}

// README's commands table has every command.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		words := [][]string{{c.name}}
		if c.name == "config" || c.name == "log" {
			words = nil
			for _, s := range subcommands[c.name] {
				words = append(words, []string{c.name, s})
			}
		}
		for _, w := range words {
			if !regexp.MustCompile("(?m)^\\| .*`anyhook " + strings.Join(w, " ") + "[ `]").Match(readme) {
				t.Errorf("README's commands table lacks anyhook %s", strings.Join(w, " "))
			}
		}
	}
}
