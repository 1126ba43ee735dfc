package deploy

import (
	"context"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// composeEnv is what docs/deploy.md tells a newcomer to export.
var composeEnv = map[string]string{
	"ANYHOOK_ADMIN_TOKEN":   "0123456789abcdef0123456789abcdef",
	"POSTGRES_PASSWORD":     "pg-password",
	"STRIPE_WEBHOOK_SECRET": "whsec_test_secret",
}

// loadCompose loads docker-compose.yml with the Compose specification's
// own loader (compose-go, what `docker compose` uses): its JSON schema,
// interpolation, merge keys and consistency checks.
func loadCompose(t *testing.T, env map[string]string) (*types.Project, error) {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(abs, "docker-compose.yml")}},
		Environment: maps.Clone(env), // the loader adds to it
	}, func(o *loader.Options) { o.SetProjectName("anyhook", true) })
}

func TestCompose(t *testing.T) {
	t.Parallel()
	p, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	// Without the secrets in the environment, it refuses to start rather
	// than run with empty ones.
	for name := range composeEnv {
		env := map[string]string{}
		for k, v := range composeEnv {
			if k != name {
				env[k] = v
			}
		}
		if _, err := loadCompose(t, env); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without $%s: %v; want an error naming it", name, err)
		}
	}

	// docs/deploy.md tells a newcomer to export exactly these.
	doc := string(read(t, filepath.Join(root, "docs", "deploy.md")))
	for name := range composeEnv {
		if !strings.Contains(doc, "export "+name+"=") {
			t.Errorf("docs/deploy.md does not export %s before docker compose up", name)
		}
	}

	pg, ok := p.Services["postgres"]
	if !ok || pg.HealthCheck == nil || len(pg.HealthCheck.Test) == 0 {
		t.Fatalf("no postgres service with a healthcheck: %+v", pg.HealthCheck)
	}
	var gateways []types.ServiceConfig
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range p.Services {
			if !yield(n) {
				return
			}
		}
	}) {
		s := p.Services[name]
		if s.Build == nil || s.Image != "anyhook:local" {
			if strings.HasPrefix(name, "anyhook") || name == "sink" {
				t.Errorf("%s: not built from the Dockerfile as anyhook:local", name)
			}
			continue
		}
		if s.Build.Context != mustAbs(t, root) || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s: build %+v; want the repository's Dockerfile", name, s.Build)
		}
		if len(s.Command) == 0 || s.Command[0] != "sink" {
			gateways = append(gateways, s)
		} else if s.HealthCheck == nil || !s.HealthCheck.Disable {
			// The image's HEALTHCHECK runs anyhook healthcheck, which
			// reads a gateway's config: the sink has none.
			t.Errorf("%s: the image's gateway health check is not disabled", name)
		}
	}
	if len(gateways) != 2 {
		t.Fatalf("%d gateway services, want 2", len(gateways))
	}
	var keyVolume, configMount string
	for _, g := range gateways {
		if d, ok := g.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: depends_on postgres %+v; want condition service_healthy", g.Name, d)
		}
		if g.StopGracePeriod == nil || time.Duration(*g.StopGracePeriod) < 30*time.Second {
			t.Errorf("%s: stop_grace_period %v; want at least 30s (delivery.shutdown and draining)", g.Name, g.StopGracePeriod)
		}
		if len(g.Ports) != 1 || g.Ports[0].Target != 8080 || g.Ports[0].HostIP != "127.0.0.1" {
			t.Errorf("%s: ports %+v; want 8080 published on 127.0.0.1", g.Name, g.Ports)
		}
		for _, v := range g.Volumes {
			switch v.Target {
			case "/var/lib/anyhook":
				if v.Type != types.VolumeTypeVolume || (keyVolume != "" && keyVolume != v.Source) {
					t.Errorf("%s: /var/lib/anyhook from %s %s; want one named volume for both gateways (one log key)", g.Name, v.Type, v.Source)
				}
				keyVolume = v.Source
			case "/etc/anyhook/anyhook.yaml":
				if !v.ReadOnly || (configMount != "" && configMount != v.Source) {
					t.Errorf("%s: config from %s (read only %v); want the same file, read only, for both", g.Name, v.Source, v.ReadOnly)
				}
				configMount = v.Source
			}
		}
		// The secrets come from the environment, not from the file.
		for name, want := range composeEnv {
			if name == "POSTGRES_PASSWORD" {
				continue
			}
			if v := g.Environment[name]; v == nil || *v != want {
				t.Errorf("%s: $%s is %v; want it from the environment", g.Name, name, v)
			}
		}
	}
	if keyVolume == "" || configMount == "" {
		t.Fatalf("the gateways mount no state volume (%q) or no config (%q)", keyVolume, configMount)
	}

	// The gateways' config is valid with the environment they get, reads
	// every secret from it, keeps the log key in the shared volume and
	// delivers to a service of the project.
	cfg := read(t, configMount)
	env := map[string]string{}
	for k, v := range gateways[0].Environment {
		if v != nil {
			env[k] = *v
		}
	}
	out := configCheck(t, "deploy/compose/anyhook.yaml", cfg, env)
	for _, ref := range regexp.MustCompile(`\$\{([A-Z_]+)\}`).FindAllStringSubmatch(string(cfg), -1) {
		if _, ok := gateways[0].Environment[ref[1]]; !ok {
			t.Errorf("deploy/compose/anyhook.yaml reads $%s, which the gateways are not given", ref[1])
		}
	}
	if !strings.Contains(out, "key_file: /var/lib/anyhook/anyhook-log.key") {
		t.Errorf("the log key is not in the shared volume /var/lib/anyhook:\n%s", out)
	}
	if !strings.Contains(out, "database: postgres://anyhook:<redacted>@postgres:5432/anyhook") {
		t.Errorf("the gateways do not use the postgres service:\n%s", out)
	}
	if !strings.Contains(out, "url: http://sink:9000/hooks") || p.Services["sink"].Command == nil {
		t.Errorf("the destination is not the sink service:\n%s", out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
