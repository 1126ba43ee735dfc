package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/procs"
)

// childCommand is the hidden `anyhook bench _gateway --config FILE`: the
// gateway under measurement, in a process of its own so that its CPU and
// memory are its own, apart from the load client's and the sink's. It
// runs the gateway `anyhook serve` runs (internal/gateway), prints
// "listening ADDR" on stdout, then answers one line per line the bench
// writes on its stdin:
//
//	usage                       → usage CPU_NS MAXRSS_BYTES (getrusage of this process)
//	profile FILE                → ok (a CPU profile starts)
//	profile-stop                → ok (and the profile is written)
//	trace FILE                  → ok (a runtime execution trace starts)
//	trace-stop                  → ok (and the trace is written)
//	check SOURCE PREFIX N DUPS  → ok, or fail MESSAGE (the duplicate storm's check)
//
// and stops gracefully at the end of its stdin, so that it never outlives
// the bench.
const childCommand = "_gateway"

// childMain is the gateway process's side.
func childMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("bench " + childCommand)
	cfgPath := fs.String("config", "", "")
	if err := cli.Parse(fs, args); err != nil || *cfgPath == "" {
		fmt.Fprintf(stderr, "anyhook bench %s: want --config FILE (%v)\n", childCommand, err)
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", childCommand, err)
		return 2
	}
	// As anyhook serve does.
	procs.AtLeastTwo()
	if percent, _, _ := procs.TuneGC(); percent != 0 {
		go procs.FollowHeap(ctx)
	}
	// Errors, and why requests were shed (at most once every 10 s: the
	// backlog, what was in progress, whether the bound was halved).
	log := slog.New(cli.Only(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), func(r slog.Record) bool {
		return r.Level >= slog.LevelError || r.Message == ingest.OverCapacityMessage
	}))
	g, err := gateway.New(ctx, gateway.Options{Config: cfg, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", childCommand, err)
		return 2
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		g.Stop(context.Background())
		fmt.Fprintf(stderr, "anyhook bench %s: %v\n", childCommand, err)
		return 2
	}
	g.Start(ctx, ln)
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())

	answerCommands(stdin, stdout, func(cmd, arg string) (string, bool) {
		if cmd != "check" {
			return "", false
		}
		f := strings.Fields(arg)
		var n, dups int
		var err error
		random := len(f) == 5 && f[4] == "random"
		if len(f) == 4 || random {
			n, err = strconv.Atoi(f[2])
			if err == nil {
				dups, err = strconv.Atoi(f[3])
			}
		}
		if len(f) != 4 && !random || err != nil {
			return "fail want check SOURCE PREFIX N DUPS [random]", true
		}
		if msg := checkOnce(ctx, g.Store(), f[0], f[1], n, dups, random); msg != "" {
			return "fail " + msg, true
		}
		return "ok", true
	})
	return stopChild(ctx, stderr, childCommand, g.Stop)
}

// stopChild stops a child process's server, within 30 s, once the bench
// closed its stdin; it returns the process's exit code.
func stopChild(ctx context.Context, stderr io.Writer, command string, stop func(context.Context) error) int {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := stop(sctx); err != nil {
		fmt.Fprintf(stderr, "anyhook bench %s: stop: %v\n", command, err)
		return 1
	}
	return 0
}

// answerCommands answers the bench's request lines on stdin, one line
// each on stdout, until stdin ends: the commands every child process
// knows (usage, procs, profile, trace), then those of more, which says
// whether it knew the command.
func answerCommands(stdin io.Reader, stdout io.Writer, more func(cmd, arg string) (string, bool)) {
	var prof, tr *os.File
	var err error
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		answer := "ok"
		switch cmd {
		case "usage":
			cpu, rss := usage()
			answer = fmt.Sprintf("usage %d %d", cpu.Nanoseconds(), rss)
		case "procs":
			answer = fmt.Sprintf("procs %d", runtime.GOMAXPROCS(0))
		case "profile":
			if prof, err = os.Create(arg); err == nil {
				if err = pprof.StartCPUProfile(prof); err != nil {
					prof.Close()
					prof = nil
				}
			}
			if err != nil {
				answer = "fail " + err.Error()
			}
		case "profile-stop":
			if prof != nil {
				pprof.StopCPUProfile()
				if err := prof.Close(); err != nil {
					answer = "fail " + err.Error()
				}
				prof = nil
			}
		case "trace":
			if tr, err = os.Create(arg); err == nil {
				if err = trace.Start(tr); err != nil {
					tr.Close()
					tr = nil
				}
			}
			if err != nil {
				answer = "fail " + err.Error()
			}
		case "trace-stop":
			if tr != nil {
				trace.Stop()
				if err := tr.Close(); err != nil {
					answer = "fail " + err.Error()
				}
				tr = nil
			}
		default:
			if a, ok := more(cmd, arg); ok {
				answer = a
			} else {
				answer = fmt.Sprintf("fail unknown command %q", cmd)
			}
		}
		fmt.Fprintln(stdout, strings.ReplaceAll(answer, "\n", "; "))
	}
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	if tr != nil {
		trace.Stop()
		tr.Close()
	}
}

