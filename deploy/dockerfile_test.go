package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerui"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// No Docker engine runs where the tests do, so the Dockerfile is checked
// with BuildKit's own front end, in process: its parser, its linter (the
// rules of `docker build --check`) and the conversion to a build graph;
// then with rules of ours; and its build step is run here as the build
// stage would run it.

// offlineImages answers BuildKit's questions about base images without a
// registry: every image is an empty linux one.
type offlineImages struct{}

func (offlineImages) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	p := ocispecs.Platform{OS: "linux", Architecture: "amd64"}
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		p = *opt.ImageOpt.Platform
	}
	cfg, err := json.Marshal(ocispecs.Image{Platform: p, Config: ocispecs.ImageConfig{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}})
	return ref, digest.FromBytes(cfg), cfg, err
}

func TestDockerfileLint(t *testing.T) {
	t.Parallel()
	dt := read(t, filepath.Join(root, "Dockerfile"))
	src := llb.Local("dockerfile")
	def, err := src.Marshal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sm := llb.NewSourceMap(&src, "Dockerfile", "Dockerfile", dt)
	sm.Definition = def
	opt := dockerfile2llb.ConvertOpt{
		Config:       dockerui.Config{BuildArgs: map[string]string{"VERSION": "v1.2.3"}},
		MetaResolver: offlineImages{},
		SourceMap:    sm,
	}
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Errorf("BuildKit cannot build the Dockerfile: %s", res.Error.Message)
	}
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		t.Errorf("Dockerfile:%d: %s: %s (%s)", line, w.RuleName, w.Detail, w.URL)
	}
	// The whole build converts to a BuildKit graph for each platform the
	// releases cover.
	for _, platform := range []string{"linux/amd64", "linux/arm64"} {
		os, arch, _ := strings.Cut(platform, "/")
		opt.TargetPlatform = &ocispecs.Platform{OS: os, Architecture: arch}
		r, err := dockerfile2llb.Dockerfile2LLB(context.Background(), dt, opt)
		if err != nil {
			t.Errorf("%s: %v", platform, err)
			continue
		}
		img := r.Image
		if img.Config.User != "65532:65532" || !slices.Equal(img.Config.Entrypoint, []string{"/usr/local/bin/anyhook"}) ||
			!slices.Equal(img.Config.Cmd, []string{"serve"}) || img.Architecture != arch {
			t.Errorf("%s: image config user %q, entrypoint %q, cmd %q, arch %q", platform, img.Config.User, img.Config.Entrypoint, img.Config.Cmd, img.Architecture)
		}
		if _, ok := img.Config.Volumes["/var/lib/anyhook"]; !ok {
			t.Errorf("%s: no volume /var/lib/anyhook: %v", platform, img.Config.Volumes)
		}
		if hc := img.Config.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/usr/local/bin/anyhook", "healthcheck"}) {
			t.Errorf("%s: healthcheck %+v, want the exec form of anyhook healthcheck (no shell in the image)", platform, hc)
		}
		if !slices.Contains(img.Config.Env, "ANYHOOK_CONFIG=/etc/anyhook/anyhook.yaml") {
			t.Errorf("%s: env %q", platform, img.Config.Env)
		}
		if img.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" || img.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
			t.Errorf("%s: labels %v", platform, img.Config.Labels)
		}
	}
}

// stages parses the Dockerfile into its stages with BuildKit's parser.
func stages(t *testing.T) ([]instructions.Stage, []instructions.ArgCommand) {
	t.Helper()
	ast, err := parser.Parse(bytes.NewReader(read(t, filepath.Join(root, "Dockerfile"))))
	if err != nil {
		t.Fatal(err)
	}
	st, args, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st, args
}

