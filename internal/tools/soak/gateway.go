package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// gateway is one `anyhook serve` process slot: started, killed with
// SIGKILL, restarted. Its stderr goes to gateway-N.log in the work
// directory, one section per run.
type gateway struct {
	n      int
	binary string
	cfg    string
	dir    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	runs int
}

// start runs the process and waits until it listens.
func (g *gateway) start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd != nil {
		return nil
	}
	g.runs++
	logf, err := os.OpenFile(filepath.Join(g.dir, fmt.Sprintf("gateway-%d.log", g.n)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== run %d at %s\n", g.runs, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(g.binary, "serve", "--config", g.cfg, "--log-level", "warn")
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start gateway %d: %w", g.n, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case g.url = <-addr:
		g.cmd, g.done = cmd, done
		return nil
	case <-done:
		return fmt.Errorf("gateway %d exited before listening (see %s)", g.n, logf.Name())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("gateway %d did not listen within a minute", g.n)
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
}

// addr is the gateway's base URL, "" while it is down.
func (g *gateway) addr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return ""
	}
	return g.url
}

func (g *gateway) running() bool { return g.addr() != "" }

// kill sends SIGKILL and waits for the process to be gone.
func (g *gateway) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGKILL)
	<-g.done
	g.cmd = nil
}

// stop sends SIGTERM and waits (SIGKILL after a minute).
func (g *gateway) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(time.Minute):
		g.cmd.Process.Signal(syscall.SIGKILL)
		<-g.done
	}
	g.cmd = nil
}

func (g *gateway) dumpLog(w io.Writer) {
	b, err := os.ReadFile(filepath.Join(g.dir, fmt.Sprintf("gateway-%d.log", g.n)))
	if err != nil || len(b) == 0 {
		return
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	fmt.Fprintf(w, "--- gateway %d log (tail)\n%s\n", g.n, b)
}