// child is the bench's handle on the gateway process.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	addr string // host:port it listens on
	name string // in errors: "the gateway process"
	done chan struct{}

	mu sync.Mutex // one request line, one answer line
}

// startChild runs `exe bench _gateway --config cfgPath` and waits until it
// listens, on the CPUs cpus (all when empty). Its stderr goes to stderr.
func startChild(ctx context.Context, exe, cfgPath string, cpus []int, stderr io.Writer) (*child, error) {
	return startProcess(ctx, exe, []string{childCommand, "--config", cfgPath}, cpus, stderr)
}

// startProcess runs `exe bench args…`, a child process that prints
// "listening ADDR" and then answers the bench's commands.
func startProcess(ctx context.Context, exe string, args []string, cpus []int, stderr io.Writer) (*child, error) {
	cmd := exec.CommandContext(ctx, exe, append([]string{"bench"}, args...)...)
	name := "the gateway process"
	if args[0] == floorCommand {
		name = "the durable floor's process"
	}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := cmd.Start
	if len(cpus) > 0 {
		start = func() error { return startPinned(cmd, cpus) }
	}
	if err := start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", name, exe, err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out), name: name, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		line, err := c.out.ReadString('\n')
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "listening "); ok && err == nil {
			addr <- a
			return
		}
		close(addr)
		cmd.Wait()
		close(c.done)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			<-c.done
			return nil, fmt.Errorf("%s exited before it listened (%s)", name, cmd.ProcessState)
		}
		c.addr = a
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("%s did not listen within a minute", name)
	}
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// call sends one request line and returns the answer without its
// command word; an answer "fail …" is an error.
func (c *child) call(line string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		return "", fmt.Errorf("%s: %s: %w", c.name, line, err)
	}
	answer, err := c.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("%s: %s: no answer (%w)", c.name, line, err)
	}
	answer = strings.TrimSpace(answer)
	if msg, ok := strings.CutPrefix(answer, "fail "); ok {
		return "", errors.New(msg)
	}
	_, rest, _ := strings.Cut(answer, " ")
	return rest, nil
}

// usage is the gateway process's CPU time (user + system) and peak RSS so
// far, from its own getrusage.
func (c *child) usage() (cpu time.Duration, maxRSS int64, err error) {
	rest, err := c.call("usage")
	if err != nil {
		return 0, 0, err
	}
	a, b, _ := strings.Cut(rest, " ")
	ns, err1 := strconv.ParseInt(a, 10, 64)
	rss, err2 := strconv.ParseInt(b, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("%s: usage %q: %w", c.name, rest, err)
	}
	return time.Duration(ns), rss, nil
}

// procs is the gateway process's GOMAXPROCS.
func (c *child) procs() (int, error) {
	rest, err := c.call("procs")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(rest)
}

// stop closes the gateway's stdin, which stops it gracefully, and waits
// for it to exit (SIGKILL after timeout).
func (c *child) stop(timeout time.Duration) error {
	c.in.Close()
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not stop within %v", c.name, timeout)
	}
	if !c.cmd.ProcessState.Success() {
		return fmt.Errorf("%s: %s", c.name, c.cmd.ProcessState)
	}
	return nil
}

// gateways are the gateway processes of a run (several share one
// PostgreSQL database); the first answers the calls that concern the
// store.
type gateways []*child

func (g gateways) call(line string) (string, error) { return g[0].call(line) }

// usage is the processes' CPU together, and the largest peak RSS.
func (g gateways) usage() (cpu time.Duration, maxRSS int64, err error) {
	for _, c := range g {
		u, r, err := c.usage()
		if err != nil {
			return 0, 0, err
		}
		cpu, maxRSS = cpu+u, max(maxRSS, r)
	}
	return cpu, maxRSS, nil
}

func (g gateways) stop(timeout time.Duration) error {
	var errs []error
	for _, c := range g {
		errs = append(errs, c.stop(timeout))
	}
	return errors.Join(errs...)
}
