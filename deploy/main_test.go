package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository root, where the shipped files are.
const root = ".."

// anyhook is the binary built once for the tests that run it (config
// check of the shipped configs, systemd-analyze verify).
var anyhook string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "anyhook-deploy")
	if err != nil {
		panic(err)
	}
	anyhook = filepath.Join(dir, "anyhook")
	cmd := exec.Command("go", "build", "-o", anyhook, "./cmd/anyhook")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// configCheck runs `anyhook config check` on the config text with the
// environment env (and nothing else of this process's), and fails t with
// its one-line error when the config is not valid.
func configCheck(t *testing.T, name string, config []byte, env map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "anyhook.yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(anyhook, "config", "check", "--config", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: anyhook config check: %v: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String()
}