// The rules: multi-stage, a final stage on distroless/static (or scratch)
// with no RUN (it has no shell), a non-root USER, a HEALTHCHECK, the
// volume, no ADD of URLs, Go as go.mod says.
func TestDockerfileRules(t *testing.T) {
	t.Parallel()
	st, args := stages(t)
	if len(st) < 2 {
		t.Fatalf("%d stages; want a build stage and a final one", len(st))
	}
	final := st[len(st)-1]
	if final.BaseName != "scratch" && !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") {
		t.Errorf("the final stage is FROM %s; want scratch or gcr.io/distroless/static", final.BaseName)
	}
	var user string
	var health *instructions.HealthCheckCommand
	for _, s := range st {
		for _, c := range s.Commands {
			if a, ok := c.(*instructions.AddCommand); ok {
				for _, src := range a.SourcePaths {
					if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
						t.Errorf("%s: ADD of a URL (%s): fetch in a RUN with a checksum, or COPY", s.Name, src)
					}
				}
			}
		}
	}
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.HealthCheckCommand:
			health = c
		case *instructions.RunCommand:
			t.Errorf("the final stage runs %q: it has no shell", c.CmdLine)
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("the final stage runs as %q; want a non-root USER", user)
	}
	if health == nil || health.Health.Interval == 0 || health.Health.Timeout == 0 {
		t.Errorf("the final stage's HEALTHCHECK is %+v; want one with an interval and a timeout", health)
	}

	// The Go of the build stage is the one go.mod names.
	gomod := read(t, filepath.Join(root, "go.mod"))
	want := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	var goVersion string
	for _, a := range args {
		for _, kv := range a.Args {
			if kv.Key == "GO_VERSION" && kv.Value != nil {
				goVersion = *kv.Value
			}
		}
	}
	if want == nil || goVersion != string(want[1]) {
		t.Errorf("ARG GO_VERSION=%s, go.mod says go %s", goVersion, want[1])
	}

	ignore := string(read(t, filepath.Join(root, ".dockerignore")))
	for _, p := range []string{".git", "**/*.db", "**/anyhook-log.key"} {
		if !slices.Contains(strings.Split(ignore, "\n"), p) {
			t.Errorf(".dockerignore lacks %s: it would reach the build context", p)
		}
	}
}

// The build stage's RUN, run here as BuildKit would run it (in the build
// context, /out a temporary directory): it builds a static, stamped
// binary, and writes the files the final stage copies.
func TestDockerfileBuildStep(t *testing.T) {
	t.Parallel()
	st, _ := stages(t)
	build := st[0]
	var step string
	var copies []string
	for _, c := range build.Commands {
		if r, ok := c.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), "go build") {
			step = strings.Join(r.CmdLine, " ")
		}
	}
	for _, c := range st[len(st)-1].Commands {
		if cp, ok := c.(*instructions.CopyCommand); ok && cp.From == build.Name {
			copies = append(copies, cp.SourcePaths...)
		}
	}
	if step == "" || len(copies) == 0 {
		t.Fatalf("no go build step (%q) or no COPY --from=%s (%q)", step, build.Name, copies)
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(step, "/out/", out+"/"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH=amd64", "VERSION=v1.2.3",
		"COMMIT=0123456789abcdef0123456789abcdef01234567", "DATE=2026-12-01T10:00:00Z")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the build step fails: %v\n%s", err, b)
	}
	for _, src := range copies {
		if _, err := os.Stat(strings.Replace(src, "/out/", out+"/", 1)); err != nil {
			t.Errorf("COPY --from=%s %s: %v", build.Name, src, err)
		}
	}
	for _, f := range []string{"usr/share/doc/anyhook/LICENSE", "usr/share/doc/anyhook/NOTICE", "usr/share/doc/anyhook/THIRD_PARTY_LICENSES"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the image would lack %s: %v", f, err)
		}
	}
	bin := filepath.Join(out, "usr/local/bin/anyhook")
	checkStatic(t, bin, "linux", "amd64")
	if b, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(b), "anyhook v1.2.3\ncommit:   0123456789abcdef0123456789abcdef01234567\ndate:     2026-12-01T10:00:00Z\n") {
		t.Errorf("the image's anyhook version: %v\n%s", err, b)
	}
}
