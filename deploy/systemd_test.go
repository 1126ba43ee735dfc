package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const unit = "systemd/anyhook.service"

// systemdRoot lays out a root for systemd-analyze --root: the system's
// unit directory (for the targets the unit names), the unit, and anyhook
// where ExecStart expects it.
func systemdRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		msg := "systemd-analyze is not installed (scripts/tools.sh installs systemd): the unit is not verified"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	for _, d := range []string{"usr/lib/systemd", "etc/systemd/system", "usr/local/bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", filepath.Join(dir, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copying the system's units: %v: %s", err, out)
	}
	exec := regexp.MustCompile(`(?m)^ExecStart=(\S+) `).FindSubmatch(read(t, unit))
	if exec == nil || string(exec[1]) != "/usr/local/bin/anyhook" {
		t.Fatalf("ExecStart=%s, want /usr/local/bin/anyhook (where docs/deploy.md installs it)", exec)
	}
	for src, dst := range map[string]string{anyhook: "usr/local/bin/anyhook", unit: "etc/systemd/system/anyhook.service"} {
		mode := os.FileMode(0o644)
		if src == anyhook {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, dst), read(t, src), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// systemd-analyze verify finds nothing to say about the unit (an unknown
// or misspelt directive is a warning, so any output fails), and
// systemd-analyze security rates its exposure at most 2.0 of 10.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	dir := systemdRoot(t)
	var out bytes.Buffer
	cmd := exec.Command("systemd-analyze", "verify", "--root="+dir, "anyhook.service")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out.String())
	}
	b, err := exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=20", "--no-pager", "--root="+dir, "anyhook.service").CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for anyhook.service: (\S+)`).FindSubmatch(b)
	if err != nil || m == nil {
		t.Errorf("systemd-analyze security: %v (the threshold is 2.0)\n%s", err, b)
	} else {
		t.Logf("systemd-analyze security: exposure %s", m[1])
	}

	text := string(read(t, unit))
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=anyhook", "ProtectSystem=strict", "NoNewPrivileges=yes", "RestartPreventExitStatus=2"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(text) {
			t.Errorf("%s lacks %s", unit, want)
		}
	}
}

// The unit's config is valid once its credentials are in place, and
// every ${file:/run/credentials/…} it reads is a LoadCredential= of the
// unit.
func TestSystemdConfig(t *testing.T) {
	t.Parallel()
	text := string(read(t, unit))
	cfg := string(read(t, "systemd/anyhook.yaml"))
	const creds = "/run/credentials/anyhook.service/"
	dir := t.TempDir()
	refs := regexp.MustCompile(`\$\{file:`+regexp.QuoteMeta(creds)+`([^}]+)\}`).FindAllStringSubmatch(cfg, -1)
	if len(refs) == 0 {
		t.Fatal("systemd/anyhook.yaml reads no credentials: where does its admin_token come from?")
	}
	for _, ref := range refs {
		if !regexp.MustCompile(`(?m)^LoadCredential=` + regexp.QuoteMeta(ref[1]) + `:/etc/anyhook/\S+$`).MatchString(text) {
			t.Errorf("systemd/anyhook.yaml reads the credential %s, which %s does not load", ref[1], unit)
		}
		os.WriteFile(filepath.Join(dir, ref[1]), []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n"), 0o600)
	}
	out := configCheck(t, "systemd/anyhook.yaml", []byte(strings.ReplaceAll(cfg, creds, dir+"/")), nil)
	state := regexp.MustCompile(`(?m)^StateDirectory=(\S+)$`).FindStringSubmatch(text)
	for _, key := range []string{"database: sqlite:", "key_file: "} {
		if state == nil || !strings.Contains(out, key+"/var/lib/"+state[1]+"/") {
			t.Errorf("systemd/anyhook.yaml: %s is not in the StateDirectory:\n%s", key, out)
		}
	}
}
