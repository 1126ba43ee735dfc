package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exe runs the anyhook binary with args and returns its exit status,
// stdout and stderr.
func exe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatalf("anyhook %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// every command, as typed after "anyhook"
var allCommands = [][]string{
	{"serve"}, {"send"}, {"replay"}, {"backfill"}, {"sink"}, {"log"}, {"log", "verify"}, {"log", "key"}, {"log", "rotate-key"},
	{"bench"}, {"soak"}, {"backup"}, {"version"},
	{"config", "check"}, {"config", "example"}, {"healthcheck"}, {"completion"},
}

// singleDash finds a flag written -name in a help text (a negative
// duration such as -10m is not one).
var singleDash = regexp.MustCompile(`(^|[\s\[(|])-[a-zA-Z][a-zA-Z-]*`)

// Every --help and -h, and "anyhook help <command>", prints that command's
// usage on stdout and exits 0, with flags written --name.
func TestHelpForEveryCommand(t *testing.T) {
	t.Parallel()
	for _, c := range allCommands {
		name := strings.Join(c, " ")
		code, help, errOut := exe(t, append(c, "--help")...)
		if code != 0 || errOut != "" || !strings.HasPrefix(help, "usage: anyhook "+name) {
			t.Errorf("anyhook %s --help: exit %d, stdout %q, stderr %q; want 0 and its usage on stdout", name, code, help, errOut)
			continue
		}
		if m := singleDash.FindString(help); m != "" {
			t.Errorf("anyhook %s --help writes a flag with one dash (%q); help texts write --flag:\n%s", name, m, help)
		}
		if code, out, _ := exe(t, append(c, "-h")...); code != 0 || out != help {
			t.Errorf("anyhook %s -h: exit %d, stdout differs from --help", name, code)
		}
		if code, out, _ := exe(t, append([]string{"help"}, c...)...); code != 0 || out != help {
			t.Errorf("anyhook help %s: exit %d, %q; want the same as --help", name, code, out)
		}
	}
	code, out, _ := exe(t, "help")
	if code != 0 || !strings.Contains(out, "commands:") || !strings.Contains(out, "anyhook help <command>") {
		t.Errorf("anyhook help: exit %d, %q", code, out)
	}
	if _, serveHelp, _ := exe(t, "help", "serve"); serveHelp == out {
		t.Error("anyhook help serve prints the general help")
	}
	// Help about help is this help, however it is asked for (it used to
	// recurse until the stack overflowed).
	for _, args := range [][]string{{"help", "help"}, {"help", "--help"}, {"help", "-h"}, {"--help", "--help"}, {"-h", "help"}, {"help", "help", "serve"}} {
		if code, got, errOut := exe(t, args...); code != 0 || got != out || errOut != "" {
			t.Errorf("anyhook %s: exit %d, stdout %q, stderr %.200q; want exit 0 and the general help", strings.Join(args, " "), code, got, errOut)
		}
	}
}

// A bad flag is one line on stderr and exit 2; a mistyped flag or command
// gets a suggestion instead of the full usage.
func TestMistypedFlagsAndCommands(t *testing.T) {
	t.Parallel()
	for _, c := range allCommands {
		if len(c) == 1 && c[0] == "log" {
			continue // log takes a command, not flags
		}
		name := strings.Join(c, " ")
		code, out, errOut := exe(t, append(c, "--no-such-flag")...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 ||
			!strings.HasPrefix(errOut, "anyhook "+name+": unknown flag --no-such-flag") {
			t.Errorf("anyhook %s --no-such-flag: exit %d, stdout %q, stderr %q; want exit 2 and one line naming --no-such-flag", name, code, out, errOut)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--confg", "x.yaml"}, "unknown flag --confg (did you mean --config?)"},
		{[]string{"serve", "-confg", "x.yaml"}, "unknown flag --confg (did you mean --config?)"},
		{[]string{"replay", "--evnt", "x"}, "(did you mean --event?)"},
		{[]string{"send", "--provder", "stripe"}, "(did you mean --provider?)"},
		{[]string{"bench", "--event", "10"}, "(did you mean --events?)"},
		{[]string{"soak", "--duraton", "1s"}, "(did you mean --duration?)"},
		{[]string{"sink", "--lisen", ":0"}, "(did you mean --listen?)"},
		{[]string{"log", "verify", "--checkpiont", "x"}, "(did you mean --checkpoint?)"},
		{[]string{"serv"}, `unknown command "serv" (did you mean serve?)`},
		{[]string{"relpay"}, `(did you mean replay?)`},
		{[]string{"help", "sevre"}, `(did you mean serve?)`},
		{[]string{"log", "verfy"}, `(did you mean verify?)`},
		{[]string{"replay", "--since"}, "flag needs an argument: --since"},
		{[]string{"sink", "--status", "abc"}, `invalid value "abc" for flag --status`},
	}
	for _, tt := range tests {
		code, out, errOut := exe(t, tt.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("anyhook %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
}

// A mistake in the config is reported as such even when the listen
// address is in use too (it used to say only "address already in use" for
// a generic source without a signature or a malformed Stripe secret).
func TestServeConfigErrorBeforeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tt := range []struct{ config, want string }{
		{"sources:\n  orders:\n    provider: generic\n", "sources.orders.signature"},
		{"sources:\n  stripe: {provider: stripe, secrets: [sk_live_abc]}\n", "not a Stripe signing secret"},
		{"sources:\n  stripe: {provider: stripe, secrets: [" + secret + "]}\ndestinations:\n  d: {url: http://127.0.0.1:9/, sources: [stripe], signing_secret: whsec_!!}\n", "destinations.d.signing_secret"},
	} {
		cfg := writeConfig(t, t.TempDir(), "listen: "+ln.Addr().String()+"\ndatabase: sqlite:anyhook.db\n"+tt.config)
		code, _, errOut := exe(t, "serve", "--config", cfg)
		if code != 2 || !strings.Contains(errOut, tt.want) || strings.Contains(errOut, "address already in use") {
			t.Errorf("serve with %q on a busy address: exit %d, stderr %q; want 2 naming %s", tt.config, code, errOut, tt.want)
		}
	}
}

// A listen address in use fails before the database is opened: nothing is
// created or migrated, and the one-line error names listen.
func TestServeAddressInUseTouchesNoDatabase(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: "+ln.Addr().String()+"\ndatabase: sqlite:anyhook.db\nsources:\n  stripe: {provider: stripe, secrets: ["+secret+"]}\n")
	code, out, errOut := exe(t, "serve", "--config", cfg)
	if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "anyhook.yaml:1: listen: ") || !strings.Contains(errOut, "address already in use") {
		t.Errorf("serve on a port in use: exit %d, stdout %q, stderr %q; want exit 2 and one line naming listen", code, out, errOut)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "anyhook.yaml" {
			t.Errorf("serve on a port in use created %s", e.Name())
		}
	}
}

// The files that hold webhook bodies — the SQLite database, its -wal and
// -shm files, and backups — are created 0600 whatever the umask.
func TestDatabaseAndBackupFilesArePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, dest := sqliteGateway(t, dir)
	// umask 0 would leave files 0666 or 0644 unless the code sets 0600.
	umask0 := func(args ...string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", `umask 0; exec "$0" "$@"`, binary}, args...)...)
	}
	p, err := startCmd(t, umask0("serve", "--config", cfg, "--log-level", "warn"))
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := sendEvent(p.url, "evt_private"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	dest.Next(t)
	out, err := umask0("backup", "--config", cfg, "--out", filepath.Join(dir, "backup.db")).CombinedOutput()
	if err != nil {
		t.Fatalf("backup: %v: %s", err, out)
	}
	for _, name := range []string{"anyhook.db", "anyhook.db-wal", "anyhook.db-shm", "anyhook-log.key", "backup.db"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", name, mode)
		}
	}
}

// sqlite::memory: lives inside its serve process: the commands that open
// the database on their own refuse it instead of reading an empty one.
func TestInMemoryDatabaseRefusedOutsideServe(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), "database: \"sqlite::memory:\"\nsources:\n  stripe: {provider: stripe, secrets: ["+secret+"]}\n")
	if code, _, errOut := exe(t, "log", "key", "--config", cfg); code != 0 { // creates the key log verify needs
		t.Fatalf("log key: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{
		{"replay", "--config", cfg, "--status", "dead"},
		{"log", "verify", "--config", cfg},
		{"backup", "--config", cfg, "--out", filepath.Join(t.TempDir(), "b.db")},
	} {
		code, _, errOut := exe(t, args...)
		if code != 2 || !strings.Contains(errOut, "anyhook.yaml:1: database: sqlite::memory: lives only inside its anyhook serve process") {
			t.Errorf("anyhook %s: exit %d, %q; want 2 naming the database", strings.Join(args[:2], " "), code, errOut)
		}
	}
}
