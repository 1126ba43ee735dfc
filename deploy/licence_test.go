package deploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// apacheSHA256 is the SHA-256 of the Apache License 2.0 as published
// (https://www.apache.org/licenses/LICENSE-2.0.txt, also Debian's
// /usr/share/common-licenses/Apache-2.0).
const apacheSHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// LICENSE is the Apache License 2.0 word for word, with the appendix's
// copyright line filled in; README names it.
func TestLicense(t *testing.T) {
	t.Parallel()
	text := string(read(t, filepath.Join(root, "LICENSE")))
	const ours, placeholder = "   Copyright 2026 The AnyHook Authors\n", "   Copyright [yyyy] [name of copyright owner]\n"
	if strings.Count(text, ours) != 1 {
		t.Fatalf("LICENSE lacks the copyright line %q", ours)
	}
	sum := sha256.Sum256([]byte(strings.Replace(text, ours, placeholder, 1)))
	if got := hex.EncodeToString(sum[:]); got != apacheSHA256 {
		t.Errorf("LICENSE, but for its copyright line, is not the Apache License 2.0 (SHA-256 %s)", got)
	}
	readme := string(read(t, filepath.Join(root, "README.md")))
	if !strings.Contains(readme, "[Apache License 2.0](LICENSE)") {
		t.Error("README.md does not name the licence ([Apache License 2.0](LICENSE))")
	}
}

// NOTICE carries the NOTICE file of every module compiled into anyhook,
// on every release platform, that has one (Apache License 2.0, section
// 4(d)); and every such module has a licence file (scripts/licenses.sh
// would fail).
func TestNotice(t *testing.T) {
	t.Parallel()
	notice := read(t, filepath.Join(root, "NOTICE"))
	seen := map[string]bool{}
	for _, target := range releaseTargets {
		goos, goarch, _ := strings.Cut(target, "/")
		cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Dir}}{{end}}{{end}}", "./cmd/anyhook")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v", target, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, dir, _ := strings.Cut(line, " ")
			if seen[path] {
				continue
			}
			seen[path] = true
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			licensed := false
			for _, e := range entries {
				name := strings.ToUpper(e.Name())
				if strings.HasPrefix(name, "LICENSE") || strings.HasPrefix(name, "LICENCE") || strings.HasPrefix(name, "COPYING") {
					licensed = true
				}
				if strings.HasPrefix(name, "NOTICE") {
					n := bytes.TrimSpace(read(t, filepath.Join(dir, e.Name())))
					if !bytes.Contains(notice, n) {
						t.Errorf("NOTICE lacks the NOTICE of %s (%s): add it", path, e.Name())
					}
				}
			}
			if !licensed {
				t.Errorf("%s (%s) has no licence file", path, target)
			}
		}
	}
}
