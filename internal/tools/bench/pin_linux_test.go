package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// A pinned child runs on the CPUs given, whatever this process runs on.
func TestStartPinned(t *testing.T) {
	cmd := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status")
	var out strings.Builder
	cmd.Stdout = &out
	if err := startPinned(cmd, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:")); got != "0" {
		t.Errorf("the child may run on CPUs %q, want 0", got)
	}
}
